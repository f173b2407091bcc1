"""The cluster-aware client (docs/client.md): it learns the topology from the node, and a
producer and a consumer fail over when their node scales down or dies. Counted afterwards
with plain consumers on every node: nothing lost, nothing stored twice."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio

from artemis_py.client.failover import open_cluster_connection

from .conftest import stays, unique, wait_for

SCALE_DOWN = "<ha-policy><primary-only><scale-down/></primary-only></ha-policy>"
FAILOVER = "ha=true&retryInterval=50&maxRetryInterval=200&reconnectAttempts=100"


def cluster_url(nodes: Any, policy: str = "first-element") -> str:
    addresses = ",".join(f"tcp://127.0.0.1:{n.port}" for n in nodes)
    return f"({addresses})?{FAILOVER}&connectionLoadBalancingPolicyClassName={policy}"


def remaining(clients: Any, nodes: Any, queue: str, expected: int, more: int = 0) -> list[str]:
    """Consume ``queue`` on every node: ``expected`` messages in all, up to ``more`` more."""
    consumers = [clients(node) for node in nodes]
    for consumer in consumers:
        consumer.subscribe(f"/queue/{queue}")

    def bodies() -> list[str]:
        return [m.body for c in consumers for m in c.messages]

    wait_for(lambda: len(bodies()) >= expected, 20, message=lambda: f"{len(bodies())} found")
    stays(lambda: len(bodies()) <= expected + more, 1.0, message=lambda: f"{len(bodies())} found")
    return bodies()


async def consume_acking(
    conn: Any, destination: str, result: dict[str, Any], reading: trio.CancelScope
) -> None:
    """Receive from ``destination`` one message at a time until ``reading`` is cancelled,
    noting each in ``result["received"]`` and, once its ACK is receipted, ``["acked"]``."""
    subscription = await conn.subscribe(
        destination, ack="client-individual", headers={"consumer-window-size": "0"}
    )
    with reading:
        while True:
            message = await subscription.receive()
            result["received"].append(message.text)
            with trio.CancelScope(shield=True):
                if await conn.ack(message):
                    result["acked"].append(message.text)


async def produce_and_consume(
    nodes: Any, queue: str, stop: Any, count: int, async_wait_for: Any
) -> dict[str, Any]:
    """A failover producer and consumer on node 0; ``stop`` (blocking) runs in a thread
    after a quarter of the messages were receipted."""
    result: dict[str, Any] = {"acked": [], "received": [], "failovers": []}
    url = cluster_url(nodes)
    destination = f"/queue/{queue}"

    async def producer() -> None:
        async with open_cluster_connection(
            url, on_failover=lambda old, new, exc: result["failovers"].append(("p", old, new))
        ) as conn:
            assert conn.url is not None
            assert conn.url.port == nodes[0].port
            assert conn.connection is not None
            assert conn.connection.topology is not None
            # The node tells the client its cluster's members.
            await async_wait_for(lambda: len(conn.locator.topology) == 3, message="topology")
            async with trio.open_nursery() as stopper:
                for number in range(count):
                    await conn.send(destination, f"m{number}", headers={"persistent": "true"})
                    if number == count // 4:
                        stopper.start_soon(trio.to_thread.run_sync, stop)
            result["producer_failovers"] = conn.failovers
        reading.cancel()

    reading = trio.CancelScope()

    async def consumer() -> None:
        async with open_cluster_connection(
            url, on_failover=lambda old, new, exc: result["failovers"].append(("c", old, new))
        ) as conn:
            await consume_acking(conn, destination, result, reading)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer)
        nursery.start_soon(producer)
    return result


def test_a_producer_and_a_consumer_fail_over_across_a_scale_down(
    cluster: Any, clients: Any, request: pytest.FixtureRequest
) -> None:
    nodes = cluster(3, node_options={i: {"extra_core": SCALE_DOWN} for i in range(3)})
    queue = unique("orders")
    # A plain stomp.py client on a node whose topology changes sees nothing new.
    plain = clients(nodes[1])
    plain.subscribe(f"/queue/{unique('plain')}")
    count = 400
    result = trio.run(
        produce_and_consume, nodes, queue, nodes[0].stop, count, request.getfixturevalue("wait_for")
    )
    assert result["producer_failovers"] == 1
    assert {who for who, _, _ in result["failovers"]} == {"p", "c"}
    assert plain.messages == []
    assert plain.errors == []

    # An ACK cut off by the stop may have been taken by the node without its RECEIPT:
    # such a message ("unsure") is either consumed or still stored, once.
    acked = result["acked"]
    unsure = set(result["received"]) - set(acked)
    expected = count - len(acked)
    left = remaining(clients, nodes[1:], queue, expected - len(unsure), len(unsure))
    stored = Counter(acked + left)
    assert set(stored) | unsure == {f"m{n}" for n in range(count)}  # nothing lost
    assert max(stored.values()) == 1  # nothing stored (or consumed) twice


def test_a_producer_fails_over_when_its_node_is_killed(
    cluster: Any, clients: Any, request: pytest.FixtureRequest
) -> None:
    nodes = cluster(3)
    queue = unique("orders")
    count = 300
    result = trio.run(
        produce_and_consume, nodes, queue, nodes[0].kill, count, request.getfixturevalue("wait_for")
    )
    assert result["producer_failovers"] == 1
    nodes[0].start()
    received = set(result["received"])
    # What the killed node had is there again after its restart. A send whose RECEIPT the
    # kill cut off may be stored twice (on the dead node and the next): one at most.
    consumers = [clients(node) for node in nodes]
    for consumer in consumers:
        consumer.subscribe(f"/queue/{queue}")

    def seen() -> set[str]:
        return received | {m.body for c in consumers for m in c.messages}

    wait_for(lambda: len(seen()) == count, 30, message=lambda: f"{len(seen())} seen")
    stored = Counter(result["acked"] + [m.body for c in consumers for m in c.messages])
    assert sum(stored.values()) - count <= 2, stored.most_common(3)
