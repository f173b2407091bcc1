"""Client connections served by the Rust data plane: the Trio shell around it.

Theory of operation
-------------------
An acceptor that serves STOMP, plain TCP or TLS, listens (unless ``ARTEMIS_PY_DATA_PLANE=0``:
then the node serves every client on the event loop) in the node's one
:class:`~artemis_py._native.DataPlane` (``rust/dataplane``): its I/O threads, one per core,
accept the connections and own their sockets, read, decode and validate frames (the
acceptor's ``stompMax*`` limits), enforce ``connectionsAllowed``, ``handshake-timeout`` and
the heart-beats Python set, and encode and write what Python sends. Python's loop sees
**batches**: :class:`DataPlaneShell` waits for the plane's eventfd, takes every event that
came meanwhile with one ``drain()`` (each event made into Python objects only when its
turn comes) and hands each to its connection; everything the connections send in one pass
of Trio's loop goes back with one ``submit()``.

Every decision stays here. A :class:`PlaneConnection` is the same
:class:`~artemis_py.sessions.stomp.StompSession` the socket shell (:mod:`.stomp`) drives,
with the same contract: a frame is handled when its event is dispatched, without a task
switch; what must wait for the disk goes into the connection's pipeline, which settles it
in frame order and then sends its RECEIPT, so a receipt never precedes durability. The
connection's one task runs that pipeline, and then the close in the socket shell's order
(see :mod:`.stomp`): settle what was read, handle the last ACKs the client sent before the
end (a ``READ_REST`` of what the socket still holds), wait for the ACKs nobody waited for to
be written, return the other deliveries to their queues, and close lingering (the plane's
flushing close), so a client that saw the close may count on its ACKs and gets its ERROR.

TLS is the plane's too (rustls on the I/O threads): the key and trust stores are read here
as for the socket shell (:func:`~artemis_py.transport.tls_contexts.plane_material`, DER
bytes), ``sslAutoReload`` hands reloaded ones to the listener (new connections use them),
and a failed handshake comes back as a ``CLOSED`` with cause ``"tls"`` and the socket
shell's reason, logged once by the acceptor's handler; the connection never became a
client. An acceptor whose settings rustls cannot serve (TLS 1.0/1.1, a cipher suite it
lacks) is served by the socket shell instead, with a warning naming the setting.

What the plane does not serve goes to the socket shell: an acceptor that serves only
cluster links is served by :mod:`.acceptor` as before, and a connection whose first bytes
are a cluster link's or an HTTP request's (a WebSocket upgrade) is handed to Python as a
socket (``HANDED_OFF``), still counted in ``connectionsAllowed`` by its lease. On a TLS
acceptor that socket is one end of a Unix socket pair: the I/O thread keeps the TLS session
(it cannot move to Python's ``ssl``) and relays the plaintext; the plane counts the
connection itself, and its lease holds nothing.

Back-pressure: a connection is writable while its unwritten bytes (the plane counts them,
read here without a lock) are below the high-water mark; once it said no, a ``WRITABLE``
event resumes its consumers. A pipeline deeper than ``PIPELINE_DEPTH`` pauses reading
(TCP's window then stops the client) until it drains to half. A body in a large-message
file goes as the frame's head, then the file's bytes in chunks paced by that same mark;
what the session sends meanwhile waits behind it, in order.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from artemis_py._native import DataPlane, DataPlaneConn
from artemis_py.protocol.cluster import MAGIC
from artemis_py.protocol.websocket import HTTP_METHODS
from artemis_py.sessions.stomp.session import frame_limits
from artemis_py.transport.plane_connection import Command, PlaneConnection
from artemis_py.transport.sockets import LINGER
from artemis_py.transport.stomp_shell import no_connect_message

if TYPE_CHECKING:
    from artemis_py.transport.acceptor import _Handler
    from artemis_py.transport.tls_contexts import PlaneTls

log = logging.getLogger("artemis_py.stomp")

FRAME = DataPlane.FRAME
# Events read ahead of the loop at most: the I/O threads stop reading there. It is what
# holds producers back to the pace the loop keeps (scenario 3: 65,536 let a backlog of
# seconds build, and the loop's CPU per message double with it; 1,024 keeps up).
MAX_QUEUED_EVENTS = 1024


class DataPlaneShell:
    """The node's data plane: its listeners' handlers, its connections by id, and the
    commands of the current pass of the loop."""

    def __init__(self, threads: int = 0) -> None:
        # A closing connection lingers as the socket shell's do (sockets.LINGER).
        self.native = DataPlane(threads, close_linger=LINGER, max_queued_events=MAX_QUEUED_EVENTS)
        self.handlers: dict[int, _Handler] = {}  # by listener id
        self.connections: dict[int, PlaneConnection] = {}
        self._opened: dict[int, tuple[DataPlaneConn, _Handler, str]] = {}  # no frame yet
        self._commands: list[Command] = []
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None

    def listen(
        self, handler: _Handler, host: str, port: int, tls: PlaneTls | None = None
    ) -> tuple[str, int]:
        """Listen for ``handler``'s acceptor on ``host``:``port`` (over TLS with ``tls``);
        the address bound. A ``ValueError`` says why ``tls`` cannot be served."""
        acceptor = handler.acceptor
        timeout = acceptor.handshake_timeout
        # Hand-offs: a WebSocket upgrade (an HTTP request) and, where served, a cluster link.
        prefixes = [*HTTP_METHODS, *([MAGIC] if handler.core else [])]
        listener, address = self.native.listen(
            host,
            port,
            frame_limits(acceptor),
            connections_allowed=acceptor.connections_allowed,
            handshake_timeout=float(timeout) if timeout > 0 else None,
            handshake_error=(no_connect_message(timeout) if timeout > 0 else None),
            tcp_send_buffer=_size(acceptor.tcp_send_buffer_size),
            tcp_receive_buffer=_size(acceptor.tcp_receive_buffer_size),
            handoff_prefixes=prefixes,
            tls=tls,
        )
        self.handlers[listener] = handler
        if tls is not None and handler.tls is not None:
            # sslAutoReload: new connections get a reloaded store's material.
            handler.tls.installers.append(lambda m: self.native.set_tls(listener, m))
        return address

    def submit(self, command: Command) -> None:
        """Queue ``command``: it goes to the plane with the rest of this pass's."""
        self._commands.append(command)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Dispatch the plane's events until cancelled, the connections' commands going
        to the plane at the end of each pass of the loop; then stop the plane (its
        connections close)."""
        self._token = trio.lowlevel.current_trio_token()
        flusher = _PassEnd(self._flush)
        trio.lowlevel.add_instrument(flusher)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await self._dispatcher()
        finally:
            trio.lowlevel.remove_instrument(flusher)
            self._flush()  # (what the connections' closes sent on the way out)
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.native.shutdown)

    def _flush(self) -> None:
        """Submit the commands of this pass of the loop: every task that ran in it had
        its say (the receipts of one journal batch, a burst of deliveries), and they go
        to the I/O threads in one call, with no task of their own to wake."""
        if not self._commands:
            return
        commands, self._commands = self._commands, []
        try:
            self.native.submit(commands)
        except Exception:  # (a batch is all or nothing: find the bad one)
            self._submit_one_by_one(commands)
            # What the aborts woke or sent must not wait for the poll to end by itself.
            assert self._token is not None
            self._token.run_sync_soon(_nothing)

    def _submit_one_by_one(self, commands: list[Command]) -> None:
        for command in commands:
            try:
                self.native.submit([command])
            except Exception as exc:  # (a frame the codec cannot encode)
                connection = self.connections.get(command[1].id)
                log.error("connection %s: cannot send: %s", getattr(connection, "id", "?"), exc)
                if connection is not None:
                    connection.abort()

    async def _dispatcher(self) -> None:
        fd = self.native.fileno()
        drain, handlers, connections = self.native.drain, self._events(), self.connections
        while True:
            await trio.lowlevel.wait_readable(fd)
            events = drain()  # each event made into Python objects as the loop reaches it
            while True:
                try:
                    for event in events:
                        try:
                            # Frames first, without a lookup of what to do: most events are.
                            if event[0] == FRAME and (connection := connections.get(event[1])):
                                connection.on_frame(event[2])
                            else:
                                handlers[event[0]](event)
                        except Exception:  # (one connection's fault stays its own)
                            log.exception("data plane event %r failed", event[:2])
                            connection = self.connections.get(event[1])
                            if connection is not None:
                                connection.abort()
                except Exception:  # (an event the binding could not make: it is dropped)
                    log.exception("data plane event lost")
                    continue
                break

    def _events(self) -> dict[int, Callable[[tuple[Any, ...]], None]]:
        """What each kind of event does."""

        def connection(event: tuple[Any, ...]) -> PlaneConnection | _Gone:
            found = self.connections.get(event[1])
            if found is not None:
                return found
            if event[1] in self._opened:
                return self._activate(event[1])
            return GONE  # the CLOSED of a connection that ended here first

        return {
            DataPlane.OPENED: self._on_opened,
            DataPlane.FRAME: lambda e: connection(e).on_frame(e[2]),
            DataPlane.PROTOCOL_ERROR: lambda e: connection(e).on_protocol_error(e[2]),
            DataPlane.COMMAND_FAILED: lambda e: connection(e).on_command_failed(e[2]),
            DataPlane.WRITABLE: lambda e: connection(e).on_writable(),
            DataPlane.TTL_EXPIRED: lambda e: connection(e).on_ttl_expired(),
            DataPlane.REST_READ: lambda e: connection(e).on_rest_read(),
            DataPlane.INPUT_ENDED: lambda e: connection(e).on_input_ended(e[2]),
            DataPlane.CLOSED: lambda e: (
                self._on_tls_failed(e) if e[2] == "tls" else connection(e).on_closed(e[2], e[3])
            ),
            DataPlane.HANDED_OFF: self._on_handed_off,
            DataPlane.REFUSED: self._on_refused,
        }

    def _on_opened(self, event: tuple[Any, ...]) -> None:
        _, conn_id, conn, listener, (host, port) = event
        handler = self.handlers[listener]
        self._opened[conn_id] = (conn, handler, f"{host}:{port}")
        ttl = handler.acceptor.connection_ttl
        if ttl > 0:  # the TTL holds from the start (heart-beats may change it at CONNECT)
            self.submit((DataPlane.SET_HEARTBEAT, conn, None, ttl / 1000))

    def _activate(self, conn_id: int) -> PlaneConnection | _Gone:
        """The connection's first STOMP event: it becomes a client connection."""
        conn, handler, peer = self._opened.pop(conn_id)
        if not handler.clients.accepting:  # the node is stopping
            self.submit((DataPlane.CLOSE, conn, False))
            return GONE
        connection = PlaneConnection(self, conn, handler, peer)
        self.connections[conn_id] = connection
        handler.clients.connections.add(connection)
        handler.clients.opened += 1
        assert self._nursery is not None
        self._nursery.start_soon(connection.run)
        return connection

    def _on_tls_failed(self, event: tuple[Any, ...]) -> None:
        """A TLS handshake failed (or did not end in time): one line, as the socket shell
        logs it; the connection was never a client. A TLS error in a client's session (a
        corrupt record) ends that session as any lost connection."""
        _, conn_id, _, reason = event
        opened = self._opened.pop(conn_id, None)
        if opened is not None:
            _, handler, peer = opened
            handler.tls_refused(peer, reason)
            return
        connection = self.connections.get(conn_id)
        if connection is not None:
            connection.on_closed("tls", reason)

    def _on_handed_off(self, event: tuple[Any, ...]) -> None:
        _, conn_id, sock, initial, lease = event
        _, handler, peer = self._opened.pop(conn_id)
        assert self._nursery is not None
        self._nursery.start_soon(handler.serve_handed_off, sock, peer, initial, lease)

    def _on_refused(self, event: tuple[Any, ...]) -> None:
        _, _, listener, (host, port) = event
        handler = self.handlers.get(listener)
        log.debug(
            "acceptor %s: connection from %s:%d refused: connectionsAllowed reached",
            handler.acceptor.name if handler is not None else "?",
            host,
            port,
        )

    def start_soon(
        self, connection: PlaneConnection, task: Callable[[], Awaitable[object]]
    ) -> None:
        """Run a connection's helper task (a body streamed out, frames held for a page
        store): in the plane's nursery, so it may start before the connection's own task
        runs; it ends by itself once the connection is gone, and a fault in it closes
        only that connection."""

        async def guarded() -> None:
            try:
                await task()
            except Exception:
                log.exception("connection %s from %s failed", connection.id, connection.peer)
                connection.abort()

        assert self._nursery is not None
        self._nursery.start_soon(guarded)

    def forget(self, connection: PlaneConnection) -> None:
        self.connections.pop(connection.conn.id, None)


def _nothing() -> None:
    pass


class _PassEnd(trio.abc.Instrument):
    """Runs a function at the end of each pass of Trio's loop, before it polls."""

    def __init__(self, function: Callable[[], None]) -> None:
        self.function = function

    def before_io_wait(self, timeout: float) -> None:
        try:
            self.function()
        except Exception:  # (Trio would drop an instrument that raises)
            log.exception("data plane commands lost")


class _Gone:
    """Takes the late events of a connection that is no longer served."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args: None


GONE = _Gone()


def _size(value: int) -> int | None:
    return None if value == -1 else value
