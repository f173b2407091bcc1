"""Scale-down keeps offsets: a queue read by offset (it has an offset mark) moves to the
target with every message at its old offset, in the departed node's stream, which the
target holds *adopted* and, once everything arrived, *sealed* (broker/adopted_streams.py).

What a reader by offset (the Spark source) relies on: after the move the departed node's
stream is on the target, with the same offsets and its offset mark, nothing is in it twice
or missing, it survives a restart of the target, and acknowledgeUpTo works on it there.
"""

from __future__ import annotations

from typing import Any

import trio

from artemis_py.client import open_stomp_connection
from artemis_py.client.offset_reader import acknowledge_up_to, browse, list_streams

from .conftest import Client, node_id, unique
from .test_scale_down import scale_down_xml


def on(node: Any, work: Any) -> Any:
    async def main() -> Any:
        async with open_stomp_connection("127.0.0.1", node.port) as conn:
            return await work(conn)

    return trio.run(main)


def read_stream(node: Any, queue: str, stream: str) -> tuple[list[tuple[int, str]], Any]:
    """Every message of ``stream`` readable on ``node`` (offset, body), and the last end."""

    async def work(conn: Any) -> tuple[list[tuple[int, str]], Any]:
        found: list[tuple[int, str]] = []
        position = 0
        while True:
            messages, end = await browse(conn, queue, stream=stream, start=position, limit=7)
            found += [(int(m.get("offset")), m.body.decode()) for m in messages]
            if end.next >= end.end:
                return found, end
            position = end.next

    return on(node, work)


def test_a_queue_read_by_offset_moves_with_its_offsets_and_is_sealed(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(2, node_options={0: {"extra_core": scale_down_xml("node1")}})
    queue = unique("orders")
    departed = node_id(nodes[0])
    producer: Client = clients(nodes[0])
    for i in range(40):
        producer.send(f"/queue/{queue}", f"order-{i}", persistent="true")
    producer.disconnect()
    before, _ = read_stream(nodes[0], queue, departed)
    assert [body for _, body in before] == [f"order-{i}" for i in range(40)]
    # The reader acknowledged the first ten: they are gone, the mark stays.
    mark = before[10][0]
    on(nodes[0], lambda conn: acknowledge_up_to(conn, queue, departed, mark))

    assert nodes[0].stop() == 0
    listing = on(nodes[1], lambda conn: list_streams(conn, queue))
    moved = {s.stream: s for s in listing.streams}[departed]
    assert (moved.state, moved.count, moved.low) == ("sealed", 30, before[10][0])
    assert moved.end > before[-1][0]
    after, end = read_stream(nodes[1], queue, departed)
    assert after == before[10:]  # same offsets, same order, nothing twice, nothing lost
    assert end.mark == mark
    assert end.state == "sealed"

    # Acknowledging on the target works in the moved stream; a restart keeps it adopted.
    on(nodes[1], lambda conn: acknowledge_up_to(conn, queue, departed, before[20][0]))
    nodes[1].kill()
    nodes[1].start()
    after_restart, end = read_stream(nodes[1], queue, departed)
    assert after_restart == before[20:]
    assert end.state == "sealed"
    assert end.mark == before[20][0]
    # The target's own stream is untouched by the move.
    own = {s.stream: s for s in on(nodes[1], lambda c: list_streams(c, queue)).streams}
    assert own[node_id(nodes[1])].count == 0


def test_a_queue_nobody_reads_by_offset_moves_as_before(cluster: Any, clients: Any) -> None:
    nodes = cluster(2, node_options={0: {"extra_core": scale_down_xml("node1")}})
    queue = unique("plain")
    producer: Client = clients(nodes[0])
    for i in range(5):
        producer.send(f"/queue/{queue}", f"m-{i}", persistent="true")
    producer.disconnect()
    assert nodes[0].stop() == 0
    listing = on(nodes[1], lambda conn: list_streams(conn, queue))
    assert [(s.stream, s.count) for s in listing.streams] == [(node_id(nodes[1]), 5)]
