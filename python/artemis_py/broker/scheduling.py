"""Scheduled delivery and redelivery delay: references held back until a time.

Theory of operation
-------------------
A message sent with a delivery time (STOMP ``AMQ_SCHEDULED_DELAY`` / ``AMQ_SCHEDULED_TIME``,
kept in the message as ``_AMQ_SCHED_DELIVERY``, :attr:`Message.scheduled`) reaches its queues
as any other does, durable first; each queue then *holds* its reference
(:meth:`Queue.add` keeps it in ``Queue.scheduled`` and asks the node's :class:`Scheduler`)
instead of offering it to consumers. A delivery that comes back unacknowledged while the
address has a ``redelivery-delay`` is held the same way (:func:`redelivery_delay`).

The scheduler is one Trio task for the node: a heap of (time, reference), a sleep until the
earliest, and at that time each due reference goes back to its queue, at the head, as Artemis
puts scheduled messages back. A reference its queue no longer holds (purged, moved, the queue
deleted) is skipped. The time is the wall clock's (epoch milliseconds), as Artemis's is: the
schedule of a persisted message survives a restart, and one due meanwhile goes at once.

A redelivery delay's hold survives a restart too: its time is journaled beside the message
(a SCHEDULED_DELIVERY_TIME update per queue, written by :mod:`.acknowledging`, read back by
:mod:`.journal_recovery`), as Artemis's QueueImpl does with updateScheduledDeliveryTime.
Not for a depaged reference (Artemis skips paged ones too): its message is in the page
files, with no journal record to update, so after a restart it is delivered at once. A held
reference moved to another node (scale-down) keeps its time there as its copy's
:attr:`Message.scheduled` (:func:`carry_hold`).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.message import SCHEDULED_PROPERTY, now_ms

if TYPE_CHECKING:
    from artemis_py.broker.message import Message, MessageReference
    from artemis_py.config import AddressSettings

#: The latest delivery time a message may ask for (the last millisecond of year 9999).
LATEST_SCHEDULE_MS = 253_402_300_799_999


class Scheduler:
    """The node's held references and the task that releases them on time."""

    def __init__(self, clock_ms: Callable[[], int] = now_ms) -> None:
        self._clock_ms = clock_ms
        # (time, order, a reference to give back or something to call)
        self._heap: list[tuple[int, int, MessageReference | Callable[[], None]]] = []
        self._order = itertools.count()  # (a tie-breaker: references do not compare)
        self._wake = trio.Event()

    def __len__(self) -> int:
        return len(self._heap)

    def hold(self, ref: MessageReference | Callable[[], None], due_ms: int) -> None:
        """Give ``ref`` back to its queue at ``due_ms`` (epoch ms), or call it then."""
        earliest = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (due_ms, next(self._order), ref))
        if earliest is None or due_ms < earliest:
            self._wake.set()

    def release_due(self) -> float:
        """Give every due reference back to its queue; the seconds until the next is due."""
        now = self._clock_ms()
        heap = self._heap
        due: dict[int, list[MessageReference]] = {}
        while heap and heap[0][0] <= now:
            item = heapq.heappop(heap)[2]
            if callable(item):
                item()
            else:
                due.setdefault(id(item.queue), []).append(item)
        for refs in due.values():
            refs[0].queue.add_due(refs)
        return (heap[0][0] - now) / 1000 if heap else math.inf

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            wait = self.release_due()
            self._wake = trio.Event()
            with trio.move_on_after(wait):
                await self._wake.wait()


def carry_hold(ref: MessageReference, copy: Message) -> None:
    """``copy`` of ``ref``'s message leaves for another queue (scale-down): a hold of
    ``ref`` later than the message's own schedule becomes the copy's schedule. Artemis's
    scale-down does the same: it gives a held reference's time to its message's
    _AMQ_SCHED_DELIVERY before sending it (QueueImpl.deliverScheduledMessages)."""
    due = ref.queue.scheduled.get(ref, 0)
    if due > copy.scheduled:
        copy.set_properties({SCHEDULED_PROPERTY: str(due)})
        copy.scheduled = due


def redelivery_delay(settings: AddressSettings, delivery_count: int) -> int:
    """How long a delivery that came back waits (ms; 0: none), as Artemis computes it:
    ``redelivery-delay`` x multiplier^(deliveries - 1), varied by up to the collision
    avoidance factor either way, capped at ``max-redelivery-delay``."""
    delay = settings.redelivery_delay
    if delay <= 0:
        return 0
    delay = int(delay * settings.redelivery_delay_multiplier ** max(delivery_count - 1, 0))
    factor = settings.redelivery_collision_avoidance_factor
    if factor > 0:
        delay += int(delay * random.uniform(-factor, factor))
    return min(delay, settings.max_redelivery_delay)
