"""Server-side load balancing of each message-load-balancing policy, in process (clusters
§4.1, §8.1): the rules of tests/cluster/test_load_balancing.py and test_policies.py."""

from __future__ import annotations

import trio
import trio.testing

from conftest import wait_for

from .conftest import MULTICAST, Collector, open_cluster, wait_consumers


async def drained(collectors: list[Collector], total: int) -> list[list[int]]:
    await wait_for(lambda: sum(len(c.bodies) for c in collectors) >= total, 10)
    await trio.sleep(1)  # nothing more comes (virtual time)
    assert sum(len(c.bodies) for c in collectors) == total
    return [c.numbers for c in collectors]


async def test_on_demand_round_robin_across_three_nodes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(3) as nodes:
        await wait_for(nodes.formed, 10)
        consumers = [node.consume("rr") for node in nodes.running()]
        await wait_consumers(nodes[0], "rr", [nodes[1], nodes[2]], consumers=1)
        await nodes[0].send("rr", 30)
        got = await drained(consumers, 30)
        # Interleaved: each node gets every third message, in order, and together all.
        residues = []
        for numbers in got:
            assert numbers == sorted(numbers), got
            assert len({n % 3 for n in numbers}) == 1, f"not round robin: {got}"
            residues.append(numbers[0] % 3)
        assert sorted(residues) == [0, 1, 2], got


async def test_on_demand_keeps_messages_local_without_consumers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(3) as nodes:
        await wait_for(nodes.formed, 10)
        for node in nodes.running():
            node.queue("idle")
        await wait_consumers(nodes[0], "idle", [nodes[1], nodes[2]], consumers=0)
        await nodes[0].send("idle", 6)
        await trio.sleep(5)
        assert nodes[0].depth("idle") == 6
        assert nodes[0].in_flight() == 0
        # Consumers elsewhere come too late: no redistribution (redistribution-delay -1).
        late = [nodes[1].consume("idle"), nodes[2].consume("idle")]
        await trio.sleep(5)
        local = nodes[0].consume("idle")
        assert await drained([local, *late], 6) == [list(range(6)), [], []]


async def test_on_demand_forwards_only_to_nodes_with_consumers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(3) as nodes:
        await wait_for(nodes.formed, 10)
        nodes[0].queue("od")
        nodes[2].queue("od")  # no consumer
        remote = nodes[1].consume("od")
        await wait_consumers(nodes[0], "od", [nodes[1]], consumers=1)
        await wait_consumers(nodes[0], "od", [nodes[2]], consumers=0)
        await nodes[0].send("od", 8)
        assert await drained([remote], 8) == [list(range(8))]
        assert nodes[2].depth("od") == 0


async def test_consumer_selectors_decide_where_messages_go(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(3) as nodes:
        await wait_for(nodes.formed, 10)
        nodes[0].queue("sel")
        red = nodes[1].consume("sel", selector="colour = 'red'")
        blue = nodes[2].consume("sel", selector="colour = 'blue'")
        await wait_consumers(nodes[0], "sel", [nodes[1], nodes[2]], consumers=1)
        await nodes[0].send("sel", 3, colour="red")
        await nodes[0].send("sel", 2, start=3, colour="blue")
        assert await drained([red, blue], 5) == [[0, 1, 2], [3, 4]]


async def test_strict_round_robins_over_every_queue_with_or_without_consumers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(3, policy="STRICT") as nodes:
        await wait_for(nodes.formed, 10)
        for node in nodes.running():
            node.queue("strict")
        await wait_consumers(nodes[0], "strict", [nodes[1], nodes[2]], consumers=0)
        await nodes[0].send("strict", 9)
        await wait_for(
            lambda: [n.depth("strict") for n in nodes.running()] == [3, 3, 3],
            10,
            message="three messages on each node",
        )
        collectors = [node.consume("strict") for node in nodes.running()]
        got = await drained(collectors, 9)
        assert sorted(len({n % 3 for n in g}) for g in got) == [1, 1, 1], got


async def test_off_never_forwards_anycast(autojump_clock: trio.testing.MockClock) -> None:
    async with open_cluster(2, policy="OFF") as nodes:
        await wait_for(nodes.formed, 10)
        remote = nodes[1].consume("off")
        await wait_consumers(nodes[0], "off", [nodes[1]], consumers=1)
        await nodes[0].send("off", 4)
        await trio.sleep(5)
        assert remote.bodies == []
        assert nodes[0].cluster.bridges[nodes[1].node_id].forwarded == 0
        local = nodes[0].consume("off")
        assert await drained([local, remote], 4) == [[0, 1, 2, 3], []]


async def test_off_still_feeds_a_subscription_that_only_exists_elsewhere(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(2, policy="OFF") as nodes:
        await wait_for(nodes.formed, 10)
        here = Collector(nodes[0].broker, nodes[0].queue("here", MULTICAST, address="news"))
        there = Collector(nodes[1].broker, nodes[1].queue("there", MULTICAST, address="news"))
        await wait_consumers(nodes[0], "there", [nodes[1]], consumers=1)
        await nodes[0].send("news", 3, routing_type=MULTICAST)
        assert await drained([here, there], 6) == [[0, 1, 2], [0, 1, 2]]


async def test_off_with_redistribution_forwards_nothing_at_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Initial distribution as OFF; what then moves is redistribution (test_redistribution).
    async with open_cluster(2, policy="OFF_WITH_REDISTRIBUTION", delay=-1) as nodes:
        await wait_for(nodes.formed, 10)
        nodes[0].queue("owr")
        remote = nodes[1].consume("owr")
        await wait_consumers(nodes[0], "owr", [nodes[1]], consumers=1)
        await nodes[0].send("owr", 4)
        await trio.sleep(5)
        assert remote.bodies == []
        assert nodes[0].depth("owr") == 4


async def test_multicast_every_subscription_gets_every_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(3) as nodes:
        await wait_for(nodes.formed, 10)
        subs = [
            Collector(node.broker, node.queue(f"sub{i}", MULTICAST, address="events"))
            for i, node in enumerate(nodes.running())
        ]
        await wait_consumers(nodes[0], "sub1", [nodes[1]], consumers=1)
        await wait_consumers(nodes[0], "sub2", [nodes[2]], consumers=1)
        await nodes[0].send("events", 5, routing_type=MULTICAST)
        assert await drained(subs, 15) == [list(range(5))] * 3
