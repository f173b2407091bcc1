"""Paired benchmark: this tree's artemis-py against a baseline checkout, same machine, same run.

    python bench/paired.py --baseline ../old-checkout --rounds 3 --scenarios 1,2,3,4,5

A structural change must not slow the node, and a shared machine's drift is larger than the
differences that matter. So the two trees run ``bench/run --targets artemis-py`` in
alternating order (old, new, then new, old, ...), each with its own virtual environment
(``BASELINE/.venv``, made by ``pip install -e .`` there), and each round gives one ratio per
scenario; the table gives the median ratio and the range:

- msg/s: new / old (>= 1 is no slower);
- node µs/msg and loop µs/msg (the node's CPU per message, all threads and its event-loop
  thread alone, the serial cost): new / old (<= 1 is no costlier).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import SCENARIOS  # noqa: E402  (bench/run.py: each scenario's compared rate)

METRIC = {s.number: s.metric for s in SCENARIOS}


def tree_env(python: str) -> dict[str, str]:
    """The environment a tree's run gets: its own venv first on PATH. ``bench/run`` starts
    ``artemis-py`` (the nodes and the load generator) from PATH, so with another venv
    activated the old tree's run would start the new tree's code and measure it twice."""
    venv_bin = Path(python).parent
    env = dict(os.environ, PATH=f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    env["VIRTUAL_ENV"] = str(venv_bin.parent)
    return env


def run_tree(tree: Path, python: str, results: Path, args: argparse.Namespace) -> None:
    command = [
        python, str(tree / "bench" / "run.py"), "--targets", "artemis-py",
        "--scenarios", args.scenarios, "--duration", str(args.duration),
        "--warmup", str(args.warmup), "--results", str(results),
    ]  # fmt: skip
    if (tree / "bench" / "stepped.py").exists():  # a bench/run with --scenario3
        # Scenario 3 flat out, as before the stepped rate: a ratio new / old needs the
        # saturated rate and its CPU per message, not a rate rounded to the steps.
        command += ["--scenario3", "flat"]
    print(f"[paired] {tree}: {' '.join(command[2:])}", file=sys.stderr, flush=True)
    env = tree_env(python)
    print(f"[paired] {tree}: artemis-py is {shutil.which('artemis-py', path=env['PATH'])}",
          file=sys.stderr, flush=True)  # fmt: skip
    subprocess.run(command, check=True, cwd=tree, stdout=subprocess.DEVNULL, env=env)


def figures(results: Path, scenario: int) -> dict[str, float] | None:
    """msg/s and node / loop µs per message of one scenario's report (None: missing)."""
    path = results / f"s{scenario}-artemis-py.json"
    if not path.exists():
        return None
    report: dict[str, Any] = json.loads(path.read_text())
    rate = report["rates"][METRIC[scenario]]
    monitored = report.get("monitored") or {}
    out = {"msg/s": rate}
    for key, name in (("cores", "node µs/msg"), ("loop_cores", "loop µs/msg")):
        if monitored.get(key) is not None and rate:
            out[name] = monitored[key] / rate * 1e6
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the old checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default="1,2,3,4,5")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--results", type=Path, default=Path("/tmp/artemis-py-paired"))
    args = parser.parse_args()
    trees = {
        "old": (args.baseline.resolve(), str(args.baseline.resolve() / ".venv" / "bin" / "python")),
        "new": (HERE.parent, sys.executable),
    }
    scenarios = [int(n) for n in args.scenarios.split(",")]
    rounds: list[dict[str, dict[int, dict[str, float] | None]]] = []
    for i in range(args.rounds):
        order = ("old", "new") if i % 2 == 0 else ("new", "old")
        seen: dict[str, dict[int, dict[str, float] | None]] = {}
        for name in order:
            tree, python = trees[name]
            results = args.results / f"round{i}-{name}"
            run_tree(tree, python, results, args)
            seen[name] = {s: figures(results, s) for s in scenarios}
        rounds.append(seen)
    print(table(rounds, scenarios))
    return 0


def table(rounds: list[dict[str, dict[int, dict[str, float] | None]]], scenarios: list[int]) -> str:
    head = ["scenario", "msg/s new/old", "node µs/msg new/old", "loop µs/msg new/old",
            "new msg/s", "new node / loop µs/msg", "old node / loop µs/msg"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scenarios:
        pairs = [(r["new"][s], r["old"][s]) for r in rounds if r["new"][s] and r["old"][s]]
        row = [str(s)]
        for key in ("msg/s", "node µs/msg", "loop µs/msg"):
            ratios = [n[key] / o[key] for n, o in pairs if n and o and key in n and key in o]
            row.append(
                f"**{statistics.median(ratios):.3f}** ({min(ratios):.2f}–{max(ratios):.2f})"
                if ratios
                else "–"
            )
        for name in ("new", "old"):
            runs = [r[name][s] for r in rounds if r[name][s]]
            if name == "new":
                row.append(f"{statistics.median(f['msg/s'] for f in runs):,.0f}" if runs else "–")
            costs = [
                f"{statistics.median(f[k] for f in runs if k in f):.0f}"
                if any(k in f for f in runs)
                else "?"
                for k in ("node µs/msg", "loop µs/msg")
            ]
            row.append(" / ".join(costs))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
