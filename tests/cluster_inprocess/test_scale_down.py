"""Scale-down, in process (clusters §8.3): a node that stops gracefully hands everything to
another node, and the others send what waited for it there (tests/cluster/test_scale_down.py
checks the same with real processes and journals)."""

from __future__ import annotations

from types import SimpleNamespace

import trio
import trio.testing

from artemis_py.broker.message import MessageReference, now_ms
from artemis_py.broker.queue import Queue
from conftest import wait_for

from .conftest import MULTICAST, open_cluster, wait_consumers


async def test_scale_down_moves_queues_and_backlog_to_the_lowest_node_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(3, scale_down=True) as nodes:
        await wait_for(nodes.formed, 10)
        departing = nodes[2]
        departing.queue("work")
        departing.queue("sub", MULTICAST, address="events")  # a durable subscription
        await departing.send("work", 20)
        await departing.send("events", 5, routing_type=MULTICAST)
        await nodes.stop(2)
        [report] = departing.node.scale_down_reports
        assert report.complete, report.summary()
        assert report.target == nodes[0].node_id  # no connectors: the lowest node id
        assert sum(report.moved.values()) == 25
        # The target made the queues and holds every message; node1 none.
        await wait_for(lambda: nodes[0].depth("work") == 20, 10)
        assert nodes[0].depth("sub") == 5
        assert nodes[1].depth("work") == -1
        consumer = nodes[0].consume("work")
        assert sorted(consumer.numbers) == list(range(20))
        # The others forget it: no bindings of it, and it is remembered as departed.
        assert not nodes[1].learned("work", on=departing)
        assert departing.node_id in nodes[1].cluster.scaled_down


async def test_the_others_send_what_waited_for_the_departed_node_to_the_target(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_cluster(3, scale_down=True) as nodes:
        await wait_for(nodes.formed, 10)
        departing = nodes[2]
        consumer = departing.consume("orders")
        await wait_consumers(nodes[1], "orders", [departing])
        nodes[1].queue("orders")
        # node1's link to node2 goes silent: what node1 sends there waits unconfirmed.
        nodes.network.cut(nodes[1].name, departing.name)
        await nodes[1].send("orders", 6)
        await trio.sleep(0.5)
        assert nodes[1].in_flight() == 6
        assert consumer.bodies == []
        consumer.close()
        await nodes.stop(2)  # to node0; node1 hears of it from node0 (Leaving is relayed)
        [report] = departing.node.scale_down_reports
        assert report.target == nodes[0].node_id, report.summary()
        await wait_for(lambda: nodes[0].depth("orders") == 6, 30, message="backlog at node0")
        await wait_for(lambda: nodes[1].in_flight() == 0, 10, message="node1 confirmed")
        assert sorted(nodes[0].consume("orders").numbers) == list(range(6))


async def test_with_no_other_node_nothing_is_lost(autojump_clock: trio.testing.MockClock) -> None:
    async with open_cluster(2, scale_down=True) as nodes:
        await wait_for(nodes.formed, 10)
        nodes[1].queue("kept")
        await nodes[1].send("kept", 4)
        nodes.kill(0)
        await wait_for(lambda: not nodes[1].cluster.outgoing, 10)
        departing = nodes[1]
        await nodes.stop(1)
        [report] = departing.node.scale_down_reports
        assert not report.complete
        assert "no node to scale down to is reachable" in report.summary()
        assert departing.depth("kept") == 4  # still in its own queue


async def test_a_held_redelivery_keeps_its_time_on_the_target(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reference held for a redelivery delay moves as a message scheduled for the time it
    was held until (Artemis's scale-down gives the time to _AMQ_SCHED_DELIVERY)."""
    async with open_cluster(2, scale_down=True) as nodes:
        await wait_for(nodes.formed, 10)
        departing = nodes[1]
        queue = departing.queue("work")
        await departing.send("work", 2)
        [held, other] = delivered_once(queue)
        due = now_ms() + 3_600_000  # (the wall clock's: the scheduler's own)
        queue.redeliver_later([held], [due])
        queue.cancel([other])  # (back at once: moved as a ready one)
        await nodes.stop(1)
        [report] = departing.node.scale_down_reports
        assert report.complete, report.summary()
        await wait_for(lambda: nodes[0].depth("work") == 2, 10)
        target = nodes[0].broker.queue("work")
        assert target is not None
        assert [(r.message.body, t) for r, t in target.scheduled.items()] == [(b"m-0", due)]
        assert [r.message.body for r in target.messages] == [b"m-1"]


def delivered_once(queue: Queue) -> list[MessageReference]:
    """Every ready reference of ``queue``, delivered to a consumer that then leaves."""
    refs: list[MessageReference] = []
    consumer = SimpleNamespace(selector=None, has_credit=lambda: True, deliver=refs.append)
    queue.add_consumer(consumer)
    queue.remove_consumer(consumer)
    return refs
