"""Queue offsets: a position for every message reference, for readers that replay by range.

Theory of operation
-------------------
Every reference gets an *offset* when its records are built (its send, or the commit of its
transaction): a fresh id from the node's id generator, one per routed message, journaled in
its ADD_REF record. The generator reserves blocks of ids in the bindings journal before it
hands them out, so an offset is never handed out twice, even after ``kill -9``, and the
offsets of one queue grow in the order its references were stored. Gaps are normal (ids
serve messages and transactions too, and a filtered or abandoned send leaves one).

Offsets are for readers that come back to a range (a Spark query re-running a batch,
:mod:`artemis_py.spark`): such a reader may only plan up to a queue's *stable end*, the
lowest offset that could still become visible. A send becomes visible when its records are
durable, and sends of several connections settle out of order; the queue keeps the offsets
routed to it that have not settled (:attr:`~artemis_py.broker.queue.Queue.arriving`), and
the stable end is the lowest of them, or the generator's next id when there are none. No
reference can appear below it later, so a reader that has passed it misses nothing (Kafka's
"last stable offset" plays the same part).

A queue that readers browse keeps an :class:`OffsetIndex` of its ready references, so a
range is found without scanning the queue; queues nobody browses pay nothing.

Paged messages carry their offsets in their page records. A browse takes the memory range
from the index and the paged range from the page files after the queue's cursor (memory
holds the older messages: paging is FIFO), both snapshotted at one instant, and merges
them; acknowledging up to an offset acknowledges paged messages in their pages
(:mod:`artemis_py.broker.paging.by_offset`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.offset_index import OffsetIndex
from artemis_py.broker.paging import by_offset
from artemis_py.broker.pending import Pending
from artemis_py.broker.records import OFFSET_MARK, SEALED_STREAM, encode_offset_mark
from artemis_py.exceptions import ArtemisError
from artemis_py.storage import Op

if TYPE_CHECKING:
    from artemis_py.broker.acknowledging import Acknowledgements
    from artemis_py.broker.message import MessageReference
    from artemis_py.broker.paging.address import AddressPaging
    from artemis_py.broker.paging.cursor import PageCursor
    from artemis_py.broker.paging.manager import PagingManager
    from artemis_py.broker.pending import Ticket
    from artemis_py.broker.persistence import Persistence
    from artemis_py.broker.queue import Queue


class OffsetReadError(ArtemisError):
    """A read by offset the broker cannot serve (the text is for the client)."""


@dataclass(frozen=True, slots=True)
class BrowseResult:
    """What a browse by offset found: ``refs`` in offset order, where to continue
    (``next``), the stream's stable end, the lowest offset held in it (None: none), its
    offset mark (0: none) and its state."""

    refs: list[MessageReference]
    next: int
    end: int
    low: int | None
    mark: int
    state: str


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """One stream of a queue on this node: its id, lowest offset held (or its stable end
    when it holds nothing), stable end, state and number of messages held."""

    stream: str
    low: int
    end: int
    state: str
    count: int


NATIVE = "native"  # the stream of the messages this node stored itself
ADOPTED = "adopted"  # moved here by a scale-down still under way (nothing readable yet)
SEALED = "sealed"  # moved here by a finished scale-down: readable up to its end
ABSENT = "absent"  # a stream this node does not hold


class OffsetReading:
    """Browsing a broker's queues by offset, acknowledging up to an offset, and the
    queues' offset marks (see the module doc)."""

    def __init__(
        self,
        node_id: str,
        persistence: Persistence,
        paging: PagingManager,
        acks: Acknowledgements,
    ) -> None:
        self.node_id = node_id
        self.persistence = persistence
        self.paging = paging
        self.acks = acks
        # Journal record ids of marks and sealed ends by (queue id, stream, record type).
        self._mark_records: dict[tuple[int, str, int], int] = {}

    @property
    def stream(self) -> str:
        """The id of this node's own stream: its node id."""
        return self.node_id

    def stable_end(self, queue: Queue) -> int:
        return queue.stable_end(self.persistence.next_free_id)

    def _paged(self, queue: Queue) -> tuple[AddressPaging, PageCursor] | None:
        """The queue's address paging and cursor, when it has paged messages."""
        if queue.paged <= 0:
            return None
        paging = self.paging.addresses.get(queue.address)
        cursor = paging.cursors.get(queue.id) if paging is not None else None
        if paging is None or cursor is None or paging.store is None:
            return None
        return paging, cursor

    async def browse(
        self, queue: Queue, stream: str, start: int, end: int | None, limit: int
    ) -> BrowseResult:
        """Ready references of ``stream`` with ``start <= offset < end`` (``end`` capped at
        the stream's stable end), at most ``limit`` of them (-1: no limit). Nothing is taken.

        Paged messages are read from the page files (worker threads) without being
        depaged; memory and pages are snapshotted at one instant (see
        :mod:`artemis_py.broker.paging.by_offset`)."""
        while True:
            stable = self.stable_end(queue)
            mark = queue.marks.get(stream, 0)
            if stream != self.stream:
                await trio.lowlevel.checkpoint()
                return self._browse_adopted(queue, stream, start, end, limit)
            index = queue.offset_index()
            stop = stable if end is None else min(end, stable)
            want = -1 if limit < 0 else limit + 1  # one more: where to continue
            refs = list(itertools.islice(index.range(start, stop), want if want >= 0 else None))
            low = index.low()
            paged = self._paged(queue)
            if paged is None:
                await trio.lowlevel.checkpoint()
                break
            paging, cursor = paged
            snap = by_offset.snapshot(paging, cursor)
            try:
                from_pages = await by_offset.scan(paging, cursor, snap, start, stop, want)
                paged_low = await by_offset.lowest(paging, cursor)
            except by_offset.PageGone:
                continue  # a page went while it was read: take a fresh snapshot
            # Memory holds the older references, pages the newer (paging is FIFO); a
            # reference redelivered into memory keeps its offset: merge to be exact.
            refs = list(heapq.merge(refs, from_pages, key=_offset))
            if paged_low is not None:
                low = paged_low if low is None else min(low, paged_low)
            break
        following = max(start, stop)
        if 0 <= limit < len(refs):
            following = refs[limit].offset
            del refs[limit:]
        return BrowseResult(refs, following, stable, low, mark, NATIVE)

    async def streams(self, queue: Queue) -> list[StreamInfo]:
        """The streams of ``queue`` on this node: its own, and those adopted from nodes
        that scaled down to it (:mod:`.streams`). The own one's count includes the paged
        messages; its low reads a page only when the queue's lowest paged offset is not
        known since its cursor last moved."""
        index = queue.offset_index()
        end = self.stable_end(queue)
        low = index.low()
        count = len(index)
        paged = self._paged(queue)
        if paged is not None:
            count += queue.paged
            paged_low = await by_offset.lowest(*paged)
            if paged_low is not None:
                low = paged_low if low is None else min(low, paged_low)
        else:
            await trio.lowlevel.checkpoint()
        found = [StreamInfo(self.stream, end if low is None else low, end, NATIVE, count)]
        for stream in sorted(self._adopted_streams(queue)):
            adopted = self._adopted(queue, stream)
            assert adopted is not None
            sub, state, stream_end = adopted
            sub_low = sub.low()
            held = stream_end if sub_low is None else sub_low
            found.append(StreamInfo(stream, held, stream_end, state, len(sub)))
        return found

    def _browse_adopted(
        self, queue: Queue, stream: str, start: int, end: int | None, limit: int
    ) -> BrowseResult:
        """A browse of a stream adopted from a node that scaled down (in memory only)."""
        mark = queue.marks.get(stream, 0)
        adopted = self._adopted(queue, stream)
        if adopted is None:
            return BrowseResult([], start, start, None, mark, ABSENT)
        index, state, stable = adopted
        stop = stable if end is None else min(end, stable)
        refs: list[MessageReference] = []
        following = max(start, stop)
        for ref in index.range(start, stop):
            if len(refs) == limit:
                following = ref.offset
                break
            refs.append(ref)
        return BrowseResult(refs, following, stable, index.low(), mark, state)

    def _adopted_streams(self, queue: Queue) -> set[str]:
        index = queue.index
        streams = set(queue.sealed) | {s for s in queue.marks if s != self.stream}
        if index is not None:
            streams.update(s for s, sub in index.adopted.items() if len(sub))
        return streams

    def _adopted(self, queue: Queue, stream: str) -> tuple[OffsetIndex, str, int] | None:
        """An adopted stream's index, state and stable end; None if this node has none.
        Unsealed, nothing of it is readable yet: its end is its lowest offset."""
        held = queue.index.adopted.get(stream) if queue.index is not None else None
        if not (
            held or stream in queue.sealed or (stream in queue.marks and stream != self.stream)
        ):
            return None
        index = queue.offset_index().stream(stream)
        sealed = queue.sealed.get(stream)
        if sealed is not None:
            return index, SEALED, sealed
        low = index.low()
        return index, ADOPTED, queue.marks.get(stream, 0) if low is None else low

    def acknowledge_up_to(self, queue: Queue, stream: str, offset: int) -> Pending:
        """Acknowledge every ready reference of ``stream`` below ``offset`` and raise the
        queue's offset mark for it to ``offset``; cumulative and idempotent.

        Paged messages below ``offset`` are acknowledged in their pages (PAGE_ACK records,
        then their pages complete and go; :mod:`artemis_py.broker.paging.by_offset`)
        before the references in memory below it (depaged meanwhile ones included) and
        the mark; the returned pending settles once all of it is durable."""
        if stream != self.stream or self._paged(queue) is None:
            return self._acknowledge_memory(queue, stream, offset)
        pending = Pending()

        async def gate() -> None:
            paged = self._paged(queue)
            if paged is not None:
                pending.tickets += await by_offset.acknowledge_below(*paged, offset)
            done = self._acknowledge_memory(queue, stream, offset)
            if done.gate is not None:
                await done.gate()
            pending.tickets += done.tickets
            pending.on_durable += done.on_durable

        pending.gate = gate
        return pending

    def _acknowledge_memory(self, queue: Queue, stream: str, offset: int) -> Pending:
        pending = Pending()
        index = queue.offset_index()
        if stream != self.stream:
            index = index.stream(stream)
        refs = list(index.range(0, offset))
        if refs:
            pending = self.acks.discard(refs)
        if offset > queue.marks.get(stream, -1):
            queue.marks[stream] = offset
            pending.tickets += self._store(queue, stream, offset, OFFSET_MARK)
        return pending

    def seal(self, queue: Queue, stream: str, end: int, mark: int) -> Pending:
        """A node that scaled down here moved all of ``stream`` (see :mod:`.streams`): it
        is readable up to ``end``; its offset mark there was ``mark``."""
        tickets = []
        if stream != self.stream and end > queue.sealed.get(stream, -1):
            queue.sealed[stream] = end
            tickets += self._store(queue, stream, end, SEALED_STREAM)
        pending = self.acknowledge_up_to(queue, stream, mark) if mark else Pending()
        pending.tickets += tickets
        return pending

    def remove_marks(self, queue: Queue) -> Pending:
        """Forget ``queue``'s offset marks and sealed ends: it is an ordinary queue again
        (adopted references stay in their streams)."""
        queue.marks.clear()
        queue.sealed.clear()
        return Pending(tickets=self.persistence.submit(self.queue_removed(queue)))

    def _store(self, queue: Queue, stream: str, value: int, record_type: int) -> list[Ticket]:
        """Journal a queue's offset mark or sealed end for ``stream`` (add, then updates)."""
        persistence = self.persistence
        if not queue.durable or not persistence.stores_messages:
            return []
        payload = encode_offset_mark(queue.id, stream, value)
        key = (queue.id, stream, record_type)
        record_id = self._mark_records.get(key)
        if record_id is None:
            record_id = self._mark_records[key] = persistence.next_id()
            op = Op.add(record_id, record_type, payload)
        else:
            op = Op.update(record_id, record_type, payload)
        return persistence.submit([op])

    def recover(
        self, records: Iterable[tuple[int, int, int, str, int]], queues: Iterable[Queue]
    ) -> list[Op]:
        """Restore the marks and sealed ends (record id, record type, queue id, stream,
        value) of ``queues``; returns the deletes of those whose queue is gone."""
        by_id = {q.id: q for q in queues}
        gone = []
        for record_id, record_type, queue_id, stream, value in records:
            queue = by_id.get(queue_id)
            if queue is None:
                gone.append(Op.delete(record_id))
                continue
            held = queue.sealed if record_type == SEALED_STREAM else queue.marks
            held[stream] = value
            self._mark_records[(queue_id, stream, record_type)] = record_id
        return gone

    def queue_removed(self, queue: Queue) -> list[Op]:
        """The deletes of a removed queue's mark records."""
        keys = [k for k in self._mark_records if k[0] == queue.id]
        return [Op.delete(self._mark_records.pop(k)) for k in keys]


def _offset(ref: MessageReference) -> int:
    return ref.offset
