"""One load-generating process: its share of the producers and consumers, as Trio tasks.

Theory of operation
-------------------
* **Start together.** Every actor (producer or consumer) opens its own STOMP connection
  (consumers also subscribe, with a receipt), then the worker marks itself ready in the
  shared counters and waits for the runner's ``go`` event; the runner then publishes one
  wall-clock start instant for all workers. Producers send from ``start`` until
  ``start + warmup + duration``; only messages *sent* inside the measurement window
  ``[start + warmup, end)`` enter the latency histograms, and only sends, receipts and
  receives that *happen* inside it count towards the window's rates.
* **One clock.** Every timestamp is ``time.time_ns()``: the SEND carries it in the
  ``perf-ts`` header, and a consumer in another process subtracts it from its own reading of
  the same wall clock (end-to-end latency). With ``--rate`` the timestamp is the message's
  *scheduled* time, so a stalled broker shows up as latency instead of as fewer samples
  (coordinated omission).
* **Counters in shared memory.** Totals (sent, receipted, received, errors, CPU seconds) are
  copied into this worker's slots of a shared array every 50 ms; the runner reads them for
  the per-second progress and to decide when the consumers have drained. Exact window counts,
  per-node counts, error texts and the encoded histograms travel once, at the end, through
  the result queue.
* **Errors end an actor, not the run** -- once it runs. A failed connection is counted and
  its first error text kept; the other actors go on. But an actor that cannot even connect
  (or log in) before the start makes the whole load test pointless: the worker then reports
  a ``setup_error`` instead of getting ready, and the runner stops at once rather than
  measuring ``--duration`` seconds of nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

import trio

from artemis_py.client import (
    BrokerUrl,
    ClientConnection,
    ClientError,
    Message,
    StompServerError,
    Subscription,
    open_stomp_connection,
)
from artemis_py.client.errors import connect_failure
from artemis_py.config.tls_params import TlsParams
from artemis_py.perf import histogram
from artemis_py.perf.cluster import failover_consumer, failover_producer
from artemis_py.perf.features import Check, Plan, Stamper
from artemis_py.perf.options import TIMESTAMP_HEADER, PerfOptions

__all__ = ["SLOTS", "Assignment", "Control", "assign", "worker_main"]

PUBLISH_INTERVAL: Final = 0.05
_FILLER: Final = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_MAX_ERROR_TEXTS: Final = 10


Actor = Callable[[int, BrokerUrl], Awaitable[None]]
"""A producer or consumer task: ``actor(number, node)``."""


class SLOTS:
    """Indexes into a worker's slice of the shared counter array."""

    SENT = 0
    RECEIPTED = 1
    RECEIVED = 2
    ERRORS = 3
    CPU = 4
    READY = 5
    SENDING_DONE = 6
    COUNT = 7


@dataclass(frozen=True, slots=True)
class Assignment:
    """The actors of one worker process: ``(actor number, node URL)`` pairs."""

    index: int
    producers: tuple[tuple[int, BrokerUrl], ...]
    consumers: tuple[tuple[int, BrokerUrl], ...]


def assign(options: PerfOptions) -> list[Assignment]:
    """Spread actors over processes and nodes round-robin (empty workers are left out)."""
    nprocs = min(options.processes, options.producers + options.consumers)
    producers: list[list[tuple[int, BrokerUrl]]] = [[] for _ in range(nprocs)]
    consumers: list[list[tuple[int, BrokerUrl]]] = [[] for _ in range(nprocs)]
    for number in range(options.producers):
        url = options.producer_urls[number % len(options.producer_urls)]
        producers[number % nprocs].append((number, url))
    for number in range(options.consumers):
        url = options.consumer_urls[number % len(options.consumer_urls)]
        # Consumers fill the processes from the other end, so with one producer and one
        # consumer and two processes each gets its own.
        consumers[(nprocs - 1 - number) % nprocs].append((number, url))
    used = [i for i in range(nprocs) if producers[i] or consumers[i]]
    return [
        Assignment(index, tuple(producers[i]), tuple(consumers[i])) for index, i in enumerate(used)
    ]


@dataclass(slots=True)
class Control:
    """The multiprocessing objects a worker shares with the runner (picklable for spawn)."""

    counters: Any  # multiprocessing.Array('d', workers * SLOTS.COUNT, lock=False)
    start_at: Any  # multiprocessing.Value('d'): the wall-clock start, set before `go`
    go: Any  # multiprocessing.Event
    stop_consumers: Any  # multiprocessing.Event
    results: Any  # multiprocessing.Queue


@dataclass(slots=True)
class _Tally:
    sent: int = 0
    receipted: int = 0
    received: int = 0
    errors: int = 0
    failovers: int = 0
    resends: int = 0
    window_sent: int = 0
    window_receipted: int = 0
    window_received: int = 0
    error_texts: list[str] = field(default_factory=list)
    warning_texts: list[str] = field(default_factory=list)
    node_sent: Counter[str] = field(default_factory=Counter)
    node_received: Counter[str] = field(default_factory=Counter)

    def warning(self, who: str, exc: BaseException) -> None:
        self.warning_texts.append(f"{who}: {type(exc).__name__}: {exc}")

    def error(self, who: str, exc: BaseException) -> None:
        self.errors += 1
        if len(self.error_texts) < _MAX_ERROR_TEXTS:
            text = str(exc) or type(exc).__name__
            self.error_texts.append(f"{who}: {type(exc).__name__}: {text}")


class SetupFailed(Exception):
    """Some actor could not connect before the start; the message says who and why."""


def _setup_failure(url: BrokerUrl, exc: BaseException) -> str:
    if isinstance(exc, StompServerError):
        return f"{url}: the broker refused the connection: {exc}"
    if isinstance(exc, OSError):
        return f"{url}: cannot connect: {connect_failure(exc)}"
    return f"{url}: {exc}"


class _Worker:
    def __init__(self, options: PerfOptions, assignment: Assignment, control: Control) -> None:
        self.options = options
        self.assignment = assignment
        self.control = control
        self.tally = _Tally()
        self.receipt_latency = histogram.Recorder()
        self.e2e_latency = histogram.Recorder()
        self.base = assignment.index * SLOTS.COUNT
        self.ready = 0
        self.all_ready = trio.Event()
        self.started = trio.Event()
        self.start_ns = 0
        self.window_start_ns = 0
        self.window_end_ns = 0
        self.cpu_window: list[float] = []
        self.consumer_scopes: list[trio.CancelScope] = []
        self.setup_failures: list[str] = []  # distinct texts, in order
        repeats = options.message_size // len(_FILLER) + 1
        self.payload = (_FILLER * repeats)[: options.message_size]
        self.headers_base = [("persistent", "true" if options.persistent else "false")]
        # --priorities / --groups (.features): stamped SENDs, checked deliveries.
        self.plan = Plan.of(options) if options.has_features else None
        self.check = Check(self.plan, self._in_window) if self.plan else None

    # -- shared counters -------------------------------------------------------------------

    def _set(self, slot: int, value: float) -> None:
        self.control.counters[self.base + slot] = value

    def publish(self) -> None:
        t = self.tally
        self._set(SLOTS.SENT, t.sent)
        self._set(SLOTS.RECEIPTED, t.receipted)
        self._set(SLOTS.RECEIVED, t.received)
        self._set(SLOTS.ERRORS, t.errors)
        self._set(SLOTS.CPU, time.process_time())

    async def _publisher(self) -> None:
        while True:
            self.publish()
            await trio.sleep(PUBLISH_INTERVAL)

    # -- phases ----------------------------------------------------------------------------

    def _actor_ready(self) -> None:
        self.ready += 1
        if self.ready == len(self.assignment.producers) + len(self.assignment.consumers):
            self.all_ready.set()

    async def _wait_ns(self, wall_ns: int) -> None:
        """Sleep until the wall clock reads ``wall_ns``."""
        await trio.sleep(max(0.0, (wall_ns - time.time_ns()) / 1e9))

    def _failed_before_start(self, url: BrokerUrl, exc: BaseException) -> None:
        text = _setup_failure(url, exc)
        if text not in self.setup_failures:
            self.setup_failures.append(text)
        self._actor_ready()  # do not hold the others back: _coordinate gives up

    async def _coordinate(self) -> None:
        await self.all_ready.wait()
        if self.setup_failures:
            raise SetupFailed("; ".join(self.setup_failures))
        self._set(SLOTS.READY, 1)
        await trio.to_thread.run_sync(self.control.go.wait, abandon_on_cancel=True)
        self.start_ns = int(self.control.start_at.value * 1e9)
        self.window_start_ns = self.start_ns + int(self.options.warmup * 1e9)
        self.window_end_ns = self.window_start_ns + int(self.options.duration * 1e9)
        self.started.set()
        await self._wait_ns(self.window_start_ns)
        self.cpu_window.append(time.process_time())
        await self._wait_ns(self.window_end_ns)
        self.cpu_window.append(time.process_time())

    async def _stop_consumers_when_told(self) -> None:
        await trio.to_thread.run_sync(self.control.stop_consumers.wait, abandon_on_cancel=True)
        for scope in self.consumer_scopes:
            scope.cancel()

    def _actors(self) -> tuple[Actor, Actor]:
        """The producer and consumer functions: on failover connections for a side given
        by a cluster URL with failover (:mod:`.cluster`), plain ones otherwise."""
        options = self.options
        producer: Actor = self._producer
        consumer: Actor = self._consumer
        if options.producer_cluster is not None and options.producer_cluster.options.fails_over:
            producer = partial(failover_producer, self)
        if options.consumer_cluster is not None and options.consumer_cluster.options.fails_over:
            consumer = partial(failover_consumer, self)
        return producer, consumer

    async def run(self) -> dict[str, Any]:
        producer, consumer = self._actors()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._publisher)
            async with trio.open_nursery() as actors:
                actors.start_soon(self._coordinate)
                for number, url in self.assignment.consumers:
                    actors.start_soon(consumer, number, url)
                async with trio.open_nursery() as producers:
                    for number, url in self.assignment.producers:
                        producers.start_soon(producer, number, url)
                self._set(SLOTS.SENDING_DONE, 1)
                self.publish()
                if self.assignment.consumers:
                    actors.start_soon(self._stop_consumers_when_told)
            nursery.cancel_scope.cancel()
        self.publish()
        return self.result()

    def result(self) -> dict[str, Any]:
        t = self.tally
        cpu = self.cpu_window[1] - self.cpu_window[0] if len(self.cpu_window) == 2 else None
        return {
            "worker": self.assignment.index,
            "producers": len(self.assignment.producers),
            "consumers": len(self.assignment.consumers),
            "sent": t.sent,
            "receipted": t.receipted,
            "received": t.received,
            "window_sent": t.window_sent,
            "window_receipted": t.window_receipted,
            "window_received": t.window_received,
            "errors": t.errors,
            "failovers": t.failovers,
            "resends": t.resends,
            "error_texts": t.error_texts,
            "warning_texts": t.warning_texts,
            "node_sent": dict(t.node_sent),
            "node_received": dict(t.node_received),
            "cpu_seconds_window": cpu,
            "cpu_seconds_total": time.process_time(),
            "receipt_latency": self.receipt_latency.encode(),
            "e2e_latency": self.e2e_latency.encode(),
            "features": self.check.result() if self.check else None,
        }

    # -- producers -------------------------------------------------------------------------

    def _connect(self, url: BrokerUrl, max_pending: int = 1, tls: TlsParams | None = None) -> Any:
        return open_stomp_connection(
            url.host,
            url.port,
            login=self.options.user,
            passcode=self.options.password,
            version=self.options.stomp_version,
            max_pending=max_pending,
            tls=tls,
        )

    def _in_window(self, ns: int) -> bool:
        return self.window_start_ns <= ns < self.window_end_ns

    def _schedule(self, number: int) -> Callable[[], int | None]:
        """Timestamps for successive messages of one producer; None when sending must end.

        Without ``--rate``: now. With it: the next slot of this producer's share of the rate
        (producers are staggered within one interval so they do not send in bursts).
        """
        options = self.options
        end = self.window_end_ns
        if options.rate is None:

            def now() -> int | None:
                ns = time.time_ns()
                return ns if ns < end else None

            return now
        interval = int(1e9 * options.producers / options.rate)
        slot = [self.start_ns + interval * number // max(options.producers, 1)]

        def scheduled() -> int | None:
            ns = slot[0]
            if ns >= end:
                return None
            slot[0] = ns + interval
            return ns

        return scheduled

    async def _producer(self, number: int, url: BrokerUrl) -> None:
        options = self.options
        who = f"producer {number} ({url})"
        window = options.max_pending if options.receipts and not options.tx_size else 1
        try:
            async with self._connect(url, window, self.options.producer_tls) as conn:
                self._actor_ready()
                await self.started.wait()
                next_ts = self._schedule(number)
                node = str(url)
                headers = self._headers_of(number)
                if options.tx_size:
                    await self._send_transactions(conn, next_ts, headers, node)
                else:
                    async with trio.open_nursery() as senders:
                        for _ in range(window):
                            senders.start_soon(self._send_loop, conn, next_ts, headers, node)
                await conn.flush_receipts()
                try:
                    await conn.disconnect()
                except ClientError as exc:
                    if options.pipelined:
                        raise  # the DISCONNECT receipt was the only confirmation
                    # Every message was already receipted: nothing is in doubt. (Apache
                    # Artemis 2.40 sometimes closes the socket before the DISCONNECT receipt.)
                    self.tally.warning(who, exc)
        except* (ClientError, OSError) as group:
            self.tally.error(who, group.exceptions[0])
            if not self.started.is_set():
                self._failed_before_start(url, group.exceptions[0])

    def _headers(self, ts: int) -> list[tuple[str, str]]:
        return [*self.headers_base, (TIMESTAMP_HEADER, str(ts))]

    def _headers_of(self, number: int) -> Callable[[int], list[tuple[str, str]]]:
        """Producer ``number``'s headers for a message sent at ``ts``: the plain ones, or
        stamped with its sequence, group and priority (:class:`Stamper`)."""
        if self.plan is None:
            return self._headers
        return Stamper(self.plan, number, self.headers_base).headers

    async def _send_loop(
        self,
        conn: ClientConnection,
        next_ts: Callable[[], int | None],
        headers: Callable[[int], list[tuple[str, str]]],
        node: str,
    ) -> None:
        options = self.options
        tally = self.tally
        destination = options.stomp_destination
        payload = self.payload
        rate_limited = options.rate is not None
        receipts = options.receipts
        while True:
            ts = next_ts()
            if ts is None:
                return
            if rate_limited:
                await self._wait_ns(ts)
            await conn.send(destination, payload, headers=headers(ts), receipt=receipts)
            tally.sent += 1
            tally.node_sent[node] += 1
            in_window = self._in_window(ts)
            if in_window:
                tally.window_sent += 1
            if receipts:
                done = time.time_ns()
                tally.receipted += 1
                if self._in_window(done):
                    tally.window_receipted += 1
                if in_window:
                    self.receipt_latency.record((done - ts) // 1000)

    async def _send_transactions(
        self,
        conn: ClientConnection,
        next_ts: Callable[[], int | None],
        headers: Callable[[int], list[tuple[str, str]]],
        node: str,
    ) -> None:
        options = self.options
        tally = self.tally
        while True:
            stamps: list[int] = []
            tx = await conn.begin(receipt=False)
            for _ in range(options.tx_size):
                ts = next_ts()
                if ts is None:
                    break
                if options.rate is not None:
                    await self._wait_ns(ts)
                await conn.send(
                    options.stomp_destination,
                    self.payload,
                    headers=headers(ts),
                    transaction=tx,
                    receipt=False,
                )
                stamps.append(ts)
            if not stamps:
                await conn.abort(tx)
                return
            await conn.commit(tx)
            done = time.time_ns()
            done_in_window = self._in_window(done)
            for ts in stamps:
                tally.sent += 1
                tally.receipted += 1
                tally.window_receipted += done_in_window
                tally.node_sent[node] += 1
                if self._in_window(ts):
                    tally.window_sent += 1
                    self.receipt_latency.record((done - ts) // 1000)
            if len(stamps) < options.tx_size:
                return

    # -- consumers -------------------------------------------------------------------------

    async def _consumer(self, number: int, url: BrokerUrl) -> None:
        options = self.options
        tally = self.tally
        who = f"consumer {number} ({url})"
        node = str(url)
        ack_mode = options.ack_mode
        tx_size = options.tx_size if ack_mode != "auto" else 0
        check = self.check
        consuming = trio.CancelScope()
        self.consumer_scopes.append(consuming)
        try:
            async with self._connect(url, tls=self.options.consumer_tls) as conn:
                subscription = await conn.subscribe(options.stomp_destination, ack=ack_mode)
                self._actor_ready()
                tx: str | None = None
                in_tx = 0
                with consuming:
                    async for message in _drained(subscription):
                        now = time.time_ns()
                        tally.received += 1
                        tally.node_received[node] += 1
                        if self._in_window(now):
                            tally.window_received += 1
                        stamp = message.get(TIMESTAMP_HEADER)
                        if stamp is not None:
                            ts = int(stamp)
                            if self._in_window(ts):
                                self.e2e_latency.record((now - ts) // 1000)
                            if check is not None:
                                check.observe(number, message, now, ts)
                        if ack_mode == "auto":
                            continue
                        if tx_size:
                            if tx is None:
                                tx = await conn.begin(receipt=False)
                            await conn.ack(message, transaction=tx)
                            in_tx += 1
                            if in_tx >= tx_size:
                                await conn.commit(tx, receipt=False)
                                tx, in_tx = None, 0
                        else:
                            await conn.ack(message)
                if tx is not None:
                    await conn.commit(tx, receipt=False)
                await conn.disconnect()
        except* (ClientError, OSError) as group:
            self.tally.error(who, group.exceptions[0])
            if not self.started.is_set() and not self.all_ready.is_set():
                self._failed_before_start(url, group.exceptions[0])


async def _drained(subscription: Subscription) -> AsyncIterator[Message]:
    """The messages of ``subscription``, those already buffered without a checkpoint each
    (``receive_nowait``): a consumer that keeps up yields once per read of its connection,
    not once per message. Ends as ``async for subscription`` does (raising its failure)."""
    while True:
        try:
            try:
                message = subscription.receive_nowait()
            except trio.WouldBlock:
                message = await subscription.receive()
        except trio.EndOfChannel:
            return
        yield message


async def _run(options: PerfOptions, assignment: Assignment, control: Control) -> dict[str, Any]:
    failure = ""
    try:
        return await _Worker(options, assignment, control).run()
    except* SetupFailed as group:  # expected: reported as such, not as a crash
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):  # nested nurseries nest groups
            leaf = leaf.exceptions[0]
        failure = str(leaf)
    return {"worker": assignment.index, "setup_error": failure}


def worker_main(options: PerfOptions, assignment: Assignment, control: Control) -> None:
    """Process entry point: run the actors, put one result dict on ``control.results``."""
    try:
        result = trio.run(_run, options, assignment, control)
    except BaseException as exc:  # reported to the runner, never lost
        result = {"worker": assignment.index, "fatal": f"{type(exc).__name__}: {exc}"}
        control.results.put(result)
        raise
    control.results.put(result)
