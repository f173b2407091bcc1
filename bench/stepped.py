"""Scenario 3 made comparable (issue 29): the highest rate a broker sustains with bounded latency.

Flat out, scenario 3 (non-persistent, pipelined, no receipts) measures whoever falls behind
first: Apache Artemis's STOMP consumers lag behind its producers and the ratio of the
received rates means nothing. So ``bench/run`` measures it in steps: ``artemis-py perf
--rate R`` (producers rate-limited; latency counted from each message's *scheduled* time, so
a broker that holds producers back shows it as latency), one short run per step, each on a
queue of its own, the rate multiplied by ``--step-factor`` after every step that passes, until
one fails; then ``--step-refine`` more steps bisect (geometrically) between the last rate
that passed and the first that failed. A step passes when:

* end-to-end p99 (send to receive) is at most ``--p99-bound`` ms;
* the consumers received at least (1 - ``--step-tolerance``) x R msg/s in the window, and the
  producers sent as much (a broker that throttles them does not pass);
* no errors, and every message sent was received.

The sustained rate of a target is the highest R that passed; its step's report stands for
the scenario in bench/run's tables. This module is the search and its table; bench/run.py
runs the steps.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Report = dict[str, Any]
RunStep = Callable[[int, float], Report]
"""``run_step(step_number, rate)``: one perf run at ``rate`` msg/s; its JSON report."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scenario 3, stepped rate (bench/stepped.py)")
    group.add_argument(
        "--scenario3",
        choices=("stepped", "flat"),
        default="stepped",
        help="stepped (default): the highest rate sustained with p99 <= --p99-bound; "
        "flat: as fast as the producers go (the old measure; --metrics always runs flat)",
    )
    group.add_argument("--step-start", type=float, default=2000.0, metavar="MSG/S")
    group.add_argument("--step-factor", type=float, default=1.5, help="rate x this per step")
    group.add_argument(
        "--step-refine", type=int, default=2, help="bisecting steps after the first failure"
    )
    group.add_argument("--step-max", type=int, default=14, help="at most this many steps")
    group.add_argument("--step-duration", type=float, default=5.0, metavar="SECONDS")
    group.add_argument("--step-warmup", type=float, default=2.0, metavar="SECONDS")
    group.add_argument("--p99-bound", type=float, default=100.0, metavar="MS")
    group.add_argument(
        "--step-tolerance",
        type=float,
        default=0.05,
        help="a step fails when fewer than (1 - this) x the offered rate are sent or received",
    )


@dataclass(frozen=True, slots=True)
class Step:
    number: int
    offered: float
    sent: float
    received: float
    p50_ms: float | None
    p99_ms: float | None
    generator_cores: float
    generator_busiest: float  # cores of its busiest process
    node_cores: float | None
    failure: str | None  # None: passed

    def as_json(self) -> dict[str, Any]:
        return {
            "step": self.number, "offered": self.offered, "sent": self.sent,
            "received": self.received, "p50_ms": self.p50_ms, "p99_ms": self.p99_ms,
            "generator_cores": self.generator_cores,
            "generator_busiest_process_cores": self.generator_busiest,
            "node_cores": self.node_cores,
            "passed": self.failure is None, "failure": self.failure,
        }  # fmt: skip


def judge(number: int, offered: float, report: Report, bound_ms: float, tolerance: float) -> Step:
    """One step's figures and why it failed (None: it passed)."""
    rates, totals = report["rates"], report["totals"]
    e2e = report["latency_us"]["end_to_end"]
    p50 = None if e2e["p50"] is None else e2e["p50"] / 1000
    p99 = None if e2e["p99"] is None else e2e["p99"] / 1000
    floor = offered * (1 - tolerance)
    if report["errors"]["count"]:
        failure = f"{report['errors']['count']} error(s)"
    elif not totals["complete"]:
        failure = f"lost: received {totals['received']:,} of {totals['expected_received']:,}"
    elif rates["sent"] < floor:
        failure = f"producers held back: sent {rates['sent']:,.0f}/s"
    elif rates["received"] < floor:
        failure = f"consumers behind: received {rates['received']:,.0f}/s"
    elif p99 is None:
        failure = "no latency recorded"
    elif p99 > bound_ms:
        failure = f"p99 {p99:,.1f} ms > {bound_ms:g} ms"
    else:
        failure = None
    node = (report.get("monitored") or {}).get("cores")
    return Step(
        number, offered, rates["sent"], rates["received"], p50, p99,
        report["generator"]["cores_used"], report["generator"].get("busiest_process_cores", 0.0),
        node, failure,
    )  # fmt: skip


def search(
    run_step: RunStep,
    *,
    start: float,
    factor: float,
    refine: int,
    max_steps: int,
    bound_ms: float,
    tolerance: float,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[list[Step], Report | None]:
    """Step the rate up from ``start`` until a step fails, then bisect ``refine`` times.
    Returns every step and the report of the highest passing one (None: none passed)."""
    if start <= 0 or factor <= 1 or max_steps < 1 or refine < 0:
        raise ValueError("--step-start > 0, --step-factor > 1, --step-max >= 1, --step-refine >= 0")
    steps: list[Step] = []
    best: tuple[float, Report] | None = None
    failed_at: float | None = None
    rate = start
    refining = 0
    while len(steps) < max_steps:
        report = run_step(len(steps) + 1, rate)
        step = judge(len(steps) + 1, rate, report, bound_ms, tolerance)
        steps.append(step)
        log(f"step {step.number}: {rate:,.0f} msg/s: {step.failure or 'passed'}")
        if step.failure is None:
            if best is None or rate > best[0]:
                best = (rate, report)
        else:
            failed_at = rate if failed_at is None else min(failed_at, rate)
        if failed_at is None:
            rate *= factor
            continue
        if best is None or refining >= refine:
            break
        refining += 1
        rate = (best[0] * failed_at) ** 0.5  # geometric midpoint
    return steps, None if best is None else best[1]


def steps_table(stepped: dict[str, dict[str, Any]]) -> str:
    """Every step of every target: {target: {"steps": [...], "bound_ms": B}} as Markdown."""
    head = ["target", "step", "offered msg/s", "sent msg/s", "received msg/s",
            "end-to-end p50 / p99 ms", "generator / node cores", "verdict"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for target, info in stepped.items():
        for s in sorted(info["steps"], key=lambda s: s["offered"]):
            latency = "–" if s["p99_ms"] is None else f"{s['p50_ms']:.2f} / {s['p99_ms']:.1f}"
            node = "?" if s["node_cores"] is None else f"{s['node_cores']:.2f}"
            row = [
                target, str(s["step"]), f"{s['offered']:,.0f}", f"{s['sent']:,.0f}",
                f"{s['received']:,.0f}", latency, f"{s['generator_cores']:.2f} / {node}",
                ("pass" if s["passed"] else s["failure"]) + busy(s),
            ]  # fmt: skip
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


BUSY_CORE = 0.9
"""A generator process above this share of a core may be what limits the step (perf's own
warning threshold)."""


def busy(step: dict[str, Any]) -> str:
    cores = step.get("generator_busiest_process_cores") or 0.0
    return f" (generator busy: {cores:.2f} of a core in one process)" if cores > BUSY_CORE else ""


def summary(stepped: dict[str, dict[str, Any]]) -> list[str]:
    """One line per target: its sustained rate; and artemis-py / each peer."""
    lines = []
    sustained = {t: info["sustained"] for t, info in stepped.items()}
    for target, rate in sustained.items():
        bound = stepped[target]["bound_ms"]
        if rate is None:
            first = min(s["offered"] for s in stepped[target]["steps"])
            lines.append(
                f"{target}: no step passed (p99 <= {bound:g} ms) even at {first:,.0f} msg/s"
            )
        else:
            lines.append(f"{target}: sustained {rate:,.0f} msg/s with p99 <= {bound:g} ms")
    ours = sustained.get("artemis-py")
    for target, rate in sustained.items():
        if target != "artemis-py" and ours and rate:
            lines.append(f"artemis-py / {target} (sustained rates): **{ours / rate:.2f}**")
    return lines
