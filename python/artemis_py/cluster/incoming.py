"""Links other nodes dialled: the handshake, and which cluster connection serves each.

Theory of operation
-------------------
A CORE acceptor hands each cluster connection to :meth:`LinkAcceptor.serve`. Its handshake
names the cluster connection it is for (a node may be in several clusters), whose
:class:`IncomingLinks` serve it. It is one of:

* ``artemis-py cluster status`` / ``cluster stop`` (an admin with the cluster credentials):
  answered with this node's status, and for ``stop`` the node then stops gracefully;
* a node with this node's own id: a copied data directory (refused, the log says how to
  fix it), or this node itself dialling its own connector (closed quietly);
* a link from another node: served by the cluster connection's dispatcher
  (:meth:`.dispatch.Dispatcher.serve_incoming`), which publishes this node's topology and
  bindings on it and stores the messages the other node's bridge forwards;
* a core bridge of another node (purpose ``"bridge"``, which names no cluster: a node in no
  cluster takes them too): served by :class:`~.bridge_target.BridgeTarget`. A node whose
  cluster password is Artemis's default refuses them, as it refuses to form a cluster.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import trio

from artemis_py.cluster.bridge_target import BridgeTarget
from artemis_py.cluster.retry import LogBackoff, unlogged
from artemis_py.cluster.status import status_report
from artemis_py.cluster.topology import connector
from artemis_py.config.defaults import CLUSTER_PASSWORD
from artemis_py.protocol import cluster as wire
from artemis_py.transport.link import Link, LinkError

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker
    from artemis_py.cluster.cluster_connection import ClusterConnection

log = logging.getLogger("artemis_py.cluster")

# Link timing before a cluster connection is known, and on bridge links (Artemis's client
# defaults: check-period 30 s; the bridge's own connection-ttl closes a silent link there).
_PING_INTERVAL = 30.0
_CALL_TIMEOUT = 30.0


class LinkAcceptor:
    """Serves the links other nodes (and admin commands) open to this node, each with the
    cluster connection its handshake names: a node may be in several clusters."""

    def __init__(
        self, clusters: Sequence[ClusterConnection], *, broker: Broker | None = None
    ) -> None:
        self.clusters = {cluster.name: cluster for cluster in clusters}
        self.served = {cluster.name: IncomingLinks(cluster) for cluster in clusters}
        first = clusters[0] if clusters else None
        broker = broker or (first.broker if first is not None else None)
        assert broker is not None, "a LinkAcceptor of no cluster needs the broker"
        self.broker = broker
        self.bridges = BridgeTarget(broker)
        # The node's settings are the same in all its clusters.
        self.instance_id = first.instance_id if first is not None else uuid.uuid4().hex
        self._refusals = LogBackoff()  # links refused in the handshake
        # A replicating primary's: serves the replication link of its backup (ha.replication).
        self.replication: Callable[[Link, wire.Established, str], Awaitable[None]] | None = None

    async def serve(self, stream: trio.abc.Stream, peer: str, initial: bytes) -> None:
        """Serve a link another node dialled (or a ``cluster status`` request)."""
        config = self.broker.config
        codec = wire.ServerConnection(
            node_id=self.broker.node_id,
            instance_id=self.instance_id,
            cluster_names=tuple(self.clusters),
            user=config.cluster_user,
            password=config.cluster_password,
            bridges_refused=(
                "this node takes no bridges: its cluster-password is Artemis's default"
                if config.cluster_password == CLUSTER_PASSWORD
                else None
            ),
        )
        clusters = self.clusters.values()
        ping, ttl = next(((c.ping_interval, c.ttl) for c in clusters), (_PING_INTERVAL, math.inf))
        link = Link(stream, codec, peer, ping_interval=ping, ttl=ttl)
        if initial:
            codec.receive_data(initial)
        try:
            with trio.fail_after(max((c.call_timeout for c in clusters), default=_CALL_TIMEOUT)):
                established = await link.handshake()
        except (LinkError, trio.TooSlowError) as exc:
            self._refused(peer, str(exc) or "handshake timed out (call-timeout)")
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            return
        if established.purpose == "bridge":
            link.ping_interval, link.ttl = _PING_INTERVAL, math.inf
            await self.bridges.serve(link, established, peer)
            return
        cluster = self.clusters[established.peer_cluster_name]
        if established.purpose == "replication":
            link.ping_interval, link.ttl = cluster.ping_interval, cluster.ttl
            if self.replication is None:
                await link.goodbye(wire.Error("this node is not a replicating primary"))
                return
            await self.replication(link, established, peer)
            return
        link.ping_interval, link.ttl = cluster.ping_interval, cluster.ttl
        await self.served[cluster.name].serve(link, established, peer)

    def _refused(self, peer: str, why: str) -> None:
        # A dialler refused for its credentials comes back at its retry rate, each time
        # from a new port: one episode per host and reason.
        quiet = self._refusals.occurred((peer.rpartition(":")[0], why), trio.current_time())
        if quiet is not None:
            log.warning("cluster link from %s refused: %s%s", peer, why, unlogged(quiet))


class IncomingLinks:
    """Serves one cluster connection's links that other nodes dialled."""

    def __init__(self, cluster: ClusterConnection) -> None:
        self.cluster = cluster

    async def serve(self, link: Link, established: wire.Established, peer: str) -> None:
        """Serve a link whose handshake named this cluster connection."""
        cluster = self.cluster
        if established.purpose == "status":
            await link.goodbye(wire.Status(data=status_report(cluster)))
        elif established.purpose == "stop":
            log.info("cluster %s: %s asked this node to stop", cluster.name, peer)
            await link.goodbye(wire.Status(data={**status_report(cluster), "stopping": True}))
            if cluster.on_stop_request is not None:
                cluster.on_stop_request()
        elif established.peer_node_id == cluster.node_id:
            await self._same_node_id(link, established, peer)
        else:
            await cluster.dispatcher.serve_incoming(link, peer)

    async def _same_node_id(self, link: Link, established: wire.Established, peer: str) -> None:
        cluster = self.cluster
        if established.peer_instance_id == cluster.instance_id:
            await link.goodbye(wire.Ping())  # this node dialled its own connector
            return
        host, port = established.peer_connector or ("?", 0)
        why = (
            f"the node at tcp://{host}:{port} (connecting from {peer}) has the same node ID "
            f"{cluster.node_id} as this node at {connector(cluster.local)}. Each node needs "
            "its own data directory: a copied one makes nodes indistinguishable. Give one of "
            "them a fresh data directory."
        )
        log.error("cluster %s: %s", cluster.name, why)
        await link.goodbye(wire.Error(reason=why))
