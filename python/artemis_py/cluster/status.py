"""Ask a node how it sees its cluster (``artemis-py cluster status``), or to stop
(``artemis-py cluster stop``)."""

from __future__ import annotations

import uuid
from typing import Any

import trio

from artemis_py.cluster.link import Link, LinkError
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster import Purpose

TIMEOUT = 10.0


async def fetch_status(
    host: str, port: int, *, cluster: str, user: str, password: str, purpose: Purpose = "status"
) -> dict[str, Any]:
    """The status of the node at host:port, authenticated with the cluster credentials.
    With ``purpose="stop"`` the node answers, then stops gracefully (scaling down if it is
    configured to).

    Raises LinkError (or LinkRefused, e.g. for wrong credentials) with a readable message.
    """
    codec = wire.ClientConnection(
        node_id=f"status-{uuid.uuid4()}",
        instance_id=uuid.uuid4().hex,
        cluster_name=cluster,
        connector=("", 0),
        user=user,
        password=password,
        max_hops=0,
        purpose=purpose,
    )
    try:
        with trio.fail_after(TIMEOUT):
            stream = await trio.open_tcp_stream(host, port)
            link = Link(stream, codec, f"{host}:{port}", ping_interval=TIMEOUT, ttl=TIMEOUT)
            codec.start()
            try:
                await link.handshake()
                while True:
                    event = await link.next_event()
                    if isinstance(event, wire.Status):
                        return event.data
                    if isinstance(event, (wire.ConnectionClosed, wire.Error, wire.Reject)):
                        raise LinkError(f"{host}:{port} closed the connection without a status")
            finally:
                await trio.aclose_forcefully(stream)
    except trio.TooSlowError:
        raise LinkError(f"{host}:{port} did not answer within {TIMEOUT:g} s") from None
    except OSError as exc:
        raise LinkError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
