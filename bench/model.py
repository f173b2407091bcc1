"""A model, not a measurement: per-node throughput at 1 to 16 cores from one bench/run (issue 29).

    python bench/model.py ~/.cache/artemis-py-bench/results/20261206-170000   # any run's reports
    (bench/run prints the same tables at its end)

From each scenario's report (``s{N}-{target}.json``: the node CPU in the window, all threads
and the main thread, and the rate): artemis-py's **serial** cost per message is its
event-loop (main) thread's CPU per message: work that one thread does, whatever the cores;
its **parallel** cost is the CPU of all its other threads per message (journal, paging,
TLS, ...). Amdahl: with ``c`` cores, throughput(c) = 1 / max(serial, (serial + parallel) / c):
the loop thread saturates one core, or all the work saturates all of them. Apache Artemis
(a JVM) spreads its work over every core (Netty event loops, executors, the journal's
threads), so all its CPU per message is taken as parallel: throughput(c) = c / cpu_per_msg.

Assumptions (why it is a model): the CPU per message measured here holds at every load and
core count (no lock contention, no cache or memory-bandwidth limits, no extra GC; in fact
a node below saturation handles fewer messages per wake-up, so scenario 3's cost, measured
at the highest sustained step rather than flat out, is above its saturated cost); the
parallel part scales perfectly; nothing else is a bound (disk fsyncs, the network, the load
generator, which here shares the same cores); Artemis has no serial part (its busiest
thread is not measured: its journal writer, one thread, is a serial part on the persistent
scenarios, so its figures are an upper bound). Cluster scenarios sum the CPU of the three
nodes: they give the whole cluster's msg/s with ``c`` cores per node, assuming the work
spreads evenly over the nodes (true of scenario 5; scenario 4 sends everything to node 1,
so its figures are optimistic). Scenario 1 (one message at a time, awaiting each receipt)
is bound by latency, not CPU: left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CORES = (1, 2, 4, 8, 16)
LATENCY_BOUND = {1}  # scenarios the model says nothing about
CLUSTER = {4: 3, 5: 3}  # scenario: nodes whose CPU is summed


@dataclass(frozen=True, slots=True)
class Costs:
    """CPU µs per message: serial (one thread's) and parallel (spread over cores)."""

    serial: float
    parallel: float
    nodes: int = 1

    def throughput(self, cores: int) -> float:
        """msg/s with ``cores`` per node (over ``nodes`` nodes sharing the load evenly)."""
        per_message_s = max(self.serial, (self.serial + self.parallel) / cores) / 1e6
        return self.nodes / per_message_s


def costs(report: dict[str, Any], metric: str, target: str, scenario: int) -> Costs | None:
    """The serial and parallel costs of one report (None: no node CPU or no messages).
    artemis-py: main thread = serial; any other target: all parallel."""
    monitored = report.get("monitored") or {}
    rate = report["rates"][metric]
    cores, loop = monitored.get("cores"), monitored.get("loop_cores")
    if cores is None or not rate:
        return None
    nodes = CLUSTER.get(scenario, 1)
    if target.startswith("artemis-py"):
        if loop is None:
            return None
        return Costs(loop / rate * 1e6, (cores - loop) / rate * 1e6, nodes)
    return Costs(0.0, cores / rate * 1e6, nodes)


def model_table(
    reports: dict[tuple[int, str], dict[str, Any] | None], metrics: dict[int, str]
) -> str:
    """The model as Markdown: per scenario and target, the costs and msg/s at each core
    count, and the ratio artemis-py / Artemis. ``metrics``: scenario -> compared rate."""
    head = ["scenario", "target", "serial µs/msg", "parallel µs/msg"]
    head += [f"{c} core{'s' * (c > 1)} msg/s" for c in CORES]
    head.append("measured msg/s (this machine)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    scenarios = sorted({n for n, _ in reports} - LATENCY_BOUND)
    for n in scenarios:
        found: dict[str, Costs] = {}
        # artemis-py first, then the peers, as in bench/run's other tables
        order = sorted(reports.items(), key=lambda item: (item[0][1] != "artemis-py", item[0]))
        for (number, target), report in order:
            if number != n or report is None or target.endswith("+scraped"):
                continue
            c = costs(report, metrics[n], target, n)
            if c is None:
                continue
            found[target] = c
            label = f"{n}" + (f" (cluster of {c.nodes}, cores per node)" if c.nodes > 1 else "")
            row = [label, target, f"{c.serial:.1f}", f"{c.parallel:.1f}"]
            row += [f"{c.throughput(k):,.0f}" for k in CORES]
            row.append(f"{report['rates'][metrics[n]]:,.0f}")
            lines.append("| " + " | ".join(row) + " |")
        ours, theirs = found.get("artemis-py"), found.get("artemis")
        if ours and theirs:
            row = [f"{n}", "**artemis-py / Artemis**", "", ""]
            row += [f"**{ours.throughput(k) / theirs.throughput(k):.2f}**" for k in CORES]
            row.append("")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


ASSUMPTIONS = (
    "Model, not measurement: throughput(c) = nodes / max(serial, (serial + parallel) / c), "
    "from the CPU per message measured in this run. artemis-py: serial = its event-loop "
    "(main) thread, parallel = its other threads; Artemis: all parallel (serial 0). Assumes "
    "CPU per message constant with load and cores (it is not quite: a node under a lighter "
    "load, as in scenario 3's sustained step, handles fewer messages per wake-up and costs more), "
    "perfect scaling of the parallel part, no "
    "disk, network or load-generator bound; clusters: load spread evenly over the nodes "
    "(optimistic for scenario 4). Scenario 1 is latency-bound: left out."
)


def load_reports(results: Path) -> dict[tuple[int, str], dict[str, Any] | None]:
    """The scenario reports of one bench/run results directory (not the per-step ones)."""
    reports: dict[tuple[int, str], dict[str, Any] | None] = {}
    for path in sorted(results.glob("s*-*.json")):
        number, _, target = path.stem.partition("-")
        if "-step" in target or not number[1:].isdigit():
            continue
        reports[(int(number[1:]), target)] = json.loads(path.read_text())
    return reports


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a bench/run results directory")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from run import SCENARIOS  # bench/run.py: each scenario's compared rate

    reports = load_reports(args.results)
    if not reports:
        parser.error(f"no s<N>-<target>.json reports in {args.results}")
    print(model_table(reports, {s.number: s.metric for s in SCENARIOS}))
    print()
    print(f"- {ASSUMPTIONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
