"""Sending: where a message goes, and making it durable there (alone, in a transaction,
forwarded by a neighbour, or moved by redistribution).

Theory of operation
-------------------
A message is routed first (:meth:`Sending.route`: one named queue, or its address's
bindings, local and remote, with auto-creation), then *placed* by its address's limits
(:mod:`artemis_py.broker.paging`: memory, page files, wait, fail or drop), then written:
the order of its files, page records and journal records is :mod:`artemis_py.broker.write_order`'s.
It reaches its queues when its records are durable (its pending's ``on_durable``).

A transaction (:class:`Transaction`) commits its sends and acknowledgements in one journal
transaction; sends that paged are marked with the transaction's id in their page files and
count only once its PAGE_TX record is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from artemis_py.broker.acknowledging import ack_record, by_queue, page_ref_acked, release
from artemis_py.broker.adopted_streams import may_be_stamped
from artemis_py.broker.expiry import apply_expiry_delays, configured, expiry_delays_configured
from artemis_py.broker.message import Message, MessageReference, now_ms
from artemis_py.broker.paging import Full, Placement
from artemis_py.broker.pending import Pending
from artemis_py.broker.queue import Queue
from artemis_py.broker.records import page_tx_op
from artemis_py.broker.routing import Destination, RemoteQueueBinding, forwarding, tag
from artemis_py.broker.routing.diverts import original_properties
from artemis_py.broker.scheduling import carry_hold
from artemis_py.broker.write_order import Records, after, file_first, journal_after, page
from artemis_py.config import RoutingType
from artemis_py.exceptions import BrokerError, StorageError

if TYPE_CHECKING:
    from artemis_py.broker.addresses import Addresses
    from artemis_py.broker.duplicate_cache import Claim, DuplicateIDCache
    from artemis_py.broker.paging import PagingManager
    from artemis_py.broker.persistence import Persistence
    from artemis_py.broker.routing import PostOffice

log = logging.getLogger("artemis_py.broker")


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


class Sending:
    """Routing, sending and committing on one node's queues."""

    def __init__(
        self,
        persistence: Persistence,
        paging: PagingManager,
        post_office: PostOffice,
        addresses: Addresses,
        duplicates: DuplicateIDCache,
        node_id: str,
    ) -> None:
        self.persistence = persistence
        self.paging = paging
        self.post_office = post_office
        self.addresses = addresses
        self.duplicates = duplicates
        self.node_id = node_id
        # Only when broker.xml uses them does routing look at these settings (:mod:`.expiry`).
        config = addresses.config
        self.expiry_delays = expiry_delays_configured(config)
        self.dead_letters_unrouted = configured(config, "send_to_dla_on_no_route")

    def route(self, message: Message, queue_name: str | None = None) -> list[Queue]:
        """The queues ``message`` goes to: one named queue, or by its address's bindings
        (the expiry delays of its address applied first: :mod:`.expiry`)."""
        if self.expiry_delays:
            settings = self.addresses.address_settings(message.address)
            apply_expiry_delays(message, settings, now_ms())
        if queue_name is not None:
            queue = self.post_office.queue(queue_name)
            if queue is None or queue.address != message.address:
                raise BrokerError(f"queue {message.address}::{queue_name} does not exist")
            return [queue]
        queues = self._route_by_address(message)
        if not queues and self.dead_letters_unrouted:
            queues = self._dead_letter_unrouted(message)
        return queues

    def _route_by_address(self, message: Message) -> list[Queue]:
        addresses = self.addresses
        address = addresses.resolve_address(message.address, message.routing_type, for_send=True)
        if message.group_id is None:  # (the one test an ungrouped message pays for groups)
            queues, remote = self.post_office.route(
                address, message.routing_type, message.filter_value
            )
        else:
            queues, remote = self.post_office.route_grouped(
                address, message.routing_type, message.filter_value, message.group_id
            )
        if remote:
            # One copy per neighbour, into its store-and-forward queue, naming the bindings
            # over there that it is for.
            queues += tag(message, forwarding(remote))
        elif not queues and message.routing_type is not RoutingType.MULTICAST:
            settings = addresses.address_settings(address.name)
            if (
                RoutingType.ANYCAST in address.routing_types
                and settings.auto_create_queues
                and not any(q.routing_type is RoutingType.ANYCAST for q in address.queues)
            ):
                queues = [
                    addresses.create_queue(
                        address.name, address.name, RoutingType.ANYCAST, auto_created=True
                    )
                ]
        return queues

    def _dead_letter_unrouted(self, message: Message) -> list[Queue]:
        """``send-to-dla-on-no-route``: a message no queue takes goes to its address's
        dead-letter address instead, marked with the address it was sent to, and routed
        there once (Artemis's PostOfficeImpl.maybeSendToDLA; as there, the dead-letter
        resources are not auto-created for it)."""
        settings = self.addresses.address_settings(message.address)
        if not settings.send_to_dla_on_no_route:
            return []
        if settings.dead_letter_address is None:
            log.warning(
                "message sent to %s matched no queue and no dead-letter address is set for it",
                message.address,
            )
            return []
        if self.post_office.address(settings.dead_letter_address) is None:
            return []  # (Artemis routes it there without auto-creating: to nothing)
        # As Artemis: marked as its own original, its expiration reset, and the dead-letter
        # address's expiry delays applied instead.
        message.set_properties(original_properties(message, None))
        message.address = settings.dead_letter_address
        message.routing_type = None
        message.expiration = 0
        if self.expiry_delays:
            apply_expiry_delays(message, self.addresses.address_settings(message.address), now_ms())
        return self._route_by_address(message)

    # Routing again what was routed where it was sent (a forwarded message whose bindings
    # are gone, redistribution): never through diverts, whoever overrides route().
    route_undiverted = route

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
        persistence = self.persistence
        try:
            placement = self.paging.place(message, queues, persistence.next_id(), internal=internal)
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
        # (a copy of a message whose body is in a file is stored whatever its queues)
        stored = bool(durable_queues or (memory and message.body_ref is not None))
        if stored:
            file_first(persistence, message, pending)
        if not (pending.tickets or placement.paged):  # (the usual case: its records go now)
            if stored:
                pending.tickets += persistence.store_message(
                    message, durable_queues, placement.offset
                )
        else:
            if stored:
                records.append(
                    partial(persistence.store_message, message, durable_queues, placement.offset)
                )
            if placement.paged:
                page(persistence, message, placement, pending, records)
            # The records wait for the files or page records before them.
            journal_after(pending, records, partial(persistence.large.abandon, [message]))
        message.ref_count += len(memory)
        pending.on_durable.append(partial(placement.enqueue, message))
        return pending

    def receive_forwarded(self, forwarded: Iterable[Forwarded]) -> Pending:
        """Messages another node's bridge forwarded (a run of them, in order).

        Each comes with the names of the bindings here it is for, its duplicate id and the
        bytes it was forwarded as (its :func:`encode_message`), which are journaled as they
        are, and forwarded as they are by a chain's next bridge (the bindings further on are
        named beside the message: :mod:`.routing.forwarding`). A duplicate id seen before
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
            destinations = self.resolve(targets)
            if destinations:
                queues = tag(message, destinations)
            else:
                before = (message.address, message.expiration)
                queues = self.route_undiverted(message)
                if (message.address, message.expiration) != before:
                    encoded = None  # routing changed it: stored and sent on as it is now
            if message.route_to:  # for a node further on: sent on as received
                message.encoded = encoded
            accepted.append((message, queues, dup_id, encoded))
        if not accepted:
            return pending
        # Paged ones are appended to their pages now; their duplicate ids are stored once
        # those are durable, so a crash never keeps an id without its message.
        persistence = self.persistence
        in_memory = []
        effects: list[Callable[[], None]] = []
        records: Records = []
        for message, queues, dup_id, encoded in accepted:
            placement = self.paging.place(message, queues, persistence.next_id(), internal=True)
            if may_be_stamped(encoded, message):  # moved by a scale-down: keeps its offset
                placement.adopt = self.node_id
            page(persistence, message, placement, pending, records)
            if message.durable and any(q.durable for q in placement.memory):
                file_first(persistence, message, pending)
            in_memory.append((message, placement.memory, placement.offset, dup_id, encoded))
            message.ref_count += len(placement.memory)
            effects.append(partial(placement.enqueue, message))
        records.append(partial(persistence.store_forwarded, in_memory, self.duplicates))
        journal_after(
            pending, records, partial(persistence.large.abandon, [m for m, *_ in accepted])
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
        """Move ready references elsewhere (held ones too, in a scale-down: a copy is
        held until the same time there), all or nothing.

        Each move is a reference and its destinations (None: route by address again),
        usually the store-and-forward queue of a neighbour with the names of the bindings
        over there. A copy of the message under a new id goes to the destinations and the
        original reference is acknowledged, in one journal transaction: after a crash the
        message is in exactly one of the two places.
        """
        sends: list[tuple[Message, list[Queue]]] = []
        for ref, destinations in moves:
            copy = ref.message.copy(self.persistence.next_id())
            carry_hold(ref, copy)
            queues = (
                self.route_undiverted(copy) if destinations is None else tag(copy, destinations)
            )
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
                queue.cancel(refs)  # (counts them out of delivering again)
            raise

    def commit(self, tx: Transaction, *, from_client: bool = False) -> Pending:
        """Make a transaction's sends and acknowledgements durable together.

        Sends to addresses that page go to their page files marked with the transaction's
        id; its journal commit (with a PAGE_TX record) is submitted once those are durable,
        and page records of a transaction without that record never count.

        A transaction never waits for an address's room; ``from_client``: a client's
        COMMIT, which a full disk holds like a send (:mod:`.paging.disk`), all of it.
        """
        persistence = self.persistence
        paging = self.paging
        placements, claim = tx.placements, tx.claim
        start = len(placements)
        try:
            for message, queues in tx.sends[start:]:
                placement = paging.place(
                    message, queues, persistence.next_id(), internal=True, watch_disk=from_client
                )
                placements.append(placement)
                if placement.wait is not None:  # the disk is full: none is placed yet
                    for placed in placements[start:]:
                        placed.release()
                    del placements[start:]
                    return after(placement.wait, partial(self.commit, tx, from_client=True))
        except Full as exc:
            for placement in placements:
                placement.release()
            raise BrokerError(str(exc)) from exc
        tx_id = persistence.next_id()
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
            page(persistence, message, placement, pending, records, tx_id)
        if pending.tickets:
            record_id = persistence.next_id()
            paged_ops.append(page_tx_op(tx_id, record_id))
            paging.committing(tx_id, record_id)
        ack_records = []
        for ref in tx.acks:
            release(ref)
            if ref.paged is not None:
                op = paging.ack_op(ref, tx_id)
                if op is not None:
                    paged_ops.append(op)
                paged_ops += page_ref_acked(persistence, ref, tx_id)
            else:
                ref.message.ref_count -= 1
                ack_records.append(ack_record(ref))
        for message, *_ in stored:
            file_first(persistence, message, pending)
        submit = partial(persistence.commit, stored, ack_records, tx_id)
        abandon = partial(persistence.large.abandon, [m for m, _ in tx.sends])
        if claim is not None:  # its ids join the commit's records, or are freed
            submit, abandon = claim.joining(submit, abandon, tx_id, tx.sends, placements)
        records.append(paging.submitting(tx_id, partial(submit, paged_ops)))
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
