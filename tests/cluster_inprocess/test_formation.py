"""Formation and the binding exchange, in process (clusters §3, §4): the same rules as
tests/cluster/test_formation.py, on a virtual clock."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from conftest import wait_for

from .conftest import MULTICAST, PORT, host, open_cluster


async def test_three_nodes_form_a_full_mesh(autojump_clock: trio.testing.MockClock) -> None:
    async with open_cluster(3) as nodes:
        await wait_for(nodes.formed, 10, message="a full mesh")
        for node in nodes.running():
            assert len(node.cluster.outgoing) == 2
            assert len(node.cluster.incoming) == 2


async def test_a_late_joiner_learns_the_others_through_topology(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # node2 names only node0; it learns node1 from node0's topology and dials it.
    async with open_cluster(3, start=False) as nodes:
        await nodes.start(0, 1)
        await wait_for(nodes.formed, 10, message="node0 and node1 linked")
        await nodes.start(2)
        await wait_for(nodes.formed, 10, message="node2 in the mesh")
        assert nodes[2].linked_to(nodes[1])


async def test_start_order_does_not_matter(autojump_clock: trio.testing.MockClock) -> None:
    async with open_cluster(3, start=False) as nodes:
        # Reverse order, each node first failing to reach the static connector still down.
        await nodes.start(2)
        await wait_for(lambda: (host(0), PORT) in nodes[2].cluster.dials.unreachable, 5)
        await nodes.start(1)
        await wait_for(lambda: (host(0), PORT) in nodes[1].cluster.dials.unreachable, 5)
        await nodes.start(0)
        await wait_for(nodes.formed, 10, message="a full mesh")


async def test_bindings_and_consumers_are_exchanged(autojump_clock: trio.testing.MockClock) -> None:
    async with open_cluster(3) as nodes:
        await wait_for(nodes.formed, 10)
        nodes[1].queue("orders")
        await wait_for(lambda: nodes[0].learned("orders", on=nodes[1]), 5)
        await wait_for(lambda: nodes[2].learned("orders", on=nodes[1]), 5)
        assert not nodes[0].learned("orders", on=nodes[2])  # no such queue there
        consumer = nodes[1].consume("orders", selector="colour = 'red'")
        await wait_for(lambda: nodes[0].remote_consumers("orders", on=nodes[1]) == 1, 5)
        binding = nodes[0].broker.remote_binding(f"orders@{nodes[1].node_id}")
        assert binding is not None
        assert binding.consumer_texts == ("colour = 'red'",)
        consumer.close()
        await wait_for(lambda: nodes[0].remote_consumers("orders", on=nodes[1]) == 0, 5)
        # A subscription queue (multicast) travels the same way; a deleted queue goes.
        sub = nodes[2].queue("news.sub", MULTICAST, address="news")
        await wait_for(lambda: nodes[0].learned("news.sub", on=nodes[2]), 5)
        await nodes[2].broker.delete_queue(sub).settled()
        await wait_for(lambda: not nodes[0].learned("news.sub", on=nodes[2]), 5)


async def test_a_killed_node_is_redialled_when_it_comes_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(2) as nodes:
        await wait_for(nodes.formed, 10)
        nodes.kill(1)
        await wait_for(lambda: not nodes[0].cluster.outgoing, 5, message="the link to node1 gone")
        await nodes.start(1)
        await wait_for(nodes.formed, 10, message="the mesh again")


async def test_a_wrong_cluster_password_never_joins(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="artemis_py.cluster"):
        async with open_cluster(3, passwords={2: "not the secret"}) as nodes:
            await wait_for(
                lambda: nodes[0].linked_to(nodes[1]) and nodes[1].linked_to(nodes[0]), 10
            )
            await trio.sleep(30)
            assert not nodes[2].cluster.outgoing
            assert not nodes[2].cluster.incoming
            assert not nodes[0].knows(nodes[2])
            assert not nodes[1].knows(nodes[2])
    assert "refused the link" in caplog.text
    assert "cluster link from node2.test" in caplog.text  # the refusals node0 saw


async def test_a_copied_node_id_is_refused_with_how_to_fix_it(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="artemis_py.cluster"):
        async with open_cluster(2, node_ids={1: "00" + "0" * 30}) as nodes:
            await trio.sleep(10)
            assert not nodes[0].cluster.outgoing
            assert not nodes[1].cluster.outgoing
    assert "has this node's node ID" in caplog.text  # the dialler's side
    assert "has the same node ID" in caplog.text  # the side it dialled
    assert "fresh data directory" in caplog.text
