"""Churn (issue 5 §4): a total-queue check while nodes scale down, crash and come back.

In the style of Jepsen's total-queue checker: producers send uniquely numbered persistent
messages to every node of a three-node ON_DEMAND cluster (redistribution-delay 0, every node
with scale-down), consumers take them from every node, and meanwhile nodes are stopped
gracefully (they scale down) and started again: each node twice, first while consumers keep
up and then with a backlog, then two nodes at once; finally one is SIGKILLed with a backlog
and restarted. Every graceful stop must exit 0; one that does not is recorded and the churn
goes on (what it did not move stays in its journal), so that the final check still says
whether anything was lost. After a final drain (the counting is
:mod:`artemis_py.checker.history`'s, which ``artemis-py check`` uses too):

* *lost* (a message whose RECEIPT arrived but that no consumer ever received) must be 0;
* *unexpected* (a received number nobody tried to send) must be 0;
* *duplicates* (deliveries beyond the first) are counted and reported; the target is 0, but
  at-least-once delivery allows them when a consumer's connection closes before it
  acknowledged. Each one is counted by what its consumer had done when it came again: the
  ACK was confirmed (a RECEIPT came: must never happen), an ACK was sent but not confirmed
  (it reached the node's socket, or not: the node processes the ACKs already in a closing
  connection's socket, so these are ACKs lost on the way), or it was never acknowledged
  (the redelivery at-least-once allows).

Clients are stomp.py connections driven by one thread each. A client whose node goes away
(or does not answer a receipt in time) reconnects to another running node, and goes back to
its home node once that node is running again, so every node keeps producers and consumers.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import stomp
import stomp.exception

from artemis_py.checker import History

from .conftest import (
    CLUSTER_ADDRESS_SETTINGS,
    DEFAULT_ADDRESSES,
    ClusterNode,
    describe,
    wait_for,
    wait_formed,
)

QUEUE = "churn"
DESTINATION = f"/queue/{QUEUE}"
RECEIPT_TIMEOUT = 15.0  # seconds before a client gives up on a receipt and reconnects
QUIET = 10.0  # the final drain ends early only after this long without a new message
PHASE = 300  # messages receipted (and acked) between two steps of the churn
# Producers wait while this many receipted messages are not acknowledged yet (unless the
# consumers hold back on purpose), so that the final drain stays short.
OUTSTANDING = 200

# Redistribution at once; no dead-lettering (churn can redeliver a message many times).
SETTINGS = CLUSTER_ADDRESS_SETTINGS.replace(
    "<max-delivery-attempts>3</max-delivery-attempts>",
    "<max-delivery-attempts>-1</max-delivery-attempts>\n"
    "        <redistribution-delay>0</redistribution-delay>",
)
assert SETTINGS != CLUSTER_ADDRESS_SETTINGS
# Scale down to the live member with the lowest node ID (no connectors).
SCALE_DOWN = "<ha-policy><primary-only><scale-down/></primary-only></ha-policy>"
ADDRESSES = DEFAULT_ADDRESSES + (
    f'<address name="{QUEUE}"><anycast><queue name="{QUEUE}"/></anycast></address>'
)


# ---------------------------------------------------------------------------------------------
# clients


class Link(stomp.ConnectionListener):
    """One STOMP 1.2 connection to one node, with receipts and deliveries collected."""

    def __init__(self, node: int, port: int, history: History) -> None:
        self.node = node
        self.history = history
        self.conn = stomp.Connection12(
            [("127.0.0.1", port)], reconnect_attempts_max=1, heartbeats=(0, 0)
        )
        self.conn.set_listener("link", self)
        self.cond = threading.Condition()
        self.receipts: set[str] = set()
        self.frames: queue.Queue[stomp.utils.Frame] = queue.Queue()
        self.closed = threading.Event()
        self.started = False  # the socket was opened (so closing it will be noticed)
        self._ids = itertools.count(1)

    # -- listener (stomp.py's receiver thread) ---------------------------------------------

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        with self.cond:
            self.receipts.add(frame.headers.get("receipt-id", ""))
            self.cond.notify_all()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.frames.put(frame)

    def on_error(self, frame: stomp.utils.Frame) -> None:
        self.history.error(f"ERROR from node{self.node}: {frame.headers} {frame.body!r}")

    def on_disconnected(self) -> None:
        with self.cond:
            self.closed.set()
            self.cond.notify_all()

    # -- the worker's side -----------------------------------------------------------------

    def open(self, timeout: float = 10) -> bool:
        """Connect (CONNECTED received within ``timeout``); False if the node is not there."""
        try:
            self.conn.connect(wait=False)
        except (stomp.exception.StompException, OSError):
            return False
        self.started = True
        deadline = time.monotonic() + timeout
        while not self.conn.is_connected():
            if self.closed.is_set() or time.monotonic() > deadline:
                self.close()
                return False
            self.closed.wait(0.02)
        return True

    def usable(self) -> bool:
        return not self.closed.is_set() and self.conn.is_connected()

    def receipt_id(self) -> str:
        return f"r{next(self._ids)}"

    def wait_receipt(self, receipt: str) -> bool:
        with self.cond:
            self.cond.wait_for(
                lambda: receipt in self.receipts or self.closed.is_set(), RECEIPT_TIMEOUT
            )
            return receipt in self.receipts

    def request(self, send: Callable[[str], None]) -> bool:
        """Send one frame with a receipt (``send(receipt_id)``) and wait for the RECEIPT."""
        receipt = self.receipt_id()
        try:
            send(receipt)
        except (stomp.exception.StompException, OSError):
            return False
        return self.wait_receipt(receipt)

    def close(self) -> None:
        """DISCONNECT (so the node has seen every frame before), then close the socket."""
        if not self.started:
            return
        with contextlib.suppress(Exception):
            if self.conn.is_connected():
                self.conn.disconnect()
        self.closed.wait(5)
        with contextlib.suppress(Exception):
            self.conn.transport.disconnect_socket()
        with contextlib.suppress(Exception):
            self.conn.transport.stop()


class Worker(threading.Thread):
    """A client thread with a home node; reconnects elsewhere while its home is down."""

    def __init__(self, churn: Churn, home: int, role: str) -> None:
        super().__init__(name=f"{role}-{home}", daemon=True)
        self.churn = churn
        self.home = home
        self.stop = threading.Event()
        self.link: Link | None = None
        self.failure: BaseException | None = None
        self.connects = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                link = self.current()
                if link is None:
                    self.stop.wait(0.1)  # no node to talk to right now: try again soon
                    continue
                self.step(link)
        except BaseException as exc:  # reported by the main thread
            self.failure = exc
        finally:
            self.drop()

    def current(self) -> Link | None:
        """The link to use: the current one while usable (and home while home runs)."""
        up = self.churn.running()
        link = self.link
        if link is not None and (not link.usable() or (link.node != self.home and self.home in up)):
            self.drop()
            link = None
        if link is None:
            for i in sorted(up, key=lambda i: (i - self.home) % len(self.churn.nodes)):
                candidate = Link(i, self.churn.nodes[i].port, self.churn.history)
                if candidate.open() and self.setup(candidate):
                    self.link = link = candidate
                    self.connects += 1
                    break
                candidate.close()
        return link

    def drop(self) -> None:
        if self.link is not None:
            self.link.close()
            self.link = None

    def setup(self, link: Link) -> bool:
        return True

    def step(self, link: Link) -> None:
        raise NotImplementedError


class Producer(Worker):
    def __init__(self, churn: Churn, home: int) -> None:
        super().__init__(churn, home, "producer")

    def step(self, link: Link) -> None:
        history = self.churn.history
        if self.churn.consuming() and history.outstanding() > OUTSTANDING:
            self.stop.wait(0.01)  # let the consumers catch up
            return
        n = history.attempt(link.node)
        headers = {"persistent": "true"}
        if link.request(
            lambda r: link.conn.send(
                DESTINATION, history.body(n), headers={**headers, "receipt": r}
            )
        ):
            history.receipt(n)
        else:
            self.drop()  # outcome unknown: the message may or may not be there


class Consumer(Worker):
    def __init__(self, churn: Churn, home: int) -> None:
        super().__init__(churn, home, "consumer")

    def setup(self, link: Link) -> bool:
        return link.request(
            lambda r: link.conn.subscribe(
                DESTINATION, "churn", ack="client-individual", headers={"receipt": r}
            )
        )

    def current(self) -> Link | None:
        if self.churn.away.is_set() and not self.stop.is_set():
            self.drop()
            return None
        return super().current()

    def step(self, link: Link) -> None:
        if self.churn.paused.is_set() and not self.stop.is_set():
            self.stop.wait(0.05)  # paused: deliveries wait, unacknowledged, in the link
            return
        try:
            frame = link.frames.get(timeout=0.1)
        except queue.Empty:
            return
        if not link.usable():
            self.drop()  # never processed: the node delivers it again
            return
        n = self.churn.history.deliver(frame.body, link.node)
        if n is not None:
            self.churn.history.sending_ack(n)
        if link.request(lambda r: link.conn.ack(frame.headers["ack"], receipt=r)):
            if n is not None:
                self.churn.history.ack(n)
        else:
            self.drop()


# ---------------------------------------------------------------------------------------------
# the test


class Churn:
    """The nodes, which of them clients may use, the history and the client threads."""

    def __init__(self, nodes: list[ClusterNode]) -> None:
        self.nodes = nodes
        self.history = History(prefix="churn-")
        self._lock = threading.Lock()
        self._up = set(range(len(nodes)))
        # Consumers hold back while one of these is set, and a backlog builds: paused, they
        # stay subscribed and take nothing (so redistribution has somewhere to go); away,
        # they disconnect (so the backlog stays where it was sent).
        self.paused = threading.Event()
        self.away = threading.Event()
        self.failed_stops: list[str] = []  # graceful stops that did not exit 0
        self.producers = [Producer(self, i) for i in range(len(nodes))]
        self.consumers = [Consumer(self, i) for i in range(len(nodes))]

    def consuming(self) -> bool:
        return not self.paused.is_set() and not self.away.is_set()

    def hold_back(self, how: threading.Event | None) -> None:
        """Consumers hold back (``paused`` or ``away``), or take messages again (None)."""
        self.paused.clear()
        self.away.clear()
        if how is not None:
            how.set()
        self.history.event(
            "consumers " + ("paused" if how is self.paused else "away" if how else "take again")
        )

    def running(self) -> set[int]:
        with self._lock:
            return set(self._up)

    def take_down(self, i: int) -> None:
        with self._lock:
            self._up.discard(i)

    def bring_up(self, i: int) -> None:
        with self._lock:
            self._up.add(i)

    def wait_progress(self, count: int = PHASE, *, acked: bool = True, timeout: float = 40) -> None:
        """Wait until ``count`` more messages were receipted (and acked, with ``acked``)."""
        sent, taken = self.history.progress()

        def moved() -> bool:
            self.check_workers()
            now = self.history.progress()
            return now[0] >= sent + count and (not acked or now[1] >= taken + count)

        wait_for(
            moved,
            timeout,
            0.05,
            message=lambda: (
                f"{count} more messages receipted (and acked: {acked}) (from {sent}/{taken}, now "
                f"{self.history.progress()}); running {sorted(self.running())}\n"
                f"{self.report()}\n{describe(self.live())}"
            ),
        )

    def live(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.running]

    def check_workers(self) -> None:
        for w in [*self.producers, *self.consumers]:
            if w.failure is not None:
                raise AssertionError(f"{w.name} failed") from w.failure

    def scale_down(self, i: int) -> None:
        """SIGTERM node ``i``; a scale-down that does not finish (exit 1) is recorded and
        the churn goes on (the node's journal keeps what it did not move), so that the
        final check also says whether anything was lost."""
        node = self.nodes[i]
        self.take_down(i)
        self.history.event(f"SIGTERM node{i}")
        rc = node.stop(timeout=60, check=False)
        log = node.log(since_start=True)
        summary = next((line for line in log.splitlines() if "scale-down to" in line), "")
        self.history.event(f"node{i} exited {rc}: {summary.split('scale-down to ')[-1]}")
        if rc != 0 or "scale-down to node" not in summary:
            self.failed_stops.append(f"node{i} exited {rc}; log:\n{log[-4000:]}")

    def crash(self, i: int) -> None:
        self.take_down(i)
        self.history.event(f"SIGKILL node{i}")
        self.nodes[i].kill()

    def restart(self, i: int) -> None:
        self.history.event(f"start node{i}")
        self.nodes[i].start()
        wait_formed(self.live(), timeout=40)
        self.history.event(f"node{i} back in the cluster")
        self.bring_up(i)

    def stop_workers(self, workers: list[Producer] | list[Consumer]) -> None:
        for w in workers:
            w.stop.set()
        for w in workers:
            w.join(30)
            assert not w.is_alive(), f"{w.name} did not stop"
        self.check_workers()

    def report(self) -> str:
        h = self.history
        verdict = h.verdict(len(self.nodes))
        with h.lock:
            lines = [
                f"churn: {verdict.summary()} failed graceful stops {len(self.failed_stops)}",
                "events: " + "; ".join(h.events),
            ]
            waits = sorted(
                (got[0][1] - h.attempted[n][1], n)
                for n, got in h.received_from.items()
                if n in h.attempted
            )
            lines.append(
                "slowest (seconds from send to first delivery, number, sent to node, "
                "deliveries (node, at)): "
                + ", ".join(
                    f"{w:.1f} {n} {h.attempted[n][0]} {h.received_from[n]}" for w, n in waits[-3:]
                )
            )
            if verdict.lost:
                lines.append(
                    "lost (number, sent to node, at): "
                    + ", ".join(f"{n} {h.attempted[n]}" for n in verdict.lost[:30])
                )
            if verdict.unexpected or h.foreign:
                lines.append(f"unknown: {verdict.unexpected[:30]}, {h.foreign} foreign")
            if h.after_ack:
                lines.append(
                    "delivered again after a confirmed ACK (number, nodes): "
                    + ", ".join(f"{n} {h.received_from[n]}" for n in h.after_ack[:30])
                )
            if h.after_sent_ack:
                lines.append(
                    "delivered again after an unconfirmed ACK (number, nodes): "
                    + ", ".join(f"{n} {h.received_from[n]}" for n in h.after_sent_ack[:30])
                )
            if h.errors:
                lines.append(f"{len(h.errors)} client errors, first: {h.errors[:5]}")
        connects = [w.connects for w in [*self.producers, *self.consumers]]
        lines.append(f"connections per producer/consumer: {connects}")
        return "\n".join(lines)


def test_no_receipted_message_is_lost_while_nodes_scale_down_crash_and_return(
    cluster: Any,
) -> None:
    nodes = cluster(
        3,
        static={0: [1, 2], 1: [0, 2], 2: [0, 1]},  # any node can rejoin while another is down
        address_settings=SETTINGS,
        addresses=ADDRESSES,
        extra_core=SCALE_DOWN,
    )
    churn = Churn(nodes)
    history = churn.history
    try:
        for w in [*churn.consumers, *churn.producers]:
            w.start()
        churn.wait_progress()
        # Every node scales down and comes back twice: first while the consumers keep up,
        # then with a backlog everywhere (consumers paused, or away for node1). Then two
        # nodes are down at once, and node0 crashes with a backlog.
        for backlog in (False, True):
            for i in range(len(nodes)):
                if backlog:
                    churn.hold_back(churn.away if i == 1 else churn.paused)
                    churn.wait_progress(acked=False)
                churn.scale_down(i)
                churn.wait_progress(acked=not backlog)
                churn.hold_back(None)
                churn.restart(i)
                churn.wait_progress()
        churn.scale_down(2)
        churn.scale_down(1)
        churn.wait_progress()
        churn.restart(1)
        churn.restart(2)
        churn.wait_progress()
        churn.hold_back(churn.away)
        churn.wait_progress(acked=False)
        churn.crash(0)
        churn.wait_progress(acked=False)
        churn.hold_back(None)
        churn.restart(0)
        churn.wait_progress()

        churn.stop_workers(churn.producers)
        history.event(f"producers stopped ({history.outstanding()} not acknowledged yet)")
        assert all(n.running for n in nodes)

        def drained() -> bool:
            churn.check_workers()
            return not history.missing() or history.quiet_for() > QUIET

        wait_for(drained, 60, 0.1, message=churn.report)
        history.event("drained")
        churn.stop_workers(churn.consumers)
    finally:
        for w in [*churn.producers, *churn.consumers]:
            w.stop.set()
        for w in [*churn.producers, *churn.consumers]:
            w.join(30)
        # The check is over (graceful stops were checked during the churn). Stopping the
        # nodes gracefully now could find copies the drain did not wait for (a message
        # whose first copy was received), so they are killed.
        for node in nodes:
            node.kill()

    summary = churn.report()
    print(f"\n{summary}")
    details = "\n".join([summary, *churn.failed_stops])
    verdict = history.verdict()
    assert verdict.receipted >= 200, details  # the churn really carried traffic
    assert verdict.ok, details
    assert not verdict.foreign, details
    assert not churn.failed_stops, details
