"""Cluster links: the Trio shell around the sans-IO cluster protocol.

A link is one TCP connection between two nodes, opened by the node whose cluster connection
dials out (the *outgoing* side). Over it flow, in opposite directions:

* outgoing → incoming: messages from the outgoing side's bridge, and its announcements;
* incoming → outgoing: confirmations, the incoming side's topology, and its bindings (its
  queues and their consumers, and the remote bindings it knows within the dialler's
  ``max-hops``), which tell the dialler where messages may go.

A symmetric cluster therefore has two links per pair of nodes, one each way.

:class:`Link` moves bytes and time: it runs the handshake, a writer task that owns the
socket's send side, the reader that hands each event to the cluster connection
(:mod:`artemis_py.cluster`, which gives them their meaning), and the heart-beat task: both
sides send a ping every ``check-period`` and give up on a link that has been silent for
``connection-ttl``, which catches half-open connections. :func:`connect` dials a node and
completes the handshake (:func:`open_link` does it over any stream). A message whose body
is in a large-message file is streamed from the file by the writer task in its turn
(:mod:`.bodies`); the high-water mark counts it.

A connector with ``sslEnabled=true`` makes :func:`connect` dial over TLS and verify the
peer's certificate before the handshake (docs/tls.md); a certificate the dialler does not
trust ends the attempt with :class:`LinkTlsError`, which says why.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable

import trio

from artemis_py.broker.message import LargeBody
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.errors import ProtocolError
from artemis_py.storage.large_message_files import LargeMessageError
from artemis_py.transport.bodies import BodyQueue
from artemis_py.transport.sockets import FastSocketStream
from artemis_py.transport.tls_contexts import dial_failure, tls_refusal

log = logging.getLogger("artemis_py.cluster")

READ_SIZE = 64 * 1024
HIGH_WATER = 1024 * 1024  # outgoing bytes buffered before the bridge stops sending


class LinkError(Exception):
    """The link failed (the message says why, for the log)."""


class LinkRefused(LinkError):
    """The peer refused the link (wrong credentials, cluster name, version)."""


class LinkTlsError(LinkRefused):
    """The TLS handshake with the peer failed (an untrusted certificate, a plain port)."""


class Link:
    """One established cluster connection; subclasses handle the events of their side."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        codec: wire.Connection,
        peer: str,
        *,
        ping_interval: float,
        ttl: float,
    ) -> None:
        self.stream = stream
        self.codec = codec
        self.peer = peer  # "host:port", for the log
        self.ping_interval = ping_interval
        self.ttl = ttl
        self.established: wire.Established | None = None
        self.closing = False
        self._outgoing = bytearray()
        self._bodies = BodyQueue()  # sent before _outgoing: parts ahead of it, large bodies
        self._data_ready = trio.Event()
        self._last_received = trio.current_time()
        self._cancel_scope: trio.CancelScope | None = None
        self.on_writable: Callable[[], None] | None = None
        # Called (and awaited if it returns an awaitable) when every complete frame read so
        # far has been handled and the link is about to wait for more: the end of a run.
        self.before_read: Callable[[], Awaitable[None] | None] | None = None
        self._serving = False  # the writer task runs (after the handshake)
        self._sending = False  # the writer task is in send_all
        self._drained = trio.Event()  # set when the writer has sent everything

    @property
    def peer_node_id(self) -> str:
        assert self.established is not None
        return self.established.peer_node_id

    # -- sending -------------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return not self.closing and len(self._outgoing) + self._bodies.queued < HIGH_WATER

    def send(self, frame: object) -> None:
        if self.closing:
            return
        try:
            self.codec.send(frame)  # type: ignore[arg-type]
        except ProtocolError as exc:
            # The peer already closed or broke the link (its EOF may be read but not yet
            # handled): stop sending; the reader ends the link.
            log.debug("link to %s: not sending %s: %s", self.peer, type(frame).__name__, exc)
            self.close()
            return
        self._take_codec_output()
        body = getattr(frame, "body_file", None)
        if body is not None:
            assert isinstance(body, LargeBody)
            self._bodies.push(self._outgoing, body)
            self._outgoing = bytearray()

    def _take_codec_output(self) -> None:
        data = self.codec.data_to_send()
        if data:
            self._outgoing += data
            self._data_ready.set()

    async def _writer(self) -> None:
        while True:
            await self._data_ready.wait()
            self._data_ready = trio.Event()
            while self._outgoing or self._bodies.parts:
                if self._bodies.parts:
                    self._sending = True
                    try:
                        await self._bodies.send(self.stream.send_all)
                    except LargeMessageError as exc:
                        raise LinkError(str(exc)) from exc  # half a frame is on the wire
                    finally:
                        self._sending = False
                    continue
                chunk = bytes(self._outgoing)
                self._outgoing.clear()
                self._sending = True
                try:
                    await self.stream.send_all(chunk)
                finally:
                    self._sending = False
                if self.on_writable is not None:
                    self.on_writable()
            self._drained.set()

    # -- receiving -----------------------------------------------------------------------

    async def next_event(self) -> wire.Event:
        """The next event from the peer (reads as needed); raises LinkError on failure."""
        while True:
            try:
                event = self.codec.next_event()
            except ProtocolError as exc:
                raise LinkError(str(exc)) from exc
            finally:
                self._take_codec_output()
            if event is not wire.NEED_DATA:
                return event
            if not self._serving:
                await self._flush_now()  # handshake replies, before waiting for the peer
            elif self.before_read is not None:
                pending = self.before_read()
                if pending is not None:
                    await pending
            try:
                data = await self.stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise LinkError(f"connection lost: {exc}") from exc
            self._last_received = trio.current_time()
            try:
                self.codec.receive_data(data)
            except ProtocolError as exc:
                raise LinkError(str(exc)) from exc

    async def handshake(self) -> wire.Established:
        """Complete the handshake; raises LinkRefused or LinkError."""
        await self._flush_now()
        while True:
            try:
                event = await self.next_event()
            except LinkError:
                with trio.move_on_after(1):  # a Reject the codec queued tells the peer why
                    await self._flush_now()
                raise
            await self._flush_now()
            if isinstance(event, wire.Established):
                self.established = event
                return event
            if isinstance(event, (wire.Reject, wire.Error)):
                raise LinkRefused(event.reason)
            if isinstance(event, wire.ConnectionClosed):
                raise LinkError("the peer closed the connection during the handshake")

    async def _flush_now(self) -> None:
        self._take_codec_output()
        if self._outgoing:
            chunk = bytes(self._outgoing)
            self._outgoing.clear()
            try:
                await self.stream.send_all(chunk)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise LinkError(f"connection lost: {exc}") from exc

    # -- running -------------------------------------------------------------------------

    async def serve(self, handle: Callable[[object], Awaitable[None] | None]) -> str:
        """Run the link until it fails or is closed; returns why it ended."""
        reason = "closed"
        self._serving = True
        try:
            async with trio.open_nursery() as nursery:
                self._cancel_scope = nursery.cancel_scope
                nursery.start_soon(self._writer)
                nursery.start_soon(self._heartbeats)
                while not self.closing:
                    event = await self.next_event()
                    if isinstance(event, wire.ConnectionClosed):
                        reason = "the peer closed the connection"
                        break
                    if isinstance(event, wire.Error):
                        reason = f"the peer reported an error: {event.reason}"
                        break
                    if isinstance(event, wire.Ping):
                        continue
                    result = handle(event)
                    if result is not None:
                        await result
                nursery.cancel_scope.cancel()
        except* LinkError as group:
            reason = str(group.exceptions[0])
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
            reason = f"connection lost: {group.exceptions[0]}"
        finally:
            self.closing = True
            self._bodies.close()
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self.stream)
        if self._ttl_expired:
            reason = f"no data for {self.ttl:.1f} s (connection-ttl)"
        return reason

    _ttl_expired = False

    async def _heartbeats(self) -> None:
        while True:
            await trio.sleep(self.ping_interval)
            if trio.current_time() - self._last_received > self.ttl:
                self._ttl_expired = True
                self.closing = True
                if self._cancel_scope is not None:
                    self._cancel_scope.cancel()
                return
            if not self._outgoing:
                self.send(wire.Ping())

    def close(self) -> None:
        self.closing = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    async def goodbye(self, frame: object) -> None:
        """Send a last frame (Leaving, Error) and close, without waiting long."""
        if self.closing:
            return
        self.send(frame)
        with trio.move_on_after(1):
            if self._serving:  # the writer task owns the stream: let it drain
                self._drained = trio.Event()
                if self._outgoing or self._bodies.parts or self._sending:
                    await self._drained.wait()
            else:
                await self._flush_now()
        self.close()


async def connect(
    host: str,
    port: int,
    codec: wire.ClientConnection,
    *,
    call_timeout: float,
    ping_interval: float,
    ttl: float,
    ssl_context: ssl.SSLContext | None = None,
) -> Link:
    """Dial host:port and complete the handshake, each within ``call_timeout`` seconds
    (Artemis's call-timeout bounds each blocking call, not their sum); with
    ``ssl_context``, over TLS (the TLS handshake is one more such call).

    Raises OSError (unreachable), trio.TooSlowError, LinkRefused (LinkTlsError) or LinkError.
    """
    with trio.fail_after(call_timeout):
        fast = FastSocketStream(await trio.open_tcp_stream(host, port))
    stream: trio.abc.Stream = fast
    if ssl_context is not None:
        stream = await _secure(fast, ssl_context, host, call_timeout)
    try:
        return await open_link(
            stream,
            codec,
            f"{host}:{port}",
            call_timeout=call_timeout,
            ping_interval=ping_interval,
            ttl=ttl,
        )
    except BaseException as exc:
        refusal = tls_refusal(exc)
        if refusal is not None:
            # TLS 1.3: the server checks this side's certificate after the handshake
            # completed here; its refusal arrives as the first thing read.
            raise LinkTlsError(f"TLS handshake failed: {dial_failure(refusal)}") from None
        raise


async def open_link(
    stream: trio.abc.Stream,
    codec: wire.ClientConnection,
    peer: str,
    *,
    call_timeout: float,
    ping_interval: float,
    ttl: float,
) -> Link:
    """The dialling side's handshake over an open ``stream`` (TCP, TLS, or a memory stream
    between in-process nodes in tests), within ``call_timeout`` seconds; the stream is
    closed if it fails. Raises trio.TooSlowError, LinkRefused or LinkError."""
    link = Link(stream, codec, peer, ping_interval=ping_interval, ttl=ttl)
    codec.start()
    try:
        with trio.fail_after(call_timeout):
            await link.handshake()
    except BaseException:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)
        raise
    return link


async def _secure(
    stream: FastSocketStream, context: ssl.SSLContext, host: str, within: float
) -> trio.SSLStream[FastSocketStream]:
    """The TLS handshake as the dialling side; raises LinkTlsError saying why it failed."""
    secured = trio.SSLStream(stream, context, server_hostname=host)
    try:
        with trio.fail_after(within):
            await secured.do_handshake()
    except BaseException as exc:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)
        if isinstance(exc, trio.BrokenResourceError):
            raise LinkTlsError(f"TLS handshake failed: {dial_failure(exc)}") from None
        if isinstance(exc, trio.TooSlowError):
            raise LinkTlsError(
                f"no answer to the TLS handshake within {within:g} s (is it a TLS acceptor?)"
            ) from None
        raise
    return secured
