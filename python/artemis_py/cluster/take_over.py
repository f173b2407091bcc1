"""What the nodes that stay do when a neighbour scales down (clusters §8.3), and the
target's side of the move: the queues the departing node asks for.

:func:`take_over` runs on every neighbour that hears ``Leaving``: it stops routing to the
departed node (its bindings go), lets the bridge's messages in flight be confirmed, closes
the link, and moves what still waits in the departed node's store-and-forward queue (paged
or not) to the target (on the target itself: into the queues of the same names), then
deletes that queue. A message the ``Leaving`` frame lists as received is dropped instead:
the departed node stored it (only the confirmation was lost) and has moved it to the
target itself.

A neighbour with no link to the target (a chain with direct connections only: the
departing node dialled its target through its scale-down connector, this node never did)
makes no store-and-forward queue toward it, since no bridge would drain it: what waits for
the departed node stays in that node's queue here, and the log says so, until a link to
the target comes up (:meth:`.Membership.resume_take_overs`).

A node that was down when a neighbour scaled down hears of it from the others when it
returns (:mod:`.departures`), and takes over then.

:func:`create_queues` is the target's side: the queues the departing node asks for. A
name it already uses on another address is left alone; the departing node sees that clash
in this node's bindings and keeps that queue's messages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from artemis_py.broker.broker import BrokerError
from artemis_py.broker.filter import FilterSyntaxError
from artemis_py.cluster.bridge import duplicate_id
from artemis_py.cluster.moves import (
    DEFAULT_BATCH,
    LINK_GRACE,
    Mover,
    ScaleDownError,
    more_depaged,
    route_names,
    until,
)
from artemis_py.config import RoutingType
from artemis_py.exceptions import StorageError
from artemis_py.protocol import cluster as wire

if TYPE_CHECKING:
    from artemis_py.broker.message import MessageReference
    from artemis_py.broker.routing import Destination, NeighbourRoute
    from artemis_py.cluster.state import ClusterState

log = logging.getLogger("artemis_py.cluster")


async def take_over(
    connection: ClusterState, departed: str, target: str, received: Iterable[str] = ()
) -> None:
    """``departed`` scaled down to ``target``: send what waits for it there instead,
    except what it ``received`` already (see :func:`.scale_down._receipts`)."""
    link = connection.outgoing.get(departed)
    bridge = connection.bridges.get(departed)
    if link is not None and bridge is not None:
        bridge.pause()  # nothing new goes out; what is in flight gets confirmed
        await until(lambda: not bridge.in_flight or link.closing, LINK_GRACE)
        await link.goodbye(wire.Ping())
        await until(lambda: connection.outgoing.get(departed) is not link, LINK_GRACE)
    route = connection.routes.get(departed)
    if route is None:
        return
    sf_queue = None
    if target != connection.node_id:
        if not _has_way_to(connection, target):
            _stranded(connection, departed, target, route)
            await _forget_route(connection, departed, route)  # if nothing waits in it
            return
        sf_queue = connection.route_to(target).sf_queue

    def destinations(names: list[str]) -> list[Destination] | None:
        if sf_queue is None:  # this node is the target: the queues of those names here
            return connection.broker.resolve(names) or None
        return [(sf_queue, names)]

    have = {dup_id.encode() for dup_id in received}
    arrived = 0
    mover = Mover(connection.broker, DEFAULT_BATCH)
    try:
        while True:
            reached: list[MessageReference] = []
            for ref in list(route.sf_queue.messages):
                if duplicate_id(connection.node_id, ref.message.message_id) in have:
                    reached.append(ref)  # its confirmation was lost; the departed node moved it
                else:
                    await mover.add(ref, destinations(route_names(ref, route)), "")
            await mover.flush()
            await _discard(connection, reached)
            arrived += len(reached)
            if not await more_depaged([route.sf_queue]):
                break
    except ScaleDownError as exc:
        log.error(
            "cluster %s: cannot take over the messages that waited for node %s: %s",
            connection.name,
            departed,
            exc,
        )
        return
    moved = sum(mover.moved.values())
    if arrived:
        log.info(
            "cluster %s: %d message(s) that waited for node %s: %d had reached it before it "
            "left (not sent again), %d go to node %s",
            connection.name,
            moved + arrived,
            departed,
            arrived,
            moved,
            target,
        )
    elif moved:
        log.info(
            "cluster %s: %d message(s) that waited for node %s go to node %s",
            connection.name,
            moved,
            departed,
            target,
        )
    await _forget_route(connection, departed, route)


async def _forget_route(connection: ClusterState, departed: str, route: NeighbourRoute) -> None:
    """Delete the store-and-forward queue for ``departed`` once nothing waits in it."""
    if not route.sf_queue.message_count and connection.routes.get(departed) is route:
        del connection.routes[departed]
        connection.bridges.pop(departed, None)
        await connection.broker.delete_queue(route.sf_queue).settled()


def _has_way_to(connection: ClusterState, node_id: str) -> bool:
    """Whether this node has a route to ``node_id`` or keeps a link to it up (a bridge
    will drain a store-and-forward queue toward it)."""
    if node_id in connection.routes:
        return True
    member = connection.topology.members.get(node_id)
    return member is not None and (member.host, member.port) in connection.dials.dialling


def _stranded(connection: ClusterState, departed: str, target: str, route: NeighbourRoute) -> None:
    """``departed`` scaled down to a node this one has no link to (a chain, direct
    connections only). A store-and-forward queue toward the target would never be drained,
    so none is made: what waits for ``departed`` stays in its queue here (in the journal,
    not lost), delivered once this node links to ``departed`` again, or taken over once it
    links to ``target``."""
    waiting = route.sf_queue.message_count
    if not waiting:
        return
    log.error(
        "cluster %s: %d message(s) wait for node %s, which scaled down to node %s; this "
        "node has no link to node %s, so they stay in the store-and-forward queue for node "
        "%s and go there once this node links to it again (or to node %s once this node "
        "links to that)",
        connection.name,
        waiting,
        departed,
        target,
        target,
        departed,
        target,
    )


async def _discard(connection: ClusterState, refs: list[MessageReference]) -> None:
    """Drop ready references for good."""
    if not refs:
        return
    try:
        await connection.broker.discard(refs).settled()
    except StorageError as exc:
        raise ScaleDownError(f"the journal refused the acknowledgement: {exc}") from exc


def create_queues(connection: ClusterState, frame: wire.CreateQueues, peer: str) -> None:
    """A node scaling down to this one asks for the queues it is about to fill."""
    broker = connection.broker
    for spec in frame.queues:
        existing = broker.queue(spec.name)
        if existing is not None:
            if existing.address != spec.address:
                # The departing node sees the clash in this node's bindings and keeps
                # that queue's messages (see _same_address).
                log.warning(
                    "cluster %s: %s asked for queue %s on address %s, but it exists on "
                    "address %s here: that queue's messages stay on that node",
                    connection.name,
                    peer,
                    spec.name,
                    spec.address,
                    existing.address,
                )
            continue
        try:
            broker.create_queue(
                spec.name,
                spec.address,
                RoutingType(spec.routing_type),
                filter_text=spec.filter,
                durable=spec.durable,
            )
        except (BrokerError, FilterSyntaxError, StorageError) as exc:
            log.error(
                "cluster %s: cannot create queue %s for %s: %s",
                connection.name,
                spec.name,
                peer,
                exc,
            )
            continue
        log.info(
            "cluster %s: created queue %s (address %s, %s) for the node scaling down from %s",
            connection.name,
            spec.name,
            spec.address,
            spec.routing_type,
            peer,
        )
