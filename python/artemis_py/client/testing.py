"""A scripted in-process STOMP server, for testing clients without a broker.

:class:`ScriptedStompServer` speaks the codec's SERVER role over any Trio stream (one end of
:func:`trio.testing.memory_stream_pair`, or TCP connections via :meth:`serve_tcp`). It
negotiates CONNECT (or refuses it), records every frame and heart-beat it receives, and by
default answers each ``receipt`` header with a RECEIPT; a DISCONNECT gets its receipt and
then the server closes the connection, as a broker does. Tests script the rest: hold receipts
back and release them, push MESSAGE frames, send ERROR frames, close abruptly, or hook every
frame with ``on_frame``. It is deliberately not a broker: no routing, no queues.

Every client frame goes through the real decoder, and a frame it rejects is not answered
with ERROR but raised out of :meth:`ScriptedStompServer.serve`: in a test, a client bug
(a torn or malformed frame) fails loudly instead of looking like a server refusal.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable, Sequence

import trio

from artemis_py.protocol.stomp import (
    NEED_DATA,
    PAUSED,
    SERVER,
    SUPPORTED_VERSIONS,
    Command,
    Connection,
    ConnectionClosed,
    Frame,
    Heartbeat,
    VersionNegotiationError,
    error_frame,
    negotiate_heartbeat,
    negotiate_version,
    parse_heartbeat,
)

__all__ = ["FrameHook", "ScriptedStompServer"]

FrameHook = Callable[["ScriptedStompServer", Frame], Awaitable[bool | None]]
"""``await hook(server, frame)`` for every frame after CONNECT; return True to skip the
default handling (receipts, DISCONNECT)."""


class ScriptedStompServer:
    """Serves one STOMP connection at a time; see the module doc.

    * ``versions``: what the server speaks (negotiation as in STOMP 1.2).
    * ``heartbeat``: the ``(sx, sy)`` of CONNECTED's ``heart-beat`` header; with
      ``send_heartbeats`` the server beats as negotiated.
    * ``refuse_connect``: answer CONNECT with an ERROR frame of this message, then close. As
      artemis-py refuses a login, the version is negotiated first (so the frame's headers are
      escaped by it) and the body repeats the message.
    * ``auto_receipts``: answer receipts at once; otherwise they wait in ``held_receipts``
      until :meth:`release_receipts`.
    """

    def __init__(
        self,
        *,
        versions: Sequence[str] = SUPPORTED_VERSIONS,
        heartbeat: tuple[int, int] = (0, 0),
        send_heartbeats: bool = True,
        refuse_connect: str | None = None,
        auto_receipts: bool = True,
        on_frame: FrameHook | None = None,
    ) -> None:
        self.versions = tuple(versions)
        self.heartbeat = heartbeat
        self.send_heartbeats = send_heartbeats
        self.refuse_connect = refuse_connect
        self.auto_receipts = auto_receipts
        self.on_frame = on_frame
        self.frames: list[Frame] = []
        """Every frame received, over all connections, in order."""
        self.heartbeats_received = 0
        self.held_receipts: list[str] = []
        self.connections = 0
        self.closed_connections = 0
        self.version: str | None = None
        self.subscriptions: dict[str, Frame] = {}
        self._stream: trio.abc.Stream | None = None
        self._codec = Connection(SERVER)
        self._lock = trio.Lock()
        self._changed = trio.Event()
        self._ids = itertools.count(1)
        self._closing = False

    # -- inspecting ------------------------------------------------------------------------

    def received(self, command: str) -> list[Frame]:
        """The frames of ``command`` received so far, in order."""
        return [frame for frame in self.frames if frame.command == command]

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds; it is re-checked after every received event."""
        while not predicate():
            await self._changed.wait()

    async def wait_frames(self, command: str, count: int = 1) -> list[Frame]:
        """Wait until ``count`` frames of ``command`` arrived; return them all."""
        await self.wait_for(lambda: len(self.received(command)) >= count)
        return self.received(command)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- serving ---------------------------------------------------------------------------

    async def serve(self, stream: trio.abc.Stream) -> None:
        """Serve one connection until the client or the script ends it."""
        self._stream = stream
        self._codec = Connection(SERVER)
        self._closing = False
        self.connections += 1
        try:
            async with trio.open_nursery() as nursery:
                await self._read(nursery)
                nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(stream)
            self.closed_connections += 1
            self._notify()

    async def serve_tcp(
        self,
        *,
        host: str = "127.0.0.1",
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on an ephemeral port (``task_status.started(port)``); serve connections
        one after the other, forever."""
        listeners = await trio.open_tcp_listeners(0, host=host)
        listener = listeners[0]
        for extra in listeners[1:]:
            await extra.aclose()
        async with listener:
            task_status.started(listener.socket.getsockname()[1])
            while True:
                await self.serve(await listener.accept())

    async def _read(self, nursery: trio.Nursery) -> None:
        assert self._stream is not None
        while not self._closing:
            data = await self._stream.receive_some(1 << 16)
            self._codec.receive_data(data)
            while not self._closing:
                event = self._codec.next_event()
                if event is NEED_DATA:
                    break
                assert event is not PAUSED, "CONNECT is accepted as soon as it is read"
                if isinstance(event, ConnectionClosed):
                    return
                if isinstance(event, Heartbeat):
                    self.heartbeats_received += 1
                    self._notify()
                    continue
                assert isinstance(event, Frame)
                self.frames.append(event)
                self._notify()
                await self._handle(event, nursery)
            if not data:
                return

    async def _handle(self, frame: Frame, nursery: trio.Nursery) -> None:
        if frame.command in (Command.CONNECT, Command.STOMP):
            await self._connect(frame, nursery)
            return
        if frame.command == Command.SUBSCRIBE:
            self.subscriptions[frame.get("id", "")] = frame
        elif frame.command == Command.UNSUBSCRIBE:
            self.subscriptions.pop(frame.get("id", ""), None)
        if self.on_frame is not None and await self.on_frame(self, frame):
            return
        receipt = frame.get("receipt")
        if frame.command == Command.DISCONNECT:
            await self.release_receipts()
            if receipt is not None:
                await self.send_frame(Frame(Command.RECEIPT, (("receipt-id", receipt),)))
            await self.close()
        elif receipt is not None:
            if self.auto_receipts:
                await self.send_frame(Frame(Command.RECEIPT, (("receipt-id", receipt),)))
            else:
                self.held_receipts.append(receipt)
                self._notify()

    async def _connect(self, frame: Frame, nursery: trio.Nursery) -> None:
        try:
            version = negotiate_version(frame.get("accept-version"), self.versions)
        except VersionNegotiationError as exc:
            await self.send_error(exc.message, headers=exc.error_headers)
            return
        self._codec.accept_connect(version)
        self.version = version
        if self.refuse_connect is not None:
            await self.send_error(self.refuse_connect, body=self.refuse_connect.encode())
            return
        headers = [("version", version), ("session", f"session-{self.connections}")]
        headers.append(("server", "scripted-stomp-server/1"))
        if version != "1.0":
            sx, sy = self.heartbeat
            headers.append(("heart-beat", f"{sx},{sy}"))
            send_ms, _ = negotiate_heartbeat(parse_heartbeat(frame.get("heart-beat")), (sx, sy))
            if send_ms and self.send_heartbeats:
                nursery.start_soon(self._beat, send_ms / 1000)
        await self.send_frame(Frame(Command.CONNECTED, tuple(headers)))

    async def _beat(self, interval: float) -> None:
        while not self._closing:
            await trio.sleep(interval)
            async with self._lock:
                if self._closing or self._stream is None:
                    return
                await self._stream.send_all(self._codec.send_heartbeat())

    # -- scripting -------------------------------------------------------------------------

    async def send_frame(self, frame: Frame) -> None:
        """Encode and write one frame (serialized with the heart-beats)."""
        async with self._lock:
            assert self._stream is not None, "no client connected"
            await self._stream.send_all(self._codec.send(frame))

    async def send_message(
        self,
        subscription: str,
        body: bytes = b"",
        *,
        destination: str | None = None,
        headers: Iterable[tuple[str, str]] = (),
        redelivered: bool = False,
    ) -> str:
        """Deliver a MESSAGE on ``subscription`` (an id); returns its ``message-id``.

        In STOMP 1.2 the frame carries an ``ack`` header distinct from the message id, so a
        client that acknowledges with the wrong one is caught.
        """
        number = next(self._ids)
        message_id = f"m-{number}"
        if destination is None:
            subscribe = self.subscriptions.get(subscription)
            destination = subscribe.get("destination", "") if subscribe is not None else ""
        pairs = [
            ("subscription", subscription),
            ("message-id", message_id),
            ("destination", destination),
        ]
        if self.version == "1.2":
            pairs.append(("ack", f"ack-{number}"))
        if redelivered:
            pairs.append(("redelivered", "true"))
        pairs.extend(headers)
        pairs.append(("content-length", str(len(body))))
        await self.send_frame(Frame(Command.MESSAGE, tuple(pairs), body))
        return message_id

    async def send_error(
        self,
        message: str,
        *,
        receipt_id: str | None = None,
        body: bytes = b"",
        headers: Iterable[tuple[str, str]] = (),
        close: bool = True,
    ) -> None:
        """Send an ERROR frame and (as STOMP requires of a server) close the connection."""
        await self.send_frame(
            error_frame(message, receipt_id=receipt_id, body=body, headers=headers)
        )
        if close:
            await self.close()

    async def release_receipts(self, count: int | None = None) -> None:
        """Send the first ``count`` held receipts (all if None), oldest first."""
        count = len(self.held_receipts) if count is None else count
        released, self.held_receipts = self.held_receipts[:count], self.held_receipts[count:]
        for receipt in released:
            await self.send_frame(Frame(Command.RECEIPT, (("receipt-id", receipt),)))

    async def close(self) -> None:
        """Close the connection now (the client sees the end of the stream)."""
        self._closing = True
        if self._stream is not None:
            await trio.aclose_forcefully(self._stream)
        self._notify()
