"""STOMP frames and the other events a :class:`~artemis_py.protocol.stomp.Connection` yields.

A :class:`Frame` is exactly what is on the wire after header decoding: the command, every
header line in order (repeats included), and the body bytes. ``Frame.get`` applies the spec's
"repeated headers: the first one wins" rule (STOMP 1.2 "Repeated Header Entries"); the later
entries stay visible through :meth:`Frame.get_all`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias, overload

__all__ = [
    "BODY_COMMANDS",
    "CLIENT_COMMANDS",
    "NEED_DATA",
    "PAUSED",
    "SERVER_COMMANDS",
    "Command",
    "ConnectionClosed",
    "Event",
    "Frame",
    "Heartbeat",
    "Sentinel",
    "error_frame",
]


class Command(enum.StrEnum):
    """Every STOMP 1.0-1.2 command. Members are ``str``: ``Command.SEND == "SEND"``."""

    # client frames
    CONNECT = "CONNECT"
    STOMP = "STOMP"  # 1.1+ synonym of CONNECT
    SEND = "SEND"
    SUBSCRIBE = "SUBSCRIBE"
    UNSUBSCRIBE = "UNSUBSCRIBE"
    ACK = "ACK"
    NACK = "NACK"  # 1.1+
    BEGIN = "BEGIN"
    COMMIT = "COMMIT"
    ABORT = "ABORT"
    DISCONNECT = "DISCONNECT"
    # server frames
    CONNECTED = "CONNECTED"
    MESSAGE = "MESSAGE"
    RECEIPT = "RECEIPT"
    ERROR = "ERROR"


CLIENT_COMMANDS: Final = frozenset(
    {
        Command.CONNECT,
        Command.STOMP,
        Command.SEND,
        Command.SUBSCRIBE,
        Command.UNSUBSCRIBE,
        Command.ACK,
        Command.NACK,
        Command.BEGIN,
        Command.COMMIT,
        Command.ABORT,
        Command.DISCONNECT,
    }
)
SERVER_COMMANDS: Final = frozenset(
    {Command.CONNECTED, Command.MESSAGE, Command.RECEIPT, Command.ERROR}
)
#: STOMP 1.2 "Body": only SEND, MESSAGE and ERROR frames MAY have a body.
BODY_COMMANDS: Final = frozenset({Command.SEND, Command.MESSAGE, Command.ERROR})

_MASKED_HEADERS = frozenset({"passcode"})
_REPR_BODY_BYTES = 64


@dataclass(frozen=True, slots=True, init=False, repr=False)
class Frame:
    """One STOMP frame.

    ``headers`` is a tuple of ``(name, value)`` pairs in wire order; a mapping or any iterable
    of pairs is accepted and converted. ``body`` is raw bytes (any bytes-like is converted).
    ``repr`` masks ``passcode`` and shortens long bodies so frames can be logged safely.
    """

    command: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def __init__(
        self,
        command: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        body: bytes | bytearray | memoryview = b"",
    ) -> None:
        # The decoder always passes a tuple and bytes: the hot path is two type checks.
        if type(headers) is not tuple:
            if isinstance(headers, Mapping):
                headers = tuple(headers.items())
            else:
                headers = tuple((name, value) for name, value in headers)
        if type(body) is not bytes:
            body = bytes(body)
        object.__setattr__(self, "command", command)
        object.__setattr__(self, "headers", headers)
        object.__setattr__(self, "body", body)

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...
    @overload
    def get(self, name: str, default: None) -> str | None: ...

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of the first ``name`` header (STOMP 1.2: the first entry wins)."""
        for key, value in self.headers:
            if key == name:
                return value
        return default

    def get_all(self, name: str) -> tuple[str, ...]:
        """Every value of ``name``, in wire order."""
        return tuple(value for key, value in self.headers if key == name)

    def __repr__(self) -> str:
        shown = tuple((k, "********" if k in _MASKED_HEADERS else v) for k, v in self.headers)
        body = self.body
        if len(body) > _REPR_BODY_BYTES:
            body_repr = f"{body[:_REPR_BODY_BYTES]!r}... ({len(body)} bytes)"
        else:
            body_repr = repr(body)
        return f"Frame(command={str(self.command)!r}, headers={shown!r}, body={body_repr})"


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A bare EOL between frames: a STOMP 1.1+ heart-beat (or a 1.2 EOL after a frame's NUL)."""


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The peer closed its side cleanly, between frames (``receive_data(b"")``)."""


class Sentinel(enum.Enum):
    """Non-event answers of ``Connection.next_event``."""

    NEED_DATA = "NEED_DATA"
    """Nothing complete is buffered: call ``receive_data`` with more bytes."""
    PAUSED = "PAUSED"
    """Server side, after a CONNECT/STOMP frame: call ``accept_connect`` (or send CONNECTED or
    ERROR) first, because how the following frames decode depends on the negotiated version."""

    def __repr__(self) -> str:
        return self.value


NEED_DATA: Final = Sentinel.NEED_DATA
PAUSED: Final = Sentinel.PAUSED

Event: TypeAlias = Frame | Heartbeat | ConnectionClosed


def error_frame(
    message: str,
    *,
    receipt_id: str | None = None,
    body: bytes = b"",
    headers: Iterable[tuple[str, str]] = (),
    content_type: str = "text/plain",
) -> Frame:
    """Build an ERROR frame that can be sent in any state and any version.

    ``message`` has CR/LF folded to spaces: an ERROR sent before version negotiation is encoded
    with STOMP 1.0 rules, which cannot escape line breaks. ``headers`` are extra headers (e.g. a
    :class:`~artemis_py.protocol.ProtocolError`'s ``error_headers``). A non-empty body gets
    ``content-type`` and ``content-length``.
    """
    folded = " ".join(message.replace("\r", " ").split("\n"))
    pairs: list[tuple[str, str]] = [("message", folded)]
    if receipt_id is not None:
        pairs.append(("receipt-id", receipt_id))
    pairs.extend(headers)
    if body:
        pairs.append(("content-type", content_type))
        pairs.append(("content-length", str(len(body))))
    return Frame(Command.ERROR, tuple(pairs), body)
