"""The async journal: Trio tasks append records; one Rust writer thread makes them durable.

Theory of operation
-------------------
* **Submitting never blocks the loop.** :meth:`Journal.submit` is a plain call made on the
  Trio loop: the native journal validates the ops against its in-memory state, applies them
  there and queues them for its writer thread, with no I/O. Validation errors
  (:class:`~artemis_py.exceptions.RecordNotFoundError` ...) are raised right there and nothing
  is queued. The order of submits on the loop is the order in the journal.
* **One writer thread per journal** (in Rust) drains the queue in batches: one write and one
  fdatasync per batch (group commit, Artemis's TimedBuffer). Each submit gets a ticket;
  tickets complete in order, so "ticket N completed" means every ticket <= N is done.
* **Completion comes back through an eventfd.** After every batch the writer adds 1 to the
  journal's eventfd. There is no pump task: the first task to wait becomes the *leader* and
  waits for the eventfd itself with ``trio.lowlevel.wait_readable``; later waiters park in a
  heap ordered by ticket. Before each wait the leader resets the eventfd, reads
  ``progress()`` and wakes every waiter whose ticket is <= the completed ticket; resetting
  before reading progress means no completion is missed. After a wake-up it reads progress
  again; if that settles its own ticket it returns at once and leaves the reset to the next
  leader (which does it after its submit, off the path from completion to that submit).
  When its own ticket is done the leader hands the role to the lowest waiter still parked
  (it is woken to lead) or, if none is, leaves it vacant. A lone appender is thus woken
  straight from the loop's poll, with no pump task between (one run-loop pass per append
  instead of two). If the writer failed, every waiter above the completed ticket gets
  :class:`~artemis_py.exceptions.JournalFailedError`.
* **Invariant:** while any waiter is parked there is a leader, and it is waiting for the
  eventfd or about to read progress; every completion after the last reset leaves the
  eventfd readable.
* **One writer wake-up per loop pass.** A submit made on the Trio thread leaves the writer
  asleep (a deferred ``submit``) and marks the journal; a Trio instrument wakes the writer of
  each marked journal in ``before_io_wait``, i.e. once the tasks runnable in this pass have
  run and before the loop polls. The submits of one pass therefore share a batch and one
  wake-up (a futex call and a context switch), where waking on the first submit had the
  writer write that one alone while the rest of the pass queued behind its fdatasync. The
  delay is the rest of the pass, which runs on the CPU anyway; the loop never blocks with a
  deferred wake pending. Sparse traffic keeps the immediate wake-up: when the last pass
  that submitted anything submitted once, the first submit of a pass wakes the writer at
  once, so a lone producer's fdatasync overlaps the rest of its pass (scenario 1 of the
  benchmark lost ~15% without this). Submits from other threads wake the writer at once.
* **Blocking work runs in threads.** Opening (recovery), compaction and close go through
  ``trio.to_thread.run_sync`` without ``abandon_on_cancel``; the native calls release the GIL.
* **Waits are not abandoned.** :meth:`Journal.wait` returns only once the outcome is known
  (written, or failed); a cancellation that arrives meanwhile is delivered at the caller's
  next checkpoint. So a cancelled caller never believes a record was not written when it was.
* **Non-sync writes** return as soon as they are queued; a later failure of the writer
  surfaces on the next awaited operation (the journal refuses writes once it has failed).
"""

from __future__ import annotations

import heapq
import os
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import outcome
import trio

from artemis_py import _native
from artemis_py.exceptions import JournalClosedError, JournalFailedError
from artemis_py.storage.ops import Op
from artemis_py.storage.settings import JournalSettings


def _not_cancellable(_: object) -> trio.lowlevel.Abort:
    # A waiter learns the outcome of its write whatever happens to its caller: a cancelled
    # client gets "outcome unknown" from its own code, never a false "not written".
    return trio.lowlevel.Abort.FAILED


class Journal:
    """An open journal. Get one from :func:`open_journal`.

    ``loaded`` is what recovery found when it was opened: live records (with their updates),
    prepared transactions, and where a torn tail was cut off. Whoever rebuilds its state from
    it sets it to None afterwards, so that a recovered backlog is not kept in memory twice.
    """

    def __init__(
        self, native: _native.Journal, loaded: _native.LoadReport, settings: JournalSettings
    ) -> None:
        self._native = native
        self.loaded: _native.LoadReport | None = loaded
        self.settings = settings
        # (ticket, id(task), task): a task waits for one ticket at a time, so the id keeps
        # equal tickets from comparing tasks.
        self._waiters: list[tuple[int, int, trio.lowlevel.Task]] = []
        self._last_ticket = 0
        self._fd = native.fileno()
        # True while some task leads (waits for the eventfd for everyone).
        self._leading = False
        self._closed = False
        # Set once close() has returned and every outcome is final: nothing can park then.
        self._settled = False
        self._sync_plain = settings.sync_non_transactional
        # The Trio thread whose instrument wakes the writer (see the module docstring);
        # None: every submit wakes it.
        self._loop_thread: int | None = None
        self._wake_due = False
        self._pass_submits = 0  # submits in this loop pass
        self._last_pass_submits = 0  # in the last pass that submitted anything

    @property
    def directory(self) -> Path:
        return self._native.directory

    # -- writing -------------------------------------------------------------------------

    def submit(self, ops: Sequence[Op], sync: bool | None = None, *, flush: bool = False) -> int:
        """Queue ``ops`` as one batch and return its ticket; never blocks.

        ``sync=None`` applies the settings (see :meth:`JournalSettings.sync_for`). A non-sync
        batch waits up to journal-buffer-timeout for company, unless ``flush``: then it is
        written as soon as a sync one would be, without the fdatasync (a process crash
        cannot undo it; the next synced batch makes it durable). Raises the validation
        errors at once; nothing is queued then. Pass the ticket to :meth:`wait`.
        """
        if sync is None:
            sync = self.settings.sync_for(ops)
        ticket = self._last_ticket = self._submit(ops, sync, flush)
        return ticket

    def _submit(self, ops: Sequence[Op], sync: bool, flush: bool = False) -> int:
        if self._loop_thread != threading.get_ident():
            return self._native.submit(ops, sync, flush)
        self._pass_submits += 1
        if self._pass_submits == 1 and self._last_pass_submits <= 1:
            return self._native.submit(ops, sync, flush)  # sparse traffic: wake it now
        ticket = self._native.submit(ops, sync, flush, defer=True)
        self._wake_due = True
        return ticket

    def _wake_writer(self) -> None:
        """Before the loop polls: wake the writer if a deferred submit left it asleep."""
        if self._pass_submits:
            self._last_pass_submits = self._pass_submits
            self._pass_submits = 0
        if self._wake_due:
            self._wake_due = False
            self._native.wake_writer()

    async def wait(self, ticket: int) -> None:
        """Return when ``ticket`` is durable (sync) or written (non-sync).

        Raises :class:`JournalFailedError` if the writer failed before reaching it. Not
        cancellable (see the module docstring): it always reports the outcome.
        """
        if ticket > self._last_ticket:
            raise ValueError(f"ticket {ticket} was never issued by this journal")
        completed, failed = self._native.progress()
        if ticket <= completed:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        if failed:
            await trio.lowlevel.cancel_shielded_checkpoint()
            raise self._failure()
        await self._park(ticket)

    async def _park(self, ticket: int) -> None:
        """Return (or raise) once ``ticket``'s outcome is known, leading if nobody does.

        Needs no look at ``progress()`` before parking: every completion or failure after the
        caller's submit (or its own check) pokes the eventfd, and the leader reads progress
        after resetting it, so the ticket's outcome reaches this task.
        """
        if self._settled:
            raise JournalClosedError(
                f"journal {self.directory} is closed; the outcome of ticket {ticket} is unknown"
            )
        if self._leading:
            # Park the task itself (no Event, no shielded scope: this is the hot path of
            # every synced append). The leader reschedules it with the outcome, or with
            # True to make it the next leader.
            task = trio.lowlevel.current_task()
            heapq.heappush(self._waiters, (ticket, id(task), task))
            if not await trio.lowlevel.wait_task_rescheduled(_not_cancellable):
                return
        # Lead: wait for the eventfd and wake the waiters that each completion settles, until
        # this ticket's outcome is known.
        self._leading = True
        fd = self._fd
        shield = False
        try:
            while True:
                # Reset, then read progress: a completion after the reset leaves it readable.
                try:  # not contextlib.suppress: this runs once per batch
                    os.eventfd_read(fd)
                except BlockingIOError:
                    pass
                completed, failed = self._dispatch()
                if ticket <= completed:
                    # Done before we waited (non-sync, or a fast disk): still yield once.
                    await trio.lowlevel.cancel_shielded_checkpoint()
                    return
                if failed:
                    raise self._failure()
                if self._settled:
                    raise JournalClosedError(
                        f"journal {self.directory} closed before the write completed"
                    )
                try:
                    if shield:
                        with trio.CancelScope(shield=True):
                            await trio.lowlevel.wait_readable(fd)
                    else:
                        # Unshielded: a shield costs ~8 us per wait here. A cancel (rare)
                        # switches this leader to shielded waits instead.
                        await trio.lowlevel.wait_readable(fd)
                except trio.Cancelled:
                    # Not abandoned (module docstring): the caller's scope stays cancelled,
                    # so its next checkpoint raises this again.
                    shield = True
                    continue
                # The usual wake-up completes this ticket: return without the reset, which
                # the next leader does after its submit, off the path to it.
                if ticket <= self._dispatch()[0]:
                    return
        finally:
            # Hand over: the lowest parked ticket leads next. It resets and reads progress
            # before it waits, so nothing completed meanwhile is missed.
            if self._waiters:
                task = heapq.heappop(self._waiters)[2]
                trio.lowlevel.reschedule(task, outcome.Value(True))
            else:
                self._leading = False

    async def append(self, ops: Sequence[Op], sync: bool | None = None) -> None:
        """Append ``ops`` as one batch (atomically: all land in one file and one write).

        With sync (default: per the settings) returns once they are durable; without, returns
        right after queueing.
        """
        if sync is None:
            sync = self.settings.sync_for(ops)
        await trio.lowlevel.checkpoint_if_cancelled()
        ticket = self._last_ticket = self._submit(ops, sync)
        if sync:
            await self._park(ticket)
        else:
            # Queued: yield to other tasks, but never report a queued write as cancelled.
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def add(
        self, id: int, record_type: int, payload: bytes, *, sync: bool | None = None
    ) -> None:
        await self.append(
            [Op.add(id, record_type, payload)], self._sync_plain if sync is None else sync
        )

    async def update(
        self, id: int, record_type: int, payload: bytes, *, sync: bool | None = None
    ) -> None:
        await self.append(
            [Op.update(id, record_type, payload)], self._sync_plain if sync is None else sync
        )

    async def delete(self, id: int, *, sync: bool | None = None) -> None:
        await self.append([Op.delete(id)], self._sync_plain if sync is None else sync)

    # Records inside a transaction never wait: the commit (or prepare) makes them durable.

    async def add_tx(self, tx_id: int, id: int, record_type: int, payload: bytes) -> None:
        await self.append([Op.add_tx(tx_id, id, record_type, payload)], False)

    async def update_tx(self, tx_id: int, id: int, record_type: int, payload: bytes) -> None:
        await self.append([Op.update_tx(tx_id, id, record_type, payload)], False)

    async def delete_tx(self, tx_id: int, id: int) -> None:
        await self.append([Op.delete_tx(tx_id, id)], False)

    async def prepare(self, tx_id: int, xid: bytes, *, sync: bool | None = None) -> None:
        await self.append([Op.prepare(tx_id, xid)], sync)

    async def commit(self, tx_id: int, *, sync: bool | None = None) -> None:
        await self.append([Op.commit(tx_id)], sync)

    async def rollback(self, tx_id: int, *, sync: bool | None = None) -> None:
        await self.append([Op.rollback(tx_id)], sync)

    # -- maintenance ---------------------------------------------------------------------

    async def compact(self) -> _native.CompactionReport:
        """Rewrite the live records of old files (appends continue meanwhile)."""
        return await trio.to_thread.run_sync(self._native.compact)

    def stats(self) -> _native.JournalStats:
        return self._native.stats()

    async def aclose(self) -> None:
        """Flush what is queued, stop the writer, release the files. Idempotent."""
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        self._loop_thread = None  # nothing may wait for the loop's next pass from here on
        self._wake_writer()
        try:
            await trio.to_thread.run_sync(self._native.close)
        finally:
            # close() completed every queued ticket (or failed): settle all waiters now.
            # The leader is woken by that completion's poke; poke once more in case close()
            # had no batch to complete, so it never waits on a closed journal.
            self._settled = True
            self._dispatch()
            self._settle_all(
                JournalClosedError(f"journal {self.directory} closed before the write completed")
            )
            os.eventfd_write(self._fd, 1)

    # -- completion ----------------------------------------------------------------------

    def _dispatch(self) -> tuple[int, bool]:
        """Wake every parked waiter whose outcome is known; return ``progress()``."""
        completed, failed = self._native.progress()
        waiters = self._waiters
        while waiters and waiters[0][0] <= completed:
            trio.lowlevel.reschedule(heapq.heappop(waiters)[2], outcome.Value(None))
        if failed:
            while waiters:
                task = heapq.heappop(waiters)[2]
                trio.lowlevel.reschedule(task, outcome.Error(self._failure()))
        return completed, failed

    def _settle_all(self, error: BaseException) -> None:
        while self._waiters:
            task = heapq.heappop(self._waiters)[2]
            trio.lowlevel.reschedule(task, outcome.Error(error))

    def _failure(self) -> JournalFailedError:
        """A fresh JournalFailedError (cause chained) for each task that raises it."""
        try:
            self._native.error()
        except JournalFailedError as exc:
            return exc
        return JournalFailedError(f"journal {self.directory} failed")


@asynccontextmanager
async def open_journal(
    directory: str | os.PathLike[str],
    settings: JournalSettings | None = None,
    *,
    file_prefix: str = "activemq-data",
    file_extension: str = "amq",
) -> AsyncIterator[Journal]:
    """Open (creating if needed) and recover the journal in ``directory``.

    Data files are ``<file_prefix>-<N>.<file_extension>``. Closing the block flushes and
    closes the journal.
    """
    settings = settings if settings is not None else JournalSettings()
    open_native = partial(
        _native.Journal.open,
        os.fspath(directory),
        file_prefix=file_prefix,
        file_extension=file_extension,
        file_size=settings.file_size,
        min_files=settings.min_files,
        pool_files=settings.pool_files,
        buffer_size=settings.buffer_size,
        buffer_timeout_ns=settings.buffer_timeout_ns,
        datasync=settings.datasync,
        compact_min_files=settings.compact_min_files,
        compact_percentage=settings.compact_percentage,
    )
    native, loaded = await trio.to_thread.run_sync(open_native)
    journal = Journal(native, loaded, settings)
    waker = _WriterWaker(journal)
    trio.lowlevel.add_instrument(waker)
    journal._loop_thread = threading.get_ident()
    try:
        try:
            yield journal
        except BaseException:
            with trio.CancelScope(shield=True):
                try:
                    await journal.aclose()
                except JournalFailedError:
                    # A failed writer is reported once: close() raises it again, which
                    # adds nothing to the block's own error. Any other close error wins,
                    # chained to the block's, as from a `finally:`.
                    pass
            raise
        with trio.CancelScope(shield=True):
            await journal.aclose()
    finally:
        journal._loop_thread = None
        journal._wake_writer()
        trio.lowlevel.remove_instrument(waker)


class _WriterWaker(trio.abc.Instrument):
    """Wakes one journal's writer before the loop polls (see the module docstring)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def before_io_wait(self, timeout: float) -> None:
        self.journal._wake_writer()
