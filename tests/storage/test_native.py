"""The native extension on its own: blocking calls release the GIL, the eventfd signals."""

from __future__ import annotations

import os
import select
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio

from artemis_py import _native
from artemis_py.exceptions import JournalClosedError
from artemis_py.storage import Op


def readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


async def test_blocking_calls_release_the_gil(tmp_path: Path) -> None:
    # A lone non-sync write waits up to buffer_timeout (10 s here) for company. A thread
    # blocked in wait() on it must not hold the GIL: if it did, the loop would stall until
    # the timeout wrote the record, and fail_after(5) would fire as soon as it resumed.
    journal, report = await trio.to_thread.run_sync(
        lambda: _native.Journal.open(str(tmp_path), buffer_timeout_ns=10_000_000_000)
    )
    assert len(report.records) == 0
    try:
        lazy = journal.submit([Op.add(1, 1, b"lazy")], False)
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, journal.wait, lazy)
                # Not waiting for a condition: a window in which the thread enters wait().
                await trio.sleep(0.2)
                assert journal.progress() == (0, False)  # the thread is still waiting
                await trio.to_thread.run_sync(journal.append, [Op.add(2, 1, b"sync")], True)
        assert journal.progress()[0] >= lazy + 1
    finally:
        await trio.to_thread.run_sync(journal.close)


async def test_eventfd_becomes_readable_when_a_batch_completes(tmp_path: Path) -> None:
    journal, _ = await trio.to_thread.run_sync(_native.Journal.open, str(tmp_path))
    try:
        fd = journal.fileno()
        assert not readable(fd)
        ticket = journal.submit([Op.add(1, 1, b"x")], True)
        with trio.fail_after(5):
            await trio.lowlevel.wait_readable(fd)
        assert os.eventfd_read(fd) >= 1
        assert not readable(fd)  # reading resets it
        completed, failed = journal.progress()
        assert completed >= ticket
        assert not failed
        journal.error()  # raises only if the writer failed
        stats = journal.stats()
        assert (stats.records_written, stats.live_records) == (1, 1)
    finally:
        await trio.to_thread.run_sync(journal.close)
    await trio.to_thread.run_sync(journal.close)  # idempotent
    with pytest.raises(JournalClosedError):
        journal.submit([Op.add(2, 1, b"y")], True)


async def test_node_manager_close_releases_the_lock(tmp_path: Path) -> None:
    first = await trio.to_thread.run_sync(_native.NodeManager.open, str(tmp_path))
    assert first.locked
    assert first.directory == tmp_path
    first.close()
    first.close()  # idempotent
    assert not first.locked
    second = await trio.to_thread.run_sync(_native.NodeManager.open, str(tmp_path))
    assert second.node_id == first.node_id
    second.close()


def test_load_report_records_are_a_native_sequence(tmp_path: Path) -> None:
    journal, _ = _native.Journal.open(str(tmp_path))
    journal.append([Op.add(i, 7, bytes([i]) * i) for i in range(1, 6)], True)
    journal.append([Op.update(3, 8, b"u1"), Op.update(3, 9, b"u2"), Op.delete(4)], True)
    journal.close()
    journal, report = _native.Journal.open(str(tmp_path))
    try:
        records = report.records
        assert isinstance(records, Sequence)
        assert len(records) == 4
        assert bool(records)
        assert [r.id for r in records] == [1, 2, 3, 5]
        assert [r.id for r in reversed(records)] == [5, 3, 2, 1]
        assert (records[0].id, records[-1].id, records[-4].id) == (1, 5, 1)
        third = records[2]
        assert (third.record_type, third.payload) == (7, b"\x03\x03\x03")
        assert [(u.record_type, u.payload) for u in third.updates] == [(8, b"u1"), (9, b"u2")]
        assert records[4 - 1].payload == b"\x05" * 5
        assert [r.id for r in records[1:]] == [2, 3, 5]
        assert [r.id for r in records[::-2]] == [5, 2]
        assert records[10:] == ()
        for bad in (4, -5):
            with pytest.raises(IndexError):
                records[bad]
        with pytest.raises(TypeError):
            records["1"]  # type: ignore[call-overload]
        assert report.prepared == ()
        assert report.prepared is report.prepared
        del report, records  # the packed records are freed; the Records made survive
        assert third.updates[1].payload == b"u2"
    finally:
        journal.close()
