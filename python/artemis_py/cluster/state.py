"""What the parts of one cluster connection share: its state, and questions about it.

The floor of the cluster package's own modules. The parts that give links and
announcements their meaning (:mod:`.binding_exchange`, :mod:`.membership`, :mod:`.dispatch`,
:mod:`.take_over`, :mod:`.dialler`, ...) read and change a :class:`ClusterState`, never the
:class:`~.cluster_connection.ClusterConnection` that composes them, so none of them imports
a module above it (docs/clustering.md, "Internals").

:class:`ClusterState` holds the settings taken from ``broker.xml``, this node's topology
member and the topology, the links by direction, per neighbour its route (the
store-and-forward queue) and the bridge that drains it, the nodes that scaled down (also
across a restart, :mod:`.departures`), and the dialler's record of where it could not go
(:class:`Dials`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import trio

from artemis_py.broker.routing import NeighbourRoute, is_internal
from artemis_py.cluster.departures import Departures, file_name
from artemis_py.cluster.retry import RetryPolicy
from artemis_py.cluster.store_and_forward import sf_queue_name
from artemis_py.cluster.topology import Topology
from artemis_py.config import ClusterConnectionConfig, RoutingType
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster import Member

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker
    from artemis_py.broker.persistence import Ticket
    from artemis_py.cluster.bridge import Bridge
    from artemis_py.cluster.discovery.group import DiscoveryGroup
    from artemis_py.cluster.redistributor import Redistributor
    from artemis_py.config import BrokerConfig
    from artemis_py.transport.link import Link


class GroupingLinks(Protocol):
    """The node's grouping handler, as the links see it (:mod:`.grouping`)."""

    def receive(
        self, news: wire.Proposal | wire.ProposalResponse | wire.Unproposal, link: Link
    ) -> None: ...

    def link_up(self, link: Link) -> None: ...


@dataclass
class Dials:
    """What the dialler found out: where it gave up, where it is dialling, who answered."""

    given_up: dict[str, str] = field(default_factory=dict)  # connector -> why it stopped
    unreachable: set[tuple[str, int]] = field(default_factory=set)  # the last dial failed
    # The node that answered at each address dialled: a DNS_PING member is known by an
    # address while the topology names its connector's host (scale-down matches them).
    node_at: dict[tuple[str, int], str] = field(default_factory=dict)
    dialling: set[tuple[str, int]] = field(default_factory=set)  # a task keeps a link up


class ClusterState:
    """One ``<cluster-connection>``'s settings and shared state (see the module doc)."""

    def __init__(
        self,
        broker: Broker,
        config: ClusterConnectionConfig,
        node_config: BrokerConfig,
        *,
        instance_id: str | None = None,
    ) -> None:
        self.broker = broker
        self.config = config
        self.name = config.name
        self.node_id = broker.node_id
        self.instance_id = instance_id or uuid.uuid4().hex
        self.user = node_config.cluster_user
        self.password = node_config.cluster_password
        connectors = {c.name: c for c in node_config.connectors}
        own = connectors[config.connector_name]
        scale_down = node_config.ha_policy.scale_down
        self.scale_down = scale_down if scale_down is not None and scale_down.enabled else None
        self.local = Member(
            self.node_id,
            self.instance_id,
            own.host,
            own.port,
            True,
            time.time_ns() // 1000,
            # announced even with scale-down disabled: this node can still be a target
            scale_down.group_name if scale_down is not None else None,
            name=node_config.name or None,
            paired=node_config.ha_policy.shared_store is not None
            or node_config.ha_policy.replication is not None,
        )
        self.topology = Topology(self.local)
        self.static_connectors = [
            (connectors[n].host, connectors[n].port) for n in config.static_connectors
        ]
        self.scale_down_connectors = [
            (connectors[n].host, connectors[n].port)
            for n in (self.scale_down.connectors if self.scale_down else ())
        ]
        self.retry = RetryPolicy(config)
        self.ping_interval = max(config.check_period, 50) / 1000
        self.ttl = config.connection_ttl / 1000 if config.connection_ttl > 0 else float("inf")
        self.call_timeout = max(config.call_timeout, 100) / 1000
        # The links by direction, and per neighbour its route (the store-and-forward queue)
        # and the bridge that drains it.
        self.outgoing: dict[str, Link] = {}  # neighbour node id -> the link this node dialled
        self.incoming: set[Link] = set()  # links other nodes dialled
        self.routes: dict[str, NeighbourRoute] = {}
        self.bridges: dict[str, Bridge] = {}
        self.dials = Dials()
        # Nodes that scaled down (remembered across restarts, replayed on every new link:
        # .departures), and the take-overs of their backlogs still under way.
        self.departures = Departures(self.node_id, _departures_path(broker, self.name))
        self.departures.load()
        self.scaled_down: dict[str, str] = {d.node_id: d.target for d in self.departures}
        self.taking_over: set[str] = set()
        self.scale_down_committed: str | None = None  # the target its Leaving named
        # The journal tickets of the latest forwarded messages stored: once they complete,
        # so have all before them, and every id in the duplicate-id cache is durable.
        self.last_forwarded: list[Ticket] = []
        self.stopping = False
        self.redistributor: Redistributor | None = None
        self.on_stop_request: Callable[[], None] | None = None  # `cluster stop` (admin)
        # The node's cluster connections in broker.xml order, this one among them (node.py).
        self.peers: Sequence[ClusterState] = [self]
        self.nursery: trio.Nursery | None = None  # while it runs
        # The node's discovery groups this connection and its scale-down use (node.py).
        self.discovery: DiscoveryGroup | None = None
        self.scale_down_discovery: DiscoveryGroup | None = None
        # The node's grouping handler, when this connection carries its proposals (node.py).
        self.grouping: GroupingLinks | None = None

    def matches(self, address: str) -> bool:
        """Whether this cluster connection's ``address`` filter covers ``address``."""
        return not is_internal(address) and self.config.matches_address(address)

    def owns(self, address: str) -> bool:
        """Whether messages to ``address`` are balanced by this cluster connection."""
        return owner(self.peers, address) is self

    def moves(self, address: str) -> bool:
        """Whether a scale-down moves the queues of ``address`` through this connection:
        its owner's, or the first connection's when none covers it."""
        return (owner(self.peers, address) or self.peers[0]) is self

    def departed(self, node_id: str) -> bool:
        """Whether ``node_id`` announced that it is going away (and has not come back)."""
        member = self.topology.members.get(node_id)
        return member is not None and not member.up

    def links(self) -> list[Link]:
        """Every link of this node, both directions."""
        return [*self.outgoing.values(), *self.incoming]

    def route_to(self, node_id: str) -> NeighbourRoute:
        """The way to ``node_id``: its store-and-forward queue, created on first use."""
        route = self.routes.get(node_id)
        if route is None:
            name = sf_queue_name(self.name, node_id)
            queue = self.broker.queue(name)
            if queue is None:
                queue = self.broker.create_queue(name, name, RoutingType.MULTICAST, durable=True)
            route = self.routes[node_id] = NeighbourRoute(node_id, queue)
        return route


S = TypeVar("S", bound="ClusterState")


def owner(connections: Iterable[S], address: str) -> S | None:
    """The cluster connection ``address`` belongs to: the first of the node's connections
    (broker.xml order) that covers it; overlaps get a start-up warning."""
    return next((c for c in connections if c.matches(address)), None)


def _departures_path(broker: Broker, cluster: str) -> Path | None:
    """Where the departures are remembered: the journal directory (None: no persistence)."""
    storage = broker.persistence.storage
    return None if storage is None else Path(storage.messages.directory) / file_name(cluster)
