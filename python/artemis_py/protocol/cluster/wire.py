"""Byte layout of cluster-link frames: stateless encoding and decoding of single frames.

Wire format
-----------
The client opens with the 8-byte preamble :data:`MAGIC`, so a server can tell a stray STOMP
or Artemis core client from a cluster peer before parsing anything. It ends with CR LF, as
PNG's signature does, for the other way round: a line-based server that a cluster peer
dials by mistake (a STOMP acceptor, an HTTP server) has a complete line and answers it at
once, and the dialler can say what it reached instead of waiting for a handshake that never
comes. Then, both ways::

    u32 length (big-endian; counts the type byte and the body)  |  u8 frame type  |  body

Control frames have a UTF-8 JSON object as body, keys = field names (compact separators, no
NaN/Infinity). Unknown keys are ignored so a later version may add optional fields; missing
keys (other than such optional fields, see ``_OPTIONAL``) and wrong types are errors. The
two hot-path frames and three of journal replication's are binary, big-endian:

``MESSAGE``  ``u64 seq, u64 message_id, u16 n, dup_id[n], u16 count, count x (u16 m,
             utf-8 target[m]), payload`` -- the payload is the rest of the frame, so it needs
             no length of its own and is appended to the output without re-packing.
``CONFIRM``  ``u64 seq`` (exactly 8 bytes).
``SYNC_FILE``, ``RECORDS``, ``REPLICATED``  (journal replication): see :mod:`.replication`,
             which encodes and decodes them; ``u8 journal, u64 size, u64 offset, u8 n,
             utf-8 name[n], data`` / ``u8 journal, data`` (data: the rest of the frame,
             appended without re-packing) / ``u8 journal, u64 ticket`` (exactly 9 bytes).

Decoding never trusts a length: each one is checked against the bytes the frame actually
has, and every failure (bad UTF-8, bad JSON, deep nesting, wrong field types, lone
surrogates) becomes one internal :class:`FrameFormatError`, which the connection turns into a
:class:`~artemis_py.protocol.errors.RemoteProtocolError` (decoding) or a
:class:`~artemis_py.protocol.errors.LocalProtocolError` (encoding: the same validators check
what we are about to send, so we never emit a frame the peer would refuse).
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from typing import Any, Final, NoReturn, cast, get_args

from artemis_py.protocol.cluster.frames import (
    AddressIds,
    Auth,
    BindingInfo,
    Bindings,
    Challenge,
    Confirm,
    Consumers,
    CreateQueues,
    Error,
    Frame,
    Hello,
    Leaving,
    Member,
    Message,
    NewQueue,
    Ping,
    Proposal,
    ProposalResponse,
    Purpose,
    Records,
    Reject,
    Replicated,
    Sealed,
    SealedStream,
    Status,
    SyncDone,
    Synced,
    SyncFile,
    Topology,
    Unproposal,
    Welcome,
)
from artemis_py.protocol.cluster.framing import (
    HEAD,
    HEADER_SIZE,
    U64_MAX,
    FrameFormatError,
    FrameType,
)
from artemis_py.protocol.cluster.framing import fail as _fail
from artemis_py.protocol.cluster.replication import decode_replication, encode_replication
from artemis_py.protocol.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "HEADER_SIZE",
    "MAGIC",
    "FrameFormatError",
    "decode_body",
    "decode_frame",
    "encode_frame",
    "encode_parts",
]

MAGIC: Final = b"ARTPYC\r\n"
#: Largest ``length`` accepted by default (type byte + body): 128 MiB.
DEFAULT_MAX_FRAME_SIZE: Final = 128 * 1024 * 1024

_U16_MAX: Final = 0xFFFF
_I32_MAX: Final = 2**31 - 1
_MESSAGE_HEAD: Final = struct.Struct(">QQH")  # seq, message_id, len(dup_id)
_U16: Final = struct.Struct(">H")
_U64: Final = struct.Struct(">Q")
_CONFIRM_FRAME: Final = struct.Struct(">IBQ")
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_BINARY_REPLICATION: Final = frozenset(
    {FrameType.SYNC_FILE, FrameType.RECORDS, FrameType.REPLICATED}
)


# --- field readers: JSON value -> field value, or FrameFormatError ------------------------
# Each takes (value, where) where ``where`` names the field for the error message. They accept
# tuples as well as lists so they can also validate the dicts built from outgoing frames.

_Reader = Callable[[Any, str], Any]


def _unicode_ok(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (JSON ``\\ud800`` escapes can smuggle lone
    surrogates in; such a name would fail later, e.g. as a Message target)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(value: Any, where: str) -> str:
    if type(value) is not str:
        _fail(f"{where} must be a string")
    if not _unicode_ok(value):
        _fail(f"{where} is not valid Unicode")
    return value


def _opt_text(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _integer(low: int, high: int) -> _Reader:
    def read(value: Any, where: str) -> int:
        if type(value) is not int:  # excludes bool, which JSON keeps apart
            _fail(f"{where} must be an integer")
        if not low <= value <= high:
            _fail(f"{where} must be in {low}..{high}, got {value}")
        return value

    return read


_count = _integer(0, _I32_MAX)
# A member's version is its start time in microseconds (then +1 when it leaves).
_member_version = _integer(0, 2**63 - 1)
_port = _integer(0, 65535)
_version = _integer(1, _U16_MAX)


def _boolean(value: Any, where: str) -> bool:
    if type(value) is not bool:
        _fail(f"{where} must be true or false")
    return value


def _hex64(value: Any, where: str) -> str:
    if type(value) is not str or _HEX64.fullmatch(value) is None:
        _fail(f"{where} must be 64 lowercase hex digits")
    return value


def _choice(*options: str) -> _Reader:
    def read(value: Any, where: str) -> str:
        if value not in options or type(value) is not str:
            _fail(f"{where} must be one of {', '.join(options)}")
        return value

    return read


def _array(item: _Reader, *, non_empty: bool = False) -> _Reader:
    def read(value: Any, where: str) -> tuple[Any, ...]:
        if type(value) is not list and type(value) is not tuple:
            _fail(f"{where} must be an array")
        if non_empty and not value:
            _fail(f"{where} must not be empty")
        return tuple(item(element, f"{where}[{index}]") for index, element in enumerate(value))

    return read


def _json_ok(value: Any, where: str) -> None:
    """Check that a free-form JSON value holds only encodable strings (keys included)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if not _unicode_ok(item):
                _fail(f"{where} holds a string that is not valid Unicode")
        elif type(item) is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif type(item) is list or type(item) is tuple:
            stack.extend(item)


def _json_object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        _fail(f"{where} must be a JSON object")
    _json_ok(value, where)
    return cast(dict[str, Any], value)


# --- record schemas -----------------------------------------------------------------------

_Schema = tuple[tuple[str, _Reader], ...]


def _record(cls: type, schema: _Schema) -> _Reader:
    def read(value: Any, where: str) -> Any:
        if type(value) is not dict:
            _fail(f"{where} must be a JSON object")
        return _build(cls, schema, value, where)

    return read


def _build(cls: type, schema: _Schema, obj: dict[str, Any], where: str) -> Any:
    values = {}
    for name, reader in schema:
        try:
            value = obj[name]
        except KeyError:
            if name in _OPTIONAL.get(cls, ()):
                continue  # added later: a peer that predates it sends none (the default)
            _fail(f"{where} lacks the field {name!r}")
        values[name] = reader(value, f"{where}.{name}")
    return cls(**values)


_consumers = _array(_opt_text)
_MEMBER: Final[_Schema] = (
    ("node_id", _text),
    ("instance_id", _text),
    ("host", _text),
    ("port", _port),
    ("up", _boolean),
    ("version", _member_version),
    ("group_name", _opt_text),
    ("clients", _array(_text)),
    ("scaling_down_to", _opt_text),
    ("name", _opt_text),
    ("paired", _boolean),
)
_BINDING: Final[_Schema] = (
    ("name", _text),
    ("queue_name", _text),
    ("address", _text),
    ("routing_type", _choice("ANYCAST", "MULTICAST")),
    ("filter", _opt_text),
    ("distance", _count),
    ("origin_node_id", _text),
    ("consumers", _consumers),
)

_NEW_QUEUE: Final[_Schema] = (
    ("name", _text),
    ("address", _text),
    ("routing_type", _choice("ANYCAST", "MULTICAST")),
    ("filter", _opt_text),
    ("durable", _boolean),
)

_ADDRESS_IDS: Final[_Schema] = (("address", _text), ("ids", _array(_text)))

_offset = _integer(0, 2**63 - 1)
_SEALED_STREAM: Final[_Schema] = (
    ("queue", _text),
    ("stream", _text),
    ("end", _offset),
    ("mark", _offset),
)

#: Frame class -> the schema of its JSON body, in field order.
_JSON_FRAMES: Final[dict[type, _Schema]] = {
    Hello: (
        ("versions", _array(_version, non_empty=True)),
        ("purpose", _choice(*get_args(Purpose))),
        ("cluster_name", _text),
        ("node_id", _text),
        ("instance_id", _text),
        ("connector_host", _text),
        ("connector_port", _port),
        ("user", _text),
        ("client_nonce", _hex64),
        ("max_hops", _count),
        ("group_name", _opt_text),
    ),
    Challenge: (
        ("version", _version),
        ("cluster_name", _text),
        ("node_id", _text),
        ("instance_id", _text),
        ("server_nonce", _hex64),
    ),
    Auth: (("proof", _hex64),),
    Welcome: (("proof", _hex64),),
    Reject: (("reason", _text),),
    Error: (("reason", _text),),
    Ping: (),
    Topology: (("members", _array(_record(Member, _MEMBER))),),
    Bindings: (
        ("snapshot", _boolean),
        ("added", _array(_record(BindingInfo, _BINDING))),
        ("removed", _array(_text)),
    ),
    Consumers: (("name", _text), ("consumers", _consumers)),
    Status: (("data", _json_object),),
    Leaving: (
        ("node_id", _text),
        ("target", _text),
        ("received", _array(_text)),
        ("client_ids", _array(_record(AddressIds, _ADDRESS_IDS))),
    ),
    CreateQueues: (("queues", _array(_record(NewQueue, _NEW_QUEUE))),),
    Sealed: (("streams", _array(_record(SealedStream, _SEALED_STREAM))),),
    Proposal: (("group_id", _text), ("cluster_name", _text)),
    ProposalResponse: (
        ("group_id", _text),
        ("cluster_name", _text),
        ("alternative", _opt_text),
    ),
    Unproposal: (("group_id", _text), ("cluster_name", _text)),
    SyncDone: (("files", _count),),
    Synced: (),
}
#: Fields added after version 1 of the protocol, which a frame may lack (dataclass default).
_OPTIONAL: Final[dict[type, frozenset[str]]] = {
    Hello: frozenset({"group_name"}),
    Leaving: frozenset({"received", "client_ids"}),
    Member: frozenset({"clients", "scaling_down_to", "name", "paired"}),
}
_JSON_BY_TYPE: Final[dict[int, type]] = {cls.TYPE: cls for cls in _JSON_FRAMES}  # type: ignore[attr-defined]


def _plain(value: Any) -> Any:
    """A frame field as a JSON-ready value (nested records become dicts)."""
    if type(value) is Member:
        return {name: getattr(value, name) for name, _ in _MEMBER}
    if type(value) is BindingInfo:
        return {name: getattr(value, name) for name, _ in _BINDING}
    if type(value) is NewQueue:
        return {name: getattr(value, name) for name, _ in _NEW_QUEUE}
    if type(value) is SealedStream:
        return {name: getattr(value, name) for name, _ in _SEALED_STREAM}
    if type(value) is AddressIds:
        return {name: _plain(getattr(value, name)) for name, _ in _ADDRESS_IDS}
    if type(value) is tuple or type(value) is list:
        return [_plain(item) for item in value]
    return value


def _reject_constant(name: str) -> NoReturn:
    _fail(f"{name} is not valid JSON")


# --- encoding -----------------------------------------------------------------------------


def encode_parts(frame: Frame) -> list[bytes]:
    """The wire bytes of ``frame`` as a list of pieces to concatenate (a Message's payload
    (or a replication frame's data) is its own piece, so it is copied once, into the output). Checks every field the way the
    receiver will; raises :class:`FrameFormatError`. The size limit is the caller's."""
    cls = type(frame)
    if cls is Message:
        return _encode_message(cast(Message, frame))
    if cls is Confirm:
        seq = cast(Confirm, frame).seq
        if type(seq) is not int or not 0 <= seq <= U64_MAX:
            _fail(f"Confirm.seq must be a u64 integer, got {seq!r}")
        return [_CONFIRM_FRAME.pack(9, FrameType.CONFIRM, seq)]
    if cls is SyncFile or cls is Records or cls is Replicated:
        return encode_replication(cast(SyncFile | Records | Replicated, frame))
    schema = _JSON_FRAMES.get(cls)
    if schema is None:
        _fail(f"not a cluster frame: {frame!r}")
    obj = {name: _plain(getattr(frame, name)) for name, _ in schema}
    _build(cls, schema, obj, cls.__name__)  # validate exactly as the receiver will
    try:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        body = text.encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:  # Status.data not JSON-able
        _fail(f"{cls.__name__} cannot be encoded as JSON: {exc}")
    return [HEAD.pack(1 + len(body), frame.TYPE) + body]


def _encode_message(message: Message) -> list[bytes]:
    seq, message_id = message.seq, message.message_id
    dup_id, targets, payload = message.dup_id, message.targets, message.payload
    if type(seq) is not int or not 0 <= seq <= U64_MAX:
        _fail(f"Message.seq must be a u64 integer, got {seq!r}")
    if type(message_id) is not int or not 0 <= message_id <= U64_MAX:
        _fail(f"Message.message_id must be a u64 integer, got {message_id!r}")
    if not isinstance(dup_id, bytes) or len(dup_id) > _U16_MAX:
        _fail(f"Message.dup_id must be bytes of at most {_U16_MAX} bytes")
    if not isinstance(payload, bytes):
        _fail("Message.payload must be bytes")
    if not isinstance(targets, tuple | list) or len(targets) > _U16_MAX:
        _fail(f"Message.targets must be a tuple of at most {_U16_MAX} binding names")
    head = bytearray(HEADER_SIZE)  # the frame header is packed in last, once sizes are known
    head += _MESSAGE_HEAD.pack(seq, message_id, len(dup_id))
    head += dup_id
    head += _U16.pack(len(targets))
    for target in targets:
        if type(target) is not str:
            _fail(f"Message target {target!r} is not a string")
        try:
            raw = target.encode("utf-8")
        except UnicodeEncodeError:
            _fail(f"Message target {target!r} is not valid Unicode")
        if len(raw) > _U16_MAX:
            _fail(f"Message target longer than {_U16_MAX} bytes")
        head += _U16.pack(len(raw))
        head += raw
    # A body sent from its file by the transport follows the payload: the length counts it.
    length = len(head) - 4 + len(payload) + (len(message.body_file) if message.body_file else 0)
    if length > 0xFFFFFFFF:
        _fail("Message larger than 4 GiB")
    HEAD.pack_into(head, 0, length, FrameType.MESSAGE)
    return [bytes(head), payload] if payload else [bytes(head)]


def encode_frame(frame: Frame, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> bytes:
    """The wire bytes of one frame (no preamble). Raises :class:`LocalProtocolError` for an
    invalid frame or one whose length exceeds ``max_frame_size``."""
    try:
        parts = encode_parts(frame)
    except FrameFormatError as exc:
        raise LocalProtocolError(str(exc)) from None
    data = b"".join(parts)
    if len(data) - 4 > max_frame_size:
        raise LocalProtocolError(
            f"{type(frame).__name__} frame of {len(data) - 4} bytes exceeds the maximum frame "
            f"size of {max_frame_size} bytes"
        )
    return data


# --- decoding -----------------------------------------------------------------------------


def decode_body(frame_type: int, body: memoryview) -> Frame:
    """Decode one frame body (``body`` is a byte-format memoryview, exactly the body). Never
    keeps a reference to ``body``. Raises :class:`FrameFormatError` only."""
    if frame_type == FrameType.MESSAGE:
        return _decode_message(body)
    if frame_type == FrameType.CONFIRM:
        if len(body) != 8:
            _fail(f"malformed CONFIRM frame: body of {len(body)} bytes, expected 8")
        return Confirm(_U64.unpack_from(body)[0])
    if frame_type in _BINARY_REPLICATION:
        return decode_replication(frame_type, body)
    cls = _JSON_BY_TYPE.get(frame_type)
    if cls is None:
        _fail(f"unknown frame type {frame_type}")
    name = FrameType(frame_type).name
    try:
        obj = json.loads(str(body, "utf-8"), parse_constant=_reject_constant)
    except FrameFormatError as exc:
        _fail(f"malformed {name} frame: {exc}")
    except RecursionError:
        _fail(f"malformed {name} frame: JSON nested too deeply")
    except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError, int digit limit
        _fail(f"malformed {name} frame: {exc}")
    if type(obj) is not dict:
        _fail(f"malformed {name} frame: the body must be a JSON object")
    try:
        return cast(Frame, _build(cls, _JSON_FRAMES[cls], obj, cls.__name__))
    except FrameFormatError as exc:
        _fail(f"malformed {name} frame: {exc}")


def _decode_message(body: memoryview) -> Message:
    size = len(body)
    if size < _MESSAGE_HEAD.size + 2:
        _fail(f"malformed MESSAGE frame: {size} bytes is too short")
    seq, message_id, dup_length = _MESSAGE_HEAD.unpack_from(body)
    pos = _MESSAGE_HEAD.size + dup_length
    if pos + 2 > size:
        _fail(f"malformed MESSAGE frame: dup_id length {dup_length} overruns the frame")
    dup_id = body[_MESSAGE_HEAD.size : pos].tobytes()
    (count,) = _U16.unpack_from(body, pos)
    pos += 2
    if count * 2 > size - pos:
        _fail(f"malformed MESSAGE frame: {count} targets cannot fit in the frame")
    targets = []
    for _ in range(count):
        if pos + 2 > size:
            _fail("malformed MESSAGE frame: target list overruns the frame")
        (length,) = _U16.unpack_from(body, pos)
        pos += 2
        end = pos + length
        if end > size:
            _fail(f"malformed MESSAGE frame: target length {length} overruns the frame")
        try:
            targets.append(str(body[pos:end], "utf-8"))
        except UnicodeDecodeError:
            _fail("malformed MESSAGE frame: a target is not valid UTF-8")
        pos = end
    payload = body[pos:].tobytes()
    return Message(seq, dup_id, tuple(targets), message_id, payload)


def decode_frame(data: bytes | bytearray | memoryview) -> Frame:
    """Decode exactly one complete wire frame (the inverse of :func:`encode_frame`, for tools
    and tests; connections decode incrementally). Raises :class:`RemoteProtocolError`."""
    with memoryview(data) as view, view.cast("B") as raw:
        if len(raw) < HEADER_SIZE:
            raise RemoteProtocolError(f"a frame needs at least {HEADER_SIZE} bytes")
        length, frame_type = HEAD.unpack_from(raw)
        if length != len(raw) - 4:
            raise RemoteProtocolError(
                f"frame length field says {length} bytes, but {len(raw) - 4} follow it"
            )
        with raw[HEADER_SIZE:] as body:
            try:
                return decode_body(frame_type, body)
            except FrameFormatError as exc:
                raise RemoteProtocolError(str(exc)) from None
