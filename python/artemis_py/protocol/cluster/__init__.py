"""Sans-IO codec of the cluster link between artemis-py nodes (h11-style; no I/O, no clock).

A cluster connection (Artemis's ClusterConnection) dials other nodes; the dialling end is
the :class:`ClientConnection` (it sends messages, receives bindings and topology), the
accepting end the :class:`ServerConnection`. Both authenticate with a challenge-response over
the cluster user and password (:mod:`.auth`), then exchange frames (:mod:`.frames`; byte
layout in :mod:`.wire`; states and rules in :mod:`.connection`; the two ends and their
handshake in :mod:`.handshake`). A backup dials its primary the same way, with purpose
``"replication"``, for journal replication's frames (:mod:`.replication`).

* Connections: ``receive_data(bytes)``, ``next_event()``, ``send(frame)``,
  ``data_to_send() -> bytes``, ``state``; the client's ``start()`` queues preamble + Hello.
* Events: the frames, :class:`Established`, :class:`ConnectionClosed`; :data:`NEED_DATA`.
* Errors: :class:`LocalProtocolError`, :class:`RemoteProtocolError` (from
  :mod:`artemis_py.protocol.errors`) and its subclass :class:`HandshakeError`.
"""

from artemis_py.protocol.cluster.auth import CREDENTIALS_REJECTED, proof, transcript
from artemis_py.protocol.cluster.connection import (
    HANDSHAKE_MAX_FRAME_SIZE,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    Connection,
    ConnectionState,
    HandshakeError,
    Role,
)
from artemis_py.protocol.cluster.frames import (
    NEED_DATA,
    AddressIds,
    Auth,
    BindingInfo,
    Bindings,
    Challenge,
    Confirm,
    ConnectionClosed,
    Consumers,
    CreateQueues,
    Error,
    Established,
    Event,
    Frame,
    FrameType,
    Hello,
    Leaving,
    Member,
    Message,
    NewQueue,
    Ping,
    Proposal,
    ProposalResponse,
    Purpose,
    Records,
    Reject,
    Replicated,
    RoutingType,
    Sealed,
    SealedStream,
    Sentinel,
    Status,
    SyncDone,
    Synced,
    SyncFile,
    Topology,
    Unproposal,
    Welcome,
)
from artemis_py.protocol.cluster.handshake import ClientConnection, ServerConnection
from artemis_py.protocol.cluster.wire import (
    DEFAULT_MAX_FRAME_SIZE,
    MAGIC,
    decode_frame,
    encode_frame,
)
from artemis_py.protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = [
    "CREDENTIALS_REJECTED",
    "DEFAULT_MAX_FRAME_SIZE",
    "HANDSHAKE_MAX_FRAME_SIZE",
    "MAGIC",
    "NEED_DATA",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "AddressIds",
    "Auth",
    "BindingInfo",
    "Bindings",
    "Challenge",
    "ClientConnection",
    "Confirm",
    "Connection",
    "ConnectionClosed",
    "ConnectionState",
    "Consumers",
    "CreateQueues",
    "Error",
    "Established",
    "Event",
    "Frame",
    "FrameType",
    "HandshakeError",
    "Hello",
    "Leaving",
    "LocalProtocolError",
    "Member",
    "Message",
    "NewQueue",
    "Ping",
    "Proposal",
    "ProposalResponse",
    "ProtocolError",
    "Purpose",
    "Records",
    "Reject",
    "RemoteProtocolError",
    "Replicated",
    "Role",
    "RoutingType",
    "Sealed",
    "SealedStream",
    "Sentinel",
    "ServerConnection",
    "Status",
    "SyncDone",
    "SyncFile",
    "Synced",
    "Topology",
    "Unproposal",
    "Welcome",
    "decode_frame",
    "encode_frame",
    "proof",
    "transcript",
]
