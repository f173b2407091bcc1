"""A redelivery delay's hold survives a restart (no disk, no sockets).

The broker over the in-memory store journals when a held reference is due (a
SCHEDULED_DELIVERY_TIME update of its message, per queue), and a broker made again from
the same store holds it until that time, as Artemis reloads its SET_SCHEDULED_DELIVERY_TIME
records. A scale-down's copy of a held reference keeps the time as its schedule.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from artemis_py.broker import records as r
from artemis_py.broker.broker import Broker
from artemis_py.broker.message import SCHEDULED_PROPERTY, Message, MessageReference, now_ms
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.broker.store import MemoryStore
from artemis_py.config import RoutingType
from artemis_py.config.address_settings import AddressSettingEntry, AddressSettingsRepository
from artemis_py.config.parse import default_config

NODE = "0123456789abcdef"
DELAY = 60_000  # (ms: nothing is due while a test runs)
ANYCAST, MULTICAST = RoutingType.ANYCAST, RoutingType.MULTICAST


def started(store: MemoryStore) -> Broker:
    """A broker whose addresses all have a redelivery delay of :data:`DELAY`."""
    settings = AddressSettingsRepository([AddressSettingEntry.of("#", redelivery_delay=DELAY)])
    config = replace(default_config(), address_settings=settings)
    broker = Broker(config, Persistence(store, NODE))
    broker.recover()
    return broker


async def send(broker: Broker, queues: list[Queue], body: bytes, *, durable: bool = True) -> None:
    message = Message(
        broker.persistence.next_id(),
        queues[0].address,
        body=body,
        routing_type=queues[0].routing_type,
        durable=durable,
    )
    await broker.send(message, queues).settled()


def delivered_once(queue: Queue) -> list[MessageReference]:
    """Every ready reference of ``queue``, delivered to a consumer that then leaves."""
    refs: list[MessageReference] = []
    consumer = SimpleNamespace(selector=None, has_credit=lambda: True, deliver=refs.append)
    queue.add_consumer(consumer)
    queue.remove_consumer(consumer)
    return refs


def updates(store: MemoryStore, record_type: int) -> list[bytes]:
    """The payloads of the live updates of ``record_type``, of every message."""
    return [
        u.payload for x in store.messages.live() for u in x.updates if u.record_type == record_type
    ]


def found(broker: Broker, name: str) -> Queue:
    queue = broker.queue(name)
    assert queue is not None
    return queue


def held(queue: Queue) -> list[tuple[bytes, int, int]]:
    """(body, delivery count, time) of each reference ``queue`` holds."""
    return [(ref.message.body, ref.delivery_count, due) for ref, due in queue.scheduled.items()]


async def test_a_held_redelivery_is_held_until_its_time_after_a_restart() -> None:
    store = MemoryStore(messages=True)
    broker = started(store)
    queue = broker.create_queue("q", "q", ANYCAST)
    await send(broker, [queue], b"nacked")
    [nacked] = delivered_once(queue)
    before = now_ms()
    broker.cancel([nacked])
    due = queue.scheduled[nacked]
    assert before + DELAY <= due <= now_ms() + DELAY
    await send(broker, [queue], b"plain")  # (after the hold: not held with it)
    assert [r.decode_scheduled_time(p) for p in updates(store, r.SCHEDULED_DELIVERY_TIME)] == [
        (queue.id, due)
    ]

    again = started(store)
    recovered = found(again, "q")
    assert held(recovered) == [(b"nacked", 1, due)]  # its delivery count, as it was
    assert [ref.message.body for ref in recovered.messages] == [b"plain"]
    assert recovered.message_count == 2
    assert len(again.scheduler) == 1  # (it gives the reference back at that time)


async def test_the_hold_is_per_queue() -> None:
    store = MemoryStore(messages=True)
    broker = started(store)
    eu = broker.create_queue("eu", "orders", MULTICAST)
    us = broker.create_queue("us", "orders", MULTICAST)
    await send(broker, [eu, us], b"both")
    broker.cancel(delivered_once(eu))
    assert [ref.message.body for ref in us.messages] == [b"both"]

    again = started(store)
    assert [body for body, *_ in held(found(again, "eu"))] == [b"both"]
    assert held(found(again, "us")) == []
    assert [ref.message.body for ref in found(again, "us").messages] == [b"both"]


async def test_the_latest_time_wins_and_one_passed_meanwhile_holds_nothing() -> None:
    store = MemoryStore(messages=True)
    broker = started(store)
    queue = broker.create_queue("q", "q", ANYCAST)
    await send(broker, [queue], b"nacked")
    [nacked] = delivered_once(queue)
    broker.cancel([nacked])
    message_id = nacked.message.message_id
    broker.persistence.update_scheduled_times([(message_id, queue.id, now_ms() - 1)])

    again = started(store)
    recovered = found(again, "q")
    assert held(recovered) == []
    assert [(ref.message.body, ref.delivery_count) for ref in recovered.messages] == [
        (b"nacked", 1)
    ]


async def test_the_record_goes_with_its_message() -> None:
    store = MemoryStore(messages=True)
    broker = started(store)
    queue = broker.create_queue("q", "q", ANYCAST)
    await send(broker, [queue], b"nacked")
    [nacked] = delivered_once(queue)
    broker.cancel([nacked])
    assert len(updates(store, r.SCHEDULED_DELIVERY_TIME)) == 1
    await broker.discard(queue.held()).settled()  # (a purge)
    assert store.messages.live() == []

    again = started(store)
    assert found(again, "q").message_count == 0


async def test_a_hold_of_what_the_journal_does_not_keep_is_not_recorded() -> None:
    store = MemoryStore(messages=True)
    broker = started(store)
    queue = broker.create_queue("q", "q", ANYCAST)
    await send(broker, [queue], b"not durable", durable=False)
    await send(broker, [queue], b"depaged")
    not_durable, depaged = delivered_once(queue)
    depaged.paged = (1, 0)  # (as if read from a page file: its message is not a record)
    broker.cancel([not_durable, depaged])
    assert len(queue.scheduled) == 2  # both held ...
    assert updates(store, r.SCHEDULED_DELIVERY_TIME) == []  # ... neither journaled


async def test_a_moved_held_reference_keeps_its_time_as_its_copy_schedule() -> None:
    broker = started(MemoryStore(messages=True))
    queue = broker.create_queue("q", "q", ANYCAST)
    await send(broker, [queue], b"nacked")
    [nacked] = delivered_once(queue)
    broker.cancel([nacked])
    due = queue.scheduled[nacked]
    # Routed by address again: the copy lands in the same queue, under a new id.
    await broker.redistribute([(nacked, None)]).settled()
    [(copy, time)] = queue.scheduled.items()
    assert copy is not nacked
    assert time == copy.message.scheduled == due
    assert copy.message.property(SCHEDULED_PROPERTY) == str(due)


async def test_past_max_redelivery_records_nothing_more_is_journaled() -> None:
    # Artemis's max-redelivery-records: a message redelivered for ever must not grow its
    # journal records for ever; its count and time stay in memory past the limit.
    store = MemoryStore(messages=True)
    broker = started(store)
    broker.acks.max_redelivery_records = 2
    queue = broker.create_queue("q", "q", ANYCAST)
    await send(broker, [queue], b"poison")
    for _ in range(5):
        [ref] = delivered_once(queue)
        broker.cancel([ref])  # held for its redelivery delay
        queue.add_due([ref])  # (its time come: ready again)
    assert ref.delivery_count == 5
    assert len(updates(store, r.DELIVERY_COUNT)) == 2
    assert len(updates(store, r.SCHEDULED_DELIVERY_TIME)) == 2
