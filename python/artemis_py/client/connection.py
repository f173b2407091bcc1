"""A Trio STOMP 1.0-1.2 client connection, built on the sans-IO codec.

Theory of operation
-------------------
* **One reader.** A single background task owns the receive side: it feeds bytes to the
  codec (:class:`artemis_py.protocol.stomp.Connection` in the CLIENT role) and dispatches each
  frame: MESSAGE to its subscription's channel, RECEIPT to the request waiting for it, ERROR
  to fail the connection. It never waits for a consumer (subscription channels are
  unbounded), so receipts and heart-beats keep flowing while messages pile up in a
  subscription nobody reads; the server's consumer window bounds that pile.
* **Combined writes.** A frame is encoded when it is written, with no checkpoint in between,
  so the codec's state follows wire order. The first writer sends; frames written while it
  is in ``send_all`` wait in a batch that it sends next, in one system call, and their
  writers wait for that send. Every wait is shielded from cancellation: a frame once encoded
  always goes out whole (hypercorn shields its sends the same way), and a cancelled caller
  may return a little late, never early.
* **Receipts.** A request with ``receipt=True`` registers its receipt id *before* its bytes
  are written, so a fast RECEIPT cannot overtake its registration. ``send(..., wait=False)``
  only waits until fewer than ``max_pending`` receipts are outstanding, then writes and
  returns: a producer keeps up to ``max_pending`` receipts in flight, and
  :meth:`ClientConnection.flush_receipts` waits for the rest.
* **Sticky failure.** The first ERROR frame, lost transport, protocol violation or missing
  heart-beat is recorded once. Every waiter (receipts, subscriptions, the send window) is
  woken with it, the stream is closed, and every later call raises a fresh copy. Background
  tasks never raise: an error reaches the caller at the call that observes it, not as an
  ``ExceptionGroup`` out of the ``async with``. An error nobody observed is raised when the
  ``async with`` block ends normally.
* **Closing.** :meth:`ClientConnection.disconnect` sends DISCONNECT with a receipt; its
  RECEIPT confirms everything sent before it (servers process a connection's frames in order,
  STOMP 1.2 "DISCONNECT"). Leaving the ``async with`` normally disconnects; leaving it with an
  exception closes the socket at once (the server then redelivers unacknowledged messages).
"""

from __future__ import annotations

import copy
import itertools
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Final, NoReturn, TypeAlias

import trio

from artemis_py.client.errors import (
    ClientError,
    ConnectionClosedError,
    ConnectionLostError,
    StompServerError,
)
from artemis_py.client.message import Message
from artemis_py.client.subscription import ACK_MODES, Subscription
from artemis_py.client.url import DEFAULT_STOMP_PORT
from artemis_py.protocol.stomp import (
    NEED_DATA,
    SUPPORTED_VERSIONS,
    Command,
    Connection,
    ConnectionClosed,
    Frame,
    FrameLimits,
    Heartbeat,
    LocalProtocolError,
    RemoteProtocolError,
    Role,
    Sentinel,
    negotiate_heartbeat,
    parse_heartbeat,
)
from artemis_py.transport.sockets import FastSocketStream

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_DISCONNECT_TIMEOUT",
    "DEFAULT_MAX_PENDING",
    "HEARTBEAT_TOLERANCE",
    "ClientConnection",
    "Headers",
    "open_stomp_connection",
    "open_stomp_connection_over",
]

log = logging.getLogger("artemis_py.client")

Headers: TypeAlias = Mapping[str, str] | Iterable[tuple[str, str]] | None
"""Extra frame headers: a mapping or ``(name, value)`` pairs (repeats allowed), in order."""

READ_SIZE: Final = 1 << 16
DEFAULT_MAX_PENDING: Final = 1000
DEFAULT_CONNECT_TIMEOUT: Final = 30.0
DEFAULT_DISCONNECT_TIMEOUT: Final = 30.0
HEARTBEAT_TOLERANCE: Final = 2.0
"""The server is declared dead after this many heart-beat intervals without any byte from it.
STOMP 1.2 "Heart-beating" leaves the margin to the implementation; Artemis uses 2 for its
connection TTL (``heartBeatToConnectionTtlModifier``)."""

_TRANSPORT_ERRORS: Final = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def _pairs(headers: Headers) -> list[tuple[str, str]]:
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return [(str(name), str(value)) for name, value in headers.items()]
    return [(str(name), str(value)) for name, value in headers]


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Receipt:
    """One requested receipt: resolved by its RECEIPT frame, or failed with the connection."""

    __slots__ = ("error", "event", "id")

    def __init__(self, receipt_id: str) -> None:
        self.id = receipt_id
        self.event = trio.Event()
        self.error: ClientError | None = None

    def resolve(self, error: ClientError | None = None) -> None:
        if not self.event.is_set():
            self.error = error
            self.event.set()


class _Batch:
    """Encoded frames that go out in one ``send_all``; their writers wait for ``sent``."""

    __slots__ = ("chunks", "failed", "sent")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.sent = trio.Event()
        self.failed = False


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
        self._batch = _Batch()  # frames waiting for the task in send_all
        self._writing = False  # a task is sending (and will send _batch next)
        self._max_pending = max_pending
        self._receipts: dict[str, _Receipt] = {}
        self._window_changed = trio.Event()
        self._subscriptions: dict[str, Subscription] = {}
        self._ids = itertools.count(1)
        self._failure: ClientError | None = None
        self._failure_seen = False
        self._closed = False
        self._disconnecting = False
        self._disconnect_receipt: str | None = None
        self._finished = trio.Event()
        self._last_sent = self._last_received = trio.current_time()
        self.version = "1.0"
        self.server: str | None = None
        self.session: str | None = None
        self.heartbeat: tuple[int, int] = (0, 0)
        self.connected_frame: Frame | None = None
        self.disconnect_timeout = DEFAULT_DISCONNECT_TIMEOUT

    def __repr__(self) -> str:
        if self._failure is not None:
            state = f"failed: {self._failure}"
        elif self._closed:
            state = "closed"
        else:
            state = "open"
        return f"<ClientConnection STOMP {self.version} {state}>"

    # -- state -------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Not failed, not closed, not disconnecting: requests can be made."""
        return self._failure is None and not self._closed and not self._disconnecting

    @property
    def failure(self) -> ClientError | None:
        """What ended the connection (an ERROR frame, a lost transport, ...), if anything."""
        return self._failure

    @property
    def pending_receipts(self) -> int:
        """Receipts requested and not yet received."""
        return len(self._receipts)

    @property
    def max_pending(self) -> int:
        """How many receipts ``send(..., wait=False)`` keeps outstanding at most."""
        return self._max_pending

    def _error(self, *, disconnecting_ok: bool = False) -> ClientError | None:
        """The error a request must raise now, or None if the connection is usable."""
        if self._failure is not None:
            self._failure_seen = True
            fresh = copy.copy(self._failure)  # one traceback per caller, same attributes
            fresh.__cause__ = self._failure.__cause__
            return fresh
        if self._closed:
            return ConnectionClosedError("the connection is closed")
        if self._disconnecting and not disconnecting_ok:
            return ConnectionClosedError("the connection is being disconnected")
        return None

    def _check_open(self, *, disconnecting_ok: bool = False) -> None:
        error = self._error(disconnecting_ok=disconnecting_ok)
        if error is not None:
            raise error

    def _raise_error(self) -> NoReturn:
        """Raise why the connection is unusable (the caller knows that it is)."""
        error = self._error(disconnecting_ok=True)
        assert error is not None
        raise error

    def _raise_if_failed(self) -> None:
        """Raise the failure, if any (a subscription's channel ended: was it an error?)."""
        if self._failure is not None:
            self._check_open()

    def _fail(self, error: ClientError, cause: BaseException | None = None) -> None:
        """Record the first failure and wake everybody with it (see "Sticky failure")."""
        if self._failure is not None or self._closed:
            return
        if cause is not None:
            error.__cause__ = cause
        log.debug("STOMP connection failed: %s", error)
        self._failure = error
        self._shut_down(error)

    def _shut_down(self, error: ClientError) -> None:
        receipts = list(self._receipts.values())
        self._receipts.clear()
        for receipt in receipts:
            receipt.resolve(error)
        self._wake_window()
        subscriptions = list(self._subscriptions.values())
        self._subscriptions.clear()
        for subscription in subscriptions:
            subscription._end()
        self._finished.set()

    def _wake_window(self) -> None:
        self._window_changed.set()
        self._window_changed = trio.Event()

    # -- writing -------------------------------------------------------------------------

    def _encode(self, frame: Frame) -> bytes:
        try:
            return self._codec.send(frame)
        except LocalProtocolError as exc:
            # The codec refuses every later send once one failed (h11's rule), so the
            # connection is done; the caller gets the precise LocalProtocolError.
            self._fail(
                ClientError(f"connection unusable after an unencodable {frame.command}: {exc}"),
                exc,
            )
            self._failure_seen = True
            raise

    async def _write(self, data: bytes) -> None:
        """Write ``data`` whole, after everything written before it (see "Combined writes")."""
        batch = self._batch
        batch.chunks.append(data)
        if self._writing:
            with trio.CancelScope(shield=True):
                await batch.sent.wait()
        else:
            self._writing = True
            try:
                with trio.CancelScope(shield=True):
                    await self._send_batches()
            finally:
                self._writing = False
        if batch.failed:
            self._raise_error()

    async def _send_batches(self) -> None:
        while self._batch.chunks:
            batch, self._batch = self._batch, _Batch()
            try:
                await self._stream.send_all(b"".join(batch.chunks))
            except _TRANSPORT_ERRORS as exc:
                batch.failed = self._batch.failed = True
                self._batch.sent.set()  # frames queued behind the failed send fail with it
                self._batch = _Batch()
                self._fail(
                    ConnectionLostError(f"connection to the server lost: {_describe(exc)}"), exc
                )
                return
            finally:
                batch.sent.set()
            self._last_sent = trio.current_time()

    async def _write_frame(
        self, frame: Frame, receipt: _Receipt | None = None, *, disconnecting_ok: bool = False
    ) -> None:
        self._check_open(disconnecting_ok=disconnecting_ok)
        if receipt is not None:
            # Registered before the bytes exist, so the RECEIPT cannot arrive unannounced.
            self._receipts[receipt.id] = receipt
        try:
            data = self._encode(frame)
        except BaseException:
            if receipt is not None and self._receipts.get(receipt.id) is receipt:
                del self._receipts[receipt.id]
                self._wake_window()
            raise
        await self._write(data)

    def _new_receipt(self) -> _Receipt:
        return _Receipt(f"r-{next(self._ids)}")

    async def _wait_receipt(self, receipt: _Receipt) -> None:
        await receipt.event.wait()
        if receipt.error is not None:
            if receipt.error is self._failure:
                self._raise_error()
            raise copy.copy(receipt.error)

    async def _wait_for_window(self) -> None:
        while len(self._receipts) >= self._max_pending:
            self._check_open()
            await self._window_changed.wait()
        self._check_open()

    async def _request(
        self,
        command: Command,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        *,
        receipt: bool,
        wait: bool = True,
    ) -> None:
        if not receipt:
            await self._write_frame(Frame(command, tuple(headers), body))
            return
        if not wait:
            await self._wait_for_window()
        # No checkpoint between the window check and the registration in _write_frame.
        pending = self._new_receipt()
        headers.append(("receipt", pending.id))
        await self._write_frame(Frame(command, tuple(headers), body), pending)
        if wait:
            await self._wait_receipt(pending)

    # -- reading -------------------------------------------------------------------------

    async def _receive_event(self) -> Frame | Heartbeat | ConnectionClosed:
        while True:
            event = self._codec.next_event()
            if event is NEED_DATA:
                data = await self._stream.receive_some(READ_SIZE)
                self._last_received = trio.current_time()
                self._codec.receive_data(data)
                continue
            assert not isinstance(event, Sentinel), "PAUSED is for the server side only"
            return event

    async def _read_frames(self) -> None:
        """The reader task (see "One reader"); returns when the connection ends."""
        try:
            while self._failure is None:
                event = await self._receive_event()
                if isinstance(event, ConnectionClosed):
                    if not self._closed:
                        what = "before the DISCONNECT receipt" if self._disconnecting else ""
                        self._fail(
                            ConnectionLostError(f"the server closed the connection {what}".strip())
                        )
                    return
                if isinstance(event, Frame):
                    self._dispatch(event)
        except RemoteProtocolError as exc:
            self._fail(ClientError(f"protocol error from the server: {exc.message}"), exc)
        except _TRANSPORT_ERRORS as exc:
            self._fail(ConnectionLostError(f"connection to the server lost: {_describe(exc)}"), exc)

    def _dispatch(self, frame: Frame) -> None:
        command = frame.command
        if command == Command.MESSAGE:
            sub_id = frame.get("subscription")
            subscription = self._subscriptions.get(sub_id) if sub_id is not None else None
            if subscription is None and sub_id is None and len(self._subscriptions) == 1:
                # A STOMP 1.0 server may omit the header; with one subscription it is clear.
                subscription = next(iter(self._subscriptions.values()))
            if subscription is None:
                log.debug("dropping a MESSAGE for unknown subscription %r", sub_id)
                return
            subscription._deliver(Message(frame))
        elif command == Command.RECEIPT:
            receipt_id = frame.get("receipt-id", "")
            receipt = self._receipts.pop(receipt_id, None)
            if receipt is None:
                log.debug("ignoring a RECEIPT nobody asked for: %r", receipt_id)
                return
            if receipt_id == self._disconnect_receipt:
                self._closed = True  # before the server's close of the socket is read
            receipt.resolve()
            self._wake_window()
        elif command == Command.ERROR:
            self._fail(StompServerError.from_frame(frame))
        else:  # the codec rejects a second CONNECTED; nothing else can get here
            log.debug("ignoring an unexpected %s frame", command)

    # -- background tasks ------------------------------------------------------------------

    async def _close_when_finished(self) -> None:
        await self._finished.wait()
        await trio.aclose_forcefully(self._stream)

    async def _send_heartbeats(self, interval: float) -> None:
        while True:
            await trio.sleep_until(self._last_sent + interval)
            if not self.is_open:
                return
            if trio.current_time() - self._last_sent < interval:
                continue  # a frame went out meanwhile; it counts as a heart-beat
            try:
                await self._write(self._codec.send_heartbeat())
            except ClientError:
                return

    async def _watch_heartbeats(self, interval: float) -> None:
        tolerance = interval * HEARTBEAT_TOLERANCE
        while self._failure is None and not self._closed:
            deadline = self._last_received + tolerance
            if trio.current_time() >= deadline:
                self._fail(
                    ConnectionLostError(
                        f"nothing received from the server for {tolerance:g} s "
                        f"(heart-beat interval {interval:g} s)"
                    )
                )
                return
            await trio.sleep_until(deadline)

    def _start(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self._read_frames)
        nursery.start_soon(self._close_when_finished)
        send_ms, expect_ms = self.heartbeat
        if send_ms:
            nursery.start_soon(self._send_heartbeats, send_ms / 1000)
        if expect_ms:
            nursery.start_soon(self._watch_heartbeats, expect_ms / 1000)

    # -- CONNECT -------------------------------------------------------------------------

    async def _handshake(
        self,
        *,
        host: str,
        login: str | None,
        passcode: str | None,
        version: str,
        heartbeat: tuple[int, int],
        client_id: str | None,
        headers: Headers,
    ) -> None:
        offered = SUPPORTED_VERSIONS[: SUPPORTED_VERSIONS.index(version) + 1]
        pairs = [("accept-version", ",".join(offered)), ("host", host)]
        if login is not None:
            pairs.append(("login", login))
        if passcode is not None:
            pairs.append(("passcode", passcode))
        if client_id is not None:
            pairs.append(("client-id", client_id))
        if version != "1.0" and heartbeat != (0, 0):
            pairs.append(("heart-beat", f"{heartbeat[0]},{heartbeat[1]}"))
        pairs.extend(_pairs(headers))
        await self._write_frame(Frame(Command.CONNECT, tuple(pairs)))
        try:
            event = await self._receive_event()
            while isinstance(event, Heartbeat):
                event = await self._receive_event()
        except RemoteProtocolError as exc:
            self._fail(ClientError(f"protocol error from the server: {exc.message}"), exc)
            self._raise_error()
        except _TRANSPORT_ERRORS as exc:
            self._fail(
                ConnectionLostError(f"connection lost before CONNECTED: {_describe(exc)}"), exc
            )
            self._raise_error()
        if isinstance(event, ConnectionClosed):
            self._fail(ConnectionLostError("the server closed the connection instead of CONNECTED"))
            self._raise_error()
        if event.command == Command.ERROR:
            self._fail(StompServerError.from_frame(event))
            self._raise_error()
        # The codec lets nothing but CONNECTED or ERROR through here.
        self.connected_frame = event
        self.version = self._codec.version or "1.0"
        self.server = event.get("server")
        self.session = event.get("session")
        if self.version != "1.0":
            try:
                server_heartbeat = parse_heartbeat(event.get("heart-beat"))
            except RemoteProtocolError as exc:
                self._fail(ClientError(f"protocol error from the server: {exc.message}"), exc)
                self._raise_error()
            self.heartbeat = negotiate_heartbeat(heartbeat, server_heartbeat, our_role=Role.CLIENT)
        self._last_received = trio.current_time()

    # -- requests ------------------------------------------------------------------------

    async def send(
        self,
        destination: str,
        body: bytes | str = b"",
        *,
        headers: Headers = None,
        transaction: str | None = None,
        receipt: bool = True,
        wait: bool = True,
    ) -> None:
        """Send a message to ``destination`` (e.g. ``/queue/orders``).

        A ``str`` body is sent as UTF-8 text without ``content-length`` (Artemis makes it a
        text message); ``bytes`` get ``content-length`` (a bytes message).

        * ``receipt=True, wait=True`` (default): returns once the server's RECEIPT arrived.
        * ``receipt=True, wait=False``: returns as soon as the frame is written, after
          waiting only while ``max_pending`` receipts are outstanding (a pipelining window);
          :meth:`flush_receipts` waits for the rest, and a later ERROR fails the connection.
        * ``receipt=False``: no receipt is asked for; returns once written.
        """
        pairs = [("destination", destination)]
        pairs.extend(_pairs(headers))
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
        for pending in list(self._receipts.values()):
            await self._wait_receipt(pending)
        self._raise_if_failed()

    async def subscribe(
        self,
        destination: str,
        *,
        ack: str = "auto",
        headers: Headers = None,
        selector: str | None = None,
        id: str | None = None,
        receipt: bool = True,
    ) -> Subscription:
        """Subscribe to ``destination`` and return the :class:`Subscription` to receive from.

        ``ack`` is ``auto``, ``client`` (cumulative) or ``client-individual``; ``selector``
        an Artemis filter expression. With ``receipt=True`` (default) this returns once the
        server confirmed the subscription, so a message sent afterwards will reach it.
        """
        if ack not in ACK_MODES:
            raise ValueError(f"ack must be one of {', '.join(ACK_MODES)}, got {ack!r}")
        self._check_open()
        sub_id = id if id is not None else f"sub-{next(self._ids)}"
        if sub_id in self._subscriptions:
            raise ValueError(f"subscription id {sub_id!r} is already in use")
        subscription = Subscription(self, sub_id, destination, ack)
        # Registered first: MESSAGE frames may arrive before the RECEIPT.
        self._subscriptions[sub_id] = subscription
        pairs = [("destination", destination), ("id", sub_id), ("ack", ack)]
        if selector is not None:
            pairs.append(("selector", selector))
        pairs.extend(_pairs(headers))
        await self._request(Command.SUBSCRIBE, pairs, receipt=receipt)
        return subscription

    async def _unsubscribe(self, subscription: Subscription, *, receipt: bool) -> None:
        if self._subscriptions.get(subscription.id) is not subscription:
            return
        try:
            pairs = [("id", subscription.id)]
            if self.version == "1.0":
                pairs.append(("destination", subscription.destination))
            await self._request(Command.UNSUBSCRIBE, pairs, receipt=receipt)
        finally:
            if self._subscriptions.get(subscription.id) is subscription:
                del self._subscriptions[subscription.id]
                subscription._end()

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

    async def commit(self, transaction: str, *, receipt: bool = True) -> None:
        """Commit ``transaction``: its sends are routed and its acks applied, atomically."""
        await self._request(Command.COMMIT, [("transaction", transaction)], receipt=receipt)

    async def abort(self, transaction: str, *, receipt: bool = True) -> None:
        """Roll ``transaction`` back."""
        await self._request(Command.ABORT, [("transaction", transaction)], receipt=receipt)

    async def disconnect(self) -> None:
        """Send DISCONNECT, wait for its RECEIPT (at most ``disconnect_timeout`` s), close.

        The RECEIPT confirms every frame sent before it. Idempotent once it succeeded.
        """
        timeout = self.disconnect_timeout
        if self._closed and self._failure is None:
            return
        self._check_open()
        pending = self._new_receipt()
        self._disconnect_receipt = pending.id
        self._disconnecting = True
        try:
            frame = Frame(Command.DISCONNECT, (("receipt", pending.id),))
            await self._write_frame(frame, pending, disconnecting_ok=True)
            with trio.move_on_after(timeout) as scope:
                await self._wait_receipt(pending)
            if scope.cancelled_caught:
                self._fail(ConnectionLostError(f"no RECEIPT for DISCONNECT within {timeout:g} s"))
                self._raise_error()
        finally:
            self._close_now()
            await trio.aclose_forcefully(self._stream)

    def _close_now(self) -> None:
        self._closed = True
        if not self._finished.is_set():
            self._shut_down(ConnectionClosedError("the connection was closed"))

    async def aclose(self) -> None:
        """Close at once, without DISCONNECT (unacknowledged messages get redelivered)."""
        self._close_now()
        await trio.aclose_forcefully(self._stream)


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
    conn = ClientConnection(stream, max_pending=max_pending, limits=limits)
    conn.disconnect_timeout = disconnect_timeout
    try:
        async with trio.open_nursery() as nursery:
            try:
                with trio.fail_after(connect_timeout):
                    await conn._handshake(
                        host=host,
                        login=login,
                        passcode=passcode,
                        version=version,
                        heartbeat=heartbeat,
                        client_id=client_id,
                        headers=headers,
                    )
            except trio.TooSlowError:
                raise ClientError(f"no answer to CONNECT within {connect_timeout:g} s") from None
            conn._start(nursery)
            try:
                yield conn
                if conn.is_open:
                    await conn.disconnect()
                elif conn.failure is not None and not conn._failure_seen:
                    conn._check_open()  # an error nobody saw (say, after pipelined sends)
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

    Raises :class:`OSError` if the TCP connection fails, :class:`StompServerError` if the
    server refuses the CONNECT, :class:`ClientError` on a timeout.
    """
    _check_options(version, heartbeat, max_pending)
    try:
        with trio.fail_after(connect_timeout):
            stream = FastSocketStream(await trio.open_tcp_stream(host, port))
    except trio.TooSlowError:
        raise ClientError(
            f"timed out after {connect_timeout:g} s connecting to {host}:{port}"
        ) from None
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
        yield conn
