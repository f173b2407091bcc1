"""The node a scale-down moves to, and the tie-break between nodes that scale down at once.

Theory of operation
-------------------
A node scaling down announces it in its topology member (``scaling_down_to``: ``""`` at
first, then its target), so every neighbour knows who is scaling down and where to.

* A node never picks a node that has scaled down (whose ``Leaving`` it heard).
* It picks a node that is scaling down itself only if that node has the higher node ID
  (compared as strings). Among the nodes scaling down, moves therefore always go to a
  higher ID, and no two nodes (no cycle of nodes) can wait for each other: of two nodes
  that picked each other, the lower keeps its scale-down and the higher picks again.
* Without ``<connectors>``, nodes that are not scaling down come first (lowest ID first),
  then the allowed ones that are. With connectors, their order is kept and a connector
  that is not allowed is skipped.
* A node that others are scaling down to waits for them before it announces its own
  departure (:func:`wait_for_senders`): until their links to it are closed and what waited
  for them here has been taken over. Their last messages then reach it, and it moves them
  on with its own (or keeps them, when it has no target left: the last node).

A node whose target turns out not to be allowed while it moves (the target announced its
own scale-down and has the lower ID, or it has scaled down) gets :class:`Retarget` and
picks again. What it moved there already is not lost: the target moves it on, or it comes
back here when the target scales down to this node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from artemis_py.cluster.moves import LINK_GRACE, until

if TYPE_CHECKING:
    from artemis_py.cluster.cluster_connection import ClusterConnection


class Retarget(Exception):
    """The target is no longer one to scale down to (the message says why)."""


def linked(connection: ClusterConnection, node_id: str) -> bool:
    route = connection.routes.get(node_id)
    return (
        node_id in connection.outgoing
        and route is not None
        and route.connected
        and node_id not in connection.scaled_down
    )


def scaling(connection: ClusterConnection, node_id: str) -> bool:
    """Whether ``node_id`` announced that it is scaling down."""
    member = connection.topology.members.get(node_id)
    return member is not None and member.scaling_down_to is not None


def forbidden(connection: ClusterConnection, node_id: str) -> bool:
    """Whether this node may not scale down to ``node_id``: it has scaled down, or it is
    scaling down and has the lower node ID (the tie-break)."""
    if node_id in connection.scaled_down:
        return True
    return scaling(connection, node_id) and node_id < connection.node_id


def check(connection: ClusterConnection, target: str) -> None:
    """Raise :class:`Retarget` when ``target`` is no longer allowed (unless this node has
    told the others it goes there: they send there too, and the target waits for it)."""
    if connection.scale_down_committed == target or not forbidden(connection, target):
        return
    if target in connection.scaled_down:
        raise Retarget(f"node {target} scaled down to {connection.scaled_down[target]}")
    raise Retarget(f"node {target} is scaling down too, and has the lower node ID")


def _group_ok(connection: ClusterConnection, node_id: str) -> bool:
    group = connection.local.group_name
    return group is None or connection.topology.members[node_id].group_name == group


def _member_left(connection: ClusterConnection, host: str, port: int) -> bool:
    return any((m.host, m.port) == (host, port) and not m.up for m in connection.topology.others())


def _member_at(connection: ClusterConnection, host: str, port: int) -> str | None:
    for member in connection.topology.others():
        if (member.host, member.port) == (host, port) and member.up:
            return member.node_id
    return None


async def _target_connectors(connection: ClusterConnection) -> list[tuple[str, int]]:
    """The scale-down connectors: configured, or the discovered members' (as the topology
    knows them, so that they match its members; a DNS_PING member by its address, which
    :func:`_node_at` matches)."""
    group = connection.scale_down_discovery
    if group is None:
        return connection.scale_down_connectors
    await group.initial_wait()
    found = []
    for discovered in group.membership.members():
        member = connection.topology.members.get(discovered.node_id or "")
        found.append((member.host, member.port) if member else discovered.connectors[0])
    return found


def _node_at(connection: ClusterConnection, host: str, port: int) -> str | None:
    """The live member at host:port: the one whose connector it is, or else the node that
    answered a link dialled there. DNS_PING knows members by address only; when their
    connectors name hosts (a pod's DNS name), the link's handshake is what says which
    member an address is (robust where resolving the names could differ or lag)."""
    node = _member_at(connection, host, port)
    if node is not None:
        return node
    node = connection.dials.node_at.get((host, port))
    member = connection.topology.members.get(node or "")
    return node if member is not None and member.up else None


async def choose_target(connection: ClusterConnection) -> str | None:
    """The node to scale down to, or None when none is reachable within the grace time."""
    connectors = await _target_connectors(connection)
    for host, port in connectors:
        if _node_at(connection, host, port) not in connection.outgoing:
            connection.dial(host, port)
    deadline = trio.current_time() + LINK_GRACE
    while True:
        if connectors:
            for host, port in connectors:
                node = _node_at(connection, host, port)
                if node is not None and forbidden(connection, node):
                    continue  # scaled down, or scaling down with the lower ID
                if node is not None and linked(connection, node):
                    if _group_ok(connection, node):
                        return node
                    continue  # another group
                # A connector not linked yet gets the grace time to answer before a later
                # one is taken, unless it is known down.
                known_down = (host, port) in connection.dials.unreachable or (
                    node is None and _member_left(connection, host, port)
                )
                if not known_down and trio.current_time() < deadline:
                    break
            else:
                return None
        else:
            possible = [
                m.node_id
                for m in connection.topology.others()
                if m.up
                and not forbidden(connection, m.node_id)
                and _group_ok(connection, m.node_id)
            ]
            candidates = sorted(
                (n for n in possible if linked(connection, n)),
                key=lambda n: (scaling(connection, n), n),
            )
            if candidates:
                return candidates[0]
            if not possible:
                return None  # nobody else runs, or nobody this node may move to
        if trio.current_time() >= deadline:
            return None
        await trio.sleep(0.05)


def _senders(connection: ClusterConnection) -> list[str]:
    """The nodes scaling down to this one (or that may still pick it) that are not done:
    still linked either way, or their backlog here still being taken over."""
    me = connection.node_id
    incoming = {
        link.established.peer_node_id
        for link in connection.incoming
        if link.established is not None
    }
    return [
        m.node_id
        for m in connection.topology.others()
        # undecided ones with a lower ID may still pick this node
        if (m.scaling_down_to == me or (m.scaling_down_to == "" and m.node_id < me))
        and (
            m.node_id in connection.outgoing
            or m.node_id in incoming
            or m.node_id in connection.taking_over
        )
    ]


async def wait_for_senders(connection: ClusterConnection, target: str | None) -> bool:
    """Wait until no node is scaling down to this one any more (see the module docstring);
    True when there were some. Raises :class:`Retarget` if ``target`` stops being allowed
    meanwhile."""
    if not _senders(connection):
        return False

    def done() -> bool:
        if target is not None and forbidden(connection, target):
            return True
        return not _senders(connection)

    while not await until(done, LINK_GRACE):
        pass  # they are still linked: still moving (each has its own stall limits)
    if target is not None:
        check(connection, target)
    return True
