"""The cluster-aware client without a broker: URL forms, load-balancing policies, the retry
schedule, topology updates, and failover against scripted servers on memory streams (the
timing on Trio's MockClock)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from artemis_py.client import open_stomp_connection_over
from artemis_py.client.connection import ClientConnection
from artemis_py.client.errors import ConnectionLostError
from artemis_py.client.failover import (
    DUPLICATE_ID_HEADER,
    ClusterLocator,
    FailoverConnection,
    RetrySchedule,
)
from artemis_py.client.load_balancing import make_policy, policy_name
from artemis_py.client.subscription import TOPOLOGY_SUBSCRIPTION
from artemis_py.client.testing import ScriptedStompServer
from artemis_py.client.url import BrokerUrl, ConnectionOptions, parse_client_url
from artemis_py.protocol.stomp import Command, Frame

ARTEMIS = "org.apache.activemq.artemis.api.core.client.loadbalance."


# -- URLs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["tcp://a:1,tcp://b:2", "(tcp://a:1,tcp://b:2)", "(tcp://a:1, b:2)?ha=false"],
)
def test_lists_of_addresses(text: str) -> None:
    assert parse_client_url(text).addresses == (BrokerUrl("a", 1), BrokerUrl("b", 2))


def test_parameters_and_defaults() -> None:
    url = parse_client_url(
        "(tcp://a:1)?ha=true&reconnectAttempts=5&retryInterval=10&retryIntervalMultiplier=2"
        "&maxRetryInterval=70&useTopologyForLoadBalancing=false"
        f"&connectionLoadBalancingPolicyClassName={ARTEMIS}RandomStickyConnectionLoadBalancingPolicy"
    )
    assert url.options == ConnectionOptions(True, 5, 10, 2.0, 70, False, "random-sticky")
    assert parse_client_url("tcp://a:1").options.failover_attempts == 0  # Artemis's default
    assert parse_client_url("tcp://a:1?ha=true").options.failover_attempts == -1
    assert (url.host, url.port) == ("a", 1)


def test_discovery_url_is_parsed_and_its_nodes_come_from_discovery() -> None:
    url = parse_client_url("udp://231.7.7.7:9876?ha=true")
    assert url.discovery == ("231.7.7.7", 9876)
    assert url.addresses == ()
    locator = ClusterLocator(url)
    assert locator.discovery is not None
    assert locator.discovery.endpoint == "udp://231.7.7.7:9876"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tcp://a:1?retry=5", "unknown URL parameter 'retry'"),
        ("tcp://a:1?ha", "'ha' has no value"),
        ("tcp://a:1?ha=yes", "ha='yes': expected true or false"),
        ("tcp://a:1?reconnectAttempts=-2", "must be at least -1"),
        ("tcp://a:1?retryIntervalMultiplier=0.5", "must be a number >= 1"),
        ("tcp://a:1?connectionLoadBalancingPolicyClassName=Fancy", "unknown connection load"),
        ("(tcp://a:1,tcp://b:2", "unbalanced parenthesis"),
        ("tcp://a:1,,tcp://b:2", "empty address"),
        ("(udp://g:1,tcp://a:1)", "cannot be mixed"),
        ("udp://g", "needs a group address and port"),
        ("http://a:1", "unsupported URL scheme"),
        ("", "empty broker URL"),
    ],
)
def test_malformed_urls_are_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_client_url(text)
    assert "\n" not in str(info.value)


# -- policies and the retry schedule ---------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["round-robin", "RoundRobin", f"{ARTEMIS}RoundRobinConnectionLoadBalancingPolicy"],
)
def test_policy_names(name: str) -> None:
    assert policy_name(name) == "round-robin"


def test_policies() -> None:
    picks = make_policy("round-robin", random.Random(1))
    first = picks.select(3)
    assert [picks.select(3) for _ in range(4)] == [(first + i) % 3 for i in range(1, 5)]
    sticky = make_policy("random-sticky", random.Random(2))
    assert len({sticky.select(5) for _ in range(20)}) == 1
    rand = make_policy("random", random.Random(3))
    assert len({rand.select(5) for _ in range(50)}) > 1
    assert {make_policy("first-element").select(4) for _ in range(5)} == {0}


def test_retry_schedule() -> None:
    options = ConnectionOptions(True, 5, 100, 2.0, 500)
    assert list(RetrySchedule(options).pauses()) == [0.0, 0.1, 0.2, 0.4, 0.5]
    assert list(RetrySchedule(ConnectionOptions()).pauses()) == []  # failover off


def test_candidates_put_the_lost_node_last_and_prefer_the_topology() -> None:
    locator = ClusterLocator(
        "(tcp://a:1,tcp://b:2)?connectionLoadBalancingPolicyClassName=first-element"
    )
    assert locator.candidates(BrokerUrl("a", 1)) == [BrokerUrl("b", 2), BrokerUrl("a", 1)]
    locator.learn(("tcp://c:3", "not a url:x"))
    assert locator.candidates() == [BrokerUrl("c", 3), BrokerUrl("a", 1), BrokerUrl("b", 2)]


# -- failover against scripted servers ---------------------------------------------------------


class Nodes:
    """Scripted servers by port; a port without one refuses connections."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.servers: dict[int, ScriptedStompServer] = {}
        self.attempts: list[tuple[float, int]] = []

    @asynccontextmanager
    async def connect(self, url: BrokerUrl) -> AsyncIterator[ClientConnection]:
        self.attempts.append((trio.current_time(), url.port))
        server = self.servers.get(url.port)
        if server is None:
            raise ConnectionRefusedError(111, "Connection refused")
        client_end, server_end = trio.testing.memory_stream_pair()
        self.nursery.start_soon(server.serve, server_end)
        async with open_stomp_connection_over(client_end) as conn:
            yield conn


async def failover_connection(nodes: Nodes, url: str) -> FailoverConnection:
    conn = FailoverConnection(ClusterLocator(url), nodes.connect, nodes.nursery)
    await conn.start()
    return conn


URL = "(tcp://a:1,tcp://b:2)?ha=true&retryInterval=1000&retryIntervalMultiplier=2&maxRetryInterval=3000&connectionLoadBalancingPolicyClassName=first-element"


async def test_an_unreceipted_send_is_resent_with_its_duplicate_id(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        nodes = Nodes(nursery)
        first = nodes.servers[1] = ScriptedStompServer()
        second = nodes.servers[2] = ScriptedStompServer()
        conn = await failover_connection(nodes, URL)
        moves: list[tuple[int, int]] = []
        conn.on_failover = lambda old, new, exc: moves.append((old.port, new.port))
        sub = await conn.subscribe("/queue/in", ack="client-individual")
        first.auto_receipts = False
        async with trio.open_nursery() as sending:
            sending.start_soon(conn.send, "/queue/orders", "o1")
            await first.wait_frames(Command.SEND)
            await first.close()  # the node goes away before the RECEIPT
        sent = [f.get(DUPLICATE_ID_HEADER) for s in (first, second) for f in s.received("SEND")]
        assert len(sent) == 2
        assert sent[0] == sent[1]
        assert sent[0]
        assert moves == [(1, 2)]
        assert conn.failovers == 1
        assert [f.get("id") for f in second.received("SUBSCRIBE")] == [sub.id]  # re-subscribed
        nursery.cancel_scope.cancel()


async def test_failover_waits_by_the_schedule_and_gives_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        nodes = Nodes(nursery)
        first = nodes.servers[1] = ScriptedStompServer()
        conn = await failover_connection(nodes, URL.replace("ha=true", "reconnectAttempts=4"))
        start = trio.current_time()
        await first.close()
        del nodes.servers[1]
        with pytest.raises(ConnectionLostError, match="gave up"):
            for _ in range(10):
                await conn.send("/queue/orders", "o1")
        rounds = sorted({round(t - start, 3) for t, _ in nodes.attempts[1:]})
        assert rounds == [0.0, 1.0, 3.0, 6.0]  # 1 s, then 2 s, then at most 3 s
        with pytest.raises(ConnectionLostError):  # final for everyone
            await conn.send("/queue/orders", "o2")
        nursery.cancel_scope.cancel()


async def test_without_ha_a_lost_connection_is_not_failed_over(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        nodes = Nodes(nursery)
        first = nodes.servers[1] = ScriptedStompServer()
        nodes.servers[2] = ScriptedStompServer()
        conn = await failover_connection(
            nodes, "(tcp://a:1,tcp://b:2)?connectionLoadBalancingPolicyClassName=first-element"
        )
        await first.close()
        with pytest.raises(ConnectionLostError, match="failover is off"):
            for _ in range(10):
                await conn.send("/queue/orders", "o1")
        nursery.cancel_scope.cancel()


async def test_topology_updates_reach_the_locator(
    autojump_clock: trio.testing.MockClock, wait_for: Any
) -> None:
    async with trio.open_nursery() as nursery:
        nodes = Nodes(nursery)
        server = nodes.servers[1] = ScriptedStompServer()
        conn = await failover_connection(nodes, "tcp://a:1")
        update = Frame(
            Command.MESSAGE,
            (
                ("subscription", TOPOLOGY_SUBSCRIPTION),
                ("destination", TOPOLOGY_SUBSCRIPTION),
                ("message-id", "t1"),
                ("topology", "tcp://a:1,tcp://b:2"),
            ),
        )
        await server.send_frame(update)
        await wait_for(lambda: conn.locator.topology != (), message="topology update")
        assert conn.locator.topology == (BrokerUrl("a", 1), BrokerUrl("b", 2))
        nursery.cancel_scope.cancel()


# -- pipelined sends (wait=False) --------------------------------------------------------------


async def test_pipelined_sends_keep_a_window_and_their_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        nodes = Nodes(nursery)
        server = nodes.servers[1] = ScriptedStompServer(auto_receipts=False)
        conn = FailoverConnection(ClusterLocator(URL), nodes.connect, nursery, max_pending=3)
        await conn.start()
        for number in range(3):
            await conn.send("/queue/orders", f"o{number}", wait=False)
        with trio.move_on_after(5) as blocked:
            await conn.send("/queue/orders", "o3", wait=False)  # the window is full
        assert blocked.cancelled_caught
        await server.wait_for(lambda: len(server.held_receipts) == 3)
        assert [f.body for f in server.received("SEND")] == [b"o0", b"o1", b"o2"]
        with trio.move_on_after(5) as flushing:
            await conn.flush_receipts()
        assert flushing.cancelled_caught  # nothing receipted yet
        await server.release_receipts()
        await conn.flush_receipts()
        await conn.send("/queue/orders", "o4", wait=False)  # room again
        await server.wait_for(lambda: len(server.held_receipts) == 1)
        assert conn.resends == 0
        nursery.cancel_scope.cancel()


async def test_unreceipted_pipelined_sends_are_resent_after_a_failover(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        nodes = Nodes(nursery)
        first = nodes.servers[1] = ScriptedStompServer(auto_receipts=False)
        second = nodes.servers[2] = ScriptedStompServer()
        conn = FailoverConnection(ClusterLocator(URL), nodes.connect, nursery, max_pending=4)
        await conn.start()
        for number in range(4):
            await conn.send("/queue/orders", f"o{number}", wait=False)
        await first.wait_for(lambda: len(first.held_receipts) == 4)
        await first.release_receipts(1)  # o0 is receipted, o1..o3 are not
        await first.close()
        await conn.flush_receipts()
        ids = {f.body: f.get(DUPLICATE_ID_HEADER) for f in first.received("SEND")}
        resent = second.received("SEND")
        assert sorted(f.body for f in resent) == [b"o1", b"o2", b"o3"]
        assert all(f.get(DUPLICATE_ID_HEADER) == ids[f.body] for f in resent)
        assert (conn.failovers, conn.resends) == (1, 3)
        nursery.cancel_scope.cancel()


async def test_a_pipelined_send_that_fails_for_good_is_raised_by_the_next_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        nodes = Nodes(nursery)
        first = nodes.servers[1] = ScriptedStompServer(auto_receipts=False)
        url = URL.replace("ha=true", "reconnectAttempts=2")
        conn = FailoverConnection(ClusterLocator(url), nodes.connect, nursery, max_pending=2)
        await conn.start()
        await conn.send("/queue/orders", "o0", wait=False)
        await first.wait_frames(Command.SEND)
        await first.close()
        del nodes.servers[1]
        with pytest.raises(ConnectionLostError, match="gave up"):
            await conn.flush_receipts()
        with pytest.raises(ConnectionLostError, match="gave up"):
            await conn.send("/queue/orders", "o1", wait=False)
        nursery.cancel_scope.cancel()
