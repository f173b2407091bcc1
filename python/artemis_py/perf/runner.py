"""The coordinating process of ``artemis-py perf``: start workers, time the run, gather results.

The runner does no messaging itself, except to learn a cluster URL's members before the
actors get their nodes (:func:`~artemis_py.perf.cluster.spread`). It spawns one process
per :class:`Assignment`
(``multiprocessing`` "spawn": a clean interpreter, no Trio state inherited), waits until every
worker reports its connections ready, publishes a start instant a little in the future and
releases them all at once. Then it samples the shared counters every second for the
progress line and the throughput timeline, waits for the producers to finish (their last
receipts included), lets the consumers drain until they have received what was sent (or
nothing arrives for ``drain_timeout``), stops them, and collects each worker's result.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from artemis_py.perf.cluster import SpreadError, spread
from artemis_py.perf.options import PerfOptions
from artemis_py.perf.worker import SLOTS, Assignment, Control, assign, worker_main

__all__ = ["PerfError", "RunData", "run"]

START_DELAY: Final = 0.2
READY_TIMEOUT: Final = 60.0
RESULT_TIMEOUT: Final = 60.0
SENDING_GRACE: Final = 60.0
"""Seconds producers get after the window to receive their outstanding receipts."""


class PerfError(Exception):
    """The load test could not run (a worker died, nothing connected in time, ...)."""


@dataclass(slots=True)
class RunData:
    """What a run produced, before it is turned into a report."""

    options: PerfOptions
    assignments: list[Assignment]
    results: list[dict[str, Any]]
    timeline: list[dict[str, float]] = field(default_factory=list)
    runner_cpu_seconds: float = 0.0
    drained: bool = True
    wall_seconds: float = 0.0
    monitored_cores: float | None = None
    """CPU of ``options.monitor_pids`` in the window, in cores (None: nothing monitored)."""
    monitored_loop_cores: float | None = None
    """CPU of their main threads alone (a node's Trio event loop): the serial part."""


def process_cpu_seconds(pids: tuple[int, ...], *, main_thread: bool = False) -> float:
    """utime + stime of ``pids`` from Linux /proc, all threads or (``main_thread``) only the
    one whose id is the process's: a node's event-loop thread. 0 for a gone process."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        path = f"/proc/{pid}/task/{pid}/stat" if main_thread else f"/proc/{pid}/stat"
        try:
            stat = Path(path).read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # the command name may contain spaces
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


class _Counters:
    def __init__(self, array: Any, workers: int, pids: tuple[int, ...] = ()) -> None:
        self.array = array
        self.workers = workers
        self.pids = pids

    def total(self, slot: int) -> float:
        a = self.array
        total: float = sum(a[i * SLOTS.COUNT + slot] for i in range(self.workers))
        return total

    def all(self, slot: int) -> bool:
        a = self.array
        return all(a[i * SLOTS.COUNT + slot] for i in range(self.workers))

    def snapshot(self) -> dict[str, float]:
        return {
            "sent": self.total(SLOTS.SENT),
            "receipted": self.total(SLOTS.RECEIPTED),
            "received": self.total(SLOTS.RECEIVED),
            "errors": self.total(SLOTS.ERRORS),
            "cpu": self.total(SLOTS.CPU),
            "node_cpu": process_cpu_seconds(self.pids) if self.pids else 0.0,
            "node_loop_cpu": process_cpu_seconds(self.pids, main_thread=True) if self.pids else 0.0,
        }


def _progress_line(
    t: float, phase: str, rates: dict[str, float], errors: float, monitoring: bool
) -> str:
    text = (
        f"{t:6.1f}s {phase:<7} sent {rates['sent']:>9,.0f}/s  "
        f"receipted {rates['receipted']:>9,.0f}/s  received {rates['received']:>9,.0f}/s  "
        f"generator CPU {rates['cpu']:.2f} cores"
    )
    if monitoring:
        text += f"  node CPU {rates['node_cpu']:.2f} cores"
    return text + (f"  errors {errors:,.0f}" if errors else "")


def run(
    options: PerfOptions,
    *,
    out: TextIO | None = sys.stderr,
    interval: float = 1.0,
    clock: Callable[[], float] = time.time,
) -> RunData:
    """Run the load test described by ``options``; progress lines go to ``out`` (None: quiet)."""
    # Long: on purpose: its try/finally owns the worker processes from their
    # start to their end, so no failure at any step can leave one running.
    try:
        options = spread(options)
    except SpreadError as exc:
        raise PerfError(str(exc)) from None
    assignments = assign(options)
    ctx = multiprocessing.get_context("spawn")
    counters = ctx.Array("d", len(assignments) * SLOTS.COUNT, lock=False)
    control = Control(
        counters=counters,
        start_at=ctx.Value("d", 0.0, lock=False),
        go=ctx.Event(),
        stop_consumers=ctx.Event(),
        results=ctx.Queue(),
    )
    view = _Counters(counters, len(assignments), options.monitor_pids)
    processes = [
        ctx.Process(
            target=worker_main,
            args=(options, assignment, control),
            name=f"artemis-py-perf-{assignment.index}",
            daemon=True,
        )
        for assignment in assignments
    ]
    data = RunData(options, assignments, [])
    cpu_before = time.process_time()
    wall_before = time.monotonic()
    results: dict[int, dict[str, Any]] = {}

    def collect(timeout: float) -> None:
        try:
            result = control.results.get(timeout=timeout)
        except queue.Empty:
            return
        results[result["worker"]] = result
        if "setup_error" in result:
            raise PerfError(result["setup_error"])
        if "fatal" in result:
            raise PerfError(f"worker {result['worker']} failed: {result['fatal']}")

    def check_alive() -> None:
        for process in processes:
            if process.exitcode not in (None, 0):
                collect(0.5)
                raise PerfError(f"{process.name} exited with code {process.exitcode}")

    try:
        for process in processes:
            process.start()
        deadline = time.monotonic() + READY_TIMEOUT
        while not view.all(SLOTS.READY):
            check_alive()
            if time.monotonic() > deadline:
                raise PerfError(f"the workers were not connected within {READY_TIMEOUT:g} s")
            collect(0.02)
        start = clock() + START_DELAY
        control.start_at.value = start
        control.go.set()
        window_start = start + options.warmup
        window_end = window_start + options.duration
        marks: dict[str, dict[str, float]] = {}
        data.timeline = _sample(
            view, options, start, window_start, window_end, out, interval, clock, marks
        )
        if options.monitor_pids and "start" in marks and "end" in marks:
            start_mark, end_mark = marks["start"], marks["end"]
            data.monitored_cores = (
                end_mark["node_cpu"] - start_mark["node_cpu"]
            ) / options.duration
            loop = end_mark["node_loop_cpu"] - start_mark["node_loop_cpu"]
            data.monitored_loop_cores = loop / options.duration
        data.drained = _drain(
            view, options, start, out, interval, clock, data.timeline, check_alive
        )
        control.stop_consumers.set()
        deadline = time.monotonic() + RESULT_TIMEOUT
        while len(results) < len(processes):
            if time.monotonic() > deadline:
                raise PerfError("the workers did not report their results in time")
            check_alive()
            collect(0.1)
        for process in processes:
            process.join(10)
    finally:
        control.go.set()
        control.stop_consumers.set()
        for process in processes:
            if process.is_alive():
                process.join(1)
            if process.is_alive():
                process.terminate()
                process.join(5)
    data.results = [results[i] for i in sorted(results)]
    data.runner_cpu_seconds = time.process_time() - cpu_before
    data.wall_seconds = time.monotonic() - wall_before
    return data


def _sleep_until(when: float, clock: Callable[[], float]) -> None:
    delay = when - clock()
    if delay > 0:
        time.sleep(delay)


def _sample(
    view: _Counters,
    options: PerfOptions,
    start: float,
    window_start: float,
    window_end: float,
    out: TextIO | None,
    interval: float,
    clock: Callable[[], float],
    marks: dict[str, dict[str, float]],
) -> list[dict[str, float]]:
    """Sample the counters every ``interval`` s from ``start`` to ``window_end``; the
    snapshots taken at the window's start and end go into ``marks``."""
    timeline: list[dict[str, float]] = []
    _sleep_until(start, clock)
    previous = view.snapshot()
    previous_t = start
    tick = start
    if window_start <= start:
        marks["start"] = previous
    while tick < window_end:
        tick = min(tick + interval, window_end)
        if window_start > previous_t and tick > window_start:
            tick = window_start  # one sample exactly at the start of the window
        _sleep_until(tick, clock)
        previous, previous_t = _record(
            view, timeline, previous, previous_t, tick, start, window_start, out
        )
        if tick == window_start:
            marks["start"] = previous
    marks["end"] = previous
    return timeline


def _record(
    view: _Counters,
    timeline: list[dict[str, float]],
    previous: dict[str, float],
    previous_t: float,
    now: float,
    start: float,
    window_start: float,
    out: TextIO | None,
    phase: str | None = None,
) -> tuple[dict[str, float], float]:
    current = view.snapshot()
    dt = max(now - previous_t, 1e-9)
    rates = {key: (current[key] - previous[key]) / dt for key in ("sent", "receipted", "received")}
    rates["cpu"] = (current["cpu"] - previous["cpu"]) / dt
    rates["node_cpu"] = (current["node_cpu"] - previous["node_cpu"]) / dt
    if phase is None:
        phase = "warmup" if now <= window_start else "measure"
    entry = {"t": round(now - start, 3), "phase": phase, **rates, "errors": current["errors"]}
    timeline.append(entry)  # type: ignore[arg-type]
    if out is not None:
        line = _progress_line(now - start, phase, rates, current["errors"], bool(view.pids))
        print(line, file=out, flush=True)
    return current, now


def _drain(
    view: _Counters,
    options: PerfOptions,
    start: float,
    out: TextIO | None,
    interval: float,
    clock: Callable[[], float],
    timeline: list[dict[str, float]],
    check_alive: Callable[[], None],
) -> bool:
    """Wait for the producers to finish and the consumers to receive everything sent.

    True when every expected delivery arrived; False when the consumers went
    ``drain_timeout`` seconds without progress (or the producers never finished).
    """
    window_start = start + options.warmup
    previous, previous_t = view.snapshot(), clock()
    last_progress = clock()
    last_received = previous["received"]
    sending_deadline = clock() + SENDING_GRACE
    next_tick = clock() + interval
    while True:
        check_alive()
        sending_done = view.all(SLOTS.SENDING_DONE)
        expected = view.total(SLOTS.SENT) * options.expected_copies
        received = view.total(SLOTS.RECEIVED)
        now = clock()
        if received != last_received:
            last_received, last_progress = received, now
        if sending_done and received >= expected:
            return True
        if sending_done and now - last_progress > options.drain_timeout:
            return False
        if not sending_done and now > sending_deadline:
            return False
        if now >= next_tick:
            previous, previous_t = _record(
                view, timeline, previous, previous_t, now, start, window_start, out, "drain"
            )
            next_tick = now + interval
        time.sleep(0.02)
