"""Journal replication frames (shared-nothing HA) and their binary layout.

A backup dials its primary with purpose ``"replication"`` (the same handshake and
credentials as a cluster link; the Hello names a cluster connection of the primary). The
primary (the server) copies its journal files to the backup in :class:`SyncFile` chunks and
says :class:`SyncDone`; the backup (the client) writes them, opens its journals and says
:class:`Synced`. The primary streams every journal record in :class:`Records` frames; the
backup answers :class:`Replicated` with the highest primary ticket of each journal that it
holds durably. A replication link carries these frames, Ping and Error, nothing else (the
connection enforces it, and which side sends which).

``journal`` is :data:`MESSAGES_JOURNAL` (0) or :data:`BINDINGS_JOURNAL` (1) everywhere, and
in SyncFile also :data:`LARGE_MESSAGES` (2): a large message's body file, sent when the sync
lists it and again as it is written, before the journal records that refer to it.
SyncDone and Synced are JSON control frames (their schemas are in :mod:`.wire`); the three
others are binary, big-endian, encoded and decoded here:

``SYNC_FILE``   ``u8 journal, u64 size, u64 offset, u8 n, utf-8 name[n], data`` -- data is
                the rest of the frame; ``offset + len(data) <= size``.
``RECORDS``     ``u8 journal, data`` -- data is the rest of the frame, opaque here (whole
                replication frames of the Rust journal).
``REPLICATED``  ``u8 journal, u64 ticket`` (exactly 9 bytes).

As in :mod:`.wire`, a data payload is its own piece of the output (appended, not re-packed),
every length is checked against the bytes present, and every failure is a
:class:`~.framing.FrameFormatError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar, Final

from artemis_py.protocol.cluster.framing import (
    HEAD,
    HEADER_SIZE,
    U64_MAX,
    FrameFormatError,
    FrameType,
    fail,
)

__all__ = [
    "BINDINGS_JOURNAL",
    "JOURNALS",
    "MESSAGES_JOURNAL",
    "REPLICATION_FRAMES",
    "Records",
    "Replicated",
    "SyncDone",
    "SyncFile",
    "Synced",
    "decode_replication",
    "encode_replication",
]

MESSAGES_JOURNAL: Final = 0
BINDINGS_JOURNAL: Final = 1
JOURNALS: Final = (MESSAGES_JOURNAL, BINDINGS_JOURNAL)
#: SyncFile's third directory: large-message files (their bodies live outside the journal).
LARGE_MESSAGES: Final = 2
#: The longest file name a SyncFile carries, in UTF-8 bytes.
_NAME_MAX: Final = 255
_REPR_BYTES: Final = 32
_SYNC_FILE_HEAD: Final = struct.Struct(">BQQB")  # journal, size, offset, len(name)
_RECORDS_HEAD: Final = struct.Struct(">B")
_REPLICATED: Final = struct.Struct(">BQ")
_REPLICATED_FRAME: Final = struct.Struct(">IBBQ")


def _shown(data: bytes) -> str:
    if len(data) > _REPR_BYTES:
        return f"{data[:_REPR_BYTES]!r}... ({len(data)} bytes)"
    return repr(data)


@dataclass(frozen=True, slots=True, repr=False)
class SyncFile:
    """S->C, binary: one chunk of journal data file ``name`` (a plain file name), whose
    total size is ``size``: ``data`` goes at ``offset``."""

    TYPE: ClassVar[FrameType] = FrameType.SYNC_FILE
    journal: int
    name: str
    size: int
    offset: int
    data: bytes

    def __repr__(self) -> str:
        return (
            f"SyncFile(journal={self.journal}, name={self.name!r}, size={self.size}, "
            f"offset={self.offset}, data={_shown(self.data)})"
        )


@dataclass(frozen=True, slots=True)
class SyncDone:
    """S->C: every journal file was sent; ``files`` is how many there were."""

    TYPE: ClassVar[FrameType] = FrameType.SYNC_DONE
    files: int


@dataclass(frozen=True, slots=True, repr=False)
class Records:
    """S->C, binary: journal records of ``journal`` (whole replication frames of the Rust
    journal, opaque here)."""

    TYPE: ClassVar[FrameType] = FrameType.RECORDS
    journal: int
    data: bytes

    def __repr__(self) -> str:
        return f"Records(journal={self.journal}, data={_shown(self.data)})"


@dataclass(frozen=True, slots=True)
class Synced:
    """C->S: the backup wrote every file and opened its journals; it now applies Records."""

    TYPE: ClassVar[FrameType] = FrameType.SYNCED


@dataclass(frozen=True, slots=True)
class Replicated:
    """C->S, binary: the backup holds everything of ``journal`` through the primary's
    journal ticket ``ticket`` durably (never decreases, per journal)."""

    TYPE: ClassVar[FrameType] = FrameType.REPLICATED
    journal: int
    ticket: int


#: The frame types only a replication link carries (it also carries Ping and Error).
REPLICATION_FRAMES: Final = frozenset(
    {
        FrameType.SYNC_FILE,
        FrameType.SYNC_DONE,
        FrameType.RECORDS,
        FrameType.SYNCED,
        FrameType.REPLICATED,
    }
)


# --- checks shared by encoding and decoding -----------------------------------------------


def _journal(value: object, where: str) -> int:
    if type(value) is not int or value not in JOURNALS:
        fail(f"{where} must be 0 (messages) or 1 (bindings), got {value!r}")
    return value


def _directory(value: object, where: str) -> int:
    """SyncFile's: a journal's, or 2 (large messages)."""
    if type(value) is not int or value not in (*JOURNALS, LARGE_MESSAGES):
        fail(f"{where} must be 0 (messages), 1 (bindings) or 2 (large messages), got {value!r}")
    return value


def _u64(value: object, where: str) -> int:
    if type(value) is not int or not 0 <= value <= U64_MAX:
        fail(f"{where} must be a u64 integer, got {value!r}")
    return value


def _file_name(name: str, length: int) -> None:
    """``name`` (``length`` bytes in UTF-8) must name a file in a journal directory."""
    if not 0 < length <= _NAME_MAX:
        fail(f"SyncFile.name must have 1..{_NAME_MAX} UTF-8 bytes, got {length}")
    if name in (".", "..") or any(c in name for c in "/\\\x00"):
        fail(f"SyncFile.name {name!r} is not a plain file name")


def _within(size: int, offset: int, length: int) -> None:
    if offset + length > size:
        fail(
            f"SyncFile chunk of {length} bytes at offset {offset} overruns the file's {size} bytes"
        )


# --- encoding -----------------------------------------------------------------------------


def encode_replication(frame: SyncFile | Records | Replicated) -> list[bytes]:
    """The wire bytes of a binary replication frame, as pieces to concatenate (the data is
    its own piece). Raises :class:`~.framing.FrameFormatError`."""
    if isinstance(frame, Replicated):
        journal = _journal(frame.journal, "Replicated.journal")
        ticket = _u64(frame.ticket, "Replicated.ticket")
        return [_REPLICATED_FRAME.pack(10, FrameType.REPLICATED, journal, ticket)]
    data = frame.data
    if not isinstance(data, bytes):
        fail(f"{type(frame).__name__}.data must be bytes")
    if isinstance(frame, Records):
        head = bytearray(HEADER_SIZE)
        head += _RECORDS_HEAD.pack(_journal(frame.journal, "Records.journal"))
    else:
        head = _sync_file_head(frame)
    length = len(head) - 4 + len(data)
    if length > 0xFFFFFFFF:
        fail(f"{type(frame).__name__} larger than 4 GiB")
    HEAD.pack_into(head, 0, length, frame.TYPE)
    return [bytes(head), data] if data else [bytes(head)]


def _sync_file_head(frame: SyncFile) -> bytearray:
    journal = _directory(frame.journal, "SyncFile.journal")
    size = _u64(frame.size, "SyncFile.size")
    offset = _u64(frame.offset, "SyncFile.offset")
    name = frame.name
    if type(name) is not str:
        fail(f"SyncFile.name must be a string, got {name!r}")
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        fail(f"SyncFile.name {name!r} is not valid Unicode")
    _file_name(name, len(raw))
    _within(size, offset, len(frame.data))
    head = bytearray(HEADER_SIZE)
    head += _SYNC_FILE_HEAD.pack(journal, size, offset, len(raw))
    head += raw
    return head


# --- decoding -----------------------------------------------------------------------------


def decode_replication(frame_type: int, body: memoryview) -> SyncFile | Records | Replicated:
    """Decode the body of a binary replication frame (``frame_type`` is SYNC_FILE, RECORDS
    or REPLICATED). Never keeps a reference to ``body``. Raises
    :class:`~.framing.FrameFormatError` only."""
    size = len(body)
    if frame_type == FrameType.REPLICATED:
        if size != _REPLICATED.size:
            fail(f"malformed REPLICATED frame: body of {size} bytes, expected 9")
        journal, ticket = _REPLICATED.unpack_from(body)
        return Replicated(_journal(journal, "malformed REPLICATED frame: journal"), ticket)
    if frame_type == FrameType.RECORDS:
        if size < 1:
            fail("malformed RECORDS frame: no journal byte")
        return Records(_journal(body[0], "malformed RECORDS frame: journal"), body[1:].tobytes())
    assert frame_type == FrameType.SYNC_FILE
    if size < _SYNC_FILE_HEAD.size:
        fail(f"malformed SYNC_FILE frame: {size} bytes is too short")
    journal, file_size, offset, name_length = _SYNC_FILE_HEAD.unpack_from(body)
    start = _SYNC_FILE_HEAD.size
    end = start + name_length
    if end > size:
        fail(f"malformed SYNC_FILE frame: name length {name_length} overruns the frame")
    try:
        name = str(body[start:end], "utf-8")
    except UnicodeDecodeError:
        fail("malformed SYNC_FILE frame: the name is not valid UTF-8")
    try:
        _directory(journal, "SyncFile.journal")
        _file_name(name, name_length)
        _within(file_size, offset, size - end)
    except FrameFormatError as exc:
        fail(f"malformed SYNC_FILE frame: {exc}")
    return SyncFile(journal, name, file_size, offset, body[end:].tobytes())
