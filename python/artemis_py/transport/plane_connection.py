"""One client connection served by the data plane (see :mod:`.plane`): its session, its
pipeline and its close, in the socket shell's order (:mod:`.stomp`)."""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import trio

from artemis_py._native import DataPlane, DataPlaneConn
from artemis_py.broker.storage_views import BodyReadError, pin, stream_body, unpin
from artemis_py.protocol.stomp import Frame
from artemis_py.sessions.stomp import StompError, StompSession
from artemis_py.sessions.stomp.actions import StreamBody
from artemis_py.transport.sockets import LINGER
from artemis_py.transport.stomp import LAST_ACKS_TIMEOUT, PIPELINE_DEPTH
from artemis_py.transport.stomp_shell import (
    SessionShell,
    Step,
    no_connect_message,
    ttl_expired_message,
)

if TYPE_CHECKING:
    from artemis_py.broker.message import Message
    from artemis_py.broker.pending import Pending
    from artemis_py.transport.acceptor import _Handler
    from artemis_py.transport.plane import DataPlaneShell

log = logging.getLogger("artemis_py.stomp")

SEND, SEND_HEAD, SEND_BYTES = DataPlane.SEND, DataPlane.SEND_HEAD, DataPlane.SEND_BYTES
SEND_MESSAGE, SEND_RECEIPT = DataPlane.SEND_MESSAGE, DataPlane.SEND_RECEIPT
Command = tuple[Any, ...]


class PlaneConnection(SessionShell):
    """One client connection speaking STOMP 1.0, 1.1 or 1.2, its bytes in the data plane."""

    def __init__(
        self, shell: DataPlaneShell, conn: DataPlaneConn, handler: _Handler, peer: str
    ) -> None:
        self.conn = conn
        self.peer = peer
        self.created = time.time()  # epoch seconds (the management API shows it)
        self.clients = handler.clients
        self.session = StompSession(
            handler.broker,
            handler.acceptor,
            handler.authenticator,
            send=self.send_frame,
            writable=self.writable,
            stream_body=self.stream_body,
            send_delivery=self.send_delivery,
            authorizer=handler.authorizer,
            codec=_PlaneCodec(shell, conn),
        )
        self.id = self.session.id
        self._shell = shell
        self._submit = shell.submit
        self._paging = handler.broker.paging
        # What an idle connection holds is kept small (a node may serve tens of thousands):
        # no task but its own, and what is seldom needed is made when first needed.
        self._steps = _Steps()  # the pipeline
        self._pipelined = 0  # steps sent to the pipeline and not yet settled
        self._paused = False  # reading paused by the pipeline's depth
        self._held: deque[Frame] | None = None  # frames waiting for a page store to be made
        self._outbox: deque[Command | StreamBody] | None = None  # behind a streamed body
        self._body_writable: trio.Event | None = None  # a streamed body waits for room
        self._reading = True  # frames are handled (not after an ERROR, a DISCONNECT, ...)
        self._closing = False  # nothing but an ERROR goes out any more
        self._failed = False  # an ERROR was sent: nothing after its frame is handled
        self._rest: list[Frame] | None = None  # frames read for the last ACKs, if any
        self._read_rest = False  # the close reads what the socket still holds
        self._ended = False  # the close has begun
        self._rest_read: trio.Event | None = None  # made when the close reads the rest
        self._closed = trio.Event()  # the plane closed the socket
        # For the metrics (plain ints: counted on the hot path, read by a scrape).
        self.frames_in = 0
        self.frames_out = 0
        self.error_kind: str | None = None  # of the ERROR frame sent, if any

    # -- outgoing ----------------------------------------------------------------------

    def writable(self) -> bool:
        return not self._closing and self._outbox is None and self.conn.writable()

    def send_frame(self, frame: Frame) -> None:
        if self._closing and frame.command != "ERROR":
            return
        self._send((SEND, self.conn, frame))

    def send_receipt(self, receipt: str, pending: Pending | None) -> None:
        if not self._closing:  # (encoded in the plane: no Frame made for it)
            self._send(
                (SEND_RECEIPT, self.conn, receipt, pending is not None and pending.duplicate)
            )

    def send_delivery(self, headers: list[tuple[str, str]], message: Message) -> None:
        if not self._closing:  # (its standard headers, properties and body read in the plane)
            self._send((SEND_MESSAGE, self.conn, headers, message))

    def _send(self, command: Command) -> None:
        """A frame goes out: after a streamed body being sent, if one is."""
        self.frames_out += 1
        if self._outbox is not None:
            self._outbox.append(command)
        else:
            self._submit(command)

    def stream_body(self, action: StreamBody) -> None:
        """Send the action's frame head, then its body from its file, in order."""
        if self._closing:
            return
        self.frames_out += 1
        pin(action.body)
        if self._outbox is None:
            self._outbox = deque()
            self._shell.start_soon(self, self._send_outbox)
        self._outbox.append(action)

    async def _send_outbox(self) -> None:
        outbox = self._outbox
        assert outbox is not None
        try:
            while outbox:
                item = outbox.popleft()
                if isinstance(item, StreamBody):
                    await self._send_body(item)
                else:
                    self._submit(item)
        except BodyReadError as exc:
            # Half a frame is on the wire: the connection cannot go on. The delivery goes
            # back to its queue (unless auto-acknowledged) when the session closes.
            log.error("connection %s from %s closed: %s", self.id, self.peer, exc)
            self.abort()
        finally:
            for item in outbox:
                if isinstance(item, StreamBody):
                    unpin(item.body)
            self._outbox = None
        self.session.resume()

    async def _send_body(self, action: StreamBody) -> None:
        body, conn = action.body, self.conn
        try:
            self._submit((SEND_HEAD, conn, action.frame, body.length))

            async def send(chunk: bytes | bytearray) -> None:
                self._submit((SEND_BYTES, conn, bytes(chunk)))
                while not self._closed.is_set() and not conn.writable():
                    self._body_writable = writable = trio.Event()
                    await writable.wait()

            await stream_body(body, send, lambda n: None)
            self._submit((SEND_BYTES, conn, b"\x00"))
        finally:
            unpin(body)

    # -- events ------------------------------------------------------------------------

    def on_frame(self, frame: Frame) -> None:
        if self._rest is not None:
            self._rest.append(frame)  # the close handles its ACKs
            return
        if not self._reading:
            return
        self.frames_in += 1
        if self._held or (frame.command in ("SEND", "COMMIT") and self._paging.creating_stores()):
            # An address's first page store is being made: sends wait for it rather than
            # pile up in memory (the limit holds from the first message).
            if self._held is None:
                self._held = deque()
            self._held.append(frame)
            if len(self._held) == 1:
                self._pause()
                self._shell.start_soon(self, self._handle_held)
            return
        self._handle(frame)

    async def _handle_held(self) -> None:
        held = self._held
        assert held is not None
        while held and self._reading:
            if held[0].command in ("SEND", "COMMIT") and self._paging.creating_stores():
                await self._paging.stores_created()
                continue
            self._handle(held.popleft())
        held.clear()
        self._resume()

    def _handle(self, frame: Frame) -> None:
        session = self.session
        receipt = frame.get("receipt")
        try:
            pending = session.handle(frame)
        except StompError as exc:
            self._fail(str(exc), receipt, exc.error_headers, exc.kind)
            return
        if frame.command in ("CONNECT", "STOMP"):
            receipt = None  # CONNECTED is the answer
            interval, ttl = session.heartbeat_interval, session.ttl
            self._submit(
                (
                    DataPlane.SET_HEARTBEAT,
                    self.conn,
                    interval or None,
                    ttl if ttl != math.inf else None,
                )
            )
        if (pending is not None or receipt is not None) and not self._done_now(pending, receipt):
            self._pipelined += 1
            self._steps.send_nowait((pending, receipt))
            if self._pipelined >= PIPELINE_DEPTH:
                self._pause()
        if session.disconnecting:
            self._finish(read_rest=False)  # frames after DISCONNECT are ignored

    def on_protocol_error(self, error: Exception) -> None:
        headers = getattr(error, "error_headers", ())
        self._fail(str(error), None, headers, kind="protocol")

    def on_command_failed(self, error: Exception) -> None:
        log.error("connection %s from %s: cannot send: %s", self.id, self.peer, error)
        self.abort()

    def on_writable(self) -> None:
        if self._body_writable is not None:
            self._body_writable.set()
        if self._outbox is None:
            self.session.resume()

    def on_ttl_expired(self) -> None:
        message = ttl_expired_message(self.peer, self.session.ttl)
        log.info("connection %s: %s", self.id, message)
        self._queue_error(message, None, kind="timeout")
        self._finish(read_rest=True)

    def on_rest_read(self) -> None:
        if self._rest_read is not None:
            self._rest_read.set()

    def on_input_ended(self, unread: int) -> None:
        if unread:
            log.debug("connection %s: %d bytes of an unfinished frame dropped", self.id, unread)
        self._finish(read_rest=False)

    def on_closed(self, cause: str, detail: str | None) -> None:
        if cause == "handshake-timeout":
            message = no_connect_message(self.session.acceptor.handshake_timeout)
            log.info("connection %s from %s: %s", self.id, self.peer, message)
            self.error_kind = "timeout"
        elif cause == "panic":
            log.error(
                "connection %s from %s failed in the data plane: %s", self.id, self.peer, detail
            )
        elif cause not in ("requested", "shutdown"):
            log.debug("connection %s from %s lost: %s %s", self.id, self.peer, cause, detail or "")
        self._closing = True
        self._closed.set()
        for waiting in (self._rest_read, self._body_writable):
            if waiting is not None:
                waiting.set()
        self._finish(read_rest=False)

    def stop(self) -> None:
        """Close the connection because the node stops: read nothing more, let what was
        read complete (receipts included), then close. Unacknowledged deliveries go back to
        their queues, as when a client disconnects."""
        self._finish(read_rest=True)

    def abort(self) -> None:
        """Close without another word (the connection cannot go on)."""
        self._closing = True
        self._finish(read_rest=False)

    # -- closing -----------------------------------------------------------------------

    def _fail(
        self,
        message: str,
        receipt: str | None,
        extra_headers: tuple[tuple[str, str], ...] = (),
        kind: str = "refused",
    ) -> None:
        self._refused(message)
        self._queue_error(message, receipt, extra_headers, kind)
        self._finish(read_rest=False)

    def _finish(self, *, read_rest: bool) -> None:
        """Read nothing more (but the last ACKs, with ``read_rest``) and begin the close."""
        if self._ended:
            return
        if read_rest and self._reading:
            self._rest = []  # from now on frames are collected for the last ACKs
        self._reading = False
        self._read_rest = read_rest
        if not self._closed.is_set():
            self._submit((DataPlane.PAUSE_READING, self.conn))
        self._ended = True
        self._steps.close()  # the connection's task settles what is in it, then closes

    def _pause(self) -> None:
        if not self._paused:
            self._paused = True
            self._submit((DataPlane.PAUSE_READING, self.conn))

    def _resume(self) -> None:
        if self._paused and self._reading and not self._held and (self._pipelined < PIPELINE_DEPTH):
            self._paused = False
            self._submit((DataPlane.RESUME_READING, self.conn))

    # -- the connection's task ---------------------------------------------------------

    async def run(self) -> None:
        """Settle the pipeline until the connection ends, then close in order."""
        try:
            await self._run_pipeline(self._steps)  # until the close began and it is settled
            self._closing = True  # nothing more goes out, and consumers take nothing
            # Shielded: a node that stops without scale-down cancels its connections, and
            # their last ACKs count then too. Bounded: it does not wait long.
            with trio.CancelScope(shield=True), trio.move_on_after(LAST_ACKS_TIMEOUT):
                await self._last_acks()
                await self._acks_written()
        except Exception:
            # One broken connection must never take the others down with it.
            log.exception("connection %s from %s failed", self.id, self.peer)
        finally:
            self._closing = True
            self.session.close()
            self._rest = None
            try:
                if not self._closed.is_set():
                    self._submit((DataPlane.CLOSE, self.conn, True))
                    # The plane closes lingering (its last frames reach a client still
                    # sending), within LINGER: a stopping node waits for that, as for the
                    # socket shell's connections.
                    with trio.move_on_after(LINGER + 1):
                        await self._closed.wait()
            finally:
                self._shell.forget(self)
                self.clients.closed(self)

    def _step_settled(self) -> None:
        if self._paused and self._pipelined <= PIPELINE_DEPTH // 2:
            self._resume()

    async def _refuse_step(self, refusal: StompError, receipt: str | None) -> None:
        if not self._closing:
            self._fail(str(refusal), receipt, refusal.error_headers, refusal.kind)

    async def _last_acks(self) -> None:
        """Handle the ACK and NACK frames the client sent before the end (what was read
        after the close began, then what the socket still held) and settle them, before
        the session returns its unacknowledged deliveries (the socket shell's
        ``_last_acks`` does the same)."""
        session = self.session
        if (
            not self._read_rest
            or self._failed
            or session.disconnecting
            or not session.connected
            or self._closed.is_set()
        ):
            return
        self._rest_read = rest_read = trio.Event()
        self._submit((DataPlane.READ_REST, self.conn))
        await rest_read.wait()
        frames, self._rest = self._rest or [], None
        await self._settle_last_acks(frames)


class _PlaneCodec:
    """The session's codec, as far as the session drives it: the version the CONNECT
    chose goes to the connection's codec in the plane (before the CONNECTED it sends)."""

    __slots__ = ("_conn", "_shell")

    def __init__(self, shell: DataPlaneShell, conn: DataPlaneConn) -> None:
        self._shell, self._conn = shell, conn

    def accept_connect(self, version: str) -> None:
        self._shell.submit((DataPlane.ACCEPT_CONNECT, self._conn, version))


class _Steps:
    """A connection's pipeline: the steps its task settles, in frame order. What of a
    memory channel the pipeline uses, for one reader, at a fraction of its memory (an
    idle connection's is empty and holds nothing).

    Closing ends it once the reader has taken every step; a step sent after the close but
    before the reader saw the end (a frame whose handling began the close) is still taken.
    """

    __slots__ = ("_closed", "_ended", "_steps", "_wakeup")

    def __init__(self) -> None:
        self._steps: deque[Step] | None = None
        self._wakeup: trio.Event | None = None  # the reader waits for a step
        self._closed = False
        self._ended = False  # the reader was told: nothing more is taken

    def send_nowait(self, step: Step) -> None:
        if self._ended:
            raise trio.ClosedResourceError("the pipeline has ended")
        if self._steps is None:
            self._steps = deque()
        self._steps.append(step)
        self._wake()

    def close(self) -> None:
        """No more steps: the reader gets EndOfChannel once it took the last."""
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = None

    def receive_nowait(self) -> Step:
        if self._steps:
            return self._steps.popleft()
        if self._closed:
            self._ended = True
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> Step:
        while not self._steps and not self._closed:
            self._wakeup = wakeup = trio.Event()
            await wakeup.wait()
        return self.receive_nowait()
