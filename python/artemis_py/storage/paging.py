"""Page stores: the async facade over the native page files of each address.

Theory of operation
-------------------
* **One store per address**, a directory under the paging directory named by a fresh UUID
  and holding ``address.txt`` and the page files (format: ``docs/page-files.md``).
* **Appending never blocks the loop.** :meth:`PageStore.append` assigns each record its
  position ``(page, offset)`` at once and queues the encoded bytes for the store's Rust
  writer thread; appends made while a write is in flight share the next write and one
  fdatasync (group commit). It returns a ticket; :meth:`PageStore.wait` waits for it
  exactly as :meth:`Journal.wait <artemis_py.storage.journal.Journal.wait>` does (the same
  eventfd leader and parked waiters, :mod:`artemis_py.storage.completion`), so a page
  store can stand where a journal does in a broker ``Ticket``.
* **Reads see only written records.** :meth:`PageStore.read` and :meth:`PageStore.count`
  run in a worker thread with the GIL released, up to what the writer has written and never
  past a bad record.
* **Failure**: the first write or sync error fails the store; every later append and wait
  raises :class:`~artemis_py.exceptions.PageStoreFailedError` naming the file. What was
  synced stays; reopening recovers it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import trio

from artemis_py import _native
from artemis_py.exceptions import PageStoreClosedError, PageStoreFailedError, StorageError
from artemis_py.storage.completion import Completion, DeferredWake

ADDRESS_FILE = "address.txt"

#: ``(message_id, tx_id, queue_ids, message, queue_offset)``: one record to append
#: (``queue_offset``: the message's offset in its queues, :mod:`artemis_py.broker.offset_reading`).
NewRecord = tuple[int, int, Sequence[int], bytes, int]


@dataclass(frozen=True, slots=True)
class PagedRecord:
    """One record of a page: ``(page, offset)`` is its position in the store;
    ``queue_offset`` the message's offset in its queues (a version 1 page's records have
    none: their message id stands in for it, as for an old 8-byte ADD_REF)."""

    page: int
    offset: int
    message_id: int
    tx_id: int  # 0 = not transactional
    queue_ids: tuple[int, ...]
    message: bytes
    queue_offset: int = 0


def _records(
    raw: list[tuple[int, int, int, int, tuple[int, ...], bytes, int]],
) -> list[PagedRecord]:
    return [PagedRecord(*r) for r in raw]


class PageStore:
    """One address's page store. Get one from :func:`open_page_store`,
    :func:`create_page_store` or :func:`open_page_stores`; close it with :meth:`close`."""

    def __init__(self, native: _native.PageStore) -> None:
        self._native = native
        self.address: str = native.address
        self.directory = Path(native.directory)
        self.page_size: int = native.page_size
        #: What recovery cut off the last page: ``(page, offset)``, or None.
        self.torn: tuple[int, int] | None = native.torn
        self._completion = Completion(
            native,
            self._failure,
            PageStoreClosedError,
            f"page store {self.directory} (address {self.address!r})",
        )
        self._wake = DeferredWake(native)
        self._closed = False

    def __repr__(self) -> str:
        return f"PageStore(address={self.address!r}, directory={str(self.directory)!r})"

    def pages(self) -> list[int]:
        """Page numbers that exist, ascending (the current one included)."""
        return self._native.pages()

    def page_version(self, page: int) -> int | None:
        """The format version of ``page`` (None: no such page); version 1 records carry
        no queue offsets (their message ids stand in)."""
        return self._native.page_version(page)

    @property
    def current_page(self) -> int:
        """The page appends go to."""
        return self._native.current_page

    def end(self) -> tuple[int, int]:
        """``(page, offset)`` where the next record would go."""
        return self._native.end()

    def written(self) -> tuple[int, int]:
        """``(page, offset)`` up to which records are written (readable)."""
        return self._native.written()

    def stats(self) -> dict[str, int]:
        """Counters since opening: writes, syncs (fdatasyncs), records, bytes, pages_created."""
        return self._native.stats()

    # -- writing -------------------------------------------------------------------------

    def append(self, records: Sequence[NewRecord], sync: bool) -> tuple[int, list[tuple[int, int]]]:
        """Queue ``records`` and return ``(ticket, position of each)``; never blocks.

        Raises at once (nothing queued) if the store failed or is closed, or if a record is
        larger than 1 GiB. Pass the ticket to :meth:`wait`.
        """
        if self._closed:
            raise PageStoreClosedError(f"page store {self.directory} is closed")
        ticket, positions = self._native.append(records, sync, self._wake.defer())
        self._completion.last_ticket = ticket
        return ticket, positions

    def done(self, ticket: int) -> bool:
        """Whether ``ticket``'s records are written (and synced, if asked) already."""
        return self._completion.done(ticket)

    async def wait(self, ticket: int) -> None:
        """Return when ``ticket``'s records are written (and fdatasynced if any append of
        its batch asked for sync); raise PageStoreFailedError if the writer failed first.
        Not abandoned on cancellation: the caller always learns the outcome."""
        await self._completion.wait(ticket)

    # -- reading -------------------------------------------------------------------------

    async def read(
        self, page: int, offset: int, *, max_records: int, max_bytes: int
    ) -> tuple[list[PagedRecord], int, bool]:
        """Written records of ``page`` from ``offset`` (a record boundary): at most
        ``max_records`` and about ``max_bytes``, at least one if any is written.

        Returns ``(records, next_offset, page_done)``; ``page_done``: the page is finished
        and ``next_offset`` is its end. Offset 0 means the page's first record. Runs in a
        worker thread.
        """
        raw, next_offset, done = await trio.to_thread.run_sync(
            self._native.read, page, offset or PAGE_HEADER_SIZE, max_records, max_bytes
        )
        return _records(raw), next_offset, done

    async def count(self, page: int) -> dict[tuple[int, int], int]:
        """``{(queue_id, tx_id): records}`` of the written part of ``page``."""
        return await trio.to_thread.run_sync(self._native.count, page)

    # -- maintenance ---------------------------------------------------------------------

    async def delete_page(self, page: int) -> None:
        """Remove a finished page (not the current one); the directory is fsynced."""
        await trio.to_thread.run_sync(self._native.delete_page, page)

    async def delete(self) -> None:
        """Close the store and remove its files and directory (the address is gone)."""
        await self._finish(self._native.delete)

    async def close(self) -> None:
        """Write and sync what is queued, stop the writer. Idempotent; reads still work."""
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        await self._finish(self._native.close)

    aclose = close

    async def _finish(self, how: Callable[[], None]) -> None:
        self._closed = True
        self._wake.detach()
        try:
            await trio.to_thread.run_sync(how)
        finally:
            if not self._completion.settled:
                self._completion.settle()

    def _failure(self) -> PageStoreFailedError:
        """A fresh PageStoreFailedError (cause chained) for each task that raises it."""
        try:
            self._native.error()
        except PageStoreFailedError as exc:
            return exc
        return PageStoreFailedError(f"page store {self.directory} failed")


#: Bytes before a page's first record (the page header; see docs/page-files.md).
PAGE_HEADER_SIZE = 32


async def open_page_store(
    directory: Path, *, page_size: int, address: str | None = None
) -> PageStore:
    """Open (recover) the store in ``directory``; if it holds none, create one for
    ``address`` (required then). Recovery runs in a worker thread."""
    native = await trio.to_thread.run_sync(
        partial(_native.PageStore.open, os.fspath(directory), page_size=page_size, address=address)
    )
    store = PageStore(native)
    store._wake.attach()
    return store


def _usable_dir(paging_dir: Path) -> list[Path]:
    """Creates ``paging_dir`` if missing, checks it is writable; returns its store
    directories. An entry left by a creation cut short (no address file, no pages) is
    removed."""
    try:
        paging_dir.mkdir(parents=True, exist_ok=True)
        probe = paging_dir / f".probe-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
        entries = sorted(p for p in paging_dir.iterdir() if p.is_dir())
    except OSError as exc:
        raise StorageError(
            f"paging directory {paging_dir} is not usable: {exc.strerror or exc}"
        ) from exc
    stores = []
    for entry in entries:
        names = os.listdir(entry)
        if ADDRESS_FILE in names or any(n.endswith(".page") for n in names):
            stores.append(entry)
        else:
            shutil.rmtree(entry)
    return stores


async def create_page_store(paging_dir: Path, address: str, *, page_size: int) -> PageStore:
    """A new, empty store for ``address`` in a fresh directory under ``paging_dir``."""
    await trio.to_thread.run_sync(_usable_dir_exists, paging_dir)
    directory = paging_dir / uuid.uuid4().hex
    try:
        return await open_page_store(directory, page_size=page_size, address=address)
    except OSError as exc:
        raise StorageError(
            f"cannot create a page store for {address!r} in {paging_dir}: {exc.strerror or exc}"
        ) from exc


def _usable_dir_exists(paging_dir: Path) -> None:
    try:
        paging_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"paging directory {paging_dir} is not usable: {exc.strerror or exc}"
        ) from exc


async def open_page_stores(
    paging_dir: Path, *, page_size_for: Callable[[str], int]
) -> dict[str, PageStore]:
    """Every store under ``paging_dir`` (created if missing), keyed by address.

    Raises StorageError naming the directory if it cannot be created or written, and the
    recovery errors of any store (the stores opened before it are closed again).
    """
    directories = await trio.to_thread.run_sync(_usable_dir, paging_dir)
    stores: dict[str, PageStore] = {}
    try:
        for directory in directories:
            address = await trio.to_thread.run_sync(_stored_address, directory)
            if address is not None and address in stores:
                raise StorageError(
                    f"two page stores for address {address!r}: "
                    f"{stores[address].directory} and {directory}"
                )
            page_size = page_size_for(address) if address is not None else 10 * 1024 * 1024
            store = await open_page_store(directory, page_size=page_size)
            stores[store.address] = store
    except BaseException:
        with trio.CancelScope(shield=True):
            for store in stores.values():
                await store.close()
        raise
    return stores


def _stored_address(directory: Path) -> str | None:
    try:
        return (directory / ADDRESS_FILE).read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # the native open reports it, naming the directory


def read_page_file(path: Path) -> tuple[int, list[PagedRecord], tuple[int, str] | None]:
    """Offline and read-only: a page file's page number, its records, and the first bad
    spot ``(offset, why)`` if the records end before the file does."""
    page, raw, bad = _native.read_page_file(os.fspath(path))
    return page, _records(raw), bad
