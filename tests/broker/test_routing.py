"""Routing and delivery in the broker core, without sockets or disks.

The post office decides which queues a message goes to; a queue hands references to
consumers round robin, honouring credit and selectors; cancelled deliveries go back to the
head in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from artemis_py.broker.filter import Filter
from artemis_py.broker.message import Message, MessageReference, decode_message, encode_message
from artemis_py.broker.queue import MaxConsumersReachedError, Queue
from artemis_py.broker.routing.post_office import Address, PostOffice, split_fqqn
from artemis_py.config import RoutingType

ANY = RoutingType.ANYCAST
MULTI = RoutingType.MULTICAST


def local_route(po: PostOffice, *args: object) -> list[Queue]:
    queues, remote = po.route(*args)  # type: ignore[arg-type]
    assert remote == []
    return queues


@dataclass(eq=False)
class FakeConsumer:
    name: str
    credit: int = 1_000_000
    selector: Filter | None = None
    got: list[MessageReference] = field(default_factory=list)

    def has_credit(self) -> bool:
        return self.credit > 0

    def deliver(self, ref: MessageReference) -> None:
        self.credit -= 1
        self.got.append(ref)

    @property
    def bodies(self) -> list[bytes]:
        return [r.message.body for r in self.got]


def message(n: int, address: str = "orders", **props: str) -> Message:
    return Message(n, address, body=b"m%d" % n, properties=tuple(props.items()))


def queue(name: str, address: str = "orders", routing: RoutingType = ANY, filt: str = "") -> Queue:
    return Queue(len(name), name, address, routing, filter=Filter.parse(filt))


def fill(q: Queue, count: int, **props: str) -> None:
    for n in range(count):
        q.add(MessageReference(message(n, **props), q))


def test_anycast_consumers_get_messages_round_robin() -> None:
    q = queue("orders")
    a, b, c = FakeConsumer("a"), FakeConsumer("b"), FakeConsumer("c")
    for consumer in (a, b, c):
        q.add_consumer(consumer)
    fill(q, 7)
    assert a.bodies == [b"m0", b"m3", b"m6"]
    assert b.bodies == [b"m1", b"m4"]
    assert c.bodies == [b"m2", b"m5"]
    assert q.delivering == 7
    assert not q.messages


def test_consumers_without_credit_are_skipped_and_resume_when_it_returns() -> None:
    q = queue("orders")
    a, b = FakeConsumer("a", credit=1), FakeConsumer("b", credit=2)
    q.add_consumer(a)
    q.add_consumer(b)
    fill(q, 5)
    assert a.bodies == [b"m0"]
    assert b.bodies == [b"m1", b"m2"]
    assert [r.message.body for r in q.messages] == [b"m3", b"m4"]
    a.credit = 5
    q.deliver()
    assert a.bodies == [b"m0", b"m3", b"m4"]


def test_selector_leaves_unmatched_messages_in_place_without_blocking_others() -> None:
    q = queue("orders")
    red = FakeConsumer("red", selector=Filter.parse("color = 'red'"))
    q.add_consumer(red)
    q.add(MessageReference(message(1, color="blue"), q))
    q.add(MessageReference(message(2, color="red"), q))
    q.add(MessageReference(message(3, color="blue"), q))
    assert red.bodies == [b"m2"]
    assert [r.message.message_id for r in q.messages] == [1, 3]
    anyone = FakeConsumer("anyone")
    q.add_consumer(anyone)
    assert anyone.bodies == [b"m1", b"m3"]


def test_cancelled_deliveries_return_to_the_head_in_order_with_their_count() -> None:
    q = queue("orders")
    a = FakeConsumer("a")
    q.add_consumer(a)
    fill(q, 3)
    q.remove_consumer(a)
    q.add(MessageReference(message(9), q))
    q.cancel(list(a.got))
    assert [r.message.message_id for r in q.messages] == [0, 1, 2, 9]
    b = FakeConsumer("b")
    q.add_consumer(b)
    assert [r.delivery_count for r in b.got] == [2, 2, 2, 1]


def test_max_consumers_is_enforced() -> None:
    q = Queue(1, "single", "single", ANY, max_consumers=1)
    q.add_consumer(FakeConsumer("a"))
    with pytest.raises(MaxConsumersReachedError, match="maximum of 1"):
        q.add_consumer(FakeConsumer("b"))


def post_office(*queues: Queue) -> tuple[PostOffice, Address]:
    po = PostOffice()
    address = Address(1, "orders", {ANY, MULTI})
    po.add_address(address)
    for q in queues:
        po.add_queue(q)
    return po, address


def test_anycast_routes_to_one_queue_round_robin_and_respects_filters() -> None:
    eu, us = queue("eu", filt="region = 'eu'"), queue("us", filt="region <> 'eu'")
    plain = queue("plain")
    po, address = post_office(eu, us, plain)
    m = message(1, region="eu")
    chosen = [local_route(po, address, ANY, m.filter_value)[0].name for _ in range(4)]
    assert chosen == ["eu", "plain", "eu", "plain"]
    # Only the queues whose filter accepts the message take part in the round robin.
    us_message = message(2, region="us")
    chosen = [local_route(po, address, ANY, us_message.filter_value)[0].name for _ in range(2)]
    assert sorted(chosen) == ["plain", "us"]


def test_multicast_copies_to_every_matching_subscription() -> None:
    s1, s2 = queue("s1", routing=MULTI), queue("s2", routing=MULTI, filt="urgent = 'yes'")
    anycast = queue("work")
    po, address = post_office(s1, s2, anycast)
    assert [q.name for q in local_route(po, address, MULTI, message(1).filter_value)] == ["s1"]
    urgent = message(2, urgent="yes")
    assert [q.name for q in local_route(po, address, MULTI, urgent.filter_value)] == ["s1", "s2"]
    # No routing type: one anycast queue plus every multicast subscription.
    assert [q.name for q in local_route(po, address, None, urgent.filter_value)] == [
        "work",
        "s1",
        "s2",
    ]


def test_fully_qualified_names_split() -> None:
    assert split_fqqn("orders::eu") == ("orders", "eu")
    assert split_fqqn("orders") == ("orders", None)


def test_message_journal_encoding_round_trips() -> None:
    original = Message(
        42,
        "prices.eu",
        body=b"\x00binary\xffbody",
        properties=(("k", "v"), ("k", "second"), ("unicode", "héllo")),
        routing_type=MULTI,
        durable=True,
        priority=7,
        timestamp=1_700_000_000_000,
        expiration=1_800_000_000_000,
    )
    copy = decode_message(42, encode_message(original))
    for attribute in (
        "address",
        "body",
        "properties",
        "routing_type",
        "durable",
        "priority",
        "timestamp",
        "expiration",
    ):
        assert getattr(copy, attribute) == getattr(original, attribute), attribute
    assert copy.property("k") == "v"  # the first of repeated headers wins
    with pytest.raises(ValueError, match="unreadable message record 7"):
        decode_message(7, b"\x01\x00")


def test_a_paused_queue_takes_messages_but_delivers_none_until_resumed() -> None:
    q = queue("orders")
    consumer = FakeConsumer("c")
    q.add_consumer(consumer)
    fill(q, 2)
    q.pause()
    fill(q, 3)
    q.add_consumer(FakeConsumer("late"))  # a new consumer does not start delivery either
    assert consumer.bodies == [b"m0", b"m1"]
    assert (q.paused, q.messages_added, len(q.messages)) == (True, 5, 3)
    q.resume()
    assert not q.paused
    assert len(q.messages) == 0
    assert q.delivering == 5
