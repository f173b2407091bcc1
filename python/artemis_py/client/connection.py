"""A Trio STOMP 1.0-1.2 client connection, built on the sans-IO codec.

Theory of operation
-------------------
:class:`ClientConnection` is the public face: requests (``send``, ``subscribe``, ``ack``,
transactions, ``disconnect``) built into frames. The work is done by parts of one concept
each, which share the connection's :class:`~artemis_py.client.state.ConnectionState`:

* **Sticky failure** (:mod:`.state`). The first ERROR frame, lost transport, protocol
  violation or missing heart-beat is recorded once; every waiter is woken with it, the
  stream is closed, and every later call raises a fresh copy. Background tasks never raise:
  an error reaches the caller at the call that observes it, not as an ``ExceptionGroup`` out
  of the ``async with``. An error nobody observed is raised when the block ends normally.
* **Combined writes** (:mod:`.writer`). Frames are encoded in call order and written whole;
  frames written while a send is in progress go out together in the next one. A frame once
  encoded always goes out whole, even if its caller is cancelled.
* **Receipts** (:mod:`.receipts`). A receipt is registered before its frame's bytes exist;
  ``send(..., wait=False)`` keeps up to ``max_pending`` receipts in flight.
* **One reader** (:mod:`.reader`). A single task reads and dispatches every frame: MESSAGE
  to its subscription (:mod:`.subscription`), RECEIPT to its waiter, ERROR to the failure.
* **Heart-beats** (:mod:`.heartbeats`) and **CONNECT** (:mod:`.handshake`).
* **Closing.** :meth:`ClientConnection.disconnect` sends DISCONNECT with a receipt; its
  RECEIPT confirms everything sent before it (servers process a connection's frames in order,
  STOMP 1.2 "DISCONNECT"). Leaving the ``async with`` normally disconnects; leaving it with an
  exception closes the socket at once (the server then redelivers unacknowledged messages).
* **TLS.** With ``tls`` (a connector's TLS parameters or a ready ``ssl.SSLContext``, see
  docs/tls.md) the stream is a ``trio.SSLStream`` whose handshake completes before CONNECT;
  a server that does not answer it, or whose certificate is not trusted, is a
  :class:`TlsError` saying so.
"""

from __future__ import annotations

import itertools
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Final, NoReturn

import trio

from artemis_py.client.destination import DestinationLike, parse_destination
from artemis_py.client.errors import ClientError, ConnectionLostError
from artemis_py.client.handshake import Headers, connect_frame, handshake, header_pairs
from artemis_py.client.heartbeats import HEARTBEAT_TOLERANCE, send_heartbeats, watch_heartbeats
from artemis_py.client.message import Message
from artemis_py.client.reader import FrameReceiver
from artemis_py.client.receipts import Receipt, ReceiptTable
from artemis_py.client.secure_dial import TlsError, secure, tls_context
from artemis_py.client.state import ConnectionState
from artemis_py.client.subscription import ACK_MODES, Subscription, SubscriptionTable
from artemis_py.client.url import DEFAULT_STOMP_PORT
from artemis_py.client.writer import FrameWriter
from artemis_py.config.tls_params import TlsParams
from artemis_py.protocol.stomp import (
    SUPPORTED_VERSIONS,
    Command,
    Connection,
    Frame,
    FrameLimits,
    Role,
)
from artemis_py.transport.sockets import FastSocketStream
from artemis_py.transport.tls_contexts import dial_failure, tls_refusal

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_DISCONNECT_TIMEOUT",
    "DEFAULT_MAX_PENDING",
    "HEARTBEAT_TOLERANCE",
    "ClientConnection",
    "Headers",
    "TlsError",
    "open_stomp_connection",
    "open_stomp_connection_over",
]

DEFAULT_MAX_PENDING: Final = 1000
DEFAULT_CONNECT_TIMEOUT: Final = 30.0
DEFAULT_DISCONNECT_TIMEOUT: Final = 30.0


class ClientConnection:
    """An open STOMP connection. Made by :func:`open_stomp_connection`; see the module doc.

    After CONNECTED: ``version`` is the negotiated STOMP version, ``server`` and ``session``
    the CONNECTED headers of those names, ``heartbeat`` the negotiated
    ``(send_every_ms, expect_every_ms)`` (0 = none) and ``connected_frame`` the whole frame.

    Methods may be called from several tasks at once; frames go out whole and in call order.
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        limits: FrameLimits | None = None,
    ) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending}")
        self._stream = stream
        self._codec = Connection(Role.CLIENT, limits if limits is not None else FrameLimits())
        self._ids = itertools.count(1)
        self._state = state = ConnectionState()
        # Shutdown wakes the receipts before the subscriptions (registration order).
        self._receipts = ReceiptTable(state, max_pending, self._ids)
        self._subscriptions = SubscriptionTable(state, self._send_unsubscribe)
        plain = stream.socket if isinstance(stream, FastSocketStream) else None
        self._writer = FrameWriter(stream, self._codec, state, plain)
        self._receiver = FrameReceiver(
            stream, self._codec, state, self._receipts, self._subscriptions
        )
        self.version = "1.0"
        self.server: str | None = None
        self.session: str | None = None
        self.heartbeat: tuple[int, int] = (0, 0)
        self.connected_frame: Frame | None = None
        self.disconnect_timeout = DEFAULT_DISCONNECT_TIMEOUT
        # The cluster's STOMP URLs, when CONNECT asked with topology:true (docs/stomp.md).
        self.topology: tuple[str, ...] | None = None
        self.on_topology: Callable[[tuple[str, ...]], None] | None = None
        self._subscriptions.topology_hook = self._topology_update

    def __repr__(self) -> str:
        state = self._state
        if state.failure is not None:
            text = f"failed: {state.failure}"
        elif state.closed:
            text = "closed"
        else:
            text = "open"
        return f"<ClientConnection STOMP {self.version} {text}>"

    # -- state -------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Not failed, not closed, not disconnecting: requests can be made."""
        return self._state.is_open

    @property
    def failure(self) -> ClientError | None:
        """What ended the connection (an ERROR frame, a lost transport, ...), if anything."""
        return self._state.failure

    @property
    def pending_receipts(self) -> int:
        """Receipts requested and not yet received."""
        return len(self._receipts)

    @property
    def max_pending(self) -> int:
        """How many receipts ``send(..., wait=False)`` keeps outstanding at most."""
        return self._receipts.max_pending

    # -- writing requests ------------------------------------------------------------------

    async def _write_frame(
        self,
        frame: Frame,
        receipt: Receipt | None = None,
        *,
        disconnecting_ok: bool = False,
        wait_sent: bool = True,
    ) -> None:
        """Encode and write ``frame``; ``wait_sent=False`` when the caller waits for its
        ``receipt`` next (see :meth:`FrameWriter.write`)."""
        self._state.check_open(disconnecting_ok=disconnecting_ok)
        if receipt is None:
            await self._writer.write(self._writer.encode(frame))
            return
        # Registered before the bytes exist, so the RECEIPT cannot arrive unannounced.
        self._receipts.register(receipt)
        try:
            data = self._writer.encode(frame)
        except BaseException:
            self._receipts.forget(receipt)
            raise
        await self._writer.write(data, wait_sent=wait_sent)

    async def _request(
        self,
        command: Command,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        *,
        receipt: bool,
        wait: bool = True,
    ) -> Frame | None:
        """Write the request; with ``receipt`` and ``wait``, return its RECEIPT frame."""
        if not receipt:
            await self._write_frame(Frame(command, tuple(headers), body))
            return None
        if not wait:
            await self._receipts.wait_for_window()
        # No checkpoint between the window check and the registration in _write_frame.
        pending = self._receipts.new()
        headers.append(("receipt", pending.id))
        await self._write_frame(Frame(command, tuple(headers), body), pending, wait_sent=not wait)
        if not wait:
            return None
        await self._receipts.wait(pending)
        return pending.frame

    # -- opening -------------------------------------------------------------------------

    async def _open(
        self, nursery: trio.Nursery, connect: Frame, heartbeat: tuple[int, int]
    ) -> None:
        """CONNECT, then start the background tasks: the reader and the heart-beats."""
        connected = await handshake(
            self._codec, self._writer, self._receiver, self._state, connect, heartbeat
        )
        self.connected_frame = connected.frame
        self.version = connected.version
        self.server = connected.server
        self.session = connected.session
        self.heartbeat = connected.heartbeat
        if connected.frame.get("topology") is not None:
            self.topology = split_topology(connected.frame.get("topology", ""))
        nursery.start_soon(self._receiver.run)
        nursery.start_soon(self._close_when_finished)
        send_ms, expect_ms = self.heartbeat
        if send_ms:
            nursery.start_soon(send_heartbeats, self._writer, self._state, send_ms / 1000)
        if expect_ms:
            nursery.start_soon(watch_heartbeats, self._receiver, self._state, expect_ms / 1000)

    def _topology_update(self, frame: Frame) -> None:
        self.topology = split_topology(frame.get("topology", ""))
        if self.on_topology is not None:
            self.on_topology(self.topology)

    async def wait_closed(self) -> None:
        """Return once the connection is over: failed, disconnected or closed."""
        await self._state.finished.wait()

    async def _close_when_finished(self) -> None:
        await self._state.finished.wait()
        await trio.aclose_forcefully(self._stream)

    # -- requests ------------------------------------------------------------------------

    async def send(
        self,
        destination: DestinationLike,
        body: bytes | str = b"",
        *,
        headers: Headers = None,
        transaction: str | None = None,
        receipt: bool = True,
        wait: bool = True,
    ) -> None:
        """Send a message to ``destination``: ``queue://orders`` or ``topic://prices`` (sent
        with the routing type Artemis reads, on any acceptor), a raw STOMP destination
        (``/queue/orders``, as it is) or a :class:`~.destination.Destination`.

        A ``str`` body is sent as UTF-8 text without ``content-length`` (Artemis makes it a
        text message); ``bytes`` get ``content-length`` (a bytes message).

        * ``receipt=True, wait=True`` (default): returns once the server's RECEIPT arrived.
        * ``receipt=True, wait=False``: returns as soon as the frame is written, after
          waiting only while ``max_pending`` receipts are outstanding (a pipelining window);
          :meth:`flush_receipts` waits for the rest, and a later ERROR fails the connection.
        * ``receipt=False``: no receipt is asked for; returns once written.
        """
        pairs = parse_destination(destination).send_headers(header_pairs(headers))
        if transaction is not None:
            pairs.append(("transaction", transaction))
        if isinstance(body, str):
            data = body.encode("utf-8")
            needs_length = b"\x00" in data
        else:
            data = bytes(body)
            needs_length = True
        if needs_length and not any(name == "content-length" for name, _ in pairs):
            pairs.append(("content-length", str(len(data))))
        await self._request(Command.SEND, pairs, data, receipt=receipt, wait=wait)

    async def flush_receipts(self) -> None:
        """Wait for every receipt requested so far; raises the failure if the connection died."""
        await self._receipts.wait_all()
        self._state.raise_if_failed()

    async def subscribe(
        self,
        destination: DestinationLike,
        *,
        ack: str = "auto",
        headers: Headers = None,
        selector: str | None = None,
        id: str | None = None,
        receipt: bool = True,
    ) -> Subscription:
        """Subscribe to ``destination`` (named as for :meth:`send`; ``topic://`` makes a
        subscription of its own, ``queue://`` consumes from the queue) and return the
        :class:`Subscription` to receive from.

        ``ack`` is ``auto``, ``client`` (cumulative) or ``client-individual``; ``selector``
        an Artemis filter expression. With ``receipt=True`` (default) this returns once the
        server confirmed the subscription, so a message sent afterwards will reach it.
        """
        if ack not in ACK_MODES:
            raise ValueError(f"ack must be one of {', '.join(ACK_MODES)}, got {ack!r}")
        self._state.check_open()
        target = parse_destination(destination)
        sub_id = id if id is not None else f"sub-{next(self._ids)}"
        subscription = Subscription(self, sub_id, target.name, ack, host=self._subscriptions)
        # Registered first: MESSAGE frames may arrive before the RECEIPT.
        self._subscriptions.add(subscription)
        pairs = [("id", sub_id), ("ack", ack)]
        if selector is not None:
            pairs.append(("selector", selector))
        pairs = target.subscribe_headers(pairs + header_pairs(headers))
        await self._request(Command.SUBSCRIBE, pairs, receipt=receipt)
        return subscription

    async def _send_unsubscribe(self, subscription: Subscription, receipt: bool) -> None:
        pairs = [("id", subscription.id)]
        if self.version == "1.0":
            pairs.append(("destination", subscription.destination))
        await self._request(Command.UNSUBSCRIBE, pairs, receipt=receipt)

    def _ack_headers(self, message: Message, command: Command) -> list[tuple[str, str]]:
        subscription = self._subscriptions.get(message.subscription)
        if subscription is not None and subscription.ack_mode == "auto":
            raise ClientError(
                f"{command} of a message of subscription {subscription.id!r}, which uses "
                f"ack mode auto (the server acknowledged it on delivery)"
            )
        if self.version == "1.2":
            return [("id", message.ack_id or message.message_id)]
        pairs = [("message-id", message.message_id)]
        if self.version == "1.1" or message.subscription:
            pairs.insert(0, ("subscription", message.subscription))
        return pairs

    async def ack(
        self, message: Message, *, transaction: str | None = None, receipt: bool = False
    ) -> None:
        """Acknowledge ``message`` (``client``: it and every earlier one of the subscription)."""
        pairs = self._ack_headers(message, Command.ACK)
        if transaction is not None:
            pairs.append(("transaction", transaction))
        await self._request(Command.ACK, pairs, receipt=receipt)

    async def nack(
        self, message: Message, *, transaction: str | None = None, receipt: bool = False
    ) -> None:
        """Refuse ``message``: the server redelivers it or sends it to the dead-letter address.

        STOMP 1.1+ only.
        """
        if self.version == "1.0":
            raise ClientError("NACK needs STOMP 1.1 or later; this connection speaks 1.0")
        pairs = self._ack_headers(message, Command.NACK)
        if transaction is not None:
            pairs.append(("transaction", transaction))
        await self._request(Command.NACK, pairs, receipt=receipt)

    async def begin(self, transaction: str | None = None, *, receipt: bool = True) -> str:
        """Begin a transaction and return its id (generated unless given)."""
        tx = transaction if transaction is not None else f"tx-{next(self._ids)}"
        await self._request(Command.BEGIN, [("transaction", tx)], receipt=receipt)
        return tx

    async def commit(self, transaction: str, *, receipt: bool = True) -> Frame | None:
        """Commit ``transaction``: its sends are routed and its acks applied, atomically.

        Returns the RECEIPT frame (None with ``receipt=False``). artemis-py marks it
        ``duplicate:true`` when the node ignored the whole transaction because a message's
        ``_AMQ_DUPL_ID`` was already accepted (docs/duplicate-detection.md).
        """
        return await self._request(Command.COMMIT, [("transaction", transaction)], receipt=receipt)

    async def abort(self, transaction: str, *, receipt: bool = True) -> None:
        """Roll ``transaction`` back."""
        await self._request(Command.ABORT, [("transaction", transaction)], receipt=receipt)

    async def disconnect(self) -> None:
        """Send DISCONNECT, wait for its RECEIPT (at most ``disconnect_timeout`` s), close.

        The RECEIPT confirms every frame sent before it. Idempotent once it succeeded.
        """
        timeout = self.disconnect_timeout
        state = self._state
        if state.closed and state.failure is None:
            return
        state.check_open()
        pending = self._receipts.new()
        state.disconnect_receipt = pending.id
        state.disconnecting = True
        try:
            frame = Frame(Command.DISCONNECT, (("receipt", pending.id),))
            await self._write_frame(frame, pending, disconnecting_ok=True)
            with trio.move_on_after(timeout) as scope:
                await self._receipts.wait(pending)
            if scope.cancelled_caught:
                state.fail(ConnectionLostError(f"no RECEIPT for DISCONNECT within {timeout:g} s"))
                state.raise_error()
        finally:
            state.close()
            await trio.aclose_forcefully(self._stream)

    async def aclose(self) -> None:
        """Close at once, without DISCONNECT (unacknowledged messages get redelivered)."""
        self._state.close()
        await trio.aclose_forcefully(self._stream)


def split_topology(value: str) -> tuple[str, ...]:
    """The URLs of a ``topology`` header (comma-separated)."""
    return tuple(part for part in (p.strip() for p in value.split(",")) if part)


def _raise_single(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Re-raise the one exception of ``group`` as it was, or the group if there are several.

    Our background tasks never raise on purpose, so a one-exception group out of the nursery
    holds what the ``async with`` body raised; the caller should see exactly that.
    """
    if len(group.exceptions) != 1:
        raise group
    exc = group.exceptions[0]
    context = exc.__context__
    try:
        raise exc
    finally:
        exc.__context__ = context  # not the group we unwrapped
        del exc


def _check_options(version: str, heartbeat: tuple[int, int], max_pending: int) -> None:
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"version must be one of {', '.join(SUPPORTED_VERSIONS)}, got {version!r}")
    if len(heartbeat) != 2 or any(type(ms) is not int or ms < 0 for ms in heartbeat):
        raise ValueError(f"heartbeat must be two non-negative ints (ms), got {heartbeat!r}")
    if max_pending < 1:
        raise ValueError(f"max_pending must be at least 1, got {max_pending}")


@asynccontextmanager
async def open_stomp_connection_over(
    stream: trio.abc.Stream,
    *,
    host: str = "localhost",
    login: str | None = None,
    passcode: str | None = None,
    version: str = "1.2",
    heartbeat: tuple[int, int] = (0, 0),
    client_id: str | None = None,
    headers: Headers = None,
    max_pending: int = DEFAULT_MAX_PENDING,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    disconnect_timeout: float = DEFAULT_DISCONNECT_TIMEOUT,
    limits: FrameLimits | None = None,
) -> AsyncIterator[ClientConnection]:
    """Speak STOMP over an already open ``stream`` (TCP, TLS, a memory stream in tests).

    The parameters are those of :func:`open_stomp_connection`; ``host`` goes into CONNECT's
    ``host`` header (the virtual host). The stream is closed when the block ends.
    """
    _check_options(version, heartbeat, max_pending)
    connect = connect_frame(
        host=host,
        login=login,
        passcode=passcode,
        version=version,
        heartbeat=heartbeat,
        client_id=client_id,
        headers=headers,
    )
    conn = ClientConnection(stream, max_pending=max_pending, limits=limits)
    conn.disconnect_timeout = disconnect_timeout
    state = conn._state
    try:
        async with trio.open_nursery() as nursery:
            try:
                with trio.fail_after(connect_timeout):
                    await conn._open(nursery, connect, heartbeat)
            except trio.TooSlowError:
                raise ClientError(f"no answer to CONNECT within {connect_timeout:g} s") from None
            try:
                yield conn
                if state.is_open:
                    await conn.disconnect()
                elif state.failure is not None and not state.failure_seen:
                    state.check_open()  # an error nobody saw (say, after pipelined sends)
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        _raise_single(group)
    finally:
        await conn.aclose()


@asynccontextmanager
async def open_stomp_connection(
    host: str = "localhost",
    port: int = DEFAULT_STOMP_PORT,
    *,
    login: str | None = None,
    passcode: str | None = None,
    version: str = "1.2",
    heartbeat: tuple[int, int] = (0, 0),
    client_id: str | None = None,
    vhost: str | None = None,
    headers: Headers = None,
    max_pending: int = DEFAULT_MAX_PENDING,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    disconnect_timeout: float = DEFAULT_DISCONNECT_TIMEOUT,
    limits: FrameLimits | None = None,
    tls: TlsParams | ssl.SSLContext | None = None,
) -> AsyncIterator[ClientConnection]:
    """Connect to a STOMP acceptor at ``host:port``; disconnect when the block ends.

    * ``version``: the highest STOMP version to offer; CONNECT's ``accept-version`` lists it
      and every lower one, and the server picks (``conn.version``).
    * ``heartbeat``: ``(cx, cy)`` in ms as in STOMP's ``heart-beat`` header: we can send
      every ``cx`` ms and want to hear from the server every ``cy`` ms; 0 = no.
    * ``client_id``: Artemis's ``client-id`` header (needed for durable subscriptions).
    * ``vhost``: CONNECT's ``host`` header (default: ``host``); ``headers``: extra CONNECT
      headers.
    * ``max_pending``: the pipelining window of ``send(..., wait=False)``.
    * ``connect_timeout``: seconds for the TCP connection, and again for CONNECTED;
      ``disconnect_timeout``: seconds :meth:`~ClientConnection.disconnect` waits for its
      RECEIPT.
    * ``tls``: connect over TLS (see the module doc); a disabled :class:`TlsParams`
      (no ``sslEnabled=true``) means plain TCP.

    Raises :class:`OSError` if the TCP connection fails, :class:`StompServerError` if the
    server refuses the CONNECT, :class:`TlsError` if TLS cannot be set up,
    :class:`ClientError` on a timeout.
    """
    _check_options(version, heartbeat, max_pending)
    context = await tls_context(tls)
    try:
        with trio.fail_after(connect_timeout):
            fast = FastSocketStream(await trio.open_tcp_stream(host, port))
    except trio.TooSlowError:
        raise ClientError(
            f"timed out after {connect_timeout:g} s connecting to {host}:{port}"
        ) from None
    stream: trio.abc.Stream = fast
    if context is not None:
        stream = await secure(fast, context, host, port, connect_timeout)
    connected = False
    try:
        async with open_stomp_connection_over(
            stream,
            host=vhost if vhost is not None else host,
            login=login,
            passcode=passcode,
            version=version,
            heartbeat=heartbeat,
            client_id=client_id,
            headers=headers,
            max_pending=max_pending,
            connect_timeout=connect_timeout,
            disconnect_timeout=disconnect_timeout,
            limits=limits,
        ) as conn:
            connected = True
            yield conn
    except ConnectionLostError as exc:
        refusal = None if connected or context is None else tls_refusal(exc)
        if refusal is None:
            raise
        # TLS 1.3: the server checks the client's certificate after the client's side of
        # the handshake ended; its refusal is what CONNECT reads.
        raise TlsError(f"TLS connection to {host}:{port} failed: {dial_failure(refusal)}") from None
