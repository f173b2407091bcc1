"""The broker: one node's addresses, queues and messages, and what protocols may do to them.

Theory of operation
-------------------
Everything here runs on the Trio event loop and is synchronous except waiting for the
journal. An operation that changes durable state is split in two:

1. *prepare* (synchronous, on the loop): validate, decide, update the in-memory model that
   later operations validate against, and queue the journal records (never blocking);
2. *complete* (after the journal says the records are durable): make the effect visible,
   e.g. put a sent message on its queues so consumers can get it.

Each operation returns a :class:`~artemis_py.broker.pending.Pending`, which its caller
settles (``await pending.settled()``: wait for the journal, then complete). A protocol
connection keeps its pendings in a FIFO and settles them in order, so a pipelining producer
gets group commit while its messages still reach queues in the order it sent them, and a
receipt is sent only after the records it covers are durable. Acknowledgements take effect
in memory at once and are durable when their pending settles.

Other packages (protocol sessions, the cluster) use the broker through the methods of
:class:`Broker` only; the post office and persistence behind it are the broker's own.

:class:`Broker` is the face of parts that each hold one concept: addresses and queues
(:mod:`artemis_py.broker.addresses`), routing, sending and transactions
(:mod:`artemis_py.broker.sending`, with the write order of :mod:`artemis_py.broker.write_order`;
on a node with diverts :mod:`artemis_py.broker.diverting`),
acknowledging, cancelling and expiring (:mod:`artemis_py.broker.acknowledging`, with the
periodic scan of :mod:`artemis_py.broker.expiry_reaper`; auto-deletion's is
:mod:`artemis_py.broker.address_queue_reaper`) and reading by
offset (:mod:`artemis_py.broker.offset_reading`). Its operations are those parts' methods, bound
once when the broker is made, so a send costs no call more than the part's own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from artemis_py.broker.acknowledging import Acknowledgements
from artemis_py.broker.address_queue_reaper import AddressQueueReaper
from artemis_py.broker.addresses import Addresses
from artemis_py.broker.adopted_streams import recovered_ref
from artemis_py.broker.diverting import DivertingSending, compile_diverts
from artemis_py.broker.duplicate_cache import ClientDuplicates, DuplicateIDCache
from artemis_py.broker.expiry_reaper import ExpiryReaper
from artemis_py.broker.grouped_sending import GroupedSending
from artemis_py.broker.journal_recovery import RecoveredState
from artemis_py.broker.message import Message, now_ms
from artemis_py.broker.offset_reading import OffsetReading
from artemis_py.broker.paging import PagingManager
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.broker.routing import Address, BindingListener, PostOffice, RemoteQueueBinding
from artemis_py.broker.routing.grouping import GroupingHandler, GroupRouter
from artemis_py.broker.scheduling import Scheduler
from artemis_py.broker.sending import Forwarded, Sending, Transaction
from artemis_py.config import AddressSettings, BrokerConfig, MessageLoadBalancing
from artemis_py.exceptions import BrokerError

# What other packages import from here (the names moved to the parts they belong to).
__all__ = ["Broker", "BrokerError", "Forwarded", "Transaction", "now_ms"]

log = logging.getLogger("artemis_py.broker")


class Broker:
    """The server core of one node (Artemis's ActiveMQServer, minus the protocols)."""

    def __init__(
        self,
        config: BrokerConfig,
        persistence: Persistence,
        paging: PagingManager | None = None,
    ) -> None:
        self.config = config
        self.persistence = persistence
        # Without a paging directory (persistence off) nothing pages; limits still apply.
        self.paging = paging = paging or PagingManager(config, persistence, None)
        self.post_office = post_office = PostOffice(
            config.wildcards if config.wildcard_routing_enabled else None
        )
        self.node_id = persistence.node_id
        self.duplicates = DuplicateIDCache(config.id_cache_size, persist=config.persist_id_cache)
        self.client_duplicates = ClientDuplicates.of(config, persistence)  # clients' ids
        self._recovered: RecoveredState | None = None  # kept by recover() for recover_paging()
        self.recovered_group_bindings: list[tuple[int, str, str]] = []
        self.acks = acks = Acknowledgements(
            persistence, paging, post_office, config.address_settings_for
        )
        acks.max_redelivery_records = config.max_redelivery_records
        self.offsets = OffsetReading(self.node_id, persistence, paging, acks)
        # Expired messages out of queues nobody consumes from (run by the node).
        self.expiry_reaper = ExpiryReaper(
            post_office, acks, paging, config.message_expiry_scan_period
        )
        # Held references (scheduled delivery, redelivery delays); node.py runs its task.
        self.scheduler = Scheduler()
        self.addresses = addresses = Addresses(
            config, persistence, post_office, paging, acks, self.offsets, self.scheduler
        )
        # Unused auto-created queues and addresses deleted (run by the node).
        self.address_queue_reaper = AddressQueueReaper(addresses, config.address_queue_scan_period)
        parts = (persistence, paging, post_office, addresses, self.duplicates, self.node_id)
        # Without diverts, sends pay nothing for them (broker/diverting.py).
        self.sending = sending = (
            DivertingSending(compile_diverts(config), *parts) if config.diverts else Sending(*parts)
        )
        # Dead letters and expired ones, and their auto-created queues.
        acks.send_moves_with(sending.route, sending.send, addresses.create_resource_queue)
        # The operations: the parts' own methods (no call in between).
        self.resolve_address = addresses.resolve_address
        self.create_queue = addresses.create_queue
        self.delete_queue = addresses.delete_queue
        self.queue_lost_consumer = addresses.queue_lost_consumer
        self.route = sending.route
        self.send = sending.send
        self.receive_forwarded = sending.receive_forwarded
        self.resolve = sending.resolve
        self.redistribute = sending.redistribute
        self.commit = sending.commit
        self.acknowledge = acks.acknowledge
        self.acknowledge_delivered = acks.acknowledge_delivered
        self.cancel = acks.cancel
        self.discard = acks.discard
        self.next_id = persistence.next_id  # fresh ids, never reused, even after a restart
        # The ids of the other live members of this node's cluster (set by the node).
        self.cluster_members: Callable[[], list[str]] = list
        # Live members' STOMP URLs and who to tell when they change (docs/stomp.md Topology).
        self.client_topology: Callable[[], list[str]] = list
        self.topology_listeners: set[Callable[[], None]] = set()

    # -- lookups and the cluster's hooks -------------------------------------------------

    def queue(self, name: str) -> Queue | None:
        return self.post_office.queue(name)

    def queues(self) -> list[Queue]:
        """Every queue of the node (a snapshot: safe to change queues while iterating)."""
        return list(self.post_office.queues.values())

    def address_settings(self, address: str) -> AddressSettings:
        return self.config.address_settings_for(address)

    def new_message(self, address: str, **fields: object) -> Message:
        return Message(self.persistence.next_id(), address, **fields)  # type: ignore[arg-type]

    def add_binding_listener(self, listener: BindingListener) -> None:
        """Tell ``listener`` of every local queue and consumer change from now on."""
        self.post_office.listeners.append(listener)

    def remove_binding_listener(self, listener: BindingListener) -> None:
        self.post_office.listeners.remove(listener)

    def balance_with(self, policy: Callable[[str], MessageLoadBalancing | None]) -> None:
        """Route addresses with remote bindings by ``policy(address)`` (None: local only)."""
        self.post_office.load_balancing = policy

    def group_with(self, handler: GroupingHandler) -> None:
        """Route grouped messages by ``handler``'s decisions (clustered grouping): a
        client's send waits for a decision another node makes (:mod:`.grouped_sending`)."""
        router = GroupRouter(handler, self.node_id)
        self.post_office.grouping = router
        grouped = GroupedSending(self.sending, router)
        self.route, self.send, self.commit = grouped.route, grouped.send, grouped.commit

    def remote_binding(self, name: str) -> RemoteQueueBinding | None:
        return self.post_office.remote_binding(name)

    def remote_bindings(self, address: str) -> Sequence[RemoteQueueBinding]:
        """The bindings of queues on other nodes for ``address``, in the order learned."""
        return self.post_office.remote.get(address, ())

    def add_remote_binding(self, binding: RemoteQueueBinding) -> None:
        self.post_office.add_remote_binding(binding)

    def remove_remote_binding(self, binding: RemoteQueueBinding) -> None:
        self.post_office.remove_remote_binding(binding)

    # -- recovery ----------------------------------------------------------------------

    def recover(self) -> None:
        """Rebuild addresses, queues and messages from the journals, then the config."""
        state = self.persistence.recover()
        for a in state.addresses:
            self.post_office.add_address(
                Address(a.id, a.name, set(a.routing_types), auto_created=a.auto_created)
            )
        for spec in state.queues:
            self.post_office.add_queue(self.addresses.new_queue(spec))
        restored = 0
        for queue_id, refs in state.messages_by_queue.items():
            queue = next((q for q in self.post_office.queues.values() if q.id == queue_id), None)
            if queue is None:
                continue
            queue.add_many(
                (recovered_ref(queue, *ref, self.node_id) for ref in refs),
                state.held_until.get(queue_id),  # held for a redelivery delay: until then
            )
            restored += len(refs)
        self._recovered = state
        # A LOCAL grouping handler's decisions, for the cluster's grouping to take up.
        self.recovered_group_bindings = state.group_bindings
        evicted = self.duplicates.recover(state.duplicate_ids)
        evicted += self.client_duplicates.recover(state.client_duplicate_ids)
        evicted += self.offsets.recover(state.offset_marks, self.post_office.queues.values())
        if evicted:
            self.persistence.remove_records(evicted)
        self.addresses.deploy_configured()
        log.info(
            "recovered %d address(es), %d queue(s), %d message reference(s)",
            len(self.post_office.addresses),
            len(self.post_office.queues),
            restored,
        )

    async def recover_paging(self) -> None:
        """Rebuild the page cursors (after :meth:`recover`; reads the page stores)."""
        state, self._recovered = self._recovered, None
        if state is not None:
            await self.paging.recover(state, self.post_office.queues.values())
