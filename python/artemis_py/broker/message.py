"""Messages and message references: the broker's unit of work.

A :class:`Message` is stored once however many queues it is routed to; each queue holds a
:class:`MessageReference` to it (Artemis's model). The message counts its live references so
the storage layer knows when the last acknowledgement may delete it from the journal.

The journal encoding (:func:`encode_message` / :func:`decode_message`) is versioned and
independent of any wire protocol: protocol headers that are user data travel as properties.

A stored large message keeps its body in a file, not in memory: :attr:`Message.body_ref`
(a :class:`LargeBody`) names the file and its length, and whoever sends the message
streams the body from the file (:mod:`artemis_py.storage.large_message_files`).
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from artemis_py._native import encode_message_record
from artemis_py.config import RoutingType

if TYPE_CHECKING:
    from artemis_py.broker.queue import Queue
    from artemis_py.storage.large_message_files import LargeMessageStore

DEFAULT_PRIORITY = 4
# The old form of :attr:`Message.route_to`: a property per store-and-forward queue (Artemis's
# _AMQ_ROUTE_TO), its value a JSON list of binding names. Journals written before route_to
# have it, and page files still do (see :func:`encode_message`); decoding lifts it out.
ROUTE_TO_PREFIX = "_AMQ_ROUTE_TO."
_ROUTE_TO_BYTES = ROUTE_TO_PREFIX.encode()
GROUP_ID_PROPERTY = "_AMQ_GROUP_ID"  # (Artemis's name; see message_groups)
SCHEDULED_PROPERTY = "_AMQ_SCHED_DELIVERY"  # (Artemis's name; see scheduling)
_GROUP_ID_BYTES = GROUP_ID_PROPERTY.encode()
_ENCODING_VERSION = 1

# version, flags, routing type, priority, timestamp, expiration, address length
_HEAD = struct.Struct("<BBBBqqH")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_FLAG_DURABLE = 1
_FLAG_LARGE = 2  # a neighbour stores a forwarded large message as large too
# The body is in the large-message file of the record's message id; the record ends with
# the body's length instead of the body (a page record of a large message).
_FLAG_BODY_IN_FILE = 4
# Its SCHEDULED_PROPERTY is the node's schedule (a client's header of that name is not).
_FLAG_SCHEDULED = 8

#: What a message whose body is in a file costs in memory besides its headers: the
#: reference object and the message's slots (an estimate, as the 64 bytes of ``size`` are).
REFERENCE_OVERHEAD = 128


def now_ms() -> int:
    """The clock of timestamps and expirations: milliseconds since the epoch."""
    return int(time.time() * 1000)


class LargeBody:
    """A body kept in a large-message file: the file of message ``file_id``, ``length``
    bytes. ``store`` is None until the broker attaches it (a decoded page record)."""

    __slots__ = ("file_id", "length", "store", "ticket")

    def __init__(self, store: LargeMessageStore | None, file_id: int, length: int) -> None:
        self.store = store
        self.file_id = file_id
        self.length = length
        self.ticket = 0  # the store's ticket that writes the file (0: written before a restart)

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"LargeBody(file_id={self.file_id}, length={self.length})"


_ROUTING_CODES = {None: 0, RoutingType.ANYCAST: 1, RoutingType.MULTICAST: 2}
_ROUTING_BY_CODE = {code: rt for rt, code in _ROUTING_CODES.items()}


class Message:
    """An immutable message body and headers with a mutable live-reference count."""

    __slots__ = (
        "_headers_size",
        "_property_map",
        "address",
        "body",
        "body_ref",
        "durable",
        "encoded",
        "expiration",
        "group_id",
        "large",
        "message_id",
        "priority",
        "properties",
        "ref_count",
        "route_to",
        "routing_type",
        "scheduled",
        "stored",
        "timestamp",
    )

    def __init__(
        self,
        message_id: int,
        address: str,
        *,
        body: bytes = b"",
        properties: tuple[tuple[str, str], ...] = (),
        routing_type: RoutingType | None = None,
        durable: bool = False,
        priority: int = DEFAULT_PRIORITY,
        timestamp: int = 0,
        expiration: int = 0,
        group_id: str | None = None,
        scheduled: int = 0,
    ) -> None:
        self.message_id = message_id
        self.address = address
        self.routing_type = routing_type
        self.durable = durable
        self.priority = priority
        self.timestamp = timestamp
        self.expiration = expiration  # epoch ms; 0 = never expires
        # Its _AMQ_GROUP_ID property (:mod:`artemis_py.broker.message_groups`), kept apart:
        # queues look at it for every delivery.
        self.group_id = group_id
        # When it may be delivered (epoch ms; 0: at once), also its _AMQ_SCHED_DELIVERY
        # property (:mod:`artemis_py.broker.scheduling`).
        self.scheduled = scheduled
        self.properties = properties
        self.body = body
        self.ref_count = 0
        self.stored = False  # written to the messages journal
        # Stored as a file of its own (see broker/large_messages.py); decided on arrival.
        self.large = False
        # Set once the body is in a file; ``body`` is then emptied once the file is durable.
        self.body_ref: LargeBody | None = None
        self._property_map: dict[str, str] | None = None
        self._headers_size = -1  # of size: computed once per properties (see _size_of_headers)
        # Bound for other nodes: per store-and-forward queue (by name), the names of the
        # bindings over there it is for (:mod:`artemis_py.broker.routing.forwarding`). Beside
        # the message, never in its encoding: the bytes journaled are the bytes forwarded.
        self.route_to: dict[str, tuple[str, ...]] | None = None
        # Its encoding (:func:`encode_message`, body included) when kept for a bridge: the
        # bytes journaled here or received from a neighbour, sent on as they are.
        self.encoded: bytes | None = None

    @property
    def body_length(self) -> int:
        ref = self.body_ref
        return len(self.body) if ref is None else ref.length

    @property
    def size(self) -> int:
        """Approximate wire size in bytes (body included, in memory or not), what
        flow-control windows and ``AMQSize`` count."""
        ref = self.body_ref  # (body_length and the headers' cached size, inlined: it is hot)
        size = (len(self.body) if ref is None else ref.length) + (
            self._headers_size if self._headers_size >= 0 else self._size_of_headers()
        )
        return size if self.route_to is None else size + self._route_size()

    @property
    def memory_size(self) -> int:
        """What the message holds in memory, what paging's limits count: its size, or
        for a body in a file, the headers and :data:`REFERENCE_OVERHEAD`."""
        if self.body_ref is None:
            return self.size
        return (
            len(self.body)
            + self._size_of_headers()
            + REFERENCE_OVERHEAD
            + (0 if self.route_to is None else self._route_size())
        )

    def _size_of_headers(self) -> int:
        """The properties' part of :attr:`size`, with 64 bytes for the fixed headers; kept,
        since flow control, paging and large-message checks ask for it several times."""
        if self._headers_size < 0:
            size = 64
            for key, value in self.properties:  # (a loop: a third faster than sum())
                size += len(key) + len(value) + 2
            self._headers_size = size
        return self._headers_size

    def _route_size(self) -> int:
        """What :attr:`route_to` counts for, as much as when it was a property (Artemis's
        _AMQ_ROUTE_TO is one, counted in the message's size)."""
        assert self.route_to is not None
        return sum(
            len(ROUTE_TO_PREFIX) + len(queue) + sum(len(n) + 4 for n in names) + 4
            for queue, names in self.route_to.items()
        )

    def property(self, name: str) -> str | None:
        """The first value of a user property (STOMP: first header wins)."""
        if self._property_map is None:
            props: dict[str, str] = {}
            for key, value in self.properties:
                props.setdefault(key, value)
            self._property_map = props
        return self._property_map.get(name)

    def filter_value(self, name: str) -> object:
        """Resolve an identifier of a filter expression (Artemis's special names first)."""
        special = _SPECIAL_IDENTIFIERS.get(name)
        if special is not None:
            return special(self)
        return self.property(name)

    def set_properties(self, updates: dict[str, str]) -> None:
        """Add or replace properties (before the message is stored)."""
        kept = tuple((k, v) for k, v in self.properties if k not in updates)
        self.properties = kept + tuple(updates.items())
        self._property_map = None
        self._headers_size = -1
        if GROUP_ID_PROPERTY in updates:
            self.group_id = updates[GROUP_ID_PROPERTY]

    def user_properties(self) -> tuple[tuple[str, str], ...]:
        """The properties (the internal routing ones are never among them: route_to)."""
        return self.properties

    def copy(self, message_id: int) -> Message:
        """The same message under a new id (redistribution moves a copy)."""
        copy = Message(
            message_id,
            self.address,
            body=self.body,
            properties=self.properties,
            routing_type=self.routing_type,
            durable=self.durable,
            priority=self.priority,
            timestamp=self.timestamp,
            expiration=self.expiration,
            group_id=self.group_id,
            scheduled=self.scheduled,
        )
        copy.large = self.large
        copy.body_ref = self.body_ref  # stored under its own id, its file is a link to this one
        return copy

    def with_address(self, message_id: int, address: str) -> Message:
        """A copy under a new id and address (dead-lettering, expiry)."""
        copy = Message(
            message_id,
            address,
            body=self.body,
            properties=self.properties,
            routing_type=None,
            durable=self.durable,
            priority=self.priority,
            timestamp=self.timestamp,
            expiration=0,
            group_id=self.group_id,
        )
        copy.large = self.large
        copy.body_ref = self.body_ref
        return copy

    def __repr__(self) -> str:
        return f"Message(id={self.message_id}, address={self.address!r}, size={self.body_length})"


_SPECIAL_IDENTIFIERS: dict[str, Callable[[Message], object]] = {
    "AMQPriority": lambda m: m.priority,
    "JMSPriority": lambda m: m.priority,
    "AMQTimestamp": lambda m: m.timestamp,
    "JMSTimestamp": lambda m: m.timestamp,
    "AMQExpiration": lambda m: m.expiration,
    "JMSExpiration": lambda m: m.expiration,
    "AMQDurable": lambda m: "DURABLE" if m.durable else "NON_DURABLE",
    "JMSDeliveryMode": lambda m: "PERSISTENT" if m.durable else "NON_PERSISTENT",
    "AMQSize": lambda m: m.size,
    "AMQAddress": lambda m: m.address,
    "AMQGroupID": lambda m: m.group_id,
    "JMSMessageID": lambda m: f"ID:{m.message_id}",
    "AMQUserID": lambda m: f"ID:{m.message_id}",
}


class MemoryShare(Protocol):
    """A message's share of its address's memory
    (:class:`~artemis_py.broker.paging.address.Held`): given back with its last reference."""

    def release_one(self) -> None: ...


class MessageReference:
    """One message in one queue, with its delivery count there.

    ``offset``: its position in the queue (:mod:`artemis_py.broker.offset_reading`), in the
    node's own stream or, when ``stream`` is set, in that stream (adopted from a node that
    scaled down, :mod:`artemis_py.broker.adopted_streams`); ``paged``:
    where the message is in its address's page files when it was depaged (its
    acknowledgement is then a PAGE_ACK record); ``held``: its share of the address's memory;
    ``seq``: its place in a non-destructive queue (:mod:`.non_destructive`), set only there
    (so that other references cost nothing to make).
    """

    __slots__ = (
        "delivery_count",
        "first_in_group",
        "held",
        "message",
        "offset",
        "paged",
        "queue",
        "seq",
        "stream",
    )

    seq: int

    def __init__(
        self, message: Message, queue: Queue, delivery_count: int = 0, offset: int = 0
    ) -> None:
        self.message = message
        self.queue = queue
        self.delivery_count = delivery_count
        self.offset = offset
        self.stream: str | None = None
        self.paged: tuple[int, int] | None = None
        self.held: MemoryShare | None = None
        # Delivered as the first of its group to its consumer (group-first-key).
        self.first_in_group = False

    def __repr__(self) -> str:
        return f"Ref({self.message.message_id} in {self.queue.name}, dc={self.delivery_count})"


def encode_message(
    message: Message,
    properties: tuple[tuple[str, str], ...] | None = None,
    *,
    with_body: bool = True,
    body_in_file: bool = False,
    routes: bool = False,
) -> bytes:
    """The journal record of ``message`` (and what a bridge forwards); ``properties``
    replace its own. ``with_body=False``: the headers only (a large message's journal
    record; its body is in a file). ``body_in_file``: the headers and the body's length,
    marked so (a large message's page record, whose body is the file of the record's
    message id). ``routes``: with :attr:`Message.route_to` in its old form, as properties
    (a page record: page files have no record beside the message to hold it)."""
    if properties is None:
        properties = message.properties
    if routes and message.route_to:
        properties = properties + tuple(
            (ROUTE_TO_PREFIX + sf_queue, json.dumps(names))
            for sf_queue, names in message.route_to.items()
        )
    tail = message.body if with_body else b""
    if body_in_file:
        tail = _U64.pack(message.body_length)
    return encode_message_record(  # (the layout: _HEAD, then as decode_message reads it)
        (_FLAG_DURABLE if message.durable else 0)
        | (_FLAG_LARGE if message.large else 0)
        | (_FLAG_BODY_IN_FILE if body_in_file else 0)
        | (_FLAG_SCHEDULED if message.scheduled else 0),
        _ROUTING_CODES[message.routing_type],
        message.priority,
        message.timestamp,
        message.expiration,
        message.address,
        properties,
        tail,
    )


def decode_message(message_id: int, data: bytes) -> Message:
    """Inverse of :func:`encode_message`; raises ValueError on a record it cannot read.
    Routing properties (the old form of :attr:`Message.route_to`) become its route_to."""
    try:
        version, flags, routing, priority, timestamp, expiration, alen = _HEAD.unpack_from(data)
        if version != _ENCODING_VERSION:
            raise ValueError(f"message record version {version} is not supported")
        pos = _HEAD.size
        address = data[pos : pos + alen].decode()
        pos += alen
        (count,) = _U16.unpack_from(data, pos)
        pos += 2
        properties = []
        for _ in range(count):
            (klen,) = _U16.unpack_from(data, pos)
            pos += 2
            key = data[pos : pos + klen].decode()
            pos += klen
            (vlen,) = _U32.unpack_from(data, pos)
            pos += 4
            properties.append((key, data[pos : pos + vlen].decode()))
            pos += vlen
        length = _U64.unpack_from(data, pos)[0] if flags & _FLAG_BODY_IN_FILE else -1
    except (struct.error, UnicodeDecodeError, KeyError) as exc:
        raise ValueError(f"unreadable message record {message_id}: {exc}") from exc
    # (A cheap look for the routing properties' and the group id's names first: they are rare.)
    raw = data if isinstance(data, bytes) else None
    routed = count and (raw is None or raw.find(_ROUTE_TO_BYTES, 0, pos) >= 0)
    route_to = _lift_routes(properties) if routed else None
    group_id = None
    if count and (raw is None or raw.find(_GROUP_ID_BYTES, 0, pos) >= 0):
        group_id = next((v for k, v in properties if k == GROUP_ID_PROPERTY), None)
    message = Message(
        message_id,
        address,
        body=bytes(data[pos:]) if length < 0 else b"",
        properties=tuple(properties),
        routing_type=_ROUTING_BY_CODE.get(routing),
        durable=bool(flags & _FLAG_DURABLE),
        priority=priority if priority <= 9 else 9,  # (a queue orders by 0..9)
        timestamp=timestamp,
        expiration=expiration,
        group_id=group_id,
    )
    if flags & _FLAG_SCHEDULED:
        message.scheduled = _scheduled_in(properties)
    message.large = bool(flags & _FLAG_LARGE)
    message.route_to = route_to
    if length >= 0:
        message.body_ref = LargeBody(None, message_id, length)
    return message


def _scheduled_in(properties: list[tuple[str, str]]) -> int:
    value = next((v for k, v in properties if k == SCHEDULED_PROPERTY), "0")
    return int(value) if value.isdigit() else 0


def _lift_routes(properties: list[tuple[str, str]]) -> dict[str, tuple[str, ...]] | None:
    """Take the routing properties (JSON lists of names) out of ``properties``: the
    route_to they stand for (None: there were none). A value that is no such list (a
    client's header of that name) stays a property."""
    if not any(key.startswith(ROUTE_TO_PREFIX) for key, _ in properties):
        return None
    route_to: dict[str, tuple[str, ...]] = {}
    kept = []
    for key, value in properties:
        names = _names(value) if key.startswith(ROUTE_TO_PREFIX) else None
        if names is None:
            kept.append((key, value))
        else:
            route_to.setdefault(key[len(ROUTE_TO_PREFIX) :], names)
    properties[:] = kept
    return route_to or None


def _names(value: str) -> tuple[str, ...] | None:
    try:
        names = json.loads(value)
    except ValueError:
        return None
    if isinstance(names, list) and all(isinstance(name, str) for name in names):
        return tuple(names)
    return None
