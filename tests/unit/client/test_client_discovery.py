"""The client's ``udp://`` discovery without a broker: its URL parameters, the table of
announced nodes (sans-IO), and a client that listens on a random multicast group where a
fake broadcaster announces a scripted server."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
import trio
import trio.testing

from artemis_py.client import open_stomp_connection_over
from artemis_py.client.connection import ClientConnection
from artemis_py.client.discovery import DiscoveredNodes
from artemis_py.client.errors import ClientError
from artemis_py.client.failover import ClusterLocator, open_cluster_connection
from artemis_py.client.testing import ScriptedStompServer
from artemis_py.client.url import BrokerUrl, parse_client_url
from artemis_py.protocol.discovery import Announcement, encode
from artemis_py.transport.multicast import open_sender

GROUP = ("231.7.7.7", 9876)
ENDPOINT = "udp://231.7.7.7:9876"


def announcement(node: str, *clients: str, group: str = ENDPOINT) -> bytes:
    return encode(Announcement(group, node, (("10.0.0.1", 61616),), 1, clients))


# -- URLs -------------------------------------------------------------------------------------


def test_discovery_parameters() -> None:
    url = parse_client_url("udp://231.7.7.7:9876?refreshTimeout=500&initialWaitTimeout=0&ha=true")
    assert url.discovery == GROUP
    assert url.addresses == ()
    assert (url.options.refresh_timeout, url.options.initial_wait_timeout) == (500, 0)
    defaults = parse_client_url("udp://[ff02::1]:9876").options
    assert (defaults.refresh_timeout, defaults.initial_wait_timeout) == (10000, 10000)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tcp://a:1?refreshTimeout=5", "for udp:// discovery only"),
        ("udp://10.0.0.1:9876", "not a multicast group address"),
        ("udp://brokers.local:9876", "not a multicast group address"),
        ("udp://231.7.7.7:9876?refreshTimeout=0", "must be at least 1"),
    ],
)
def test_bad_discovery_urls_are_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_client_url(text)


# -- the table of announced nodes --------------------------------------------------------------


def test_nodes_are_their_announced_urls_until_refresh_timeout() -> None:
    nodes = DiscoveredNodes(GROUP, 2.0)
    assert nodes.receive(announcement("b", "tcp://h2:61613"), "s", 0.0)
    assert nodes.receive(announcement("a", "tcp://h1:61613", "tcp://h1:61614"), "s", 1.0)
    assert nodes.urls(1.0) == (
        BrokerUrl("h1", 61613),
        BrokerUrl("h1", 61614),
        BrokerUrl("h2", 61613),
    )
    assert nodes.receive(announcement("b", "tcp://h2:61613"), "s", 1.5)
    assert nodes.urls(2.9) == (
        BrokerUrl("h1", 61613),
        BrokerUrl("h1", 61614),
        BrokerUrl("h2", 61613),
    )
    assert nodes.urls(3.0) == (BrokerUrl("h2", 61613),)  # a: 2 s silent
    assert nodes.urls(3.5) == ()


def test_what_a_client_cannot_use_is_ignored_with_one_warning_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nodes = DiscoveredNodes(GROUP, 2.0)
    caplog.set_level(logging.WARNING, "artemis_py.client")
    for _ in range(3):
        assert not nodes.receive(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "x:1", 0.0)
        assert not nodes.receive(announcement("old"), "x:1", 0.0)  # version 1: no URLs
        assert not nodes.receive(
            announcement("c", "tcp://h:1", group="udp://231.7.7.8:9876"), "x:1", 0.0
        )
    assert nodes.urls(0.0) == ()
    assert len(caplog.records) == 3
    text = caplog.text
    assert "not an artemis-py announcement" in text
    assert "no client (STOMP) URLs" in text
    assert "an announcement for 'udp://231.7.7.8:9876'" in text
    # Another spelling of the same group is the same group.
    assert nodes.receive(announcement("d", "tcp://h:1", group="udp://231.7.7.7:9876"), "x:1", 0.0)
    v6 = DiscoveredNodes(("ff02::0:1", 9876), 2.0)
    assert v6.receive(announcement("d", "tcp://h:1", group="udp://[ff02::1]:9876"), "x:1", 0.0)


# -- listening on a real multicast group -------------------------------------------------------


def random_group() -> tuple[str, int]:
    return f"239.255.{random.randrange(1, 255)}.{random.randrange(1, 255)}", random.randrange(
        20000, 60000
    )


async def broadcast(group: tuple[str, int], data: bytes) -> None:
    sock = await open_sender(group[0], None, 0)
    with sock:
        while True:
            await sock.sendto(data, group)
            await trio.sleep(0.05)


@asynccontextmanager
async def scripted(server: ScriptedStompServer, url: BrokerUrl) -> AsyncIterator[ClientConnection]:
    client_end, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve, server_end)
        async with open_stomp_connection_over(client_end) as conn:
            yield conn
        nursery.cancel_scope.cancel()


async def test_a_udp_client_connects_to_an_announced_node() -> None:
    group = random_group()
    server = ScriptedStompServer()
    dialled: list[BrokerUrl] = []

    def connect(url: BrokerUrl) -> AbstractAsyncContextManager[ClientConnection]:
        dialled.append(url)
        return scripted(server, url)

    endpoint = f"udp://{group[0]}:{group[1]}"
    data = announcement("n1", "tcp://10.1.2.3:61613", group=endpoint)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(broadcast, group, data)
        with trio.fail_after(10):
            url = f"{endpoint}?initialWaitTimeout=5000"
            async with open_cluster_connection(url, connect=connect) as conn:
                assert conn.url == BrokerUrl("10.1.2.3", 61613)
                assert conn.locator.initial() == (BrokerUrl("10.1.2.3", 61613),)
        nursery.cancel_scope.cancel()
    assert dialled == [BrokerUrl("10.1.2.3", 61613)]


async def test_no_announcement_within_initial_wait_timeout_names_the_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    group = random_group()
    endpoint = f"udp://{group[0]}:{group[1]}"

    def connect(url: BrokerUrl) -> AbstractAsyncContextManager[ClientConnection]:
        raise AssertionError("nothing to connect to")

    with pytest.raises(ClientError) as info:
        async with open_cluster_connection(endpoint, connect=connect):
            pass
    message = str(info.value)
    assert endpoint in message
    assert "initialWaitTimeout (10000 ms)" in message
    assert trio.current_time() >= 10.0
    # A locator of a udp:// URL knows nothing until discovery hears something.
    assert ClusterLocator(endpoint).candidates() == []
