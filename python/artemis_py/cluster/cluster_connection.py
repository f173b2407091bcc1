"""A cluster connection: this node's membership in one cluster (Artemis's ClusterConnection).

Theory of operation
-------------------
The cluster connection dials every member it knows (:mod:`.dialler`): first its static
connectors, then each member it learns of through topology announcements (unless
``allow-direct-connections-only`` is set, which gives chains and other explicit shapes).
The dialled node answers with its topology and its bindings, which become remote bindings
in this node's broker (:mod:`.binding_exchange`), so that routing can send messages there.
Messages chosen for a remote binding go into the durable store-and-forward queue of the
neighbour the binding came through (its *route*), and a bridge drains that queue over the
link to it.

Other nodes dial this node through a CORE acceptor (:mod:`.incoming`); on each of those
links this node publishes its own queues and consumers and the remote bindings it knows
within the dialler's ``max-hops``, and stores the messages the dialler's bridge forwards.

This module holds what the pieces share (the links, routes and bridges, the topology, the
nodes that scaled down) and coordinates them: topology announcements are applied and passed
on, a neighbour's scale-down hands its backlog over (:mod:`.scale_down`), and a graceful
stop says goodbye on every link. The nodes that scaled down are remembered, also across a
restart, and told to every new link (:mod:`.departures`), so a node that was away when one
left sends its backlog for it to its target.

A link that breaks is redialled per the retry settings; while a neighbour is unreachable its
bindings stay known but count as disconnected, so routing prefers connected nodes and
whatever was already routed to it waits in its store-and-forward queue.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from artemis_py.broker.routing import NeighbourRoute, is_internal
from artemis_py.cluster.binding_exchange import BindingExchange
from artemis_py.cluster.bridge import Bridge
from artemis_py.cluster.client_ids import adopt_client_ids
from artemis_py.cluster.departures import Departures, file_name
from artemis_py.cluster.dialler import Connect, Dialler
from artemis_py.cluster.discovery.service import feed_dialler, knows
from artemis_py.cluster.incoming import IncomingLinks
from artemis_py.cluster.redistributor import Redistributor
from artemis_py.cluster.retry import RetryPolicy
from artemis_py.cluster.status import status_report
from artemis_py.cluster.store_and_forward import neighbour_of, sf_queue_name
from artemis_py.cluster.take_over import take_over
from artemis_py.cluster.topology import DuplicateNodeIdError, Member, Topology, connector, leaving
from artemis_py.config import ClusterConnectionConfig, RoutingType
from artemis_py.protocol import cluster as wire
from artemis_py.transport.link import Link

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker
    from artemis_py.broker.persistence import Ticket
    from artemis_py.cluster.discovery.group import DiscoveryGroup
    from artemis_py.config import BrokerConfig

log = logging.getLogger("artemis_py.cluster")


class ClusterConnection:
    """One ``<cluster-connection>`` of this node, running."""

    def __init__(
        self,
        broker: Broker,
        config: ClusterConnectionConfig,
        node_config: BrokerConfig,
        *,
        instance_id: str | None = None,
        connect: Connect | None = None,
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
        # What the pieces share: the links by direction, and per neighbour its route (the
        # store-and-forward queue) and the bridge that drains it.
        self.outgoing: dict[str, Link] = {}  # neighbour node id -> the link this node dialled
        self.incoming: set[Link] = set()  # links other nodes dialled
        self.routes: dict[str, NeighbourRoute] = {}
        self.bridges: dict[str, Bridge] = {}
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
        self.dialler = Dialler(self, connect)
        self.exchange = BindingExchange(self)
        self.links_in = IncomingLinks(self)
        # The node's cluster connections in broker.xml order, this one among them (node.py).
        self.peers: list[ClusterConnection] = [self]
        self._nursery: trio.Nursery | None = None
        # The node's discovery groups this connection and its scale-down use (node.py).
        self.discovery: DiscoveryGroup | None = None
        self.scale_down_discovery: DiscoveryGroup | None = None

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

    # -- running -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Dial the static connectors and keep the links up until cancelled."""
        self._restore_routes()
        self.broker.add_binding_listener(self.exchange)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.redistributor = Redistributor(
                    self.broker, self.config.message_load_balancing, nursery
                )
                for queue in self.broker.queues():
                    if self.owns(queue.address):
                        self.redistributor.watch(queue)
                for host, port in self.static_connectors:
                    if (host, port) != (self.local.host, self.local.port):
                        self.dialler.dial(nursery, host, port, static=True)
                if self.discovery is not None:
                    nursery.start_soon(feed_dialler, self, self.discovery)
                log.info(
                    "cluster %s: node %s at %s, %s, max-hops %d, static connectors: %s",
                    self.name,
                    self.node_id,
                    connector(self.local),
                    self.config.message_load_balancing.value,
                    self.config.max_hops,
                    ", ".join(f"tcp://{h}:{p}" for h, p in self.static_connectors) or "none",
                )
                task_status.started()
                await trio.sleep_forever()
        finally:
            self.broker.remove_binding_listener(self.exchange)

    def _restore_routes(self) -> None:
        """The store-and-forward queues a previous run left, and what waits in them."""
        for queue in self.broker.queues():
            node_id = neighbour_of(self.name, queue.name)
            if node_id is None:
                continue
            self.routes[node_id] = NeighbourRoute(node_id, queue)
            if queue.message_count:
                log.info(
                    "cluster %s: %d message(s) wait for node %s",
                    self.name,
                    queue.message_count,
                    node_id,
                )

    async def leave(self) -> None:
        """Tell every neighbour this node is going away (a graceful stop)."""
        self.stopping = True
        farewell = wire.Topology(members=(leaving(self.local),))
        async with trio.open_nursery() as nursery:
            for link in self.links():
                nursery.start_soon(link.goodbye, farewell)

    def dial(
        self,
        host: str,
        port: int,
        *,
        static: bool = True,
        wanted: Callable[[], bool] | None = None,
    ) -> None:
        """Keep a link to the node at host:port: a scale-down target (like a static
        connector), or a discovered member (while ``wanted``)."""
        if self._nursery is not None:
            self.dialler.dial(self._nursery, host, port, static=static, wanted=wanted)

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

    # -- what neighbours announce ------------------------------------------------------

    def apply_topology(self, frame: wire.Topology, source: Link | None) -> None:
        """Members announced over ``source``: learn them, pass news on, dial new ones."""
        for member in frame.members:
            try:
                changed = self.topology.update(member)
            except DuplicateNodeIdError as exc:
                log.error("cluster %s: %s", self.name, exc)
                continue
            if not changed:
                continue
            log.info(
                "cluster %s: node %s at %s is %s",
                self.name,
                member.node_id,
                connector(member),
                _state(member),
            )
            update = wire.Topology(members=(member,))
            for link in self.links():
                if link is not source:
                    link.send(update)
            if member.up:
                if self.departures.returned(member):  # it runs again
                    self.scaled_down.pop(member.node_id, None)
                    self._save_departures()
                if member.scaling_down_to is None:  # (not a node on its way out)
                    self._maybe_dial(member)
            else:
                route = self.routes.get(member.node_id)
                if route is not None:
                    route.connected = False

    def _maybe_dial(self, member: Member) -> None:
        # Learned members are dialled unless the connection is explicit: direct connections
        # only, or no static connectors at all (the end of a chain only answers).
        if self.config.allow_direct_connections_only or self.stopping:
            return
        if not self.static_connectors and self.config.discovery_group_name is None:
            return
        if member.node_id in self.outgoing or self.dialler.dialling(member.host, member.port):
            return
        if self._nursery is not None:
            # With discovery, a learned member is redialled while discovery knows it.
            group = self.discovery
            wanted = None if group is None else partial(knows, group, member.host, member.port)
            self.dialler.dial(self._nursery, member.host, member.port, static=False, wanted=wanted)

    def neighbour_scaled_down(self, event: wire.Leaving, source: Link) -> None:
        """A node scaled down to ``event.target``: forget it, send what waits for it there."""
        departed, target = event.node_id, event.target
        if event.client_ids and target == self.node_id:
            adopt_client_ids(self, event)  # (in every frame: a large set takes several)
        if departed == self.node_id or departed in self.scaled_down:
            return  # heard already
        self.scaled_down[departed] = target
        known = self.topology.members.get(departed)
        self.departures.add(event, known.version if known is not None else 0)
        self._save_departures()
        # Pass it on, like topology: a node whose link to the departed one was down at the
        # time hears it from the others (the clients' duplicate ids are the target's only).
        relayed = replace(event, client_ids=())
        for link in self.links():
            if link is not source and link.established is not None:
                if link.peer_node_id != departed:
                    link.send(relayed)
        log.info(
            "cluster %s: node %s scaled down to %s: its bindings go, and what waits for it "
            "goes there",
            self.name,
            departed,
            "this node" if target == self.node_id else f"node {target}",
        )
        self.exchange.forget_node(departed)
        self._take_over(departed, target, event.received)

    def _take_over(self, departed: str, target: str, received: Iterable[str] = ()) -> None:
        if self._nursery is None or departed in self.taking_over:
            return
        self.taking_over.add(departed)

        async def run() -> None:
            try:
                await take_over(self, departed, target, received)
            finally:
                self.taking_over.discard(departed)

        self._nursery.start_soon(run)

    def _save_departures(self) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self.departures.save)

    def replay_departures(self, link: Link) -> None:
        """A new link: tell its peer which nodes scaled down (it may have been away)."""
        for frame in self.departures.replay(link.peer_node_id):
            link.send(frame)

    def resume_take_overs(self, peer: str) -> None:
        """A link to ``peer`` is up: a backlog for a node that scaled down to ``peer`` that
        stayed here for want of a way there (:func:`.take_over._stranded`) goes now."""
        for departed, target in list(self.scaled_down.items()):
            route = self.routes.get(departed)
            if target == peer and route is not None and route.sf_queue.message_count:
                self._take_over(departed, target)

    def announce_scale_down(self, target: str | None) -> None:
        """Tell every neighbour this node is scaling down, and to which node ("" for none
        yet): nodes scaling down at the same time break ties with it (:mod:`.targets`)."""
        if self.local.scaling_down_to == (target or ""):
            return
        self.local = replace(
            self.local, version=self.local.version + 1, scaling_down_to=target or ""
        )
        self.topology.local = self.local
        self.topology.members[self.node_id] = self.local
        update = wire.Topology(members=(self.local,))
        for link in self.links():
            link.send(update)

    # -- status ------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What ``artemis-py cluster status`` prints."""
        return status_report(self)


def owner(connections: Iterable[ClusterConnection], address: str) -> ClusterConnection | None:
    """The cluster connection ``address`` belongs to: the first of the node's connections
    (broker.xml order) that covers it; overlaps get a start-up warning."""
    return next((c for c in connections if c.matches(address)), None)


def _departures_path(broker: Broker, cluster: str) -> Path | None:
    """Where the departures are remembered: the journal directory (None: no persistence)."""
    storage = broker.persistence.storage
    return None if storage is None else Path(storage.messages.directory) / file_name(cluster)


def _state(member: Member) -> str:
    if not member.up:
        return "leaving"
    if member.scaling_down_to is None:
        return "up"
    return f"scaling down to node {member.scaling_down_to or '(none yet)'}"
