"""The one dispatcher of a cluster connection's links, both directions.

Theory of operation
-------------------
Each link, whichever node dialled it, is served the same way: the Trio shell
(:class:`~artemis_py.transport.link.Link`) reads frames, a
:class:`~artemis_py.protocol.cluster.link_state.LinkState` says what each one asks for, and
:class:`Dispatcher` carries out those actions here, in one place: news goes to the
membership (:mod:`.membership`: topology, departures), to the binding exchange (bindings,
consumers), to the grouping handler (:mod:`.grouping`: proposals and decisions) or to the
target's side of a scale-down (queues to create, sealed streams); a
Confirm acknowledges what the bridge sent; a run of forwarded messages is stored with one
journal submit; a Confirm goes back once runs are durable.

What differs between the directions is what a link carries when it comes up:

* *outgoing* (this node dialled it, :mod:`.dialler`): a :class:`~.bridge.Bridge` drains the
  neighbour's store-and-forward queue over it; this node sends its topology and the
  departures it remembers, and a backlog stranded for the neighbour goes now;
* *incoming* (another node dialled it, :mod:`.incoming`): this node sends its topology, its
  bindings (:meth:`.BindingExchange.snapshot`) and the departures it remembers, and stores
  what the other node's bridge forwards.

Forwarded messages are stored in runs (one journal submit each), completed in order by the
link's confirm task (the Trio shell :mod:`artemis_py.transport.confirmations`), and
confirmed cumulatively once durable, so the sender acknowledges them only when they cannot
be lost here. The duplicate ids stored with them make a resend after a broken link harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import trio

from artemis_py.cluster.bridge import Bridge
from artemis_py.cluster.forwarded import receive_run
from artemis_py.cluster.scale_down_streams import seal_streams
from artemis_py.cluster.take_over import create_queues
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster.link_state import (
    Acknowledge,
    Action,
    Apply,
    LinkState,
    News,
    Send,
    Store,
)
from artemis_py.transport.confirmations import Confirmations

if TYPE_CHECKING:
    from artemis_py.cluster.binding_exchange import BindingExchange
    from artemis_py.cluster.membership import Membership
    from artemis_py.cluster.state import ClusterState
    from artemis_py.transport.link import Link

log = logging.getLogger("artemis_py.cluster")


class Served:
    """One link being served: its state object and what its actions act on."""

    def __init__(
        self,
        link: Link,
        *,
        bridge: Bridge | None = None,
        confirmations: Confirmations | None = None,
    ) -> None:
        self.link = link
        self.state = LinkState()
        self.bridge = bridge  # outgoing: what a Confirm acknowledges
        self.confirmations = confirmations  # incoming: stored runs, to the confirm task


class Dispatcher:
    """Serves a cluster connection's links and carries out what their frames ask for."""

    def __init__(
        self, cluster: ClusterState, membership: Membership, exchange: BindingExchange
    ) -> None:
        self.cluster = cluster
        self.membership = membership
        self.exchange = exchange

    # -- the actions -------------------------------------------------------------------

    def handle(self, served: Served, event: object) -> Awaitable[None] | None:
        """A frame from the peer: what it asks for, carried out."""
        actions = served.state.receive(event)
        if not actions and not isinstance(event, wire.Message):
            log.debug("cluster %s: ignoring %r from %s", self.cluster.name, event, served.link.peer)
        return self.perform(served, actions)

    def perform(self, served: Served, actions: Sequence[Action]) -> Awaitable[None] | None:
        """Carry out ``actions`` in order; the awaitable, if any, finishes them."""
        for i, action in enumerate(actions):
            pending = self._do(served, action)
            if pending is not None:
                return _then(pending, partial(self.perform, served, actions[i + 1 :]))
        return None

    def _do(self, served: Served, action: Action) -> Awaitable[None] | None:
        if isinstance(action, Store):
            return self._store(served, action)
        if isinstance(action, Acknowledge):
            if served.bridge is not None:
                served.bridge.confirmed(action.seq)
        elif isinstance(action, Send):
            served.link.send(action.frame)
        elif isinstance(action, Apply):
            return self.apply(action.news, served.link)
        return None

    def apply(self, news: News, link: Link) -> Awaitable[None] | None:
        """News from the peer at the other end of ``link``."""
        cluster = self.cluster
        if isinstance(news, wire.Topology):
            self.membership.apply_topology(news, link)
        elif isinstance(news, wire.Leaving):
            self.membership.neighbour_scaled_down(news, link)
        elif isinstance(news, wire.Bindings):
            self.exchange.apply_bindings(link.peer_node_id, news)
        elif isinstance(news, wire.Consumers):
            self.exchange.apply_consumers(link.peer_node_id, news)
        elif isinstance(news, wire.CreateQueues):
            create_queues(cluster, news, link.peer)
        elif isinstance(news, (wire.Proposal, wire.ProposalResponse, wire.Unproposal)):
            if cluster.grouping is not None:  # (a node without a handler ignores them)
                cluster.grouping.receive(news, link)
        else:
            return seal_streams(cluster, news, link.peer)
        return None

    def _store(self, served: Served, action: Store) -> Awaitable[None] | None:
        """Store a run of forwarded messages; the awaitable waits for room in the pipeline.
        Duplicate ids are checked and remembered here, so a run the link never stored (it
        broke) leaves no trace and its messages are taken when resent."""
        assert served.confirmations is not None  # (the codec takes messages on incoming links)
        pending = receive_run(self.cluster.broker, action.messages)
        if pending.tickets:  # a run of non-durable messages or duplicates waits for nothing
            self.cluster.last_forwarded = pending.tickets
        return served.confirmations.stored(pending, action.last_seq)

    # -- outgoing links ----------------------------------------------------------------

    async def serve_outgoing(self, link: Link) -> str:
        """Run the bridge over a link this node dialled until it ends; returns why."""
        cluster = self.cluster
        peer = link.peer_node_id
        cluster.outgoing[peer] = link
        route = cluster.route_to(peer)
        route.connected = True
        link.send(wire.Topology(members=(cluster.local, *cluster.topology.others())))
        self.membership.replay_departures(link)
        bridge = Bridge(
            cluster.broker,
            route.sf_queue,
            link.send,
            lambda: link.writable,
            cluster.config.producer_window_size,
        )
        previous = cluster.bridges.get(peer)
        if previous is not None:  # a count of the neighbour's, not of one link (metrics)
            bridge.forwarded = previous.forwarded
        cluster.bridges[peer] = bridge
        queue = route.sf_queue
        link.on_writable = lambda: queue.deliver() if queue.messages else None
        log.info(
            "cluster %s: bridge to node %s at %s up (%d message(s) waiting)",
            cluster.name,
            peer,
            link.peer,
            queue.message_count,
        )
        bridge.attach()
        self.membership.resume_take_overs(peer)
        if cluster.grouping is not None:
            cluster.grouping.link_up(link)
        served = Served(link, bridge=bridge)
        try:
            return await link.serve(lambda event: self.handle(served, event))
        finally:
            bridge.detach()
            route.connected = False
            if cluster.outgoing.get(peer) is link:
                del cluster.outgoing[peer]

    # -- incoming links ----------------------------------------------------------------

    async def serve_incoming(self, link: Link, peer: str) -> None:
        """Serve a link another node dialled until it ends."""
        cluster = self.cluster
        cluster.incoming.add(link)
        link.send(wire.Topology(members=tuple(cluster.topology.members.values())))
        link.send(self.exchange.snapshot(link))
        self.membership.replay_departures(link)
        if cluster.grouping is not None:
            cluster.grouping.link_up(link)
        served = Served(link)
        confirmations = Confirmations(link, served.state, cluster.name)
        served.confirmations = confirmations
        link.before_read = lambda: self.perform(served, served.state.caught_up())
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(confirmations.run)
                async with confirmations:
                    reason = await link.serve(lambda event: self.handle(served, event))
            log.info(
                "cluster %s: link from node %s at %s closed: %s",
                cluster.name,
                link.peer_node_id,
                peer,
                reason,
            )
        finally:
            cluster.incoming.discard(link)


async def _then(first: Awaitable[None], then: Callable[[], Awaitable[None] | None]) -> None:
    await first
    result = then()
    if result is not None:
        await result
