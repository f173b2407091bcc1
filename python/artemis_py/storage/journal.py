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
* **Completion comes back through an eventfd**, and the writer is woken once per loop
  pass: both are :mod:`artemis_py.storage.completion`'s (shared with the page stores).
* **Blocking work runs in threads.** Opening (recovery), compaction and close go through
  ``trio.to_thread.run_sync`` without ``abandon_on_cancel``; the native calls release the GIL.
* **Waits are not abandoned.** :meth:`Journal.wait` returns only once the outcome is known
  (written, or failed), whatever happens to the caller meanwhile.
* **Non-sync writes** return as soon as they are queued; a later failure of the writer
  surfaces on the next awaited operation (the journal refuses writes once it has failed).
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import trio

from artemis_py import _native
from artemis_py.exceptions import JournalClosedError, JournalFailedError
from artemis_py.storage.completion import Completion, DeferredWake, Latencies
from artemis_py.storage.ops import Op
from artemis_py.storage.settings import JournalSettings


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
        self._completion = Completion(
            native, self._failure, JournalClosedError, f"journal {native.directory}"
        )
        self._wake = DeferredWake(native, self._completion)
        self._closed = False
        self._sync_plain = settings.sync_non_transactional

    @property
    def directory(self) -> Path:
        return self._native.directory

    @property
    def last_ticket(self) -> int:
        """The ticket of the latest submit (0: none yet)."""
        return self._completion.last_ticket

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
        ticket = self._completion.last_ticket = self._submit(ops, sync, flush)
        return ticket

    def at_pass_end(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` at the end of each pass of the Trio loop, before the writer is
        woken (its submits join that wake-up), and once more when the journal closes."""
        self._wake.pass_end_hooks.append(hook)

    def deferring(self) -> bool:
        """Whether a submit made now would leave waking the writer to the pass's end;
        then it is counted as this pass's submit, and records held until a pass-end hook
        submits them are written as soon as if they had been submitted now. (When not, the
        caller's own submit is the one counted, and wakes the writer at once.)"""
        return self._wake.would_defer() and self._wake.defer()

    def on_loop(self) -> bool:
        """Whether this call runs on the Trio thread of a journal still open: its pass-end
        hooks will run before anything submitted now is written."""
        return self._wake.loop_thread == threading.get_ident()

    def _submit(self, ops: Sequence[Op], sync: bool, flush: bool = False) -> int:
        if self._wake.defer():
            return self._native.submit(ops, sync, flush, defer=True)
        return self._native.submit(ops, sync, flush)

    def done(self, ticket: int) -> bool:
        """Whether ``ticket`` is durable (sync) or written (non-sync) already."""
        return self._completion.done(ticket)

    async def wait(self, ticket: int) -> None:
        """Return when ``ticket`` is durable (sync) or written (non-sync).

        Raises :class:`JournalFailedError` if the writer failed before reaching it. Not
        cancellable (see the module docstring): it always reports the outcome.
        """
        await self._completion.wait(ticket)

    async def append(self, ops: Sequence[Op], sync: bool | None = None) -> None:
        """Append ``ops`` as one batch (atomically: all land in one file and one write).

        With sync (default: per the settings) returns once they are durable; without, returns
        right after queueing.
        """
        if sync is None:
            sync = self.settings.sync_for(ops)
        await trio.lowlevel.checkpoint_if_cancelled()
        ticket = self._completion.last_ticket = self._submit(ops, sync)
        if sync:
            await self._completion.park(ticket)
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

    # -- replication (artemis_py.ha.replication; docs/journal.md "Replication stream") ---

    async def start_replication(self) -> _native.ReplicationStart:
        """Tap every later submit for a backup and roll over to a fresh file: ``files`` then
        hold everything submitted before (left unchanged until :meth:`stop_replication`),
        complete on disk once ticket ``through`` is."""
        return await trio.to_thread.run_sync(self._native.replication_start)

    def take_replicated(self) -> bytes:
        """The replication frames of the submits since the last take (b"" if none)."""
        return self._native.replication_take()

    def gate(self, on: bool) -> None:
        """While on, a ticket completes only once the backup has it too (:meth:`replicated`)."""
        self._native.replication_gate(on)

    def replicated(self, ticket: int) -> None:
        """The backup has every ticket through ``ticket`` durably."""
        self._native.replicated(ticket)

    def stop_replication(self) -> None:
        """No more tap and no gate; reclaim and compaction resume. Idempotent."""
        self._native.replication_stop()

    def apply_replicated(self, frames: bytes) -> tuple[int, int]:
        """A backup's side: submit the primary's ``frames`` as it did; the primary's last
        ticket in them and the local ticket of its submit (:meth:`wait` for it)."""
        primary, local = self._native.apply_replicated(frames)
        if local:
            self._completion.last_ticket = local
        return primary, local

    def replication_state(self) -> _native.ReplicationState:
        """The tap, the gate and what the backup has (management's lag)."""
        return self._native.replication_state()

    def remove_pass_end_hook(self, hook: Callable[[], None]) -> None:
        if hook in self._wake.pass_end_hooks:
            self._wake.pass_end_hooks.remove(hook)

    # -- maintenance ---------------------------------------------------------------------

    async def compact(self) -> _native.CompactionReport:
        """Rewrite the live records of old files (appends continue meanwhile)."""
        return await trio.to_thread.run_sync(self._native.compact)

    def stats(self) -> _native.JournalStats:
        return self._native.stats()

    @property
    def latencies(self) -> Latencies:
        """How long each batch's write and fdatasync took, as the loop saw it (metrics)."""
        return self._completion.latencies

    async def aclose(self) -> None:
        """Flush what is queued, stop the writer, release the files. Idempotent."""
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        self._wake.detach()  # nothing may wait for the loop's next pass from here on
        try:
            await trio.to_thread.run_sync(self._native.close)
        finally:
            # close() completed every queued ticket (or failed): settle all waiters now.
            self._completion.settle()

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
    journal._wake.attach()
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
        journal._wake.detach()
