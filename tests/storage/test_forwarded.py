"""Messages a cluster bridge forwarded, stored by the receiving broker: one journal batch per
run, each message with its duplicate id, and duplicates dropped; and a message for other
nodes encoded once per hop (the bytes journaled are the bytes forwarded), old journals too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from artemis_py.broker import persistence as persistence_module
from artemis_py.broker import write_order
from artemis_py.broker.broker import Broker
from artemis_py.broker.message import Message, decode_message, encode_message
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.broker.records import MESSAGE_RECORD, ROUTE_TO, add_ref_op, decode_route_to
from artemis_py.broker.routing import NeighbourRoute, RemoteQueueBinding
from artemis_py.broker.store import JournalStore
from artemis_py.cluster import bridge as bridge_module
from artemis_py.cluster.bridge import Bridge
from artemis_py.config import MessageLoadBalancing, RoutingType
from artemis_py.config.parse import default_config
from artemis_py.protocol.cluster import frames as wire
from artemis_py.storage import Op, Storage, open_storage


def forwarded(broker: Broker, n: int, dup: bytes) -> tuple[Message, list[str], bytes, bytes]:
    payload = encode_message(
        Message(0, "q", body=b"m%d" % n, routing_type=RoutingType.ANYCAST, durable=True)
    )
    return decode_message(broker.persistence.next_id(), payload), ["q"], dup, payload


async def test_a_run_is_one_batch_and_its_duplicate_ids_survive_a_restart(
    tmp_path: Path,
) -> None:
    config = default_config()
    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        broker = Broker(config, Persistence(JournalStore(storage), storage.node_id))
        broker.recover()
        queue = broker.create_queue("q", "q", RoutingType.ANYCAST)
        before = storage.messages.stats().batches
        run = [forwarded(broker, 1, b"n:1"), forwarded(broker, 2, b"n:2")]
        run.append(forwarded(broker, 3, b"n:1"))  # the same id twice: the second is dropped
        pending = broker.receive_forwarded(run)
        await broker.persistence.wait(pending.tickets)
        assert storage.messages.stats().batches == before + 1
        assert not queue.messages  # not before complete()
        pending.complete()
        assert [r.message.body for r in queue.messages] == [b"m1", b"m2"]
        # Resent after a broken link: already here, nothing stored.
        again = broker.receive_forwarded([forwarded(broker, 2, b"n:2")])
        assert not again.tickets
        assert not again.on_durable
    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        assert storage.messages.loaded is not None
        loaded = storage.messages.loaded.records  # recover() releases the report
        broker = Broker(config, Persistence(JournalStore(storage), storage.node_id))
        broker.recover()
        queue = broker.queue("q")
        assert queue is not None
        assert [r.message.body for r in queue.messages] == [b"m1", b"m2"]
        assert b"n:1" in broker.duplicates
        assert b"n:2" in broker.duplicates
        # The journal holds each message as it arrived (no routing property was added).
        assert [r.payload for r in loaded if r.record_type == MESSAGE_RECORD] == [
            run[0][3],
            run[1][3],
        ]


# -- a message for other nodes: encoded once per hop -------------------------------------

SF_QUEUE = "$.artemis.internal.sf.c.n2"


class Encodes:
    """Counts :func:`encode_message` calls on the forwarding path (journal, page, bridge)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        for module in (persistence_module, write_order, bridge_module):
            monkeypatch.setattr(module, "encode_message", self._counted)

    def _counted(self, *args: Any, **kwargs: Any) -> bytes:
        self.count += 1
        return encode_message(*args, **kwargs)


def _cluster_node(storage: Storage) -> tuple[Broker, Queue]:
    """A node with a neighbour n2 (its store-and-forward queue) that has queue ``orders``,
    and, through n2, n3's ``orders`` (binding ``orders@n3``, a chain)."""
    broker = Broker(default_config(), Persistence(JournalStore(storage), storage.node_id))
    broker.recover()
    sf_queue = broker.queue(SF_QUEUE) or broker.create_queue(
        SF_QUEUE, SF_QUEUE, RoutingType.MULTICAST, durable=True
    )
    route = NeighbourRoute("n2", sf_queue, connected=True)
    for name, on_neighbour in (("orders@n2", "orders"), ("orders@n3", "orders@n3")):
        broker.add_remote_binding(
            RemoteQueueBinding(
                name=name,
                queue_name="orders",
                address="orders",
                routing_type=RoutingType.ANYCAST,
                filter=None,
                filter_text=None,
                distance=1 if name.endswith("n2") else 2,
                origin_node_id=name[-2:],
                name_on_neighbour=on_neighbour,
                route=route,
                consumers=(None,),
            )
        )
    broker.balance_with(lambda _: MessageLoadBalancing.STRICT)
    return broker, sf_queue


def _bridge(broker: Broker, sf_queue: Queue) -> list[wire.Message]:
    """What a bridge on ``sf_queue`` sends (the link is up and has room)."""
    sent: list[wire.Message] = []
    Bridge(broker, sf_queue, sent.append, lambda: True, -1).attach()  # type: ignore[arg-type]
    return sent


def _records(storage: Storage, record_type: int) -> list[bytes]:
    assert storage.messages.loaded is not None
    found = []
    for record in storage.messages.loaded.records:
        if record.record_type == record_type:
            found.append(bytes(record.payload))
        found += [bytes(u.payload) for u in record.updates if u.record_type == record_type]
    return found


async def test_the_bytes_journaled_are_the_bytes_forwarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encodes = Encodes(monkeypatch)
    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        broker, sf_queue = _cluster_node(storage)
        message = Message(
            broker.persistence.next_id(),
            "orders",
            body=b"order 1",
            properties=(("k", "v"),),
            routing_type=RoutingType.ANYCAST,
            durable=True,
        )
        plain = (message.size, message.memory_size)
        queues = broker.route(message)
        assert queues == [sf_queue]
        assert message.properties == (("k", "v"),)  # the bindings are beside it
        # ... and count in its size, as the property did (windows, paging's limits).
        assert message.size > plain[0]
        assert message.memory_size - plain[1] == message.size - plain[0]
        pending = broker.send(message, queues)
        await broker.persistence.wait(pending.tickets)
        pending.complete()
        sent = _bridge(broker, sf_queue)
        assert len(sent) == 1
        assert sent[0].targets in (("orders",), ("orders@n3",))
        assert encodes.count == 1  # the journal's; the bridge sends those bytes
        payload = sent[0].payload
    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        assert _records(storage, MESSAGE_RECORD) == [payload]
        queue_id = sf_queue.id
        assert [decode_route_to(p) for p in _records(storage, ROUTE_TO)] == [
            (queue_id, sent[0].targets)
        ]
        broker, sf_queue = _cluster_node(storage)
        again = _bridge(broker, sf_queue)  # after a restart: the same frame
        assert [(m.targets, m.payload) for m in again] == [(sent[0].targets, payload)]


async def test_a_journal_with_the_old_routing_property_is_forwarded_alike(
    tmp_path: Path,
) -> None:
    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        broker, sf_queue = _cluster_node(storage)
        old = Message(
            broker.persistence.next_id(),
            "orders",
            body=b"order 1",
            properties=(("k", "v"), ("_AMQ_ROUTE_TO." + SF_QUEUE, '["orders", "orders@n3"]')),
            routing_type=RoutingType.ANYCAST,
            durable=True,
        )
        # As a node before ROUTE_TO wrote it: the bindings as a property of the message.
        ops = [
            Op.add(old.message_id, MESSAGE_RECORD, encode_message(old)),
            add_ref_op(old.message_id, sf_queue.id, old.message_id),
        ]
        await broker.persistence.wait(broker.persistence.submit(ops))
    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        broker, sf_queue = _cluster_node(storage)
        sent = _bridge(broker, sf_queue)
        assert [m.targets for m in sent] == [("orders", "orders@n3")]
        forwarded = decode_message(1, sent[0].payload)
        assert forwarded.properties == (("k", "v"),)  # the neighbour gets no routing property
        assert forwarded.route_to is None
        assert forwarded.body == b"order 1"


async def test_a_chain_sends_on_the_bytes_it_received(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encodes = Encodes(monkeypatch)
    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        broker, sf_queue = _cluster_node(storage)
        payload = encode_message(
            Message(0, "orders", body=b"on to n3", routing_type=RoutingType.ANYCAST, durable=True)
        )
        encodes.count = 0
        received = decode_message(broker.persistence.next_id(), payload)
        pending = broker.receive_forwarded([(received, ["orders@n3"], b"n1:7", payload)])
        await broker.persistence.wait(pending.tickets)
        pending.complete()
        sent = _bridge(broker, sf_queue)
        assert [m.targets for m in sent] == [("orders@n3",)]
        assert sent[0].payload is payload  # not encoded again
        assert encodes.count == 0
    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        assert _records(storage, MESSAGE_RECORD) == [payload]
        assert [names for _, names in map(decode_route_to, _records(storage, ROUTE_TO))] == [
            ("orders@n3",)
        ]
