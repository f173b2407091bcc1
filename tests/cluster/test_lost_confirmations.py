"""A confirmation lost on a broken link, then the receiver scales down (clusters §8.3).

The nodes run embedded, in this process, so that the test can lose exactly the frames that
matter: node0 stores what node2's bridge forwards, but its confirmations never reach node2,
and node2's link to node0 then breaks for good (``reconnect-attempts`` 0), so node2 keeps
those messages for node0. When node0 scales down to node1, both nodes hold a copy: node0
moves its own, and node2 must not send its backlog to node1 as well.
(``test_scale_down.py::test_the_others_send_what_waited_for_the_departed_node_to_the_target``
reaches the same state by chance, with SIGSTOP and the connection TTL.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from artemis_py.cluster.cluster_connection import ClusterConnection
from artemis_py.config import RoutingType, parse_config
from artemis_py.node import Node, open_broker
from artemis_py.protocol import cluster as wire

from .conftest import make_cluster, unique
from .test_scale_down import scale_down_xml


def cluster_of(node: Node) -> ClusterConnection:
    return node.cluster_connections[0]


def formed(*nodes: Node) -> bool:
    for node in nodes:
        connection = cluster_of(node)
        for other in nodes:
            route = connection.routes.get(other.node_id)
            if other is not node and (route is None or not route.connected):
                return False
    return True


def lose_confirmations(receiver: Node, sender: Node) -> None:
    """The receiver stores what the sender forwards, but its Confirm frames get lost."""
    link = next(
        link for link in cluster_of(receiver).incoming if link.peer_node_id == sender.node_id
    )
    send = link.send
    link.send = lambda frame: None if isinstance(frame, wire.Confirm) else send(frame)  # type: ignore[method-assign]


async def test_what_the_departed_node_stored_unconfirmed_reaches_the_target_once(
    tmp_path: Path, wait_for: Callable[..., Awaitable[object]]
) -> None:
    specs = make_cluster(
        tmp_path,
        3,
        node_options={
            0: {"extra_core": scale_down_xml("node1")},
            2: {"cluster_extra": "<reconnect-attempts>0</reconnect-attempts>"},
        },
    )
    configs = [parse_config(spec.broker_xml()) for spec in specs]
    q = unique("unconfirmed")
    async with open_broker(configs[1]) as node1, open_broker(configs[2]) as node2:
        async with open_broker(configs[0]) as node0:
            await wait_for(lambda: formed(node0, node1, node2), message="the cluster to form")
            node0.broker.create_queue(q, q, RoutingType.ANYCAST)  # node0 only
            to_node0 = cluster_of(node2)
            await wait_for(
                lambda: (node0.node_id, q) in to_node0.exchange.learned, message="node2 to learn q"
            )
            lose_confirmations(node0, node2)

            for i in range(20):
                message = node2.broker.new_message(q, body=f"m-{i}".encode(), durable=True)
                await node2.broker.send(message, node2.broker.route(message)).settled()
            bridge = to_node0.bridges[node0.node_id]
            queue0 = node0.broker.queue(q)
            assert queue0 is not None
            await wait_for(
                lambda: queue0.message_count == 20 and len(bridge.in_flight) == 20,
                message="node0 to store all 20, and node2 to have no confirmation",
            )
            # node2's link to node0 breaks; node2 gives up on node0, and keeps the 20 for it.
            to_node0.outgoing[node0.node_id].close()
            backlog = to_node0.routes[node0.node_id]
            await wait_for(
                lambda: (
                    to_node0.dialler.given_up
                    and node0.node_id not in to_node0.outgoing
                    and not backlog.connected
                    and backlog.sf_queue.message_count == 20
                ),
                message="node2 to give up on node0 with 20 messages waiting for it",
            )
            # node0's own link to node2 stays up: node2 hears it leave.
        [report] = node0.scale_down_reports
        assert report.complete, report.summary()

        # node1 has confirmed all that node0 moved (its scale-down waited for that). Once
        # node2 has taken over its backlog for node0 and node1 has confirmed whatever that
        # sent there, node1 holds all it will ever get.
        await wait_for(
            lambda: (
                node0.node_id not in to_node0.routes
                and all(r.sf_queue.message_count == 0 for r in to_node0.routes.values())
            ),
            message="node2 to take over what waited for node0, and node1 to confirm it",
        )
        queue1 = node1.broker.queue(q)
        assert queue1 is not None
        received = sorted(ref.message.body.decode() for ref in queue1.messages)
    assert received == sorted(f"m-{i}" for i in range(20))  # each once
