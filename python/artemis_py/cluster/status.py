"""Ask a node how it sees its cluster (``artemis-py cluster status``), or to stop
(``artemis-py cluster stop``).

A wrong port should fail fast and say what it is. A cluster acceptor answers the Hello at
once (Challenge or Reject); anything else answers with something that is not the cluster
protocol, closes, or stays silent. A STOMP-only acceptor would stay silent: it reads our
preamble and Hello as a STOMP command line and waits for its end of line, which binary
frames need not contain (artemis-py's waits for up to 1 KiB). So the Hello of a status
connection is made to contain one (:func:`_codec`); the STOMP acceptor then sees a complete,
unknown command, answers with an ERROR frame, and :class:`_FirstBytes` recognises it.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Final

import trio

from artemis_py.cluster.link import Link, LinkError
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster import Purpose

TIMEOUT = 10.0

_LF: Final = 0x0A
_LENGTH_END: Final = len(wire.MAGIC) + 4  # the u32 length after the preamble
_STOMP_FRAME: Final = re.compile(rb"([A-Z]{3,12})\r?\n")


def _codec(
    *, cluster: str, user: str, password: str, purpose: Purpose
) -> tuple[wire.ClientConnection, bytes]:
    """The codec of a status connection, started, and its preamble and Hello to send, with
    a LF byte in the Hello.

    The last byte of the Hello's length prefix is made 0x0A (a LF) by padding the instance
    id, which for a status connection is random and otherwise unused: the wire protocol is
    unchanged, and a STOMP acceptor finds the end of its "command line" 12 bytes in (see the
    module doc).
    """

    def make(instance_id: str) -> tuple[wire.ClientConnection, bytes]:
        codec = wire.ClientConnection(
            node_id=f"status-{uuid.uuid4()}",
            instance_id=instance_id,
            cluster_name=cluster,
            connector=("", 0),
            user=user,
            password=password,
            max_hops=0,
            purpose=purpose,
        )
        codec.start()
        return codec, codec.data_to_send()

    instance_id = uuid.uuid4().hex
    _, first = make(instance_id)
    padding = (_LF - first[_LENGTH_END - 1]) % 256  # hex digits encode as one byte each
    codec, hello = make(instance_id + "0" * padding)
    assert hello[_LENGTH_END - 1] == _LF, hello[:_LENGTH_END]
    return codec, hello


class _FirstBytes(trio.abc.Stream):
    """A stream that remembers the first bytes the peer sent, to say what the peer is."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.first = b""
        self.closed_at_once = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        if not self.first:
            self.closed_at_once = not data
        if len(self.first) < 64:
            self.first += bytes(data[: 64 - len(self.first)])
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()

    def not_a_cluster_acceptor(self, peer: str) -> LinkError | None:
        """Why ``peer`` is not a cluster acceptor, if its first bytes (or silence) say so."""
        stomp = _STOMP_FRAME.match(self.first)
        if stomp is not None:
            return LinkError(
                f"{peer} is a STOMP acceptor, not a cluster acceptor (it answered with a STOMP "
                f"{stomp[1].decode()} frame): give the node's cluster acceptor "
                "(protocols=CORE in its broker.xml), or the broker.xml itself"
            )
        if self.closed_at_once:
            return LinkError(
                f"{peer} closed the connection without answering: is it the node's cluster "
                "acceptor (protocols=CORE in its broker.xml)?"
            )
        return None


async def fetch_status(
    host: str, port: int, *, cluster: str, user: str, password: str, purpose: Purpose = "status"
) -> dict[str, Any]:
    """The status of the node at host:port, authenticated with the cluster credentials.
    With ``purpose="stop"`` the node answers, then stops gracefully (scaling down if it is
    configured to).

    Raises LinkError (or LinkRefused, e.g. for wrong credentials) with a readable message.
    """
    peer = f"{host}:{port}"
    codec, hello = _codec(cluster=cluster, user=user, password=password, purpose=purpose)
    try:
        with trio.fail_after(TIMEOUT):
            stream = _FirstBytes(await trio.open_tcp_stream(host, port))
            link = Link(stream, codec, peer, ping_interval=TIMEOUT, ttl=TIMEOUT)
            try:
                try:
                    try:
                        await stream.send_all(hello)
                    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                        raise LinkError(f"connection lost: {exc}") from exc
                    await link.handshake()
                except LinkError as exc:
                    raise stream.not_a_cluster_acceptor(peer) or exc from None
                while True:
                    event = await link.next_event()
                    if isinstance(event, wire.Status):
                        return event.data
                    if isinstance(event, (wire.ConnectionClosed, wire.Error, wire.Reject)):
                        raise LinkError(f"{peer} closed the connection without a status")
            finally:
                await trio.aclose_forcefully(stream)
    except trio.TooSlowError:
        raise LinkError(
            f"{peer} did not answer within {TIMEOUT:g} s: is it the node's cluster acceptor?"
        ) from None
    except OSError as exc:
        raise LinkError(f"cannot connect to {peer}: {exc.strerror or exc}") from None
