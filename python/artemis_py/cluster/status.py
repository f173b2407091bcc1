"""``artemis-py cluster status`` (and ``cluster stop``): both ends.

:func:`status_report` is what a node answers: how it sees its cluster (members, bridges
with their backlogs, the remote bindings it learned). :func:`fetch_status` asks a node for
it, or to stop, with the cluster credentials.

A wrong port fails fast and says what it reached: a cluster acceptor answers the Hello at
once (Challenge or Reject), and a line-based server answers the preamble at once (it ends
with CR LF, see :mod:`artemis_py.protocol.cluster.wire`), which the codec recognises.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import trio

from artemis_py.cluster.topology import connector
from artemis_py.config.tls_params import TlsParams
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster import Purpose
from artemis_py.transport.link import LinkError, LinkRefused, LinkTlsError, connect
from artemis_py.transport.tls_contexts import TlsSetupError, client_context

if TYPE_CHECKING:
    from artemis_py.cluster.cluster_connection import ClusterConnection

TIMEOUT = 10.0
_TLS_HINT = (
    " (a TLS acceptor needs sslEnabled=true and its trust store in the --url parameters, "
    "docs/tls.md)"
)
_WHICH_ACCEPTOR = (
    "the node's cluster acceptor (protocols=CORE in its broker.xml), or the broker.xml"
)


async def fetch_status(
    host: str,
    port: int,
    *,
    cluster: str,
    user: str,
    password: str,
    purpose: Purpose = "status",
    tls: TlsParams | None = None,
) -> dict[str, Any]:
    """The status of the node at host:port, authenticated with the cluster credentials.
    With ``purpose="stop"`` the node answers, then stops gracefully (scaling down if it is
    configured to). With ``tls`` enabled, over TLS (a connector's parameters).

    Raises LinkError (or LinkRefused, e.g. for wrong credentials) with a readable message.
    """
    peer = f"{host}:{port}"
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
        context = None
        if tls is not None and tls.enabled:
            context = await trio.to_thread.run_sync(client_context, tls)
        link = await connect(
            host,
            port,
            codec,
            call_timeout=TIMEOUT,
            ping_interval=TIMEOUT,
            ttl=TIMEOUT,
            ssl_context=context,
        )
    except TlsSetupError as exc:
        raise LinkError(f"TLS setup: {exc}") from None
    except trio.TooSlowError:
        raise LinkError(
            f"{peer} did not answer within {TIMEOUT:g} s: is it {_WHICH_ACCEPTOR}?"
        ) from None
    except OSError as exc:
        raise LinkError(f"cannot connect to {peer}: {exc.strerror or exc}") from None
    except LinkTlsError as exc:
        raise LinkError(f"{peer}: {exc}") from None
    except LinkRefused:
        raise
    except LinkError as exc:
        tls_hint = "" if tls is not None and tls.enabled else _TLS_HINT
        raise LinkError(f"{peer}: {exc}; give {_WHICH_ACCEPTOR}{tls_hint}") from None
    try:
        with trio.fail_after(TIMEOUT):
            while True:
                event = await link.next_event()
                if isinstance(event, wire.Status):
                    return event.data
                if isinstance(event, (wire.ConnectionClosed, wire.Error, wire.Reject)):
                    raise LinkError(f"{peer} closed the connection without a status")
    except trio.TooSlowError:
        raise LinkError(f"{peer} sent no status within {TIMEOUT:g} s") from None
    finally:
        await trio.aclose_forcefully(link.stream)


def status_report(cluster: ClusterConnection) -> dict[str, Any]:
    """How ``cluster`` sees its cluster, as ``artemis-py cluster status`` prints it."""
    linked_in = {link.peer_node_id for link in cluster.incoming if link.established is not None}
    # The members are this node and every node it knows: in its topology, or holding a
    # store-and-forward queue for (the management API's /api/cluster counts the same).
    known = cluster.topology.members
    members = [
        {
            "node_id": node_id,
            "connector": connector(known[node_id]) if node_id in known else None,
            "up": known[node_id].up if node_id in known else False,
            "self": node_id == cluster.node_id,
            "bridge": node_id in cluster.outgoing,
            "incoming": node_id in linked_in,
        }
        for node_id in [*known, *(i for i in sorted(cluster.routes) if i not in known)]
    ]
    bridges = []
    for node_id, route in sorted(cluster.routes.items()):
        bridge = cluster.bridges.get(node_id)
        bridges.append(
            {
                "node_id": node_id,
                "connected": route.connected,
                "store_and_forward_queue": route.sf_queue.name,
                "depth": route.sf_queue.message_count,
                "in_flight": len(bridge.in_flight) if bridge and route.connected else 0,
                "forwarded": bridge.forwarded if bridge else 0,
            }
        )
    bindings = [
        {
            "name": b.name,
            "address": b.address,
            "queue": b.queue_name,
            "routing_type": b.routing_type.value,
            "filter": b.filter_text,
            "distance": b.distance,
            "via": b.route.node_id,
            "origin": b.origin_node_id,
            "consumers": b.consumer_count,
            "connected": b.connected,
        }
        for b in cluster.exchange.learned.values()
    ]
    return {
        "cluster": cluster.name,
        "node_id": cluster.node_id,
        "connector": connector(cluster.local),
        "message_load_balancing": cluster.config.message_load_balancing.value,
        "max_hops": cluster.config.max_hops,
        "members": members,
        "bridges": bridges,
        "remote_bindings": bindings,
        "given_up": dict(cluster.dialler.given_up),
        "discovery": cluster.discovery.status() if cluster.discovery is not None else None,
        "scale_down_discovery": (
            cluster.scale_down_discovery.status()
            if cluster.scale_down_discovery is not None
            else None
        ),
    }
