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

What the pieces share (the links, routes and bridges, the topology, the nodes that scaled
down) is a :class:`~.state.ClusterState`, which this class extends; it composes the pieces
and runs them: the dialler, the binding exchange, the membership (:mod:`.membership`:
topology announcements applied and passed on, a neighbour's scale-down handing its backlog
over) and the one dispatcher of both directions' links (:mod:`.dispatch`); a graceful stop
says goodbye on every link. The pieces depend on the state, never on this module.

A link that breaks is redialled per the retry settings; while a neighbour is unreachable its
bindings stay known but count as disconnected, so routing prefers connected nodes and
whatever was already routed to it waits in its store-and-forward queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.routing import NeighbourRoute
from artemis_py.cluster.binding_exchange import BindingExchange
from artemis_py.cluster.dialler import Connect, Dialler
from artemis_py.cluster.discovery.service import feed_dialler
from artemis_py.cluster.dispatch import Dispatcher
from artemis_py.cluster.membership import Membership
from artemis_py.cluster.redistributor import Redistributor
from artemis_py.cluster.state import ClusterState, owner
from artemis_py.cluster.store_and_forward import neighbour_of
from artemis_py.cluster.topology import connector, leaving
from artemis_py.protocol import cluster as wire

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker
    from artemis_py.config import BrokerConfig, ClusterConnectionConfig

__all__ = ["ClusterConnection", "owner"]

log = logging.getLogger("artemis_py.cluster")


class ClusterConnection(ClusterState):
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
        super().__init__(broker, config, node_config, instance_id=instance_id)
        self.dialler = Dialler(self, connect)
        self.exchange = BindingExchange(self)
        self.membership = Membership(self, self.exchange, self.dialler)
        self.dispatcher = Dispatcher(self, self.membership, self.exchange)
        self.dialler.serve = self.dispatcher.serve_outgoing

    # -- running -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Dial the static connectors and keep the links up until cancelled."""
        self._restore_routes()
        self.broker.add_binding_listener(self.exchange)
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                self.redistributor = Redistributor(
                    self.broker, self.config.message_load_balancing, nursery
                )
                for queue in self.broker.queues():
                    if self.owns(queue.address):
                        self.redistributor.watch(queue)
                for host, port in self.static_connectors:
                    if (host, port) != (self.local.host, self.local.port):
                        self.dialler.dial(host, port, static=True)
                if self.discovery is not None:
                    nursery.start_soon(feed_dialler, self, self.dialler, self.discovery)
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
            self.nursery = None
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
        self.dialler.dial(host, port, static=static, wanted=wanted)
