"""The dialler's retry timing (clusters §4.1: retry-interval, retry-interval-multiplier,
max-retry-interval, initial-connect-attempts) on a virtual clock, with a connect that fails.

tests/cluster/test_formation.py and test_failures.py check retries against real nodes.
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from artemis_py.broker.broker import Broker
from artemis_py.broker.persistence import Persistence
from artemis_py.cluster.cluster_connection import ClusterConnection
from artemis_py.config.parse import parse_config
from artemis_py.transport.link import Link, LinkRefused


def cluster_connection(retry: str, connect: object) -> ClusterConnection:
    xml = f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
      <persistence-enabled>false</persistence-enabled>
      <connectors>
        <connector name="self">tcp://127.0.0.1:1</connector>
        <connector name="other">tcp://127.0.0.1:2</connector>
      </connectors>
      <cluster-password>a secret</cluster-password>
      <cluster-connections><cluster-connection name="c">
        <connector-ref>self</connector-ref>
        {retry}
        <static-connectors><connector-ref>other</connector-ref></static-connectors>
      </cluster-connection></cluster-connections>
    </core></configuration>"""
    config = parse_config(xml, "<test>", environ={})
    broker = Broker(config, Persistence(None, "a" * 32))
    broker.recover()
    return ClusterConnection(
        broker,
        config.cluster_connections[0],
        config,
        connect=connect,  # type: ignore[arg-type]
    )


class Unreachable:
    """A connect that fails, and when it was called."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error or ConnectionRefusedError(111, "Connection refused")
        self.times: list[float] = []

    async def __call__(self, host: str, port: int) -> Link:
        self.times.append(trio.current_time())
        raise self.error


async def run_for(cluster: ClusterConnection, seconds: float) -> None:
    with trio.move_on_after(seconds):
        await cluster.run()


async def test_retries_grow_by_the_multiplier_up_to_the_maximum_then_give_up(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    connect = Unreachable()
    cluster = cluster_connection(
        "<retry-interval>500</retry-interval>"
        "<retry-interval-multiplier>2</retry-interval-multiplier>"
        "<max-retry-interval>2000</max-retry-interval>"
        "<initial-connect-attempts>6</initial-connect-attempts>",
        connect,
    )
    with caplog.at_level(logging.INFO, logger="artemis_py.cluster"):
        await run_for(cluster, 60)
    # Waits of 0.5, 1, 2, then 2 (capped), 2 s between six attempts.
    assert connect.times == pytest.approx([0, 0.5, 1.5, 3.5, 5.5, 7.5])
    assert cluster.dialler.given_up == {"tcp://127.0.0.1:2": "gave up after 6 failed attempt(s)"}
    reaches = [r for r in caplog.records if "cannot reach" in r.getMessage()]
    assert len(reaches) == 1  # the first failure at INFO; the retries at DEBUG


async def test_minus_one_retries_forever_at_the_maximum_interval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connect = Unreachable()
    cluster = cluster_connection(
        "<retry-interval>1000</retry-interval>"
        "<retry-interval-multiplier>10</retry-interval-multiplier>"
        "<max-retry-interval>60000</max-retry-interval>"
        "<initial-connect-attempts>-1</initial-connect-attempts>",
        connect,
    )
    await run_for(cluster, 3600)
    # 1 s, 10 s, then a minute at a time: 0, 1, 11, 71, ..., 3551.
    assert connect.times == pytest.approx([0, 1, *range(11, 3600, 60)])
    assert cluster.dialler.given_up == {}


async def test_a_refused_link_is_retried_like_an_unreachable_node(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    connect = Unreachable(LinkRefused("cluster credentials rejected"))
    cluster = cluster_connection(
        "<retry-interval>100</retry-interval><initial-connect-attempts>50</initial-connect-attempts>",
        connect,
    )
    with caplog.at_level(logging.INFO, logger="artemis_py.cluster"):
        await run_for(cluster, 10)
    assert connect.times == pytest.approx([n / 10 for n in range(50)])
    # Logged once, then after 1 s and 2 s more (LogBackoff): three lines for 50 refusals.
    refused = [r.getMessage() for r in caplog.records if "refused the link" in r.getMessage()]
    assert len(refused) == 3, refused
    assert "more time(s) since the last such line" in refused[-1]
