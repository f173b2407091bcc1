"""The two ends of a cluster link and their handshake (see :mod:`.connection` for the
framing and states they share, and :mod:`.auth` for the proofs).

The client queues the preamble and Hello on :meth:`ClientConnection.start`, answers the
server's Challenge with Auth and checks the server's proof in Welcome. The server checks the
preamble, answers Hello with Challenge (or Reject: versions, cluster name), and checks the
client's proof in Auth before it sends Welcome with its own. A wrong user is reported with
the same reason as a wrong password, after Auth, so a prober cannot tell them apart.

A core bridge (purpose ``"bridge"``) comes from a node that need not be in any cluster with
this one: its Hello names the bridge, not a cluster, and it proves the same credentials (the
bridge's user and password against this node's cluster user and password). A server that
takes no bridges says why in its Reject (``bridges_refused``).
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Iterable
from typing import Final

from artemis_py.protocol.cluster.auth import CREDENTIALS_REJECTED, proof
from artemis_py.protocol.cluster.connection import (
    SUPPORTED_VERSIONS,
    Connection,
    ConnectionState,
    HandshakeError,
    Role,
    show,
)
from artemis_py.protocol.cluster.frames import (
    Auth,
    Challenge,
    Established,
    Frame,
    FrameType,
    Hello,
    Purpose,
    Reject,
    Welcome,
)
from artemis_py.protocol.cluster.wire import DEFAULT_MAX_FRAME_SIZE, MAGIC
from artemis_py.protocol.errors import LocalProtocolError, RemoteProtocolError

__all__ = ["ClientConnection", "ServerConnection"]

_NONCE_BYTES: Final = 32


def _nonce(source: Callable[[int], bytes]) -> str:
    raw = source(_NONCE_BYTES)
    if len(raw) != _NONCE_BYTES:
        raise LocalProtocolError(f"the nonce source returned {len(raw)} bytes, not 32")
    return bytes(raw).hex()


def _versions(versions: Iterable[int]) -> tuple[int, ...]:
    result = tuple(versions)
    if not result:
        raise ValueError("at least one protocol version is needed")
    return result


class ClientConnection(Connection):
    """The dialling end of a cluster link (see the module doc)."""

    __slots__ = (
        "_nonce_source",
        "_password",
        "cluster_name",
        "connector",
        "group_name",
        "instance_id",
        "max_hops",
        "node_id",
        "purpose",
        "user",
        "versions",
    )

    def __init__(
        self,
        *,
        node_id: str,
        instance_id: str,
        cluster_name: str,
        connector: tuple[str, int],
        user: str,
        password: str,
        max_hops: int,
        purpose: Purpose = "link",
        group_name: str | None = None,
        versions: Iterable[int] = SUPPORTED_VERSIONS,
        nonce_source: Callable[[int], bytes] = os.urandom,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        super().__init__(Role.CLIENT, max_frame_size)
        self.node_id = node_id
        self.instance_id = instance_id
        self.cluster_name = cluster_name
        self.connector = connector
        self.user = user
        self._password = password.encode("utf-8")
        self.max_hops = max_hops
        self.purpose: Purpose = purpose
        self.group_name = group_name
        self.versions = _versions(versions)
        self._nonce_source = nonce_source
        self._waiting_for = "nothing (start() was not called)"

    def start(self) -> None:
        """Queue the preamble and the Hello (drain :meth:`data_to_send`)."""
        if self._state is not ConnectionState.IDLE:
            raise LocalProtocolError("start() was already called")
        host, port = self.connector
        hello = Hello(
            versions=self.versions,
            purpose=self.purpose,
            cluster_name=self.cluster_name,
            node_id=self.node_id,
            instance_id=self.instance_id,
            connector_host=host,
            connector_port=port,
            user=self.user,
            client_nonce=_nonce(self._nonce_source),
            max_hops=self.max_hops,
            group_name=self.group_name,
        )
        try:
            self._queue(hello)
        except LocalProtocolError as exc:
            self._fail(exc)
            raise
        self._out.insert(0, MAGIC)
        self._hello = hello
        self._state = ConnectionState.HANDSHAKING
        self._expect = frozenset({FrameType.CHALLENGE, FrameType.REJECT, FrameType.ERROR})
        self._waiting_for = "Challenge"

    def _handshake(self, frame: Frame) -> Established | None:
        if isinstance(frame, Challenge):
            if frame.version not in self.versions:
                raise HandshakeError(
                    f"server chose cluster protocol version {frame.version}, which we did not "
                    f"offer ({','.join(map(str, self.versions))})"
                )
            if frame.cluster_name != self.cluster_name:
                raise HandshakeError(
                    f"server node {frame.node_id!r} is in cluster {frame.cluster_name!r}, "
                    f"this node in {self.cluster_name!r}"
                )
            self._challenge = frame
            self._version = frame.version
            self._queue(Auth(proof(self._password, self._transcript("client"))))
            self._expect = frozenset({FrameType.WELCOME, FrameType.REJECT, FrameType.ERROR})
            self._waiting_for = "Welcome"
            return None
        assert isinstance(frame, Welcome)
        challenge = self._challenge
        assert challenge is not None
        expected = proof(self._password, self._transcript("server"))
        if not hmac.compare_digest(frame.proof.encode("ascii"), expected.encode("ascii")):
            raise HandshakeError(
                f"peer {challenge.node_id!r} (instance {challenge.instance_id!r}) could not "
                "prove the cluster password: check cluster-password on both nodes"
            )
        return self._become_established(
            Established(
                peer_node_id=challenge.node_id,
                peer_instance_id=challenge.instance_id,
                peer_cluster_name=challenge.cluster_name,
                peer_connector=None,
                peer_max_hops=None,
                purpose=self.purpose,
                version=challenge.version,
            )
        )


class ServerConnection(Connection):
    """The accepting end of a cluster link (see the module doc)."""

    __slots__ = (
        "_magic_pending",
        "_nonce_source",
        "_password",
        "_user_ok",
        "bridges_refused",
        "cluster_names",
        "instance_id",
        "node_id",
        "user",
        "versions",
    )

    def __init__(
        self,
        *,
        node_id: str,
        instance_id: str,
        cluster_names: Iterable[str],
        user: str,
        password: str,
        bridges_refused: str | None = None,
        versions: Iterable[int] = SUPPORTED_VERSIONS,
        nonce_source: Callable[[int], bytes] = os.urandom,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        super().__init__(Role.SERVER, max_frame_size)
        # Why this node takes no core bridge's link (None: it takes them).
        self.bridges_refused = bridges_refused
        self.node_id = node_id
        self.instance_id = instance_id
        # The node's cluster connections: a Hello names the one it is for.
        self.cluster_names = tuple(cluster_names)
        self.user = user
        self._password = password.encode("utf-8")
        self.versions = _versions(versions)
        self._nonce_source = nonce_source
        self._magic_pending = True
        self._user_ok = False
        self._state = ConnectionState.HANDSHAKING
        self._expect = frozenset({FrameType.HELLO, FrameType.ERROR})
        self._waiting_for = "Hello"

    def _preamble(self) -> bool:
        if not self._magic_pending:
            return True
        buf = self._buf
        have = min(len(buf), len(MAGIC))
        if buf[:have] != MAGIC[:have]:
            raise RemoteProtocolError(
                "peer does not speak the artemis-py cluster protocol (received "
                f"{show(buf)}; a STOMP, AMQP or Artemis core client on the cluster acceptor?)"
            )
        if have < len(MAGIC):
            return False
        self._pos = len(MAGIC)
        self._magic_pending = False
        return True

    def _reject(self, reason: str, detail: str = "") -> HandshakeError:
        """Queue Reject(``reason``); the error to raise adds the peer and the local-only
        ``detail``."""
        self._queue(Reject(reason))
        self._we_closed = True
        hello = self._hello
        assert hello is not None
        who = f"{hello.node_id!r} ({hello.connector_host}:{hello.connector_port})"
        return HandshakeError(f"rejected cluster peer {who}: {reason}{detail}")

    def _handshake(self, frame: Frame) -> Established | None:
        if isinstance(frame, Hello):
            self._on_hello(frame)
            return None
        assert isinstance(frame, Auth)
        hello = self._hello
        challenge = self._challenge
        assert hello is not None
        assert challenge is not None
        expected = proof(self._password, self._transcript("client"))
        proof_ok = hmac.compare_digest(frame.proof.encode("ascii"), expected.encode("ascii"))
        if not (proof_ok and self._user_ok):
            detail = (
                f" (the peer's cluster-user {hello.user!r} is not {self.user!r})"
                if not self._user_ok
                else " (the peer's proof does not match this node's cluster-password)"
            )
            raise self._reject(CREDENTIALS_REJECTED, detail)
        self._queue(Welcome(proof(self._password, self._transcript("server"))))
        return self._become_established(
            Established(
                peer_node_id=hello.node_id,
                peer_instance_id=hello.instance_id,
                peer_cluster_name=hello.cluster_name,
                peer_connector=(hello.connector_host, hello.connector_port),
                peer_max_hops=hello.max_hops,
                purpose=hello.purpose,
                version=challenge.version,
                peer_group_name=hello.group_name,
            )
        )

    def _on_hello(self, hello: Hello) -> None:
        self._hello = hello
        common = set(hello.versions) & set(self.versions)
        if not common:
            raise self._reject(
                f"unsupported cluster protocol version(s) {','.join(map(str, hello.versions))}; "
                f"this node speaks {','.join(map(str, self.versions))}"
            )
        if hello.purpose == "bridge":
            if self.bridges_refused is not None:
                raise self._reject(self.bridges_refused)
        elif not self.cluster_names:
            raise self._reject("this node has no running cluster connection")
        elif hello.cluster_name not in self.cluster_names:
            ours = ", ".join(map(repr, self.cluster_names))
            raise self._reject(
                f"cluster name mismatch: this node is in cluster{'s' * (len(self.cluster_names) > 1)} "
                f"{ours}, the peer in {hello.cluster_name!r}"
            )
        # A wrong user is only reported after Auth, with the same reason as a wrong password,
        # so a prober cannot tell which of the two it got right.
        self._user_ok = hmac.compare_digest(hello.user.encode("utf-8"), self.user.encode("utf-8"))
        version = max(common)
        self._version = version
        self._challenge = Challenge(
            version=version,
            cluster_name=hello.cluster_name,
            node_id=self.node_id,
            instance_id=self.instance_id,
            server_nonce=_nonce(self._nonce_source),
        )
        self._queue(self._challenge)
        self._expect = frozenset({FrameType.AUTH, FrameType.ERROR})
        self._waiting_for = "Auth"
