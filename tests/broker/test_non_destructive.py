"""Non-destructive queues in the broker core (no sockets): every consumer reads every message
from its own position, acknowledgements and cancels only end deliveries, and messages leave
only by a later last value, the ring, expiry or removal; over the in-memory store, an
acknowledgement writes nothing and a restart finds every message."""

from __future__ import annotations

from dataclasses import dataclass, field

from artemis_py.broker.broker import Broker
from artemis_py.broker.filter import Filter
from artemis_py.broker.message import Message, MessageReference, now_ms
from artemis_py.broker.non_destructive import NonDestructiveQueue
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.broker.store import MemoryStore
from artemis_py.config import QueueKind, RoutingType
from artemis_py.config.parse import default_config

NODE = "0123456789abcdef"


@dataclass(eq=False)
class Reader:
    credit: int = 100
    selector: Filter | None = None
    got: list[MessageReference] = field(default_factory=list)

    def has_credit(self) -> bool:
        return self.credit > 0

    def deliver(self, ref: MessageReference) -> None:
        self.credit -= 1
        self.got.append(ref)

    def bodies(self) -> list[bytes]:
        return [ref.message.body for ref in self.got]


def queue(**kwargs: object) -> NonDestructiveQueue:
    return NonDestructiveQueue(1, "q", "a", RoutingType.ANYCAST, **kwargs)


def add(q: Queue, n: int, **properties: str) -> MessageReference:
    message = Message(n, "a", body=b"%d" % n)
    if properties:
        message.set_properties(properties)
    ref = MessageReference(message, q)
    q.add(ref)
    return ref


def bodies(refs: object) -> list[bytes]:
    return [r.message.body for r in refs]  # type: ignore[attr-defined]


def test_every_consumer_reads_every_message_from_its_own_position() -> None:
    q = queue()
    first, second = Reader(), Reader(credit=2)
    q.add_consumer(first)
    q.add_consumer(second)
    for n in range(4):
        add(q, n)
    assert first.bodies() == [b"0", b"1", b"2", b"3"]
    assert second.bodies() == [b"0", b"1"]  # out of credit: it goes on from its position
    second.credit = 10
    q.deliver()
    assert second.bodies() == [b"0", b"1", b"2", b"3"]
    late = Reader()
    q.add_consumer(late)  # starts at the head
    assert late.bodies() == [b"0", b"1", b"2", b"3"]
    assert bodies(q.messages) == [b"0", b"1", b"2", b"3"]
    assert (q.message_count, q.delivering) == (4, 12)  # each message counted once


def test_an_acknowledgement_or_a_cancel_only_ends_the_delivery() -> None:
    q = queue()
    reader = Reader()
    q.add_consumer(reader)
    add(q, 0)
    add(q, 1)
    q.acknowledged()
    q.cancel([reader.got[1]])
    assert (q.delivering, q.message_count, q.messages_acknowledged) == (0, 2, 0)
    assert reader.bodies() == [b"0", b"1"]  # not delivered again to the same consumer
    other = Reader()
    q.add_consumer(other)
    assert other.bodies() == [b"0", b"1"]
    assert [r.delivery_count for r in other.got] == [2, 2]  # one count per reference
    q.redeliver_later(other.got, [now_ms() + 60_000] * 2)  # (no hold: the message stays)
    assert (q.delivering, len(q.messages), q.scheduled) == (0, 2, {})


def test_a_selector_picks_from_every_message_without_taking_any() -> None:
    q = queue()
    red = Reader(selector=Filter.parse("colour = 'red'"))
    q.add_consumer(red)
    add(q, 0, colour="blue")
    add(q, 1, colour="red")
    add(q, 2, colour="blue")
    every = Reader()
    q.add_consumer(every)
    assert red.bodies() == [b"1"]
    assert every.bodies() == [b"0", b"1", b"2"]


def test_a_non_destructive_last_value_queue_is_a_latest_value_cache() -> None:
    replaced: list[MessageReference] = []

    def acknowledge(ref: MessageReference) -> None:
        ref.queue.delivering -= 1
        replaced.append(ref)

    q = queue(last_value_key="stock", on_replaced=acknowledge)
    watcher = Reader()
    q.add_consumer(watcher)
    add(q, 0, stock="A")
    add(q, 1, stock="B")
    add(q, 2, stock="A")  # replaces 0, which the watcher already read
    add(q, 3)  # no key: kept like any message
    assert watcher.bodies() == [b"0", b"1", b"2", b"3"]
    assert bodies(replaced) == [b"0"]
    assert bodies(q.messages) == [b"1", b"2", b"3"]
    newcomer = Reader()
    q.add_consumer(newcomer)
    assert newcomer.bodies() == [b"1", b"2", b"3"]
    add(q, 4, stock="B")
    assert newcomer.bodies()[-1] == b"4"
    assert bodies(q.messages) == [b"2", b"3", b"4"]
    assert q.messages_replaced == 2


def test_a_ring_keeps_the_newest_messages_read_or_not() -> None:
    q = queue(ring_size=2, on_replaced=lambda ref: setattr(ref.queue, "delivering", 0))
    reader = Reader()
    q.add_consumer(reader)
    for n in range(4):
        add(q, n)
    assert bodies(q.messages) == [b"2", b"3"]
    assert reader.bodies() == [b"0", b"1", b"2", b"3"]
    assert q.messages_replaced == 2


def test_an_expired_message_leaves_for_every_consumer() -> None:
    expired: list[MessageReference] = []
    q = queue(on_expired=expired.append, clock_ms=now_ms)
    first = Reader()
    q.add_consumer(first)
    ref = add(q, 0)
    add(q, 1)
    ref.message.expiration = now_ms() - 1  # (expires after the first read)
    late = Reader()
    q.add_consumer(late)
    assert late.bodies() == [b"1"]
    assert expired == [ref]
    assert bodies(q.messages) == [b"1"]


def test_an_exclusive_queue_feeds_its_first_consumer_only() -> None:
    from artemis_py.broker.message_groups import DispatchRules

    q = queue(rules=DispatchRules(exclusive=True))
    first, second = Reader(), Reader()
    q.add_consumer(first)
    q.add_consumer(second)
    add(q, 0)
    assert (first.bodies(), second.bodies()) == ([b"0"], [])
    q.remove_consumer(first)
    assert second.bodies() == [b"0"]  # the next one starts at the head


def test_a_held_message_joins_the_tail_when_its_time_comes() -> None:
    holds: list[MessageReference] = []
    q = queue(on_hold=lambda ref, due: holds.append(ref))  # type: ignore[arg-type,misc]
    reader = Reader()
    q.add_consumer(reader)
    later = Message(0, "a", body=b"later")
    later.scheduled = now_ms() + 60_000
    q.add(MessageReference(later, q))
    add(q, 1)
    assert (reader.bodies(), q.message_count) == ([b"1"], 2)
    q.add_due(holds)
    assert reader.bodies() == [b"1", b"later"]
    assert q.messages_added == 2


def started(store: MemoryStore) -> Broker:
    broker = Broker(default_config(), Persistence(store, NODE))
    broker.recover()
    return broker


async def test_acknowledgements_write_nothing_and_a_restart_finds_every_message() -> None:
    store = MemoryStore(messages=True)
    broker = started(store)
    q = broker.create_queue("q", "q", RoutingType.ANYCAST, kind=QueueKind(non_destructive=True))
    assert isinstance(q, NonDestructiveQueue)
    for n in range(3):
        message = Message(broker.persistence.next_id(), "q", body=b"%d" % n, durable=True)
        await broker.send(message, [q]).settled()
    reader = Reader()
    q.add_consumer(reader)
    records = len(store.messages.live())
    await broker.acknowledge(reader.got[:2]).settled()
    broker.acknowledge_delivered(reader.got[2])
    broker.cancel([])  # (nothing to give back)
    assert len(store.messages.live()) == records
    assert (q.delivering, q.message_count, q.messages_acknowledged) == (0, 3, 0)

    again = started(store)
    recovered = again.queue("q")
    assert isinstance(recovered, NonDestructiveQueue)
    assert bodies(recovered.messages) == [b"0", b"1", b"2"]
    await again.discard(list(recovered.messages)).settled()  # (a purge deletes)
    assert again.queue("q") is not None
    assert bodies(started(store).queue("q").messages) == []  # type: ignore[union-attr]


async def test_a_cancel_neither_counts_in_the_journal_nor_dead_letters() -> None:
    store = MemoryStore(messages=True)
    broker = started(store)
    q = broker.create_queue("q", "q", RoutingType.ANYCAST, kind=QueueKind(non_destructive=True))
    message = Message(broker.persistence.next_id(), "q", body=b"m", durable=True)
    await broker.send(message, [q]).settled()
    records = len(store.messages.live())
    for _ in range(12):  # more deliveries than max-delivery-attempts (10)
        reader = Reader()
        q.add_consumer(reader)
        q.remove_consumer(reader)
        broker.cancel(reader.got)
    assert (q.message_count, q.delivering, q.messages_killed) == (1, 0, 0)
    assert len(store.messages.live()) == records
