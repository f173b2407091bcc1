"""A node in two clusters (issue 17 §2): node0 is in cluster ``test`` with node1 for the
addresses starting with ``orders``, and in cluster ``west`` with node2 for those starting with
``audit``. Each cluster connection has its own links, bindings and store-and-forward queues;
the links other nodes dial are served by the connection their handshake names, and a
scale-down moves each address's messages to a member of the cluster that covers it."""

from __future__ import annotations

from typing import Any

from .conftest import Cluster, ClusterNode, bridge, status, unique, wait_binding, wait_for
from .test_scale_down import received, scale_down_xml, send_many

WEST = """
      <cluster-connection name="west">
        <address>audit</address>
        <connector-ref>self</connector-ref>
        <check-period>500</check-period>
        <connection-ttl>3000</connection-ttl>
        <retry-interval>100</retry-interval>
        <max-retry-interval>500</max-retry-interval>
        <static-connectors><connector-ref>node2</connector-ref></static-connectors>
      </cluster-connection>"""


def two_clusters(cluster: Any, **node0: Any) -> Cluster:
    nodes: Cluster = cluster(
        3,
        formed=False,
        static={0: [1], 1: [0], 2: [0]},
        address="orders",
        node_options={
            0: {"more_clusters": WEST, **node0},
            2: {"cluster_name": "west", "address": "audit"},
        },
    )

    def linked() -> bool:
        east, west = status(nodes[0]), status(nodes[0], cluster="west")
        ids = [status(node)["node_id"] for node in nodes]
        pairs = [(east, ids[1]), (west, ids[2]), (status(nodes[1]), ids[0])]
        pairs.append((status(nodes[2]), ids[0]))
        return all((bridge(data, to) or {}).get("connected") for data, to in pairs)

    wait_for(linked, message="node0 linked to node1 in cluster test and to node2 in west")
    return nodes


def test_each_cluster_connection_has_its_own_members_and_bindings(
    cluster: Any, clients: Any
) -> None:
    nodes = two_clusters(cluster)
    orders, audit = unique("orders"), unique("audit")
    consumers = [clients(nodes[1]), clients(nodes[2])]
    for consumer, queue in zip(consumers, (orders, audit), strict=True):
        consumer.subscribe(f"/queue/{queue}")
    wait_binding(nodes[0], orders, on=nodes[1], consumers=1)
    wait_binding(nodes[0], audit, on=nodes[2], consumers=1, cluster="west")

    east, west = status(nodes[0]), status(nodes[0], cluster="west")
    ids = {node.name: status(node)["node_id"] for node in nodes}
    assert [m["node_id"] for m in east["members"] if m["node_id"] != ids["node0"]] == [ids["node1"]]
    assert [m["node_id"] for m in west["members"] if m["node_id"] != ids["node0"]] == [ids["node2"]]
    # Each connection learns only the queues of its own addresses.
    assert {b["queue"] for b in east["remote_bindings"]} == {orders}
    assert {b["queue"] for b in west["remote_bindings"]} == {audit}
    # node1 never hears of node2 or its queues (node0 is its only link, in cluster test).
    assert audit not in {b["queue"] for b in status(nodes[1])["remote_bindings"]}

    producer = clients(nodes[0])
    sent_orders = send_many(producer, f"/queue/{orders}", 20, "order")
    sent_audit = send_many(producer, f"/queue/{audit}", 20, "audit")
    assert sorted(received(consumers[0], 20)) == sorted(sent_orders)
    assert sorted(received(consumers[1], 20)) == sorted(sent_audit)


def test_scale_down_moves_each_address_to_its_own_cluster(cluster: Any, clients: Any) -> None:
    nodes = two_clusters(cluster, extra_core=scale_down_xml())
    orders, audit, other = unique("orders"), unique("audit"), unique("other")
    # Queues on node0 with no consumer anywhere: their messages stay on node0.
    producer = clients(nodes[0])
    for queue in (orders, audit, other):
        holder = clients(nodes[0])
        holder.subscribe(f"/queue/{queue}")
        holder.disconnect()
    sent_orders = send_many(producer, f"/queue/{orders}", 15, "order")
    sent_audit = send_many(producer, f"/queue/{audit}", 10, "audit")
    sent_other = send_many(producer, f"/queue/{other}", 5, "other")  # in neither cluster
    producer.disconnect()

    ids = {node.name: status(node)["node_id"] for node in nodes}
    assert nodes[0].stop() == 0
    log = nodes[0].log(since_start=True)
    # cluster test moves its addresses and those no connection covers; west its own.
    assert f"cluster test: scale-down to node {ids['node1']}" in log, log[-3000:]
    assert "moved 20 message(s)" in log, log[-3000:]
    assert f"cluster west: scale-down to node {ids['node2']}" in log, log[-3000:]
    assert "moved 10 message(s)" in log, log[-3000:]

    for node, queue, sent in (
        (nodes[1], orders, sent_orders),
        (nodes[1], other, sent_other),
        (nodes[2], audit, sent_audit),
    ):
        consumer = clients(node)
        consumer.subscribe(f"/queue/{queue}")
        assert sorted(received(consumer, len(sent))) == sorted(sent), queue


def test_a_link_for_a_cluster_the_node_is_not_in_is_refused(cluster: Any) -> None:
    nodes: list[ClusterNode] = cluster(
        2, formed=False, node_options={1: {"cluster_name": "elsewhere"}}
    )
    wait_for(
        lambda: (
            "cluster name mismatch: this node is in cluster 'test', the peer in "
            "'elsewhere'" in nodes[0].log(since_start=True)
        ),
        message="node0 to refuse node1's link",
    )
    assert not status(nodes[0])["bridges"]
