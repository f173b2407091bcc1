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
  journal's eventfd. One pump task per journal waits for it with
  ``trio.lowlevel.wait_readable``, resets it, reads ``progress()`` and wakes every waiter
  whose ticket is <= the completed ticket (waiters sit in a heap ordered by ticket). Resetting
  before reading progress means no completion is missed. If the writer failed, every waiter
  above the completed ticket gets :class:`~artemis_py.exceptions.JournalFailedError`.
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
    prepared transactions, and where a torn tail was cut off.
    """

    def __init__(
        self, native: _native.Journal, loaded: _native.LoadReport, settings: JournalSettings
    ) -> None:
        self._native = native
        self.loaded = loaded
        self.settings = settings
        # (ticket, id(task), task): a task waits for one ticket at a time, so the id keeps
        # equal tickets from comparing tasks.
        self._waiters: list[tuple[int, int, trio.lowlevel.Task]] = []
        self._last_ticket = 0
        self._pump_scope: trio.CancelScope | None = None
        # True while the pump runs: only then can a parked waiter be woken.
        self._pumping = False
        self._closed = False
        self._sync_plain = settings.sync_non_transactional

    @property
    def directory(self) -> Path:
        return self._native.directory

    # -- writing -------------------------------------------------------------------------

    def submit(self, ops: Sequence[Op], sync: bool | None = None) -> int:
        """Queue ``ops`` as one batch and return its ticket; never blocks.

        ``sync=None`` applies the settings (see :meth:`JournalSettings.sync_for`). Raises the
        validation errors at once; nothing is queued then. Pass the ticket to :meth:`wait`.
        """
        if sync is None:
            sync = self.settings.sync_for(ops)
        ticket = self._native.submit(ops, sync)
        self._last_ticket = ticket
        return ticket

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
        """Sleep until the pump reports ``ticket``'s outcome.

        Needs no look at ``progress()`` first: the pump cannot run between the caller's
        submit (or its own check) and this park, and every completion or failure after that
        pokes the eventfd, so the pump's next dispatch sees this waiter.
        """
        if not self._pumping:
            raise JournalClosedError(
                f"journal {self.directory} is closed; the outcome of ticket {ticket} is unknown"
            )
        # Park the task itself (no Event, no shielded scope: this is the hot path of every
        # synced append); the pump reschedules it with the outcome.
        task = trio.lowlevel.current_task()
        heapq.heappush(self._waiters, (ticket, id(task), task))
        await trio.lowlevel.wait_task_rescheduled(_not_cancellable)

    async def append(self, ops: Sequence[Op], sync: bool | None = None) -> None:
        """Append ``ops`` as one batch (atomically: all land in one file and one write).

        With sync (default: per the settings) returns once they are durable; without, returns
        right after queueing.
        """
        if sync is None:
            sync = self.settings.sync_for(ops)
        await trio.lowlevel.checkpoint_if_cancelled()
        ticket = self._last_ticket = self._native.submit(ops, sync)
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
        try:
            await trio.to_thread.run_sync(self._native.close)
        finally:
            # close() completed every queued ticket (or failed): settle all waiters now.
            self._dispatch()
            self._settle_all(
                JournalClosedError(f"journal {self.directory} closed before the write completed")
            )
            self._pumping = False
            if self._pump_scope is not None:
                self._pump_scope.cancel()

    # -- completion pump -----------------------------------------------------------------

    async def _pump(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        fd = self._native.fileno()
        # Shielded: waiters wait shielded, so the pump must outlive any outer cancellation;
        # aclose() stops it explicitly.
        with trio.CancelScope(shield=True) as scope:
            self._pump_scope = scope
            self._pumping = True
            task_status.started()
            try:
                while True:
                    await trio.lowlevel.wait_readable(fd)
                    try:  # not contextlib.suppress: this runs once per batch
                        os.eventfd_read(fd)
                    except BlockingIOError:
                        pass
                    self._dispatch()
            finally:
                self._pumping = False
                self._settle_all(JournalClosedError(f"journal {self.directory} closed"))

    def _dispatch(self) -> None:
        completed, failed = self._native.progress()
        waiters = self._waiters
        while waiters and waiters[0][0] <= completed:
            trio.lowlevel.reschedule(heapq.heappop(waiters)[2], outcome.Value(None))
        if failed:
            while waiters:
                task = heapq.heappop(waiters)[2]
                trio.lowlevel.reschedule(task, outcome.Error(self._failure()))

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
    # The body's exception (and close()'s) are re-raised outside the nursery that hosts the
    # pump, so callers see them as raised rather than wrapped in an ExceptionGroup.
    body_error: BaseException | None = None
    close_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(journal._pump)
            try:
                yield journal
            except BaseException as exc:
                body_error = exc
            with trio.CancelScope(shield=True):
                try:
                    await journal.aclose()
                except BaseException as exc:
                    close_error = exc
    finally:
        # A no-op unless the pump failed to start or failed itself.
        with trio.CancelScope(shield=True):
            await journal.aclose()
    # A failed writer is reported once: close() raises JournalFailedError again, which adds
    # nothing if the block already raised. Any other close error wins, as from a `finally:`.
    if close_error is not None and not (
        body_error is not None and isinstance(close_error, JournalFailedError)
    ):
        close_error.__context__ = body_error
        raise close_error
    if body_error is not None:
        raise body_error
