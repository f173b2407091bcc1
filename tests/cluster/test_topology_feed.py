"""The STOMP topology extension with real nodes (docs/stomp.md "Topology"): a client that
connected with ``topology:true`` is sent the cluster's STOMP URLs again whenever they change
while it stays connected, so it hears of a node that joins after it connected and of one
that leaves (a graceful stop)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from artemis_py.client import open_stomp_connection

from .conftest import wait_formed


def url(node: Any) -> str:
    return f"tcp://127.0.0.1:{node.port}"


async def watch(nodes: Any, async_wait_for: Any) -> dict[str, Any]:
    """Connect to node 0 with topology:true while nodes 0 and 1 run; start node 2, then
    stop it (in a thread), waiting each time for the update that says so."""
    seen: dict[str, Any] = {"updates": []}
    updates: list[tuple[str, ...]] = seen["updates"]

    def last() -> tuple[str, ...]:
        return updates[-1] if updates else ()

    async with open_stomp_connection(
        "127.0.0.1", nodes[0].port, headers={"topology": "true"}
    ) as conn:
        seen["connected"] = conn.topology
        conn.on_topology = updates.append  # only MESSAGE frames of the topology feed call it

        await trio.to_thread.run_sync(nodes[2].start)
        await async_wait_for(
            lambda: url(nodes[2]) in last(), 20, message=f"an update naming node 2: {updates}"
        )
        seen["joined"] = last()

        assert await trio.to_thread.run_sync(nodes[2].stop) == 0
        await async_wait_for(
            lambda: url(nodes[2]) not in last() and len(updates) > 1,
            20,
            message=f"an update without node 2: {updates}",
        )
        seen["left"] = last()
        seen["topology"] = conn.topology
        # The connection still works after the updates (they need no ACK).
        await conn.send("/queue/topology-feed-check", "still here")
    return seen


def test_a_topology_client_hears_a_node_join_and_leave(
    cluster: Any, request: pytest.FixtureRequest
) -> None:
    nodes = cluster(3, start=False)
    nodes.start(0, 1)
    wait_formed(nodes[:2])
    seen = trio.run(watch, list(nodes), request.getfixturevalue("wait_for"))

    # CONNECTED named the two running nodes, node 0 (the one connected to) first.
    assert seen["connected"] == (url(nodes[0]), url(nodes[1]))
    joined, left = seen["joined"], seen["left"]
    assert joined[0] == url(nodes[0])
    assert sorted(joined) == sorted(url(n) for n in nodes)
    assert left == (url(nodes[0]), url(nodes[1]))
    assert seen["topology"] == left  # conn.topology follows the updates
