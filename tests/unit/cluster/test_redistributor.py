"""Redistribution's timing (clusters §7) on a virtual clock: the delay, its cancellation by a
returning consumer, and the policies that never move anything.

A real broker (persistence off) holds a queue with a backlog; a remote binding with a
consumer stands for the same queue on another node, its store-and-forward queue local.
tests/cluster/test_redistribution.py checks the same rules with real nodes.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from artemis_py.broker.broker import Broker
from artemis_py.broker.message import MessageReference
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.routing import NeighbourRoute, RemoteQueueBinding
from artemis_py.cluster.redistributor import Redistributor
from artemis_py.config import MessageLoadBalancing, RoutingType
from artemis_py.config.parse import parse_config

ANY = RoutingType.ANYCAST


def broker_with_delay(delay_ms: int) -> Broker:
    xml = f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
      <persistence-enabled>false</persistence-enabled>
      <address-settings><address-setting match="#">
        <redistribution-delay>{delay_ms}</redistribution-delay>
      </address-setting></address-settings>
    </core></configuration>"""
    broker = Broker(parse_config(xml, "<test>", environ={}), Persistence(None, "a" * 32))
    broker.recover()
    return broker


class Taker:
    """A local consumer without a selector; ``busy`` ones take nothing for now."""

    selector = None

    def __init__(self, busy: bool = False) -> None:
        self.busy = busy
        self.refs: list[MessageReference] = []

    def has_credit(self) -> bool:
        return not self.busy

    def deliver(self, ref: MessageReference) -> None:
        self.refs.append(ref)


class Setup:
    def __init__(self, broker: Broker, nursery: trio.Nursery, policy: MessageLoadBalancing):
        self.broker = broker
        self.queue = broker.create_queue("orders", "orders", ANY)
        self.sf_queue = broker.create_queue("sf.node-b", "sf.node-b", RoutingType.MULTICAST)
        broker.add_remote_binding(
            RemoteQueueBinding(
                name="orders@node-b",
                queue_name="orders",
                address="orders",
                routing_type=ANY,
                filter=None,
                filter_text=None,
                distance=1,
                origin_node_id="node-b",
                name_on_neighbour="orders",
                route=NeighbourRoute("node-b", self.sf_queue, connected=True),
                consumers=(None,),  # a consumer over there, taking everything
                consumer_texts=(None,),
            )
        )
        self.redistributor = Redistributor(broker, policy, nursery)
        self.redistributor.watch(self.queue)

    def send(self, count: int) -> None:
        for n in range(count):
            message = self.broker.new_message("orders", body=b"m%d" % n, routing_type=ANY)
            self.broker.send(message, [self.queue]).complete()

    @property
    def moved(self) -> int:
        return self.sf_queue.message_count


async def test_the_backlog_moves_only_after_the_delay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        setup = Setup(broker_with_delay(3000), nursery, MessageLoadBalancing.ON_DEMAND)
        start = trio.current_time()
        setup.send(5)  # no local consumer: the queue becomes eligible
        await trio.sleep(2.999)
        assert setup.moved == 0
        await trio.sleep(0.002)
        await trio.testing.wait_all_tasks_blocked()
        assert setup.moved == 5
        assert setup.queue.message_count == 0
        assert trio.current_time() - start == pytest.approx(3.001)
        # Active from now on: later messages follow without a new delay.
        setup.send(2)
        await trio.testing.wait_all_tasks_blocked()
        assert setup.moved == 7
        nursery.cancel_scope.cancel()


async def test_a_local_consumer_within_the_delay_cancels_the_move(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        setup = Setup(broker_with_delay(3000), nursery, MessageLoadBalancing.ON_DEMAND)
        setup.queue.add_consumer(taker := Taker())
        setup.queue.remove_consumer(taker)
        setup.send(3)
        await trio.sleep(1)
        # Back within the delay, busy for now: the messages wait here for it.
        setup.queue.add_consumer(Taker(busy=True))
        await trio.sleep(10)
        assert setup.moved == 0
        assert setup.queue.message_count == 3
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("delay", "policy"),
    [
        (-1, MessageLoadBalancing.ON_DEMAND),  # the default: never
        (0, MessageLoadBalancing.STRICT),
        (0, MessageLoadBalancing.OFF),
    ],
)
async def test_nothing_moves_without_a_delay_or_under_strict_and_off(
    autojump_clock: trio.testing.MockClock, delay: int, policy: MessageLoadBalancing
) -> None:
    async with trio.open_nursery() as nursery:
        setup = Setup(broker_with_delay(delay), nursery, policy)
        setup.send(3)
        await trio.sleep(3600)
        assert setup.moved == 0
        assert setup.queue.message_count == 3
        nursery.cancel_scope.cancel()


async def test_off_with_redistribution_moves_at_once_with_delay_zero(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        setup = Setup(broker_with_delay(0), nursery, MessageLoadBalancing.OFF_WITH_REDISTRIBUTION)
        setup.send(4)
        await trio.testing.wait_all_tasks_blocked()
        assert setup.moved == 4
        assert trio.current_time() == 0
        nursery.cancel_scope.cancel()
