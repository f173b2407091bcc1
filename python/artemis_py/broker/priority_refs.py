"""A queue's ready references by message priority (Artemis's PriorityLinkedList).

Message priorities run from 0 to 9: a queue delivers its higher-priority messages first and
keeps arrival order within one priority; a delivery cancelled back returns to the head of its
own priority. While every message has one priority a queue keeps them in a plain deque, the
cheapest structure for the usual case (:class:`~artemis_py.broker.queue.Queue` switches to
this class the first time another priority arrives, and back once it is empty).

:class:`PriorityRefs` offers the part of :class:`collections.deque`'s interface that queues
and their readers use (``append``, ``extend``, ``popleft``, ``extendleft``, ``remove``, ``clear``, length,
truth and iteration in delivery order), so nothing else needs to know which one it holds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from artemis_py.broker.message import MessageReference

PRIORITIES = 10  # 0 (lowest) .. 9 (highest)


class PriorityRefs:
    """Ready references in delivery order: by priority, highest first, then arrival."""

    __slots__ = ("_count", "_lanes")

    def __init__(self, refs: Iterable[MessageReference] = ()) -> None:
        self._lanes: list[deque[MessageReference]] = [deque() for _ in range(PRIORITIES)]
        self._count = 0
        self.extend(refs)

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[MessageReference]:
        return chain.from_iterable(reversed(self._lanes))

    def append(self, ref: MessageReference) -> None:
        self._lanes[ref.message.priority].append(ref)
        self._count += 1

    def extend(self, refs: Iterable[MessageReference]) -> None:
        for ref in refs:
            self._lanes[ref.message.priority].append(ref)
            self._count += 1

    def extendleft(self, refs: Iterable[MessageReference]) -> None:
        """As :meth:`deque.extendleft`: each reference goes to the head of its priority, so
        ``extendleft(reversed(refs))`` puts ``refs`` back in their order."""
        for ref in refs:
            self._lanes[ref.message.priority].appendleft(ref)
            self._count += 1

    def popleft(self) -> MessageReference:
        for lane in reversed(self._lanes):
            if lane:
                self._count -= 1
                return lane.popleft()
        raise IndexError("pop from an empty PriorityRefs")

    def remove(self, ref: MessageReference) -> None:
        self._lanes[ref.message.priority].remove(ref)
        self._count -= 1

    def clear(self) -> None:
        for lane in self._lanes:
            lane.clear()
        self._count = 0
