"""STOMP over WebSocket: the Trio shell around :mod:`artemis_py.protocol.websocket`.

:func:`open_websocket` answers the HTTP upgrade a client sent to a STOMP acceptor (within
what is left of the acceptor's ``handshake-timeout``) and returns a :class:`WebSocketStream`:
a ``trio.abc.Stream`` whose bytes are the STOMP bytes carried in WebSocket messages, so the
ordinary :class:`~.stomp.StompConnection` serves it unchanged (receipts, heart-beats, TTL,
frame limits, ERROR then close). On a TLS acceptor the stream it wraps is already the TLS
stream (wss). A refused upgrade is answered in HTTP, logged and closed.

The stream's reading side feeds the socket's bytes to the sans-IO
:class:`~artemis_py.protocol.websocket.WebSocketServer` and returns the STOMP bytes; a close
frame, a protocol violation or an oversized frame ends it as an end of stream does (after
the close frame is answered, or sent with its code, and logged). Its writing side turns the
STOMP shell's bytes into one message per frame. Both sides write to the socket under one
lock, so a pong never lands inside a frame. Closing sends a close frame first, shielded
and bounded, so a node that closes a connection says so in WebSocket terms, then closes the
socket lingering (:func:`~.sockets.close_lingering`). Its code is 1000 (Normal Closure) when
the STOMP session ended (DISCONNECT, ERROR, TTL), and 1001 (Going Away) once
:meth:`WebSocketStream.going_away` said the node is stopping (RFC 6455 §7.4.1).
"""

from __future__ import annotations

import logging

import trio

from artemis_py.config import AcceptorConfig
from artemis_py.protocol.websocket import (
    GOING_AWAY,
    NEED_DATA,
    NORMAL_CLOSURE,
    Closed,
    Event,
    NeedData,
    Refused,
    StompBytes,
    Upgraded,
    WebSocketServer,
)
from artemis_py.transport.log_backoff import LogBackoff, unlogged
from artemis_py.transport.sockets import close_lingering

__all__ = ["WebSocketStream", "going_away", "open_websocket"]

log = logging.getLogger("artemis_py.transport")

READ_SIZE = 1 << 16
ANSWER_TIMEOUT = 1.0  # seconds a refusal or a close frame may take to go out


class WebSocketStream(trio.abc.Stream):
    """STOMP bytes over an upgraded WebSocket connection (``stream``: the socket or TLS)."""

    def __init__(self, stream: trio.abc.Stream, server: WebSocketServer, peer: str) -> None:
        self._stream = stream
        self._server = server
        self._peer = peer
        self._received = bytearray()  # STOMP bytes not yet returned
        self._eof = False
        self._send_lock = trio.Lock()
        self._close: tuple[int, str] = (NORMAL_CLOSURE, "")  # the close frame's code, reason

    # -- receiving ----------------------------------------------------------------------

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while not self._received and not self._eof:
            data = await self._stream.receive_some(READ_SIZE)
            self._feed(data)
            await self.flush()  # pongs, the answer to a close
        return self._take(max_bytes)

    def receive_ready(self, max_bytes: int | None = None) -> bytes | None:
        """What can be read without waiting (None: nothing; ``b""``: the end), for the last
        ACKs of a closing STOMP connection. Only over a socket that can tell (not TLS)."""
        if self._received or self._eof:
            return self._take(max_bytes)
        read = getattr(self._stream, "receive_ready", None)
        while read is not None:
            data: bytes | None = read(READ_SIZE)
            if data is None:
                return None
            self._feed(data)
            if self._received or self._eof:
                return self._take(max_bytes)
        return None

    def _take(self, max_bytes: int | None) -> bytes:
        size = len(self._received) if max_bytes is None else max_bytes
        chunk = bytes(self._received[:size])
        del self._received[:size]
        return chunk

    def _feed(self, data: bytes | bytearray) -> None:
        self._server.receive_data(data)
        self.take_events()

    def take_events(self) -> None:
        """Take what the client sent so far off the WebSocket's events."""
        server = self._server
        while True:
            event = server.next_event()
            if event is NEED_DATA:
                return
            if isinstance(event, StompBytes):
                self._received += event.data
            elif isinstance(event, Closed):
                self._eof = True
                _log_close(event, self._peer)

    # -- sending ------------------------------------------------------------------------

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self._server.send_stomp(data)
        await self.flush()

    async def flush(self) -> None:
        async with self._send_lock:
            out = self._server.data_to_send()
            if out:
                await self._stream.send_all(out)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    def going_away(self) -> None:
        """The node is stopping: the close frame :meth:`aclose` sends says 1001 (Going
        Away, RFC 6455 §7.4.1), not 1000, so the client knows to reconnect elsewhere."""
        self._close = (GOING_AWAY, "the node is stopping")

    async def aclose(self) -> None:
        """Send a close frame (unless the WebSocket is closed already; then what is still
        to send, such as the close frame of a violation found by ``receive_ready``), then
        close. Shielded and bounded: ``trio.aclose_forcefully`` still says goodbye."""
        self._server.close(*self._close)
        with trio.CancelScope(shield=True), trio.move_on_after(ANSWER_TIMEOUT):
            try:
                await self.flush()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the client is gone: nobody to tell
        await close_lingering(self._stream)


def going_away(stream: trio.abc.Stream) -> None:
    """The node stops: if ``stream`` is a WebSocket, it closes with 1001 (Going Away)."""
    if isinstance(stream, WebSocketStream):
        stream.going_away()


def _log_close(event: Closed, peer: str) -> None:
    if event.by_client:
        log.debug("WebSocket connection from %s closed by the client (%d)", peer, event.code)
    else:
        log.info("WebSocket connection from %s closed (%d): %s", peer, event.code, event.reason)


async def open_websocket(
    stream: trio.abc.Stream,
    initial: bytes,
    acceptor: AcceptorConfig,
    peer: str,
    deadline: float,
    refusals: LogBackoff,
) -> WebSocketStream | None:
    """Answer the HTTP request that starts with ``initial``: the upgraded stream, or None
    (answered, logged and closed) when it is refused or not complete by ``deadline``."""
    server = WebSocketServer(
        max_frame_payload=acceptor.web_socket_max_frame_payload_length,
        encoder=acceptor.web_socket_encoder_type,
    )
    event: Event | NeedData = NEED_DATA
    try:
        event = await _request(stream, server, initial, deadline)
        if isinstance(event, Upgraded):
            websocket = WebSocketStream(stream, server, peer)
            websocket.take_events()  # frames the client sent right behind its request
            await websocket.flush()  # the 101 answer (and pongs, if it pinged already)
            log.debug("WebSocket connection from %s (subprotocol %s)", peer, event.subprotocol)
            return websocket
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        event = Closed(1006, f"the connection broke: {exc}", by_client=True)
    if isinstance(event, Refused):
        reason = f"refused ({event.status}): {event.reason}"
    elif isinstance(event, Closed):
        reason = f"abandoned: {event.reason}"
    else:
        reason = f"closed: not complete within {acceptor.handshake_timeout} s (handshake-timeout)"
    quiet = refusals.occurred((peer.rpartition(":")[0], reason), trio.current_time())
    if quiet is not None:
        log.info(
            "acceptor %s: HTTP request from %s %s%s", acceptor.name, peer, reason, unlogged(quiet)
        )
    with trio.move_on_after(ANSWER_TIMEOUT):
        answer = server.data_to_send()
        if answer:
            try:
                await stream.send_all(answer)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
    await trio.aclose_forcefully(stream)
    return None


async def _request(
    stream: trio.abc.Stream, server: WebSocketServer, initial: bytes, deadline: float
) -> Event | NeedData:
    """Feed the request to ``server`` until it decides (NEED_DATA: ``deadline`` passed)."""
    if initial:
        server.receive_data(initial)
    with trio.move_on_at(deadline):
        while (event := server.next_event()) is NEED_DATA:
            server.receive_data(await stream.receive_some(READ_SIZE))
        return event
    return NEED_DATA
