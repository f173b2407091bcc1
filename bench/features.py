"""Scenario 7's table (issue 30): what the consumers checked of priorities and groups.

``artemis-py perf --priorities LO-HI --groups N`` (artemis_py.perf.features) puts a
``features`` section in its report: how many groups went to more than one consumer and how
many messages arrived out of order (both errors: Artemis's message groups promise neither
happens), the groups each consumer got, and the mean end-to-end latency per priority. This
module prints one row per scenario and target that has it, beside the scenario's msg/s as a
share of scenario 2's (the same load without priorities or groups) when both ran.
"""

from __future__ import annotations

from typing import Any

PLAIN = 2  # the scenario with the same load and no message features


def _rate(report: dict[str, Any] | None) -> float | None:
    return float(report["rates"]["received"]) if report else None


def _latency(checked: dict[str, Any], which: int) -> str:
    """Mean end-to-end ms of the lowest (``which`` 0) or highest (-1) priority received."""
    by_priority = [v for v in checked["latency_by_priority"].values() if v["mean_e2e_us"]]
    if not by_priority:
        return "–"
    return f"{by_priority[which]['mean_e2e_us'] / 1000:.1f}"


def table(results: dict[tuple[int, str], dict[str, Any] | None], targets: list[str]) -> str:
    """Markdown, or "" when no report has a ``features`` section."""
    head = [
        "scenario", "target", "msg/s", "/ scenario 2 msg/s", "groups at several consumers",
        "out of order", "groups per consumer", "mean e2e ms, lowest / highest priority",
    ]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for number, target in sorted(results, key=lambda key: (key[0], targets.index(key[1]))):
        report = results[(number, target)]
        checked = (report or {}).get("features")
        if not checked:
            continue
        rate, plain = _rate(report), _rate(results.get((PLAIN, target)))
        share = f"{rate / plain:.2f}" if rate is not None and plain else "–"
        spread = checked["groups_per_consumer"].values()
        groups = f"{min(spread)}-{max(spread)}" if spread else "–"
        row = [
            str(number), target, f"{rate:,.0f}", share,
            f"**{checked['groups_on_several_consumers']}** of {checked['groups_seen']}",
            f"**{checked['out_of_order']}**", groups,
            f"{_latency(checked, 0)} / {_latency(checked, -1)}",
        ]  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""
