"""The node's broadcast and discovery groups, and how the cluster uses what they find.

:class:`Discovery` starts every ``<broadcast-group>`` and each ``<discovery-group>`` that
a cluster connection or the scale-down refers to. :func:`feed_dialler` is a cluster
connection's side: each member discovered is handed to the connection's dialler (the same
one that dials static connectors and members learned from the topology), which keeps
redialling it only while discovery still knows it.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import trio

from artemis_py.cluster.discovery import sources
from artemis_py.cluster.discovery.broadcaster import Broadcaster
from artemis_py.cluster.discovery.group import DiscoveryGroup, Source
from artemis_py.cluster.discovery.membership import Member
from artemis_py.config import BrokerConfig, DiscoveryGroupConfig

if TYPE_CHECKING:
    from artemis_py.cluster.dialler import Dialler
    from artemis_py.cluster.state import ClusterState

__all__ = ["Discovery", "feed_dialler", "knows", "own_connector"]

log = logging.getLogger("artemis_py.cluster.discovery")

# How often a FILE_PING directory is read or a DNS_PING name resolved when no broadcast
# group of this node names the same endpoint (JGroups's and Artemis's broadcast default).
DEFAULT_PERIOD = 2.0


class Discovery:
    """The groups of one node. ``groups`` holds the discovery groups that run, by name;
    ``clients`` are the node's STOMP URLs (its cluster connection's local member's), which
    the broadcasts carry for ``udp://`` clients."""

    def __init__(
        self, config: BrokerConfig, node_id: str, used: set[str], clients: tuple[str, ...] = ()
    ) -> None:
        connectors = {c.name: (c.host, c.port) for c in config.connectors}
        self.broadcasters = [
            Broadcaster(b, node_id, tuple(connectors[n] for n in b.connectors), clients)
            for b in config.broadcast_groups
        ]
        periods = {b.endpoint: b.broadcast_period / 1000 for b in config.broadcast_groups}
        self.groups = {
            g.name: DiscoveryGroup(g, node_id, _source(g, periods, own_connector(config, g.name)))
            for g in config.discovery_groups
            if g.name in used
        }

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for group in self.groups.values():
                await nursery.start(group.run)
            for broadcaster in self.broadcasters:
                await nursery.start(broadcaster.run)
            task_status.started()
            await trio.sleep_forever()


def own_connector(config: BrokerConfig, group: str) -> tuple[str, int]:
    """The connector (host, port) of the cluster connection that uses discovery group
    ``group`` (the first that refers to it; else the first cluster connection's: a
    scale-down's group). DNS_PING finds addresses; the port it dials them at is the members'
    connector port, the same as this node's in that cluster, and the host's addresses are
    this node's own, left out. A node in several clusters may give each its own port."""
    connectors = {c.name: (c.host, c.port) for c in config.connectors}
    users = [c for c in config.cluster_connections if c.discovery_group_name == group]
    chosen = users or config.cluster_connections
    return connectors[chosen[0].connector_name] if chosen else ("localhost", 0)


def _source(group: DiscoveryGroupConfig, periods: dict[str, float], own: tuple[str, int]) -> Source:
    stack = group.jgroups
    if stack is None:
        return sources.udp(group)
    # Read as often as this node announces, and at least twice per refresh-timeout.
    period = min(periods.get(group.endpoint, DEFAULT_PERIOD), group.refresh_timeout / 2000)
    if stack.protocol == "FILE_PING":
        assert stack.location is not None
        directory = f"{stack.location}/{group.jgroups_channel or ''}"
        return sources.file_ping(directory, period)
    assert stack.dns_query is not None
    return sources.dns_ping(stack.dns_query, stack.dns_record_type, own[1], own[0], period)


async def feed_dialler(cluster: ClusterState, dialler: Dialler, group: DiscoveryGroup) -> None:
    """Dial the members ``group`` finds for ``cluster`` (runs in the cluster's nursery)."""

    def discovered(member: Member) -> None:
        host, port = member.connectors[0]
        if cluster.stopping or (host, port) == (cluster.local.host, cluster.local.port):
            return
        if member.node_id is not None and (
            member.node_id in cluster.outgoing or cluster.departed(member.node_id)
        ):
            return  # linked already; or it said it is going (it announces a comeback)
        if f"tcp://{host}:{port}" in dialler.given_up:
            return  # initial-connect-attempts / reconnect-attempts used up
        dialler.dial(host, port, static=False, wanted=partial(knows, group, host, port))

    group.subscribe(discovered)
    if await group.initial_wait():
        log.info(
            "cluster %s: discovery group %s found %d member(s)",
            cluster.name,
            group.name,
            len(group.membership),
        )
    else:
        log.warning(
            "cluster %s: discovery group %s found no member within initial-wait-timeout "
            "(%g s) on %s; this node runs alone until one is found",
            cluster.name,
            group.name,
            group.initial_wait_timeout,
            group.endpoint,
        )


def knows(group: DiscoveryGroup, host: str, port: int) -> bool:
    """Whether ``group`` still knows a member at host:port (a dialler's ``wanted``)."""
    return group.membership.knows(host, port)
