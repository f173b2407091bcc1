"""STOMP over WebSocket, sans-IO: the HTTP upgrade, then STOMP bytes in WebSocket messages.

Theory of operation
-------------------
Artemis serves STOMP over WebSocket on its ordinary STOMP acceptors (Artemis user manual,
STOMP, "Web Sockets"): its protocol detection sees an HTTP request, a ``GET`` with
``Upgrade: websocket`` completes the handshake, and from then on the payloads of the
WebSocket messages are the STOMP byte stream. :class:`WebSocketServer` does the same without
I/O: it is fed the socket's bytes (:meth:`~WebSocketServer.receive_data`), yields events
(:meth:`~WebSocketServer.next_event`) and keeps what must go back to the client until the
shell takes it (:meth:`~WebSocketServer.data_to_send`).

* **Upgrade.** The request is parsed by h11 (an incomplete head is held up to its 16 KiB
  limit, then refused with 431). The
  subprotocol is the first the client offers among Artemis's STOMP ones
  (:data:`SUBPROTOCOLS`); a client that offers none is served STOMP too, as Artemis
  serves it. Everything else is refused with an HTTP answer and :class:`Refused`: a request
  that is not an upgrade (426, what to do instead in the body), an upgrade with a method
  other than GET (403, as Artemis), a bad or unsupported handshake (400, or 426 with
  ``Sec-WebSocket-Version: 13`` as Netty answers), only other subprotocols (400).
* **Incoming.** Text and binary messages alike are STOMP bytes (text as its UTF-8), in any
  cut: a STOMP frame may span messages and a message may hold several frames, since the
  STOMP decoder is streaming. ``webSocketMaxFramePayloadLength`` bounds each WebSocket
  frame's payload as Netty does for Artemis (a fragmented message may be longer): a frame
  over it closes the connection with 1009. Pings are answered with pongs; they are not STOMP
  data, so they do not keep a connection's TTL alive (as in Artemis). A close frame from the
  client is answered and ends the stream (:class:`Closed`); so do protocol violations (wsproto
  checks masking, reserved bits, control frames, UTF-8 of text), with their close code.
* **Outgoing.** Each STOMP frame is one WebSocket message, as Artemis writes them, split into
  fragments of at most ``webSocketMaxFramePayloadLength`` bytes (Artemis's
  WebSocketFrameEncoder); a heart-beat EOL is a message of its own. Frame boundaries are
  found by :class:`StompSplitter` in the bytes the STOMP shell writes. ``webSocketEncoderType``
  ``binary`` (Artemis's default) streams each frame as binary fragments; ``text`` sends a
  frame as a text message once it is whole, unless its bytes are not UTF-8 (a binary body):
  a text message must be UTF-8 (RFC 6455 §5.6) and browsers fail the connection otherwise,
  so such a frame goes as a binary message (Artemis would send invalid text).
"""

from __future__ import annotations

import base64
import hashlib
import http
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import h11
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    TextMessage,
)

__all__ = [
    "ENCODER_TYPES",
    "NEED_DATA",
    "SUBPROTOCOLS",
    "Closed",
    "Event",
    "NeedData",
    "Refused",
    "StompBytes",
    "StompSplitter",
    "Upgraded",
    "WebSocketServer",
    "http_request_start",
]

#: The subprotocols Artemis's STOMP protocol manager registers (v10, v11 and v12.stomp).
SUBPROTOCOLS: Final = ("v10.stomp", "v11.stomp", "v12.stomp")
#: ``webSocketEncoderType`` values (Artemis's, case-sensitive).
ENCODER_TYPES: Final = ("binary", "text")
#: The request methods Artemis's protocol detection takes for HTTP.
HTTP_METHODS: Final = (
    b"GET ", b"POST ", b"PUT ", b"HEAD ", b"OPTIONS ", b"PATCH ", b"DELETE ", b"TRACE ",
)  # fmt: skip
_GUID: Final = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 §1.3
MESSAGE_TOO_BIG: Final = 1009
NORMAL_CLOSURE: Final = 1000
GOING_AWAY: Final = 1001  # RFC 6455 §7.4.1: "a server going down"


def http_request_start(data: bytes) -> bool | None:
    """Whether ``data`` starts an HTTP request (a method and a space), or None while too
    few bytes have come to tell (no STOMP frame starts like an HTTP method)."""
    for method in HTTP_METHODS:
        if data.startswith(method):
            return True
        if method.startswith(data):
            return None
    return False


class NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = NeedData()


@dataclass(frozen=True, slots=True)
class Upgraded:
    """The handshake is done (its 101 answer is in ``data_to_send``)."""

    subprotocol: str | None


@dataclass(frozen=True, slots=True)
class Refused:
    """The request was refused; its HTTP answer is in ``data_to_send``. Close after it."""

    status: int
    reason: str


@dataclass(frozen=True, slots=True)
class StompBytes:
    """STOMP bytes carried by a message (text messages as their UTF-8)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Closed:
    """The WebSocket ended: the client closed it (``by_client``), vanished (1006), or broke
    the protocol (our close frame, with ``code``, is in ``data_to_send``)."""

    code: int
    reason: str
    by_client: bool


Event = Upgraded | Refused | StompBytes | Closed


class WebSocketServer:
    """The server side of one WebSocket connection carrying STOMP."""

    def __init__(self, *, max_frame_payload: int = 65536, encoder: str = "binary") -> None:
        if encoder not in ENCODER_TYPES:
            raise ValueError(f"webSocketEncoderType must be binary or text, not {encoder!r}")
        self.max_frame_payload = max_frame_payload
        self.text = encoder == "text"
        self.subprotocol: str | None = None
        self._http: h11.Connection | None = h11.Connection(h11.SERVER)
        self._ws: Connection | None = None
        self._events: deque[Event] = deque()
        self._out = bytearray()
        self._frame_size = 0  # payload bytes of the incoming frame so far
        self._ended = False  # a Closed or Refused was produced: nothing more comes
        self._splitter = StompSplitter()
        self._message = bytearray()  # text mode: the outgoing frame so far

    @property
    def open(self) -> bool:
        """Upgraded and neither side has closed yet: STOMP bytes may still be sent."""
        return self._ws is not None and self._ws.state is ConnectionState.OPEN and not self._ended

    def data_to_send(self) -> bytes:
        out, self._out = bytes(self._out), bytearray()
        return out

    # -- incoming ---------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        """Bytes from the client; ``b""`` is the end of its stream."""
        if self._ended:
            return
        if self._ws is not None:
            self._ws.receive_data(bytes(data) if data else None)
            self._take_messages()
            return
        assert self._http is not None
        if not data:
            self._end(Closed(1006, "the connection ended during the upgrade", by_client=True))
            return
        self._http.receive_data(bytes(data))
        self._take_request()

    def next_event(self) -> Event | NeedData:
        return self._events.popleft() if self._events else NEED_DATA

    def _end(self, event: Refused | Closed) -> None:
        self._ended = True
        self._events.append(event)

    def _take_request(self) -> None:
        assert self._http is not None
        try:
            event = self._http.next_event()
        except h11.RemoteProtocolError as exc:
            self._refuse(exc.error_status_hint, f"bad HTTP request: {exc}")
            return
        if event is h11.NEED_DATA:
            return
        if not isinstance(event, h11.Request):  # (a client cannot send anything else first)
            self._refuse(400, "bad HTTP request")
            return
        self._handshake(event)

    def _handshake(self, request: h11.Request) -> None:
        headers = _headers(request.headers)
        if headers.get("upgrade", "").lower() != "websocket":
            self._refuse(
                426,
                "this is a STOMP acceptor: connect with STOMP over TCP, or upgrade to a "
                f"WebSocket (subprotocols {', '.join(SUBPROTOCOLS)})",
                [("Upgrade", "websocket")],
                connection="Upgrade, close",
            )
            return
        if request.method != b"GET":
            self._refuse(403, f"a WebSocket upgrade must be a GET, not {request.method.decode()}")
            return
        if "upgrade" not in _tokens(headers.get("connection", "").lower()):
            self._refuse(400, "missing header 'Connection: Upgrade'")
            return
        if headers.get("sec-websocket-version") != "13":
            self._refuse(
                426,
                "unsupported WebSocket version (Sec-WebSocket-Version must be 13)",
                [("Sec-WebSocket-Version", "13")],
            )
            return
        key = headers.get("sec-websocket-key", "")
        if not _valid_key(key):
            self._refuse(400, "missing or malformed Sec-WebSocket-Key")
            return
        offered = _tokens(headers.get("sec-websocket-protocol", ""))
        chosen = next((p for p in offered if p in SUBPROTOCOLS), None)
        if offered and chosen is None:
            self._refuse(
                400,
                f"none of the subprotocols offered ({', '.join(offered)}) is spoken here; "
                f"STOMP's are {', '.join(SUBPROTOCOLS)}",
            )
            return
        self._accept(key, chosen)

    def _accept(self, key: str, subprotocol: str | None) -> None:
        assert self._http is not None
        accept = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
        lines = [
            "HTTP/1.1 101 Switching Protocols",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Accept: {accept}",
        ]
        if subprotocol is not None:
            lines.append(f"Sec-WebSocket-Protocol: {subprotocol}")
        self._out += ("\r\n".join(lines) + "\r\n\r\n").encode()
        trailing = self._http.trailing_data[0]  # frames the client sent right after
        self._http = None
        self.subprotocol = subprotocol
        self._ws = Connection(ConnectionType.SERVER)
        self._events.append(Upgraded(subprotocol))
        if trailing:
            self.receive_data(trailing)

    def _refuse(
        self,
        status: int,
        reason: str,
        extra: list[tuple[str, str]] | None = None,
        connection: str = "close",
    ) -> None:
        body = (reason + "\n").encode()
        lines = [
            f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}",
            "Content-Type: text/plain; charset=utf-8",
            f"Content-Length: {len(body)}",
            f"Connection: {connection}",
            *(f"{name}: {value}" for name, value in extra or ()),
        ]
        self._out += ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        self._http = None
        self._end(Refused(status, reason))

    def _take_messages(self) -> None:
        assert self._ws is not None
        for event in self._ws.events():
            if isinstance(event, Message):
                data = event.data.encode() if isinstance(event, TextMessage) else event.data
                self._frame_size += len(data)
                if self._frame_size > self.max_frame_payload:
                    self._protocol_close(
                        MESSAGE_TOO_BIG,
                        f"a WebSocket frame larger than {self.max_frame_payload} bytes "
                        "(webSocketMaxFramePayloadLength)",
                    )
                    return
                if event.frame_finished:
                    self._frame_size = 0
                if data:
                    self._events.append(StompBytes(bytes(data)))
            elif isinstance(event, Ping):
                self._out += self._ws.send(event.response())
            elif isinstance(event, CloseConnection):
                self._closed(event)
                return

    def _closed(self, event: CloseConnection) -> None:
        assert self._ws is not None
        state = self._ws.state
        if state is ConnectionState.REMOTE_CLOSING:  # the client's close frame: answer it
            self._out += self._ws.send(event.response())
            self._end(Closed(event.code, event.reason or "", by_client=True))
        elif state is ConnectionState.CLOSED:  # the end of the stream, or our close answered
            self._end(Closed(event.code, event.reason or "", by_client=True))
        else:  # a protocol violation wsproto found
            self._protocol_close(event.code, event.reason or "WebSocket protocol error")

    def _protocol_close(self, code: int, reason: str) -> None:
        assert self._ws is not None
        self._out += self._ws.send(CloseConnection(code=code, reason=reason))
        self._end(Closed(code, reason, by_client=False))

    # -- outgoing ---------------------------------------------------------------------

    def send_stomp(self, data: bytes | bytearray | memoryview) -> None:
        """STOMP bytes to the client, one message per frame. Dropped once the WebSocket is
        closing (as bytes written to a socket whose peer has gone)."""
        if not self.open:
            return
        for piece, ends in self._splitter.split(bytes(data)):
            if self.text:
                self._message += piece
                if ends:
                    self._send_text(bytes(self._message))
                    self._message.clear()
            else:
                self._send_binary(piece, ends)

    def close(self, code: int = NORMAL_CLOSURE, reason: str = "") -> None:
        """Close the WebSocket from this side (the close frame goes to ``data_to_send``)."""
        if self.open:
            assert self._ws is not None
            self._out += self._ws.send(CloseConnection(code=code, reason=reason or None))
            self._ended = True

    def _send_binary(self, data: bytes, ends: bool) -> None:
        assert self._ws is not None
        size = self.max_frame_payload
        for start in range(0, len(data), size):
            last = start + size >= len(data)
            chunk = data[start : start + size]
            self._out += self._ws.send(BytesMessage(data=chunk, message_finished=ends and last))

    def _send_text(self, frame: bytes) -> None:
        assert self._ws is not None
        try:
            frame.decode()
        except UnicodeDecodeError:
            self._send_binary(frame, True)  # a binary body cannot travel as text
            return
        start = 0
        while start < len(frame):
            end = min(start + self.max_frame_payload, len(frame))
            while end < len(frame) and end > start + 1 and frame[end] & 0xC0 == 0x80:
                end -= 1  # never cut a character in two
            text = frame[start:end].decode()
            self._out += self._ws.send(TextMessage(data=text, message_finished=end == len(frame)))
            start = end


_BETWEEN, _HEAD, _BODY_LENGTH, _BODY_NUL, _NUL = range(5)
_CONTENT_LENGTH: Final = b"\ncontent-length:"


class StompSplitter:
    """Finds where the STOMP frames end in a stream of encoded frames (the node's own:
    a body with a NUL always has ``content-length``), so each can be a message of its own.

    :meth:`split` cuts the bytes it is given into pieces, each flagged when it ends a frame
    (or is a whole heart-beat EOL); a frame may span several calls."""

    def __init__(self) -> None:
        self._state = _BETWEEN
        self._head = bytearray()  # the current frame's command and headers so far
        self._left = 0  # body bytes still to come (content-length)

    def split(self, data: bytes) -> list[tuple[bytes, bool]]:
        pieces: list[tuple[bytes, bool]] = []
        start = i = 0
        n = len(data)
        while i < n:
            state = self._state
            if state == _BETWEEN:
                if data[i] == 0x0A:  # a heart-beat (with the CR before it, if any)
                    i += 1
                    pieces.append((data[start:i], True))
                    start = i
                elif data[i] == 0x0D:
                    i += 1
                else:
                    self._state = _HEAD
                    self._head.clear()
            elif state == _HEAD:
                i = self._read_head(data, i)
            elif state == _BODY_LENGTH:
                take = min(self._left, n - i)
                i += take
                self._left -= take
                if not self._left:
                    self._state = _NUL
            else:  # _NUL after a counted body, or a body that ends at the first NUL
                end = i if state == _NUL else data.find(b"\x00", i)
                if end < 0:
                    i = n
                    continue
                i = end + 1
                pieces.append((data[start:i], True))
                start = i
                self._state = _BETWEEN
        if start < n:
            pieces.append((data[start:], False))
        return pieces

    def _read_head(self, data: bytes, i: int) -> int:
        """Take header bytes from ``data[i:]``; where they end, the body's state begins.
        A head within one chunk (the usual case) is read in place; only one that spans
        chunks is gathered in ``_head``."""
        if not self._head:
            end = _head_end(data, i)
            if end >= 0:
                self._body_after(data[i:end])
                return end
            self._head += data[i:]
            return len(data)
        base = len(self._head)
        self._head += data[i : i + 3]  # enough to finish a terminator begun before
        end = _head_end(self._head, max(0, base - 2))
        if end < 0:
            end = _head_end(data, i)
            if end < 0:
                self._head += data[i + 3 :]
                return len(data)
            head = bytes(self._head[:base]) + data[i:end]
        else:
            head, end = bytes(self._head[:end]), i + end - base
        self._head.clear()
        self._body_after(head)
        return end

    def _body_after(self, head: bytes) -> None:
        """The frame's head is ``head``: its body is counted or ends at a NUL."""
        at = head.find(_CONTENT_LENGTH)
        if at >= 0:
            value = head[at + len(_CONTENT_LENGTH) : head.index(b"\n", at + 1)].strip()
            self._left = int(value)
            self._state = _BODY_LENGTH if self._left else _NUL
        else:
            self._state = _BODY_NUL


def _head_end(buf: bytes | bytearray, start: int) -> int:
    """Where a frame's head that starts at or before ``start`` ends (after its blank
    line), or -1: the first EOL EOL, ``\n\n`` or ``\n\r\n``."""
    lf = buf.find(b"\n\n", start)
    crlf = buf.find(b"\n\r\n", start, lf + 2 if lf >= 0 else len(buf))
    if crlf >= 0:
        return crlf + 3
    return lf + 2 if lf >= 0 else -1


def _headers(pairs: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Request headers by lower-case name; repeated ones joined with commas (RFC 9110)."""
    joined: dict[str, str] = {}
    for name, value in pairs:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        joined[key] = f"{joined[key]}, {text}" if key in joined else text
    return joined


def _tokens(value: str) -> list[str]:
    return [token.strip() for token in value.split(",") if token.strip()]


def _valid_key(key: str) -> bool:
    """A Sec-WebSocket-Key is the base64 of 16 bytes (RFC 6455 §4.1)."""
    try:
        return len(base64.b64decode(key, validate=True)) == 16
    except ValueError:
        return False
