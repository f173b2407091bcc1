"""Scale-down: a node that stops gracefully hands every message it holds to another node
(clusters §8.3), and the nodes that stay take over what was waiting for it.

The departing node
------------------
:func:`scale_down` runs after the node has closed its client connections, so that every
delivered but unacknowledged message is back in its queue.

A node in several clusters scales down in each, one after the other: each cluster
connection moves the queues of the addresses it covers (the first one also those that none
covers) to a member of its own cluster, and says goodbye on its own links.

1. *Target.* The node announces that it is scaling down (and later to which node), then
   picks the first of ``<scale-down><connectors>`` that it has a link to, in order
   (connectors it has no link to are dialled first); with a ``<discovery-group-ref>`` the
   same, among the members the group knows (after its ``initial-wait-timeout``), in node-id
   order; without either (or with nobody discovered), the live member with the lowest node
   ID. With a ``group-name``, only members announcing the same group qualify. Nodes scaling
   down at once break ties by node ID (:mod:`.targets`): a node whose target turns out to be
   ruled out picks again, and a node that others scale down to waits for them before its
   own step 5.
2. *Queues.* A ``CreateQueues`` frame asks the target for each of the node's queues that it
   lacks (same address, routing type, filter and durability; temporary queues are not
   moved), and the node waits until the target's bindings show them. A queue whose name
   the target has on another address is not moved: the report names both addresses.
3. *Drain.* Messages waiting for other reachable neighbours are theirs: the bridges deliver
   them before the move.
4. *Move.* Every message of every queue (durable subscriptions, dead-letter and expiry
   queues included) goes into the target's store-and-forward queue, naming the same queue
   over there, at the back of it as if newly sent. Messages waiting for a neighbour that is
   unreachable go to the target too, naming that neighbour's binding (``q@node``), so the
   target forwards them when it can. Each batch of ``commit-interval`` messages is one
   journal transaction (the same move redistribution makes): after a crash every message
   is in exactly one of the two places.
5. *Announce.* A ``Leaving`` frame on every link names the target and lists the duplicate
   ids of the forwarded messages this node has stored (see :func:`_receipts`). Neighbours
   stop sending to this node, wait for what they already sent to be confirmed, and close
   their links. The frames to the target also carry the duplicate ids this node's clients
   sent (``_AMQ_DUPL_ID``, per address; :mod:`.client_ids`), which the target adds to its
   own caches, so a client that resends to the target after the move is still detected
   (Artemis moves its duplicate-id caches too).
6. *Finish.* A last pass moves what arrived meanwhile, then the node waits until the
   target has confirmed everything it was sent.

If the node finds no target, or the target stops answering, what was not moved stays in
this node's journal (in its queues or the store-and-forward queue for the target); the
:class:`ScaleDownReport` says so, and the next graceful stop tries again.

:func:`~.take_over.take_over` (in :mod:`.take_over`) is what the nodes that stay do.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.adopted_streams import stamp
from artemis_py.broker.pending import durable
from artemis_py.broker.routing import is_internal
from artemis_py.cluster.client_ids import farewells
from artemis_py.cluster.moves import (
    DEFAULT_BATCH,
    LINK_GRACE,
    STALL_TIMEOUT,
    Mover,
    ScaleDownError,
    more_depaged,
    route_names,
    until,
)
from artemis_py.cluster.scale_down_streams import seal
from artemis_py.cluster.targets import (
    Retarget,
    check,
    choose_target,
    linked,
    wait_for_senders,
)
from artemis_py.exceptions import StorageError
from artemis_py.protocol import cluster as wire

if TYPE_CHECKING:
    from artemis_py.broker.queue import Queue
    from artemis_py.cluster.cluster_connection import ClusterConnection

log = logging.getLogger("artemis_py.cluster")


@dataclass
class ScaleDownReport:
    """What a scale-down did: where messages went, and what (if anything) was left."""

    target: str | None = None  # node id
    connector: str | None = None
    moved: Counter[str] = field(default_factory=Counter)  # what -> messages
    # queue -> (its address here, the address of the queue of that name on the target)
    clashes: dict[str, tuple[str, str]] = field(default_factory=dict)
    remaining: int = 0
    problem: str | None = None
    cluster: str | None = None  # named when the node is in several clusters

    @property
    def complete(self) -> bool:
        return self.problem is None

    def summary(self) -> str:
        prefix = "" if self.cluster is None else f"cluster {self.cluster}: "
        return prefix + self._summary()

    def _summary(self) -> str:
        if self.target is None:
            if self.complete:
                return "scale-down: no other node is reachable, and there is nothing to move"
            text = "scale-down"
        else:
            moved = sum(self.moved.values())
            details = ", ".join(f"{what}: {n}" for what, n in sorted(self.moved.items()))
            text = f"scale-down to node {self.target} at {self.connector}: moved {moved} message(s)"
            if details:
                text += f" ({details})"
            for name, (here, there) in sorted(self.clashes.items()):
                text += (
                    f"; ERROR: queue {name} is on address {here} here but on address "
                    f"{there} on node {self.target}: not moved"
                )
        if self.problem is not None:
            text += (
                f"; INCOMPLETE: {self.problem}. {self.remaining} message(s) stay in this "
                "node's journal: the next graceful stop moves them"
                + (" (once no name clashes)" if self.clashes else "")
                + ", or they are delivered when this node runs again"
            )
        return text


# -- the departing node ----------------------------------------------------------------


async def scale_down(connection: ClusterConnection, report: ScaleDownReport) -> None:
    """Move every message this node holds to another node (see the module docstring);
    ``report`` says how far it got, also when this is cancelled."""
    try:
        await _scale_down(connection, report)
    except trio.Cancelled:
        report.problem = "abandoned before it finished"
        raise
    finally:
        report.remaining = _held(connection)
        if report.clashes and report.problem is None:
            report.problem = "the target has a queue of the same name on another address"
        if report.remaining and report.problem is None:
            report.problem = "messages are left in " + ", ".join(
                f"{q.name} ({q.message_count})" for q in _holding(connection)
            )


async def _scale_down(connection: ClusterConnection, report: ScaleDownReport) -> None:
    redistributor = connection.redistributor
    if redistributor is not None:
        # Nothing moves behind our back; moves already under way land in their
        # store-and-forward queues first.
        redistributor.enabled = False
        await until(lambda: not redistributor.in_progress, STALL_TIMEOUT)
    connection.membership.announce_scale_down(None)
    target = await choose_target(connection)
    try:
        while True:
            connection.membership.announce_scale_down(target)
            if target is None and await wait_for_senders(connection, None):
                # Nodes moved here; the one this node lost a tie to may have left meanwhile.
                target = await choose_target(connection)
                connection.membership.announce_scale_down(target)
            if target is None:
                if _held(connection):
                    report.target = report.connector = None
                    report.problem = "no node to scale down to is reachable" + (
                        f" in group {connection.local.group_name!r}"
                        if connection.local.group_name
                        else ""
                    )
                return
            member = connection.topology.members[target]
            report.target = target
            report.connector = member_at = f"tcp://{member.host}:{member.port}"
            log.info(
                "cluster %s: scaling down to node %s at %s", connection.name, target, member_at
            )
            try:
                await _hand_over(connection, target, report)
                return
            except Retarget as exc:
                log.info(
                    "cluster %s: not scaling down to node %s after all: %s; choosing again",
                    connection.name,
                    target,
                    exc,
                )
            target = await choose_target(connection)
    except ScaleDownError as exc:
        report.problem = str(exc)


async def _hand_over(connection: ClusterConnection, target: str, report: ScaleDownReport) -> None:
    """Move everything to ``target``, say goodbye, move what came meanwhile, and wait
    until the target has confirmed it all. Raises :class:`Retarget` (before the goodbye
    only) or :class:`ScaleDownError`."""
    await _drain_other_bridges(connection, target)
    await _move_all(connection, target, report)
    # Nodes scaling down to this one first finish here (.targets): what they send is moved
    # on with the rest, and this node's Leaving would otherwise cut them off.
    if await wait_for_senders(connection, target):
        await _move_all(connection, target, report)
    farewell = wire.Leaving(
        node_id=connection.node_id, target=target, received=await _receipts(connection)
    )
    check(connection, target)
    connection.scale_down_committed = target
    to_target = farewells(farewell, connection.broker.client_duplicates.snapshot())
    for link in connection.links():
        to = link.established.peer_node_id if link.established is not None else None
        for frame in to_target if to == target else [farewell]:
            link.send(frame)
    # The others close their links once what they sent here is confirmed.
    await until(lambda: not connection.incoming, LINK_GRACE)
    # What arrived meanwhile: for other nodes (still linked from here), or for the queues.
    for _ in range(3):
        await _drain_other_bridges(connection, target)
        await _move_all(connection, target, report)
        await _wait_delivered(connection, target)
        if not _held(connection):
            seal(connection, target)
            break


def _usable(connection: ClusterConnection, target: str) -> None:
    """Raise unless this node can go on moving to ``target``: :class:`Retarget` when the
    tie-break or a departure rules it out, ScaleDownError when its link broke."""
    check(connection, target)
    if not linked(connection, target):
        raise ScaleDownError(f"the link to node {target} broke")


async def _receipts(connection: ClusterConnection) -> tuple[str, ...]:
    """The duplicate ids of the forwarded messages this node has stored, once durable.

    A neighbour may still hold some of those messages for this node: the link broke after
    this node stored them and before their confirmation reached the neighbour (which, with
    the link back, would send them again for the duplicate-id cache to drop). This node
    moves its copies to the target; were the neighbour to move its own there too, the
    target would get each twice, under two new ids. The Leaving frame therefore carries
    these ids, which stand in for the lost confirmations. Only durable ones may: a
    neighbour drops what is listed, so a crash here must not lose it.
    """
    received = tuple(dup_id.decode() for dup_id in connection.broker.duplicates if dup_id.isascii())
    try:
        await durable(connection.last_forwarded)
    except StorageError as exc:
        raise ScaleDownError(f"the journal failed: {exc}") from exc
    return received


def _movable(connection: ClusterConnection) -> list[Queue]:
    """The queues this connection moves (with several, each the queues of its addresses)."""
    return [
        q
        for q in connection.broker.queues()
        if not is_internal(q.name) and not q.temporary and connection.moves(q.address)
    ]


def _holding(connection: ClusterConnection) -> list[Queue]:
    """The queues (its own and store-and-forward) that still hold messages."""
    queues = _movable(connection) + [r.sf_queue for r in connection.routes.values()]
    return [q for q in queues if q.message_count]


def _held(connection: ClusterConnection) -> int:
    """Messages still on this node."""
    return sum(q.message_count for q in _holding(connection))


async def _create_queues(
    connection: ClusterConnection, target: str, report: ScaleDownReport
) -> set[str]:
    """Make sure the target has every queue to move; returns the names of those it has
    on the same address (the ones to move)."""
    has = connection.exchange.neighbour_queues.setdefault(target, {})
    missing = [q for q in _movable(connection) if q.name not in has]
    if missing:
        connection.outgoing[target].send(
            wire.CreateQueues(
                queues=tuple(
                    wire.NewQueue(
                        name=q.name,
                        address=q.address,
                        routing_type=q.routing_type.value,
                        filter=q.filter.text if q.filter is not None else None,
                        durable=q.durable,
                    )
                    for q in missing
                )
            )
        )
        await until(
            lambda: all(q.name in has for q in missing) or not linked(connection, target),
            LINK_GRACE,
        )
        _usable(connection, target)
        for q in missing:
            if q.name not in has:
                log.error(
                    "cluster %s: node %s did not create queue %s (address %s): its "
                    "messages stay here",
                    connection.name,
                    target,
                    q.name,
                    q.address,
                )
    return _same_address(connection, target, has, report)


def _same_address(
    connection: ClusterConnection, target: str, has: dict[str, str], report: ScaleDownReport
) -> set[str]:
    """The names of the queues to move: those the target has on the same address.

    A moved message names its queue, and the target puts it into the queue of that name.
    One there on another address is another queue (its consumers expect other messages),
    so a queue whose name the target uses on another address is not moved: its messages
    stay here and the report names both addresses (an empty one is only skipped).
    """
    names = set()
    for queue in _movable(connection):
        there = has.get(queue.name)
        if there == queue.address:
            names.add(queue.name)
        elif there is not None and queue.message_count and queue.name not in report.clashes:
            report.clashes[queue.name] = (queue.address, there)
            log.error(
                "cluster %s: queue %s is on address %s here but on address %s on node %s: "
                "its messages are not moved",
                connection.name,
                queue.name,
                queue.address,
                there,
                target,
            )
    return names


async def _drained(waiting: Callable[[], int], alive: Callable[[], bool]) -> bool:
    """Wait until ``waiting()`` is 0 (True); False once it has not changed for
    STALL_TIMEOUT or ``alive()`` turns false."""
    last, since = -1, trio.current_time()
    while count := waiting():
        now = trio.current_time()
        if not alive():
            return False
        if count != last:
            last, since = count, now
        elif now - since > STALL_TIMEOUT:
            return False
        await trio.sleep(0.02)
    return True


async def _drain_other_bridges(connection: ClusterConnection, target: str) -> None:
    """Let bridges to reachable neighbours deliver what waits for them. What a stalled one
    leaves moves to the target like an unreachable node's."""
    await _drained(
        lambda: sum(
            route.sf_queue.message_count
            for node_id, route in connection.routes.items()
            if node_id != target and linked(connection, node_id)
        ),
        lambda: True,
    )


async def _move_all(connection: ClusterConnection, target: str, report: ScaleDownReport) -> None:
    """One pass: every ready message of this node into the target's store-and-forward queue."""
    _usable(connection, target)
    has = await _create_queues(connection, target, report)
    sf_queue = connection.routes[target].sf_queue
    batch = connection.scale_down.commit_interval if connection.scale_down else -1
    mover = Mover(connection.broker, batch if batch > 0 else DEFAULT_BATCH)
    while True:
        for queue in _movable(connection):
            if queue.name in has:
                # (held ones too: each keeps its time over there, a redelivery delay's too)
                for ref in [*queue.messages, *queue.held()]:
                    if connection.scale_down_committed != target:
                        _usable(connection, target)  # (Retarget: what is moved stays moved)
                    if queue.marks or ref.stream is not None:  # read by offset: keep it
                        stamp(ref, connection.node_id)
                    await mover.add(ref, [(sf_queue, [queue.name])], queue.name)
        departed = [
            (node_id, route)
            for node_id, route in list(connection.routes.items())
            if node_id != target
            and not linked(connection, node_id)
            and node_id not in connection.taking_over  # take_over moves those
        ]
        for node_id, route in departed:
            what = f"waiting for node {node_id}"
            for ref in list(route.sf_queue.messages):
                names = [n if "@" in n else f"{n}@{node_id}" for n in route_names(ref, route)]
                await mover.add(ref, [(sf_queue, names)], what)
        await mover.flush()
        queues = [q for q in _movable(connection) if q.name in has]
        if not await more_depaged(queues + [r.sf_queue for _, r in departed]):
            break
    report.moved.update(mover.moved)


async def _wait_delivered(connection: ClusterConnection, target: str) -> None:
    """Wait until the target has confirmed everything in its store-and-forward queue."""
    queue = connection.routes[target].sf_queue
    if not await _drained(lambda: queue.message_count, lambda: linked(connection, target)):
        _usable(connection, target)
        raise ScaleDownError(f"node {target} confirmed nothing for {STALL_TIMEOUT:.0f} s")
