"""Redistribution and its delay, in process (clusters §7): the rules of
tests/cluster/test_redistribution.py, timed exactly on the virtual clock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from conftest import wait_for

from .conftest import open_cluster, wait_consumers


async def test_a_backlog_moves_to_a_consumer_that_appears_on_another_node(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(2, delay=0) as nodes:
        await wait_for(nodes.formed, 10)
        nodes[0].queue("backlog")
        nodes[1].queue("backlog")
        await nodes[0].send("backlog", 10)
        assert nodes[0].depth("backlog") == 10
        consumer = nodes[1].consume("backlog")
        await wait_for(lambda: len(consumer.bodies) == 10, 10, message="the backlog moved")
        assert consumer.numbers == list(range(10))
        assert nodes[0].depth("backlog") == 0


async def test_nothing_moves_before_the_delay_and_a_returning_consumer_cancels_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(2, delay=5000) as nodes:
        await wait_for(nodes.formed, 10)
        nodes[0].queue("delayed")
        remote = nodes[1].consume("delayed")
        await wait_consumers(nodes[0], "delayed", [nodes[1]])
        # A backlog on node0 (to the queue itself, so initial distribution cannot move it):
        # no local consumer takes it, so it moves once the delay has passed.
        await nodes[0].send("delayed", 3, queue="delayed")
        await trio.sleep(4.9)
        assert nodes[0].depth("delayed") == 3
        assert remote.bodies == []
        # A local consumer within the delay cancels the move: it gets them all.
        local = nodes[0].consume("delayed")
        assert local.numbers == [0, 1, 2]
        await trio.sleep(30)
        assert remote.bodies == []
        # Without it, new messages wait exactly the delay, then follow the remote consumer.
        local.close()
        start = trio.current_time()
        await nodes[0].send("delayed", 4, start=3, queue="delayed")
        await wait_for(lambda: nodes[0].depth("delayed") == 0, 10, interval=0.001)
        assert trio.current_time() - start == pytest.approx(5.0, abs=0.01)
        await wait_for(lambda: len(remote.bodies) == 4, 5)
        assert remote.numbers == [3, 4, 5, 6]


async def test_strict_does_not_redistribute(autojump_clock: trio.testing.MockClock) -> None:
    async with open_cluster(2, policy="STRICT", delay=0) as nodes:
        await wait_for(nodes.formed, 10)
        nodes[0].queue("strict")
        await nodes[0].send("strict", 5)  # no remote queue yet: all stay here
        consumer = nodes[1].consume("strict")
        await wait_consumers(nodes[0], "strict", [nodes[1]])
        await trio.sleep(30)
        assert consumer.bodies == []
        assert nodes[0].depth("strict") == 5


async def test_off_with_redistribution_moves_a_backlog_to_a_consumer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(2, policy="OFF_WITH_REDISTRIBUTION", delay=1000) as nodes:
        await wait_for(nodes.formed, 10)
        nodes[0].queue("owr")
        await nodes[0].send("owr", 5)
        consumer = nodes[1].consume("owr")
        await wait_for(lambda: len(consumer.bodies) == 5, 10, message="the backlog moved")
        assert consumer.numbers == list(range(5))


async def test_messages_follow_a_consumer_back_and_forth(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(2, delay=0) as nodes:
        await wait_for(nodes.formed, 10)
        nodes[0].queue("follow")
        nodes[1].queue("follow")
        await nodes[0].send("follow", 4)
        there = nodes[1].consume("follow")
        await wait_for(lambda: len(there.bodies) == 4, 10)
        there.close()
        await nodes[1].send("follow", 4, start=4)  # a backlog on node1 now, no consumer
        await trio.sleep(1)
        here = nodes[0].consume("follow")
        await wait_for(lambda: len(here.bodies) == 4, 10, message="back to node0")
        assert here.numbers == [4, 5, 6, 7]


async def test_a_closed_consumers_backlog_moves_round_robin_to_the_remaining_nodes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(3, delay=0) as nodes:
        await wait_for(nodes.formed, 10)
        for node in nodes.running():
            node.queue("rr")
        local = nodes[0].consume("rr")
        local.close()
        await nodes[0].send("rr", 12)  # nobody consumes anywhere: all stay here
        assert nodes[0].depth("rr") == 12
        others = [nodes[1].consume("rr"), nodes[2].consume("rr")]
        await wait_for(lambda: sum(len(c.bodies) for c in others) == 12, 10)
        assert sorted(others[0].numbers + others[1].numbers) == list(range(12))
        assert [len(c.bodies) for c in others] == [6, 6]
