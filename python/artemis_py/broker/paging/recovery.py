"""Rebuilding the cursors after a restart, from the page files and the journal's records.

Each store's pages are counted per (queue, transaction) without reading the messages into
Python; the messages journal gave the PAGE_ACK, PAGE_COMPLETE and PAGE_TX records. A cursor
starts at the first page its queue has not completed and skips the offsets acknowledged
before the restart. Records that refer to a page, queue or address that is gone are deleted.
Records of a transaction without a PAGE_TX record were never committed: they do not count.
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import partial
from typing import TYPE_CHECKING

from artemis_py.broker.paging.cursor import PageCursor
from artemis_py.broker.pending import durable
from artemis_py.storage import Op

if TYPE_CHECKING:
    from artemis_py.broker.journal_recovery import RecoveredState
    from artemis_py.broker.paging.manager import PagingManager
    from artemis_py.broker.queue import Queue
    from artemis_py.broker.records import PageRef

log = logging.getLogger("artemis_py.broker.paging")


async def recover(manager: PagingManager, state: RecoveredState, queues: list[Queue]) -> None:
    manager.committed_txs = dict(state.page_txs)
    by_address: dict[str, list[Queue]] = {}
    for queue in queues:
        by_address.setdefault(queue.address, []).append(queue)
    stale: list[Op] = []
    known: dict[str, dict[int, PageCursor]] = {}
    tx_seen: set[int] = set()
    paged_total = 0
    for address in list(manager.pending_stores()):
        paging = manager.address(address)
        store = paging.store
        assert store is not None
        pages = store.pages()
        paging.recovered_below = store.end()
        # The page appends go to is new at every start (the one after the last file), so a
        # record naming it, or a later page, is of an earlier page of that number: deleted,
        # with a crash before its records went. (A store left without files numbers its
        # pages from 1 again.)
        fresh = store.current_page
        first = pages[0] if pages else store.current_page
        cursors = {
            q.id: PageCursor(q, (first, 0), first) for q in by_address.get(address, []) if q.durable
        }
        counts: dict[int, Counter[int]] = {}
        for page in pages:
            per_queue: Counter[int] = Counter()
            for (queue_id, tx_id), n in (await store.count(page)).items():
                paging.page_records[page] += n
                if tx_id:
                    if tx_id not in manager.committed_txs:
                        continue  # never committed
                    tx_seen.add(tx_id)
                    paging.tx_pages.setdefault(tx_id, set()).add(page)
                per_queue[queue_id] += n
            counts[page] = per_queue
        paging.cursors = cursors
        known[address] = cursors
        for record_id, queue_id, page, _ in (c for c in state.page_completes if c[3] == address):
            cursor = cursors.get(queue_id)
            if cursor is None or page not in counts or page >= fresh:
                stale.append(Op.delete(record_id))
            else:
                cursor.completed[page] = record_id
        for record_id, queue_id, page, offset, _ in (a for a in state.page_acks if a[4] == address):
            cursor = cursors.get(queue_id)
            if cursor is None or page not in counts or page >= fresh or page in cursor.completed:
                stale.append(Op.delete(record_id))
            else:
                cursor.acked.setdefault(page, set()).add(offset)
                cursor.ack_records.setdefault(page, []).append(record_id)
        for cursor in cursors.values():
            unread = 0
            for page in pages:
                if page in cursor.completed:
                    continue
                unread += counts[page][cursor.queue.id] - len(cursor.acked.get(page, ()))
            cursor.queue.paged = unread
            cursor.queue.messages_added += unread  # as recovered references are (add_many)
            paged_total += unread
            open_pages = [p for p in pages if p not in cursor.completed]
            cursor.position = (open_pages[0] if open_pages else store.current_page, 0)
        paging.paging = any(c.queue.paged > 0 for c in cursors.values())
    for record_id, _, _, address in state.page_completes:
        if address not in known:
            stale.append(Op.delete(record_id))
    for record_id, _, _, _, address in state.page_acks:
        if address not in known:
            stale.append(Op.delete(record_id))
    for tx_id, record_id in list(manager.committed_txs.items()):
        if tx_id not in tx_seen:
            del manager.committed_txs[tx_id]
            stale.append(Op.delete(record_id))
    stale += _check_large_page_refs(manager, known)
    if stale:
        await _remove_stale(manager, stale)
    if known:
        log.info(
            "recovered %d page store(s) with %d paged message reference(s)", len(known), paged_total
        )


async def _remove_stale(manager: PagingManager, stale: list[Op]) -> None:
    """Delete paging records of pages or queues that are gone, then the large-message files
    only they kept."""
    log.info("recovery: removing %d paging record(s) of pages or queues that are gone", len(stale))
    large = manager.persistence.large
    files = large.released()
    # Durable before anything is paged: once the new page of that number holds records, an
    # old record of it would count for them.
    tickets = manager.persistence.submit(stale)
    await durable(tickets)
    large.delete_after(partial(manager.persistence.wait, tickets), files)


def _check_large_page_refs(
    manager: PagingManager, known: dict[str, dict[int, PageCursor]]
) -> list[Op]:
    """LARGE_PAGE_REF records keep, of their queues, those that still have to read the page
    record (not acknowledged, page not completed, record not torn off, its transaction
    committed, queue durable and there); the records left with none are deleted, and their
    files."""
    ends = {a: manager.address(a).recovered_below for a in known}
    pages = {a: set(s.pages()) for a in known if (s := manager.address(a).store) is not None}

    def live(ref: PageRef, queue_id: int) -> bool:
        cursor = known.get(ref.address, {}).get(queue_id)
        return (
            cursor is not None
            and (not ref.tx_id or ref.tx_id in manager.committed_txs)
            and (ref.page, ref.offset) < ends[ref.address]
            and ref.page in pages.get(ref.address, ())
            and ref.page not in cursor.completed
            and ref.offset not in cursor.acked.get(ref.page, ())
        )

    return manager.persistence.large.check_page_refs(live)
