"""Message priorities and groups in a load test: what producers add, what consumers check.

Theory of operation
-------------------
* **Stamps.** With ``--priorities`` or ``--groups``, producer P's S-th message (S from 0,
  taken in the order its SENDs are written to its one connection) carries ``perf-seq: P:S``;
  with ``--groups N`` also ``JMSXGroupID: g<k>``, k = (P + S) mod N (round-robin, each
  producer from a group of its own), and with ``--priorities LO-HI`` ``priority: p``, p from
  a fixed pseudo-random table (``random``: the same in every process and every run) or in
  turn (``cycle``). A consumer computes k and p again from ``P:S`` (:class:`Plan`), so the
  checks never depend on how a broker echoes those headers.
* **Groups** (Artemis, "Message Grouping"): every message of a group goes to the same
  consumer, in the order it was sent. Each worker notes which consumers received each
  group; the report joins the workers' notes (consumer numbers are global), and a group
  received by two consumers is an error. Order: per consumer, producer, group and priority,
  S must increase. Priority comes first in a queue, so messages of different priorities may
  pass each other, even in one group; of one priority they may not. (Without groups the
  order check still holds per consumer: a queue hands each consumer its messages in order.)
* **Priorities** (Artemis, "Message Priority"): a measure, not a check. Whether a waiting
  message of higher priority was passed by a lower one needs the instant it reached the
  queue, which a consumer cannot see (a persistent message waits for its journal write
  first, and the messages already on their way to a consumer are not called back), so it
  is not counted. What is reported is the end-to-end latency per priority (mean, messages
  sent in the window): under a backlog a broker that honours priorities serves the high
  ones first, one that does not gives every priority the same latency.
* **Cost.** Without features producers build their headers and consumers read a message as
  before; the consumer loop pays one ``is not None`` test per message.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from artemis_py.client import Message
from artemis_py.perf.options import TIMESTAMP_HEADER, PerfOptions

__all__ = ["SEQ_HEADER", "Check", "Plan", "Stamper", "summarize"]

SEQ_HEADER: Final = "perf-seq"
"""``P:S``: producer number P's S-th message."""
GROUP_HEADER: Final = "JMSXGroupID"
PRIORITY_HEADER: Final = "priority"
_TABLE: Final = 1009
"""Length of the pseudo-random priority table (a prime: producers' strides never align)."""
_SEED: Final = 30
_STRIDE: Final = 97
_MAX_TEXTS: Final = 10


@dataclass(frozen=True, slots=True)
class Plan:
    """Which group and priority producer P's S-th message has (both sides compute it)."""

    groups: int
    priorities: tuple[int, ...]
    """One priority per table slot (``random``) or LO..HI (``cycle``); () for none."""
    order: str

    @classmethod
    def of(cls, options: PerfOptions) -> Plan:
        if options.priorities is None:
            return cls(options.groups, (), options.priority_order)
        values = range(options.priorities[0], options.priorities[1] + 1)
        if options.priority_order == "cycle":
            return cls(options.groups, tuple(values), "cycle")
        table = random.Random(_SEED).choices(values, k=_TABLE)
        return cls(options.groups, tuple(table), "random")

    def group(self, producer: int, seq: int) -> int:
        """The group index (-1 without groups)."""
        return (producer + seq) % self.groups if self.groups else -1

    def priority(self, producer: int, seq: int) -> int:
        """The priority (-1 without priorities)."""
        table = self.priorities
        if not table:
            return -1
        if self.order == "cycle":
            return table[seq % len(table)]
        return table[(producer * _STRIDE + seq) % len(table)]


class Stamper:
    """One producer's SEND headers (:meth:`headers` replaces the plain ``_headers``)."""

    __slots__ = ("base", "group_names", "plan", "prefix", "priority_names", "producer", "seq")

    def __init__(self, plan: Plan, producer: int, base: list[tuple[str, str]]) -> None:
        self.plan = plan
        self.producer = producer
        self.base = base
        self.prefix = f"{producer}:"
        self.seq = 0
        self.group_names = [f"g{k}" for k in range(plan.groups)]
        self.priority_names = [str(p) for p in range(10)]

    def headers(self, ts: int) -> list[tuple[str, str]]:
        """The next message's headers; call in the order the SENDs are written."""
        seq = self.seq
        self.seq = seq + 1
        plan = self.plan
        headers = [*self.base, (TIMESTAMP_HEADER, str(ts)), (SEQ_HEADER, f"{self.prefix}{seq}")]
        if plan.groups:
            headers.append((GROUP_HEADER, self.group_names[plan.group(self.producer, seq)]))
        if plan.priorities:
            headers.append(
                (PRIORITY_HEADER, self.priority_names[plan.priority(self.producer, seq)])
            )
        return headers


class Check:
    """One worker's consumers' view: groups per consumer, order, latency per priority."""

    def __init__(self, plan: Plan, in_window: Callable[[int], bool]) -> None:
        self.plan = plan
        self.in_window = in_window
        self.consumers_of: defaultdict[int, set[int]] = defaultdict(set)
        self.last: dict[tuple[int, int, int, int], int] = {}
        self.out_of_order = 0
        self.unstamped = 0
        self.texts: list[str] = []
        self.latency: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])
        """priority -> [messages sent in the window, their end-to-end µs summed]"""

    def observe(self, consumer: int, message: Message, now: int, ts: int) -> None:
        """Consumer number ``consumer`` received ``message`` (sent at ``ts``) at ``now``."""
        tag = message.get(SEQ_HEADER)
        if tag is None:
            self.unstamped += 1
            return
        producer_text, _, seq_text = tag.partition(":")
        producer, seq = int(producer_text), int(seq_text)
        plan = self.plan
        group = plan.group(producer, seq)
        priority = plan.priority(producer, seq)
        if group >= 0:
            self.consumers_of[group].add(consumer)
        key = (consumer, producer, group, priority)
        last = self.last.get(key, -1)
        if seq > last:
            self.last[key] = seq
        else:
            self.out_of_order += 1
            if len(self.texts) < _MAX_TEXTS:
                self.texts.append(
                    f"consumer {consumer}: producer {producer}'s message {seq} "
                    f"(group {group}, priority {priority}) after its message {last}"
                )
        if priority >= 0 and self.in_window(ts):
            entry = self.latency[priority]
            entry[0] += 1
            entry[1] += (now - ts) // 1000

    def result(self) -> dict[str, Any]:
        return {
            "consumers_of": {str(g): sorted(c) for g, c in self.consumers_of.items()},
            "out_of_order": self.out_of_order,
            "unstamped": self.unstamped,
            "texts": self.texts,
            "latency": {str(p): entry for p, entry in self.latency.items()},
        }


def summarize(options: PerfOptions, results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The workers' checks joined: the report's ``features`` section. ``errors`` counts the
    broken promises (a group at several consumers, a message out of order, one unstamped)
    and ``error_texts`` describes the first of them."""
    checks = [r["features"] for r in results if r.get("features")]
    consumers_of: defaultdict[int, set[int]] = defaultdict(set)
    latency: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])
    for check in checks:
        for group, consumers in check["consumers_of"].items():
            consumers_of[int(group)].update(consumers)
        for priority, (count, total) in check["latency"].items():
            latency[int(priority)][0] += count
            latency[int(priority)][1] += total
    split = sorted(g for g, c in consumers_of.items() if len(c) > 1)
    texts = [
        f"group g{g} went to consumers {', '.join(map(str, sorted(consumers_of[g])))}"
        for g in split[:_MAX_TEXTS]
    ]
    out_of_order = sum(c["out_of_order"] for c in checks)
    unstamped = sum(c["unstamped"] for c in checks)
    texts += [text for c in checks for text in c["texts"]][:_MAX_TEXTS]
    if unstamped:
        texts.append(f"{unstamped} message(s) without a {SEQ_HEADER} header")
    per_consumer: defaultdict[int, int] = defaultdict(int)
    for consumers in consumers_of.values():
        for consumer in consumers:
            per_consumer[consumer] += 1
    return {
        "groups": options.groups,
        "groups_seen": len(consumers_of),
        "groups_on_several_consumers": len(split),
        "groups_per_consumer": {str(c): n for c, n in sorted(per_consumer.items())},
        "out_of_order": out_of_order,
        "priorities": None if options.priorities is None else list(options.priorities),
        "priority_order": options.priority_order if options.priorities is not None else None,
        "latency_by_priority": {
            str(p): {"received": count, "mean_e2e_us": round(total / count) if count else None}
            for p, (count, total) in sorted(latency.items())
        },
        "errors": len(split) + out_of_order + unstamped,
        "error_texts": texts,
    }


def summary_lines(features: dict[str, Any]) -> list[str]:
    """The summary text's lines for the ``features`` section."""
    lines = []
    if features["groups"]:
        spread = features["groups_per_consumer"].values()
        lines.append(
            f"  groups: {features['groups_seen']} of {features['groups']} received, "
            f"{features['groups_on_several_consumers']} at several consumers; groups per "
            f"consumer {min(spread, default=0)}-{max(spread, default=0)}"
        )
    lines.append(f"  out of order: {features['out_of_order']}")
    if features["priorities"] is not None:
        low, high = features["priorities"]
        by_priority = ", ".join(
            f"{p}: {_ms(entry['mean_e2e_us'])}"
            for p, entry in features["latency_by_priority"].items()
        )
        lines.append(
            f"  priorities {low}-{high} ({features['priority_order']}), mean end-to-end "
            f"latency by priority: {by_priority or '-'}"
        )
    return lines


def _ms(us: int | None) -> str:
    return "-" if us is None else f"{us / 1000:.1f} ms"
