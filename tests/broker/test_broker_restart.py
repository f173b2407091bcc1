"""The broker over the in-memory store: a restart in the same process, and a node without
persistence (``persistence-enabled`` false), without disk or sockets."""

from __future__ import annotations

from types import SimpleNamespace

from artemis_py.broker.broker import Broker
from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.store import MemoryStore
from artemis_py.config import RoutingType
from artemis_py.config.parse import default_config

NODE = "0123456789abcdef"


def collector(refs: list[MessageReference]) -> SimpleNamespace:
    """A consumer with credit that keeps what it is given in ``refs``."""
    return SimpleNamespace(selector=None, has_credit=lambda: True, deliver=refs.append)


def started(store: MemoryStore) -> Broker:
    broker = Broker(default_config(), Persistence(store, NODE))
    broker.recover()
    return broker


async def send(broker: Broker, body: bytes, *, durable: bool = True) -> Message:
    queue = broker.queue("q")
    assert queue is not None
    message = Message(
        broker.persistence.next_id(),
        "q",
        body=body,
        routing_type=RoutingType.ANYCAST,
        durable=durable,
    )
    await broker.send(message, [queue]).settled()
    return message


async def test_a_restart_over_the_same_store_finds_what_was_durable() -> None:
    store = MemoryStore(messages=True)
    broker = started(store)
    queue = broker.create_queue("q", "q", RoutingType.ANYCAST)
    for body in (b"one", b"two", b"three"):
        await send(broker, body)
    await send(broker, b"not durable", durable=False)
    delivered: list[MessageReference] = []
    consumer = collector(delivered)
    queue.add_consumer(consumer)
    one, two, *_ = delivered
    await broker.acknowledge([one]).settled()
    queue.remove_consumer(consumer)
    broker.cancel([two])  # delivered once, back unacknowledged: its count is recorded

    again = started(store)
    recovered = again.queue("q")
    assert recovered is not None
    assert recovered.durable
    assert [(ref.message.body, ref.delivery_count) for ref in recovered.messages] == [
        (b"two", 1),
        (b"three", 0),
    ]
    first_id = again.persistence.next_id()
    assert all(first_id > ref.message.message_id for ref in recovered.messages)


async def test_a_node_without_persistence_writes_no_message() -> None:
    store = MemoryStore()
    broker = started(store)
    queue = broker.create_queue("q", "q", RoutingType.ANYCAST)
    message = await send(broker, b"kept in memory")
    assert not message.stored
    assert store.messages.live() == []
    delivered: list[MessageReference] = []
    queue.add_consumer(collector(delivered))
    assert [ref.message.body for ref in delivered] == [b"kept in memory"]
    await broker.acknowledge(delivered).settled()
    assert queue.message_count == 0
    again = started(store)  # its queue is there again, its messages are not
    recovered = again.queue("q")
    assert recovered is not None
    assert recovered.message_count == 0


async def test_a_client_duplicate_id_is_still_known_after_a_restart() -> None:
    store = MemoryStore(messages=True)
    broker = started(store)
    queue = broker.create_queue("q", "q", RoutingType.ANYCAST)
    message = Message(
        broker.persistence.next_id(),
        "q",
        body=b"once",
        properties=(("_AMQ_DUPL_ID", "order-7"),),
        routing_type=RoutingType.ANYCAST,
        durable=True,
    )
    claim = broker.client_duplicates.claim([("q", "order-7", message)], owner=None)
    assert claim is not None
    await broker.send(message, [queue], claim=claim).settled()

    again = started(store)
    assert again.client_duplicates.known("q", "order-7")
    assert not again.client_duplicates.known("q", "order-8")
    assert again.client_duplicates.claim([("q", "order-7", message)], owner=None) is None
