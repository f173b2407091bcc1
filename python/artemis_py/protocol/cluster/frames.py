"""Cluster-link frames and the other events a cluster ``Connection`` yields.

Every frame is a frozen dataclass with slots whose class attribute ``TYPE`` is its
:class:`FrameType` (the byte on the wire). Control frames travel as JSON objects whose keys
are the field names; :class:`Message` and :class:`Confirm`, the per-message hot path, have a
binary layout (see :mod:`.wire`), as have three of journal replication's frames
(:mod:`.replication`, re-exported here).

Who sends what (enforced by the connection, both when sending and when receiving):

* handshake: :class:`Hello` and :class:`Auth` (client), :class:`Challenge`,
  :class:`Welcome` and :class:`Reject` (server) -- produced and consumed by the connection
  itself, never passed to ``send()``;
* client only: :class:`Message`, :class:`CreateQueues`, :class:`Sealed`;
* server only: :class:`Confirm`, :class:`Bindings`, :class:`Consumers`, :class:`Status`;
* either side: :class:`Ping`, :class:`Topology`, :class:`Leaving`, :class:`Error`, and
  clustered grouping's :class:`Proposal`, :class:`ProposalResponse` and :class:`Unproposal`;
* on a link of purpose ``"replication"`` (a backup dialled its primary), and on no other:
  :class:`SyncFile`, :class:`SyncDone` and :class:`Records` from the server (the primary),
  :class:`Synced` and :class:`Replicated` from the client (the backup); besides them such a
  link carries Ping and Error only.
"""

from __future__ import annotations

import enum
from collections.abc import Sized
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, TypeAlias

from artemis_py.protocol.cluster.framing import FrameType
from artemis_py.protocol.cluster.replication import (
    Records,
    Replicated,
    SyncDone,
    Synced,
    SyncFile,
)

__all__ = [
    "NEED_DATA",
    "AddressIds",
    "Auth",
    "BindingInfo",
    "Bindings",
    "Challenge",
    "Confirm",
    "ConnectionClosed",
    "Consumers",
    "CreateQueues",
    "Error",
    "Established",
    "Event",
    "Frame",
    "FrameType",
    "Hello",
    "Leaving",
    "Member",
    "Message",
    "NewQueue",
    "Ping",
    "Proposal",
    "ProposalResponse",
    "Purpose",
    "Records",
    "Reject",
    "Replicated",
    "RoutingType",
    "Sentinel",
    "Status",
    "SyncDone",
    "SyncFile",
    "Synced",
    "Topology",
    "Unproposal",
    "Welcome",
]

Purpose: TypeAlias = Literal["link", "status", "stop", "bridge", "replication"]
"""Why a client connects: ``"link"`` (a cluster connection carrying messages and bindings) or
``"status"`` (the ``cluster status`` command: authenticate, read :class:`Status`, leave) or
``"stop"`` (the ``cluster stop`` command: the same, and the node then stops gracefully) or
``"bridge"`` (a core bridge of a node in no cluster with this one: it sends messages for
addresses here, and only Confirm comes back; ``cluster_name`` is then the bridge's name) or
``"replication"`` (a backup dialled its primary for journal replication, naming a cluster
connection of the primary: :mod:`.replication`)."""

RoutingType: TypeAlias = Literal["ANYCAST", "MULTICAST"]

_REPR_BYTES = 32


# --- handshake ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """C->S, right after the preamble: who the client is and what it wants.

    ``instance_id`` is random per process, so a node can tell "I dialled myself" (same
    instance) from "another node has my node ID" (same node ID, other instance: a copied data
    directory). ``connector_host``/``connector_port`` is where the client node itself accepts
    cluster connections (what the server announces in its topology). ``client_nonce`` is the
    hex of 32 random bytes; it makes the client's proof fresh.
    """

    TYPE: ClassVar[FrameType] = FrameType.HELLO
    versions: tuple[int, ...]
    purpose: Purpose
    cluster_name: str
    node_id: str
    instance_id: str
    connector_host: str
    connector_port: int
    user: str
    client_nonce: str
    max_hops: int
    # A replication backup's <group-name>: it pairs only with a primary of the same group.
    group_name: str | None = None


@dataclass(frozen=True, slots=True)
class Challenge:
    """S->C: the chosen version, the server's identity and its nonce (hex of 32 bytes)."""

    TYPE: ClassVar[FrameType] = FrameType.CHALLENGE
    version: int
    cluster_name: str
    node_id: str
    instance_id: str
    server_nonce: str


@dataclass(frozen=True, slots=True)
class Auth:
    """C->S: HMAC-SHA256 of the client transcript keyed with the cluster password (hex)."""

    TYPE: ClassVar[FrameType] = FrameType.AUTH
    proof: str


@dataclass(frozen=True, slots=True)
class Welcome:
    """S->C: the server's proof (its transcript): it knows the password too (mutual auth)."""

    TYPE: ClassVar[FrameType] = FrameType.WELCOME
    proof: str


@dataclass(frozen=True, slots=True)
class Reject:
    """S->C during the handshake: why the server refuses; it closes the connection next."""

    TYPE: ClassVar[FrameType] = FrameType.REJECT
    reason: str


# --- either direction ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Error:
    """Either side, any time: a fatal problem; the sender closes the connection next."""

    TYPE: ClassVar[FrameType] = FrameType.ERROR
    reason: str


@dataclass(frozen=True, slots=True)
class Ping:
    """Either side: keeps an idle link proven alive (any frame received resets the timer)."""

    TYPE: ClassVar[FrameType] = FrameType.PING


@dataclass(frozen=True, slots=True)
class Member:
    """One node as a topology sender knows it (Artemis's TopologyMember, without backups).

    ``group_name`` is the node's scale-down group (None: none set): a node scaling down only
    picks a target of its own group.

    ``clients`` are the node's STOMP acceptor URLs (``tcp://HOST:PORT``) that clients may
    use: what a topology-aware client is told (docs/stomp.md "Topology"). Optional on the
    wire: a peer that predates it sends none (empty).

    ``scaling_down_to`` is set while the node scales down: the node id of its target, or
    ``""`` while it has none. Other nodes scaling down at the same time read it to break the
    tie when two would pick each other (:mod:`artemis_py.cluster.targets`). Optional on the
    wire (absent from older peers: None).

    ``name`` is the node's ``<name>`` in broker.xml (None: none set), for people: the
    management API and console show it. Optional on the wire (absent from older peers).

    ``paired`` says the node is one side of an HA pair: the same node ID from its pair's
    connector is a takeover or a failback, not a copied data directory. Optional on the wire.
    """

    node_id: str
    instance_id: str
    host: str
    port: int
    up: bool
    version: int
    group_name: str | None = None
    clients: tuple[str, ...] = ()
    scaling_down_to: str | None = None
    name: str | None = None
    # One side of an HA pair (shared store, replication): its node ID moves to its pair's
    # connector when the other side takes over, which is no duplicate.
    paired: bool = False


@dataclass(frozen=True, slots=True)
class Topology:
    """Either side: the members the sender knows (full list, not a delta)."""

    TYPE: ClassVar[FrameType] = FrameType.TOPOLOGY
    members: tuple[Member, ...]


@dataclass(frozen=True, slots=True)
class Leaving:
    """Either side: ``node_id`` scaled down: every message it held is now on (or on its way
    to) ``target``. The receiver drops the leaving node's bindings and sends what waits for
    it to ``target`` instead. (A plain graceful stop is a :class:`Topology` with the member
    down: its messages wait for its return.)

    ``received`` lists the duplicate ids of forwarded messages the leaving node has stored
    (its duplicate-id cache): a sender whose confirmation for one of them was lost drops it
    from its backlog instead of sending it to ``target`` a second time.

    ``client_ids``, on the frames the leaving node sends to ``target`` only: the duplicate
    ids its clients sent (``_AMQ_DUPL_ID``), per address, which the target adds to its own
    caches. A large set comes as several Leaving frames (the repeats only add ids).

    Both optional on the wire (absent from older peers: empty)."""

    TYPE: ClassVar[FrameType] = FrameType.LEAVING
    node_id: str
    target: str
    received: tuple[str, ...] = field(default=(), repr=False)
    client_ids: tuple[AddressIds, ...] = field(default=(), repr=False)


@dataclass(frozen=True, slots=True)
class Proposal:
    """Either side: clustered grouping (docs/clustering.md "Clustered grouping"). The
    sender, a node with a REMOTE grouping handler, proposes that message group ``group_id``
    (the group's id, a dot and the routing name) go to binding ``cluster_name``
    (``queue@node``); sent again for a group it uses, to keep it from expiring. The node
    with the LOCAL handler answers with a :class:`ProposalResponse`; others ignore it."""

    TYPE: ClassVar[FrameType] = FrameType.PROPOSAL
    group_id: str
    cluster_name: str


@dataclass(frozen=True, slots=True)
class ProposalResponse:
    """Either side: the LOCAL grouping handler's decision, sent to every neighbour (each
    remembers it): ``group_id`` goes to ``cluster_name``, or, when ``alternative`` is set,
    the group had gone to ``alternative`` already and stays there."""

    TYPE: ClassVar[FrameType] = FrameType.PROPOSAL_RESPONSE
    group_id: str
    cluster_name: str
    alternative: str | None = None


@dataclass(frozen=True, slots=True)
class Unproposal:
    """Either side: ``group_id`` no longer goes to ``cluster_name`` (its binding is gone, or
    the group went unused for ``group-timeout``): forget it; its next message is proposed
    again."""

    TYPE: ClassVar[FrameType] = FrameType.UNPROPOSAL
    group_id: str
    cluster_name: str


@dataclass(frozen=True, slots=True)
class AddressIds:
    """The duplicate ids clients sent to ``address``, oldest first."""

    address: str
    ids: tuple[str, ...]


# --- server to client ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BindingInfo:
    """A queue binding the sender routes to (becomes a RemoteQueueBinding on the receiver).

    ``name`` is unique on the sender and is what :attr:`Message.targets` names. ``distance``
    is in hops as seen by the sender (0 = its own queue), so the receiver can stop at
    ``max-hops``. ``consumers`` has one entry per consumer: its filter text, or None.
    """

    name: str
    queue_name: str
    address: str
    routing_type: RoutingType
    filter: str | None
    distance: int
    origin_node_id: str
    consumers: tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class Bindings:
    """S->C: binding changes; ``snapshot`` = replace all the client knows from this server."""

    TYPE: ClassVar[FrameType] = FrameType.BINDINGS
    snapshot: bool
    added: tuple[BindingInfo, ...]
    removed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Consumers:
    """S->C: the full consumer list (filters or None) of binding ``name`` now."""

    TYPE: ClassVar[FrameType] = FrameType.CONSUMERS
    name: str
    consumers: tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class Status:
    """S->C: free-form JSON object for the ``cluster status`` command."""

    TYPE: ClassVar[FrameType] = FrameType.STATUS
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Confirm:
    """S->C, binary: every Message up to and including ``seq`` is durable here (cumulative)."""

    TYPE: ClassVar[FrameType] = FrameType.CONFIRM
    seq: int


# --- client to server ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewQueue:
    """A queue to create on the receiver, as it is on the sender."""

    name: str
    address: str
    routing_type: RoutingType
    filter: str | None
    durable: bool


@dataclass(frozen=True, slots=True)
class CreateQueues:
    """C->S: create these queues unless they exist (a node scaling down to the receiver
    sends it first, so that every message it moves has its queue). The receiver's
    :class:`Bindings` then show them."""

    TYPE: ClassVar[FrameType] = FrameType.CREATE_QUEUES
    queues: tuple[NewQueue, ...]


@dataclass(frozen=True, slots=True)
class SealedStream:
    """A stream of a queue that a node scaling down moved completely: its final stable
    ``end`` and the queue's offset ``mark`` for it (0: none)."""

    queue: str
    stream: str
    end: int
    mark: int


@dataclass(frozen=True, slots=True)
class Sealed:
    """C->S: a node scaling down to the receiver has moved, and seen confirmed, every
    message of these streams (sent last; :mod:`artemis_py.broker.adopted_streams`)."""

    TYPE: ClassVar[FrameType] = FrameType.SEALED
    streams: tuple[SealedStream, ...]


@dataclass(frozen=True, slots=True, repr=False)
class Message:
    """C->S, binary: one message to route to ``targets`` (binding names on the receiver).

    ``seq`` (u64) numbers the messages of one connection, strictly increasing; the server's
    :class:`Confirm` refers to it. ``dup_id`` lets the receiver drop a message it already has
    (re-sent after a reconnect). ``message_id`` is the sender's id, for logs only. ``payload``
    is the broker's own message encoding, opaque here. ``body_file``, when set, is sent
    after ``payload`` as part of it by the transport (a large body streamed from its file):
    only its length (``len``) matters here, and the receiver sees one payload.
    """

    TYPE: ClassVar[FrameType] = FrameType.MESSAGE
    seq: int
    dup_id: bytes
    targets: tuple[str, ...]
    message_id: int
    payload: bytes
    body_file: Sized | None = None

    def __repr__(self) -> str:
        payload = self.payload
        if len(payload) > _REPR_BYTES:
            shown = f"{payload[:_REPR_BYTES]!r}... ({len(payload)} bytes)"
        else:
            shown = repr(payload)
        return (
            f"Message(seq={self.seq}, dup_id={self.dup_id!r}, targets={self.targets!r}, "
            f"message_id={self.message_id}, payload={shown})"
        )


Frame: TypeAlias = (
    Hello
    | Challenge
    | Auth
    | Welcome
    | Reject
    | Error
    | Ping
    | Topology
    | Leaving
    | Bindings
    | Consumers
    | Status
    | Confirm
    | Message
    | CreateQueues
    | Sealed
    | Proposal
    | ProposalResponse
    | Unproposal
    | SyncFile
    | SyncDone
    | Records
    | Synced
    | Replicated
)


# --- other events -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Established:
    """The handshake is complete and both sides proved the cluster password.

    Emitted once per side: by the client after verifying :class:`Welcome`, by the server after
    verifying :class:`Auth`. ``peer_connector`` and ``peer_max_hops`` come from the client's
    :class:`Hello`, so they are only known on the server side (None on the client).
    """

    peer_node_id: str
    peer_instance_id: str
    peer_cluster_name: str
    peer_connector: tuple[str, int] | None
    peer_max_hops: int | None
    purpose: Purpose
    version: int
    peer_group_name: str | None = None  # from the client's Hello (server side only)


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The peer closed its side cleanly, between frames (``receive_data(b"")``)."""


class Sentinel(enum.Enum):
    """Non-event answer of ``next_event``."""

    NEED_DATA = "NEED_DATA"
    """Nothing complete is buffered: drain ``data_to_send()``, then feed more bytes."""

    def __repr__(self) -> str:
        return self.value


NEED_DATA: Final = Sentinel.NEED_DATA

Event: TypeAlias = (
    Established
    | ConnectionClosed
    | Reject
    | Error
    | Ping
    | Topology
    | Leaving
    | Bindings
    | Consumers
    | Status
    | Confirm
    | Message
    | CreateQueues
    | Sealed
    | Proposal
    | ProposalResponse
    | Unproposal
    | SyncFile
    | SyncDone
    | Records
    | Synced
    | Replicated
)
"""What ``next_event`` returns besides :data:`NEED_DATA` (handshake frames are answered by
the connection itself and never returned)."""
