"""Acceptors: TCP listeners that hand each connection to its protocol.

An acceptor whose ``protocols`` parameter includes STOMP serves STOMP clients; one that
includes CORE serves cluster links from other nodes (in Artemis the core protocol carries
cluster connections; artemis-py's cluster links use a protocol of their own on the same
acceptors). An acceptor without a ``protocols`` parameter serves both and tells them apart
by the first bytes. On an acceptor that serves STOMP, a connection whose first bytes are an
HTTP method is a WebSocket client (STOMP over WebSocket, as Artemis serves it on the same
acceptors): :mod:`.websocket` answers its upgrade, and the STOMP connection then reads and
writes through it. Other protocols (AMQP, MQTT, OPENWIRE) are not spoken yet; an acceptor
that lists only those is not started and the log says so.

A TLS acceptor (``sslEnabled=true``, docs/tls.md) wraps each connection in a
``trio.SSLStream`` and completes the TLS handshake, within ``handshake-timeout``,
before telling the protocols apart (with the data plane on, an acceptor that serves STOMP
does all of this in the plane, rustls included: :mod:`.plane`). A failed handshake (a plain-TCP client, a client
certificate that is expired or not trusted) is one line in the log and the connection is
closed; the acceptor serves everyone else.

Limits on what connections may hold (docs/stomp.md "Limits and hostile input"):
``connectionsAllowed`` caps the connections open at once (one more is closed as soon as it
is accepted, logged at DEBUG as Artemis does), and ``handshake-timeout`` bounds the time a
new connection may take to become useful (after its TLS handshake, which has that long
too): telling the protocols apart, a WebSocket upgrade and (in :mod:`.stomp`) a STOMP
client's CONNECT together.
"""

from __future__ import annotations

import errno
import logging
import math
import socket
from collections.abc import Awaitable, Callable

import trio

from artemis_py._native import DataPlaneLease
from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.authorization import Authorizer
from artemis_py.broker.broker import Broker
from artemis_py.config import AcceptorConfig
from artemis_py.protocol.cluster import MAGIC
from artemis_py.protocol.websocket import http_request_start
from artemis_py.transport.log_backoff import LogBackoff, unlogged
from artemis_py.transport.plane import DataPlaneShell
from artemis_py.transport.plane_connection import PlaneConnection
from artemis_py.transport.sockets import FastSocketStream, close_lingering
from artemis_py.transport.stomp import StompConnection
from artemis_py.transport.tls_contexts import (
    ServerTls,
    TlsSetupError,
    handshake_failure,
    plane_material,
)
from artemis_py.transport.websocket import going_away, open_websocket

log = logging.getLogger("artemis_py.transport")

# Serves one cluster link: (stream, peer "host:port", bytes already read).
ClusterHandler = Callable[[trio.abc.Stream, str, bytes], Awaitable[None]]


def handshake_seconds(acceptor: AcceptorConfig) -> float:
    """The acceptor's ``handshake-timeout`` in seconds (0 in broker.xml: no limit)."""
    return float(acceptor.handshake_timeout) if acceptor.handshake_timeout > 0 else math.inf


async def _sniff(
    stream: trio.abc.ReceiveStream, deadline: float, *, cluster: bool, http: bool
) -> tuple[str, bytes]:
    """Read until the first bytes tell a cluster link (MAGIC, when ``cluster``), an HTTP
    request (a WebSocket upgrade, when ``http``) and a STOMP client apart: ``"cluster"``,
    ``"http"`` or ``"stomp"`` (what came by ``deadline``, if it passes first; ``"gone"`` when
    the connection broke), with the bytes read."""
    data = b""

    def undecided() -> bool:
        if cluster and len(data) < len(MAGIC) and MAGIC.startswith(data):
            return True
        return http and http_request_start(data) is None

    try:
        with trio.move_on_at(deadline):
            while undecided():
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return "gone", data
    if cluster and data.startswith(MAGIC):
        return "cluster", data
    if http and http_request_start(data):
        return "http", data
    return ("stomp" if http else "cluster"), data


def _set_buffer_sizes(sock: trio.socket.SocketType, acceptor: AcceptorConfig) -> None:
    """tcpSendBufferSize / tcpReceiveBufferSize, set on the listening socket: accepted
    connections inherit them, and the receive window they offer in the handshake fits."""
    for option, size in (
        (trio.socket.SO_SNDBUF, acceptor.tcp_send_buffer_size),
        (trio.socket.SO_RCVBUF, acceptor.tcp_receive_buffer_size),
    ):
        if size != -1:
            sock.setsockopt(trio.socket.SOL_SOCKET, option, size)


class Clients:
    """A node's client connections, so that stopping can close them before the cluster
    links (scale-down then moves what they leave in the queues), and the counts the
    metrics add to those of the open connections: of the connections that closed."""

    def __init__(self) -> None:
        self.connections: set[StompConnection | PlaneConnection] = set()
        self.accepting = True
        self.opened = 0  # client connections ever served
        self.frames_in = 0  # by the connections that closed
        self.frames_out = 0
        self.errors: dict[str, int] = {}  # ERROR frames sent, by kind (StompError.kind)

    def closed(self, connection: StompConnection | PlaneConnection) -> None:
        """``connection`` is gone: keep its counts."""
        self.connections.discard(connection)
        self.frames_in += connection.frames_in
        self.frames_out += connection.frames_out
        if connection.error_kind is not None:
            self.errors[connection.error_kind] = self.errors.get(connection.error_kind, 0) + 1

    async def close_all(self, within: float = 5.0) -> None:
        """Turn new clients away and close the open connections (waits ``within`` s)."""
        self.accepting = False
        for connection in list(self.connections):
            connection.stop()
        with trio.move_on_after(within):
            while self.connections:  # noqa: ASYNC110 (only while stopping)
                await trio.sleep(0.01)


async def serve_acceptor(
    broker: Broker,
    acceptor: AcceptorConfig,
    authenticator: Authenticator,
    cluster: ClusterHandler | None = None,
    clients: Clients | None = None,
    *,
    authorizer: Authorizer | None = None,
    plane: DataPlaneShell | None = None,
    task_status: trio.TaskStatus[list[tuple[str, int]]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on the acceptor's host and port and serve connections until cancelled; its
    STOMP clients in ``plane`` (the Rust data plane) when given, unless the acceptor's TLS
    settings are beyond it. ``task_status`` gets the addresses listened on."""
    stomp = acceptor.accepts("STOMP")
    core = acceptor.accepts("CORE")
    if not (stomp or core):
        log.info(
            "acceptor %s (%s) not started: only STOMP and cluster links are implemented so far",
            acceptor.name,
            ",".join(sorted(acceptor.protocols or ())),
        )
        task_status.started([])
        return
    tls = await _server_tls(acceptor)
    handler = _Handler(broker, acceptor, authenticator, cluster, clients or Clients(), tls)
    handler.authorizer = authorizer
    what = " and ".join(n for n, on in (("STOMP", stomp), ("cluster links", core)) if on)
    if plane is not None and stomp:
        try:
            addresses = await _listen_in_plane(plane, handler)
        except _NotForThePlane as exc:
            log.warning(
                "acceptor %s: served on the event loop, not by the data plane: %s",
                acceptor.name,
                exc,
            )
        else:
            task_status.started(addresses)
            over = " over TLS" if tls is not None else ""
            for address in addresses:
                log.info(
                    "acceptor %s listening for %s on %s:%d%s (data plane)",
                    acceptor.name,
                    what,
                    *address,
                    over,
                )
            if tls is not None and acceptor.tls.auto_reload:
                await tls.watch()  # hands reloaded stores to the plane's listeners
            await trio.sleep_forever()  # the plane serves it (transport/plane.py)
    listeners = await _listen(acceptor)
    task_status.started([listener.socket.getsockname()[:2] for listener in listeners])
    over = " over TLS" if tls is not None else ""
    for listener in listeners:
        host_port = listener.socket.getsockname()[:2]
        log.info("acceptor %s listening for %s on %s:%d%s", acceptor.name, what, *host_port, over)
    async with trio.open_nursery() as nursery:
        if tls is not None and acceptor.tls.auto_reload:
            nursery.start_soon(tls.watch)
        await trio.serve_listeners(handler.serve, listeners)


class _NotForThePlane(Exception):
    """TLS settings the data plane cannot serve (rustls lacks them): the socket shell
    serves the acceptor, as with ``ARTEMIS_PY_DATA_PLANE=0``."""


async def _listen_in_plane(plane: DataPlaneShell, handler: _Handler) -> list[tuple[str, int]]:
    """The acceptor's listening sockets in the data plane, bound as the socket shell's
    (Trio's) are: on every address of every host, a wildcard host on IPv4's and IPv6's
    (an address family the machine lacks is skipped if another one binds); the addresses
    bound. Raises :class:`_NotForThePlane`, with nothing bound, for TLS settings the plane
    cannot serve."""
    acceptor = handler.acceptor
    material = None
    if handler.tls is not None:
        try:
            material = await trio.to_thread.run_sync(plane_material, handler.tls.tls)
        except TlsSetupError as exc:  # (the stores were read already: a suite's name)
            raise _NotForThePlane(str(exc)) from None
    addresses: list[tuple[str, int]] = []
    for configured in acceptor.hosts:
        host = None if configured in ("0.0.0.0", "", "*") else configured
        try:
            resolved = await trio.socket.getaddrinfo(
                host, acceptor.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            unsupported: OSError | None = None
            bound = len(addresses)
            for ip in dict.fromkeys(str(info[4][0]) for info in resolved):
                try:
                    addresses.append(plane.listen(handler, ip, acceptor.port, material))
                except ValueError as exc:  # TLS settings rustls cannot serve
                    if addresses:  # (the same settings served the first address)
                        raise TlsSetupError(f"acceptor {acceptor.name}: {exc}") from None
                    raise _NotForThePlane(str(exc)) from None
                except OSError as exc:
                    if exc.errno != errno.EAFNOSUPPORT:
                        raise
                    unsupported = exc
            if len(addresses) == bound:
                raise unsupported or OSError(errno.EADDRNOTAVAIL, "no address to listen on")
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"acceptor {acceptor.name} cannot listen on {configured}:{acceptor.port}: "
                f"{exc.strerror or exc}",
            ) from exc
    return addresses


async def _server_tls(acceptor: AcceptorConfig) -> ServerTls | None:
    """The acceptor's TLS context (its stores read in a worker thread), or None."""
    if not acceptor.tls.enabled:
        return None
    try:
        return await trio.to_thread.run_sync(ServerTls, acceptor.name, acceptor.tls)
    except TlsSetupError as exc:
        raise TlsSetupError(f"acceptor {acceptor.name}: {exc}") from None


async def _listen(acceptor: AcceptorConfig) -> list[trio.SocketListener]:
    """Listening sockets on every host of the acceptor, with its buffer sizes."""
    listeners: list[trio.SocketListener] = []
    for configured in acceptor.hosts:
        host = None if configured in ("0.0.0.0", "", "*") else configured
        try:
            listeners += await trio.open_tcp_listeners(acceptor.port, host=host)
        except OSError as exc:
            for listener in listeners:
                await listener.aclose()
            raise OSError(
                exc.errno,
                f"acceptor {acceptor.name} cannot listen on {configured}:{acceptor.port}: "
                f"{exc.strerror}",
            ) from exc
    for listener in listeners:
        _set_buffer_sizes(listener.socket, acceptor)
    return listeners


class _Handler:
    """Serves each accepted connection: a cluster link or a STOMP client."""

    authorizer: Authorizer | None = None  # what STOMP clients may do (None: anything)

    def __init__(
        self,
        broker: Broker,
        acceptor: AcceptorConfig,
        authenticator: Authenticator,
        cluster: ClusterHandler | None,
        clients: Clients,
        tls: ServerTls | None = None,
    ) -> None:
        self.tls = tls
        self.refusals = (
            LogBackoff()
        )  # failed TLS handshakes, refused HTTP requests: by host, reason
        self.broker = broker
        self.acceptor = acceptor
        self.authenticator = authenticator
        self.cluster = cluster
        self.clients = clients
        self.stomp = acceptor.accepts("STOMP")
        self.core = acceptor.accepts("CORE")
        self.open = 0  # connections being served now (connectionsAllowed)

    async def serve(self, socket_stream: trio.SocketStream) -> None:
        allowed = self.acceptor.connections_allowed
        if allowed != -1 and self.open >= allowed:
            log.debug(
                "acceptor %s: connection refused: %d connections open (connectionsAllowed)",
                self.acceptor.name,
                self.open,
            )
            await trio.aclose_forcefully(socket_stream)
            return
        self.open += 1
        try:
            await self._serve(socket_stream)
        finally:
            self.open -= 1

    async def _serve(self, socket_stream: trio.SocketStream) -> None:
        fast = FastSocketStream(socket_stream)
        try:
            host, port = fast.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        stream: trio.abc.Stream = fast
        if self.tls is not None:
            secured = await self._handshake(fast, self.tls, peer)
            if secured is None:
                return
            stream = secured
        # handshake-timeout from here on (after TLS): telling the protocols apart, a
        # WebSocket upgrade and the STOMP CONNECT together.
        started = trio.current_time()
        deadline = started + handshake_seconds(self.acceptor)
        kind, initial = "cluster", b""
        if self.stomp:
            kind, initial = await _sniff(stream, deadline, cluster=self.core, http=True)
        await self._serve_kind(stream, peer, kind, initial, started)

    async def serve_handed_off(
        self, sock: socket.socket, peer: str, initial: bytes, lease: DataPlaneLease
    ) -> None:
        """A connection the data plane handed over (its first bytes are a cluster link's or
        an HTTP request's); ``lease`` keeps it counted in ``connectionsAllowed``."""
        try:
            stream = FastSocketStream(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))
            kind = "cluster" if initial.startswith(MAGIC) else "http"
            await self._serve_kind(stream, peer, kind, initial, trio.current_time())
        finally:
            lease.release()

    async def _serve_kind(
        self, stream: trio.abc.Stream, peer: str, kind: str, initial: bytes, started: float
    ) -> None:
        """Serve a connection once its first bytes told what it is."""
        deadline = started + handshake_seconds(self.acceptor)
        if kind == "cluster":
            await self._serve_link(stream, peer, initial)
            return
        if kind == "gone":
            await trio.aclose_forcefully(stream)
            return
        if kind == "http":
            upgraded = await open_websocket(
                stream, initial, self.acceptor, peer, deadline, self.refusals
            )
            if upgraded is None:
                return
            stream, initial = upgraded, b""
        if not self.clients.accepting:  # the node is stopping
            going_away(stream)
            await trio.aclose_forcefully(stream)
            return
        connection = StompConnection(
            self.broker,
            stream,
            self.acceptor,
            self.authenticator,
            peer,
            initial,
            authorizer=self.authorizer,
            started=started,
        )
        self.clients.connections.add(connection)
        self.clients.opened += 1
        try:
            await connection.run()
        except* Exception:
            # One broken connection must never take the acceptor down with it.
            log.exception("connection %s from %s failed", connection.id, peer)
        finally:
            self.clients.closed(connection)

    async def _handshake(
        self, stream: FastSocketStream, tls: ServerTls, peer: str
    ) -> trio.SSLStream[FastSocketStream] | None:
        """The connection over TLS, or None (logged, closed) when the handshake fails."""
        secured = trio.SSLStream(stream, tls.context, server_side=True)
        try:
            with trio.fail_after(handshake_seconds(self.acceptor)):
                await secured.do_handshake()
        except (trio.BrokenResourceError, trio.TooSlowError) as exc:
            self.tls_refused(peer, handshake_failure(exc))
            # Lingering: under TLS 1.3 the client may have sent its first frames already, and
            # closing on them unread would answer with a reset instead of the end of stream.
            await close_lingering(stream)
            return None
        return secured

    def tls_refused(self, peer: str, reason: str) -> None:
        """A TLS handshake from ``peer`` failed (here or in the data plane): one line."""
        # A node with a refused certificate retries every retry-interval: log it once,
        # then ever less often.
        quiet = self.refusals.occurred((peer.rpartition(":")[0], reason), trio.current_time())
        if quiet is not None:
            log.warning(
                "acceptor %s: TLS connection from %s closed: %s%s",
                self.acceptor.name,
                peer,
                reason,
                unlogged(quiet),
            )

    async def _serve_link(self, stream: trio.abc.Stream, peer: str, initial: bytes) -> None:
        if self.cluster is None:
            log.warning(
                "acceptor %s: cluster link from %s closed: this node has no running "
                "cluster connection",
                self.acceptor.name,
                peer,
            )
            await trio.aclose_forcefully(stream)
            return
        try:
            await self.cluster(stream, peer, initial)
        except* Exception:
            log.exception("cluster link from %s failed", peer)
