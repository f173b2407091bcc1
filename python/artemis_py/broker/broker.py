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

The order in which a send's files, page records and journal records are written lives in
:mod:`artemis_py.broker.write_order`; what acknowledging, cancelling and expiring do, in
:mod:`artemis_py.broker.acknowledging`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from artemis_py.broker.acknowledging import (
    Acknowledgements,
    ack_record,
    by_queue,
    page_ref_acked,
    release,
)
from artemis_py.broker.duplicate_cache import Claim, ClientDuplicates, DuplicateIDCache
from artemis_py.broker.filter import Filter
from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.offsets import OffsetReading
from artemis_py.broker.paging import Full, PagingManager, Placement
from artemis_py.broker.pending import Pending
from artemis_py.broker.persistence import Persistence, RecoveredState, page_tx_op
from artemis_py.broker.queue import Queue, QueueSpec
from artemis_py.broker.routing import (
    Address,
    BindingListener,
    Destination,
    PostOffice,
    RemoteQueueBinding,
    forwarding,
    tag,
)
from artemis_py.broker.streams import may_be_stamped, recovered_ref
from artemis_py.broker.write_order import Records, after, file_first, journal_after, page
from artemis_py.config import AddressSettings, BrokerConfig, MessageLoadBalancing, RoutingType
from artemis_py.exceptions import ArtemisError, StorageError

log = logging.getLogger("artemis_py.broker")


class BrokerError(ArtemisError):
    """An operation a client asked for cannot be done (the text is for the client)."""


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class Transaction:
    """Sends and acknowledgements that take effect together at commit."""

    sends: list[tuple[Message, list[Queue]]] = field(default_factory=list)
    acks: list[MessageReference] = field(default_factory=list)
    claim: Claim | None = None  # the sends' duplicate ids (:mod:`.duplicate_cache`)
    placements: list[Placement] = field(default_factory=list)  # of sends placed already


#: A forwarded message: the message, the names of the bindings here it is for, its duplicate
#: id, and its encoding as received (None: not known).
Forwarded = tuple[Message, Sequence[str], bytes, "bytes | None"]


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
        self.paging = paging or PagingManager(config, persistence, None)
        self.post_office = PostOffice()
        self.node_id = persistence.node_id
        self.duplicates = DuplicateIDCache(config.id_cache_size, persist=config.persist_id_cache)
        self.client_duplicates = ClientDuplicates.of(config, persistence)  # clients' ids
        self._recovered: RecoveredState | None = None  # kept by recover() for recover_paging()
        self.acks = Acknowledgements(self)
        self.offsets = OffsetReading(self)
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

    def next_id(self) -> int:
        """A fresh id (messages, queues, transactions), never reused, even after a restart."""
        return self.persistence.next_id()

    def add_binding_listener(self, listener: BindingListener) -> None:
        """Tell ``listener`` of every local queue and consumer change from now on."""
        self.post_office.listeners.append(listener)

    def remove_binding_listener(self, listener: BindingListener) -> None:
        self.post_office.listeners.remove(listener)

    def balance_with(self, policy: Callable[[str], MessageLoadBalancing | None]) -> None:
        """Route addresses with remote bindings by ``policy(address)`` (None: local only)."""
        self.post_office.load_balancing = policy

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
        for address in state.addresses:
            self.post_office.add_address(address)
        for spec in state.queues:
            self.post_office.add_queue(self._new_queue_from_spec(spec))
        restored = 0
        for queue_id, refs in state.messages_by_queue.items():
            queue = next((q for q in self.post_office.queues.values() if q.id == queue_id), None)
            if queue is None:
                continue
            queue.add_many(recovered_ref(queue, *ref, self.node_id) for ref in refs)
            restored += len(refs)
        self._recovered = state
        evicted = self.duplicates.recover(state.duplicate_ids)
        evicted += self.client_duplicates.recover(state.client_duplicate_ids)
        evicted += self.offsets.recover(state.offset_marks, self.post_office.queues.values())
        if evicted:
            self.persistence.remove_records(evicted)
        self._deploy_configured_addresses()
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

    def _deploy_configured_addresses(self) -> None:
        for address_config in self.config.addresses:
            address = self.post_office.address(address_config.name)
            routing_types = set(address_config.routing_types)
            if address is None:
                self._create_address(address_config.name, routing_types, auto_created=False)
            elif not routing_types <= address.routing_types:
                address.routing_types |= routing_types
                self.persistence.store_address(address)
            for qc in address_config.queues:
                if self.post_office.queue(qc.name) is None:
                    self.create_queue(
                        qc.name,
                        address_config.name,
                        qc.routing_type,
                        filter_text=qc.filter,
                        durable=qc.durable,
                        max_consumers=qc.max_consumers,
                        purge_on_no_consumers=qc.purge_on_no_consumers,
                    )

    # -- addresses and queues ----------------------------------------------------------

    def address_settings(self, address: str) -> AddressSettings:
        return self.config.address_settings_for(address)

    def resolve_address(
        self, name: str, routing_type: RoutingType | None, *, for_send: bool
    ) -> Address:
        """The address called ``name``, auto-created when its settings allow."""
        address = self.post_office.address(name)
        settings = self.address_settings(name)
        if address is None:
            if not settings.auto_create_addresses:
                raise BrokerError(f"address {name} does not exist and auto-create is disabled")
            if routing_type is None:
                routing_type = (
                    settings.default_address_routing_type
                    if for_send
                    else settings.default_queue_routing_type
                )
            return self._create_address(name, {routing_type}, auto_created=True)
        if routing_type is not None and routing_type not in address.routing_types:
            if not settings.auto_create_addresses:
                raise BrokerError(
                    f"address {name} does not support routing type {routing_type.name}"
                )
            address.routing_types.add(routing_type)
            self.persistence.store_address(address)
        return address

    def _create_address(
        self, name: str, routing_types: set[RoutingType], *, auto_created: bool
    ) -> Address:
        address = Address(
            self.persistence.next_id(), name, set(routing_types), auto_created=auto_created
        )
        self.post_office.add_address(address)
        self.persistence.store_address(address)
        return address

    def create_queue(
        self,
        name: str,
        address_name: str,
        routing_type: RoutingType,
        *,
        filter_text: str | None = None,
        durable: bool = True,
        temporary: bool = False,
        max_consumers: int | None = None,
        purge_on_no_consumers: bool | None = None,
        auto_created: bool = False,
    ) -> Queue:
        if self.post_office.queue(name) is not None:
            raise BrokerError(f"queue {name} already exists")
        settings = self.address_settings(address_name)
        if self.post_office.address(address_name) is None:
            self.resolve_address(address_name, routing_type, for_send=False)
        spec = QueueSpec(
            queue_id=self.persistence.next_id(),
            name=name,
            address=address_name,
            routing_type=routing_type,
            filter=filter_text or None,
            durable=durable and not temporary,
            temporary=temporary,
            max_consumers=(
                settings.default_max_consumers if max_consumers is None else max_consumers
            ),
            purge_on_no_consumers=(
                settings.default_purge_on_no_consumers
                if purge_on_no_consumers is None
                else purge_on_no_consumers
            ),
            auto_created=auto_created,
        )
        queue = self._new_queue_from_spec(spec)
        self.post_office.add_queue(queue)
        if queue.durable:
            self.persistence.store_queue(spec)
        return queue

    def _new_queue_from_spec(self, spec: QueueSpec) -> Queue:
        return Queue(
            spec.queue_id,
            spec.name,
            spec.address,
            spec.routing_type,
            filter=Filter.parse(spec.filter) if spec.filter else None,
            durable=spec.durable,
            temporary=spec.temporary,
            max_consumers=spec.max_consumers,
            purge_on_no_consumers=spec.purge_on_no_consumers,
            auto_created=spec.auto_created,
            on_expired=self.acks.expire,
            clock_ms=now_ms,
        )

    def delete_queue(self, queue: Queue) -> Pending:
        """Remove a queue and every message reference it holds."""
        pending = Pending()
        self.post_office.remove_queue(queue)
        refs = queue.remove_all()
        if refs:
            queue.delivering += len(refs)
            pending.tickets += self.acks.acknowledge_refs(refs)
        paging_records = self.paging.queue_removed(queue) + self.offsets.queue_removed(queue)
        if paging_records:
            pending.tickets += self.persistence.submit(paging_records)
        if queue.durable:
            pending.tickets += self.persistence.delete_queue(queue.id)
        address = self.post_office.address(queue.address)
        if (
            address is not None
            and address.auto_created
            and not address.queues
            and self.address_settings(address.name).auto_delete_addresses
        ):
            self.post_office.remove_address(address.name)
            pending.tickets += self.persistence.delete_address(address.id)
        return pending

    def queue_lost_consumer(self, queue: Queue) -> Pending | None:
        """Artemis's auto-delete and purge-on-no-consumers when a consumer leaves."""
        if queue.consumers or self.post_office.queue(queue.name) is not queue:
            return None
        if queue.temporary:
            return self.delete_queue(queue)
        settings = self.address_settings(queue.address)
        if (
            queue.auto_created
            and settings.auto_delete_queues
            and queue.message_count == 0
            and not queue.arriving  # a send routed here before the consumer left
            and queue.routing_type is RoutingType.ANYCAST
        ):
            return self.delete_queue(queue)
        if queue.purge_on_no_consumers and queue.messages:
            refs = queue.remove_all()
            queue.delivering += len(refs)
            return Pending(tickets=self.acks.acknowledge_refs(refs))
        return None

    # -- sending -----------------------------------------------------------------------

    def new_message(self, address: str, **fields: object) -> Message:
        return Message(self.persistence.next_id(), address, **fields)  # type: ignore[arg-type]

    def route(self, message: Message, queue_name: str | None = None) -> list[Queue]:
        """The queues ``message`` goes to: one named queue, or by its address's bindings."""
        if queue_name is not None:
            queue = self.post_office.queue(queue_name)
            if queue is None or queue.address != message.address:
                raise BrokerError(f"queue {message.address}::{queue_name} does not exist")
            return [queue]
        address = self.resolve_address(message.address, message.routing_type, for_send=True)
        queues, remote = self.post_office.route(address, message.routing_type, message.filter_value)
        if remote:
            # One copy per neighbour, into its store-and-forward queue, naming the bindings
            # over there that it is for.
            queues += tag(message, forwarding(remote))
        elif not queues and message.routing_type is not RoutingType.MULTICAST:
            settings = self.address_settings(address.name)
            if (
                RoutingType.ANYCAST in address.routing_types
                and settings.auto_create_queues
                and not any(q.routing_type is RoutingType.ANYCAST for q in address.queues)
            ):
                queues = [
                    self.create_queue(
                        address.name, address.name, RoutingType.ANYCAST, auto_created=True
                    )
                ]
        return queues

    def send(
        self,
        message: Message,
        queues: list[Queue],
        *,
        internal: bool = False,
        claim: Claim | None = None,
    ) -> Pending:
        """Persist ``message`` for ``queues``; it reaches them when durable.

        The address's limits decide first (:mod:`artemis_py.broker.paging`): memory, page
        files, wait for room (BLOCK: the returned pending's gate waits), a BrokerError (FAIL)
        or nothing (DROP). ``internal``: the node's own move (dead letters, expiry), which
        never waits or fails. ``claim``: the message's reserved duplicate id.
        """
        try:
            placement = self.paging.place(message, queues, self.next_id(), internal=internal)
        except Full as exc:
            raise BrokerError(str(exc)) from exc  # (the cause: the metrics' error kind)
        if placement.wait is not None:
            return after(placement.wait, partial(self.send, message, queues, claim=claim))
        if claim is not None:  # a transaction of its own (as Artemis): its id commits with it
            return self.commit(Transaction([(message, queues)], [], claim, [placement]))
        memory = placement.memory
        durable_queues = [q for q in memory if q.durable] if message.durable else []
        pending = Pending()
        records: Records = []
        if durable_queues or (memory and message.body_ref is not None):
            # (a copy of a message whose body is in a file is stored whatever its queues)
            file_first(self.persistence, message, pending)
            records.append(
                partial(self.persistence.store_message, message, durable_queues, placement.offset)
            )
        page(self.persistence, message, placement, pending, records)
        journal_after(pending, records, partial(self.persistence.large.abandon, [message]))
        message.ref_count += len(memory)
        pending.on_durable.append(partial(placement.enqueue, message))
        return pending

    def receive_forwarded(self, forwarded: Iterable[Forwarded]) -> Pending:
        """Messages another node's bridge forwarded (a run of them, in order).

        Each comes with the names of the bindings here it is for, its duplicate id and the
        bytes it was forwarded as (its :func:`encode_message`). A duplicate id seen before
        means the sender is resending after a broken link: the message is already here, so
        it is confirmed and dropped. The others are stored together with their duplicate
        ids, in one journal batch, and reach their queues, in order, when durable. Targets
        that are gone (a queue deleted meanwhile) are replaced by routing on the address.
        """
        pending = Pending()
        accepted: list[tuple[Message, list[Queue], bytes, bytes | None]] = []
        seen: set[bytes] = set()
        for message, targets, dup_id, encoded in forwarded:
            if dup_id in self.duplicates or dup_id in seen:
                log.debug("duplicate %r from a cluster bridge ignored", dup_id)
                continue
            seen.add(dup_id)
            properties = message.properties
            destinations = self.resolve(targets)
            queues = tag(message, destinations) if destinations else self.route(message)
            if message.properties is not properties:
                encoded = None  # tagged for a node further on: encoded again
            accepted.append((message, queues, dup_id, encoded))
        if not accepted:
            return pending
        # Paged ones are appended to their pages now; their duplicate ids are stored once
        # those are durable, so a crash never keeps an id without its message.
        in_memory = []
        effects: list[Callable[[], None]] = []
        records: Records = []
        for message, queues, dup_id, encoded in accepted:
            placement = self.paging.place(message, queues, self.next_id(), internal=True)
            if may_be_stamped(encoded, message):  # moved by a scale-down: keeps its offset
                placement.adopt = self.node_id
            page(self.persistence, message, placement, pending, records)
            if message.durable and any(q.durable for q in placement.memory):
                file_first(self.persistence, message, pending)
            in_memory.append((message, placement.memory, placement.offset, dup_id, encoded))
            message.ref_count += len(placement.memory)
            effects.append(partial(placement.enqueue, message))
        records.append(partial(self.persistence.store_forwarded, in_memory, self.duplicates))
        journal_after(
            pending, records, partial(self.persistence.large.abandon, [m for m, *_ in accepted])
        )
        pending.on_durable += effects
        return pending

    def resolve(self, targets: Iterable[str]) -> list[Destination]:
        """Where a message for the bindings named ``targets`` here goes: the local queues,
        and for a binding that lives further on (a chain), the store-and-forward queue
        toward it. Names of bindings that are gone (a queue deleted meanwhile) are dropped."""
        local: list[Destination] = []
        remote: list[RemoteQueueBinding] = []
        own = "@" + self.node_id
        for name in targets:
            # "q@<this node>": a queue of this node named by a node that scaled down.
            queue = self.post_office.queue(name.removesuffix(own))
            if queue is not None:
                local.append((queue, None))
            elif (binding := self.post_office.remote_binding(name)) is not None:
                remote.append(binding)
        return local + forwarding(remote)

    def redistribute(
        self, moves: list[tuple[MessageReference, list[Destination] | None]]
    ) -> Pending:
        """Move ready references elsewhere, all or nothing.

        Each move is a reference and its destinations (None: route by address again),
        usually the store-and-forward queue of a neighbour with the names of the bindings
        over there. A copy of the message under a new id goes to the destinations and the
        original reference is acknowledged, in one journal transaction: after a crash the
        message is in exactly one of the two places.
        """
        sends: list[tuple[Message, list[Queue]]] = []
        for ref, destinations in moves:
            copy = ref.message.copy(self.persistence.next_id())
            queues = self.route(copy) if destinations is None else tag(copy, destinations)
            sends.append((copy, queues))
        tx = Transaction(sends=sends, acks=[ref for ref, _ in moves])
        grouped = by_queue(tx.acks)
        for queue, refs in grouped:
            queue.remove(refs)
            queue.delivering += len(refs)  # acknowledged by the commit below
        try:
            return self.commit(tx)
        except StorageError:
            for queue, refs in grouped:
                queue.delivering -= len(refs)
                queue.cancel(refs)
            raise

    def discard(self, refs: list[MessageReference]) -> Pending:
        """Take ready references out of their queues and acknowledge them: gone for good."""
        for queue, queue_refs in by_queue(refs):
            queue.remove(queue_refs)
            queue.delivering += len(queue_refs)  # acknowledged below
        return self.acknowledge(refs)

    def commit(self, tx: Transaction) -> Pending:
        """Make a transaction's sends and acknowledgements durable together.

        Sends to addresses that page go to their page files marked with the transaction's
        id; its journal commit (with a PAGE_TX record) is submitted once those are durable,
        and page records of a transaction without that record never count.
        """
        placements, claim = tx.placements, tx.claim
        try:
            for message, queues in tx.sends[len(placements) :]:
                placements.append(self.paging.place(message, queues, self.next_id(), internal=True))
        except Full as exc:
            for placement in placements:
                placement.release()
            raise BrokerError(str(exc)) from exc
        tx_id = self.next_id()
        stored = []
        pending = Pending()
        paged_ops = []
        records: Records = []
        for (message, _), placement in zip(tx.sends, placements, strict=True):
            message.ref_count += len(placement.memory)
            if message.durable:
                durable_queues = [q for q in placement.memory if q.durable]
                if durable_queues or (placement.memory and message.body_ref is not None):
                    stored.append((message, durable_queues, placement.offset))
            page(self.persistence, message, placement, pending, records, tx_id)
        if pending.tickets:
            record_id = self.next_id()
            paged_ops.append(page_tx_op(tx_id, record_id))
            self.paging.committing(tx_id, record_id)
        ack_records = []
        for ref in tx.acks:
            release(ref)
            if ref.paged is not None:
                op = self.paging.ack_op(ref, tx_id)
                if op is not None:
                    paged_ops.append(op)
                paged_ops += page_ref_acked(self.persistence, ref, tx_id)
            else:
                ref.message.ref_count -= 1
                ack_records.append(ack_record(ref))
        for message, *_ in stored:
            file_first(self.persistence, message, pending)
        submit = partial(self.persistence.commit, stored, ack_records, tx_id)
        abandon = partial(self.persistence.large.abandon, [m for m, _ in tx.sends])
        if claim is not None:  # its ids join the commit's records, or are freed
            submit, abandon = claim.joining(submit, abandon, tx_id, tx.sends, placements)
        records.append(self.paging.submitting(tx_id, partial(submit, paged_ops)))
        try:
            journal_after(pending, records, abandon)
        except StorageError:
            # The journal refused the transaction (nothing was queued): undo the counts.
            for (message, _), placement in zip(tx.sends, placements, strict=True):
                message.ref_count -= len(placement.memory)
                placement.release()
            for ref in tx.acks:
                if ref.paged is None:
                    ref.message.ref_count += 1
            raise
        for ref in tx.acks:
            ref.queue.acknowledged()
        for (message, _), placement in zip(tx.sends, placements, strict=True):
            pending.on_durable.append(partial(placement.enqueue, message))
        return pending

    # -- acknowledging (see :mod:`artemis_py.broker.acknowledging`) ----------------------

    def acknowledge(self, refs: list[MessageReference], *, awaited: bool = True) -> Pending:
        """Consumers acknowledged delivered references: they are gone for good
        (:meth:`Acknowledgements.acknowledge`)."""
        return self.acks.acknowledge(refs, awaited=awaited)

    def cancel(self, refs: list[MessageReference]) -> None:
        """Delivered references come back unacknowledged (consumer closed, NACK)."""
        self.acks.cancel(refs)
