"""Reading a queue by offset: browse subscriptions, listings and acknowledgeUpTo, on real
nodes with the project's client (and stomp.py for the plain-STOMP view).

What a reader that replays ranges relies on: offsets are unique and grow in the order
messages became visible in the queue, survive kill -9, a browse never takes anything, a
reader that continues where the last browse ended never misses or repeats a message (even
while several connections pipeline sends), and acknowledgeUpTo removes exactly what lies
below the offset, durably and idempotently.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from artemis_py.client import ClientConnection, StompServerError, open_stomp_connection
from artemis_py.client.offset_reader import acknowledge_up_to, browse, list_streams

from .conftest import unique

PERSISTENT = {"persistent": "true"}


def with_client(node, work: Callable[[ClientConnection], Awaitable[Any]]) -> Any:
    """Run ``work(conn)`` on a fresh connection of the project's client to ``node``."""

    async def main() -> Any:
        async with open_stomp_connection("127.0.0.1", node.port) as conn:
            return await work(conn)

    return trio.run(main)


def read_all(node, queue: str, *, start: int = 0, limit: int | None = None):
    """Browse ``queue`` from ``start`` to its stable end in chunks of ``limit``; returns
    the messages and the offset where a next reader would continue."""

    async def work(conn):
        found = []
        position = start
        while True:
            messages, end = await browse(conn, queue, start=position, limit=limit)
            found += messages
            if end.next >= end.end:  # reached the stable end
                return found, end.next
            position = end.next

    return with_client(node, work)


def read_while_producing(node, queue: str, produce, total: int, *, limit: int) -> list:
    """Run ``produce(i)`` for producers 0-2 in threads while a reader browses ``queue``
    from where each browse ended, until it has ``total`` messages (or 30 s pass: a
    reader that missed messages would wait forever); returns what it read."""
    threads = [threading.Thread(target=produce, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()

    async def reader(conn):
        seen = []
        position = 0
        with trio.move_on_after(30):
            while len(seen) < total:
                messages, end = await browse(conn, queue, start=position, limit=limit)
                seen += messages
                position = end.next
                if not messages:
                    await trio.sleep(0.01)
        return seen

    try:
        return with_client(node, reader)
    finally:
        for thread in threads:
            thread.join()


def offsets(messages) -> list[int]:
    return [int(m.get("offset")) for m in messages]


@pytest.fixture
def node(make_broker):
    return make_broker(persistence=True)


def fill(clients, node, queue: str, count: int, **headers) -> None:
    producer = clients(node)
    for i in range(count):
        producer.send(queue, f"m{i}", **PERSISTENT, **{"x-seq": str(i)}, **headers)
    producer.disconnect()


def test_browse_copies_in_offset_order_and_takes_nothing(node, clients):
    name = unique("orders")
    fill(clients, node, f"/queue/{name}", 10)
    messages, next_offset = read_all(node, name)
    assert [m.get("x-seq") for m in messages] == [str(i) for i in range(10)]
    found = offsets(messages)
    assert found == sorted(set(found))
    assert next_offset > found[-1]
    assert all(m.get("offset-stream") and not m.redelivered for m in messages)
    # Nothing was taken: a consumer gets all ten, not as redeliveries.
    consumer = clients(node)
    consumer.subscribe(f"/queue/{name}", ack="client-individual")
    received = consumer.wait_messages(10)
    assert [m.body for m in received] == [f"m{i}" for i in range(10)]
    assert not any(m.headers.get("redelivered") == "true" for m in received)


def test_chunks_continue_where_the_last_ended(node, clients):
    name = unique("chunks")
    fill(clients, node, f"/queue/{name}", 23)
    whole, _ = read_all(node, name)
    chunked, _ = read_all(node, name, limit=5)
    assert offsets(chunked) == offsets(whole)

    async def ranges(conn):
        first = offsets(whole)
        middle, end = await browse(conn, name, start=first[3], end=first[8])
        counted, count_end = await browse(conn, name, start=first[3], limit=4, count_only=True)
        return middle, end, counted, count_end

    middle, end, counted, count_end = with_client(node, ranges)
    assert offsets(middle) == offsets(whole)[3:8]
    assert end.next == offsets(whole)[8]
    assert counted == []
    assert count_end.count == 4
    assert count_end.next == offsets(whole)[7]  # where the fifth would start


def test_listing_names_the_node_and_its_stream(node, clients):
    name = unique("listed")
    fill(clients, node, f"/queue/{name}", 4)
    messages, next_offset = read_all(node, name)

    async def work(conn):
        return await list_streams(conn, name), await list_streams(conn, unique("missing"))

    listing, missing = with_client(node, work)
    assert listing.exists
    assert listing.node_id
    (stream,) = listing.streams
    assert stream.stream == listing.node_id == messages[0].get("offset-stream")
    assert (stream.low, stream.count, stream.state) == (offsets(messages)[0], 4, "native")
    assert stream.end >= next_offset
    assert listing.consumers == 0
    assert listing.members == ()
    assert not missing.exists
    assert missing.streams == ()


def test_browse_of_a_missing_queue_is_an_error(node):
    async def work(conn):
        await browse(conn, "no-such-queue")

    with pytest.raises(StompServerError, match="queue no-such-queue does not exist on node"):
        with_client(node, work)


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "sigkill"])
def test_offsets_survive_a_restart(node, clients, crash):
    name = unique("kept")
    fill(clients, node, f"/queue/{name}", 6)
    before, _ = read_all(node, name)
    node.restart(crash=crash)
    after, next_offset = read_all(node, name)
    assert offsets(after) == offsets(before)
    fill(clients, node, f"/queue/{name}", 1)
    later, _ = read_all(node, name, start=next_offset)
    assert len(later) == 1
    assert offsets(later)[0] > offsets(before)[-1]


def test_acknowledge_up_to_removes_what_lies_below(node, clients):
    name = unique("acked")
    fill(clients, node, f"/queue/{name}", 10)
    messages, _ = read_all(node, name)
    cut = offsets(messages)[6]

    async def ack(conn):
        stream = messages[0].get("offset-stream")
        await acknowledge_up_to(conn, name, stream, cut)
        await acknowledge_up_to(conn, name, stream, cut)  # idempotent
        await acknowledge_up_to(conn, name, stream, offsets(messages)[2])  # lower: no-op

    with_client(node, ack)
    node.restart(crash=True)  # the RECEIPT meant durable
    left, _ = read_all(node, name)
    assert [m.get("x-seq") for m in left] == ["6", "7", "8", "9"]

    async def mark(conn):
        _, end = await browse(conn, name, limit=0)
        return end.mark

    assert with_client(node, mark) == cut


def test_transaction_gets_offsets_at_commit(node, clients):
    name = f"/queue/{unique('tx')}"
    producer = clients(node)
    producer.begin("t1")
    producer.send(name, "in-tx", transaction="t1", receipt=False, **PERSISTENT)
    producer.send(name, "plain", **PERSISTENT)
    producer.commit("t1")
    messages, _ = read_all(node, name.removeprefix("/queue/"))
    assert [m.body for m in messages] == [b"plain", b"in-tx"]


def test_reader_misses_nothing_while_connections_pipeline(node, clients):
    """Three producers pipeline receipt-less sends while a reader keeps browsing from
    where it ended: it must see every message exactly once, in growing offsets."""
    name = unique("busy")
    per_producer = 300
    fill(clients, node, f"/queue/{name}", 1)  # the queue exists before the reader starts
    producers = [clients(node) for _ in range(3)]

    def produce(index: int) -> None:
        for i in range(per_producer):
            producers[index].send(f"/queue/{name}", f"{index}-{i}", receipt=False, **PERSISTENT)
        producers[index].sync()

    seen = read_while_producing(node, name, produce, 3 * per_producer + 1, limit=50)
    assert len(seen) == 3 * per_producer + 1
    assert offsets(seen) == sorted(set(offsets(seen)))
    bodies = [m.body.decode() for m in seen[1:]]
    assert sorted(bodies) == sorted(f"{p}-{i}" for p in range(3) for i in range(per_producer))
    for p in range(3):  # each producer's order is kept
        own = [b for b in bodies if b.startswith(f"{p}-")]
        assert own == [f"{p}-{i}" for i in range(per_producer)]


@pytest.mark.parametrize(
    ("operation", "body", "error"),
    [
        ("acknowledgeUpTo", b'["s"]', "acknowledgeUpTo takes"),
        ("acknowledgeUpTo", b"not json", "must be a JSON array"),
        ("purgeEverything", b"[]", "unknown management operation 'purgeEverything'"),
    ],
)
def test_bad_management_requests_are_refused(node, clients, operation, body, error):
    name = unique("managed")
    fill(clients, node, f"/queue/{name}", 1)
    client = clients(node)
    client.conn.send(
        "activemq.management",
        body,
        headers={
            "_AMQ_ResourceName": f"queue.{name}",
            "_AMQ_OperationName": operation,
            "receipt": "r1",
        },
    )
    assert error in client.wait_error().headers["message"]
    messages, _ = read_all(node, name)
    assert len(messages) == 1  # nothing was acknowledged


def test_management_of_a_missing_queue_is_refused(node, clients):
    client = clients(node)
    client.conn.send(
        "activemq.management",
        b'["x", 5]',
        headers={"_AMQ_ResourceName": "queue.nope", "_AMQ_OperationName": "acknowledgeUpTo"},
    )
    assert "queue nope does not exist" in client.wait_error().headers["message"]


def test_a_plain_stomp_client_can_browse(node, clients):
    name = unique("plain")
    fill(clients, node, f"/queue/{name}", 3)
    reader = clients(node)
    reader.subscribe(f"/queue/{name}", "b1", browser="true")
    frames = reader.wait_messages(4)
    assert [f.body for f in frames[:3]] == ["m0", "m1", "m2"]
    assert frames[3].headers["browser"] == "end"
    assert frames[3].headers["message-count"] == "3"
    reader.unsubscribe("b1")  # a finished browse may still be unsubscribed


def test_a_client_cannot_say_where_its_message_stood(node, clients):
    # _AMQ_OFFSET_FROM is how a scale-down keeps a moved message's offset: a client's
    # SEND loses it, so its message stays in the node's own stream, also after a restart.
    name = unique("forged")
    producer = clients(node)
    forged = json.dumps({name: ["someone-else", 5]})
    producer.send(f"/queue/{name}", "m", **PERSISTENT, _AMQ_OFFSET_FROM=forged)
    producer.disconnect()
    node.kill()
    node.start()
    listing = with_client(node, lambda conn: list_streams(conn, name))
    assert [(s.stream, s.state, s.count) for s in listing.streams] == [
        (listing.node_id, "native", 1)
    ]
    messages, _ = read_all(node, name)
    assert messages[0].get("_AMQ_OFFSET_FROM") is None
