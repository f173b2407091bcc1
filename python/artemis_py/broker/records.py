"""Every journal record type of the broker, numbered in one table, with its codec.

The broker writes two journals (:mod:`artemis_py.storage`): the *bindings* journal (addresses,
queues, id-block reservations, message groups' decisions) and the *messages* journal
(messages, their references in queues, acknowledgements, delivery counts and redelivery
times, duplicate ids, paging cursors, offset marks, large messages). A record has a type
number; an *update* of a record (``Op.update``) has a type number of its own. :data:`RECORD_TYPES` lists them all, so a number is taken in one place and
``artemis-py data print`` names every record from this table; the codecs below it are the
only code that lays out or reads a record's payload. Where a record's meaning is explained:
the module named in its table entry.

This module is the lowest floor of the broker: it imports the message codec
(:mod:`artemis_py.broker.message`), the configuration's enums and the storage's ``Op``, and
nothing else of the broker. Payload layouts are fixed: journals written by an older node load
unchanged (``tests/storage/test_record_formats.py`` pins each one's bytes).
"""

from __future__ import annotations

import struct
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal, Protocol

from artemis_py.broker.message import Message, decode_message, encode_message
from artemis_py.config import RoutingType
from artemis_py.storage import Op

JournalName = Literal["bindings", "messages"]


@dataclass(frozen=True, slots=True)
class RecordType:
    """One record type: its number, name (as ``data print`` shows it), journal, the module
    of the broker that explains it (``home``) and, for an update, the record type it updates.
    Its payload's layout: the codec below."""

    number: int
    name: str
    journal: JournalName
    home: str
    update_of: int | None = None


# -- the numbers ---------------------------------------------------------------------------
# Bindings journal.
ADDRESS_RECORD = 1
QUEUE_RECORD = 2
ID_BLOCK_RECORD = 3
GROUP_BINDING_RECORD = 4  # Artemis keeps its GroupBinding records in the bindings journal too
# Messages journal. 10-14 and 30 are Artemis's numbers (JournalRecordIds) for the same idea.
MESSAGE_RECORD = 10
ADD_REF = 11
ACK_REF = 12
DELIVERY_COUNT = 13
DUPLICATE_ID_RECORD = 14
PAGE_ACK = 15
PAGE_COMPLETE = 16
PAGE_TX = 17
OFFSET_MARK = 18
CLIENT_DUPLICATE_ID_RECORD = 19
SEALED_STREAM = 20
ROUTE_TO = 21
SCHEDULED_DELIVERY_TIME = 22  # Artemis's SET_SCHEDULED_DELIVERY_TIME
LARGE_MESSAGE_RECORD = 30
LARGE_PAGE_REF = 31

_B: JournalName = "bindings"
_M: JournalName = "messages"

RECORD_TYPES: tuple[RecordType, ...] = (
    # number, name as data print shows it, journal, where its meaning is explained
    RecordType(ADDRESS_RECORD, "ADDRESS", _B, "routing.post_office"),
    RecordType(QUEUE_RECORD, "QUEUE", _B, "queue"),
    RecordType(ID_BLOCK_RECORD, "ID_BLOCK", _B, "persistence"),
    RecordType(GROUP_BINDING_RECORD, "GROUP_BINDING", _B, "routing.grouping"),
    RecordType(MESSAGE_RECORD, "MESSAGE", _M, "message"),
    RecordType(ADD_REF, "ADD_REF", _M, "persistence", update_of=MESSAGE_RECORD),
    RecordType(ACK_REF, "ACK_REF", _M, "acknowledging", update_of=MESSAGE_RECORD),
    RecordType(DELIVERY_COUNT, "DELIVERY_COUNT", _M, "acknowledging", update_of=MESSAGE_RECORD),
    RecordType(ROUTE_TO, "ROUTE_TO", _M, "routing.forwarding", update_of=MESSAGE_RECORD),
    RecordType(
        SCHEDULED_DELIVERY_TIME,
        "SCHEDULED_DELIVERY_TIME",
        _M,
        "scheduling",
        update_of=MESSAGE_RECORD,
    ),
    RecordType(DUPLICATE_ID_RECORD, "DUPLICATE_ID", _M, "duplicate_cache"),
    RecordType(PAGE_ACK, "PAGE_ACK", _M, "paging.cursor"),
    RecordType(PAGE_COMPLETE, "PAGE_COMPLETE", _M, "paging.cursor"),
    RecordType(PAGE_TX, "PAGE_TX", _M, "paging.manager"),
    RecordType(OFFSET_MARK, "OFFSET_MARK", _M, "offset_reading"),
    RecordType(CLIENT_DUPLICATE_ID_RECORD, "CLIENT_DUPLICATE_ID", _M, "duplicate_cache"),
    RecordType(SEALED_STREAM, "SEALED_STREAM", _M, "adopted_streams"),
    RecordType(LARGE_MESSAGE_RECORD, "LARGE_MESSAGE", _M, "large_messages"),
    RecordType(LARGE_PAGE_REF, "LARGE_PAGE_REF", _M, "large_messages"),
)
"""Every record type (``tests/storage/test_record_formats.py`` checks the numbers are unique
per journal and pins each payload's bytes)."""

BINDINGS_RECORD_NAMES = {t.number: t.name for t in RECORD_TYPES if t.journal == "bindings"}
MESSAGES_RECORD_NAMES = {t.number: t.name for t in RECORD_TYPES if t.journal == "messages"}
"""Display names of each journal's record types (``artemis-py data print``)."""


def record_name(journal: JournalName, number: int) -> str:
    """The name of record type ``number`` of ``journal`` (``type-N`` for an unknown one)."""
    names = BINDINGS_RECORD_NAMES if journal == "bindings" else MESSAGES_RECORD_NAMES
    return names.get(number, f"type-{number}")


_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_REF_COUNT = struct.Struct("<QI")
_ADD_REF = struct.Struct("<QQ")
_SCHEDULED_TIME = struct.Struct("<QQ")
_PAGE_ACK = struct.Struct("<QQQ")
_PAGE_COMPLETE = struct.Struct("<QQ")
_MARK = struct.Struct("<QQ")
_PAGE_REF = struct.Struct("<QQQQH")  # file id, page, offset, tx id, queue count
_ROUTING = {RoutingType.ANYCAST: "A", RoutingType.MULTICAST: "M"}
_ROUTING_BY_CODE = {v: k for k, v in _ROUTING.items()}


def _encode_fields(*values: str) -> bytes:
    return "\0".join(values).encode()


def _decode_fields(payload: bytes) -> list[str]:
    return bytes(payload).decode().split("\0")


def _flag(value: bool) -> str:
    return "1" if value else "0"


# -- bindings journal ------------------------------------------------------------------------


class StoredAddress(Protocol):
    """What an ADDRESS record holds of an address (the post office's Address has it)."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def routing_types(self) -> AbstractSet[RoutingType]: ...
    @property
    def auto_created(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class AddressRecord:
    """ADDRESS (added, then updated when its routing types change; record id: the address
    id): what an address is made from again at start."""

    id: int
    name: str
    routing_types: frozenset[RoutingType]
    auto_created: bool = False


def encode_address(address: StoredAddress) -> bytes:
    """``name \\0 routing codes (A anycast, M multicast; sorted) \\0 auto-created (1/0)``."""
    routing = "".join(sorted(_ROUTING[rt] for rt in address.routing_types))
    return _encode_fields(address.name, routing, _flag(address.auto_created))


def decode_address(record_id: int, payload: bytes) -> AddressRecord:
    name, routing, auto = _decode_fields(payload)
    routing_types = frozenset(_ROUTING_BY_CODE[c] for c in routing)
    return AddressRecord(record_id, name, routing_types, auto == "1")


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """What the bindings journal records about a queue (QUEUE, record id: the queue id), and
    what a queue is made from (``durable`` and ``temporary`` are not recorded: a recorded
    queue is durable)."""

    queue_id: int
    name: str
    address: str
    routing_type: RoutingType
    filter: str | None = None
    durable: bool = True
    temporary: bool = False
    max_consumers: int = -1
    purge_on_no_consumers: bool = False
    auto_created: bool = False
    # How it dispatches (:mod:`artemis_py.broker.message_groups`, last-value queues).
    exclusive: bool = False
    group_rebalance: bool = False
    group_rebalance_pause_dispatch: bool = False
    group_buckets: int = -1
    group_first_key: str | None = None
    last_value_key: str | None = None
    ring_size: int = -1
    consumers_before_dispatch: int = 0
    delay_before_dispatch: int = -1
    non_destructive: bool = False


def encode_queue(spec: QueueSpec) -> bytes:
    """Name, address, routing code, filter (empty: none), max consumers, purge on no
    consumers (1/0), auto-created (1/0), then the dispatch fields: exclusive, group rebalance,
    its pause (1/0), group buckets, group first key and last-value key (empty: none), ring
    size, consumers before dispatch, delay before dispatch and non-destructive (1/0): UTF-8,
    split by ``\\0``. A record written before the dispatch fields has only the first seven,
    one written before the ring and dispatch delays only the first thirteen, and one written
    before non-destructive queues only the first sixteen."""
    return _encode_fields(
        spec.name,
        spec.address,
        _ROUTING[spec.routing_type],
        spec.filter or "",
        str(spec.max_consumers),
        _flag(spec.purge_on_no_consumers),
        _flag(spec.auto_created),
        _flag(spec.exclusive),
        _flag(spec.group_rebalance),
        _flag(spec.group_rebalance_pause_dispatch),
        str(spec.group_buckets),
        spec.group_first_key or "",
        spec.last_value_key or "",
        str(spec.ring_size),
        str(spec.consumers_before_dispatch),
        str(spec.delay_before_dispatch),
        _flag(spec.non_destructive),
    )


def decode_queue(record_id: int, payload: bytes) -> QueueSpec:
    fields = _decode_fields(payload)
    name, address, routing, filt, max_consumers, purge, auto = fields[:7]
    exclusive, rebalance, pause, buckets, first_key, lv_key = fields[7:13] or (
        "0",
        "0",
        "0",
        "-1",
        "",
        "",
    )
    ring, before_count, before_delay = fields[13:16] or ("-1", "0", "-1")
    (non_destructive,) = fields[16:17] or ("0",)
    return QueueSpec(
        queue_id=record_id,
        name=name,
        address=address,
        routing_type=_ROUTING_BY_CODE[routing],
        filter=filt or None,
        max_consumers=int(max_consumers),
        purge_on_no_consumers=purge == "1",
        auto_created=auto == "1",
        exclusive=exclusive == "1",
        group_rebalance=rebalance == "1",
        group_rebalance_pause_dispatch=pause == "1",
        group_buckets=int(buckets),
        group_first_key=first_key or None,
        last_value_key=lv_key or None,
        ring_size=int(ring),
        consumers_before_dispatch=int(before_count),
        delay_before_dispatch=int(before_delay),
        non_destructive=non_destructive == "1",
    )


#: Id-block records live in a record-id space of their own, above every id handed out.
ID_BLOCK_RECORD_BASE = 1 << 63


def group_binding_op(record_id: int, group_id: str, cluster_name: str) -> Op:
    """A LOCAL grouping handler's decision: message group ``group_id`` goes to the binding
    ``cluster_name`` (:mod:`.routing.grouping`); the two names, NUL-separated."""
    return Op.add(record_id, GROUP_BINDING_RECORD, _encode_fields(group_id, cluster_name))


def decode_group_binding(payload: bytes) -> tuple[str, str]:
    group_id, cluster_name = _decode_fields(payload)
    return group_id, cluster_name


def id_block_op(ceiling: int) -> Op:
    """The ID_BLOCK record reserving every id below ``ceiling`` (its record id is above any
    id handed out); ``<Q`` the ceiling."""
    return Op.add(ID_BLOCK_RECORD_BASE | ceiling, ID_BLOCK_RECORD, _U64.pack(ceiling))


def decode_id_block(payload: bytes) -> int:
    """ID_BLOCK: the ceiling of the reserved ids."""
    return int(_U64.unpack(payload)[0])


# -- messages journal: messages and their references ---------------------------------------


#: MESSAGE (record id: the message id): the message's headers and body
#: (:func:`~artemis_py.broker.message.encode_message`; decoding raises ValueError on a
#: record it cannot read).
encode_message_record = encode_message
decode_message_record = decode_message


def encode_large_message(message: Message, length: int) -> bytes:
    """LARGE_MESSAGE (record id: the message id): the body's length, then the headers; the
    body is in the message's file."""
    return _U64.pack(length) + encode_message(message, with_body=False)


def decode_large_message(message_id: int, payload: bytes) -> tuple[int, Message]:
    """LARGE_MESSAGE: (the body's length, the message without its body)."""
    (length,) = _U64.unpack_from(payload)
    return length, decode_message(message_id, payload[_U64.size :])


def add_ref_op(message_id: int, queue_id: int, offset: int, tx_id: int | None = None) -> Op:
    """The ADD_REF update that puts message ``message_id`` in a queue at ``offset``:
    ``<QQ`` queue id, offset (a record written before offsets has ``<Q`` queue id only)."""
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


def route_to_op(
    message_id: int, queue_id: int, names: tuple[str, ...], tx_id: int | None = None
) -> Op:
    """The ROUTE_TO update beside a store-and-forward queue's ADD_REF: the names of the
    bindings on the neighbour that the message is for; ``<Q`` queue id, then the names
    (UTF-8, split by ``\\0``; none: nothing). (A record from before it has them as
    properties of the message: :data:`~artemis_py.broker.message.ROUTE_TO_PREFIX`.)"""
    payload = _U64.pack(queue_id) + "\0".join(names).encode()
    if tx_id is None:
        return Op.update(message_id, ROUTE_TO, payload)
    return Op.update_tx(tx_id, message_id, ROUTE_TO, payload)


def decode_route_to(payload: bytes) -> tuple[int, tuple[str, ...]]:
    """ROUTE_TO: (queue id, binding names)."""
    (queue_id,) = _U64.unpack_from(payload)
    names = bytes(payload[_U64.size :]).decode()
    return queue_id, tuple(names.split("\0")) if names else ()


def ack_ref_op(message_id: int, queue_id: int, tx_id: int | None = None) -> Op:
    """The ACK_REF update: a queue acknowledged message ``message_id`` (not its last one);
    ``<Q`` queue id."""
    payload = _U64.pack(queue_id)
    if tx_id is None:
        return Op.update(message_id, ACK_REF, payload)
    return Op.update_tx(tx_id, message_id, ACK_REF, payload)


def decode_ref(payload: bytes) -> int:
    """ADD_REF / ACK_REF: the queue id (an ADD_REF's offset follows it)."""
    return int(_U64.unpack_from(payload)[0])


def delivery_count_op(message_id: int, queue_id: int, count: int) -> Op:
    """The DELIVERY_COUNT update: a cancelled delivery's count in a queue; ``<QI`` queue id,
    count."""
    return Op.update(message_id, DELIVERY_COUNT, _REF_COUNT.pack(queue_id, count))


def decode_delivery_count(payload: bytes) -> tuple[int, int]:
    """DELIVERY_COUNT: (queue id, count)."""
    queue_id, count = _REF_COUNT.unpack(payload)
    return queue_id, count


def scheduled_time_op(message_id: int, queue_id: int, due_ms: int) -> Op:
    """The SCHEDULED_DELIVERY_TIME update: the reference of message ``message_id`` in a
    queue is held until ``due_ms`` (epoch ms; a redelivery delay, :mod:`.scheduling`);
    ``<QQ`` queue id, time. The latest one of a queue wins."""
    return Op.update(message_id, SCHEDULED_DELIVERY_TIME, _SCHEDULED_TIME.pack(queue_id, due_ms))


def decode_scheduled_time(payload: bytes) -> tuple[int, int]:
    """SCHEDULED_DELIVERY_TIME: (queue id, time in epoch ms)."""
    queue_id, due_ms = _SCHEDULED_TIME.unpack(payload)
    return queue_id, due_ms


# -- messages journal: duplicate ids ---------------------------------------------------------


def duplicate_id_op(record_id: int, dup_id: bytes) -> Op:
    """DUPLICATE_ID: a cluster bridge's duplicate id (the payload is the id itself)."""
    return Op.add(record_id, DUPLICATE_ID_RECORD, dup_id)


def encode_client_id(address: str, dup_id: str) -> bytes:
    """CLIENT_DUPLICATE_ID's payload: a client send's ``_AMQ_DUPL_ID`` on ``address``;
    ``<I`` the address's length, the address, the id (UTF-8)."""
    name = address.encode()
    return _U32.pack(len(name)) + name + dup_id.encode()


def decode_client_id(payload: bytes) -> tuple[str, str]:
    """CLIENT_DUPLICATE_ID: (address, id)."""
    data = bytes(payload)
    (length,) = _U32.unpack_from(data)
    end = _U32.size + length
    return data[_U32.size : end].decode(), data[end:].decode("utf-8", "backslashreplace")


# -- messages journal: paging cursors --------------------------------------------------------


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


def encode_page_ack(ack: PageAck) -> bytes:
    """``<QQQ`` queue id, page, offset, then the address (UTF-8)."""
    return _PAGE_ACK.pack(ack.queue_id, ack.page, ack.offset) + ack.address.encode()


def decode_page_ack(payload: bytes) -> PageAck:
    queue_id, page, offset = _PAGE_ACK.unpack_from(payload)
    return PageAck(queue_id, page, offset, bytes(payload[_PAGE_ACK.size :]).decode())


def encode_page_complete(done: PageComplete) -> bytes:
    """``<QQ`` queue id, page, then the address (UTF-8)."""
    return _PAGE_COMPLETE.pack(done.queue_id, done.page) + done.address.encode()


def decode_page_complete(payload: bytes) -> PageComplete:
    queue_id, page = _PAGE_COMPLETE.unpack_from(payload)
    return PageComplete(queue_id, page, bytes(payload[_PAGE_COMPLETE.size :]).decode())


def encode_page_tx(tx_id: int) -> bytes:
    """``<Q`` the transaction id."""
    return _U64.pack(tx_id)


def decode_page_tx(payload: bytes) -> int:
    """PAGE_TX: the committed transaction id of paged messages."""
    return int(_U64.unpack(payload)[0])


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


# -- messages journal: offsets and streams ---------------------------------------------------

#: The message property a scale-down stamps a moved message with (:mod:`.streams`); it is
#: journaled with the message, so recovery adopts a stamped message again.
OFFSET_FROM = "_AMQ_OFFSET_FROM"
#: How the property's name looks in an encoded message: a cheap test before decoding it.
OFFSET_FROM_BYTES = OFFSET_FROM.encode()


def encode_offset_mark(queue_id: int, stream: str, mark: int) -> bytes:
    """OFFSET_MARK (a queue's offset mark for a stream) and SEALED_STREAM (an adopted
    stream's final end) share this layout: ``<QQ`` queue id, mark, then the stream id."""
    return _MARK.pack(queue_id, mark) + stream.encode()


def decode_offset_mark(payload: bytes) -> tuple[int, str, int]:
    """OFFSET_MARK / SEALED_STREAM: (queue id, stream, mark)."""
    queue_id, mark = _MARK.unpack_from(payload)
    return queue_id, bytes(payload[_MARK.size :]).decode(), mark


# -- messages journal: large messages --------------------------------------------------------


@dataclass(slots=True)
class PageRef:
    """LARGE_PAGE_REF: the page record at (``page``, ``offset``) of ``address``'s store
    refers to the file of ``file_id``, for ``queue_ids`` (those that have still to
    acknowledge it, at run time)."""

    file_id: int
    address: str
    page: int
    offset: int
    tx_id: int
    queue_ids: set[int]


def encode_page_ref(ref: PageRef) -> bytes:
    """``<QQQQH`` file id, page, offset, tx id, queue count; the queue ids (``<Q`` each,
    sorted); the address (UTF-8)."""
    head = _PAGE_REF.pack(ref.file_id, ref.page, ref.offset, ref.tx_id, len(ref.queue_ids))
    ids = b"".join(_U64.pack(q) for q in sorted(ref.queue_ids))
    return head + ids + ref.address.encode()


def decode_page_ref(payload: bytes) -> PageRef:
    file_id, page, offset, tx_id, count = _PAGE_REF.unpack_from(payload)
    pos = _PAGE_REF.size
    ids = {_U64.unpack_from(payload, pos + 8 * i)[0] for i in range(count)}
    address = bytes(payload[pos + 8 * count :]).decode()
    return PageRef(file_id, address, page, offset, tx_id, ids)


def page_ref_op(record_id: int, ref: PageRef) -> Op:
    return Op.add(record_id, LARGE_PAGE_REF, encode_page_ref(ref))
