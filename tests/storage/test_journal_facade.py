"""The async journal facade: records, transactions, reopen, tickets, settings, lifecycle."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from artemis_py.exceptions import JournalClosedError
from artemis_py.storage import Journal, JournalSettings, Op, open_journal

# Blocking helpers: they poll without yielding, so the Trio loop cannot run meanwhile.
from integration.conftest import stays
from integration.conftest import wait_for as blocking_wait_for

# Small files so tests that fill several files stay fast; 64 KiB is the journal's minimum.
SMALL = JournalSettings(file_size=64 * 1024)


def file_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def state(journal: Journal) -> dict[int, tuple[int, bytes, list[tuple[int, bytes]]]]:
    return {
        r.id: (r.record_type, r.payload, [(u.record_type, u.payload) for u in r.updates])
        for r in journal.loaded.records
    }


async def test_add_update_delete_survive_reopen(tmp_path: Path) -> None:
    async with open_journal(tmp_path) as journal:
        assert len(journal.loaded.records) == 0
        assert journal.loaded.torn_tail is None
        await journal.add(1, 10, b"one")
        await journal.add(2, 10, b"two")
        await journal.add(3, 11, b"three")
        await journal.update(1, 20, b"one-a")
        await journal.update(1, 21, b"one-b")
        await journal.delete(2)
    async with open_journal(tmp_path) as journal:
        assert state(journal) == {
            1: (10, b"one", [(20, b"one-a"), (21, b"one-b")]),
            3: (11, b"three", []),
        }
        assert [r.id for r in journal.loaded.records] == [1, 3]
        await journal.delete(1)
        await journal.delete(3)
    async with open_journal(tmp_path) as journal:
        assert len(journal.loaded.records) == 0


async def test_committed_transaction_is_applied_and_rolled_back_one_is_not(
    tmp_path: Path,
) -> None:
    async with open_journal(tmp_path) as journal:
        await journal.add(1, 10, b"acked-by-tx")
        await journal.add_tx(100, 2, 10, b"tx-add")
        await journal.update_tx(100, 2, 12, b"tx-update")
        await journal.delete_tx(100, 1)
        await journal.commit(100)
        await journal.add_tx(200, 3, 10, b"never")
        await journal.rollback(200)
    async with open_journal(tmp_path) as journal:
        assert state(journal) == {2: (10, b"tx-add", [(12, b"tx-update")])}
        assert journal.loaded.prepared == ()
        assert journal.loaded.incomplete_transactions_rolled_back == 0


async def test_prepared_transaction_is_reported_and_can_be_committed_after_reopen(
    tmp_path: Path,
) -> None:
    async with open_journal(tmp_path) as journal:
        await journal.add_tx(7, 1, 10, b"prepared-add")
        await journal.prepare(7, b"xid-7")
    async with open_journal(tmp_path) as journal:
        assert len(journal.loaded.records) == 0  # not visible until committed
        (prepared,) = journal.loaded.prepared
        assert prepared.tx_id == 7
        assert prepared.xid == b"xid-7"
        assert prepared.ops == (Op.add_tx(7, 1, 10, b"prepared-add"),)
        assert all(isinstance(op, Op) for op in prepared.ops)
        await journal.commit(7)
    async with open_journal(tmp_path) as journal:
        assert state(journal) == {1: (10, b"prepared-add", [])}
        assert journal.loaded.prepared == ()


async def test_transaction_neither_prepared_nor_finished_is_rolled_back_on_load(
    tmp_path: Path,
) -> None:
    async with open_journal(tmp_path) as journal:
        await journal.add_tx(5, 1, 10, b"x")
        await journal.add(2, 10, b"sync-after")  # a sync op makes the tx record durable too
    async with open_journal(tmp_path) as journal:
        assert journal.loaded.incomplete_transactions_rolled_back == 1
        assert state(journal) == {2: (10, b"sync-after", [])}


async def test_a_batch_is_applied_as_one(tmp_path: Path) -> None:
    async with open_journal(tmp_path) as journal:
        await journal.append(
            [Op.add(1, 1, b"a"), Op.add(2, 1, b"b"), Op.update(1, 2, b"a2"), Op.delete(2)]
        )
    async with open_journal(tmp_path) as journal:
        assert state(journal) == {1: (1, b"a", [(2, b"a2")])}


async def test_submit_and_wait_pipeline_in_any_order(tmp_path: Path) -> None:
    async with open_journal(tmp_path) as journal:
        tickets = [journal.submit([Op.add(i, 1, b"%d" % i)], sync=True) for i in range(1, 51)]
        assert tickets == sorted(tickets)
        assert len(set(tickets)) == 50
        for ticket in reversed(tickets):
            await journal.wait(ticket)
        await journal.wait(tickets[0])  # already completed: returns at once
        with pytest.raises(ValueError, match="never issued"):
            await journal.wait(tickets[-1] + 1)
    async with open_journal(tmp_path) as journal:
        assert [r.id for r in journal.loaded.records] == list(range(1, 51))


async def test_concurrent_tasks_are_all_woken(tmp_path: Path) -> None:
    done: list[int] = []
    async with open_journal(tmp_path) as journal:

        async def writer(first: int) -> None:
            for i in range(first, first + 20):
                await journal.add(i, 1, b"x" * 100)
            done.append(first)

        async with trio.open_nursery() as nursery:
            for t in range(10):
                nursery.start_soon(writer, t * 1000)
        stats = journal.stats()
    assert sorted(done) == [t * 1000 for t in range(10)]
    assert stats.records_written == 200
    assert stats.live_records == 200
    # Group commit: the 10 tasks share fdatasyncs, so there are fewer syncs than records.
    assert stats.syncs < 200


async def test_the_submits_of_one_loop_pass_share_one_batch(
    tmp_path: Path, wait_for: Callable[..., Awaitable[object]]
) -> None:
    async with open_journal(tmp_path) as journal:
        # Sparse traffic (one submit in the last pass that had any): woken at once.
        await journal.add(1, 1, b"one", sync=True)
        await trio.sleep(0.05)  # the writer goes back to sleep
        before = journal.stats().batches
        ticket = journal.submit([Op.add(2, 1, b"lone")], sync=True)
        # Written while the loop is blocked: the submit itself woke the writer.
        blocking_wait_for(lambda: journal.stats().batches == before + 1, 5, 0.001, "the lone write")
        await journal.wait(ticket)
        # A pass with two submits switches to one wake-up per pass.
        tickets = [journal.submit([Op.add(i, 1, b"x")], sync=True) for i in (3, 4)]
        await journal.wait(tickets[-1])
        await trio.sleep(0.05)
        before = journal.stats().batches
        # No checkpoint between the submits: the writer is woken once, before the loop
        # polls, and writes them together (woken by the first, it would write it alone).
        tickets = [journal.submit([Op.add(i, 1, b"x")], sync=True) for i in range(5, 15)]
        # The loop stays blocked: for 50 ms the writer must not write (it is still asleep).
        stays(lambda: journal.stats().batches == before, 0.05, 0.001, "the writer asleep")
        await journal.wait(tickets[-1])
        assert journal.stats().batches == before + 1
        # A submit of a later pass is written without a wait() to prompt it.
        ticket = journal.submit([Op.add(15, 1, b"y")], sync=True)
        await wait_for(lambda: journal.stats().batches == before + 2, message="the write")
        await journal.wait(ticket)


async def test_non_sync_append_returns_before_it_is_written(tmp_path: Path) -> None:
    # A long buffer timeout keeps a lone non-sync write queued; the add returns anyway.
    settings = JournalSettings(buffer_timeout_ns=10_000_000_000, sync_non_transactional=False)
    async with open_journal(tmp_path, settings) as journal:
        with trio.fail_after(5):
            await journal.add(1, 1, b"lazy")
        assert journal.stats().records_written == 0
        await journal.add(2, 1, b"eager", sync=True)  # flushes everything before it
        assert journal.stats().records_written == 2
    async with open_journal(tmp_path) as journal:
        assert [r.id for r in journal.loaded.records] == [1, 2]


async def test_close_flushes_queued_non_sync_writes(tmp_path: Path) -> None:
    settings = JournalSettings(buffer_timeout_ns=10_000_000_000)
    async with open_journal(tmp_path, settings) as journal:
        for i in range(1, 11):
            await journal.add(i, 1, b"x", sync=False)
    async with open_journal(tmp_path) as journal:
        assert len(journal.loaded.records) == 10


def test_sync_defaults_follow_artemis_settings() -> None:
    both = JournalSettings()
    assert both.sync_for([Op.add(1, 1, b"")])
    assert both.sync_for([Op.commit(1)])
    assert not both.sync_for([Op.add_tx(1, 2, 1, b""), Op.delete_tx(1, 3)])
    assert not both.sync_for([])
    no_tx = JournalSettings(sync_transactional=False)
    assert not no_tx.sync_for([Op.add_tx(1, 2, 1, b""), Op.commit(1)])
    assert no_tx.sync_for([Op.commit(1), Op.update(5, 1, b"")])
    no_plain = JournalSettings(sync_non_transactional=False)
    assert not no_plain.sync_for([Op.add(1, 1, b""), Op.delete(1)])
    assert no_plain.sync_for([Op.prepare(1, b"x")])


def test_settings_have_the_artemis_defaults() -> None:
    assert dataclasses.asdict(JournalSettings()) == {
        "file_size": 10 * 1024 * 1024,
        "min_files": 2,
        "pool_files": -1,
        "buffer_size": 490 * 1024,
        "buffer_timeout_ns": 3_333_333,
        "datasync": True,
        "sync_transactional": True,
        "sync_non_transactional": True,
        "compact_min_files": 10,
        "compact_percentage": 30,
    }


async def test_files_use_the_configured_size_and_names(tmp_path: Path) -> None:
    async with open_journal(
        tmp_path, SMALL, file_prefix="activemq-bindings", file_extension="bindings"
    ):
        pass
    files = file_names(tmp_path)
    assert files
    assert all(f.startswith("activemq-bindings-") and f.endswith(".bindings") for f in files)
    assert {(tmp_path / f).stat().st_size for f in files} == {64 * 1024}


async def test_invalid_settings_are_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="file"):
        async with open_journal(tmp_path, JournalSettings(file_size=1000)):
            pass


async def test_compaction_keeps_live_records(tmp_path: Path) -> None:
    settings = dataclasses.replace(SMALL, compact_min_files=0)  # no automatic compaction
    payload = b"p" * 2000
    async with open_journal(tmp_path, settings) as journal:
        for i in range(1, 301):
            await journal.add(i, 1, payload, sync=i % 50 == 0)
        for i in range(1, 301):
            if i % 10:
                await journal.delete(i, sync=i % 50 == 0)
        await journal.add(1000, 1, b"sync point")
        before = journal.stats().data_files
        report = await journal.compact()
        assert report.files_before >= report.files_after
        assert journal.stats().compactions == 1
        assert before > 1
    async with open_journal(tmp_path, settings) as journal:
        assert [r.id for r in journal.loaded.records] == [*range(10, 301, 10), 1000]
        assert all(r.payload == payload for r in journal.loaded.records[:-1])


async def test_closed_journal_refuses_writes(tmp_path: Path) -> None:
    async with open_journal(tmp_path) as journal:
        await journal.add(1, 1, b"x")
        await journal.aclose()
        await journal.aclose()  # idempotent
        with pytest.raises(JournalClosedError):
            journal.submit([Op.add(2, 1, b"y")])
        with pytest.raises(JournalClosedError):
            await journal.add(3, 1, b"z")


async def test_an_error_in_the_block_is_not_wrapped_and_the_journal_is_closed(
    tmp_path: Path,
) -> None:
    with pytest.raises(KeyError, match="boom"):
        async with open_journal(tmp_path) as journal:
            await journal.add(1, 1, b"x")
            raise KeyError("boom")
    with pytest.raises(JournalClosedError):
        journal.submit([Op.add(2, 1, b"y")])
    async with open_journal(tmp_path) as journal:  # the directory is free again
        assert [r.id for r in journal.loaded.records] == [1]


async def test_a_cancelled_waiter_still_learns_the_outcome(tmp_path: Path) -> None:
    async with open_journal(tmp_path) as journal:
        with trio.CancelScope() as scope:
            scope.cancel()
            # Already cancelled when called: nothing is queued, Cancelled is raised at once.
            await journal.add(1, 1, b"never")
        assert scope.cancelled_caught
        outcome: list[str] = []
        with trio.CancelScope() as scope:
            ticket = journal.submit([Op.add(2, 1, b"x" * 10_000)], sync=True)
            scope.cancel()
            await journal.wait(ticket)  # shielded: returns once durable despite the cancel
            outcome.append("durable")
            await trio.lowlevel.checkpoint()  # the cancel is delivered here
            outcome.append("not reached")
        assert outcome == ["durable"]
    async with open_journal(tmp_path) as journal:
        assert [r.id for r in journal.loaded.records] == [2]


# Non-sync submits with a long buffer timeout stay queued until something flushes them, so
# the tests below can cancel or close while the first waiter (the leader, which waits for
# the completion eventfd for everyone) is still waiting.
LAZY = JournalSettings(buffer_timeout_ns=10_000_000_000)


async def test_a_cancelled_leader_keeps_waiting_for_everyone(tmp_path: Path) -> None:
    events: list[str] = []
    async with open_journal(tmp_path, LAZY) as journal:

        async def wait_for(name: str, ticket: int, scope: trio.CancelScope) -> None:
            with scope:
                await journal.wait(ticket)
                events.append(f"{name} written")
                await trio.lowlevel.checkpoint()
                events.append(f"{name} not cancelled")

        scopes = [trio.CancelScope() for _ in range(3)]
        async with trio.open_nursery() as nursery:
            for i, scope in enumerate(scopes):
                ticket = journal.submit([Op.add(i, 1, b"x")], sync=False)
                nursery.start_soon(wait_for, f"w{i}", ticket, scope)
                await trio.testing.wait_all_tasks_blocked()
            assert events == []
            scopes[0].cancel()  # w0 leads: w1 and w2 are parked behind it
            await trio.testing.wait_all_tasks_blocked()
            assert events == []
            await journal.add(9, 1, b"sync", sync=True)  # flushes the queued ones too
    # w0 learns its outcome despite the cancel, which reaches it at its next checkpoint.
    assert sorted(events) == [
        "w0 written",
        "w1 not cancelled",
        "w1 written",
        "w2 not cancelled",
        "w2 written",
    ]
    assert [s.cancelled_caught for s in scopes] == [True, False, False]


async def test_close_settles_the_leader_and_the_parked(tmp_path: Path) -> None:
    written: list[int] = []
    async with open_journal(tmp_path, LAZY) as journal:

        async def wait_for(i: int, ticket: int) -> None:
            await journal.wait(ticket)
            written.append(i)

        async with trio.open_nursery() as nursery:
            for i in range(3):
                ticket = journal.submit([Op.add(i, 1, b"x")], sync=False)
                nursery.start_soon(wait_for, i, ticket)
            await trio.testing.wait_all_tasks_blocked()
            assert written == []
            await journal.aclose()  # flushes what is queued: every waiter learns it
    assert sorted(written) == [0, 1, 2]
    async with open_journal(tmp_path) as journal:
        assert [r.id for r in journal.loaded.records] == [0, 1, 2]


async def test_bad_ops_are_rejected_before_anything_is_queued(tmp_path: Path) -> None:
    async with open_journal(tmp_path) as journal:
        bad_ops: list[tuple[object, type[Exception], str | None]] = [
            (("frobnicate", 1), ValueError, "unknown op 'frobnicate'"),
            (("add", 1, 2), ValueError, r"expected \('add', id, record_type, payload\)"),
            (("add", 1, 2, "text"), TypeError, "payload must be bytes"),
            (("add", 1, 300, b"x"), OverflowError, None),
            (("delete", -1), OverflowError, None),
            ([], TypeError, "expected a tuple"),
            ((), ValueError, "empty"),
        ]
        for op, error, match in bad_ops:
            with pytest.raises(error, match=match):
                journal.submit([Op.add(50, 1, b"ok"), op], sync=True)  # type: ignore[list-item]
        await journal.add(1, 1, bytearray(b"bytearray is fine"))  # type: ignore[arg-type]
    async with open_journal(tmp_path) as journal:
        assert state(journal) == {1: (1, b"bytearray is fine", [])}


def test_op_constructors_and_repr() -> None:
    assert Op.add(1, 2, b"abc") == ("add", 1, 2, b"abc")
    assert Op.update_tx(9, 1, 2, b"") == ("update_tx", 9, 1, 2, b"")
    assert Op.rollback(3).kind == "rollback"
    assert repr(Op.add(1, 2, b"abc")) == "Op.add(1, 2, <3 bytes>)"


async def test_recovery_releases_the_load_reports(tmp_path: Path) -> None:
    # The broker's model holds a recovered backlog; the reports must not keep a second copy.
    from artemis_py.broker.persistence import Persistence
    from artemis_py.broker.store import JournalStore
    from artemis_py.storage import open_storage

    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        assert storage.messages.loaded is not None
        Persistence(JournalStore(storage), storage.node_id).recover()
        assert storage.messages.loaded is None
        assert storage.bindings.loaded is None
