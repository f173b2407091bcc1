"""A STOMP connection: the Trio shell around a STOMP session.

Theory of operation
-------------------
The semantics live in :class:`~artemis_py.sessions.stomp.StompSession` (sans-IO); this
shell moves bytes and time. Each connection runs four tasks:

* the *reader* feeds socket bytes to the session's codec and hands each frame to the
  session (a SEND or COMMIT first waits while a page store is being created, see
  :meth:`~artemis_py.broker.paging.PagingManager.stores_created`); whatever must wait for
  the disk comes back as a
  :class:`~artemis_py.broker.pending.Pending` (or, for a browse, a
  :class:`~artemis_py.sessions.stomp.actions.Browse` to read), pushed onto the connection's
  pipeline with the frame's receipt;
* the *pipeline* settles each pending in order (waits for its journal tickets, then its
  effect happens: a sent message reaches its queues), carries out each browse in its turn
  (reads through the broker's ``offsets``, page files in worker threads; the session
  sends what was found) and sends its RECEIPT: receipts are
  therefore in frame order and never precede durability, while a producer that pipelines
  frames gets group commit. A frame with nothing to wait for, arriving while the pipeline
  is empty, is settled by the reader at once: the order is the same, and a non-persistent
  message costs no task switch;
* the *writer* owns the socket's send side: frames are appended to one outgoing buffer and
  written in large chunks; consumers stop taking messages while it is above a high-water
  mark, and delivery resumes when it drains (TCP back-pressure reaches the queues). A body
  in a large-message file (a session's
  :class:`~artemis_py.sessions.stomp.actions.StreamBody`) is streamed from the file in its
  turn (:mod:`.bodies`) and counts toward the high-water mark;
* the *heart-beat* task sends a heart-beat when nothing was sent for the negotiated
  interval (Artemis's cadence) and enforces the connection TTL (an ERROR with Artemis's
  AMQ229014 text, then the close).

A refused frame or a protocol error is answered with an ERROR frame (with the receipt-id of
the frame that caused it), after which the connection closes, as STOMP requires. Closing
returns every unacknowledged delivery to its queue for redelivery.

Closing, in order (issue 17 §4): the tasks above end (however: end of stream, DISCONNECT,
ERROR, TTL, a broken socket, the node stopping), the pipeline settles what it holds, then
:meth:`StompConnection._last_acks` handles the ACK and NACK frames the client sent before
the end that were not handled yet (bytes the reader had read, and what the socket still
holds without waiting) and settles them, and only then does the session return the other
deliveries to their queues. A message whose ACK reached the node's socket is therefore
never delivered again. Not after a DISCONNECT or an ERROR: frames after those are ignored.
The socket then closes lingering (:func:`~.sockets.close_lingering`): a client that is
still sending gets the ERROR, not a reset.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.authorization import Authorizer
from artemis_py.broker.broker import Broker
from artemis_py.broker.storage_views import BodyReadError
from artemis_py.config import AcceptorConfig
from artemis_py.protocol.stomp import (
    NEED_DATA,
    Connection,
    ConnectionClosed,
    Frame,
    Heartbeat,
    ProtocolError,
    Role,
)
from artemis_py.sessions.stomp import StompError, StompSession
from artemis_py.sessions.stomp.actions import StreamBody
from artemis_py.sessions.stomp.session import frame_limits
from artemis_py.transport.bodies import BodyQueue
from artemis_py.transport.sockets import close_lingering
from artemis_py.transport.stomp_shell import (
    SessionShell,
    Step,
    no_connect_message,
    ttl_expired_message,
)
from artemis_py.transport.websocket import going_away

if TYPE_CHECKING:
    pass

log = logging.getLogger("artemis_py.stomp")

HIGH_WATER = 1 << 20  # outgoing bytes above which consumers pause
READ_SIZE = 1 << 16
PIPELINE_DEPTH = 4096  # frames awaiting durability before the reader stops reading
LAST_READ_LIMIT = 1 << 20  # bytes read for the last ACKs of a closing connection, at most
LAST_ACKS_TIMEOUT = 5.0  # seconds the last ACKs of a closing connection may take to settle
CONNECT_POLL = 0.1  # seconds between heart-beat checks before the CONNECT set an interval


class StompConnection(SessionShell):
    """One client connection speaking STOMP 1.0, 1.1 or 1.2."""

    def __init__(
        self,
        broker: Broker,
        stream: trio.abc.Stream,
        acceptor: AcceptorConfig,
        authenticator: Authenticator,
        peer: str = "?",
        initial: bytes = b"",
        *,
        authorizer: Authorizer | None = None,
        started: float | None = None,
    ) -> None:
        """``started``: when the connection's ``handshake-timeout`` began (Trio's clock;
        by default now): the acceptor may have spent part of it already."""
        self.stream = stream
        self.peer = peer
        self.created = time.time()  # epoch seconds (the management API shows it)
        self._codec = Connection(Role.SERVER, limits=frame_limits(acceptor))
        self.session = StompSession(
            broker,
            acceptor,
            authenticator,
            send=self.send_frame,
            writable=self.writable,
            stream_body=self.stream_body,
            authorizer=authorizer,
            codec=self._codec,
        )
        self.id = self.session.id
        self._paging = broker.paging
        self._outgoing = bytearray()
        self._bodies = BodyQueue()  # sent before _outgoing: parts ahead of it, large bodies
        self._data_ready = trio.Event()
        self._drained = trio.Event()
        self._pipeline_send, self._pipeline_recv = trio.open_memory_channel[Step](PIPELINE_DEPTH)
        self._pipelined = 0  # steps sent to the pipeline and not yet settled
        self._closing = False
        self._failed = False  # an ERROR was sent: nothing after its frame is handled
        self._codec_eof = False  # the codec was told the stream ended
        self._pipeline_done = trio.Event()
        self._last_received = trio.current_time()
        self._last_sent = self._last_received
        # handshake-timeout: the CONNECT must be in by then (see _receive).
        self._handshake_timeout = acceptor.handshake_timeout
        self._connect_deadline = (
            (self._last_received if started is None else started) + self._handshake_timeout
            if self._handshake_timeout > 0
            else math.inf
        )
        self._cancel_scope: trio.CancelScope | None = None
        self._initial = initial  # bytes read while telling protocols apart
        self._reading = trio.CancelScope()  # cancelled by stop()
        # For the metrics (plain ints: counted on the hot path, read by a scrape).
        self.frames_in = 0
        self.frames_out = 0
        self.error_kind: str | None = None  # of the ERROR frame sent, if any

    # -- outgoing ----------------------------------------------------------------------

    def writable(self) -> bool:
        return not self._closing and len(self._outgoing) + self._bodies.queued < HIGH_WATER

    def send_frame(self, frame: Frame) -> None:
        if self._closing and frame.command != "ERROR":
            return
        self.frames_out += 1
        self._outgoing += self._codec.send(frame)
        self._data_ready.set()

    def stream_body(self, action: StreamBody) -> None:
        """Send the action's frame (without its body), then its body streamed from its file."""
        if self._closing:
            return
        body = action.body
        self.frames_out += 1
        self._outgoing += self._codec.send(action.frame, body.length)
        self._bodies.push(self._outgoing, body)
        self._outgoing = bytearray(b"\x00")
        self._data_ready.set()

    async def _writer(self) -> None:
        while True:
            await self._data_ready.wait()
            # One more scheduler round: frames other tasks produce in it (the receipts of
            # one journal batch, a burst of deliveries) go out in the same send.
            await trio.lowlevel.checkpoint()
            self._data_ready = trio.Event()
            while self._outgoing or self._bodies.parts:
                if self._bodies.parts:
                    await self._send_bodies()
                    continue
                # Swap buffers instead of copying: frames encoded meanwhile go to a new one.
                chunk, self._outgoing = self._outgoing, bytearray()
                await self.stream.send_all(chunk)
                self._last_sent = trio.current_time()
                # The buffer drained below the high-water mark: consumers may go on.
                self.session.resume()
            if self._closing:
                self._drained.set()

    async def _send_bodies(self) -> None:
        try:
            await self._bodies.send(self.stream.send_all)
        except BodyReadError as exc:
            # Half a frame is on the wire: the connection cannot go on. The delivery goes
            # back to its queue (unless auto-acknowledged) when the session closes.
            log.error("connection %s from %s closed: %s", self.id, self.peer, exc)
            self._closing = True
            if self._cancel_scope is not None:
                self._cancel_scope.cancel()
            return
        self._last_sent = trio.current_time()
        self.session.resume()

    # -- running -----------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until the client leaves, errs or times out."""
        try:
            async with trio.open_nursery() as nursery:
                # The pipeline outlives the other tasks: what it holds was accepted, and
                # its journal records may be written already. If the connection fails (a
                # reset, the TTL), its effects must still happen (a message reaches its
                # queue), only without receipts.
                nursery.start_soon(self._pipeline)
                await self._serve()
                self._pipeline_send.close()
        finally:
            if trio.current_effective_deadline() == -math.inf:
                # Cancelled from outside: the node stops (the socket shell's nursery, or the
                # data plane's for a WebSocket it handed over). RFC 6455 §7.4.1: 1001.
                going_away(self.stream)
            self._bodies.close()
            # Shielded: a node that stops without scale-down cancels its connections, and
            # their last ACKs count then too. Bounded: a stopping node does not wait long.
            with trio.CancelScope(shield=True):
                try:
                    with trio.move_on_after(LAST_ACKS_TIMEOUT):
                        await self._last_acks()
                        await self._acks_written()
                finally:
                    self.session.close()
                    await close_lingering(self.stream)

    async def _serve(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._cancel_scope = nursery.cancel_scope
                nursery.start_soon(self._writer)
                nursery.start_soon(self._heartbeats)
                with self._reading:
                    await self._reader()
                await self._finish()
                nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as group:
            log.debug("connection %s from %s lost: %s", self.id, self.peer, group.exceptions[0])
        finally:
            self._closing = True  # nothing more goes out, and consumers take nothing more

    def stop(self) -> None:
        """Close the connection because the node stops: read nothing more, let what was
        read complete (receipts included), then close. Unacknowledged deliveries go back to
        their queues, as when a client disconnects."""
        going_away(self.stream)
        self._reading.cancel()

    async def _reader(self) -> None:
        session, codec = self.session, self._codec
        while not self._closing:
            data: bytes | bytearray
            if self._initial:
                data, self._initial = self._initial, b""
            else:
                received = await self._receive()
                if received is None:
                    return
                data = received
            self._last_received = trio.current_time()
            codec.receive_data(data)
            self._codec_eof = not data
            while not self._closing:
                try:
                    event = codec.next_event()
                except ProtocolError as exc:
                    await self._fail(str(exc), None, exc.error_headers, kind="protocol")
                    return
                if event is NEED_DATA:
                    break
                if isinstance(event, ConnectionClosed):
                    return
                if isinstance(event, Heartbeat):
                    continue
                assert isinstance(event, Frame)
                self.frames_in += 1
                await self._handle(event)
                if session.disconnecting:
                    return
            if not data:
                return

    async def _receive(self) -> bytes | bytearray | None:
        """The next bytes from the client, or None: no CONNECT came within the acceptor's
        ``handshake-timeout`` (Artemis: a connection that has not completed its handshake
        by then is closed, so idle or slow connections cannot pile up), answered here
        with an ERROR that says so."""
        if self.session.connected or self._connect_deadline == math.inf:
            return await self.stream.receive_some(READ_SIZE)
        with trio.move_on_at(self._connect_deadline):
            return await self.stream.receive_some(READ_SIZE)
        await self._fail(
            no_connect_message(self._handshake_timeout),
            None,
            kind="timeout",
        )
        return None

    async def _handle(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        if frame.command in ("SEND", "COMMIT") and self._paging.creating_stores():
            # An address's first page store is being made: sends wait for it rather than
            # pile up in memory (the limit holds from the first message).
            await self._paging.stores_created()
        try:
            pending = self.session.handle(frame)
        except StompError as exc:
            await self._fail(str(exc), receipt, exc.error_headers, exc.kind)
            return
        if frame.command in ("CONNECT", "STOMP"):
            receipt = None  # CONNECTED is the answer
        if (pending is None and receipt is None) or self._done_now(pending, receipt):
            return
        self._pipelined += 1
        step = (pending, receipt)
        try:
            # send_nowait: the reader goes on with the frames it has without a task switch.
            self._pipeline_send.send_nowait(step)
        except trio.WouldBlock:
            await self._pipeline_send.send(step)

    async def _pipeline(self) -> None:
        await self._run_pipeline(self._pipeline_recv)
        self._pipeline_done.set()

    async def _refuse_step(self, refusal: StompError, receipt: str | None) -> None:
        if self._closing:
            return  # the connection ends anyway: nobody to tell
        await self._fail(str(refusal), receipt, refusal.error_headers, refusal.kind)
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    async def _finish(self) -> None:
        """Let queued work complete and the last frames go out before closing."""
        self._pipeline_send.close()
        await self._pipeline_done.wait()
        self._closing = True
        if self._outgoing or self._bodies.parts:
            self._data_ready.set()
            with trio.move_on_after(5):
                await self._drained.wait()

    async def _last_acks(self) -> None:
        """Handle the ACK and NACK frames that reached the node before the connection
        closed and were not handled yet, and settle them, before the session returns its
        unacknowledged deliveries (see the module doc)."""
        self._closing = True  # an ACK makes room in a window: nothing more goes out
        session = self.session
        if self._failed or session.disconnecting or not session.connected:
            return
        await self._settle_last_acks(self._rest_frames())

    def _rest_frames(self) -> Iterator[Frame]:
        """The frames of the rest of what the reader had read, then of what the socket
        holds now (at most LAST_READ_LIMIT bytes, without waiting for more); it ends at a
        malformed frame or a partial one at the end (the client did not finish it)."""
        codec, budget = self._codec, LAST_READ_LIMIT
        while True:
            try:
                event = codec.next_event()
            except ProtocolError:
                return  # a malformed frame, or the end of the stream in the middle of one
            if event is NEED_DATA:
                data = self._read_ready(budget)
                if data is None:
                    return  # nothing more without waiting: a partial frame is dropped
                budget -= len(data)
                codec.receive_data(data)  # b"": the end of the stream
                continue
            if isinstance(event, ConnectionClosed):
                return
            if isinstance(event, Heartbeat):
                continue
            if not isinstance(event, Frame):
                return  # PAUSED, which only a CONNECT not answered yet causes
            yield event

    def _read_ready(self, budget: int) -> bytes | None:
        """What the socket holds now (``b""`` at its end), or None: nothing without waiting,
        the budget spent, or a stream that cannot tell (only sockets can)."""
        read = getattr(self.stream, "receive_ready", None)
        if read is None or budget <= 0 or self._codec_eof:
            return None
        data: bytes | None = read(min(READ_SIZE, budget))
        if data == b"":
            self._codec_eof = True
        return data

    async def _fail(
        self,
        message: str,
        receipt: str | None,
        extra_headers: tuple[tuple[str, str], ...] = (),
        kind: str = "refused",
    ) -> None:
        self._refused(message)
        await self._send_error(message, receipt, extra_headers, kind)

    async def _send_error(
        self,
        message: str,
        receipt: str | None,
        extra_headers: tuple[tuple[str, str], ...] = (),
        kind: str = "refused",
    ) -> None:
        """Send an ERROR as the connection's last frame and let it go out (5 s at most)."""
        self._queue_error(message, receipt, extra_headers, kind)
        self._data_ready.set()
        with trio.move_on_after(5):
            await self._drained.wait()

    async def _heartbeats(self) -> None:
        """Send a heart-beat when nothing was sent for the negotiated interval (as Artemis
        does: one beat per interval on an idle connection), and enforce the TTL. Sleeps
        until the earlier of the two deadlines, so no gap exceeds the interval by more than
        a scheduling delay; before CONNECT it checks every CONNECT_POLL seconds for the
        interval being set."""
        session = self.session
        while True:
            now = trio.current_time()
            if now - self._last_received >= session.ttl:
                await self._ttl_expired()
                return
            wake = self._last_received + session.ttl
            interval = session.heartbeat_interval
            if not session.connected:
                wake = min(wake, now + CONNECT_POLL)
            elif interval:
                due = self._last_sent + interval
                if due <= now:
                    if not self._outgoing and not self._bodies.parts:
                        self._outgoing += self._codec.send_heartbeat()
                        self._data_ready.set()
                    # The beat (or the frames already waiting) moves _last_sent when it is
                    # written; until then nothing more is due.
                    due = now + interval
                wake = min(wake, due)
            await trio.sleep_until(wake)

    async def _ttl_expired(self) -> None:
        message = ttl_expired_message(self.peer, self.session.ttl)
        log.info("connection %s: %s", self.id, message)
        await self._send_error(message, None, kind="timeout")
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()
