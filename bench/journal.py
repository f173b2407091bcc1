"""Synced 1 KiB appends through the journal facade, against a raw pwrite+fdatasync loop.

    python bench/journal.py [--dir DIR] [--seconds S] [--writers 1,16,64] [--trials N]

For each writer count, one fresh journal (the broker's default settings) in ``DIR``, and N
trials of:

* **journal**: that many Trio tasks each ``await journal.add(id, 1, <1 KiB>)`` in a loop, as
  the broker appends through ``artemis_py.storage``, for a window of ``S`` seconds. Counted:
  appends acknowledged in the window; records per fdatasync from ``journal.stats()``; the
  CPU time of the event-loop thread. Then the tasks are parked (the journal goes idle).
* **raw**: right after, for ``S`` seconds in the same directory, a plain loop of
  ``os.pwrite`` + ``os.fdatasync`` on a pre-allocated (zero-filled) file, writing
  ``batch x 1 KiB`` per fdatasync, where ``batch`` is the records per fdatasync the journal
  reached in that window (1 for one writer): what the disk gives for the same group-commit
  batches with no journal, threads or event loop in between.
* **off-loop handoff** (1 writer only): right after, the same pwrite + fdatasync of one
  record, done by a (Python) worker thread that a Trio task wakes through an eventfd and
  awaits through another, as any facade that keeps the disk off the event loop must. No
  journal, no encoding: what is left is the cost of the two cross-thread wake-ups and one
  pass of the Trio loop, which no such facade can avoid. (On a busy machine its worker also
  waits for the GIL, which the journal's Rust writer does not, so there it can fall below
  the journal.)

Prints per writer count the medians over the trials and ``ratio`` = the median of the
per-trial journal/raw ratios. Trials are short and paired back to back because a shared
disk's fdatasync latency can swing by 50x within a second. Targets: ratio >= 0.9 at 1 and
at 64 writers; the exit status is 1 if one is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from artemis_py.storage import JournalSettings, open_journal

RECORD = 1024
RECORD_TYPE = 1
WARMUP = 0.3  # seconds appended, unmeasured, after opening the journal
SETTLE = 0.05  # seconds between un-parking the writers and opening a window
RAW_FILE_SIZE = 64 * 1024 * 1024
TARGETS = {1: 0.9, 64: 0.9}
MiB = 1024 * 1024


@dataclass(frozen=True)
class Slice:
    """One measured window of the journal and the raw run paired with it."""

    records: int  # appends acknowledged in the window
    seconds: float
    syncs: int
    records_written: int
    bytes_written: int
    loop_cpu: float  # CPU seconds the event-loop thread used in the window
    raw_rate: float = 0.0
    handoff_rate: float = 0.0  # 1 writer: the off-loop handoff, run right after the raw loop

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def per_sync(self) -> float:
        return self.records_written / max(self.syncs, 1)

    @property
    def ratio(self) -> float:
        return self.rate / self.raw_rate

    @property
    def handoff_ratio(self) -> float:
        return self.handoff_rate / self.raw_rate


async def measure(
    directory: Path, writers: int, seconds: float, trials: int, raw_fd: int
) -> list[Slice]:
    """Open a journal, then ``trials`` times: let the writers append for ``seconds``, park
    them, and run the raw loop for as long with the batch size the journal just reached."""
    payload = os.urandom(RECORD)
    acked = 0
    running = False
    opened = trio.Event()
    parked = 0
    all_parked = trio.Event()
    slices: list[Slice] = []

    async with open_journal(directory, JournalSettings()) as journal:

        async def writer(id: int) -> None:
            nonlocal acked, parked
            while True:
                while not running:
                    parked += 1
                    if parked == writers:
                        all_parked.set()
                    await opened.wait()
                    parked -= 1
                await journal.add(id, RECORD_TYPE, payload)
                acked += 1
                id += 1

        async def window(length: float) -> Slice:
            nonlocal running, opened, all_parked
            running = True
            opened.set()
            await trio.sleep(SETTLE)
            acked0, stats0 = acked, journal.stats()
            cpu0, t0 = time.thread_time(), time.perf_counter()
            await trio.sleep(length)
            acked1, stats1 = acked, journal.stats()
            cpu1, t1 = time.thread_time(), time.perf_counter()
            running = False
            opened = trio.Event()
            all_parked = trio.Event()
            await all_parked.wait()
            # Let the housekeeper finish pre-allocating a file (it does when the pool runs
            # empty) so its zero-fill does not run into the raw loop. Nothing signals that,
            # so poll.
            with trio.move_on_after(2.0):
                while journal.stats().free_files < 1:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            return Slice(
                records=acked1 - acked0,
                seconds=t1 - t0,
                syncs=stats1.syncs - stats0.syncs,
                records_written=stats1.records_written - stats0.records_written,
                bytes_written=stats1.bytes_written - stats0.bytes_written,
                loop_cpu=cpu1 - cpu0,
            )

        async with trio.open_nursery() as nursery:
            for w in range(writers):
                nursery.start_soon(writer, w << 40)
            await window(WARMUP)
            for _ in range(trials):
                measured = await window(seconds)
                batch = 1.0 if writers == 1 else measured.per_sync
                # On the loop thread on purpose: every writer is parked, the journal idle.
                raw = raw_run(raw_fd, batch, seconds)
                handoff = await off_loop_run(raw_fd, seconds) if writers == 1 else 0.0
                slices.append(dataclasses.replace(measured, raw_rate=raw, handoff_rate=handoff))
            nursery.cancel_scope.cancel()
    return slices


def preallocate(path: Path) -> int:
    """A zero-filled, fdatasynced file, as the journal's pre-allocated files are."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    zeros = bytes(MiB)
    for offset in range(0, RAW_FILE_SIZE, MiB):
        os.pwrite(fd, zeros, offset)
    os.fsync(fd)
    return fd


def raw_run(fd: int, batch: float, seconds: float) -> float:
    """pwrite + fdatasync of ``batch`` records per sync (fractional batches alternate between
    the neighbouring whole sizes so the mean is exact); returns records/s."""
    block = os.urandom(RECORD) * (int(batch) + 1)
    offset = records = syncs = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        syncs += 1
        n = max(1, round(syncs * batch) - records)
        size = n * RECORD
        if offset + size > RAW_FILE_SIZE:
            offset = 0
        os.pwrite(fd, block[:size], offset)
        os.fdatasync(fd)
        offset += size
        records += n
        now = time.perf_counter()
        if now >= end:
            return records / (now - start)


async def off_loop_run(fd: int, seconds: float) -> float:
    """The raw 1-writer loop with each pwrite + fdatasync handed to a worker thread and
    awaited from this Trio task, as the journal facade does it; returns records/s."""
    request = os.eventfd(0)
    done = os.eventfd(0, os.EFD_NONBLOCK)
    block = os.urandom(RECORD)

    def worker() -> None:
        offset = 0
        while os.eventfd_read(request) == 1:  # 2: stop
            os.pwrite(fd, block, offset)
            os.fdatasync(fd)
            offset = (offset + RECORD) % RAW_FILE_SIZE
            os.eventfd_write(done, 1)

    thread = threading.Thread(target=worker, name="off-loop-handoff")
    thread.start()
    records = 0
    try:
        start = time.perf_counter()
        end = start + seconds
        while True:
            os.eventfd_write(request, 1)
            await trio.lowlevel.wait_readable(done)
            os.eventfd_read(done)
            records += 1
            now = time.perf_counter()
            if now >= end:
                return records / (now - start)
    finally:
        os.eventfd_write(request, 2)
        thread.join()
        os.close(request)
        os.close(done)


def probe_fdatasync(fd: int, seconds: float = 0.5) -> tuple[float, float]:
    """Latency of one 1 KiB pwrite + fdatasync: (median, 90th percentile) in microseconds."""
    block = os.urandom(RECORD)
    latencies = []
    end = time.perf_counter() + seconds
    offset = 0
    while time.perf_counter() < end:
        start = time.perf_counter()
        os.pwrite(fd, block, offset)
        os.fdatasync(fd)
        latencies.append(time.perf_counter() - start)
        offset = (offset + RECORD) % RAW_FILE_SIZE
    latencies.sort()
    return latencies[len(latencies) // 2] * 1e6, latencies[len(latencies) * 9 // 10] * 1e6


def filesystem(path: Path) -> str:
    """'<fstype> on <device>' for the mount holding ``path`` (Linux), else '?'."""
    target = str(path.resolve())
    best = ("", "?")
    with contextlib.suppress(OSError), open("/proc/self/mounts") as mounts:
        for line in mounts:
            device, mount_point, fstype, *_ = line.split()
            inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) >= len(best[0]):
                best = (mount_point, f"{fstype} on {device}")
    return best[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dir", type=Path, help="directory on the disk to test (default: a temp dir)"
    )
    parser.add_argument(
        "--seconds", type=float, default=0.5, help="seconds per journal window and per raw run"
    )
    parser.add_argument("--writers", default="1,16,64", help="comma-separated writer counts")
    parser.add_argument("--trials", type=int, default=10, help="trials per writer count (median)")
    args = parser.parse_args(argv)
    writer_counts = [int(w) for w in args.writers.split(",")]

    base = Path(tempfile.mkdtemp(prefix="artemis-bench-", dir=args.dir))
    print("artemis-py journal benchmark: synced 1 KiB appends via artemis_py.storage vs raw")
    print(f"command: {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(
        f"machine: {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"trio {trio.__version__}"
    )
    print(f"directory: {base} ({filesystem(base)})")
    print(f"{args.trials} trials x {args.seconds:g} s per run; medians reported", flush=True)

    results: dict[int, list[Slice]] = {}
    raw_fd = preallocate(base / "raw.bin")
    probes = [probe_fdatasync(raw_fd)]
    try:
        for writers in writer_counts:
            # Journals are deleted only at the end: deleting files (ext4 with `discard`)
            # puts discards in the disk queue in front of the next flushes.
            directory = base / f"journal-{writers}"
            slices = trio.run(measure, directory, writers, args.seconds, args.trials, raw_fd)
            results[writers] = slices
            print(
                f"  writers {writers:3d}: journal/raw per trial "
                + " ".join(f"{s.ratio:.2f}" for s in slices),
                flush=True,
            )
        probes.append(probe_fdatasync(raw_fd))
    finally:
        os.close(raw_fd)
        shutil.rmtree(base, ignore_errors=True)

    median = statistics.median
    print()
    print(
        "| writers | journal rec/s | journal MiB/s | records/fdatasync | loop CPU "
        "| raw rec/s | raw MiB/s | ratio | ratio range | target |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    missed = []
    for w, slices in results.items():
        j = median(s.rate for s in slices)
        r = median(s.raw_rate for s in slices)
        q = median(s.ratio for s in slices)
        per_sync = median(s.per_sync for s in slices)
        cpu = median(s.loop_cpu / s.seconds for s in slices)
        low, high = min(s.ratio for s in slices), max(s.ratio for s in slices)
        target = TARGETS.get(w)
        verdict = "-" if target is None else f">= {target} {'ok' if q >= target else 'MISSED'}"
        if target is not None and q < target:
            missed.append(w)
        print(
            f"| {w} | {j:.0f} | {j * RECORD / MiB:.1f} | {per_sync:.1f} | {cpu:.0%} | {r:.0f} "
            f"| {r * RECORD / MiB:.1f} | {q:.2f} | {low:.2f}-{high:.2f} | {verdict} |"
        )
    print()
    if 1 in results:
        one = results[1]
        print(f"raw 1-writer loop: {1e6 / median(s.raw_rate for s in one):.0f} us per write")
        handoff = [s.handoff_ratio for s in one]
        print(
            f"off-loop handoff (raw loop in a worker thread awaited from Trio, no journal): "
            f"{median(s.handoff_rate for s in one):.0f} rec/s, {median(handoff):.2f} of raw "
            f"({min(handoff):.2f}-{max(handoff):.2f}); "
            f"journal/handoff {median(s.rate / s.handoff_rate for s in one):.2f}"
        )
    (b50, b90), (a50, a90) = probes[0], probes[-1]
    print(
        f"fdatasync probe (1 KiB, p50/p90): before {b50:.0f}/{b90:.0f} us, after {a50:.0f}/{a90:.0f} us"
    )
    every = [s for slices in results.values() for s in slices]
    overhead = median(s.bytes_written / max(s.records_written, 1) for s in every)
    print(f"journal bytes per 1 KiB record (headers included): {overhead:.0f}")
    print("MiB/s: payload only. loop CPU: event-loop thread busy share. ratio: median of")
    print("per-trial journal/raw, each trial a journal window and a raw run back to back.")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
