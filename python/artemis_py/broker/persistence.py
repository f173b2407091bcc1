"""What the broker writes to its two journals: the records of addresses, queues, ids and messages.

Bindings journal (``bindings-directory``): addresses, queues, id-block reservations, and a
LOCAL grouping handler's decisions (:mod:`.routing.grouping`).
Messages journal (``journal-directory``): a message is one *add* record; each queue it is
routed to is an *update* (ADD_REF); an acknowledgement is an ACK_REF update, or deletes the
message when it was the last reference; a cancelled delivery records its delivery count,
and the time a redelivery delay holds it until (SCHEDULED_DELIVERY_TIME).
This is Artemis's layout, so recovery (:mod:`.journal_recovery`) is: live messages minus
acknowledged references. Paged messages' cursors are add records of their own in the messages
journal (PAGE_ACK, PAGE_COMPLETE, PAGE_TX). A large message is a LARGE_MESSAGE add record
instead, its body in a file of its own (:mod:`artemis_py.broker.large_messages`). Every record
type is numbered, and its payload laid out, in :mod:`artemis_py.broker.records`.

Where the records go is a :class:`~artemis_py.broker.store.Store`: the journals on disk, or
journals in memory (``persistence-enabled`` false, and tests). A store that does not keep
messages (``stores_messages`` false) is never given a message's records: they are not even
encoded.

Ordering between the journals: a message may refer to a queue created a moment earlier,
whose record sits in the other journal. Every message write therefore also waits for the
bindings journal's latest ticket, so a receipt never covers a message whose queue could be
missing after a crash.

Paging (see :mod:`artemis_py.broker.paging`): a paged message lives in its address's page
files, not here; acknowledging one is a PAGE_ACK record, a page a queue has finished is one
PAGE_COMPLETE record (which replaces that page's PAGE_ACKs), and a transaction that paged
messages commits a PAGE_TX record, without which its page records do not count.

Ids (messages, queues, addresses, transactions) come from one generator that reserves blocks
in the bindings journal (Artemis's BatchingIDGenerator): a restart continues above every id
ever handed out, so ids a client saw are never reused.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol

import trio

from artemis_py.broker import records as r
from artemis_py.broker.journal_recovery import (
    RecoveredState,
    lost_addresses,
    read_bindings,
    read_messages,
)
from artemis_py.broker.large_messages import LargeMessages
from artemis_py.broker.message import Message, encode_message
from artemis_py.broker.pending import Ticket, Waitable
from artemis_py.broker.store import MemoryStore, Store
from artemis_py.exceptions import StorageError
from artemis_py.storage import Op

if TYPE_CHECKING:
    from artemis_py.storage import Storage

__all__ = ["Persistence", "RecoveredState", "Ticket", "Waitable"]

log = logging.getLogger("artemis_py.broker.persistence")

ID_BLOCK_SIZE = 1 << 16


class StoredQueue(Protocol):
    """What the records of a message need of a queue it is routed to."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def durable(self) -> bool: ...


class DuplicateIds(Protocol):
    """A cluster bridge's duplicate-id cache (:class:`.duplicate_cache.DuplicateIDCache`)."""

    def add(self, dup_id: bytes, record_id: int | None) -> list[Op]: ...

    def discard(self, dup_id: bytes) -> None: ...


class Persistence:
    """The broker's records, written to ``store`` (None: a :class:`MemoryStore`, as a node
    with ``persistence-enabled`` false has)."""

    def __init__(self, store: Store | None, node_id: str) -> None:
        self.store: Store = MemoryStore() if store is None else store
        # Fixed for a store's life; looked up once (they are on every message's path).
        self._stores_messages = self.store.stores_messages
        self._submit_to_messages = self.store.submit_messages
        # Records held to the end of the loop's pass, submitted then in one batch (see
        # acknowledge and store_message): whether it syncs, and the messages' ticket.
        self._held: list[Op] = []
        self._held_sync = False
        self._held_batch: _PassBatch | None = None
        storage = self.store.storage
        self._journal = storage.messages if storage is not None else None
        self._sync_plain = False
        if self._journal is not None:
            self._journal.at_pass_end(self._release_held)
            self._sync_plain = self._journal.settings.sync_non_transactional
        self.large = LargeMessages(self.store.large_files, self.store.record_limit)
        self.node_id = node_id
        self._next_id = 1
        self._ceiling = 0  # ids below this are reserved
        self._reserved_ahead = False
        self._block_record: int | None = None
        self._last_bindings: list[Ticket] = []  # the latest bindings submit's, if any
        self._persisted_addresses: set[int] = set()

    @property
    def storage(self) -> Storage | None:
        """The journals on disk (None: in memory), for who reads their files or statistics."""
        return self.store.storage

    @property
    def stores_messages(self) -> bool:
        """Whether durable messages are written (with their duplicate ids, offset marks)."""
        return self._stores_messages

    # -- ids ---------------------------------------------------------------------------

    @property
    def next_free_id(self) -> int:
        """The id :meth:`next_id` hands out next (every id handed out is below it)."""
        return self._next_id

    def next_id(self) -> int:
        if self._next_id >= self._ceiling:
            self._reserve(self._next_id)
            self._reserved_ahead = False
        elif not self._reserved_ahead and self._ceiling - self._next_id < ID_BLOCK_SIZE // 2:
            # Reserve the following block early so it is durable long before it is used.
            self._reserve(self._ceiling)
            self._reserved_ahead = True
        value = self._next_id
        self._next_id += 1
        return value

    def _reserve(self, start: int) -> None:
        ceiling = max(start, self._ceiling) + ID_BLOCK_SIZE
        ops = [r.id_block_op(ceiling)]
        if self._block_record is not None:
            ops.append(Op.delete(self._block_record))
        self._submit_bindings(ops)
        self._block_record = r.ID_BLOCK_RECORD_BASE | ceiling
        self._ceiling = ceiling

    # -- bindings ----------------------------------------------------------------------

    def _submit_bindings(self, ops: list[Op]) -> list[Ticket]:
        tickets = self.store.submit_bindings(ops)
        if tickets:
            self._last_bindings = tickets[-1:]  # a list of its own: callers extend theirs
        return tickets

    def bindings_written(self) -> list[Ticket]:
        """A ticket done once every bindings-journal record submitted so far is durable (a
        journal completes its tickets in order): whoever made an address or queue without
        keeping its tickets (the broker's ``create_queue``) waits for this one."""
        return list(self._last_bindings)

    def store_address(self, address: r.StoredAddress) -> list[Ticket]:
        payload = r.encode_address(address)
        known = address.id in self._persisted_addresses
        self._persisted_addresses.add(address.id)
        op = (
            Op.update(address.id, r.ADDRESS_RECORD, payload)
            if known
            else Op.add(address.id, r.ADDRESS_RECORD, payload)
        )
        return self._submit_bindings([op])

    def delete_address(self, address_id: int) -> list[Ticket]:
        if address_id not in self._persisted_addresses:
            return []
        self._persisted_addresses.discard(address_id)
        return self._submit_bindings([Op.delete(address_id)])

    def store_queue(self, spec: r.QueueSpec) -> list[Ticket]:
        payload = r.encode_queue(spec)
        return self._submit_bindings([Op.add(spec.queue_id, r.QUEUE_RECORD, payload)])

    def delete_queue(self, queue_id: int) -> list[Ticket]:
        return self._submit_bindings([Op.delete(queue_id)])

    def store_group_binding(self, record_id: int, group_id: str, cluster_name: str) -> None:
        """A message group's binding, decided (messages sent after it wait for it)."""
        self._submit_bindings([r.group_binding_op(record_id, group_id, cluster_name)])

    def delete_group_bindings(self, record_ids: list[int]) -> None:
        if record_ids:
            self._submit_bindings([Op.delete(record_id) for record_id in record_ids])

    # -- messages ----------------------------------------------------------------------

    def _submit_messages(
        self, ops: list[Op], sync: bool | None = None, flush: bool = False
    ) -> list[Ticket]:
        if not ops:
            return []
        if self._held:
            self._release_held()  # (in order: they were acknowledged or sent first)
        return self._after_bindings(self._submit_to_messages(ops, sync, flush))

    def _after_bindings(self, tickets: list[Ticket]) -> list[Ticket]:
        """``tickets`` and, while it is not durable, the latest bindings submit's: a
        message may name a queue made a moment ago (the module docstring)."""
        last = self._last_bindings
        if last:
            if last[0].journal.done(last[0].number):
                self._last_bindings = []  # durable: nothing more to wait for
            else:
                tickets += last
        return tickets

    def submit(self, ops: list[Op], *, awaited: bool = True) -> list[Ticket]:
        """Records of other parts of the broker (paging); not ``awaited``: written at once,
        synced by the next synced batch."""
        if awaited:
            return self._submit_messages(ops)
        return self._submit_messages(ops, sync=False, flush=True)

    def store_message(
        self, message: Message, queues: Iterable[StoredQueue], offset: int
    ) -> list[Ticket]:
        if not self._stores_messages:
            return []
        message.stored = True
        op, files = self._add_message(message)
        ops = [op, *_ref_ops(message, queues, offset)]
        if not files and self._journal is not None and self._journal.deferring():
            # The writer is woken at the pass's end anyway: the pass's messages go to the
            # journal then in one submit, with the acknowledgements held (in their order).
            self._held += ops
            self._held_sync = self._held_sync or self._sync_plain
            batch = self._held_batch
            if batch is None:
                batch = self._held_batch = _PassBatch(self._release_held)
            return self._after_bindings([batch.ref])
        try:
            return self._submit_messages(ops) + files
        except BaseException:
            self._abandon([message], files)
            raise

    def _abandon(self, messages: Iterable[Message], files: list[Ticket]) -> None:
        """The journal refused records whose large-message files were queued: the files
        go once written (they would be orphans at the next start otherwise)."""
        self.large.delete_after(
            partial(self.wait, files), self.large.forget(m.message_id for m in messages)
        )

    def _add_message(
        self, message: Message, tx_id: int | None = None, encoded: bytes | None = None
    ) -> tuple[Op, list[Ticket]]:
        """The add record of ``message`` (a large one's body goes to its file meanwhile)
        and what besides the journal its durability waits for."""
        tickets: list[Ticket] = []
        record_type = r.MESSAGE_RECORD
        if self.large.is_large(message):
            assert self.large.store is not None
            encoded, number = self.large.write(message)
            record_type = r.LARGE_MESSAGE_RECORD
            tickets.append(Ticket(self.large.store, number))
        elif encoded is None:
            encoded = encode_message(message)
            if message.route_to:  # a bridge sends these bytes on (forwarded: they came so)
                message.encoded = encoded
        if tx_id is None:
            return Op.add(message.message_id, record_type, encoded), tickets
        return Op.add_tx(tx_id, message.message_id, record_type, encoded), tickets

    def acknowledge(
        self, records: list[tuple[int, int, bool]], awaited: bool = True, paged: Iterable[Op] = ()
    ) -> list[Ticket]:
        """``records``: (message id, queue id, last reference) for stored messages;
        ``paged``: the PAGE_ACK ops of depaged ones.

        Not ``awaited``: written at once (the OS has them, a process crash cannot undo
        them) but not fdatasynced; the next synced batch makes them durable. On the loop
        they go at the end of its pass, with the pass's others, in one submit.
        """
        ops = [self._ack_op(*ack) for ack in records]
        ops += paged
        large = self.large.freed(records)
        if awaited or large:
            # A large message's file goes once its delete is durable: synced, waited or not.
            tickets = self._submit_messages(ops)
            self.large.delete_after(partial(self.wait, tickets), large)
            return tickets
        if self._journal is not None and self._journal.on_loop():
            # Held to the end of this pass of the loop, and submitted then with the pass's
            # other acknowledgements (one submit per pass, not one per message): the writer
            # is woken then anyway, so they are written at most the rest of a pass later
            # (only a sparse pass's first submit used to wake it at once).
            self._held += ops
            return []
        return self._submit_messages(ops, sync=False, flush=True)

    def _release_held(self) -> None:
        """Submit the held records: at the pass's end, before any other record (the
        journal keeps the order of the broker's operations), or when a message's ticket
        is waited for."""
        if not self._held:
            return
        ops, self._held = self._held, []
        sync, self._held_sync = self._held_sync, False
        batch, self._held_batch = self._held_batch, None
        try:
            (ticket,) = self._submit_to_messages(ops, sync, not sync)
        except StorageError as exc:  # (a pass's end has nobody to raise to: the waits get it)
            log.error("%d held record(s) not written: %s", len(ops), exc)
            if batch is not None:
                batch.error = exc
            return
        if batch is not None:
            batch.ticket = ticket

    @staticmethod
    def _ack_op(message_id: int, queue_id: int, last: bool, tx_id: int | None = None) -> Op:
        if not last:
            return r.ack_ref_op(message_id, queue_id, tx_id)
        return Op.delete(message_id) if tx_id is None else Op.delete_tx(tx_id, message_id)

    def commit(
        self,
        sends: Sequence[tuple[Message, Sequence[StoredQueue], int]],
        acks: list[tuple[int, int, bool] | None],
        tx_id: int,
        paged: list[Op],
    ) -> list[Ticket]:
        """One journal transaction (``tx_id``) for a client transaction's durable sends
        (message, queues, offset) and acks; ``paged``: its paging records (PAGE_ACK,
        PAGE_TX), already transactional."""
        ack_records = [a for a in acks if a is not None]
        if not self._stores_messages or not (sends or ack_records or paged):
            return []
        ops: list[Op] = list(paged)
        files: list[Ticket] = []
        for message, queues, offset in sends:
            message.stored = True
            op, tickets = self._add_message(message, tx_id)
            ops.append(op)
            files += tickets
            ops += _ref_ops(message, queues, offset, tx_id)
        ops += [self._ack_op(*a, tx_id=tx_id) for a in ack_records]
        ops.append(Op.commit(tx_id))
        try:
            tickets = self._submit_messages(ops)
        except BaseException:
            self._abandon((m for m, *_ in sends), files)
            raise
        large = self.large.forget(a[0] for a in ack_records if a[2])
        self.large.delete_after(partial(self.wait, tickets), large + self.large.released(tx_id))
        return tickets + files

    def store_forwarded(
        self,
        forwarded: Sequence[tuple[Message, Sequence[StoredQueue], int, bytes, bytes | None]],
        duplicates: DuplicateIds,
    ) -> list[Ticket]:
        """Store messages a cluster bridge forwarded, each with its duplicate id.

        ``forwarded``: (message, queues, offset, duplicate id, the message's encoding if
        known).
        Everything goes into one submit, which the journal writes as one batch, all or
        nothing: after a crash a message and its duplicate id are both there or both not
        (what a journal transaction gave, without its commit record). Synced as a commit
        would be (journal-sync-transactional).
        """
        ops: list[Op] = []
        files: list[Ticket] = []
        remembered: list[bytes] = []
        stored: list[Message] = []
        keeps = self._stores_messages
        try:
            for message, queues, offset, dup_id, encoded in forwarded:
                durable_queues = [q for q in queues if q.durable] if message.durable else []
                if not keeps or not durable_queues:
                    ops += duplicates.add(dup_id, None)
                    remembered.append(dup_id)
                    continue
                message.stored = True
                stored.append(message)
                op, tickets = self._add_message(message, encoded=encoded)
                ops.append(op)
                files += tickets
                ops += _ref_ops(message, durable_queues, offset)
                ops += duplicates.add(dup_id, self.next_id())
                remembered.append(dup_id)
            return self._submit_messages(ops, self.store.sync_transactional) + files
        except BaseException:
            self._abandon(stored, files)
            for dup_id in remembered:
                duplicates.discard(dup_id)
            for message in stored:
                message.stored = False
            raise

    def store_page_ref(
        self,
        message: Message,
        address: str,
        position: tuple[int, int],
        queues: Sequence[StoredQueue],
        tx_id: int = 0,
    ) -> list[Ticket]:
        """The LARGE_PAGE_REF record of a large message paged by reference (its file is
        written by :meth:`LargeMessages.write_file`); waited for like the page record."""
        op = self.large.page_ref_op(
            self.next_id(), message, address, position, [q.id for q in queues], tx_id
        )
        return self._submit_messages([op])

    def remove_records(self, ops: list[Op]) -> None:
        """Deletes found during recovery (not waited for)."""
        self._submit_messages(ops)

    def update_delivery_counts(self, counts: list[tuple[int, int, int]]) -> None:
        """Record delivery counts of cancelled deliveries: written at once (``flush``), so
        a process killed right after a NACK keeps the count, but not synced on their own
        (Artemis syncs them with journal-sync-non-transactional; a count lost to a machine
        crash only lets its message be delivered once more before the dead-letter address)."""
        ops = [r.delivery_count_op(*count) for count in counts]
        self._submit_messages(ops, sync=False, flush=True)

    def update_scheduled_times(self, times: list[tuple[int, int, int]]) -> None:
        """Record when references held for a redelivery delay are due: (message id, queue
        id, epoch ms) each, read back by recovery (:mod:`.journal_recovery`).

        Not synced on its own and waited for by nobody, as the delivery counts: a record
        lost to a machine crash before the next synced batch only lets its message come
        back sooner after the restart, never loses or duplicates it. (Artemis appends it
        with journal-sync-non-transactional; here nothing waits for a cancel's records.)
        Written at once (``flush``), so a process killed right after the NACK or the
        disconnect keeps the hold.
        """
        ops = [r.scheduled_time_op(*time) for time in times]
        self._submit_messages(ops, sync=False, flush=True)

    def written(self) -> list[Ticket]:
        """Tickets done once every messages-journal record submitted so far is written:
        unawaited acknowledgements among them can then no longer be undone by a process
        crash (a closing connection waits for them before its deliveries go back)."""
        self._release_held()
        return self.store.messages_written()

    @staticmethod
    async def wait(tickets: list[Ticket]) -> None:
        for ticket in tickets:
            await ticket.journal.wait(ticket.number)

    # -- recovery ----------------------------------------------------------------------

    def recover(self) -> RecoveredState:
        """Rebuild the model from what the journals loaded at open."""
        state = RecoveredState()
        bindings_records, messages_records = self.store.take_loaded()
        bindings = read_bindings(bindings_records, state)
        self._block_record = bindings.block_record
        self._persisted_addresses |= bindings.addresses
        messages = read_messages(messages_records, state, self.large)
        if messages.orphans:
            log.info(
                "recovery: removing %d message record(s) of deleted queues", len(messages.orphans)
            )
            tickets = self._submit_messages(messages.orphans)
            self.large.delete_after(partial(self.wait, tickets), messages.gone_files)
        self.large.finish_recovery()
        self._next_id = max(bindings.highest, messages.highest) + 1
        self._ceiling = 0
        for address in lost_addresses(state, self.next_id):
            self.store_address(address)
        return state


class _PassBatch:
    """The ticket of the messages held for one pass's submit (see ``store_message``),
    which the journal gives only at that submit: until then nothing is done, and a wait
    submits them at once."""

    __slots__ = ("_done", "_release", "error", "ref", "ticket")

    def __init__(self, release: Callable[[], None]) -> None:
        self._release = release
        self._done = False  # (once done, its other sends' looks need not ask the journal)
        self.ticket: Ticket | None = None
        self.error: StorageError | None = None
        self.ref = Ticket(self, 0)  # what each of its sends waits for

    def done(self, number: int) -> bool:
        if not self._done:
            ticket = self.ticket
            self._done = ticket is not None and ticket.journal.done(ticket.number)
        return self._done

    async def wait(self, number: int) -> None:
        if self.ticket is None and self.error is None:
            self._release()
        ticket, error = self.ticket, self.error
        if ticket is None:
            assert error is not None  # (the release above gave one or the other)
            await trio.lowlevel.cancel_shielded_checkpoint()
            raise copy.copy(error) from error  # (each waiter gets its own)
        await ticket.journal.wait(ticket.number)


def _ref_ops(
    message: Message, queues: Iterable[StoredQueue], offset: int, tx_id: int | None = None
) -> list[Op]:
    """The ADD_REF of ``message`` in each of ``queues`` and, for a store-and-forward queue,
    the ROUTE_TO beside it (the bindings on the neighbour it is for)."""
    message_id = message.message_id
    ops = [r.add_ref_op(message_id, q.id, offset, tx_id) for q in queues]
    route_to = message.route_to
    if route_to:
        ops += [
            r.route_to_op(message_id, q.id, route_to[q.name], tx_id)
            for q in queues
            if q.name in route_to
        ]
    return ops
