"""Who is in the cluster: the topology announcements and departures a cluster connection
hears, applies and passes on.

Theory of operation
-------------------
* A ``Topology`` frame names members (each with a version): a newer announcement replaces
  what was known, and each change is passed on over every other link, so news crosses the
  cluster; a member announced up is dialled (:meth:`Membership.maybe_dial`) unless the
  connection is explicit (direct connections only, or the end of a chain). A member that
  announces its departure keeps its bindings but its route counts as disconnected.
* A ``Leaving`` frame says a node scaled down to a target: it is remembered
  (:mod:`.departures`, also across a restart), relayed over every other link, its bindings
  go (:meth:`.BindingExchange.forget_node`), and what waits for it here goes to the target
  (:func:`.take_over.take_over`). The frames to the target carry the clients' duplicate
  ids (:mod:`.client_ids`).
* Every new link is told the departures this node remembers (:meth:`replay_departures`),
  and a backlog for a node that scaled down to the new link's peer, stranded for want of a
  way there, goes now (:meth:`resume_take_overs`).
* This node's own scale-down is announced in its member (:meth:`announce_scale_down`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from artemis_py.cluster.client_ids import adopt_client_ids
from artemis_py.cluster.discovery.service import knows
from artemis_py.cluster.take_over import take_over
from artemis_py.cluster.topology import DuplicateNodeIdError, connector
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster import Member

if TYPE_CHECKING:
    from artemis_py.cluster.binding_exchange import BindingExchange
    from artemis_py.cluster.dialler import Dialler
    from artemis_py.cluster.state import ClusterState
    from artemis_py.transport.link import Link

log = logging.getLogger("artemis_py.cluster")


class Membership:
    """Applies what neighbours announce about the cluster's members (see the module doc)."""

    def __init__(self, cluster: ClusterState, exchange: BindingExchange, dialler: Dialler) -> None:
        self.cluster = cluster
        self.exchange = exchange
        self.dialler = dialler

    def apply_topology(self, frame: wire.Topology, source: Link | None) -> None:
        """Members announced over ``source``: learn them, pass news on, dial new ones."""
        cluster = self.cluster
        for member in frame.members:
            try:
                changed = cluster.topology.update(member)
            except DuplicateNodeIdError as exc:
                log.error("cluster %s: %s", cluster.name, exc)
                continue
            if not changed:
                continue
            log.info(
                "cluster %s: node %s at %s is %s",
                cluster.name,
                member.node_id,
                connector(member),
                _state(member),
            )
            update = wire.Topology(members=(member,))
            for link in cluster.links():
                if link is not source:
                    link.send(update)
            if member.up:
                if cluster.departures.returned(member):  # it runs again
                    cluster.scaled_down.pop(member.node_id, None)
                    self._save_departures()
                if member.scaling_down_to is None:  # (not a node on its way out)
                    self.maybe_dial(member)
            else:
                route = cluster.routes.get(member.node_id)
                if route is not None:
                    route.connected = False

    def maybe_dial(self, member: Member) -> None:
        """Dial a learned member unless the connection is explicit: direct connections
        only, or no static connectors at all (the end of a chain only answers)."""
        cluster = self.cluster
        if cluster.config.allow_direct_connections_only or cluster.stopping:
            return
        if not cluster.static_connectors and cluster.config.discovery_group_name is None:
            return
        if member.node_id in cluster.outgoing or self.dialler.dialling(member.host, member.port):
            return
        # With discovery, a learned member is redialled while discovery knows it.
        group = cluster.discovery
        wanted = None if group is None else partial(knows, group, member.host, member.port)
        self.dialler.dial(member.host, member.port, static=False, wanted=wanted)

    def neighbour_scaled_down(self, event: wire.Leaving, source: Link) -> None:
        """A node scaled down to ``event.target``: forget it, send what waits for it there."""
        cluster = self.cluster
        departed, target = event.node_id, event.target
        if event.client_ids and target == cluster.node_id:
            adopt_client_ids(cluster, event)  # (in every frame: a large set takes several)
        if departed == cluster.node_id or departed in cluster.scaled_down:
            return  # heard already
        cluster.scaled_down[departed] = target
        known = cluster.topology.members.get(departed)
        cluster.departures.add(event, known.version if known is not None else 0)
        self._save_departures()
        # Pass it on, like topology: a node whose link to the departed one was down at the
        # time hears it from the others (the clients' duplicate ids are the target's only).
        relayed = replace(event, client_ids=())
        for link in cluster.links():
            if (
                link is not source
                and link.established is not None
                and link.peer_node_id != departed
            ):
                link.send(relayed)
        log.info(
            "cluster %s: node %s scaled down to %s: its bindings go, and what waits for it "
            "goes there",
            cluster.name,
            departed,
            "this node" if target == cluster.node_id else f"node {target}",
        )
        self.exchange.forget_node(departed)
        self._take_over(departed, target, event.received)

    def _take_over(self, departed: str, target: str, received: Iterable[str] = ()) -> None:
        cluster = self.cluster
        if cluster.nursery is None or departed in cluster.taking_over:
            return
        cluster.taking_over.add(departed)

        async def run() -> None:
            try:
                await take_over(cluster, departed, target, received)
            finally:
                cluster.taking_over.discard(departed)

        cluster.nursery.start_soon(run)

    def _save_departures(self) -> None:
        if self.cluster.nursery is not None:
            self.cluster.nursery.start_soon(self.cluster.departures.save)

    def replay_departures(self, link: Link) -> None:
        """A new link: tell its peer which nodes scaled down (it may have been away)."""
        for frame in self.cluster.departures.replay(link.peer_node_id):
            link.send(frame)

    def resume_take_overs(self, peer: str) -> None:
        """A link to ``peer`` is up: a backlog for a node that scaled down to ``peer`` that
        stayed here for want of a way there (:func:`.take_over._stranded`) goes now."""
        cluster = self.cluster
        for departed, target in list(cluster.scaled_down.items()):
            route = cluster.routes.get(departed)
            if target == peer and route is not None and route.sf_queue.message_count:
                self._take_over(departed, target)

    def announce_scale_down(self, target: str | None) -> None:
        """Tell every neighbour this node is scaling down, and to which node ("" for none
        yet): nodes scaling down at the same time break ties with it (:mod:`.targets`)."""
        cluster = self.cluster
        if cluster.local.scaling_down_to == (target or ""):
            return
        cluster.local = replace(
            cluster.local, version=cluster.local.version + 1, scaling_down_to=target or ""
        )
        cluster.topology.local = cluster.local
        cluster.topology.members[cluster.node_id] = cluster.local
        update = wire.Topology(members=(cluster.local,))
        for link in cluster.links():
            link.send(update)


def _state(member: Member) -> str:
    if not member.up:
        return "leaving"
    if member.scaling_down_to is None:
        return "up"
    return f"scaling down to node {member.scaling_down_to or '(none yet)'}"
