"""Turn a run into a report: the JSON document, the summary text, and an optional PNG plot.

The JSON document (``--json FILE``) is the reference form; the text summary and the plot
are made from it alone, so ``bench/run`` and tests read the same numbers a person sees.
Rates are messages per second inside the measurement window (warm-up and drain excluded);
latencies are in microseconds, over the messages *sent* inside the window.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any, Final

from artemis_py import __version__
from artemis_py.perf import INSTALL_EXTRA, features, histogram
from artemis_py.perf.runner import RunData

__all__ = ["PlotUnavailable", "build_report", "format_summary", "plot", "write_json"]

BUSY_CORE: Final = 0.9
"""A generator process using more than this share of one core may be the bottleneck."""


class PlotUnavailable(RuntimeError):
    """``--plot`` without matplotlib installed."""


def _nodes(results: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Messages sent to (receipted by) and received from each node."""
    node_sent: Counter[str] = Counter()
    node_received: Counter[str] = Counter()
    for r in results:
        node_sent.update(r["node_sent"])
        node_received.update(r["node_received"])
    return {
        url: {"sent": node_sent.get(url, 0), "received": node_received.get(url, 0)}
        for url in sorted(set(node_sent) | set(node_received))
    }


def _generator(data: RunData) -> dict[str, Any]:
    """The load generator's own CPU in the window: in all, per process and per message
    (per message sent in the window, or received when nothing is produced: its producers'
    and consumers' work together)."""
    results, duration = data.results, data.options.duration
    cpu = [r["cpu_seconds_window"] or 0.0 for r in results]
    key = "window_sent" if data.options.producers else "window_received"
    messages = sum(r[key] for r in results)
    return {
        "processes": len(results),
        "cpu_seconds_window": round(sum(cpu), 3),
        "cores_used": round(sum(cpu) / duration, 3),
        "busiest_process_cores": round(max(cpu, default=0.0) / duration, 3),
        "per_process_cores": [round(c / duration, 3) for c in cpu],
        "cpu_us_per_message": round(sum(cpu) / messages * 1e6, 2) if messages else None,
        "runner_cpu_seconds": round(data.runner_cpu_seconds, 3),
        "wall_seconds": round(data.wall_seconds, 3),
    }


def build_report(data: RunData) -> dict[str, Any]:
    options = data.options
    results = data.results
    duration = options.duration

    def total(key: str) -> int:
        return int(sum(r[key] for r in results))

    nodes = _nodes(results)
    connections: Counter[str] = Counter(
        str(url) for a in data.assignments for _, url in (*a.producers, *a.consumers)
    )
    sent = total("sent")
    expected = sent * options.expected_copies
    loadavg = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    # --priorities / --groups: a broken promise (a group split, a message out of order) is
    # an error of the run, so the exit status and bench/run's "(!)" show it.
    checked = features.summarize(options, results) if options.has_features else None
    broken = checked["error_texts"] if checked else []
    return {
        "tool": "artemis-py perf",
        "version": __version__,
        "options": options.to_json(),
        "receipt_mode": options.receipt_mode(),
        "machine": {"cpus": os.cpu_count(), "loadavg": loadavg},
        "totals": {
            "sent": sent,
            "receipted": total("receipted"),
            "received": total("received"),
            "expected_received": expected,
            "complete": total("received") == expected,
            "drained": data.drained,
        },
        "window": {
            "seconds": duration,
            "sent": total("window_sent"),
            "receipted": total("window_receipted"),
            "received": total("window_received"),
        },
        "rates": {
            "sent": total("window_sent") / duration,
            "receipted": total("window_receipted") / duration,
            "received": total("window_received") / duration,
        },
        "latency_us": {
            "send_to_receipt": histogram.summarize(
                histogram.merge(r["receipt_latency"] for r in results)
            ),
            "end_to_end": histogram.summarize(histogram.merge(r["e2e_latency"] for r in results)),
        },
        "nodes": nodes,
        "connections": dict(sorted(connections.items())),
        "failover": {
            "failovers": int(sum(r.get("failovers", 0) for r in results)),
            "resends": int(sum(r.get("resends", 0) for r in results)),
        },
        "errors": {
            "count": total("errors") + (checked["errors"] if checked else 0),
            "messages": [text for r in results for text in r["error_texts"]] + broken,
        },
        "features": checked,
        "warnings": [text for r in results for text in r.get("warning_texts", ())],
        "generator": _generator(data),
        "monitored": {
            "pids": list(options.monitor_pids),
            "cores": None if data.monitored_cores is None else round(data.monitored_cores, 3),
            "loop_cores": (
                None if data.monitored_loop_cores is None else round(data.monitored_loop_cores, 3)
            ),
        },
        "timeline": data.timeline,
    }


def write_json(report: dict[str, Any], path: str | os.PathLike[str]) -> None:
    Path(path).write_text(json.dumps(report, indent=2) + "\n")


def _us(value: float | int | None) -> str:
    if value is None:
        return "-"
    if value >= 10_000:
        return f"{value / 1000:,.1f} ms"
    return f"{value:,.0f} µs"


def format_summary(report: dict[str, Any]) -> str:
    options = report["options"]
    totals = report["totals"]
    rates = report["rates"]
    gen = report["generator"]
    lines = [
        f"artemis-py perf: {options['producers']} producer(s) -> {options['destination']} -> "
        f"{options['consumers']} consumer(s); {options['message_size']} B "
        f"{'persistent' if options['persistent'] else 'non-persistent'}; "
        f"receipts: {report['receipt_mode']}; ack {options['ack_mode']}; "
        f"{options['duration']:g} s measured after {options['warmup']:g} s warm-up",
        f"  sent       {rates['sent']:>12,.1f} msg/s",
        f"  receipted  {rates['receipted']:>12,.1f} msg/s",
        f"  received   {rates['received']:>12,.1f} msg/s",
        f"  totals: sent {totals['sent']:,}, received {totals['received']:,} "
        f"(expected {totals['expected_received']:,})"
        + ("" if totals["complete"] else "  ** INCOMPLETE **"),
        "  latency          p50        p90        p99      p99.9        max    count",
    ]
    for label, key in (("send->receipt", "send_to_receipt"), ("end-to-end", "end_to_end")):
        s = report["latency_us"][key]
        lines.append(
            f"  {label:<13}"
            + "".join(f"{_us(s[k]):>11}" for k in ("p50", "p90", "p99", "p99.9", "max"))
            + f" {s['count']:>8,}"
        )
    connections = report.get("connections") or {}
    for url, counts in report["nodes"].items():
        line = f"  node {url}: sent {counts['sent']:,}, received {counts['received']:,}"
        if len(connections) > 1:
            line += f" ({connections.get(url, 0)} connection(s) at the start)"
        lines.append(line)
    failover = report.get("failover") or {}
    if options.get("producer_cluster") or options.get("consumer_cluster") or any(failover.values()):
        lines.append(
            f"  failover: {failover.get('failovers', 0)} failover(s), "
            f"{failover.get('resends', 0)} send(s) resent"
        )
    if report.get("features"):
        lines.extend(features.summary_lines(report["features"]))
    errors = report["errors"]
    lines.append(f"  errors: {errors['count']}")
    lines.extend(f"    {text}" for text in errors["messages"])
    warnings = report.get("warnings") or []
    if warnings:
        lines.append(
            f"  warnings: {len(warnings)} (DISCONNECT failed after every receipt had arrived; "
            "nothing lost)"
        )
        lines.extend(f"    {text}" for text in warnings[:5])
    lines.append(
        f"  generator: {gen['processes']} process(es), {gen['cores_used']:.2f} cores in the "
        f"window (busiest process {gen['busiest_process_cores']:.2f}) of "
        f"{report['machine']['cpus']} CPUs"
        + (
            f", {gen['cpu_us_per_message']:,.1f} µs of CPU per message"
            if gen.get("cpu_us_per_message") is not None
            else ""
        )
    )
    monitored = report.get("monitored") or {}
    if monitored.get("cores") is not None:
        lines.append(
            f"  monitored processes {monitored['pids']}: {monitored['cores']:.2f} cores in "
            f"the window, {monitored.get('loop_cores') or 0:.2f} on their main threads"
        )
    if gen["busiest_process_cores"] > BUSY_CORE:
        lines.append(
            "  warning: a generator process was CPU-bound; the figures may measure the "
            "generator. Try more --processes."
        )
    return "\n".join(lines)


def check_plot_available() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotUnavailable(f"--plot needs matplotlib: {INSTALL_EXTRA}") from None


def plot(report: dict[str, Any], path: str | os.PathLike[str], *, title: str | None = None) -> None:
    """Throughput per second (left) and latency percentiles (right) as one small PNG."""
    check_plot_available()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2), dpi=80)
    timeline = report["timeline"]
    t = [e["t"] for e in timeline]
    for key in ("sent", "receipted", "received"):
        left.plot(t, [e[key] for e in timeline], label=key, linewidth=1.2)
    warmup = report["options"]["warmup"]
    if warmup:
        left.axvspan(0, warmup, color="0.9", label="warm-up")
    left.set_xlabel("s")
    left.set_ylabel("msg/s")
    left.set_ylim(bottom=0)
    left.legend(fontsize=7)
    left.set_title("throughput", fontsize=9)
    labels = ["p50", "p90", "p99", "p99.9", "max"]
    x = range(len(labels))
    width = 0.4
    for offset, key in ((-width / 2, "send_to_receipt"), (width / 2, "end_to_end")):
        s = report["latency_us"][key]
        values = [(s[k] or 0) / 1000 for k in labels]
        right.bar([i + offset for i in x], values, width, label=key.replace("_", " "))
    right.set_xticks(list(x), labels)
    right.set_yscale("log")
    right.set_ylabel("ms")
    right.legend(fontsize=7)
    right.set_title("latency", fontsize=9)
    fig.suptitle(title or report["options"]["destination"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
