"""Message priority in a queue (no sockets): higher priorities are delivered first, arrival
order within a priority, cancelled deliveries back at the head of their own priority, and the
plain deque again once the queue empties."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from artemis_py.broker.filter import Filter
from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.priority_refs import PriorityRefs
from artemis_py.broker.queue import Queue
from artemis_py.config import RoutingType


@dataclass(eq=False)
class Taker:
    credit: int = 0
    selector: Filter | None = None
    got: list[MessageReference] = field(default_factory=list)

    def has_credit(self) -> bool:
        return self.credit > 0

    def deliver(self, ref: MessageReference) -> None:
        self.credit -= 1
        self.got.append(ref)


def ref(q: Queue, n: int, priority: int, **props: str) -> MessageReference:
    message = Message(n, "a", priority=priority, properties=tuple(props.items()))
    return MessageReference(message, q)


def ids(refs: list[MessageReference]) -> list[int]:
    return [r.message.message_id for r in refs]


def test_higher_priorities_first_and_arrival_order_within_one() -> None:
    q = Queue(1, "q", "a", RoutingType.ANYCAST)
    for n, priority in enumerate([1, 9, 4, 9, 0, 4]):
        q.add(ref(q, n, priority))
    assert isinstance(q.messages, PriorityRefs)
    assert ids(list(q.messages)) == [1, 3, 2, 5, 0, 4]
    taker = Taker(credit=6)
    q.add_consumer(taker)
    assert ids(taker.got) == [1, 3, 2, 5, 0, 4]
    assert type(q.messages) is deque  # empty again: the cheap kind


def test_a_cancelled_delivery_returns_to_the_head_of_its_priority() -> None:
    q = Queue(1, "q", "a", RoutingType.ANYCAST)
    taker = Taker(credit=2)
    q.add_consumer(taker)
    for n, priority in enumerate([9, 5]):
        q.add(ref(q, n, priority))
    for n, priority in enumerate([9, 5, 1], start=2):
        q.add(ref(q, n, priority))
    q.remove_consumer(taker)
    q.cancel(taker.got)  # 0 (9) and 1 (5) come back before 2 (9) and 3 (5)
    assert ids(list(q.messages)) == [0, 2, 1, 3, 4]


def test_selectors_skip_in_place_across_priorities() -> None:
    q = Queue(1, "q", "a", RoutingType.ANYCAST)
    for n, (priority, color) in enumerate([(2, "red"), (8, "blue"), (8, "red"), (2, "blue")]):
        q.add(ref(q, n, priority, color=color))
    reds = Taker(credit=10, selector=Filter.parse("color = 'red'"))
    q.add_consumer(reds)
    assert ids(reds.got) == [2, 0]
    assert ids(list(q.messages)) == [1, 3]
    blue_low = list(q.messages)[1]
    q.remove([blue_low])  # (taken out of the middle: redistribution)
    assert ids(list(q.messages)) == [1]
    assert isinstance(q.messages, PriorityRefs)
