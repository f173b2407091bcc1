"""The large-message store: one file per message body in ``large-messages-directory``.

Theory of operation
-------------------
A message too large for the journal has its body written to ``<message id>.msg`` (Artemis's
file naming) while the journal gets a small record without the body. This module knows
files and message ids only; which messages are large, and when a file may go, is the
broker's business (:mod:`artemis_py.broker.large_messages`).

* **Writes are tickets, like journal appends.** :meth:`LargeMessageStore.submit` queues a
  body and returns a ticket at once (no I/O on the loop). One writer task takes the queued
  bodies in batches and, in a worker thread, writes each file, fsyncs it, then fsyncs the
  directory once for the batch (so the new names are durable too). Tickets complete in
  order, so :meth:`wait` has the journal's contract: "ticket N done" means every ticket
  <= N is durable, and a store can stand in for a journal in a broker ``Ticket``.
* **A failure is sticky.** If a batch fails (disk full, I/O error), its tickets and every
  later one raise :class:`LargeMessageError`; the store writes nothing more until the node
  restarts. A later success must never let a waiter for a later ticket believe an earlier,
  failed one was written (the broker waits only for the highest ticket of a run).
* **Deletes wait for their reason.** :meth:`delete_after` takes an awaitable (the journal
  delete of the message becoming durable) and removes the files after it: a crash never
  leaves a journal record whose file is gone. A file that outlives its record (a crash
  between the two) is an orphan, removed at the next start.
* **A copy is a hard link.** A message copied under a new id (redistribution, dead
  letters, expiry) gets its file by :meth:`submit` with the source's id: a link (a copy
  where links are not supported), durable like a write.
* **Opening lists the directory** (in a thread): every ``<id>.msg`` file's length goes
  into :attr:`LargeMessageStore.found` (no body is read), from which recovery takes the
  files it needs; what is left there afterwards are orphans for :meth:`remove_orphans`.
* **Reading streams.** :func:`send_body` reads a file in chunks of :data:`CHUNK` bytes in
  a worker thread and hands each to the sender: a body is never in memory whole. A file
  being sent is *pinned* (:meth:`pin`): a delete that comes meanwhile (an auto-ack
  acknowledges at delivery) waits until it is unpinned.
* **A delete never overtakes a write**: it waits for every write (and link) submitted
  before it, so a link made from a file is durable before that file can go.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol

import trio

from artemis_py.exceptions import StorageError

log = logging.getLogger("artemis_py.storage.large_message_files")

SUFFIX = ".msg"
CHUNK = 256 * 1024  # bytes read from a file at a time when streaming a body

#: A write job: (ticket, message id, the body or the id of the file to link, when written).
_Job = tuple[int, int, "bytes | int", "Callable[[], None] | None"]


class LargeMessageError(StorageError):
    """A large-message file could not be written; the store refuses further writes."""


def file_name(message_id: int) -> str:
    return f"{message_id}{SUFFIX}"


class LargeMessageStore:
    """Large-message files of one node. Get one from :func:`open_large_message_store`."""

    def __init__(self, directory: Path, found: dict[int, int]) -> None:
        self.directory = directory
        #: Lengths of the files found at open, by message id; recovery pops the ones it uses.
        self.found = found
        self._writes_send, self._writes = trio.open_memory_channel[_Job](math.inf)
        self._deletes_send, self._deletes = trio.open_memory_channel[
            tuple[Callable[[], Awaitable[None]] | None, list[int], int]
        ](math.inf)
        self._pins: Counter[int] = Counter()  # files being sent
        self._unpinned_deletes: set[int] = set()  # deletes waiting for an unpin
        self._last_ticket = 0
        # A replicating primary's (artemis_py.ha.replication): told of every submit, in order.
        self.replica: Callable[[int, int, bytes | int], None] | None = None
        self._done = 0  # every ticket <= this one is durable (or failed)
        self._failed_at: int | None = None  # first ticket that failed
        self._failure: LargeMessageError | None = None
        self._progress = trio.Event()
        self.written = 0  # files written since open
        self.deleted = 0  # files deleted since open

    def path(self, message_id: int) -> Path:
        return self.directory / file_name(message_id)

    # -- writing -------------------------------------------------------------------------

    def submit(
        self, message_id: int, body: bytes | int, written: Callable[[], None] | None = None
    ) -> int:
        """Queue ``body`` as the file of ``message_id`` (an int: link the file of that
        message id); returns the ticket for :meth:`wait`. ``written`` is called once the
        file is durable.

        Never blocks and never copies ``body``. Raises at once if the store has failed.
        """
        if self._failure is not None:
            raise LargeMessageError(str(self._failure))
        self._last_ticket += 1
        self._writes_send.send_nowait((self._last_ticket, message_id, body, written))
        if self.replica is not None:
            self.replica(self._last_ticket, message_id, body)
        return self._last_ticket

    def done(self, number: int) -> bool:
        """Whether ticket ``number`` (and every earlier one) is durable already."""
        return self._done >= number

    async def wait(self, number: int) -> None:
        """Return once ticket ``number`` (and every earlier one) is durable; raises
        :class:`LargeMessageError` if it failed."""
        while True:
            if self._failed_at is not None and number >= self._failed_at:
                assert self._failure is not None
                raise self._failure
            if self._done >= number:
                return
            await self._progress.wait()

    async def _write_loop(self) -> None:
        async for job in self._writes:
            batch = [job]
            while True:
                try:
                    batch.append(self._writes.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            if self._failure is None:
                try:
                    await trio.to_thread.run_sync(self._write_files, batch)
                    self.written += len(batch)
                    for job in batch:
                        if job[3] is not None:
                            job[3]()
                except OSError as exc:
                    self._failed_at = batch[0][0]
                    self._failure = LargeMessageError(
                        f"cannot write large message file in {self.directory}: {exc}"
                    )
                    log.error("%s; large messages are refused until a restart", self._failure)
            self._done = batch[-1][0]
            self._progress.set()
            self._progress = trio.Event()

    def _write_files(self, batch: list[_Job]) -> None:
        """In a worker thread: write and fsync every file of ``batch``, then the directory."""
        for _, message_id, body, _ in batch:
            path = self.path(message_id)
            if isinstance(body, int):
                _link(self.path(body), path)
                continue
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
                try:
                    view = memoryview(body)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError:
                # A half-written file must not look like a complete one at the next start.
                path.unlink(missing_ok=True)
                raise
        _fsync_directory(self.directory)

    # -- deleting ------------------------------------------------------------------------

    def delete_after(self, after: Callable[[], Awaitable[None]] | None, ids: list[int]) -> None:
        """Remove the files of ``ids`` once ``after()`` returns (None: at once) and every
        write submitted before is done. If it raises (the journal failed), the files stay:
        the next start sorts them out."""
        if ids:
            self._deletes_send.send_nowait((after, ids, self._last_ticket))

    def pin(self, message_id: int) -> None:
        """The file is being sent: a delete waits until :meth:`unpin`."""
        self._pins[message_id] += 1

    def unpin(self, message_id: int) -> None:
        self._pins[message_id] -= 1
        if self._pins[message_id] <= 0:
            del self._pins[message_id]
            if message_id in self._unpinned_deletes:
                self._unpinned_deletes.discard(message_id)
                self.delete_after(None, [message_id])

    def remove_orphans(self, ids: Iterable[int]) -> None:
        """Files no journal record refers to (found at open): removed, logged once."""
        orphans = sorted(ids)
        if not orphans:
            return
        for message_id in orphans:
            self.found.pop(message_id, None)
        log.warning(
            "removing %d orphaned large message file(s) from %s (no journal record refers "
            "to them; a crash between a message's acknowledgement and its file's removal, "
            "or before its SEND was stored, leaves them)",
            len(orphans),
            self.directory,
        )
        self.delete_after(None, orphans)

    async def _delete_loop(self) -> None:
        async for after, ids, writes in self._deletes:
            try:
                if after is not None:
                    await after()
                # Earlier writes first (a link from one of these files, or the file itself).
                while self._done < writes:
                    await self._progress.wait()
            except StorageError as exc:
                log.warning("large message files %s kept: %s", ids, exc)
                continue
            pinned = [i for i in ids if i in self._pins]
            if pinned:
                self._unpinned_deletes.update(pinned)
                ids = [i for i in ids if i not in self._pins]
            if ids:
                await trio.to_thread.run_sync(self._delete_files, ids)

    def _delete_files(self, ids: list[int]) -> None:
        for message_id in ids:
            try:
                self.path(message_id).unlink(missing_ok=True)
                self.deleted += 1
            except OSError as exc:
                log.warning("cannot remove large message file %s: %s", self.path(message_id), exc)

    def _close(self) -> None:
        self._writes_send.close()
        self._deletes_send.close()


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _link(source: Path, target: Path) -> None:
    """``target`` becomes another name of ``source`` (fsynced by the caller's directory
    fsync); a copy where the file system has no hard links."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError as exc:
        if not source.exists():
            raise
        log.debug("cannot link %s (%s): copying it", source, exc)
        shutil.copyfile(source, target)
        fd = os.open(target, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _scan(directory: Path) -> dict[int, int]:
    """In a worker thread: create the directory if needed and list every ``<id>.msg``
    with its length."""
    directory.mkdir(parents=True, exist_ok=True)
    found: dict[int, int] = {}
    for entry in os.scandir(directory):
        name = entry.name
        if not name.endswith(SUFFIX) or not name[: -len(SUFFIX)].isdigit():
            continue
        found[int(name[: -len(SUFFIX)])] = entry.stat().st_size
    return found


class _Body(Protocol):
    """What :func:`send_body` needs of a body in a file (a broker ``LargeBody``)."""

    store: LargeMessageStore | None
    file_id: int
    length: int


async def send_body(
    body: _Body,
    send: Callable[[bytes], Awaitable[object]],
    sent: Callable[[int], None] | None = None,
) -> None:
    """Stream ``body``'s file to ``send`` in chunks of at most :data:`CHUNK` bytes, each
    read in a worker thread; ``sent(n)`` after each chunk. Raises
    :class:`LargeMessageError` if the file cannot be read or is shorter than it should be.
    The caller pinned the file (:meth:`LargeMessageStore.pin`)."""
    assert body.store is not None
    path = body.store.path(body.file_id)
    try:
        fd = await trio.to_thread.run_sync(os.open, path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise LargeMessageError(f"cannot read large message file {path}: {exc}") from exc
    try:
        offset, length = 0, body.length
        while offset < length:
            try:
                data = await trio.to_thread.run_sync(
                    os.pread, fd, min(CHUNK, length - offset), offset
                )
            except OSError as exc:
                raise LargeMessageError(f"cannot read large message file {path}: {exc}") from exc
            if not data:
                raise LargeMessageError(
                    f"large message file {path} holds {offset} bytes, not {length}"
                )
            await send(data)
            offset += len(data)
            if sent is not None:
                sent(len(data))
    finally:
        os.close(fd)


@asynccontextmanager
async def open_large_message_store(
    directory: str | os.PathLike[str],
) -> AsyncIterator[LargeMessageStore]:
    """Open (creating it if needed) a large-messages directory and run its writer tasks.

    On exit the queued writes and deletes complete before the tasks end, so close the
    store before the journals its deletes wait for.
    """
    path = Path(directory)
    try:
        found = await trio.to_thread.run_sync(_scan, path)
    except OSError as exc:
        raise LargeMessageError(f"cannot open large-messages directory {path}: {exc}") from exc
    store = LargeMessageStore(path, found)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store._write_loop)
        nursery.start_soon(store._delete_loop)
        try:
            yield store
        finally:
            store._close()
