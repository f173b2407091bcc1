"""The run of ``artemis-py check``: producers and consumers on every node, then a drain.

Theory of operation
-------------------
Per URL, one producer and one consumer task, each on a connection of its own made with
:mod:`artemis_py.client`, which reconnects (after ``retry_interval``) whenever its
connection fails, so a node that goes away and comes back is used again. A URL may name
one node's primary and backup (``failover``): each reconnection then tries the next of its
addresses, pausing only after a round of them, so the client follows the pair's live side.

* **Producers** take the next number from the shared :class:`~.history.History` (so the
  numbers are unique and spread over the nodes as fast as each node confirms) and send
  it persistent, with a receipt; at most ``rate`` messages per second all together
  (:class:`Pacer`). A RECEIPT makes it *receipted*. No RECEIPT within ``receipt_timeout``
  (or a failed connection) leaves the outcome unknown: the message may or may not be
  there, so it is *sent* but not receipted, and the producer reconnects.
* **Consumers** subscribe with ``client-individual`` acknowledgement and ACK each message
  with a receipt, recording the ACK as sent and then as confirmed: the history needs both
  to classify a later duplicate.
* **Sending** ends after ``count`` messages, after ``duration`` seconds, when the caller's
  ``stop`` event is set (a Ctrl-C, a test), or when no send was receipted for ``timeout``
  seconds (nothing answers). **The drain** then waits until
  every receipted message was received or no message arrived for ``timeout`` seconds;
  the consumers finish the message in hand and disconnect (their DISCONNECT receipt
  confirms the last ACKs).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import trio

from artemis_py.checker.history import History
from artemis_py.client import (
    BrokerUrl,
    ClientConnection,
    ClientError,
    DestinationLike,
    Message,
    open_stomp_connection,
)
from artemis_py.client.errors import connect_failure
from artemis_py.config.tls_params import TlsParams

__all__ = ["CheckOptions", "Pacer", "run_check"]

PERSISTENT = (("persistent", "true"),)
Work = Callable[[ClientConnection], Awaitable[None]]
POLL = 0.05  # how often the drain looks at the history, and stopping consumers at the flag


@dataclass(frozen=True)
class CheckOptions:
    """What ``artemis-py check`` does (see its ``--help``)."""

    urls: tuple[BrokerUrl, ...]
    destination: DestinationLike  # the queue: queue://NAME (or a Destination with a prefix)
    count: int | None = 1000  # None: until duration
    rate: float | None = None  # messages per second, all producers together; None: no limit
    duration: float | None = None
    timeout: float = 10.0
    receipt_timeout: float = 10.0
    retry_interval: float = 1.0
    login: str | None = None
    passcode: str | None = None
    heartbeat_ms: int = 2000
    tls: tuple[TlsParams, ...] = ()  # per URL, its TLS parameters (none: plain TCP)
    # Per URL, the other addresses of the same node (a shared-store backup), in order.
    failover: tuple[tuple[BrokerUrl, ...], ...] = ()


class Stalled(Exception):
    """No RECEIPT in time: the connection is given up."""


class Pacer:
    """At most ``rate`` starts per second, shared by the tasks that wait on it."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1 / rate if rate else 0.0
        self.next = -math.inf

    async def wait(self) -> None:
        if not self.interval:
            await trio.lowlevel.checkpoint()
            return
        slot = max(trio.current_time(), self.next)
        self.next = slot + self.interval
        await trio.sleep_until(slot)


class _Run:
    def __init__(self, options: CheckOptions, history: History, stop: threading.Event) -> None:
        self.options = options
        self.history = history
        self.stop = stop
        self.pacer = Pacer(options.rate)
        self.sending = True
        self.consuming = True

    def describe(self, exc: BaseException, node: int, url: BrokerUrl) -> str:
        if isinstance(exc, OSError):
            return f"node {node} ({url}): cannot connect: {connect_failure(exc)}"
        return f"node {node} ({url}): {exc}"

    def addresses(self, node: int) -> tuple[BrokerUrl, ...]:
        """The addresses of ``node``: its URL's, then its failover ones."""
        failover = self.options.failover
        return (self.options.urls[node], *(failover[node] if node < len(failover) else ()))

    def connection(
        self, node: int, url: BrokerUrl
    ) -> AbstractAsyncContextManager[ClientConnection]:
        beat = self.options.heartbeat_ms
        tls = self.options.tls[node] if node < len(self.options.tls) else None
        return open_stomp_connection(
            url.host,
            url.port,
            tls=tls,
            login=self.options.login,
            passcode=self.options.passcode,
            heartbeat=(beat, beat),
            connect_timeout=self.options.receipt_timeout,
            disconnect_timeout=self.options.receipt_timeout,
        )

    async def keep_going(self, role: str, node: int, work: Work) -> None:
        """Run ``work(conn)`` on a connection to ``node`` until it returns; reconnect after
        a failure (to its next address, if it has several)."""
        addresses = self.addresses(node)
        current = 0
        while self.sending if role == "producer" else self.consuming:
            url = addresses[current]
            try:
                async with self.connection(node, url) as conn:
                    await work(conn)
                return
            except (OSError, ClientError, Stalled) as exc:
                self.history.error(f"{role} {self.describe(exc, node, url)}")
            current = (current + 1) % len(addresses)
            if current == 0:  # every address failed once: pause before the next round
                await trio.sleep(self.options.retry_interval)

    async def produce(self, node: int) -> None:
        options, history = self.options, self.history

        async def work(conn: ClientConnection) -> None:
            while True:
                await self.pacer.wait()
                if not self.sending:
                    return
                if options.count is not None and len(history.attempted) >= options.count:
                    self.sending = False
                    return
                n = history.attempt(node)
                with trio.move_on_after(options.receipt_timeout) as scope:
                    await conn.send(options.destination, history.body(n), headers=PERSISTENT)
                if scope.cancelled_caught:
                    raise Stalled(f"no RECEIPT for a SEND within {options.receipt_timeout:g} s")
                history.receipt(n)

        await self.keep_going("producer", node, work)

    async def consume(self, node: int) -> None:
        options, history = self.options, self.history

        async def work(conn: ClientConnection) -> None:
            subscription = await conn.subscribe(options.destination, ack="client-individual")
            while self.consuming:
                message: Message | None = None
                with trio.move_on_after(POLL):
                    message = await subscription.receive()
                if message is None:
                    continue
                n = history.deliver(message.text, node)
                if n is not None:
                    history.sending_ack(n)
                with trio.move_on_after(options.receipt_timeout) as scope:
                    await conn.ack(message, receipt=True)
                if scope.cancelled_caught:
                    raise Stalled(f"no RECEIPT for an ACK within {options.receipt_timeout:g} s")
                if n is not None:
                    history.ack(n)

        await self.keep_going("consumer", node, work)

    async def send_phase(self) -> None:
        options, history = self.options, self.history
        end = trio.current_time() + (options.duration or math.inf)
        async with trio.open_nursery() as nursery:
            for node in range(len(options.urls)):
                nursery.start_soon(self.produce, node)
            while self.sending:
                if trio.current_time() >= end or self.stop.is_set():
                    self.sending = False
                elif history.unreceipted_for() > options.timeout:
                    history.event(f"no send receipted for {options.timeout:g} s: sending ends")
                    self.sending = False
                else:
                    await trio.sleep(POLL)
            # Producers finish the send in hand; one still waiting for a node is cut off.
            nursery.cancel_scope.deadline = trio.current_time() + options.receipt_timeout
        history.event("sending ended")

    async def drain(self) -> None:
        history = self.history
        while True:  # polled: deliveries come from every consumer task
            if not history.missing() or history.quiet_for() >= self.options.timeout:
                break
            await trio.sleep(POLL)
        history.event("drained" if not history.missing() else "drain gave up")


async def run_check(
    options: CheckOptions, history: History, stop: threading.Event | None = None
) -> None:
    """Send, consume and drain (see the module doc); the outcome is in ``history``.
    Setting ``stop`` (from any thread) ends the sending; the drain still runs."""
    run = _Run(options, history, stop if stop is not None else threading.Event())
    async with trio.open_nursery() as consumers:
        for node in range(len(options.urls)):
            consumers.start_soon(run.consume, node)
        await run.send_phase()
        await run.drain()
        run.consuming = False
        # The consumers finish the message in hand and disconnect; one that hangs on its
        # DISCONNECT receipt is cut off after the receipt timeout.
        consumers.cancel_scope.deadline = trio.current_time() + options.receipt_timeout + POLL
