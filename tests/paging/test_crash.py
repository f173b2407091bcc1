"""Crash test for paging: a node SIGKILLed at random moments while it pages and depages.

Theory of operation
-------------------
* **Shape.** One persistent node whose addresses ``paged.crash.q`` (anycast, queue Q) and
  ``paged.crash.t`` (multicast, durable subscriptions A and B) page beyond 64 KiB into
  pages of 64 KiB: with messages of 0.3-2.5 KiB, pages roll over and are deleted every few
  dozen messages. Producers ``qa`` and ``qb`` send to Q, ``t`` to the topic; three in ten
  of their steps are transactions of 2-6 messages (BEGIN, SENDs, COMMIT with a receipt),
  the others plain SENDs with receipts; both pipelined. Consumers acknowledge each message
  (client-individual) with a receipt, pipelined too. Each round picks a pace per consumer,
  off, slow or fast; B is mostly off or slow, so it holds the topic's pages while A
  completes them.
* **A round**: start the node (recovery), connect everyone, let them run, and SIGKILL the
  node once a seeded random amount of traffic has flowed; every few rounds the node is
  also killed during its own start. stomp.py hands a connection's frames to its listener in
  order and reports the disconnect last, so once every client saw its connection close the
  test knows which SENDs, COMMITs and ACKs the node confirmed before it died.
* **The model** (:class:`Stream`: one queue, one producer) knows each message as PRESENT
  (must be there), MAYBE (sent or acknowledged without a confirmation: may be there or not)
  or gone (acknowledged with a receipt, resolved absent, or in a transaction whose COMMIT
  was never sent: must never come back). A queue delivers one producer's messages in send
  order, and a round has one consumer connection per queue (no redelivery within a round),
  so what a round's consumer received from one producer must be increasing, hold nothing
  gone, and hold every PRESENT message below the highest number received; MAYBE messages
  below it resolve (received: there; not received: gone for good), a transaction's
  messages all the same way.
* Every few rounds ``artemis-py data summary`` reads the killed node's data directory: each
  queue's count must lie between its PRESENT count and PRESENT + MAYBE. Every ten rounds
  Q and A, and at the end all three, are drained after such a summary: the consumer gets
  exactly the summary's count, every PRESENT message among them, and after a clean stop
  the summary counts nothing left. The node must log no ERROR.

Failures name messages by producer and number, never by body, and carry the seed.
Knobs (environment): ``ARTEMIS_CRASH_SEED`` replays a run's random choices (the threads'
timing still varies), ``ARTEMIS_CRASH_ROUNDS`` (default 30) runs more rounds.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from dataclasses import dataclass, field

import pytest

from integration.conftest import DEFAULT_ADDRESS_SETTINGS, BrokerProcess, Client, wait_for

from .conftest import data_summary, page_files

ROUNDS = int(os.environ.get("ARTEMIS_CRASH_ROUNDS", "30"))
KILL_IN_START_EVERY = 5  # rounds; such a round also kills the node while it recovers
SUMMARY_EVERY = 3  # rounds; such a round also checks `data summary` against the model
DRAIN_EVERY = 10  # rounds; then the queue and subscription A are drained (and at the end, all)
WINDOW = 16  # receipts a producer may await at once

Q, T = "paged.crash.q", "paged.crash.t"
PRODUCERS = {"qa": f"/queue/{Q}", "qb": f"/queue/{Q}", "t": f"/topic/{T}"}
FEEDS = {"qa": ("q",), "qb": ("q",), "t": ("a", "b")}  # producer -> the queues it reaches
# queue -> (destination, client-id, SUBSCRIBE headers, name in `data summary`)
CONSUMERS = {
    "q": (f"/queue/{Q}", None, {}, Q),
    "a": (f"/topic/{T}", "crash-a", {"durable-subscription-name": "sub"}, "crash-a.sub"),
    "b": (f"/topic/{T}", "crash-b", {"durable-subscription-name": "sub"}, "crash-b.sub"),
}
# queue -> weights of its consumer's pace per round: off, slow, fast
PACES = {"q": (2, 2, 6), "a": (1, 2, 7), "b": (5, 3, 2)}

CRASH_SETTINGS = """
      <address-setting match="paged.crash.#">
        <max-size-bytes>64KiB</max-size-bytes>
        <page-size-bytes>64KiB</page-size-bytes>
        <max-read-page-messages>40</max-read-page-messages>
        <address-full-policy>PAGE</address-full-policy>
      </address-setting>
"""
CRASH_ADDRESSES = f"""
      <address name="{Q}"><anycast><queue name="{Q}"/></anycast></address>
      <address name="{T}"><multicast/></address>
"""

PRESENT, MAYBE = "present", "maybe"
Key = tuple[str, int]  # (producer, number)


def key_of(frame) -> Key:
    producer, _, number = frame.headers["x-id"].partition(":")
    return producer, int(number)


# -- clients -------------------------------------------------------------------------------


class Producer(threading.Thread):
    """Numbered persistent SENDs, plain or in transactions, until the node dies."""

    def __init__(self, name: str, port: int, first: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.label = name
        self.destination = PRODUCERS[name]
        self.client = Client(port)
        self.rng = random.Random(seed)
        self.next = first
        self.plain: dict[str, int] = {}  # receipt -> number
        self.commits: dict[str, list[int]] = {}  # receipt -> the transaction's numbers
        self.tx_members: list[int] = []  # every number sent in a transaction
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if self._wait_for_window():
                    return
                if self.rng.random() < 0.3:
                    self._transaction(self.rng.randint(2, 6))
                else:
                    self._send(None)
        except Exception:  # the node was killed under us: expected
            pass

    def _wait_for_window(self) -> bool:
        listener = self.client.listener
        while len(self.plain) + len(self.commits) - len(listener.receipts) >= WINDOW:
            if listener.disconnected.wait(0.001):
                return True
        return False

    def _send(self, tx: str | None) -> int:
        n = self.next
        self.next += 1
        headers = {"persistent": "true", "x-id": f"{self.label}:{n}"}
        if tx is None:
            headers["receipt"] = f"s-{n}"
            self.plain[headers["receipt"]] = n  # before the call: the frame may get out
        else:
            headers["transaction"] = tx
            self.tx_members.append(n)
        body = "x" * self.rng.randint(300, 2500)
        self.client.conn.send(self.destination, body, headers=headers)
        return n

    def _transaction(self, size: int) -> None:
        tx = f"tx-{self.next}"
        self.client.conn.begin(tx)
        members = [self._send(tx) for _ in range(size)]
        receipt = f"c-{members[0]}"
        self.commits[receipt] = members  # before the call: the COMMIT may get out
        self.client.conn.commit(tx, headers={"receipt": receipt})

    def outcome(self) -> tuple[list[int], list[int], list[int], dict[int, int]]:
        """(confirmed, unconfirmed, never committed, number -> its transaction)."""
        receipts = set(self.client.receipts)
        tx_of = {n: members[0] for members in self.commits.values() for n in members}
        sent = sorted([*self.plain.values(), *tx_of])
        confirmed = {n for r, n in self.plain.items() if r in receipts}
        confirmed |= {n for r, ms in self.commits.items() if r in receipts for n in ms}
        unconfirmed = [n for n in sent if n not in confirmed]
        never = [n for n in self.tx_members if n not in tx_of]
        return sorted(confirmed), unconfirmed, never, tx_of


class Consumer(threading.Thread):
    """Acknowledges every message with a receipt (pipelined), at a pace, until the node dies."""

    def __init__(self, port: int, queue: str, pace: float | None) -> None:
        super().__init__(daemon=True)
        destination, client_id, headers, _ = CONSUMERS[queue]
        self.client = Client(port, client_id=client_id)
        self.client.subscribe(
            destination, ack="client-individual", **{"consumer-window-size": "-1"}, **headers
        )
        self.pace = pace
        self.acks: dict[str, Key] = {}  # receipt -> message
        self.stop = threading.Event()

    def run(self) -> None:
        listener = self.client.listener
        taken = 0
        try:
            while not self.stop.is_set():
                with listener.lock:
                    new = listener.messages[taken:]
                if not new:
                    if listener.disconnected.wait(0.002):
                        return
                    continue
                for frame in new:
                    taken += 1
                    # A slow consumer: the pace is the workload, not a wait for something.
                    if self.pace and self.stop.wait(self.pace):
                        return
                    receipt = self.client.next_receipt()
                    self.acks[receipt] = key_of(frame)  # before the call: the ACK may get out
                    self.client.conn.ack(frame.headers["ack"], receipt=receipt)
        except Exception:  # the node was killed under us: expected
            pass

    def received(self) -> list[Key]:
        return [key_of(m) for m in self.client.messages]

    def acknowledged(self) -> tuple[set[Key], set[Key]]:
        """(ACKs the node confirmed, ACKs sent without a confirmation)."""
        receipts = set(self.client.receipts)
        confirmed = {k for r, k in self.acks.items() if r in receipts}
        return confirmed, set(self.acks.values()) - confirmed


# -- the model -------------------------------------------------------------------------------


@dataclass
class Stream:
    """What one queue must, may and must not hold of one producer's messages."""

    queue: str
    producer: str
    live: dict[int, str] = field(default_factory=dict)  # number -> PRESENT | MAYBE
    acked: set[int] = field(default_factory=set)  # acknowledged with a receipt
    absent: set[int] = field(default_factory=set)  # MAYBE, then seen to be gone
    never: set[int] = field(default_factory=set)  # its transaction's COMMIT was never sent
    ack_unsure: set[int] = field(default_factory=set)  # MAYBE because of an unconfirmed ACK
    tx_of: dict[int, int] = field(default_factory=dict)

    def name(self, n: int) -> str:
        return f"{self.producer}:{n} on {self.queue}"

    def sent(self, confirmed, unconfirmed, never, tx_of) -> None:
        for n in confirmed:
            self.live[n] = PRESENT
        for n in unconfirmed:
            self.live[n] = MAYBE
        self.never.update(never)
        self.tx_of.update(tx_of)

    def received(self, got: list[int], before: dict[int, str], final: bool) -> list[str]:
        """Check what a consumer received in a round (``before``: ``live`` at its start);
        resolve the MAYBE messages it decides. ``final``: it received everything."""
        problems = []
        for a, b in itertools.pairwise(got):
            if b <= a:
                again = "twice" if a == b else f"after {self.name(a)}"
                problems.append(f"{self.name(b)} delivered {again}")
        for n in got:
            if n in self.never:
                problems.append(f"{self.name(n)} delivered: its transaction was not committed")
            elif n in self.acked:
                problems.append(f"{self.name(n)} came back: its ACK was receipted")
            elif n in self.absent:
                problems.append(f"{self.name(n)} came back after later ones came without it")
            elif n not in self.live:
                problems.append(f"{self.name(n)} delivered: nobody sent it")
        if not got and not final:
            return problems
        top = float("inf") if final else max(got)
        seen = set(got)
        below = [n for n in self.live if n < top]
        lost = [n for n in below if self.live[n] == PRESENT and n not in seen]
        if lost:
            problems.append(
                f"{len(lost)} receipted message(s) lost: {[self.name(n) for n in lost[:8]]}"
            )
        groups: dict[int, set[bool]] = {}
        for n in below:
            if n in self.tx_of and n not in self.ack_unsure:  # an ACK may have removed it
                groups.setdefault(self.tx_of[n], set()).add(n in seen)
        partial = sorted(tx for tx, there in groups.items() if len(there) > 1)
        if partial:
            detail = {
                tx: [(n, self.live[n], n in seen) for n in below if self.tx_of.get(n) == tx]
                for tx in partial[:3]
            }
            problems.append(f"transaction(s) of {self.producer} recovered in part: {detail}")
        for n in below:
            if n not in seen and self.live[n] == MAYBE:
                del self.live[n]
                self.ack_unsure.discard(n)
                self.absent.add(n)
        for n in seen:
            self.ack_unsure.discard(n)
            if n in before:  # recovered from disk: stays until acknowledged
                self.live[n] = PRESENT
        return problems

    def acknowledged(self, confirmed: set[int], unconfirmed: set[int]) -> None:
        for n in confirmed:
            self.live.pop(n, None)
            self.ack_unsure.discard(n)
            self.acked.add(n)
        for n in unconfirmed - confirmed:
            if n in self.live:
                self.live[n] = MAYBE
                self.ack_unsure.add(n)

    def counts(self) -> tuple[int, int]:
        present = sum(1 for s in self.live.values() if s == PRESENT)
        return present, len(self.live) - present


class Model:
    def __init__(self) -> None:
        self.streams = {(q, p): Stream(q, p) for p, queues in FEEDS.items() for q in queues}
        self.next = dict.fromkeys(PRODUCERS, 0)

    def apply(
        self,
        producers: dict[str, Producer],
        consumers: dict[str, Consumer],
        *,
        final: bool = False,
    ) -> list[str]:
        before = {k: dict(s.live) for k, s in self.streams.items()}
        for name, producer in producers.items():
            self.next[name] = producer.next
            outcome = producer.outcome()
            for q in FEEDS[name]:
                self.streams[(q, name)].sent(*outcome)
        problems = []
        for q, consumer in consumers.items():
            got: dict[str, list[int]] = {p: [] for p, queues in FEEDS.items() if q in queues}
            for p, n in consumer.received():
                got.setdefault(p, []).append(n)
            for p, numbers in got.items():
                stream = self.streams.get((q, p))
                if stream is None:
                    problems.append(f"{q} received messages of {p}, which does not feed it")
                    continue
                problems += stream.received(numbers, before[(q, p)], final)
            confirmed, unconfirmed = consumer.acknowledged()
            for p in got:
                if (q, p) in self.streams:
                    self.streams[(q, p)].acknowledged(
                        {n for pp, n in confirmed if pp == p},
                        {n for pp, n in unconfirmed if pp == p},
                    )
        return problems

    def counts(self, queue: str) -> tuple[int, int]:
        present = maybe = 0
        for (q, _), stream in self.streams.items():
            if q == queue:
                p, m = stream.counts()
                present, maybe = present + p, maybe + m
        return present, maybe


# -- the test --------------------------------------------------------------------------------


@dataclass
class Run:
    """One test run: the node, the model, the seeded choices and what was observed."""

    node: BrokerProcess
    seed: int
    rng: random.Random = field(init=False)
    model: Model = field(default_factory=Model)
    max_pages: int = 0  # the most page files seen at once
    pages_deleted: bool = False  # a store's first page was gone at some point
    summaries: int = 0
    start_time: float = 0.0  # of the last start, up to listening
    log_seen: int = 0  # characters of the node's log already checked for errors

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def fail(self, round_no: int, problems: list[str]) -> None:
        if problems:
            pytest.fail(
                f"round {round_no} (ARTEMIS_CRASH_SEED={self.seed}): "
                + "; ".join(problems[:12])
                + (f"; and {len(problems) - 12} more" if len(problems) > 12 else "")
            )

    def pace(self, queue: str) -> float | None:
        choice = self.rng.choices(("off", "slow", "fast"), weights=PACES[queue])[0]
        return {"off": None, "slow": self.rng.uniform(0.005, 0.03), "fast": 0.0}[choice]

    def round(self, round_no: int) -> None:
        node = self.node
        started = time.monotonic()
        node.start()
        self.start_time = time.monotonic() - started
        producers = {
            p: Producer(p, node.port, self.model.next[p], self.rng.getrandbits(32))
            for p in PRODUCERS
        }
        paces = {q: self.pace(q) for q in CONSUMERS}
        consumers = {
            q: Consumer(node.port, q, pace) for q, pace in paces.items() if pace is not None
        }
        clients = [*producers.values(), *consumers.values()]
        target = self.rng.randint(40, 500)

        def progress() -> int:
            sends = sum(len(p.client.listener.receipts) for p in producers.values())
            return sends + sum(len(c.client.listener.messages) for c in consumers.values())

        for thread in clients:
            thread.start()
        wait_for(lambda: progress() >= target, 60, message=f"{target} receipts and deliveries")
        node.kill()
        for thread in clients:
            wait_for(
                thread.client.listener.disconnected.is_set, 10, message="clients to see the kill"
            )
            thread.stop.set()
            thread.join(10)
            thread.client.close()
        self.fail(round_no, self.model.apply(producers, consumers) + self.errors_logged())
        if round_no % KILL_IN_START_EVERY == KILL_IN_START_EVERY - 1:
            self.kill_while_starting()
        self.observe_pages()
        if round_no % SUMMARY_EVERY == SUMMARY_EVERY - 1:
            self.fail(round_no, self.check_summary())

    def errors_logged(self) -> list[str]:
        """The ERROR lines the node logged since the last look (a page it cannot read, a
        record it cannot write: the node carries on, so only its log tells)."""
        text = self.node.log()
        lines = [line for line in text[self.log_seen :].splitlines() if " ERROR " in line]
        self.log_seen = len(text)
        return [f"the node logged: {line[:300]}" for line in lines[:3]]

    def kill_while_starting(self) -> None:
        """SIGKILL during start-up, late in it, where recovery writes too (it removes stale
        records and cuts torn tails): at a random fraction of how long the last start took."""
        node = self.node
        delay = self.rng.uniform(0.6, 1.05) * self.start_time
        node.start(wait=False)
        time.sleep(delay)  # the kill moment is the random input here, not a wait for something
        node.kill()

    def observe_pages(self) -> None:
        files = page_files(self.node)
        self.max_pages = max(self.max_pages, len(files))
        by_store: dict[str, list[int]] = {}
        for path in files:
            by_store.setdefault(path.parent.name, []).append(int(path.stem))
        if any(min(pages) > 1 for pages in by_store.values()):
            self.pages_deleted = True

    def check_summary(self) -> list[str]:
        self.summaries += 1
        totals = data_summary(self.node)
        problems = []
        for q, (*_, name) in CONSUMERS.items():
            present, maybe = self.model.counts(q)
            total = totals.get(name, 0)
            if not present <= total <= present + maybe:
                problems.append(
                    f"data summary counts {total} on {name}; the model: {present} there "
                    f"and {maybe} that may be"
                )
        return problems

    def drain(self, round_no: int, queues: tuple[str, ...]) -> None:
        """Restart the killed node and consume everything in ``queues``: exactly what
        ``data summary`` counted before the start, every message the model says is there;
        after a clean stop, the summary counts nothing left in them."""
        node = self.node
        totals = {q: data_summary(node).get(CONSUMERS[q][3], 0) for q in queues}
        self.summaries += 1
        node.start()
        consumers = {q: Consumer(node.port, q, 0.0) for q in queues}
        for c in consumers.values():
            c.start()
        for q, c in consumers.items():
            wait_for(
                lambda c=c, q=q: len(c.client.listener.messages) >= totals[q],
                120,
                message=lambda c=c, q=q: (
                    f"{q}: the {totals[q]} messages data summary counted (the model: "
                    f"{self.model.counts(q)} there and may be), got {len(c.client.messages)} "
                    f"(ARTEMIS_CRASH_SEED={self.seed}); {self.errors_logged()}"
                ),
            )
        for c in consumers.values():

            def all_acked(c: Consumer = c) -> bool:
                receipts = set(c.client.receipts)
                return len(c.acks) == len(c.client.messages) and receipts.issuperset(c.acks)

            wait_for(all_acked, 30, message="the drain's ACKs to be receipted")
            c.stop.set()
            c.join(10)
            c.client.sync()  # the consumer's thread is done: nothing else sends on its connection
        wrong = [
            f"{q}: got {len(c.client.messages)}, data summary counted {totals[q]}"
            for q, c in consumers.items()
            if len(c.client.messages) != totals[q]
        ]
        problems = self.model.apply({}, consumers, final=True)
        self.fail(round_no, wrong + problems + self.errors_logged())
        for c in consumers.values():
            c.client.close()
        node.stop()
        self.observe_pages()
        after = data_summary(node)
        left = {q: after.get(CONSUMERS[q][3], 0) for q in queues}
        self.fail(round_no, [f"left after the drain: {left}"] if any(left.values()) else [])


# "with-large": messages of 2,000 bytes or more (about a quarter) are large messages, kept
# in files of their own and paged by reference. Thirty rounds of kills and restarts: 105 and
# 120 s measured on a 2-core machine busy with other test runs (the default limit is 120 s).
@pytest.mark.timeout(300)
@pytest.mark.parametrize("large", [False, True], ids=["small", "with-large"])
def test_paging_survives_sigkill_at_random_moments(make_broker, clients, large):
    seed = int(os.environ.get("ARTEMIS_CRASH_SEED", random.randrange(2**32)))
    node = make_broker(
        persistence=True,
        address_settings=DEFAULT_ADDRESS_SETTINGS + CRASH_SETTINGS,
        addresses=CRASH_ADDRESSES,
        acceptor_params=";stompMinLargeMessageSize=2000" if large else "",
    )
    for destination, client_id, headers, _ in CONSUMERS.values():
        if client_id is not None:  # create the durable subscriptions
            c = clients(node, client_id=client_id)
            c.subscribe(destination, **headers)
            c.disconnect()
    node.kill()
    print(f"ARTEMIS_CRASH_SEED={seed}")  # shown with a failure, to replay the run
    run = Run(node, seed)
    started = time.monotonic()
    for round_no in range(ROUNDS):
        run.round(round_no)
        if round_no % DRAIN_EVERY == DRAIN_EVERY - 1 and round_no < ROUNDS - 1:
            run.drain(round_no, ("q", "a"))  # B keeps its backlog
    run.drain(ROUNDS, tuple(CONSUMERS))
    log = node.log()
    assert f"address {Q} is full" in log, "both must page"
    assert f"address {T} is full" in log, "both must page"
    assert run.pages_deleted, "completed pages must have been deleted along the way"
    files = list((node.data_dir / "largemessages").glob("*"))
    assert not files, f"{len(files)} large-message file(s) left after everything was acked"
    print(
        f"seed {seed}: {ROUNDS} rounds in {time.monotonic() - started:.1f}s, "
        f"{sum(run.model.next.values())} messages sent, up to {run.max_pages} page files, "
        f"{run.summaries} summaries"
    )
