"""What the broker writes to its two journals, and how it reads them back.

Bindings journal (``bindings-directory``): addresses, queues, and id-block reservations.
Messages journal (``journal-directory``): a message is one *add* record; each queue it is
routed to is an *update* (ADD_REF); an acknowledgement is an ACK_REF update, or deletes the
message when it was the last reference; a cancelled delivery records its delivery count.
This is Artemis's layout, so recovery is: live messages minus acknowledged references.
Paged messages' cursors are add records of their own in the messages journal (PAGE_ACK,
PAGE_COMPLETE, PAGE_TX). Each format has its decoder here, next to its encoder, for
recovery and for ``artemis-py data print``.
A large message is a LARGE_MESSAGE add record instead, its body in a file of its own
(:mod:`artemis_py.broker.large_messages`).

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

Long: one module holds every record format of both journals, so each has one home.
"""

from __future__ import annotations

import logging
import struct
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Protocol

from artemis_py.broker.duplicate_cache import (
    CLIENT_DUPLICATE_ID_RECORD,
    DUPLICATE_ID_RECORD,
    DuplicateIDCache,
)
from artemis_py.broker.large_messages import LARGE_MESSAGE_RECORD, LARGE_PAGE_REF, LargeMessages
from artemis_py.broker.message import Message, decode_message, encode_message
from artemis_py.broker.offsets import OFFSET_MARK, decode_offset_mark
from artemis_py.broker.queue import Queue, QueueSpec
from artemis_py.broker.routing.post_office import Address
from artemis_py.broker.streams import OFFSET_FROM_BYTES, SEALED_STREAM
from artemis_py.config import RoutingType
from artemis_py.storage import Op

if TYPE_CHECKING:
    from artemis_py.storage import Record, Storage
    from artemis_py.storage.large_messages import LargeMessageStore

log = logging.getLogger("artemis_py.broker.persistence")

# Bindings journal record types.
ADDRESS_RECORD = 1
QUEUE_RECORD = 2
ID_BLOCK_RECORD = 3
# Messages journal record types.
MESSAGE_RECORD = 10
ADD_REF = 11  # <QQ queue id, offset (an 8-byte one, written before offsets: the message id)
ACK_REF = 12
DELIVERY_COUNT = 13
# 14: DUPLICATE_ID_RECORD (duplicate_cache.py)
PAGE_ACK = 15  # <QQQ queue id, page, offset + address: a paged message acknowledged by a queue
PAGE_COMPLETE = 16  # <QQ queue id, page + address: the queue is done with the page
PAGE_TX = 17  # <Q tx id: the page records of that transaction are committed
# 19: CLIENT_DUPLICATE_ID_RECORD (duplicate_cache.py): a client send's _AMQ_DUPL_ID

ID_BLOCK_SIZE = 1 << 16
# Id-block records live in a record-id space of their own, above every id handed out.
_ID_BLOCK_RECORD_BASE = 1 << 63

_U64 = struct.Struct("<Q")
_REF_COUNT = struct.Struct("<QI")
_ADD_REF = struct.Struct("<QQ")
_ROUTING = {RoutingType.ANYCAST: "A", RoutingType.MULTICAST: "M"}
_ROUTING_BY_CODE = {v: k for k, v in _ROUTING.items()}
_PAGE_ACK = struct.Struct("<QQQ")
_PAGE_COMPLETE = struct.Struct("<QQ")

BINDINGS_RECORD_NAMES = {
    ADDRESS_RECORD: "ADDRESS",
    QUEUE_RECORD: "QUEUE",
    ID_BLOCK_RECORD: "ID_BLOCK",
}
MESSAGES_RECORD_NAMES = {
    MESSAGE_RECORD: "MESSAGE",
    ADD_REF: "ADD_REF",
    ACK_REF: "ACK_REF",
    DELIVERY_COUNT: "DELIVERY_COUNT",
    DUPLICATE_ID_RECORD: "DUPLICATE_ID",
    CLIENT_DUPLICATE_ID_RECORD: "CLIENT_DUPLICATE_ID",
    PAGE_ACK: "PAGE_ACK",
    PAGE_COMPLETE: "PAGE_COMPLETE",
    PAGE_TX: "PAGE_TX",
    OFFSET_MARK: "OFFSET_MARK",
    SEALED_STREAM: "SEALED_STREAM",
    LARGE_MESSAGE_RECORD: "LARGE_MESSAGE",
    LARGE_PAGE_REF: "LARGE_PAGE_REF",
}
"""Display names of each journal's record types (``artemis-py data print``)."""


class Waitable(Protocol):
    """What tickets number: a journal, or the large-message store (tickets done in order)."""

    async def wait(self, number: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Ticket:
    """A journal submission (or a large-message file write) to wait for."""

    journal: Waitable
    number: int


@dataclass(slots=True)
class RecoveredState:
    addresses: list[Address] = field(default_factory=list)
    queues: list[QueueSpec] = field(default_factory=list)
    # queue id -> [(message, delivery count, offset)] in offset order
    # queue id -> (message, delivery count, offset, stamped by a scale-down: .streams)
    messages_by_queue: dict[int, list[tuple[Message, int, int, bool]]] = field(default_factory=dict)
    # (record id, duplicate id) of the duplicate-id cache
    duplicate_ids: list[tuple[int, bytes]] = field(default_factory=list)
    # (record id, payload) of the client sends' duplicate ids (decoded by duplicate_cache)
    client_duplicate_ids: list[tuple[int, bytes]] = field(default_factory=list)
    # paging records: (record id, queue id, page, offset, address), (record id, queue id,
    # page, address), tx id -> record id
    page_acks: list[tuple[int, int, int, int, str]] = field(default_factory=list)
    page_completes: list[tuple[int, int, int, str]] = field(default_factory=list)
    page_txs: dict[int, int] = field(default_factory=dict)
    # offset marks and sealed ends: (record id, record type, queue id, stream, value)
    offset_marks: list[tuple[int, int, int, str, int]] = field(default_factory=list)


def page_ack_op(
    record_id: int, queue_id: int, position: tuple[int, int], address: str, tx_id: int | None
) -> Op:
    payload = encode_page_ack(PageAck(queue_id, *position, address))
    if tx_id is None:
        return Op.add(record_id, PAGE_ACK, payload)
    return Op.add_tx(tx_id, record_id, PAGE_ACK, payload)


def page_complete_op(record_id: int, queue_id: int, page: int, address: str) -> Op:
    return Op.add(
        record_id, PAGE_COMPLETE, encode_page_complete(PageComplete(queue_id, page, address))
    )


def page_tx_op(tx_id: int, record_id: int) -> Op:
    return Op.add_tx(tx_id, record_id, PAGE_TX, encode_page_tx(tx_id))


def _encode_fields(*values: str) -> bytes:
    return "\0".join(values).encode()


def _decode_fields(payload: bytes) -> list[str]:
    return payload.decode().split("\0")


# -- record formats, for recovery and for ``artemis-py data print`` ---------------------------


@dataclass(frozen=True, slots=True)
class PageAck:
    """PAGE_ACK: one paged message, at (page, offset) of ``address``'s store, acked by a queue."""

    queue_id: int
    page: int
    offset: int
    address: str


@dataclass(frozen=True, slots=True)
class PageComplete:
    """PAGE_COMPLETE: the queue has completed ``page`` of ``address``'s store."""

    queue_id: int
    page: int
    address: str


def decode_address(record_id: int, payload: bytes) -> Address:
    name, routing, auto = _decode_fields(payload)
    return Address(
        record_id, name, {_ROUTING_BY_CODE[c] for c in routing}, auto_created=auto == "1"
    )


def decode_queue(record_id: int, payload: bytes) -> QueueSpec:
    name, address, routing, filt, max_consumers, purge, auto = _decode_fields(payload)
    return QueueSpec(
        queue_id=record_id,
        name=name,
        address=address,
        routing_type=_ROUTING_BY_CODE[routing],
        filter=filt or None,
        max_consumers=int(max_consumers),
        purge_on_no_consumers=purge == "1",
        auto_created=auto == "1",
    )


def decode_id_block(payload: bytes) -> int:
    """ID_BLOCK: the ceiling of the reserved ids."""
    return int(_U64.unpack(payload)[0])


def add_ref_op(message_id: int, queue_id: int, offset: int, tx_id: int | None = None) -> Op:
    """The ADD_REF update that puts message ``message_id`` in a queue at ``offset``."""
    payload = _ADD_REF.pack(queue_id, offset)
    if tx_id is None:
        return Op.update(message_id, ADD_REF, payload)
    return Op.update_tx(tx_id, message_id, ADD_REF, payload)


def decode_add_ref(message_id: int, payload: bytes) -> tuple[int, int]:
    """ADD_REF: (queue id, offset); a record from before offsets has the message id."""
    if len(payload) == _U64.size:
        return _U64.unpack(payload)[0], message_id
    queue_id, offset = _ADD_REF.unpack(payload)
    return queue_id, offset


def decode_ref(payload: bytes) -> int:
    """ADD_REF / ACK_REF: the queue id (an ADD_REF's offset follows it)."""
    return int(_U64.unpack_from(payload)[0])


def decode_delivery_count(payload: bytes) -> tuple[int, int]:
    """DELIVERY_COUNT: (queue id, count)."""
    queue_id, count = _REF_COUNT.unpack(payload)
    return queue_id, count


def encode_page_ack(ack: PageAck) -> bytes:
    return _PAGE_ACK.pack(ack.queue_id, ack.page, ack.offset) + ack.address.encode()


def decode_page_ack(payload: bytes) -> PageAck:
    queue_id, page, offset = _PAGE_ACK.unpack_from(payload)
    return PageAck(queue_id, page, offset, bytes(payload[_PAGE_ACK.size :]).decode())


def encode_page_complete(done: PageComplete) -> bytes:
    return _PAGE_COMPLETE.pack(done.queue_id, done.page) + done.address.encode()


def decode_page_complete(payload: bytes) -> PageComplete:
    queue_id, page = _PAGE_COMPLETE.unpack_from(payload)
    return PageComplete(queue_id, page, bytes(payload[_PAGE_COMPLETE.size :]).decode())


def encode_page_tx(tx_id: int) -> bytes:
    return _U64.pack(tx_id)


def decode_page_tx(payload: bytes) -> int:
    """PAGE_TX: the committed transaction id of paged messages."""
    return int(_U64.unpack(payload)[0])


class Persistence:
    """Journal records for the broker; with ``storage=None`` (persistence disabled) a no-op."""

    def __init__(
        self,
        storage: Storage | None,
        node_id: str,
        large_messages: LargeMessageStore | None = None,
    ) -> None:
        self.storage = storage
        # Half a journal file: the record's updates and other records of its batch fit too.
        limit = storage.messages.settings.file_size // 2 if storage is not None else 0
        self.large = LargeMessages(large_messages if storage is not None else None, limit)
        self.node_id = node_id
        self._next_id = 1
        self._ceiling = 0  # ids below this are reserved
        self._reserved_ahead = False
        self._block_record: int | None = None
        self._last_bindings: Ticket | None = None
        self._persisted_addresses: set[int] = set()

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
        if self.storage is not None:
            record_id = _ID_BLOCK_RECORD_BASE | ceiling
            ops = [Op.add(record_id, ID_BLOCK_RECORD, _U64.pack(ceiling))]
            if self._block_record is not None:
                ops.append(Op.delete(self._block_record))
            self._block_record = record_id
            self._submit_bindings(ops)
        self._ceiling = ceiling

    # -- bindings ----------------------------------------------------------------------

    def _submit_bindings(self, ops: list[Op]) -> list[Ticket]:
        if self.storage is None:
            return []
        journal = self.storage.bindings
        ticket = Ticket(journal, journal.submit(ops, True))
        self._last_bindings = ticket
        return [ticket]

    def bindings_written(self) -> list[Ticket]:
        """A ticket done once every bindings-journal record submitted so far is durable (a
        journal completes its tickets in order): whoever made an address or queue without
        keeping its tickets (the broker's ``create_queue``) waits for this one."""
        return [self._last_bindings] if self._last_bindings is not None else []

    def store_address(self, address: Address) -> list[Ticket]:
        payload = _encode_fields(
            address.name,
            "".join(sorted(_ROUTING[rt] for rt in address.routing_types)),
            "1" if address.auto_created else "0",
        )
        if self.storage is None:
            return []
        known = address.id in self._persisted_addresses
        self._persisted_addresses.add(address.id)
        op = (
            Op.update(address.id, ADDRESS_RECORD, payload)
            if known
            else Op.add(address.id, ADDRESS_RECORD, payload)
        )
        return self._submit_bindings([op])

    def delete_address(self, address_id: int) -> list[Ticket]:
        if address_id not in self._persisted_addresses:
            return []
        self._persisted_addresses.discard(address_id)
        return self._submit_bindings([Op.delete(address_id)])

    def store_queue(self, spec: QueueSpec) -> list[Ticket]:
        payload = _encode_fields(
            spec.name,
            spec.address,
            _ROUTING[spec.routing_type],
            spec.filter or "",
            str(spec.max_consumers),
            "1" if spec.purge_on_no_consumers else "0",
            "1" if spec.auto_created else "0",
        )
        return self._submit_bindings([Op.add(spec.queue_id, QUEUE_RECORD, payload)])

    def delete_queue(self, queue_id: int) -> list[Ticket]:
        return self._submit_bindings([Op.delete(queue_id)])

    # -- messages ----------------------------------------------------------------------

    def _submit_messages(
        self, ops: list[Op], sync: bool | None = None, flush: bool = False
    ) -> list[Ticket]:
        if self.storage is None or not ops:
            return []
        journal = self.storage.messages
        tickets = [Ticket(journal, journal.submit(ops, sync, flush=flush))]
        if self._last_bindings is not None:
            tickets.append(self._last_bindings)
        return tickets

    def submit(self, ops: list[Op], *, awaited: bool = True) -> list[Ticket]:
        """Records of other parts of the broker (paging); not ``awaited``: written at once,
        synced by the next synced batch."""
        if awaited:
            return self._submit_messages(ops)
        return self._submit_messages(ops, sync=False, flush=True)

    def store_message(self, message: Message, queues: Iterable[Queue], offset: int) -> list[Ticket]:
        if self.storage is None:
            return []
        message.stored = True
        op, files = self._add_message(message)
        ops = [op]
        ops += [add_ref_op(message.message_id, q.id, offset) for q in queues]
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
        record_type = MESSAGE_RECORD
        if self.large.is_large(message):
            assert self.large.store is not None
            encoded, number = self.large.write(message)
            record_type = LARGE_MESSAGE_RECORD
            tickets.append(Ticket(self.large.store, number))
        elif encoded is None:
            encoded = encode_message(message)
        if tx_id is None:
            return Op.add(message.message_id, record_type, encoded), tickets
        return Op.add_tx(tx_id, message.message_id, record_type, encoded), tickets

    def acknowledge(
        self, records: list[tuple[int, int, bool]], awaited: bool = True, paged: Iterable[Op] = ()
    ) -> list[Ticket]:
        """``records``: (message id, queue id, last reference) for stored messages;
        ``paged``: the PAGE_ACK ops of depaged ones.

        Not ``awaited``: written at once (the OS has them, a process crash cannot undo
        them) but not fdatasynced; the next synced batch makes them durable.
        """
        ops = [self._ack_op(*r) for r in records]
        ops += paged
        large = self.large.forget(r[0] for r in records if r[2]) + self.large.released()
        if awaited or large:
            # A large message's file goes once its delete is durable: synced, waited or not.
            tickets = self._submit_messages(ops)
            self.large.delete_after(partial(self.wait, tickets), large)
            return tickets
        return self._submit_messages(ops, sync=False, flush=True)

    @staticmethod
    def _ack_op(message_id: int, queue_id: int, last: bool, tx_id: int | None = None) -> Op:
        if tx_id is None:
            if last:
                return Op.delete(message_id)
            return Op.update(message_id, ACK_REF, _U64.pack(queue_id))
        if last:
            return Op.delete_tx(tx_id, message_id)
        return Op.update_tx(tx_id, message_id, ACK_REF, _U64.pack(queue_id))

    def commit(
        self,
        sends: list[tuple[Message, list[Queue], int]],
        acks: list[tuple[int, int, bool] | None],
        tx_id: int,
        paged: list[Op],
    ) -> list[Ticket]:
        """One journal transaction (``tx_id``) for a client transaction's durable sends
        (message, queues, offset) and acks; ``paged``: its paging records (PAGE_ACK,
        PAGE_TX), already transactional."""
        ack_records = [a for a in acks if a is not None]
        if self.storage is None or not (sends or ack_records or paged):
            return []
        ops: list[Op] = list(paged)
        files: list[Ticket] = []
        for message, queues, offset in sends:
            message.stored = True
            op, tickets = self._add_message(message, tx_id)
            ops.append(op)
            files += tickets
            ops += [add_ref_op(message.message_id, q.id, offset, tx_id) for q in queues]
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
        forwarded: list[tuple[Message, list[Queue], int, bytes, bytes | None]],
        duplicates: DuplicateIDCache,
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
        try:
            for message, queues, offset, dup_id, encoded in forwarded:
                durable_queues = [q for q in queues if q.durable] if message.durable else []
                if self.storage is None or not durable_queues:
                    ops += duplicates.add(dup_id, None)
                    remembered.append(dup_id)
                    continue
                message.stored = True
                stored.append(message)
                message_id = message.message_id
                op, tickets = self._add_message(message, encoded=encoded)
                ops.append(op)
                files += tickets
                ops += [add_ref_op(message_id, q.id, offset) for q in durable_queues]
                ops += duplicates.add(dup_id, self.next_id())
                remembered.append(dup_id)
            if self.storage is None:
                return []
            sync = self.storage.messages.settings.sync_transactional
            return self._submit_messages(ops, sync) + files
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
        queues: list[Queue],
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
        """Record delivery counts of cancelled deliveries (not synced, as Artemis)."""
        ops = [
            Op.update(message_id, DELIVERY_COUNT, _REF_COUNT.pack(queue_id, count))
            for message_id, queue_id, count in counts
        ]
        self._submit_messages(ops, sync=False)

    def written(self) -> list[Ticket]:
        """Tickets done once every messages-journal record submitted so far is written:
        unawaited acknowledgements among them can then no longer be undone by a process
        crash (a closing connection waits for them before its deliveries go back)."""
        if self.storage is None or not self.storage.messages.last_ticket:
            return []
        journal = self.storage.messages
        return [Ticket(journal, journal.last_ticket)]

    @staticmethod
    async def wait(tickets: list[Ticket]) -> None:
        for ticket in tickets:
            await ticket.journal.wait(ticket.number)

    # -- recovery ----------------------------------------------------------------------

    def recover(self) -> RecoveredState:
        """Rebuild the model from what the journals loaded at open."""
        state = RecoveredState()
        if self.storage is None:
            return state
        bindings, messages = self.storage.bindings.loaded, self.storage.messages.loaded
        if bindings is None or messages is None:
            raise RuntimeError("recover() runs once, on the reports of freshly opened journals")
        # The model takes what it needs; the reports' copies of a backlog would only use memory.
        self.storage.bindings.loaded = self.storage.messages.loaded = None
        highest = max(
            self._recover_bindings(bindings.records, state),
            self._recover_messages(messages.records, state),
        )
        self._next_id = highest + 1
        self._ceiling = 0
        self._readdress(state)
        return state

    def _readdress(self, state: RecoveredState) -> None:
        """Give a queue whose address has no record (a damaged or hand-edited bindings
        journal) its address again, stored: the node starts with the queue and its messages
        instead of failing."""
        addresses = {address.name: address for address in state.addresses}
        for spec in state.queues:
            address = addresses.get(spec.address)
            if address is not None and spec.routing_type in address.routing_types:
                continue
            log.warning(
                "queue %s: its address %s (%s) has no record in the bindings journal; "
                "it is created again",
                spec.name,
                spec.address,
                spec.routing_type.value,
            )
            if address is None:
                address = Address(self.next_id(), spec.address, set(), auto_created=True)
                addresses[spec.address] = address
                state.addresses.append(address)
            address.routing_types.add(spec.routing_type)
            self.store_address(address)

    def _recover_bindings(self, records: Iterable[Record], state: RecoveredState) -> int:
        """Addresses, queues and the id block; returns the highest id seen."""
        highest = 0
        for record in records:
            if record.record_type != ID_BLOCK_RECORD:
                highest = max(highest, record.id)
            payload = record.payload
            for update in record.updates:
                payload = update.payload
            if record.record_type == ID_BLOCK_RECORD:
                (ceiling,) = _U64.unpack(payload)
                highest = max(highest, ceiling)
                self._block_record = record.id
            elif record.record_type == ADDRESS_RECORD:
                state.addresses.append(decode_address(record.id, payload))
                self._persisted_addresses.add(record.id)
            elif record.record_type == QUEUE_RECORD:
                state.queues.append(decode_queue(record.id, payload))
        return highest

    def _recover_messages(self, records: Iterable[Record], state: RecoveredState) -> int:
        """Messages with their live references (the queues in ``state``) and duplicate ids;
        references to deleted queues are removed. Returns the highest id seen."""
        queue_ids = {spec.queue_id for spec in state.queues}
        highest = 0
        orphans: list[Op] = []
        gone_files: list[int] = []
        for record in records:
            highest = max(highest, record.id)
            if record.record_type == DUPLICATE_ID_RECORD:
                state.duplicate_ids.append((record.id, bytes(record.payload)))
                continue
            if record.record_type == CLIENT_DUPLICATE_ID_RECORD:
                state.client_duplicate_ids.append((record.id, bytes(record.payload)))
                continue
            if record.record_type == PAGE_ACK:
                ack = decode_page_ack(record.payload)
                state.page_acks.append((record.id, ack.queue_id, ack.page, ack.offset, ack.address))
                continue
            if record.record_type == PAGE_COMPLETE:
                done = decode_page_complete(record.payload)
                state.page_completes.append((record.id, done.queue_id, done.page, done.address))
                continue
            if record.record_type == PAGE_TX:
                state.page_txs[decode_page_tx(record.payload)] = record.id
                continue
            if record.record_type in (OFFSET_MARK, SEALED_STREAM):
                payload = record.updates[-1].payload if record.updates else record.payload
                queue_id, stream, mark = decode_offset_mark(payload)
                state.offset_marks.append((record.id, record.record_type, queue_id, stream, mark))
                continue
            if record.record_type == LARGE_PAGE_REF:
                if not self.large.recover_page_ref(record.id, record.payload):
                    orphans.append(Op.delete(record.id))
                continue
            if record.record_type == LARGE_MESSAGE_RECORD:
                large = self.large.recover(record.id, record.payload)
                if large is None:  # its file is missing: logged, and the record goes
                    orphans.append(Op.delete(record.id))
                    continue
                message = large
            elif record.record_type == MESSAGE_RECORD:
                message = decode_message(record.id, record.payload)
            else:
                continue
            message.stored = True
            refs: Counter[int] = Counter()
            counts: dict[int, int] = {}
            offsets: dict[int, int] = {}
            for update in record.updates:
                if update.record_type == ADD_REF:
                    queue_id, offsets[queue_id] = decode_add_ref(record.id, update.payload)
                    refs[queue_id] += 1
                elif update.record_type == ACK_REF:
                    refs[_U64.unpack(update.payload)[0]] -= 1
                elif update.record_type == DELIVERY_COUNT:
                    queue_id, count = _REF_COUNT.unpack(update.payload)
                    counts[queue_id] = count
            live = [qid for qid, n in refs.items() if n > 0 and qid in queue_ids]
            if not live:
                orphans.append(Op.delete(record.id))
                gone_files += self.large.forget([record.id])
                continue
            message.ref_count = len(live)
            stamped = OFFSET_FROM_BYTES in record.payload  # moved here by a scale-down
            for qid in live:
                state.messages_by_queue.setdefault(qid, []).append(
                    (message, counts.get(qid, 0), offsets[qid], stamped)
                )
            for qid, n in refs.items():
                if n > 0 and qid not in queue_ids:  # its queue is gone
                    orphans.append(Op.update(record.id, ACK_REF, _U64.pack(qid)))
        if orphans:
            log.info("recovery: removing %d message record(s) of deleted queues", len(orphans))
            tickets = self._submit_messages(orphans)
            self.large.delete_after(partial(self.wait, tickets), gone_files)
        self.large.finish_recovery()
        for queue_refs in state.messages_by_queue.values():
            queue_refs.sort(key=_offset_of)
        return highest


def _offset_of(ref: tuple[Message, int, int, bool]) -> int:
    return ref[2]
