"""What every cluster-link frame shares: its header and type byte, and the format error.

A frame is ``u32 length | u8 frame type | body`` (see :mod:`.wire` for the bodies). This
module sits below both the frame classes (:mod:`.frames`, :mod:`.replication`) and the codec
(:mod:`.wire`), so that each of them can use it without importing the other.
"""

from __future__ import annotations

import enum
import struct
from typing import Final, NoReturn

__all__ = ["HEAD", "HEADER_SIZE", "U64_MAX", "FrameFormatError", "FrameType", "fail"]

#: The u32 length and the type byte.
HEADER_SIZE: Final = 5
HEAD: Final = struct.Struct(">IB")
U64_MAX: Final = 2**64 - 1


class FrameType(enum.IntEnum):
    """The frame-type byte. Control frames are small numbers, binary frames 0x20+."""

    HELLO = 1
    CHALLENGE = 2
    AUTH = 3
    WELCOME = 4
    REJECT = 5
    ERROR = 6
    PING = 7
    TOPOLOGY = 8
    BINDINGS = 9
    CONSUMERS = 10
    STATUS = 11
    LEAVING = 12
    CREATE_QUEUES = 13
    SEALED = 14
    PROPOSAL = 15
    PROPOSAL_RESPONSE = 16
    UNPROPOSAL = 17
    SYNC_DONE = 18
    SYNCED = 19
    MESSAGE = 0x20
    CONFIRM = 0x21
    SYNC_FILE = 0x22
    RECORDS = 0x23
    REPLICATED = 0x24


class FrameFormatError(Exception):
    """A frame body that does not follow the layout (internal; never escapes the package)."""


def fail(message: str) -> NoReturn:
    """Raise :class:`FrameFormatError` (``message`` says what is wrong)."""
    raise FrameFormatError(message)
