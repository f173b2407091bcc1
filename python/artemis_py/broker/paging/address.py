"""One address's memory accounting and page files (Artemis's PagingStore).

Theory of operation
-------------------
* **Accounting.** Every message routed to the address's queues in memory adds its size (once,
  however many of the address's queues it goes to) and one message, until its last reference
  there is acknowledged. Depaged messages count too.
* **Deciding.** :meth:`AddressPaging.decide` runs before a send stores anything. While the
  address is below ``max-size-bytes`` / ``max-size-messages`` (and the node below its global
  limits) messages go to memory. Once full, ``address-full-policy`` decides: PAGE appends them
  to the address's page files, BLOCK holds the send back until there is room, FAIL refuses it,
  DROP drops it. While the disk is full (:mod:`.disk`), ``disk-full-policy`` decides first,
  for every address and whatever its limits: BLOCK (the default) holds the send until the
  disk has room, FAIL refuses it, DROP drops it. The node's own moves are not held.
* **FIFO across the boundary.** Once paging starts, *every* new message for the address goes
  to the pages until every page is complete for every queue (Artemis's rule): so the messages
  in memory are always older than those in pages, and a queue depaging at its tail keeps the
  order. After a restart the same holds: journal messages first, then the pages.
* **Visibility.** A paged message becomes readable by the cursors when its send settles (the
  page record is durable and the producer's earlier sends are on their queues), in the order
  of the page: a cursor never reads past the first record whose send has not settled.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.message import MessageReference, decode_message
from artemis_py.broker.paging.cursor import PageCursor, Position
from artemis_py.config import AddressFullPolicy, DiskFullPolicy, PageFullPolicy
from artemis_py.storage.paging import PAGE_HEADER_SIZE

if TYPE_CHECKING:
    from collections.abc import Callable

    from artemis_py.broker.message import Message
    from artemis_py.broker.paging.manager import PagingManager
    from artemis_py.broker.queue import Queue
    from artemis_py.config import AddressSettings
    from artemis_py.storage.paging import PagedRecord, PageStore

log = logging.getLogger("artemis_py.broker.paging")

# Decisions of AddressPaging.decide.
MEMORY = "memory"
PAGE = "page"
BLOCK = "block"
DROP = "drop"

STORE_RETRY_DELAY = 1.0  # seconds before a page store that could not be created is tried again


class Held:
    """A message's share of an address's memory: released with its last reference there."""

    __slots__ = ("paging", "refs", "size")

    def __init__(self, paging: AddressPaging, size: int, refs: int) -> None:
        self.paging = paging
        self.size = size
        self.refs = refs

    def release_one(self) -> None:
        self.refs -= 1
        if self.refs == 0:
            self.paging.release(self.size, 1)

    def shrink(self, size: int) -> None:
        """The message now holds only ``size`` bytes (its body went to a file)."""
        if 0 <= size < self.size and self.refs > 0:
            self.paging.release(self.size - size, 0)
            self.size = size


@dataclass(slots=True)
class _Appended:
    position: Position
    offset: int  # the message's queue offset
    queues: list[Queue]
    settled: bool = False


class AddressPaging:
    """Memory accounting, the full-policy decision and the page files of one address."""

    def __init__(self, manager: PagingManager, address: str) -> None:
        self.manager = manager
        self.address = address
        self.size = 0
        self.messages = 0
        self.paging = False
        self._settings: AddressSettings | None = None
        self.store: PageStore | None = None
        self.cursors: dict[int, PageCursor] = {}
        self._unsettled: deque[_Appended] = deque()
        self.page_records: Counter[int] = Counter()  # records per existing page
        self.dropped = 0
        self._dropping = False  # in a DROP episode (logged once)
        self._disk_episode = 0  # the last full-disk episode this address logged
        self._room = trio.Event()
        self.creating = False  # its page store is being created
        self._created = trio.Event()  # set when the creation under way ends
        self.retry_at = 0.0  # trio time before which a failed creation is not tried again
        self.deleting: set[int] = set()  # pages being deleted (by the manager)
        # Records before this position were written before the last restart.
        self.recovered_below: Position = (0, 0)
        # tx id -> pages holding its records (PAGE_TX records live while those pages do)
        self.tx_pages: dict[int, set[int]] = {}
        # Queue offset of the first record of a page, where known (appended this run, or
        # seen by a read from a page's start): a browse by offset skips the pages wholly
        # below its start without reading them (offsets grow in page order).
        self.first_offsets: dict[int, int] = {}

    # -- settings and limits -------------------------------------------------------------

    @property
    def settings(self) -> AddressSettings:
        # Resolved once: the settings repository never changes while the node runs, and
        # every send asks (the per-message path).
        if self._settings is None:
            self._settings = self.manager.settings_for(self.address)
        return self._settings

    def full(self) -> bool:
        settings = self._settings or self.settings
        return (
            (0 <= settings.max_size_bytes <= self.size)
            or (0 <= settings.max_size_messages <= self.messages)
            or self.manager.global_full()
        )

    def limit_text(self) -> str:
        settings = self.settings
        if 0 <= settings.max_size_bytes <= self.size:
            return f"max-size-bytes {settings.max_size_bytes} ({self.size} bytes held)"
        if 0 <= settings.max_size_messages <= self.messages:
            return f"max-size-messages {settings.max_size_messages} ({self.messages} messages held)"
        return self.manager.global_limit_text()

    def pages_full(self) -> str | None:
        """Which page limit the pages reached, if any."""
        settings = self.settings
        if settings.page_full_policy is None or self.store is None:
            return None
        records = sum(self.page_records.values())
        if 0 <= settings.page_limit_messages <= records:
            return f"page-limit-messages {settings.page_limit_messages}"
        if 0 <= settings.page_limit_bytes <= self.page_bytes():
            return f"page-limit-bytes {settings.page_limit_bytes}"
        return None

    def page_bytes(self) -> int:
        if self.store is None:
            return 0
        _page, offset = self.store.end()
        return max(0, len(self.page_records) - 1) * self.store.page_size + offset

    # -- deciding where a message goes ---------------------------------------------------

    def decide(self, *, internal: bool = False, disk_full: bool = False) -> str:
        """MEMORY, PAGE, BLOCK or DROP; raises ``Full`` for FAIL. ``disk_full``: the disk
        is full and this send is held by it (see :meth:`.manager.PagingManager.place`)."""
        if disk_full:
            return self._disk_full()
        settings = self._settings or self.settings
        policy = settings.address_full_policy
        if policy is AddressFullPolicy.PAGE:
            if not (self.paging or self.full()):
                return MEMORY
            limit = self.pages_full()
            if limit is None:
                return PAGE
            if self.settings.page_full_policy is PageFullPolicy.DROP:
                return self._drop(limit)
            raise Full(f"address {self.address} is full: its pages reached {limit}")
        if not self.full():
            self._dropping = False
            return MEMORY
        if internal and policy is not AddressFullPolicy.DROP:
            return MEMORY  # the node's own moves never block or fail
        if policy is AddressFullPolicy.BLOCK:
            threshold = self.settings.max_size_bytes_reject_threshold
            if threshold < 0:
                return BLOCK
            if self.size < threshold:
                return MEMORY
            raise Full(
                f"address {self.address} is full: max-size-bytes-reject-threshold "
                f"{threshold} ({self.size} bytes held)"
            )
        if policy is AddressFullPolicy.DROP:
            return self._drop(self.limit_text())
        raise Full(
            f"address {self.address} is full: {self.limit_text()} (address-full-policy FAIL)"
        )

    def _disk_full(self) -> str:
        """The decision of ``disk-full-policy`` (Artemis 2.45's PagingStoreImpl: while the
        disk is full it replaces the address's own policy; BLOCK when unset)."""
        disk = self.manager.disk
        policy = self.settings.disk_full_policy
        first = self._disk_episode != disk.episodes  # logged once per address and episode
        self._disk_episode = disk.episodes
        if policy is DiskFullPolicy.FAIL:
            raise Full(
                f"address {self.address} refuses the message: the disk is full "
                f"({disk.state_text()}; disk-full-policy FAIL)"
            )
        if policy is DiskFullPolicy.DROP:
            self.dropped += 1
            if first:
                log.warning(
                    "address %s: the disk is full (%s): dropping messages until there is "
                    "room (disk-full-policy DROP)",
                    self.address,
                    disk.limit_text(),
                )
            return DROP
        if first:
            log.warning(
                "AMQ222212: the disk is full: sends to address %s wait until it has room",
                self.address,
            )
        return BLOCK

    def _drop(self, limit: str) -> str:
        self.dropped += 1
        if not self._dropping:
            self._dropping = True
            log.warning(
                "address %s is full (%s): dropping messages until there is room",
                self.address,
                limit,
            )
        return DROP

    def hold(self, size: int, refs: int) -> Held:
        self.size += size
        self.messages += 1
        self.manager.size += size
        self.manager.messages += 1
        return Held(self, size, refs)

    def release(self, size: int, messages: int) -> None:
        self.size -= size
        self.messages -= messages
        self.manager.size -= size
        self.manager.messages -= messages
        if self._room.is_set() and not (self._dropping or self.paging):
            return  # (the usual case: nothing waits, drops or pages, so below has nothing to do)
        if not self.full():
            if not self._room.is_set():
                self._room.set()
            if self._dropping:
                self._dropping = False
                log.info(
                    "address %s has room again: %d message(s) were dropped",
                    self.address,
                    self.dropped,
                )
            if self.paging:
                self.manager.check_paging_ended(self)

    async def room(self) -> None:
        """Return once the address is below its limits and the disk has room (BLOCK:
        the send is then decided again)."""
        await self.manager.disk.space()
        while self.full():
            if self._room.is_set():
                self._room = trio.Event()
            await self._room.wait()

    # -- the page store's creation -------------------------------------------------------

    def creation_started(self) -> None:
        self.creating = True
        self._created = trio.Event()

    def creation_ended(self, *, failed: bool) -> None:
        self.creating = False
        if failed:
            self.retry_at = trio.current_time() + STORE_RETRY_DELAY
        self._created.set()

    async def store_created(self) -> None:
        """Return once the creation of the page store under way (if any) has ended."""
        while self.creating:
            await self._created.wait()

    # -- pages -----------------------------------------------------------------------------

    def cursor(self, queue: Queue) -> PageCursor:
        cursor = self.cursors.get(queue.id)
        if cursor is None:
            page = self.store.current_page if self.store is not None else 1
            cursor = PageCursor(queue, (page, 0), page)
            self.cursors[queue.id] = cursor
        return cursor

    def page(
        self, message: Message, queues: list[Queue], encoded: bytes, tx_id: int = 0, *, offset: int
    ) -> tuple[int, Callable[[], None], Position]:
        """Append ``message`` for ``queues`` at queue offset ``offset``; returns (ticket, the
        position's settle, the position).

        The offset stays in the queues' ``arriving`` until the send settles (its page record
        durable, and its journal records if any): like a send to memory, a paged message
        must never appear below a stable end a reader has passed."""
        assert self.store is not None
        if not self.paging:
            self.paging = True
            log.info("address %s is full (%s): paging starts", self.address, self.limit_text())
        ticket, (position,) = self.store.append(
            [(message.message_id, tx_id, [q.id for q in queues], encoded, offset)],
            message.durable,
        )
        appended = _Appended(position, offset, queues)
        self._unsettled.append(appended)
        self.page_records[position[0]] += 1
        if position[1] <= PAGE_HEADER_SIZE:
            self.first_offsets[position[0]] = offset
        if tx_id:
            self.tx_pages.setdefault(tx_id, set()).add(position[0])
        for queue in queues:
            self.cursor(queue)
            queue.paged += 1
            queue.arriving.add(offset)
        return ticket, lambda: self._settled(appended), position

    def _settled(self, appended: _Appended) -> None:
        appended.settled = True
        for queue in appended.queues:
            queue.arriving.discard(appended.offset)
            # Added once durable, as a send to memory is (Queue.add); depaging adds no more.
            queue.messages_added += 1
        while self._unsettled and self._unsettled[0].settled:
            self._unsettled.popleft()
        for cursor in list(self.cursors.values()):
            self.manager.kick(self, cursor)

    def readable_below(self) -> Position | None:
        """Cursors read records before this position (None: every written record)."""
        return self._unsettled[0].position if self._unsettled else None

    async def depage(self, cursor: PageCursor) -> None:
        """Bring paged messages into ``cursor``'s queue until it has enough or none are left."""
        settings = self.settings
        max_messages, max_bytes = settings.max_read_page_messages, settings.max_read_page_bytes
        store = self.store
        while store is not None and cursor.wants_more(max_messages, max_bytes):
            page, offset = cursor.position
            if page > store.current_page:
                return
            limit = self.readable_below()
            if limit is not None and limit <= cursor.position:
                return
            want = 256 if max_messages < 0 else max(1, max_messages - cursor.in_memory)
            records, next_offset, page_done = await store.read(
                page, offset, max_records=want, max_bytes=max(4096, max_bytes // 4)
            )
            if self.cursors.get(cursor.queue.id) is not cursor:
                return  # the queue went away meanwhile
            if cursor.position != (page, offset):
                # Acknowledging up to an offset moved the cursor meanwhile: go on from
                # there (returning would leave the queue without a depaging task).
                continue
            moved = self._take(cursor, records, next_offset, self.readable_below())
            if page_done and (not records or cursor.position == (page, next_offset)):
                cursor.position = (self.next_page(cursor, page), 0)
                self.manager.page_read(self, cursor, page)
            elif not moved:
                return  # nothing more is readable now: the next settle kicks the cursor

    def next_page(self, cursor: PageCursor, page: int) -> int:
        """The page ``cursor`` reads after ``page``: the next one that exists and that it has
        not completed. Usually ``page + 1``; but after a restart a cursor starts at its first
        incomplete page, and later pages may be complete for it already (completed while a
        message of an earlier page was held): read again, their acknowledged messages would
        come back, and once deleted they are not there to read."""
        assert self.store is not None
        later = [p for p in self.store.pages() if p > page and p not in cursor.completed]
        return later[0] if later else page + 1

    def _take(
        self, cursor: PageCursor, records: list[PagedRecord], end: int, limit: Position | None
    ) -> bool:
        """Move ``cursor`` over ``records`` (up to ``limit``), depaging its queue's."""
        queue = cursor.queue
        refs: list[MessageReference] = []
        moved = False
        for i, record in enumerate(records):
            position = (record.page, record.offset)
            if limit is not None and position >= limit:
                break
            following = records[i + 1].offset if i + 1 < len(records) else end
            cursor.position = (record.page, following)
            moved = True
            if queue.id not in record.queue_ids:
                continue
            if record.tx_id and record.tx_id not in self.manager.committed_txs:
                continue
            if record.offset in cursor.acked.get(record.page, ()):
                continue  # acknowledged before a restart (and not counted as unread)
            queue.paged -= 1
            message = decode_message(record.message_id, record.message)
            if not message.durable and self.recovered_below > position:
                continue  # a non-persistent message does not survive a restart
            if not self.manager.persistence.large.attach(message, self.address, position):
                continue  # a large message's file that was never made durable
            ref = MessageReference(message, queue, 0, record.queue_offset)
            ref.paged = position
            ref.held = self.hold(message.memory_size, 1)
            cursor.outstanding[record.page] += 1
            cursor.in_memory += 1
            cursor.in_memory_bytes += message.memory_size
            refs.append(ref)
        if refs:
            queue.add_paged(refs)
        return moved

    def acknowledged(
        self, cursor: PageCursor, ref: MessageReference, record_id: int | None
    ) -> None:
        """A depaged reference was acknowledged with the PAGE_ACK record ``record_id``
        (None: its queue is not durable, nothing was written)."""
        assert ref.paged is not None
        page = ref.paged[0]
        if record_id is not None:
            cursor.ack_records.setdefault(page, []).append(record_id)
        cursor.outstanding[page] -= 1
        if not cursor.outstanding[page]:
            del cursor.outstanding[page]
        cursor.in_memory -= 1
        cursor.in_memory_bytes -= ref.message.memory_size
        if cursor.may_complete(page):
            # Later in this loop pass: the caller submits this ack's record first.
            self.manager.complete_soon(self, cursor, page)
        self.manager.kick(self, cursor)

    def deletable(self) -> list[int]:
        """Pages every cursor is done with (never the page being written)."""
        if self.store is None:
            return []
        current = self.store.current_page
        return [
            page
            for page in self.store.pages()
            if page != current
            and page not in self.deleting
            and all(c.done_with(page) for c in self.cursors.values())
        ]

    def drained(self) -> bool:
        """Nothing left in the pages for any queue: paging may stop."""
        return not self._unsettled and all(
            c.queue.paged <= 0 and not c.outstanding for c in self.cursors.values()
        )

    def remove_cursor(self, queue: Queue) -> PageCursor | None:
        return self.cursors.pop(queue.id, None)


class Full(Exception):  # the address is full: the text is for the client
    """A send cannot be accepted: the address (or its pages) reached a limit under FAIL."""
