"""A queue's paged messages by offset, read without depaging them: the page side of
browsing by offset, of the listing, and of acknowledging up to an offset
(:mod:`artemis_py.broker.offset_reading`).

Theory of operation
-------------------
* **Offsets grow in page order.** A message gets its offset and its page record in one
  step (its send, or its transaction's commit), so in an address's pages the records, of
  every queue, are in offset order. (Version 1 pages have no offsets: their message ids
  stand in, in about that order.)
* **A queue's paged messages** are the records for it after its cursor's position that are
  not acknowledged (before a restart, or up to an offset), whose transaction committed, and
  that are not non-persistent messages from before a restart. Records before the position
  were depaged (they are in memory, delivering, or acknowledged) or skipped. So memory and
  pages never hold the same reference, and a snapshot of both taken at one instant (the
  index, the cursor's position) is exact.
* **Below the stable end everything is written.** A record's offset stays in its queues'
  ``arriving`` until its send settles, so a record whose offset is below the queue's stable
  end is written: a scan that reaches the written end has seen every record below it.
* **Reads** run in worker threads (the store's async read), as depaging does; pages wholly
  below a browse's start are skipped by their first offsets (no read). A page can be
  deleted while a scan waits for a read (every queue completed it): the scan raises
  :class:`PageGone` and the caller starts again from a fresh snapshot.
* **Acknowledging up to an offset** moves the cursor over the queue's records below it, as
  depaging would, writing a PAGE_ACK record for each instead of bringing it into memory;
  the cursor then completes the pages it passed (PAGE_COMPLETE) and they are deleted once
  every queue is done with them, with or without a consumer. Depaging and acknowledging
  both move the cursor only if it is still where their read started (else they read again).
* **Purging** (purge-on-no-consumers) acknowledges up to the queue's stable end when its
  last consumer left, as above, and the messages a depaging brought into memory meanwhile;
  it stops when a consumer comes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from artemis_py.broker.message import MessageReference, decode_message
from artemis_py.broker.paging.cursor import PageCursor, Position
from artemis_py.broker.records import page_ack_op
from artemis_py.storage.paging import PAGE_HEADER_SIZE

if TYPE_CHECKING:
    from artemis_py.broker.paging.address import AddressPaging
    from artemis_py.broker.pending import Ticket
    from artemis_py.broker.queue import Queue
    from artemis_py.storage import Op
    from artemis_py.storage.paging import PagedRecord

_READ_RECORDS = 256
_READ_BYTES = 1 << 20


class PageGone(Exception):  # a signal to start again, never shown
    """A page was deleted while a scan was reading it: take a fresh snapshot."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Where a queue's paged messages start, taken at one instant: the cursor's position
    and the pages from there that the queue has not completed."""

    position: Position
    pages: list[int]


def snapshot(paging: AddressPaging, cursor: PageCursor) -> Snapshot:
    assert paging.store is not None
    first = cursor.position[0]
    pages = [p for p in paging.store.pages() if p >= first and p not in cursor.completed]
    return Snapshot(cursor.position, pages)


def counts(paging: AddressPaging, cursor: PageCursor, record: PagedRecord) -> bool:
    """Whether ``record`` is one of ``cursor``'s queue's messages still to read (see the
    module doc); non-persistent messages from before a restart included."""
    return (
        cursor.queue.id in record.queue_ids
        and (not record.tx_id or record.tx_id in paging.manager.committed_txs)
        and record.offset not in cursor.acked.get(record.page, ())
    )


def _lost(paging: AddressPaging, record: PagedRecord, durable: bool) -> bool:
    """A non-persistent message paged before the last restart: gone with it."""
    return not durable and paging.recovered_below > (record.page, record.offset)


async def _read(
    paging: AddressPaging, page: int, offset: int
) -> tuple[list[PagedRecord], int, bool]:
    store = paging.store
    assert store is not None
    try:
        records, following, done = await store.read(
            page, offset, max_records=_READ_RECORDS, max_bytes=_READ_BYTES
        )
    except ValueError:  # the store no longer has that page
        if page not in store.pages():
            raise PageGone from None
        raise
    if (
        records
        and offset <= PAGE_HEADER_SIZE
        and page not in paging.first_offsets
        and store.page_version(page) != 1  # message ids stand in there: not ordered enough
    ):
        paging.first_offsets[page] = records[0].queue_offset
    return records, following, done


async def scan(
    paging: AddressPaging, cursor: PageCursor, snap: Snapshot, start: int, stop: int, want: int
) -> list[MessageReference]:
    """Copies of the queue's paged messages with ``start <= offset < stop``, in offset
    order, at most ``want`` (-1: all); references not in the queue (nothing is depaged).
    Raises :class:`PageGone`."""
    queue = cursor.queue
    found: list[MessageReference] = []
    pages = snap.pages
    for i, page in enumerate(pages):
        following = paging.first_offsets.get(pages[i + 1]) if i + 1 < len(pages) else None
        if following is not None and following <= start:
            continue  # every record of this page is below start
        offset = snap.position[1] if page == snap.position[0] else 0
        while True:
            records, offset, done = await _read(paging, page, offset)
            for record in records:
                if not counts(paging, cursor, record):
                    continue
                if record.queue_offset >= stop or len(found) == want:
                    return found
                if record.queue_offset < start:
                    continue
                ref = _copy(paging, queue, record)
                if ref is not None:
                    found.append(ref)
            if done or not records:
                break
        if not done:
            break  # the page being written: nothing after it
    return found


def _copy(paging: AddressPaging, queue: Queue, record: PagedRecord) -> MessageReference | None:
    message = decode_message(record.message_id, record.message)
    if _lost(paging, record, message.durable):
        return None
    if not paging.manager.persistence.large.attach(
        message, paging.address, (record.page, record.offset)
    ):
        return None  # a large message's file that was never made durable
    return MessageReference(message, queue, 0, record.queue_offset)


async def lowest(paging: AddressPaging, cursor: PageCursor) -> int | None:
    """The lowest offset of the queue's paged messages (None: none). Remembered by the
    cursor until its position moves: a listing reads pages only after it did."""
    cached = cursor.low
    if cached is not None and cached[0] == cursor.position:
        return cached[1]
    while True:
        snap = snapshot(paging, cursor)
        try:
            found = await scan(paging, cursor, snap, 0, 1 << 64, 1)
        except PageGone:
            continue
        low = found[0].offset if found else None
        if low is not None and cursor.position == snap.position:
            cursor.low = (snap.position, low)
        return low


async def acknowledge_below(paging: AddressPaging, cursor: PageCursor, offset: int) -> list[Ticket]:
    """Acknowledge the queue's paged messages below ``offset`` (see the module doc);
    returns the tickets of their PAGE_ACK records. Pages it moves past are completed."""
    manager = paging.manager
    tickets: list[Ticket] = []
    store = paging.store
    while store is not None and paging.cursors.get(cursor.queue.id) is cursor:
        page, at = cursor.position
        if page > store.current_page or page not in store.pages():
            break
        try:
            records, following, done = await _read(paging, page, at)
        except PageGone:
            continue
        if cursor.position != (page, at) or paging.cursors.get(cursor.queue.id) is not cursor:
            continue  # depaging (or another acknowledgement) moved the cursor: read again
        ops, finished = _pass(paging, cursor, records, following, offset)
        if ops:
            tickets += manager.persistence.acknowledge([], True, ops)
        if finished:
            break
        if done and cursor.position == (page, following):
            cursor.position = (paging.next_page(cursor, page), 0)
            manager.page_read(paging, cursor, page)  # after its PAGE_ACKs were submitted
        elif not records:
            break  # the written end
    manager.kick(paging, cursor)
    manager.check_paging_ended(paging)
    return tickets


def _pass(
    paging: AddressPaging, cursor: PageCursor, records: list[PagedRecord], end: int, offset: int
) -> tuple[list[Op], bool]:
    """Move ``cursor`` over ``records`` up to the queue's first message at or above
    ``offset``, acknowledging the queue's messages it passes; returns the ops and whether
    it stopped there."""
    # Records written but not settled yet are passed like the others: another queue's are
    # not this cursor's business, and this queue's have offsets at or above its stable end
    # (at or above ``offset`` for a reader that stays below the stable end, as it should).
    queue = cursor.queue
    persistence = paging.manager.persistence
    ops: list[Op] = []
    for i, record in enumerate(records):
        position = (record.page, record.offset)
        mine = counts(paging, cursor, record)
        if mine and record.queue_offset >= offset:
            return ops, True
        cursor.position = (record.page, records[i + 1].offset if i + 1 < len(records) else end)
        if not mine:
            continue
        queue.paged -= 1
        record_id = persistence.next_id()
        if queue.durable:
            ops.append(page_ack_op(record_id, queue.id, position, paging.address, None))
            cursor.ack_records.setdefault(record.page, []).append(record_id)
        ops += persistence.large.page_acked(paging.address, position, queue.id, None)
        queue.messages_acknowledged += 1
    return ops, False


async def purge_below(
    paging: AddressPaging,
    cursor: PageCursor,
    offset: int,
    purge_memory: Callable[[Queue, int], int],
) -> int:
    """Acknowledge every message of the cursor's queue below ``offset``, in its pages or
    brought into memory by a depaging meanwhile (``purge_memory(queue, offset)`` takes
    those and says how many), until none is left or the queue has a consumer again or is
    deleted; how many were acknowledged in the pages. Raises what the page reads raise."""
    queue = cursor.queue
    manager = paging.manager
    purged = 0
    while not queue.consumers and paging.cursors.get(queue.id) is cursor:
        await manager.read_ended(cursor)  # a depaging under way lands in memory first
        in_memory = purge_memory(queue, offset)
        low = await lowest(paging, cursor)
        if low is None or low >= offset:
            if not in_memory:
                break
            continue  # (their acknowledgements may have started another depaging)
        acknowledged, position = queue.messages_acknowledged, cursor.position
        await manager.persistence.wait(await acknowledge_below(paging, cursor, offset))
        # Counted as killed, as Artemis's purge (no consumer acknowledged anything).
        passed = queue.messages_acknowledged - acknowledged
        queue.messages_acknowledged, queue.messages_killed = (
            acknowledged,
            queue.messages_killed + passed,
        )
        purged += passed
        if cursor.position == position and not in_memory:
            break  # no progress (a page being deleted): the next purge carries on
    return purged
