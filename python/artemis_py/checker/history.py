"""The total-queue history and its verdict: lost, unexpected, duplicated.

Theory of operation
-------------------
In the style of Jepsen's total-queue checker, producers send uniquely numbered messages
(``PREFIX + number`` bodies) and consumers take them; :class:`History` records what each
side saw, and :meth:`History.verdict` judges it:

* **sent**: a SEND frame was written (whether the node got it is unknown);
  **receipted**: its RECEIPT arrived, so the node promised to keep it.
* **lost**: receipted but never received. The one promise a broker must keep: must be 0.
* **unexpected**: a received number this run never sent: must be 0. A body that does not
  start with the prefix (another run's message, someone else's) is **foreign**, counted
  apart: it says the queue was not the checker's alone, not that the broker broke a promise.
* **duplicated**: deliveries beyond the first. At-least-once delivery allows some; each is
  classified by what its consumer had done when it came again: its ACK was *confirmed* (a
  RECEIPT came; a node must never deliver it again), an ACK was *sent but not confirmed*
  (lost on the way, or the node failed before answering), or it was *never acknowledged*
  (the redelivery at-least-once allows, after a consumer's connection closed).

Received messages that were never receipted are fine (the RECEIPT was lost, not the
message). The history is shared by threads (the churn test's stomp.py clients) or tasks
(``artemis-py check``), hence the lock.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["History", "Verdict"]

LISTED = 100  # numbers listed per kind in a verdict's JSON (the counts are exact)


@dataclass
class History:
    """What the clients did; every method takes ``lock``. ``node`` is an index the caller
    chooses (the URL's, or the cluster node's)."""

    prefix: str
    start: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    attempted: dict[int, tuple[int, float]] = field(default_factory=dict)  # n -> (node, t)
    receipted: set[int] = field(default_factory=set)
    deliveries: Counter[int] = field(default_factory=Counter)
    received_from: dict[int, list[tuple[int, float]]] = field(default_factory=dict)  # (node, t)
    acked: set[int] = field(default_factory=set)  # ACK confirmed by a RECEIPT
    ack_sent: set[int] = field(default_factory=set)  # an ACK was sent (confirmed or not)
    after_ack: list[int] = field(default_factory=list)  # delivered again after a confirmed ACK
    after_sent_ack: list[int] = field(default_factory=list)  # ... after an unconfirmed one
    never_acked: list[int] = field(default_factory=list)  # ... with no ACK sent before
    foreign: int = 0  # bodies without the prefix (never kept: they are not ours)
    errors: list[str] = field(default_factory=list)  # ERROR frames and client trouble
    events: list[str] = field(default_factory=list)  # what happened around the clients
    last_delivery: float = field(default_factory=time.monotonic)
    last_receipt: float = field(default_factory=time.monotonic)

    def now(self) -> float:
        return time.monotonic() - self.start

    def body(self, n: int) -> str:
        return f"{self.prefix}{n}"

    def event(self, text: str) -> None:
        with self.lock:
            self.events.append(f"{self.now():6.1f}s {text}")

    def error(self, text: str) -> None:
        with self.lock:
            self.errors.append(f"{self.now():6.1f}s {text}")

    def attempt(self, node: int) -> int:
        """The number of a message about to be sent to ``node``."""
        with self.lock:
            n = next(self.numbers)
            self.attempted[n] = (node, self.now())
            return n

    def receipt(self, n: int) -> None:
        with self.lock:
            self.receipted.add(n)
            self.last_receipt = time.monotonic()

    def deliver(self, body: str, node: int) -> int | None:
        """Record a delivery from ``node``; its number, or None for a foreign body."""
        n: int | None = None
        if body.startswith(self.prefix):
            try:
                n = int(body[len(self.prefix) :])
            except ValueError:
                n = None
        with self.lock:
            self.last_delivery = time.monotonic()
            if n is None:
                self.foreign += 1
                return None
            if n in self.acked:
                self.after_ack.append(n)
            elif n in self.ack_sent:
                self.after_sent_ack.append(n)
            elif n in self.deliveries:
                self.never_acked.append(n)
            self.deliveries[n] += 1
            self.received_from.setdefault(n, []).append((node, self.now()))
            return n

    def sending_ack(self, n: int) -> None:
        with self.lock:
            self.ack_sent.add(n)

    def ack(self, n: int) -> None:
        with self.lock:
            self.acked.add(n)

    # -- progress --------------------------------------------------------------------------

    def progress(self) -> tuple[int, int]:
        """(receipted, acknowledged) so far."""
        with self.lock:
            return len(self.receipted), len(self.acked)

    def outstanding(self) -> int:
        with self.lock:
            return len(self.receipted) - len(self.acked)

    def quiet_for(self) -> float:
        """Seconds since the last delivery (or the start)."""
        with self.lock:
            return time.monotonic() - self.last_delivery

    def unreceipted_for(self) -> float:
        """Seconds since the last RECEIPT of a send (or the start)."""
        with self.lock:
            return time.monotonic() - self.last_receipt

    def missing(self) -> set[int]:
        with self.lock:
            return self.receipted - self.deliveries.keys()

    def verdict(self, nodes: int = 0) -> Verdict:
        """The counts now; ``nodes`` sizes the per-node lists (at least the nodes seen)."""
        with self.lock:
            received = set(self.deliveries)
            seen = [node for node, _ in self.attempted.values()]
            seen += [node for got in self.received_from.values() for node, _ in got]
            size = max([nodes, *(node + 1 for node in seen)])
            sent_to = [0] * size
            receipted_by = [0] * size
            for n, (node, _) in self.attempted.items():
                sent_to[node] += 1
                receipted_by[node] += n in self.receipted
            received_from = [0] * size
            for got in self.received_from.values():
                for node, _ in got:
                    received_from[node] += 1
            return Verdict(
                sent=len(self.attempted),
                receipted=len(self.receipted),
                received=len(received),
                received_unreceipted=len(received - self.receipted),
                lost=sorted(self.receipted - received),
                unexpected=sorted(received - self.attempted.keys()),
                foreign=self.foreign,
                deliveries=sum(self.deliveries.values()),
                after_ack=len(self.after_ack),
                after_sent_ack=len(self.after_sent_ack),
                never_acked=len(self.never_acked),
                errors=len(self.errors),
                sent_to=sent_to,
                receipted_by=receipted_by,
                received_from=received_from,
            )


@dataclass(frozen=True)
class Verdict:
    """The counts of a history (see the module doc for what each one means)."""

    sent: int
    receipted: int
    received: int  # distinct numbers
    received_unreceipted: int
    lost: list[int]
    unexpected: list[int]
    foreign: int
    deliveries: int  # every delivery of a number, duplicates included
    after_ack: int
    after_sent_ack: int
    never_acked: int
    errors: int
    sent_to: list[int]  # per node
    receipted_by: list[int]
    received_from: list[int]  # deliveries per node

    @property
    def duplicated(self) -> int:
        return self.deliveries - self.received

    @property
    def ok(self) -> bool:
        """Nothing lost, nothing unexpected, nothing delivered again after its ACK was
        confirmed (other duplicates are allowed, and reported)."""
        return not self.lost and not self.unexpected and not self.after_ack

    def summary(self) -> str:
        return (
            f"sent {self.sent} receipted {self.receipted} received {self.received} "
            f"(of them unreceipted {self.received_unreceipted}) lost {len(self.lost)} "
            f"unexpected {len(self.unexpected)} foreign {self.foreign} "
            f"duplicated {self.duplicated} (after a confirmed ACK {self.after_ack}, after an "
            f"ACK sent but not confirmed {self.after_sent_ack}, never acknowledged "
            f"{self.never_acked})"
        )

    def to_json(self) -> dict[str, Any]:
        """The verdict as docs/check.md's JSON document describes it (without the run's
        settings, which the caller adds)."""
        return {
            "ok": self.ok,
            "sent": self.sent,
            "receipted": self.receipted,
            "received": self.received,
            "received_unreceipted": self.received_unreceipted,
            "lost": len(self.lost),
            "lost_numbers": self.lost[:LISTED],
            "unexpected": len(self.unexpected),
            "unexpected_numbers": self.unexpected[:LISTED],
            "foreign": self.foreign,
            "duplicated": {
                "total": self.duplicated,
                "after_confirmed_ack": self.after_ack,
                "after_unconfirmed_ack": self.after_sent_ack,
                "never_acknowledged": self.never_acked,
            },
            "deliveries": self.deliveries,
            "client_errors": self.errors,
            "nodes": [
                {"sent": s, "receipted": r, "delivered": d}
                for s, r, d in zip(self.sent_to, self.receipted_by, self.received_from, strict=True)
            ],
        }
