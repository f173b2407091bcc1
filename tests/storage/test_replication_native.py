"""The native journal's replication API as the Python side uses it: start, copy the files,
take frames and apply them on a backup, the completion gate, and ReplicationError."""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from artemis_py import _native
from artemis_py.exceptions import ReplicationError, StorageError
from artemis_py.storage import JournalSettings, Op, open_journal

SMALL = JournalSettings(file_size=64 * 1024)


def state(loaded: _native.LoadReport) -> tuple[object, object]:
    records = {
        r.id: (r.record_type, r.payload, [(u.record_type, u.payload) for u in r.updates])
        for r in loaded.records
    }
    prepared = [(t.tx_id, t.xid, t.ops) for t in loaded.prepared]
    return records, prepared


async def test_copy_then_apply_gives_the_primary_state(tmp_path: Path) -> None:
    primary_dir, backup_dir = tmp_path / "primary", tmp_path / "backup"
    backup_dir.mkdir()
    async with open_journal(primary_dir, SMALL) as primary:
        for i in range(1, 41):
            await primary.add(i, 1, bytes(2000) + b"%d" % i)
        await primary.delete(3)
        await primary.add_tx(77, 100, 2, b"open before the start")
        native = primary._native
        start = await trio.to_thread.run_sync(native.replication_start)
        assert start.through == primary.last_ticket
        assert len(start.files) >= 2
        await primary.wait(start.through)
        for f in start.files:
            assert Path(f).is_absolute()
            shutil.copyfile(f, backup_dir / Path(f).name)
        async with open_journal(backup_dir, SMALL) as backup:
            await primary.update(1, 5, b"updated")
            await primary.delete(2)
            await primary.add_tx(77, 101, 2, b"after")
            await primary.commit(77)
            await primary.add_tx(78, 102, 2, b"p")
            await primary.prepare(78, b"xid-78")
            frames = native.replication_take()
            assert native.replication_take() == b""
            primary_ticket, local = backup._native.apply_replicated(frames)
            assert primary_ticket == primary.last_ticket
            # Tickets issued natively, past the facade's own count: wait on the native.
            await trio.to_thread.run_sync(backup._native.wait, local)
    async with open_journal(primary_dir, SMALL) as p, open_journal(backup_dir, SMALL) as b:
        assert p.loaded is not None
        assert b.loaded is not None
        assert state(p.loaded) == state(b.loaded)
        assert 101 in {r.id for r in b.loaded.records}


async def test_the_gate_holds_completion_until_replicated(
    tmp_path: Path, wait_for: Callable[..., Awaitable[object]]
) -> None:
    async with open_journal(tmp_path, SMALL) as journal:
        native = journal._native
        native.replication_gate(True)
        ticket = journal.submit([Op.add(1, 1, b"a")], sync=True)
        native.wake_writer()
        # Written but not replicated: completion stays below it while the gate is on (a
        # facade wait here would last until the outcome is known: waits are not abandoned).
        await wait_for(lambda: native.stats().records_written == 1, message="the write")
        assert native.progress()[0] < ticket
        native.replicated(ticket)
        assert native.progress()[0] == ticket
        with trio.fail_after(5):
            await journal.wait(ticket)
        second = journal.submit([Op.add(2, 1, b"b")], sync=True)
        native.wake_writer()
        await wait_for(lambda: native.stats().records_written == 2, message="the write")
        assert native.progress()[0] < second
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(journal.wait, second)
                await trio.lowlevel.checkpoint()
                native.replication_gate(False)  # pokes the eventfd: the waiter wakes
        s = native.replication_state()
        assert (s.active, s.gate, s.replicated_through) == (False, False, ticket)


async def test_errors_are_replication_errors(tmp_path: Path) -> None:
    assert issubclass(ReplicationError, StorageError)
    async with open_journal(tmp_path / "a", SMALL) as a, open_journal(tmp_path / "b") as b:
        await a.add(9, 1, b"before the start: the backup never got the files")
        await trio.to_thread.run_sync(a._native.replication_start)
        with pytest.raises(ReplicationError, match="already started"):
            await trio.to_thread.run_sync(a._native.replication_start)
        a.submit([Op.add(1, 1, b"x")], sync=False)
        a.submit([Op.update(9, 1, b"nothing to update")], sync=False)
        frames = a._native.replication_take()
        bad = bytearray(frames)
        bad[12] ^= 1
        with pytest.raises(ReplicationError, match="checksum mismatch: expected"):
            b._native.apply_replicated(bytes(bad))
        with pytest.raises(ReplicationError, match="truncated"):
            b._native.apply_replicated(frames[:-1])
        with pytest.raises(ReplicationError, match="record 9 not found"):
            b._native.apply_replicated(frames)
        assert b._native.apply_replicated(b"") == (0, 0)
        a._native.replication_stop()
        assert a._native.replication_state().active is False
