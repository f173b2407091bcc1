"""The node's paging: global memory limits, every address's paging, recovery of cursors.

The manager owns what spans addresses: the node's size and message count against
``global-max-size`` / ``global-max-messages``, the page stores (one per address, created
when the address first pages), the tasks that depage and delete completed pages, and the
journal records of paging (PAGE_ACK, PAGE_COMPLETE, PAGE_TX; formats in
:mod:`artemis_py.broker.records`).

``global-max-size`` left at -1 means 1 GiB, or a quarter of the machine's memory if that is
smaller: Artemis's default is half the JVM heap, 1 GiB with the 2 GiB heap of an instance
it creates; artemis-py has no heap, and a Python message costs more than its size.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.adopted_streams import adopt
from artemis_py.broker.message import MessageReference
from artemis_py.broker.paging import by_offset, recovery
from artemis_py.broker.paging.address import (
    BLOCK,
    DROP,
    MEMORY,
    PAGE,
    AddressPaging,
    Held,
)
from artemis_py.broker.paging.cursor import PageCursor
from artemis_py.broker.paging.disk import DiskMonitor
from artemis_py.broker.pending import durable
from artemis_py.broker.records import page_ack_op, page_complete_op
from artemis_py.exceptions import StorageError
from artemis_py.storage import Op
from artemis_py.storage.paging import create_page_store

if TYPE_CHECKING:
    from artemis_py.broker.journal_recovery import RecoveredState
    from artemis_py.broker.message import Message
    from artemis_py.broker.pending import Pending, Ticket
    from artemis_py.broker.persistence import Persistence
    from artemis_py.broker.queue import Queue
    from artemis_py.config import AddressSettings, BrokerConfig
    from artemis_py.storage.paging import PageStore

log = logging.getLogger("artemis_py.broker.paging")

GiB = 1 << 30


def default_global_max_size() -> int:
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return GiB
    return min(GiB, physical // 4)


class Placement:
    """Where a send goes: queues in memory (with their memory shares), address page groups,
    or a wait before placing it again (BLOCK, or a page store being created). ``offset``:
    the message's offset in the queues in memory, arriving there until it is enqueued.
    (A plain class: one is made per message, in half the time of a dataclass with its
    default factories.)"""

    __slots__ = ("adopt", "held", "memory", "offset", "paged", "wait")

    def __init__(
        self, offset: int = 0, paged: list[tuple[AddressPaging, list[Queue]]] | None = None
    ) -> None:
        self.memory: list[Queue] = []
        self.held: list[tuple[Held, list[Queue]]] = []
        self.paged = [] if paged is None else paged
        self.wait: Callable[[], Awaitable[object]] | None = None
        self.offset = offset
        self.adopt: str | None = None  # this node's id when the message may keep a moved offset

    def in_memory(self, paging: AddressPaging, group: list[Queue], size: int) -> None:
        """``group``, queues of ``paging``'s address, take the message in memory: its
        ``size`` is held there, and it is arriving in them until it is enqueued."""
        self.memory += group
        self.held.append((paging.hold(size, len(group)), group))
        for queue in group:
            queue.arriving.add(self.offset)

    def enqueue(self, message: Message) -> None:
        """The send is durable: ``message`` reaches its queues in memory."""
        if message.body_ref is not None:  # its body went to its file since it was placed
            size = message.memory_size
            for share, _ in self.held:
                share.shrink(size)
        offset = self.offset
        for share, queues in self.held:
            for queue in queues:
                queue.arriving.discard(offset)
                ref = MessageReference(message, queue, 0, offset)
                if self.adopt is not None:
                    adopt(ref, self.adopt)
                ref.held = share
                queue.add(ref)

    def release(self) -> None:
        """Give back the memory reserved for a send that will not happen (and the offset
        its page records, if any were appended, hold: they never count)."""
        for share, queues in self.held:
            share.paging.release(share.size, 1)
            for queue in queues:
                queue.arriving.discard(self.offset)
        self.held.clear()
        for _, queues in self.paged:
            for queue in queues:
                queue.arriving.discard(self.offset)


class PagingManager:
    """Paging and memory limits for one node."""

    def __init__(
        self,
        config: BrokerConfig,
        persistence: Persistence,
        paging_directory: Path | None,
        stores: dict[str, PageStore] | None = None,
        disk: DiskMonitor | None = None,
    ) -> None:
        self.config = config
        # The disk under the data directories (none watched without persistence).
        self.disk = disk if disk is not None else DiskMonitor(config, [])
        self.persistence = persistence
        self.directory = paging_directory
        self.size = 0
        self.messages = 0
        self.global_max_size = (
            config.global_max_size if config.global_max_size >= 0 else default_global_max_size()
        )
        self.global_max_messages = config.global_max_messages
        self.addresses: dict[str, AddressPaging] = {}
        self.committed_txs: dict[int, int] = {}  # tx id -> its PAGE_TX record id
        self._nursery: trio.Nursery | None = None
        self._stores = stores or {}
        self._completions: list[Ticket] = []  # of the latest PAGE_COMPLETE records
        self._creating: set[AddressPaging] = set()  # addresses whose store is being created
        # Acks of depaged messages in transactions not submitted yet (see submitting).
        self._tx_acks: dict[int, list[Callable[[], None]]] = {}
        # Who waits for a cursor's read to end, by queue id (the expiry reaper).
        self._read_ended: dict[int, trio.Event] = {}

    # -- limits ----------------------------------------------------------------------------

    def settings_for(self, address: str) -> AddressSettings:
        return self.config.address_settings_for(address)

    def global_full(self) -> bool:
        return self.size >= self.global_max_size or (0 <= self.global_max_messages <= self.messages)

    def global_limit_text(self) -> str:
        if self.size >= self.global_max_size:
            return f"global-max-size {self.global_max_size} ({self.size} bytes held)"
        return f"global-max-messages {self.global_max_messages} ({self.messages} messages held)"

    def pending_stores(self) -> list[str]:
        """Addresses of the stores opened at start and not yet attached (recovery)."""
        return list(self._stores)

    def address(self, name: str) -> AddressPaging:
        paging = self.addresses.get(name)
        if paging is None:
            paging = self.addresses[name] = AddressPaging(self, name)
            store = self._stores.pop(name, None)
            if store is not None:
                paging.store = store
        return paging

    # -- sending ---------------------------------------------------------------------------

    def place(
        self,
        message: Message,
        queues: list[Queue],
        offset: int,
        *,
        internal: bool = False,
        watch_disk: bool | None = None,
    ) -> Placement:
        """Decide, per address of ``queues``, whether ``message`` goes to memory or pages;
        in memory it is at ``offset`` (:mod:`artemis_py.broker.offset_reading`).
        ``watch_disk`` (default: not ``internal``): a full disk holds, fails or drops the
        send by ``disk-full-policy`` (:mod:`.disk`); a client's transaction is placed as
        ``internal`` and still watches the disk.

        Raises :class:`~.address.Full` (FAIL) before anything is reserved.
        """
        placement = Placement(offset)
        groups: dict[str, list[Queue]]
        known: str | None = None  # the decision for the one group, when made already
        disk_full = self.disk.full and (not internal if watch_disk is None else watch_disk)
        if len(queues) == 1:  # (the usual case: one queue)
            queue = queues[0]
            paging = self.addresses.get(queue.address) or self.address(queue.address)
            known = paging.decide(internal=internal, disk_full=disk_full)
            if known is MEMORY:  # (and the usual decision)
                placement.in_memory(paging, [queue], message.memory_size)
                return placement
            groups = {queue.address: [queue]}
        else:
            groups = {}
            for queue in queues:
                groups.setdefault(queue.address, []).append(queue)
        decided = []
        for name, group in groups.items():
            paging = self.address(name)
            decision = (
                paging.decide(internal=internal, disk_full=disk_full) if known is None else known
            )
            if decision is BLOCK:
                placement.wait = paging.room
                return placement
            if decision is PAGE and paging.store is None:
                # The first message over the limit: its store is created in the background
                # and it stays in memory (none are paged yet, so the order holds). Clients'
                # sends wait for the store before they are placed (see creating_stores), so
                # the limit holds from the first message.
                decision = MEMORY
                self._create_store(paging)
            decided.append((paging, decision, group))
        for paging, decision, group in decided:
            if decision is MEMORY:
                placement.in_memory(paging, group, message.memory_size)
            elif decision is PAGE:
                placement.paged.append((paging, group))
            # DROP: those queues do not get the message
        return placement

    def creating_stores(self) -> bool:
        """Whether a page store is being created (for an address's first paging)."""
        return bool(self._creating)

    async def stores_created(self) -> None:
        """Return once no page store is being created. A client connection waits for this
        before it places a send: then no burst piles up in memory while an address's first
        page store is made (a few milliseconds, once per address), and its sends are paged
        in their order."""
        while self._creating:
            await next(iter(self._creating)).store_created()

    def _create_store(self, paging: AddressPaging) -> None:
        if (
            paging.creating
            or self.directory is None  # persistence is off: nowhere to page
            or self._nursery is None  # the node is not running yet
            or trio.current_time() < paging.retry_at  # the last attempt failed just now
        ):
            return
        paging.creation_started()
        self._creating.add(paging)
        self._nursery.start_soon(self._open_store, paging)

    async def _open_store(self, paging: AddressPaging) -> None:
        failed = True
        try:
            paging.store = await self.create_store(paging.address)
            failed = False
        except Exception as exc:  # reported; the address keeps its messages in memory
            log.error("address %s: cannot create its page store: %s", paging.address, exc)
        finally:
            self._creating.discard(paging)
            paging.creation_ended(failed=failed)

    def committing(self, tx_id: int, record_id: int) -> None:
        """A transaction paged messages; its PAGE_TX record (kept until the last of its
        pages is deleted) is ``record_id``."""
        self.committed_txs[tx_id] = record_id

    def settle_soon(self, pending: Pending) -> None:
        """Settle an internal operation's pending in the background (nobody waits for it)."""
        if pending.immediate or self._nursery is None:
            pending.complete()  # nothing paged: effects at once, as before paging existed
            return
        self._nursery.start_soon(pending.settled)

    async def create_store(self, address: str) -> PageStore:
        assert self.directory is not None
        settings = self.settings_for(address)
        return await create_page_store(self.directory, address, page_size=settings.page_size_bytes)

    # -- depaging, completion, deletion ----------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the depaging and page-deletion tasks until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            for paging in self.addresses.values():
                for cursor in list(paging.cursors.values()):
                    self.kick(paging, cursor)
                self._delete_completed(paging)
            await trio.sleep_forever()

    def kick(self, paging: AddressPaging, cursor: PageCursor) -> None:
        """Let ``cursor`` depage if its queue may take more."""
        if cursor.reading or self._nursery is None or cursor.queue.paged <= 0:
            return
        cursor.reading = True
        self._nursery.start_soon(self._depage, paging, cursor)

    async def _depage(self, paging: AddressPaging, cursor: PageCursor) -> None:
        try:
            await paging.depage(cursor)
        except Exception as exc:  # a broken page must not stop the node
            log.error(
                "address %s: cannot read the pages for queue %s: %s",
                paging.address,
                cursor.queue.name,
                exc,
            )
        finally:
            cursor.reading = False
            ended = self._read_ended.pop(cursor.queue.id, None)
            if ended is not None:
                ended.set()

    async def read_ended(self, cursor: PageCursor) -> None:
        """Return once ``cursor`` is not reading its pages (at once when it is not)."""
        if cursor.reading:
            await self._read_ended.setdefault(cursor.queue.id, trio.Event()).wait()

    def page_read(self, paging: AddressPaging, cursor: PageCursor, page: int) -> None:
        """``cursor`` read to the end of ``page``."""
        if cursor.may_complete(page):
            self.complete(paging, cursor, page)

    def complete_soon(self, paging: AddressPaging, cursor: PageCursor, page: int) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._complete_later, paging, cursor, page)

    async def _complete_later(self, paging: AddressPaging, cursor: PageCursor, page: int) -> None:
        if cursor.may_complete(page) and paging.cursors.get(cursor.queue.id) is cursor:
            self.complete(paging, cursor, page)

    def complete(self, paging: AddressPaging, cursor: PageCursor, page: int) -> None:
        """``page`` is done for ``cursor``'s queue: one record replaces its acks."""
        record_id = self.persistence.next_id()
        ops = [page_complete_op(record_id, cursor.queue.id, page, paging.address)]
        ops += [_delete(r) for r in cursor.ack_records.pop(page, ())]
        cursor.completed[page] = record_id
        if cursor.queue.durable:
            # Synced: a page file goes only once every completion of it is durable.
            self._completions = self.persistence.submit(ops)
        self._delete_completed(paging)
        self.check_paging_ended(paging)

    def _delete_completed(self, paging: AddressPaging) -> None:
        pages = paging.deletable()
        if pages and self._nursery is not None:
            paging.deleting.update(pages)
            self._nursery.start_soon(self._delete_pages, paging, pages)

    async def _delete_pages(self, paging: AddressPaging, pages: list[int]) -> None:
        """Delete pages every queue completed: the completion records first become durable,
        then the files go, then the records (a crash between leaves records of a missing
        page, which recovery removes)."""
        store = paging.store
        assert store is not None
        try:
            await durable(self._completions)  # the journal completes tickets in order
            for page in pages:
                await store.delete_page(page)
        except Exception as exc:  # kept for the next attempt after a restart
            log.error("address %s: cannot delete page(s) %s: %s", paging.address, pages, exc)
            return
        finally:
            paging.deleting.difference_update(pages)
        ops: list[Op] = []
        for page in pages:
            paging.page_records.pop(page, None)
            paging.first_offsets.pop(page, None)
            for cursor in paging.cursors.values():
                record_id = cursor.completed.pop(page, None)
                if record_id is not None and cursor.queue.durable:
                    ops.append(_delete(record_id))
            ops += self._forget_page_txs(paging, page)
        if ops:
            self.persistence.submit(ops, awaited=False)
        log.debug("address %s: deleted page(s) %s", paging.address, pages)

    def _forget_page_txs(self, paging: AddressPaging, page: int) -> list[Op]:
        ops = []
        for tx_id, pages in list(paging.tx_pages.items()):
            pages.discard(page)
            if not pages:
                del paging.tx_pages[tx_id]
                record_id = self.committed_txs.pop(tx_id, None)
                if record_id is not None:
                    ops.append(_delete(record_id))
        return ops

    def check_paging_ended(self, paging: AddressPaging) -> None:
        if paging.paging and paging.drained() and not paging.full():
            paging.paging = False
            log.info("address %s: paging stops (every paged message is consumed)", paging.address)

    # -- acknowledging and queues ------------------------------------------------------------

    def ack_op(self, ref: MessageReference, tx_id: int | None = None) -> Op | None:
        """The journal op acknowledging a depaged ``ref`` (None for a non-durable queue)."""
        assert ref.paged is not None
        paging = self.address(ref.queue.address)
        cursor = paging.cursors.get(ref.queue.id)
        record_id = self.persistence.next_id()
        op = None
        if ref.queue.durable:
            op = page_ack_op(record_id, ref.queue.id, ref.paged, paging.address, tx_id)
        if cursor is not None:
            counted = partial(
                paging.acknowledged, cursor, ref, record_id if op is not None else None
            )
            if tx_id is None:
                counted()
            else:
                self._tx_acks.setdefault(tx_id, []).append(counted)
        return op

    def submitting(
        self, tx_id: int, submit: Callable[[], list[Ticket]]
    ) -> Callable[[], list[Ticket]]:
        """``submit`` (transaction ``tx_id``'s journal records) that then counts the
        transaction's acks of depaged messages: counted before, a page could complete and
        its PAGE_COMPLETE delete an ack record not yet in the journal (a transaction with
        paged sends submits its records only once their page records are durable)."""

        def run() -> list[Ticket]:
            acks = self._tx_acks.pop(tx_id, [])
            tickets = submit()
            for counted in acks:
                counted()
            return tickets

        return run

    def queue_removed(self, queue: Queue) -> list[Op]:
        """A queue was deleted: its cursor goes, and the records of it (its paged large
        messages' references go at once, see :meth:`_release_page_refs`)."""
        paging = self.addresses.get(queue.address)
        if paging is None:
            return []
        cursor = paging.remove_cursor(queue)
        if cursor is None:
            return []
        self._release_page_refs(queue)
        ops = [_delete(r) for records in cursor.ack_records.values() for r in records]
        ops += [_delete(r) for r in cursor.completed.values()]
        queue.paged = 0
        self._delete_completed(paging)
        self.check_paging_ended(paging)
        return ops if queue.durable else []

    def purge_soon(
        self, queue: Queue, below: int, purge_memory: Callable[[Queue, int], int]
    ) -> None:
        """Purge-on-no-consumers' paged part: a task acknowledges ``queue``'s messages in
        its page files below the offset ``below``, as :func:`.by_offset.purge_below`
        does (``purge_memory`` purges those that came into memory meanwhile)."""
        paging = self.addresses.get(queue.address)
        cursor = paging.cursors.get(queue.id) if paging is not None else None
        if paging is None or cursor is None or self._nursery is None:
            return
        self._nursery.start_soon(self._purge, paging, cursor, below, purge_memory)

    async def _purge(
        self,
        paging: AddressPaging,
        cursor: PageCursor,
        below: int,
        purge_memory: Callable[[Queue, int], int],
    ) -> None:
        try:
            purged = await by_offset.purge_below(paging, cursor, below, purge_memory)
        except Exception as exc:  # a broken page must not stop the node
            log.error(
                "address %s: cannot purge the paged messages of queue %s: %s",
                paging.address,
                cursor.queue.name,
                exc,
            )
            return
        if purged:
            log.debug("queue %s: %d paged message(s) purged", cursor.queue.name, purged)

    def _release_page_refs(self, queue: Queue) -> None:
        """``queue`` will never read its paged large messages: the LARGE_PAGE_REF records
        it was the last queue of are deleted (whether or not ``queue`` is durable: its id is
        in the records too) and their files go once that is durable, as after an
        acknowledgement, not at the next start."""
        if self.persistence.large.page_refs:
            self.drop_page_refs(*self.persistence.large.queue_removed(queue.id))

    def drop_page_refs(self, ops: list[Op], files: list[int]) -> None:
        """Submit the deletes of LARGE_PAGE_REF records (synced) and remove ``files`` once
        they are durable: a crash never leaves a live record without its file."""
        if not ops:
            return
        try:
            tickets = self.persistence.submit(ops)
        except StorageError as exc:  # the journal failed: the next start drops them
            log.error("cannot delete %d paged large message reference(s): %s", len(ops), exc)
            return
        self.persistence.large.delete_after(partial(self.persistence.wait, tickets), files)

    # -- recovery ----------------------------------------------------------------------------

    async def recover(self, state: RecoveredState, queues: Iterable[Queue]) -> None:
        """Rebuild every cursor from the pages and the journal's paging records."""
        await recovery.recover(self, state, list(queues))

    async def close(self) -> None:
        """Close every page store (what is queued is written first)."""
        stores = [p.store for p in self.addresses.values() if p.store is not None]
        stores += self._stores.values()
        for store in stores:
            await store.close()


def _delete(record_id: int) -> Op:
    return Op.delete(record_id)


__all__ = ["DROP", "PAGE", "PagingManager", "Placement", "default_global_max_size"]
