"""Partitions, in process: a cut network loses what crosses it, links die by
``connection-ttl``, and when it heals the bridges resend what was not confirmed, which the
duplicate-id cache makes exactly-once (tests/cluster/test_partitions.py does the same with
real processes and a proxy)."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from conftest import wait_for

from .conftest import open_cluster, wait_consumers


async def test_a_cut_link_dies_by_its_ttl_and_heals_without_loss_or_duplicates(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_cluster(2) as nodes:
        await wait_for(nodes.formed, 10)
        consumer = nodes[1].consume("orders")
        await wait_consumers(nodes[0], "orders", [nodes[1]])
        await nodes[0].send("orders", 5)
        await wait_for(lambda: len(consumer.bodies) == 5, 5)
        with caplog.at_level(logging.INFO, logger="artemis_py.cluster"):
            nodes.network.cut(nodes[0].name, nodes[1].name)
            cut_at = trio.current_time()
            await nodes[0].send("orders", 5, start=5)  # into the cut: sent, never confirmed
            await wait_for(lambda: not nodes[0].cluster.outgoing, 10, message="the link to die")
            # Silent for connection-ttl (3 s), noticed at the next check-period tick.
            assert 3.0 <= trio.current_time() - cut_at <= 3.6
            assert consumer.numbers == list(range(5))
            await trio.sleep(20)  # redialled in vain while the cut lasts
            assert not nodes[0].cluster.outgoing
            nodes.network.heal()
            await wait_for(nodes.formed, 10, message="the links back")
            await wait_for(lambda: len(consumer.bodies) >= 10, 10, message="the resend")
            await trio.sleep(5)
        assert consumer.numbers == list(range(10))  # once each
        assert nodes[0].in_flight() == 0
        assert "(connection-ttl)" in caplog.text


async def test_a_node_cut_off_from_all_others_rejoins_and_nothing_is_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(3) as nodes:
        await wait_for(nodes.formed, 10)
        consumers = [node.consume("orders") for node in nodes.running()]
        for node in nodes.running():
            await wait_consumers(node, "orders", [o for o in nodes.running() if o is not node])
        nodes.network.cut(nodes[2].name, nodes[0].name)
        nodes.network.cut(nodes[2].name, nodes[1].name)
        await nodes[0].send("orders", 12)  # a third of them toward node2, into the cut
        await nodes[2].send("orders", 12, start=100)  # two thirds toward the others
        await trio.sleep(10)  # the links die; the majority goes on
        assert not nodes[2].cluster.outgoing
        assert not nodes[2].cluster.incoming
        await nodes[0].send("orders", 6, start=12)  # only nodes 0 and 1 are reachable now
        nodes.network.heal()
        await wait_for(nodes.formed, 10, message="node2 back in the mesh")
        expected = list(range(18)) + list(range(100, 112))
        await wait_for(lambda: sum(len(c.bodies) for c in consumers) >= len(expected), 10)
        await trio.sleep(5)
        got = sorted(n for c in consumers for n in c.numbers)
        assert got == expected  # every message once
        assert all(node.in_flight() == 0 for node in nodes.running())
