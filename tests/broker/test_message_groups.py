"""Message groups and exclusive queues in a queue (no sockets): owners, busy owners that let
other groups pass, rebalancing with its pause, buckets, and an exclusive consumer."""

from __future__ import annotations

from dataclasses import dataclass, field

from artemis_py.broker.filter import Filter
from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.message_groups import DispatchRules
from artemis_py.broker.queue import Queue
from artemis_py.config import RoutingType


@dataclass(eq=False)
class Taker:
    name: str
    credit: int = 100
    selector: Filter | None = None
    got: list[MessageReference] = field(default_factory=list)

    def has_credit(self) -> bool:
        return self.credit > 0

    def deliver(self, ref: MessageReference) -> None:
        self.credit -= 1
        self.got.append(ref)

    @property
    def bodies(self) -> list[str]:
        return [r.message.body.decode() for r in self.got]


def queue(rules: DispatchRules | None = None) -> Queue:
    return Queue(1, "q", "a", RoutingType.ANYCAST, rules=rules)


def add(q: Queue, body: str, group: str | None = None, **props: str) -> MessageReference:
    message = Message(
        len(body), "a", body=body.encode(), group_id=group, properties=tuple(props.items())
    )
    ref = MessageReference(message, q)
    q.add(ref)
    return ref


def test_a_busy_owner_s_group_waits_in_place_while_others_pass() -> None:
    q = queue()
    a, b = Taker("a", credit=1), Taker("b")
    q.add_consumer(a)
    q.add_consumer(b)
    add(q, "A1", "A")  # a owns A, and is full now
    add(q, "A2", "A")
    add(q, "B1", "B")
    add(q, "free")
    assert a.bodies == ["A1"]
    assert b.bodies == ["B1", "free"]
    assert [r.message.body for r in q.messages] == [b"A2"]
    a.credit = 5
    q.deliver()
    assert a.bodies == ["A1", "A2"]


def test_rebalance_with_pause_waits_for_deliveries_to_settle() -> None:
    q = queue(DispatchRules(rebalance=True, pause_to_rebalance=True))
    a = Taker("a")
    q.add_consumer(a)
    add(q, "A1", "A")
    b = Taker("b")
    q.add_consumer(b)  # owners cleared; A1 still unacknowledged: dispatch pauses
    add(q, "A2", "A")
    assert b.bodies == []
    assert a.bodies == ["A1"]
    q.acknowledged()
    assert a.bodies + b.bodies == ["A1", "A2"]


def test_buckets_share_owners_and_an_exclusive_queue_has_one_consumer() -> None:
    q = queue(DispatchRules(buckets=1))  # every group in one bucket: one owner for all
    a, b = Taker("a"), Taker("b")
    q.add_consumer(a)
    q.add_consumer(b)
    for group in "XYZ":
        add(q, group, group)
    assert sorted([a.bodies, b.bodies]) == [[], ["X", "Y", "Z"]]

    exclusive = queue(DispatchRules(exclusive=True, first_key="First"))
    c, d = Taker("c"), Taker("d")
    exclusive.add_consumer(c)
    exclusive.add_consumer(d)
    first = add(exclusive, "1", "G")
    add(exclusive, "2")
    assert c.bodies == ["1", "2"]
    assert first.first_in_group
    exclusive.remove_consumer(c)
    add(exclusive, "3")
    assert d.bodies == ["3"]


def test_a_last_value_queue_keeps_the_latest_waiting_message_per_value() -> None:
    replaced: list[MessageReference] = []

    def acknowledge(ref: MessageReference) -> None:  # (as Acknowledgements.replaced counts)
        ref.queue.delivering -= 1
        replaced.append(ref)

    q = Queue(1, "q", "a", RoutingType.ANYCAST, last_value_key="stock", on_replaced=acknowledge)
    add(q, "ibm-1", stock="IBM")
    add(q, "aapl-1", stock="AAPL")
    add(q, "ibm-2", stock="IBM")
    add(q, "plain")
    add(q, "ibm-3", stock="IBM")
    assert [r.message.body for r in q.messages] == [b"aapl-1", b"plain", b"ibm-3"]
    assert [r.message.body for r in replaced] == [b"ibm-1", b"ibm-2"]
    taker = Taker("t", credit=1)
    q.add_consumer(taker)  # takes aapl-1: on its way, it is replaced no more
    add(q, "aapl-2", stock="AAPL")
    assert taker.bodies == ["aapl-1"]
    assert [r.message.body for r in q.messages] == [b"plain", b"ibm-3", b"aapl-2"]
    # A delivery that comes back after a newer value arrived is dropped as replaced.
    q.remove_consumer(taker)
    q.cancel(list(taker.got))
    assert [r.message.body for r in replaced][-1] == b"aapl-1"
    assert q.messages_replaced == 3
    assert q.delivering == 0
