"""The Trio loop keeps serving other tasks while the journal writes, syncs and recovers.

A ticker task sleeps for a short period in a loop and records the longest gap between its
wake-ups. Anything that blocks the loop — a write or fsync on the loop thread, a native call
holding the GIL, a submit stuck behind the writer's lock — shows up as a long gap.

The box these run on is shared (two cores, parallel builds), so the loop thread is often
runnable but not running. The kernel counts that time separately (``schedstat``: time spent
waiting on a run queue), so it is subtracted: what is left is time the loop spent blocked or
busy. Starvation can still reach us indirectly (the GIL holder preempted), which is random,
whereas a blocking bug is systematic; so each measurement gets a second attempt.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from artemis_py.storage import JournalSettings, Op, open_journal

PERIOD = 0.005
MAX_GAP = 0.050
RECORD = 256 * 1024
TOTAL = 64 * 1024 * 1024
SETTINGS = JournalSettings(file_size=8 * 1024 * 1024)


def run_queue_wait() -> float:
    """Seconds this thread has spent runnable but not running (0 where the kernel won't say)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


class Ticker:
    """Runs on the loop; ``max_gap`` is the longest wake-up gap minus run-queue waiting."""

    def __init__(self) -> None:
        self.ticks = 0
        self.max_gap = 0.0
        self.last = (time.perf_counter(), run_queue_wait())

    async def run(self) -> None:
        self.last = (time.perf_counter(), run_queue_wait())
        while True:
            await trio.sleep(PERIOD)
            self.tick()

    def tick(self) -> None:
        now = (time.perf_counter(), run_queue_wait())
        gap = (now[0] - self.last[0]) - (now[1] - self.last[1])
        self.max_gap = max(self.max_gap, gap)
        self.ticks += 1
        self.last = now


async def ticking_while(work: Callable[[], Awaitable[None]]) -> tuple[Ticker, float]:
    """Run ``work`` with a ticker beside it; return the ticker and how long the work took."""
    ticker = Ticker()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker.run)
        await trio.lowlevel.checkpoint()  # let the ticker take its first timestamp
        started = time.perf_counter()
        await work()
        elapsed = time.perf_counter() - started
        ticker.tick()  # a loop blocked until the very end shows up too
        nursery.cancel_scope.cancel()
    return ticker, elapsed


async def assert_loop_not_blocked(work: Callable[[], Awaitable[None]]) -> None:
    seen = []
    for _attempt in range(2):
        ticker, elapsed = await ticking_while(work)
        # The measurement means something only if the work took several periods.
        assert elapsed >= 5 * PERIOD, f"work too short to measure: {elapsed * 1000:.1f} ms"
        seen.append(ticker.max_gap)
        if ticker.max_gap < MAX_GAP:
            return
    raise AssertionError(f"loop blocked for {', '.join(f'{g * 1000:.1f}' for g in seen)} ms")


async def test_loop_keeps_ticking_while_64_mib_is_written_and_synced(tmp_path: Path) -> None:
    payload = bytes(range(256)) * (RECORD // 256)
    records = TOTAL // RECORD
    producers = 8
    attempt = 0

    async def write_64_mib() -> None:
        nonlocal attempt
        attempt += 1
        directory = tmp_path / f"attempt-{attempt}"
        async with open_journal(directory, SETTINGS) as journal:

            async def producer(first: int) -> None:
                for i in range(first, records // 2, producers):
                    # Two records per batch, every batch synced.
                    ops = [Op.add(2 * i + 1, 1, payload), Op.add(2 * i + 2, 1, payload)]
                    await journal.append(ops, sync=True)

            async with trio.open_nursery() as nursery:
                for p in range(producers):
                    nursery.start_soon(producer, p)
            stats = journal.stats()
        assert stats.records_written == records
        assert stats.bytes_written >= TOTAL
        assert stats.data_files >= 8

    await assert_loop_not_blocked(write_64_mib)


async def test_loop_keeps_ticking_while_a_large_journal_is_recovered(tmp_path: Path) -> None:
    # Many small records: recovery must not hold the GIL while it packs them for Python
    # (they stay native until looked at), and dropping the report must not block the loop.
    size = 256
    count = TOTAL // size
    async with open_journal(tmp_path, SETTINGS) as journal:
        for first in range(1, count + 1, 256):
            ops = [
                Op.add(i, 1, i.to_bytes(8, "little") * (size // 8))
                for i in range(first, first + 256)
            ]
            journal.submit(ops, sync=False)
        await journal.add(count + 1, 1, b"end", sync=True)

    async def recover() -> None:
        async with open_journal(tmp_path, SETTINGS) as journal:
            records = journal.loaded.records
            assert len(records) == count + 1
            assert records[4095].payload == (4096).to_bytes(8, "little") * (size // 8)
            assert records[-1].payload == b"end"

    await assert_loop_not_blocked(recover)
