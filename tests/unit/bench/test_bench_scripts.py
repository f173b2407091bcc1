"""bench/stepped.py (scenario 3 at a stepped rate) and bench/model.py (the Amdahl model):
their pure parts, on made-up perf reports (issue 29's measures)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


stepped = load("stepped")
model = load("model")


def report(sent, received, p99_ms, *, errors=0, complete=True, cores=0.5, loop=0.4):
    return {
        "rates": {"sent": sent, "receipted": 0.0, "received": received},
        "totals": {
            "complete": complete,
            "received": 10,
            "expected_received": 10 if complete else 12,
        },
        "latency_us": {
            "end_to_end": {"count": 1, "p50": p99_ms * 100, "p99": p99_ms * 1000},
            "send_to_receipt": {"count": 0},
        },
        "errors": {"count": errors},
        "generator": {"cores_used": 0.3, "busiest_process_cores": 0.95 if p99_ms > 100 else 0.2},
        "monitored": {"cores": cores, "loop_cores": loop},
    }


@pytest.mark.parametrize(
    ("figures", "failure"),
    [
        ((1000, 1000, 50), None),
        ((1000, 960, 50), None),  # within the 5% tolerance
        ((1000, 900, 50), "consumers behind: received 900/s"),
        ((800, 800, 50), "producers held back: sent 800/s"),
        ((1000, 1000, 150), "p99 150.0 ms > 100 ms"),
    ],
)
def test_a_step_passes_only_at_the_offered_rate_within_the_bound(figures, failure):
    step = stepped.judge(1, 1000, report(*figures), 100, 0.05)
    assert step.failure == failure
    assert step.as_json()["passed"] is (failure is None)
    row = stepped.steps_table({"t": {"steps": [step.as_json()]}}).splitlines()[-1]
    assert row.endswith(" (generator busy: 0.95 of a core in one process) |") is (figures[2] > 100)


def test_errors_and_losses_fail_a_step():
    assert stepped.judge(1, 10, report(10, 10, 1, errors=2), 100, 0.05).failure == "2 error(s)"
    lost = stepped.judge(1, 10, report(10, 10, 1, complete=False), 100, 0.05).failure
    assert lost == "lost: received 10 of 12"


def test_search_steps_up_then_bisects_below_the_first_failure():
    capacity = 5000  # this broker keeps up to 5000 msg/s
    offered = []

    def run_step(number, rate):
        offered.append(rate)
        return report(rate, min(rate, capacity), 10)

    steps, best = stepped.search(
        run_step, start=1000, factor=2, refine=2, max_steps=20, bound_ms=100, tolerance=0.05
    )
    # 1000, 2000, 4000 pass; 8000 fails; then sqrt(4000 * 8000) = 5657 fails (received
    # 5000 < 95%), sqrt(4000 * 5657) = 4757 passes.
    assert [round(r) for r in offered] == [1000, 2000, 4000, 8000, 5657, 4757]
    assert [s.failure is None for s in steps] == [True, True, True, False, False, True]
    assert best["rates"]["sent"] == pytest.approx(4757, abs=1)
    info = stepped.summary(
        {"artemis-py": {"bound_ms": 100, "sustained": 4757.0, "steps": []},
         "artemis": {"bound_ms": 100, "sustained": 2000.0, "steps": []}}
    )  # fmt: skip
    assert "artemis-py / artemis (sustained rates): **2.38**" in info


def test_search_that_fails_at_once_has_no_rate():
    steps, best = stepped.search(
        lambda n, rate: report(rate, 0, 10), start=1000, factor=2, refine=2, max_steps=5,
        bound_ms=100, tolerance=0.05,
    )  # fmt: skip
    assert best is None
    assert len(steps) == 1
    with pytest.raises(ValueError, match="step-factor"):
        stepped.search(lambda n, r: {}, start=1, factor=1, refine=0, max_steps=1,
                       bound_ms=1, tolerance=0)  # fmt: skip


def test_amdahl_model():
    # 10,000 msg/s on 0.5 cores, 0.4 of them on the loop thread: 40 µs serial, 10 parallel.
    ours = model.costs(report(10_000, 10_000, 1), "received", "artemis-py", 2)
    assert (ours.serial, ours.parallel) == pytest.approx((40.0, 10.0))
    assert ours.throughput(1) == pytest.approx(20_000)  # 1 / 50 µs
    assert ours.throughput(2) == pytest.approx(25_000)  # the loop thread: 1 / 40 µs
    assert ours.throughput(16) == pytest.approx(25_000)
    # A JVM: all of it parallel.
    theirs = model.costs(report(10_000, 10_000, 1, cores=0.8), "received", "artemis", 2)
    assert (theirs.serial, theirs.parallel) == pytest.approx((0.0, 80.0))
    assert theirs.throughput(4) == pytest.approx(50_000)
    # A cluster's summed CPU: the whole cluster's rate with c cores per node.
    cluster = model.costs(
        report(9_000, 9_000, 1, cores=0.9, loop=0.45), "received", "artemis-py", 5
    )
    assert cluster.nodes == 3
    assert cluster.throughput(8) == pytest.approx(3 / 50e-6)
    reports = {(1, "artemis-py"): report(1, 1, 1), (2, "artemis-py"): report(10_000, 10_000, 1),
               (2, "artemis"): report(10_000, 10_000, 1, cores=0.8)}  # fmt: skip
    table = model.model_table(reports, {1: "receipted", 2: "received"})
    lines = table.splitlines()
    assert len(lines) == 5  # header, rule, artemis-py, artemis, the ratio; scenario 1 left out
    assert lines[2].startswith("| 2 | artemis-py | 40.0 | 10.0 | 20,000 | 25,000 |")
    assert "| 2 | **artemis-py / Artemis** |  |  | **1.60** | **1.00** | **0.50** |" in table


def test_run_tables_compare_sustained_rates_and_split_the_cpu(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # bench/run.py imports model and stepped
    run = load("run")
    s2, s3 = (s for s in run.SCENARIOS if s.number in (2, 3))
    flat = report(10_000, 10_000, 5, cores=0.9, loop=0.8)
    ours3 = dict(report(16_100, 16_050, 20, cores=0.8, loop=0.75),
                 stepped={"bound_ms": 100, "sustained": 16_000.0, "steps": []})  # fmt: skip
    theirs3 = dict(report(8_000, 7_990, 30, cores=0.5, loop=0.01),
                   stepped={"bound_ms": 100, "sustained": 8_000.0, "steps": []})  # fmt: skip
    results = {(2, "artemis-py"): flat, (2, "artemis"): None,
               (3, "artemis-py"): ours3, (3, "artemis"): theirs3}  # fmt: skip
    targets = ["artemis-py", "artemis"]
    row3 = run.table(results, [s2, s3], targets).splitlines()[3]
    assert (
        "| highest rate sustained, end-to-end p99 <= 100 ms | 16,000 | 8,000 | **2.00** |" in row3
    )
    costs = run.cost_table(results, [s2, s3], targets).splitlines()
    # scenario 2: 0.8 of 0.9 cores on the loop thread at 10,000 msg/s; the generator's 0.3
    assert costs[2] == "| 2 | 80.0 | 10.0 | 90.0 | 30.0 | – | – |"
    # scenario 3: per message received at the step (16,050/s), not per offered
    assert costs[3].startswith("| 3 | 46.7 | 3.1 | 49.8 | 18.7 | 62.6 | 37.5 |")
    assert "**80.0 µs** (issue 29 asks at most 20)" in run.serial_cost_line(results)
