"""The JSON shapes of the management API (docs/management.md "HTTP API"): cheap reads of the
node's state, made on the loop between other work (no I/O, nothing that grows with the
number of messages except a browse, which is bounded by its limit)."""

from __future__ import annotations

import base64
import time
from itertools import islice
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict

from artemis_py.broker.message import MessageReference
from artemis_py.broker.queue import Queue
from artemis_py.broker.routing import Address, is_internal
from artemis_py.cluster.cluster_connection import ClusterConnection
from artemis_py.cluster.topology import connector
from artemis_py.config import AcceptorConfig, DivertConfig
from artemis_py.ha import ReplicationBackup, ReplicationPrimary
from artemis_py.sessions.stomp import StompSession

if TYPE_CHECKING:
    from artemis_py.ha import PairSide
    from artemis_py.node import Node

BODY_CHARS = 1024  # of a browsed message's body


class ClientConnection(Protocol):
    """What the views read of a client connection (a STOMP connection's shell): its
    session, who it is and what it counted."""

    @property
    def id(self) -> str: ...
    @property
    def peer(self) -> str: ...
    @property
    def created(self) -> float: ...
    @property
    def session(self) -> StompSession: ...
    @property
    def frames_in(self) -> int: ...
    @property
    def frames_out(self) -> int: ...


def acceptor_view(acceptor: AcceptorConfig, listening: list[str]) -> dict[str, Any]:
    """An acceptor as ``/api/node`` shows it, with the addresses it ``listening`` on."""
    return {
        "name": acceptor.name,
        # Not the URL as written: its parameters may hold key store passwords.
        "url": f"tcp://{','.join(acceptor.hosts)}:{acceptor.port}",
        "listening": listening,
        "protocols": sorted(acceptor.protocols) if acceptor.protocols is not None else None,
        "tls": acceptor.tls.enabled,
    }


def node_view(node: Node) -> dict[str, Any]:
    from artemis_py import __version__

    config = node.config
    return {
        "name": config.name or "artemis-py",
        "node_id": node.node_id,
        "version": __version__,
        "uptime_seconds": round(time.monotonic() - node.started, 3),
        "acceptors": [
            acceptor_view(a, [f"{h}:{p}" for h, p in node.addresses(a.name)])
            for a in config.acceptors
        ],
        "web": node.web_url,
        "security_enabled": config.security_enabled,
        "persistence_enabled": config.persistence_enabled,
        "disk": disk_view(node),
        "ha": ha_view(node),
    }


class LagView(TypedDict):
    """One journal's lag behind the backup (:meth:`ReplicationPrimary.lag`)."""

    tickets: int
    pending_bytes: int


class HaView(TypedDict):
    """``ha`` of ``/api/node`` and ``/api/cluster`` (docs/management.md)."""

    policy: str
    role: str
    state: str
    replication: NotRequired[str]  # replication only: where its copy stands
    backup: NotRequired[str | None]  # a replication primary's backup, while one is attached
    lag: NotRequired[dict[str, LagView]]  # a replication primary's, by journal
    primary: NotRequired[str | None]  # the primary a replication backup replicates


def ha_view(node: Node) -> HaView:
    """The node's high-availability side (docs/high-availability.md): its policy, its role
    in a pair and its state. The API serves only a live node: a waiting backup opens no
    port, this one included."""
    side = node.ha
    if side is None:
        return {"policy": "primary-only", "role": "primary", "state": "live"}
    return ha_side_view(side)


def ha_side_view(side: PairSide) -> HaView:
    """A pair side's policy, role and state, and for replication where its copy stands
    (``no backup``, ``synchronizing``, ``in sync``; a backup ``looking for its primary``),
    its peer and, on the primary, how far the backup is behind."""
    view: HaView = {"policy": side.policy, "role": side.role, "state": side.status}
    if isinstance(side, ReplicationPrimary):
        view["replication"] = side.replication
        view["backup"] = side.backup
        view["lag"] = {
            lag.journal: {"tickets": lag.tickets, "pending_bytes": lag.pending_bytes}
            for lag in side.lag()
        }
    elif isinstance(side, ReplicationBackup):
        view["replication"] = side.replication
        view["primary"] = side.primary
    return view


def disk_view(node: Node) -> dict[str, Any]:
    """The disk under the data directories, as the last scan found it (docs/disk.md)."""
    disk = node.broker.paging.disk
    usage = disk.usage
    return {
        "watched": disk.watched,
        "full": disk.full,
        "limit": disk.limit_text() if disk.watched else None,
        "directory": usage.directory if usage is not None else None,
        "usage": round(usage.used, 4) if usage is not None else None,
        "usable_bytes": usage.usable if usage is not None else None,
        "total_bytes": usage.total if usage is not None else None,
    }


def address_view(node: Node, address: Address) -> dict[str, Any]:
    paging = node.broker.paging.addresses.get(address.name)
    return {
        "name": address.name,
        "routing_types": sorted(rt.name for rt in address.routing_types),
        "queues": [q.name for q in address.queues],
        "diverts": [d.name for d in node.config.diverts if d.address == address.name],
        "size_bytes": paging.size if paging is not None else 0,
        "paging": bool(paging is not None and paging.paging),
        "auto_created": address.auto_created,
        "internal": is_internal(address.name),
    }


def divert_view(divert: DivertConfig) -> dict[str, Any]:
    """A divert as broker.xml declares it (read-only: diverts live in broker.xml)."""
    return {
        "name": divert.name,
        "address": divert.address,
        "forwarding_address": ", ".join(divert.forwarding_addresses),
        "exclusive": divert.exclusive,
        "filter": divert.filter,
        "routing_name": divert.routing_name,
        "routing_type": divert.routing_type.name,
    }


def queue_view(queue: Queue) -> dict[str, Any]:
    return {
        "name": queue.name,
        "address": queue.address,
        "routing_type": queue.routing_type.name,
        "durable": queue.durable,
        "filter": queue.filter.text if queue.filter is not None else None,
        "consumers": queue.consumer_count,
        "messages": queue.message_count,
        "delivering": queue.delivering,
        "added": queue.messages_added,
        "acknowledged": queue.messages_acknowledged,
        "expired": queue.messages_expired,
        "killed": queue.messages_killed,
        "paused": queue.paused,
        "max_consumers": queue.max_consumers,
        "auto_created": queue.auto_created,
        "temporary": queue.temporary,
        "paged": queue.paged,
        "internal": is_internal(queue.name),
        # The address model (docs/queues.md): what is held, and how the queue dispatches.
        "scheduled": len(queue.scheduled),
        "replaced": queue.messages_replaced,
        "exclusive": queue.rules is not None and queue.rules.exclusive,
        "groups": queue.rules.group_count() if queue.rules is not None else 0,
        "last_value_key": queue.last_values.key if queue.last_values is not None else None,
        "non_destructive": queue.non_destructive,
    }


def message_view(ref: MessageReference) -> dict[str, Any]:
    message = ref.message
    view: dict[str, Any] = {
        "message_id": message.message_id,
        "destination": message.address,
        "priority": message.priority,
        "persistent": message.durable,
        "size": message.size,
        "timestamp": message.timestamp,
        "expiration": message.expiration,
        "redelivered": ref.delivery_count > 0,
        "headers": dict(message.user_properties()),
    }
    if message.body_ref is not None and not message.body:
        view["body"] = None  # a large message: its body is in a file, not read here
        view["body_encoding"] = "file"
        return view
    body = bytes(message.body)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        view["body"] = base64.b64encode(body[:BODY_CHARS]).decode("ascii")
        view["body_encoding"] = "base64"
    else:
        view["body"] = text[:BODY_CHARS]
        view["body_encoding"] = "text"
    view["body_truncated"] = len(body) > BODY_CHARS
    return view


def browse(queue: Queue, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` messages ready in the queue, without consuming them."""
    return [message_view(ref) for ref in islice(queue.messages, limit)]


def consumers_view(node: Node) -> list[dict[str, Any]]:
    found = []
    for connection in node.clients.connections:
        for sub in list(connection.session.subscriptions.values()):
            queue = sub.queue
            found.append(
                {
                    "id": sub.id,
                    "connection_id": connection.id,
                    "queue": queue.name,
                    "address": queue.address,
                    "destination": sub.destination,
                    "ack_mode": sub.ack_mode,
                    "selector": sub.selector.text if sub.selector is not None else None,
                    "delivering": len(sub.in_flight),
                    "acknowledged": sub.acknowledged,
                }
            )
    return found


def connection_view(connection: ClientConnection) -> dict[str, Any]:
    session = connection.session
    return {
        "id": connection.id,
        "remote_address": connection.peer,
        "protocol": "STOMP",
        "version": session.version,
        "user": session.subject.user,  # (known with security enabled)
        "client_id": session.client_id,
        "created": connection.created,
        "sessions": 1,
        "consumers": len(session.subscriptions),
        "frames_in": connection.frames_in,
        "frames_out": connection.frames_out,
    }


def _member_state(cluster: ClusterConnection, node_id: str, up: bool) -> str:
    route = cluster.routes.get(node_id)
    if not up or cluster.departed(node_id):
        return "down"
    if route is not None and route.connected:
        return "up"
    return "connecting"


def _redistributed(cluster: ClusterConnection, sf_queue: str) -> int:
    """Messages redistribution moved toward one neighbour (its store-and-forward queue)."""
    moved_to: dict[str, int] = getattr(cluster.redistributor, "moved_to", {})
    return moved_to.get(sf_queue, 0)


def bridge_view(cluster: ClusterConnection, node_id: str) -> dict[str, Any]:
    route = cluster.routes.get(node_id)
    bridge = cluster.bridges.get(node_id)
    connected = route is not None and route.connected
    return {
        "connected": connected,
        "store_and_forward_queue": route.sf_queue.name if route is not None else None,
        "store_and_forward_depth": route.sf_queue.message_count if route is not None else 0,
        "in_flight": len(bridge.in_flight) if bridge is not None and connected else 0,
        "forwarded": bridge.forwarded if bridge is not None else 0,
        "redistributed": _redistributed(cluster, route.sf_queue.name) if route is not None else 0,
    }


def cluster_view(node: Node) -> dict[str, Any]:
    return {
        "node": {
            "node_id": node.node_id,
            "name": node.config.name or "artemis-py",
            "ha": ha_view(node),
        },
        "cluster_connections": [
            {
                "name": cluster.name,
                "address": cluster.config.address,
                "message_load_balancing": cluster.config.message_load_balancing.value,
                "max_hops": cluster.config.max_hops,
                "connector": connector(cluster.local),
                "members": members_view(cluster),
            }
            for cluster in node.cluster_connections
        ],
    }


def members_view(cluster: ClusterConnection) -> list[dict[str, Any]]:
    """The nodes of ``cluster``: this node first (``"self": true``, no bridge), then every
    other node it knows, with its link to each. As ``cluster status FILE`` counts them and
    as Artemis's topology lists them, this node is a member."""
    local = cluster.local
    members: list[dict[str, Any]] = [
        {
            "node_id": cluster.node_id,
            "name": local.name or connector(local),
            "connector": connector(local),
            "self": True,
            "state": "up",
            "bridge": None,
        }
    ]
    known = {m.node_id: m for m in cluster.topology.others()}
    for node_id in sorted(set(known) | set(cluster.routes)):
        member = known.get(node_id)
        members.append(
            {
                "node_id": node_id,
                # A node announces its <name>; one without (or from an older peer) is
                # named by its connector.
                "name": (member.name or connector(member)) if member is not None else node_id,
                "connector": connector(member) if member is not None else None,
                "self": False,
                "state": _member_state(cluster, node_id, member is not None and member.up),
                "bridge": bridge_view(cluster, node_id),
            }
        )
    return members


def stats_view(node: Node) -> dict[str, Any]:
    """A cheap snapshot for the console's live charts."""
    return {
        "time": time.time(),
        "queues": {
            q.name: {
                "messages": q.message_count,
                "added": q.messages_added,
                "acknowledged": q.messages_acknowledged,
            }
            for q in node.broker.queues()
        },
        "connections": len(node.clients.connections),
        "cluster": {
            cluster.name: {
                m["node_id"]: m["bridge"] for m in members_view(cluster) if not m["self"]
            }
            for cluster in node.cluster_connections
        },
    }
