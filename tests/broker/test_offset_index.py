"""The offset index of a queue's ready references (no node, no sockets)."""

from __future__ import annotations

from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.offset_index import OffsetIndex
from artemis_py.broker.queue import Queue
from artemis_py.config import RoutingType


def refs(queue: Queue, *offsets: int) -> list[MessageReference]:
    return [MessageReference(Message(o, "a"), queue, 0, o) for o in offsets]


def test_ranges_in_offset_order_whatever_the_arrival_order():
    q = Queue(1, "q", "a", RoutingType.ANYCAST)
    index = OffsetIndex()
    for ref in refs(q, 5, 9, 7, 20):
        index.add(ref)
    assert [r.offset for r in index.range(6, 20)] == [7, 9]
    assert [r.offset for r in index.range(0, 100)] == [5, 7, 9, 20]
    assert index.low() == 5
    assert len(index) == 4


def test_a_reference_that_leaves_and_comes_back_is_listed_once():
    q = Queue(1, "q", "a", RoutingType.ANYCAST)
    index = OffsetIndex()
    a, b = refs(q, 3, 4)
    index.add(a)
    index.add(b)
    index.discard(a)
    assert index.low() == 4
    index.add(a)  # a cancelled delivery back at the head
    assert [r.offset for r in index.range(0, 10)] == [3, 4]


def test_many_removals_keep_it_small_and_correct():
    q = Queue(1, "q", "a", RoutingType.ANYCAST)
    all_refs = refs(q, *range(1, 1001))
    index = OffsetIndex(all_refs)
    for ref in all_refs[:990]:
        index.discard(ref)
    assert [r.offset for r in index.range(0, 2000)] == list(range(991, 1001))
    assert len(index._offsets) < 100  # compacted


def test_the_queue_keeps_its_index_in_step():
    q = Queue(1, "q", "a", RoutingType.ANYCAST)
    for ref in refs(q, 1, 2, 3):
        q.add(ref)
    index = q.offset_index()
    more = refs(q, 4, 5)
    q.add_many(more)
    q.remove([q.messages[0]])  # the oldest, as acknowledgeUpTo takes them
    assert [r.offset for r in index.range(0, 10)] == [2, 3, 4, 5]
    q.remove([more[0]])  # from the middle
    assert [r.offset for r in index.range(0, 10)] == [2, 3, 5]
    assert [r.offset for r in q.messages] == [2, 3, 5]
    q.remove_all()
    assert index.low() is None


def test_stable_end_is_the_lowest_offset_still_arriving():
    q = Queue(1, "q", "a", RoutingType.ANYCAST)
    assert q.stable_end(100) == 100
    q.arriving.update({40, 37})
    assert q.stable_end(100) == 37


def test_adopted_streams_are_indexed_apart_from_the_own_one():
    # Offsets are only comparable within a stream: the same number in two streams is two
    # references.
    q = Queue(1, "q", "a", RoutingType.ANYCAST)
    own, moved = refs(q, 5, 7), refs(q, 5, 6)
    for ref in moved:
        ref.stream = "departed"
    index = OffsetIndex([*own, *moved])
    assert [r.offset for r in index.range(0, 10)] == [5, 7]
    assert [r.offset for r in index.stream("departed").range(0, 10)] == [5, 6]
    index.discard(moved[0])
    assert index.stream("departed").low() == 6
    assert index.low() == 5
    assert len(index) == 2
    assert len(index.stream("departed")) == 1
