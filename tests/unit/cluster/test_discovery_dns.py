"""A DNS_PING discovery group on Trio's MockClock, with a resolver of the test's own
(``trio.socket.set_custom_hostname_resolver``): the name is resolved again every period,
so members added to it are found and members removed from it are dropped after
refresh-timeout; a name that does not resolve is a warning naming it, ever less often,
and is tried again. The port a group dials is that of the cluster connection using it."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

import pytest
import trio

from artemis_py.cluster.discovery.group import DiscoveryGroup
from artemis_py.cluster.discovery.service import Discovery, own_connector
from artemis_py.config import BrokerConfig, load_config

# Two cluster connections with their own connectors (ports 61616 and 61617) and their own
# DNS_PING groups; the first is also the one a scale-down group would fall back to.
BROKER = """<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
<connectors>
  <connector name="east">tcp://10.0.0.1:61616</connector>
  <connector name="west">tcp://10.0.0.1:61617</connector>
</connectors>
<cluster-password>not-the-default</cluster-password>
<discovery-groups>
  <discovery-group name="dg-east">
    <jgroups-file>east.xml</jgroups-file><jgroups-channel>e</jgroups-channel>
  </discovery-group>
  <discovery-group name="dg-west">
    <jgroups-file>west.xml</jgroups-file><jgroups-channel>w</jgroups-channel>
  </discovery-group>
  <discovery-group name="dg-spare">
    <jgroups-file>east.xml</jgroups-file><jgroups-channel>s</jgroups-channel>
  </discovery-group>
</discovery-groups>
<cluster-connections>
  <cluster-connection name="east">
    <address>orders</address><connector-ref>east</connector-ref>
    <discovery-group-ref discovery-group-name="dg-east"/>
  </cluster-connection>
  <cluster-connection name="west">
    <address>audit</address><connector-ref>west</connector-ref>
    <discovery-group-ref discovery-group-name="dg-west"/>
  </cluster-connection>
</cluster-connections>
</core></configuration>
"""

PERIOD = 2.0  # no broadcast group names the endpoint: DEFAULT_PERIOD
REFRESH = 10.0  # refresh-timeout's default


class Resolver(trio.abc.HostnameResolver):
    """Names -> addresses, changed by the test as it runs; a name mapped to an OSError
    raises it. Counts the lookups of each name."""

    def __init__(self, names: dict[str, list[str] | OSError]) -> None:
        self.names = names
        self.lookups: dict[str, int] = {}

    async def getaddrinfo(
        self,
        host: bytes | None,
        port: bytes | str | int | None,
        family: int = 0,
        type: int = 0,
        proto: int = 0,
        flags: int = 0,
    ) -> list[Any]:
        await trio.lowlevel.checkpoint()
        name = (host or b"").decode()
        self.lookups[name] = self.lookups.get(name, 0) + 1
        found = self.names.get(name, socket.gaierror(socket.EAI_NONAME, "Name not known"))
        if isinstance(found, OSError):
            raise found
        number = int(port or 0)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, number)) for a in found]

    async def getnameinfo(self, sockaddr: Any, flags: int) -> tuple[str, str]:
        raise NotImplementedError


@pytest.fixture
def config(tmp_path: Path) -> BrokerConfig:
    for name, query in (("east", "east.test"), ("west", "west.test")):
        (tmp_path / f"{name}.xml").write_text(
            f'<config><TCP/><dns.DNS_PING dns_query="{query}"/></config>\n'
        )
    (tmp_path / "broker.xml").write_text(BROKER)
    return load_config(tmp_path / "broker.xml", environ={})


def install(names: dict[str, list[str] | OSError]) -> Resolver:
    resolver = Resolver(names)
    trio.socket.set_custom_hostname_resolver(resolver)
    return resolver


def group_of(config: BrokerConfig, name: str) -> DiscoveryGroup:
    return Discovery(config, "me", {name}).groups[name]


def test_each_group_takes_the_connector_of_the_cluster_connection_that_uses_it(
    config: BrokerConfig,
) -> None:
    assert own_connector(config, "dg-east") == ("10.0.0.1", 61616)
    assert own_connector(config, "dg-west") == ("10.0.0.1", 61617)
    # A group no cluster connection uses (a scale-down's): the first connection's.
    assert own_connector(config, "dg-spare") == ("10.0.0.1", 61616)


async def test_the_second_cluster_connections_group_dials_its_own_port(
    config: BrokerConfig, autojump_clock: trio.testing.MockClock
) -> None:
    install({"east.test": ["10.0.0.1", "10.0.0.2"], "west.test": ["10.0.0.1", "10.0.0.3"]})
    east, west = group_of(config, "dg-east"), group_of(config, "dg-west")
    async with trio.open_nursery() as nursery:
        await nursery.start(east.run)
        await nursery.start(west.run)
        await trio.sleep(PERIOD / 2)
        # This node's own address (its connector host) is left out of both.
        assert east.membership.connectors() == [("10.0.0.2", 61616)]
        assert west.membership.connectors() == [("10.0.0.3", 61617)]
        nursery.cancel_scope.cancel()


async def test_the_name_is_resolved_again_and_members_come_and_go(
    config: BrokerConfig,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "artemis_py.cluster.discovery")
    addresses = ["10.0.0.1", "10.0.0.2"]
    resolver = install({"east.test": addresses})
    group = group_of(config, "dg-east")
    heard: list[str] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(group.run)
        group.subscribe(lambda m: heard.append(m.connectors[0][0]))
        await trio.sleep(PERIOD / 2)
        assert group.membership.connectors() == [("10.0.0.2", 61616)]

        addresses.append("10.0.0.3")  # a pod starts: found at the next resolution
        await trio.sleep(PERIOD)
        assert group.membership.connectors() == [("10.0.0.2", 61616), ("10.0.0.3", 61616)]
        assert "10.0.0.3" in heard

        addresses.remove("10.0.0.2")  # a pod goes: kept until refresh-timeout passes
        gone_at = trio.current_time()
        await trio.sleep(REFRESH - PERIOD)
        assert ("10.0.0.2", 61616) in group.membership.connectors()
        await trio.sleep(PERIOD + 0.1)
        assert group.membership.connectors() == [("10.0.0.3", 61616)]
        assert trio.current_time() - gone_at <= REFRESH + PERIOD
        nursery.cancel_scope.cancel()
    assert resolver.lookups["east.test"] >= (PERIOD / 2 + PERIOD + REFRESH) // PERIOD
    text = caplog.text
    assert "node (unknown id) at 10.0.0.3:61616 found" in text
    assert "node (unknown id) at 10.0.0.2:61616 not heard of for 10 s: dropped" in text


async def test_a_name_that_does_not_resolve_is_a_warning_and_is_tried_again(
    config: BrokerConfig,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "artemis_py.cluster.discovery")
    names: dict[str, list[str] | OSError] = {
        "east.test": socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    }
    resolver = install(names)
    group = group_of(config, "dg-east")
    async with trio.open_nursery() as nursery:
        await nursery.start(group.run)
        await trio.sleep(60)
        assert len(group.membership) == 0
        failures = resolver.lookups["east.test"]
        assert failures >= 60 // PERIOD  # tried every period
        warnings = [
            r.getMessage()
            for r in caplog.records
            if r.levelno == logging.WARNING and "cannot resolve 'east.test'" in r.getMessage()
        ]
        assert warnings
        assert "Name or service not known" in warnings[0]
        assert "dg-east" in warnings[0]
        assert len(warnings) < failures / 3  # ever less often
        assert "more time(s) since the last such line" in warnings[-1]

        # The name resolves at last: the member is found, the group never stopped.
        names["east.test"] = ["10.0.0.2"]
        await trio.sleep(PERIOD)
        assert group.membership.connectors() == [("10.0.0.2", 61616)]
        nursery.cancel_scope.cancel()
