"""The ready references of a queue by offset (:mod:`artemis_py.broker.offset_reading` says what
offsets are): what a queue that readers browse by offset keeps beside its deque, so a range
is found without scanning the queue; queues nobody browses pay nothing.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from artemis_py.broker.message import MessageReference


class OffsetIndex:
    """Ready references by offset: a dict for membership and a sorted list of offsets,
    pruned lazily (references leave from anywhere, usually the low end). References of
    streams adopted from other nodes (``ref.stream`` set) go to a sub-index per stream,
    ``adopted``: offsets are only comparable within a stream."""

    __slots__ = ("_offsets", "_refs", "adopted")

    def __init__(self, refs: Iterable[MessageReference] = ()) -> None:
        self._refs: dict[int, MessageReference] = {}
        self.adopted: dict[str, OffsetIndex] = {}
        for ref in refs:
            if ref.stream is None:
                self._refs[ref.offset] = ref
            else:
                self.stream(ref.stream)._add(ref)
        self._offsets = sorted(self._refs)

    def __len__(self) -> int:
        return len(self._refs)

    def add(self, ref: MessageReference) -> None:
        if ref.stream is not None:
            self.stream(ref.stream)._add(ref)
        else:
            self._add(ref)

    def stream(self, stream: str) -> OffsetIndex:
        """The sub-index of an adopted stream (made on first use)."""
        index = self.adopted.get(stream)
        if index is None:
            index = self.adopted[stream] = OffsetIndex()
        return index

    def _add(self, ref: MessageReference) -> None:
        self._refs[ref.offset] = ref
        offsets = self._offsets
        if not offsets or offsets[-1] < ref.offset:
            offsets.append(ref.offset)  # the usual case: a new arrival
        else:
            insort(offsets, ref.offset)  # a cancelled delivery coming back

    def discard(self, ref: MessageReference) -> None:
        if ref.stream is not None:
            index = self.adopted.get(ref.stream)
            if index is not None:
                index._discard(ref)
        else:
            self._discard(ref)

    def _discard(self, ref: MessageReference) -> None:
        if self._refs.get(ref.offset) is ref:
            del self._refs[ref.offset]
            # Stale offsets stay in the list until they outnumber the live ones.
            if len(self._offsets) > 2 * len(self._refs) + 64:
                self._offsets = sorted(self._refs)

    def clear(self) -> None:
        self._refs.clear()
        self._offsets.clear()
        for index in self.adopted.values():
            index.clear()

    def low(self) -> int | None:
        """The lowest offset held, if any."""
        for offset in self._range_offsets(0):
            return offset
        return None

    def range(self, start: int, end: int) -> Iterator[MessageReference]:
        """References with ``start <= offset < end``, in offset order."""
        refs = self._refs
        for offset in self._range_offsets(start):
            if offset >= end:
                return
            yield refs[offset]

    def _range_offsets(self, start: int) -> Iterator[int]:
        refs = self._refs
        offsets = self._offsets
        previous = -1
        for i in range(bisect_left(offsets, start), len(offsets)):
            offset = offsets[i]
            # A reference that left and came back is listed twice: yield it once.
            if offset != previous and offset in refs:
                previous = offset
                yield offset
