"""A client connection that knows the cluster: load-balanced connecting and failover.

Theory of operation
-------------------
:class:`ClusterLocator` (Artemis's ServerLocator) holds what one client URL knows: the
addresses it names (or, for ``udp://``, the nodes its discovery hears: :mod:`.discovery`),
the live members' STOMP URLs learnt from the node (the topology extension,
docs/stomp.md), and the connection load-balancing policy (:mod:`.load_balancing`) that
picks the node of each new connection.

:class:`FailoverConnection` is one logical connection over a succession of
:class:`~artemis_py.client.connection.ClientConnection`\\ s, each held open by a task of its
own. When a request finds its connection lost (:class:`ConnectionLostError`), one task at
a time (a lock) fails over: rounds of attempts over the candidates (the other nodes first),
paced by :class:`RetrySchedule`, until one connects or the attempts run out (then the loss
is final and raised to every caller). On the new connection every subscription is made again
under its id; then the request is made again:

* every ``send`` is receipted, and a send whose RECEIPT did not come is sent again. Each
  carries an ``_AMQ_DUPL_ID`` (the caller's, or a fresh one), so a node that had stored it
  (or the node a scaled-down one handed its duplicate ids to) drops the repeat;
* ``send(..., wait=False)`` keeps a window of up to ``max_pending`` unreceipted sends: each
  is a task of the connection's nursery that holds its message until the RECEIPT came,
  resending it after a failover like an awaited send. The caller returns once the frame
  was encoded (so the first attempts go out in call order; resends may not), and
  :meth:`FailoverConnection.flush_receipts` (and ``disconnect``) wait for the window to
  empty. A pipelined send that fails for good (the failover gave up, an ERROR frame) is
  raised by the next call;
* messages delivered and not acknowledged on the lost connection are redelivered by the
  broker (marked ``redelivered``); their ACK on the new connection is moot and skipped.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

import trio

from artemis_py.client.connection import ClientConnection, open_stomp_connection
from artemis_py.client.destination import DestinationLike
from artemis_py.client.discovery import ClientDiscovery
from artemis_py.client.errors import ClientError, ConnectionLostError, connect_failure
from artemis_py.client.handshake import Headers, header_pairs
from artemis_py.client.load_balancing import make_policy
from artemis_py.client.message import Message
from artemis_py.client.url import (
    BrokerUrl,
    ClientUrl,
    ConnectionOptions,
    parse_client_url,
    parse_url,
)

__all__ = [
    "DUPLICATE_ID_HEADER",
    "ClusterLocator",
    "Connector",
    "FailoverConnection",
    "FailoverSubscription",
    "RetrySchedule",
    "open_cluster_connection",
]

log = logging.getLogger("artemis_py.client")

DUPLICATE_ID_HEADER = "_AMQ_DUPL_ID"

Connector = Callable[[BrokerUrl], AbstractAsyncContextManager[ClientConnection]]
"""``async with connect(url) as conn``: a STOMP connection to one node (tests pass fakes)."""


class RetrySchedule:
    """The pauses before each round of reconnection attempts (Artemis's client reconnection:
    ``retryInterval`` times ``retryIntervalMultiplier`` per round, at most
    ``maxRetryInterval``; ``reconnectAttempts`` rounds, -1 = no limit). The first round is
    at once."""

    def __init__(self, options: ConnectionOptions) -> None:
        self.options = options

    def pauses(self) -> Iterator[float]:
        """Seconds to wait before each round (0 before the first)."""
        attempts = self.options.failover_attempts
        interval = float(self.options.retry_interval)
        done = 0
        while attempts < 0 or done < attempts:
            yield 0.0 if done == 0 else interval / 1000
            if done:
                interval = min(
                    interval * self.options.retry_interval_multiplier,
                    float(self.options.max_retry_interval),
                )
            done += 1


class ClusterLocator:
    """Where new connections of one client URL go (see the module doc)."""

    def __init__(self, url: ClientUrl | str, *, policy: Any = None) -> None:
        self.url = parse_client_url(url) if isinstance(url, str) else url
        self.options = self.url.options
        # udp://: the nodes discovery hears stand in for the URL's addresses.
        self.discovery = (
            ClientDiscovery(
                self.url.discovery, self.options.refresh_timeout, self.options.initial_wait_timeout
            )
            if self.url.discovery is not None
            else None
        )
        self.policy = policy if policy is not None else make_policy(self.options.policy)
        self.topology: tuple[BrokerUrl, ...] = ()

    def learn(self, urls: tuple[str, ...]) -> None:
        """The node told the live members' STOMP URLs (unreadable ones are skipped)."""
        known: list[BrokerUrl] = []
        for text in urls:
            try:
                known.append(parse_url(text))
            except ValueError:
                log.warning("ignoring a topology URL the node sent: %r", text)
        self.topology = tuple(known)

    def initial(self) -> tuple[BrokerUrl, ...]:
        """The nodes to start from: the URL's addresses, or those discovery knows now."""
        return self.discovery.urls() if self.discovery is not None else self.url.addresses

    def known(self) -> tuple[BrokerUrl, ...]:
        if self.options.use_topology and self.topology:
            return self.topology
        return self.initial()

    def candidates(self, avoid: BrokerUrl | None = None) -> list[BrokerUrl]:
        """Every node to try, in order: from the policy's pick on, then the URL's own
        addresses (or the discovered nodes), and ``avoid`` (the node just lost) last."""
        known = list(self.known())
        start = self.policy.select(len(known)) if known else 0
        order = known[start:] + known[:start]
        order += [a for a in self.initial() if a not in order]
        if avoid in order:
            order.remove(avoid)
            order.append(avoid)
        return order


class FailoverSubscription:
    """A subscription that is made again on each new connection; ``receive`` and
    ``async for`` as for :class:`~artemis_py.client.subscription.Subscription`."""

    def __init__(self, owner: FailoverConnection, sub_id: str, args: dict[str, Any]) -> None:
        self._owner = owner
        self.id = sub_id
        self._args = args
        self._inner: Any = None

    @property
    def ack_mode(self) -> str:
        return str(self._args["ack"])

    async def _attach(self, conn: ClientConnection) -> None:
        self._inner = await conn.subscribe(id=self.id, **self._args)

    async def receive(self) -> Message:
        while True:
            inner = self._inner
            try:
                message: Message = await inner.receive()
            except ConnectionLostError:
                await self._owner._fail_over(inner.connection)
                continue
            self._owner._delivered(message, inner.connection, self.ack_mode)
            return message

    def __aiter__(self) -> FailoverSubscription:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    async def unsubscribe(self) -> None:
        self._owner._subscriptions.pop(self.id, None)
        if self._inner is not None and self._inner.connection.is_open:
            await self._inner.unsubscribe()


class FailoverConnection:
    """One logical STOMP connection over the nodes of a cluster (see the module doc).

    ``connection`` is the current node's connection, ``url`` its address, ``failovers``
    how often it moved, ``resends`` how many sends went out again after a loss;
    ``on_failover(old, new, error)`` is called after each move. ``max_pending`` is the
    window of ``send(..., wait=False)``.
    """

    def __init__(
        self,
        locator: ClusterLocator,
        connect: Connector,
        nursery: trio.Nursery,
        *,
        on_failover: Callable[[BrokerUrl, BrokerUrl, ClientError], None] | None = None,
        max_pending: int = 1,
    ) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending}")
        self.locator = locator
        self._connect = connect
        self._nursery = nursery
        self.on_failover = on_failover
        self.connection: ClientConnection | None = None
        self.url: BrokerUrl | None = None
        self.failovers = 0
        self.resends = 0
        self._lock = trio.Lock()
        self._window = trio.Semaphore(max_pending)
        self._in_flight = 0
        self._flushed = trio.Event()
        self._flushed.set()
        self._pipeline_error: BaseException | None = None
        self._failure: ClientError | None = None
        self._subscriptions: dict[str, FailoverSubscription] = {}
        self._origin: dict[Message, ClientConnection] = {}
        self._ids = 0

    # -- connecting ----------------------------------------------------------------------

    async def _hold(self, url: BrokerUrl, *, task_status: Any) -> None:
        """Keep a connection to ``url`` open until it ends; started with it, or with the
        error that prevented it. Never raises: a loss is seen by the requests."""
        started = False
        try:
            async with self._connect(url) as conn:
                if conn.topology is not None:
                    self.locator.learn(conn.topology)
                conn.on_topology = self.locator.learn
                task_status.started(conn)
                started = True
                await conn.wait_closed()
        except (ClientError, OSError) as exc:
            if not started:
                task_status.started(exc)
            else:
                log.debug("connection to %s ended: %s", url, exc)

    async def _open_one(self, url: BrokerUrl) -> ClientConnection | BaseException:
        result: ClientConnection | BaseException = await self._nursery.start(self._hold, url)
        return result

    async def _open_any(self, avoid: BrokerUrl | None) -> tuple[BrokerUrl, ClientConnection]:
        """One round: the candidates in order; the first that connects and re-subscribes."""
        errors: list[str] = []
        for url in self.locator.candidates(avoid):
            result = await self._open_one(url)
            if isinstance(result, BaseException):
                reason = connect_failure(result) if isinstance(result, OSError) else str(result)
                errors.append(f"{url}: {reason}")
                continue
            try:
                for subscription in self._subscriptions.values():
                    await subscription._attach(result)
            except ConnectionLostError as exc:
                errors.append(f"{url}: {exc}")
                continue
            return url, result
        raise ConnectionLostError("no node answered: " + "; ".join(errors or ["no address"]))

    async def start(self) -> None:
        """The first connection (one round over the candidates: a client starting against a
        cluster that is down is told at once)."""
        self.url, self.connection = await self._open_any(None)

    async def _fail_over(self, lost: ClientConnection) -> None:
        """``lost`` broke: move to another node, unless another task already did."""
        async with self._lock:
            if self._failure is not None:
                raise self._failure
            if self.connection is not lost:
                return
            cause = lost.failure or ConnectionLostError("connection lost")
            if not self.locator.options.fails_over:
                self._failure = ConnectionLostError(f"{cause} (failover is off: see ha=true)")
                raise self._failure
            old = self.url
            last: ClientError = cause
            for pause in RetrySchedule(self.locator.options).pauses():
                await trio.sleep(pause)
                try:
                    self.url, self.connection = await self._open_any(old)
                except ConnectionLostError as exc:
                    last = exc
                    continue
                self.failovers += 1
                self._origin.clear()  # their ACKs are moot: the broker redelivers them
                assert old is not None
                assert self.url is not None
                log.info("failed over from %s to %s after: %s", old, self.url, cause)
                if self.on_failover is not None:
                    self.on_failover(old, self.url, cause)
                return
            self._failure = ConnectionLostError(f"failover from {old} gave up: {last}")
            raise self._failure

    async def _current(self) -> ClientConnection:
        if self._failure is not None:
            raise self._failure
        assert self.connection is not None
        return self.connection

    # -- requests --------------------------------------------------------------------------

    async def send(
        self,
        destination: DestinationLike,
        body: bytes | str = b"",
        *,
        headers: Headers = None,
        wait: bool = True,
    ) -> None:
        """Send and wait for the RECEIPT; sent again on another node when the connection is
        lost first, with one ``_AMQ_DUPL_ID`` so the broker stores it once.

        With ``wait=False``: return once the frame is on its way, waiting only while
        ``max_pending`` sends are unreceipted (see the module doc)."""
        self._raise_pipeline_error()
        pairs = header_pairs(headers)
        if not any(name == DUPLICATE_ID_HEADER for name, _ in pairs):
            pairs.append((DUPLICATE_ID_HEADER, uuid.uuid4().hex))
        if not wait:
            await self._window.acquire()
            self._in_flight += 1
            if self._flushed.is_set():
                self._flushed = trio.Event()
            await self._nursery.start(self._send_held, destination, body, pairs)
            return
        await self._send_until_receipted(destination, body, pairs, None)

    async def _send_until_receipted(
        self,
        destination: DestinationLike,
        body: bytes | str,
        pairs: list[tuple[str, str]],
        encoded: Callable[[], None] | None,
    ) -> None:
        """One send, again on each new connection until a RECEIPT comes. ``encoded`` is
        called just before the first attempt: a ClientConnection encodes the frame before
        its first checkpoint, so nothing else runs in between and pipelined sends keep
        their callers' order."""
        attempt = 0
        while True:
            conn = await self._current()
            if attempt:
                self.resends += 1
            attempt += 1
            try:
                if encoded is not None:
                    encoded()
                    encoded = None
                await conn.send(destination, body, headers=pairs)
                return
            except ConnectionLostError:
                await self._fail_over(conn)

    async def _send_held(
        self,
        destination: DestinationLike,
        body: bytes | str,
        pairs: list[tuple[str, str]],
        *,
        task_status: Any,
    ) -> None:
        """A pipelined send (a task of the nursery, started once its frame is encoded). A
        failure before that is the caller's; after it, it is kept for the caller's next
        call instead of breaking the nursery."""
        started = False

        def encoded() -> None:
            nonlocal started
            started = True
            task_status.started()

        try:
            await self._send_until_receipted(destination, body, pairs, encoded)
        except ClientError as exc:
            if not started:
                raise
            if self._pipeline_error is None:
                self._pipeline_error = exc
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._flushed.set()
            self._window.release()

    @property
    def pending_receipts(self) -> int:
        """Pipelined sends not receipted yet."""
        return self._in_flight

    def _raise_pipeline_error(self) -> None:
        if self._pipeline_error is not None:
            raise self._pipeline_error

    async def flush_receipts(self) -> None:
        """Wait until every pipelined send was receipted (on some node); raises what made
        one of them fail for good."""
        await self._flushed.wait()
        self._raise_pipeline_error()

    async def subscribe(
        self,
        destination: DestinationLike,
        *,
        ack: str = "auto",
        headers: Headers = None,
        selector: str | None = None,
        id: str | None = None,
    ) -> FailoverSubscription:
        self._ids += 1
        sub_id = id if id is not None else f"failover-sub-{self._ids}"
        args = {
            "destination": destination,
            "ack": ack,
            "headers": header_pairs(headers),
            "selector": selector,
        }
        subscription = FailoverSubscription(self, sub_id, args)
        while True:
            conn = await self._current()
            try:
                await subscription._attach(conn)
            except ConnectionLostError:
                await self._fail_over(conn)
                continue
            self._subscriptions[sub_id] = subscription
            return subscription

    def _delivered(self, message: Message, conn: ClientConnection, ack_mode: str) -> None:
        if ack_mode != "auto":
            self._origin[message] = conn

    async def ack(self, message: Message) -> bool:
        """Acknowledge ``message`` and wait for the node's RECEIPT; False when its connection
        was lost first (the broker then redelivers it, marked ``redelivered``)."""
        conn = self._origin.pop(message, None)
        if conn is None or conn is not self.connection:
            return False
        try:
            # Receipted: True means the node took it, so the message is never counted twice.
            await conn.ack(message, receipt=True)
        except ConnectionLostError:
            await self._fail_over(conn)
            return False
        return True

    async def disconnect(self) -> None:
        """DISCONNECT from the current node (its RECEIPT confirms what was sent before).

        Pipelined sends are flushed first. A loss after that is not failed over: every send
        was receipted already, and messages whose ACK was not confirmed come again."""
        await self.flush_receipts()
        conn = await self._current()
        try:
            await conn.disconnect()
        except ConnectionLostError as exc:
            log.info("connection to %s lost while disconnecting: %s", self.url, exc)


@asynccontextmanager
async def open_cluster_connection(
    url: ClientUrl | str | ClusterLocator,
    *,
    on_failover: Callable[[BrokerUrl, BrokerUrl, ClientError], None] | None = None,
    connect: Connector | None = None,
    max_pending: int = 1,
    **connect_options: Any,
) -> AsyncIterator[FailoverConnection]:
    """A :class:`FailoverConnection` over the nodes of ``url`` (any form of
    :func:`~artemis_py.client.url.parse_client_url`, or a shared :class:`ClusterLocator` so
    that several connections are spread by its policy). ``connect_options`` go to
    :func:`~artemis_py.client.open_stomp_connection` (``login``, ``heartbeat``, ...);
    ``max_pending`` is the window of ``send(..., wait=False)``. Leaving the block
    disconnects (after the pipelined sends were receipted)."""
    locator = url if isinstance(url, ClusterLocator) else ClusterLocator(url)
    if connect is None:
        extra = [*header_pairs(connect_options.pop("headers", None)), ("topology", "true")]

        def connect(address: BrokerUrl) -> AbstractAsyncContextManager[ClientConnection]:
            return open_stomp_connection(
                address.host, address.port, headers=extra, **connect_options
            )

    # udp://: listens as long as the connection lives (failover may need the nodes it hears).
    discovery = locator.discovery.listening() if locator.discovery is not None else nullcontext()
    async with discovery as listen, trio.open_nursery() as nursery:
        if listen is not None:
            nursery.start_soon(listen)
        conn = FailoverConnection(
            locator, connect, nursery, on_failover=on_failover, max_pending=max_pending
        )
        await conn.start()
        try:
            yield conn
            await conn.disconnect()
        finally:
            if conn.connection is not None:
                await conn.connection.aclose()
            nursery.cancel_scope.cancel()
