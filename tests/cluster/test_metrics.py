"""The cluster's metrics on /metrics (docs/management.md "Metrics"): bridges, store-and-forward
backlogs, forwarded and redistributed counts, as two real nodes see them after stomp.py
traffic; parsed with prometheus_client's parser."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from .conftest import node_id, unique, wait_binding, wait_for
from .test_redistribution import backlog, settings


def metric(node: Any, name: str, **labels: str) -> float:
    """The one sample ``name`` of ``node``'s scrape whose labels include ``labels``."""
    response = httpx.get(f"{node.web_url}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    found = [
        s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
        if s.name == name and labels.items() <= s.labels.items()
    ]
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
    return found[0]


def test_bridges_backlogs_forwarded_and_redistributed(cluster: Any, clients: Any) -> None:
    nodes = cluster(2, web=True, address_settings=settings(0))
    ids = [node_id(n) for n in nodes]
    link = {"cluster": "test", "neighbour": ids[1]}
    assert metric(nodes[0], "artemis_cluster_bridge_connected", **link) == 1
    assert metric(nodes[0], "artemis_cluster_members", cluster="test") == 1
    assert metric(nodes[0], "artemis_cluster_bridge_forwarded_messages_total", **link) == 0

    # A backlog on node0 that nobody consumes, then a consumer on node1: it moves there.
    q = unique("metrics")
    backlog(clients(nodes[0]), q, 10)
    assert metric(nodes[0], "artemis_queue_messages", queue=q) == 10
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}")
    consumer.wait_messages(10)
    wait_for(
        lambda: metric(nodes[0], "artemis_cluster_bridge_forwarded_messages_total", **link) == 10,
        message="node0's bridge to count the 10 messages node1 confirmed",
    )
    assert metric(nodes[0], "artemis_cluster_redistributed_messages_total", **link) == 10
    assert metric(nodes[0], "artemis_queue_messages", queue=q) == 0

    # With the consumer on node1 known, ON_DEMAND sends node0's new messages straight there.
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    backlog(clients(nodes[0]), q, 5)
    consumer.wait_messages(15)
    wait_for(
        lambda: metric(nodes[0], "artemis_cluster_bridge_forwarded_messages_total", **link) == 15,
        message="5 more forwarded",
    )
    assert metric(nodes[0], "artemis_cluster_redistributed_messages_total", **link) == 10
    assert metric(nodes[0], "artemis_cluster_store_and_forward_messages", **link) == 0
    assert metric(nodes[0], "artemis_cluster_bridge_in_flight_messages", **link) == 0
    assert metric(nodes[1], "artemis_queue_messages_added_total", queue=q) == 15

    # node1 stops: node0 sees the bridge down and one member less.
    nodes[1].stop()
    wait_for(
        lambda: metric(nodes[0], "artemis_cluster_bridge_connected", **link) == 0,
        message="node0 to see its bridge to node1 down",
    )
    assert metric(nodes[0], "artemis_cluster_members", cluster="test") == 0
