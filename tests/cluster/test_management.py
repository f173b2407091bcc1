"""The management API of cluster nodes (docs/management.md "HTTP API"): what ``/api/cluster``
and ``/api/stats`` say about the members and their bridges, and ``/api/cluster/scale-down``.

Real node processes, each with its web server on (a bootstrap.xml beside broker.xml), and
stomp.py clients doing the traffic.
"""

from __future__ import annotations

from typing import Any

import httpx

from .conftest import node_id, unique, wait_binding, wait_for
from .test_scale_down import received, scale_down_xml, send_many


def api(node: Any, path: str) -> Any:
    response = httpx.get(f"{node.web_url}{path}", timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def members(node: Any) -> dict[str, dict[str, Any]]:
    """The members of ``node``'s cluster connection "test" by node id, but ``node``."""
    (connection,) = api(node, "/api/cluster")["cluster_connections"]
    assert connection["name"] == "test"
    me = connection["members"][0]  # this node comes first: a member too
    assert (me["self"], me["state"], me["bridge"]) == (True, "up", None), me
    return {m["node_id"]: m for m in connection["members"][1:]}


def test_cluster_lists_the_members_and_counts_what_their_bridges_forward(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(3, policy="ON_DEMAND", web=True)
    ids = [node_id(n) for n in nodes]
    data = api(nodes[0], "/api/cluster")
    assert data["node"] == {
        "node_id": ids[0],
        "name": "node0",
        "ha": {"policy": "primary-only", "role": "primary", "state": "live"},
    }
    (connection,) = data["cluster_connections"]
    assert connection["message_load_balancing"] == "ON_DEMAND"
    assert connection["connector"] == nodes[0].connector
    assert [m["node_id"] for m in connection["members"]][:1] == ids[:1]
    assert connection["members"][0]["name"] == "node0"
    seen = members(nodes[0])
    assert sorted(seen) == sorted(ids[1:])
    assert not any(m["self"] for m in seen.values())
    for index in (1, 2):
        member = seen[ids[index]]
        assert (member["name"], member["state"]) == (f"node{index}", "up"), member
        assert member["connector"] == nodes[index].connector
        assert member["bridge"]["connected"] is True
        assert member["bridge"]["in_flight"] == 0
    before = {i: seen[i]["bridge"]["forwarded"] for i in ids[1:]}

    # The queue's only consumer is on node1: ON_DEMAND sends node0's messages there.
    q = unique("managed")
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    sent = send_many(clients(nodes[0]), f"/queue/{q}", 12, "m")
    assert sorted(received(consumer, 12)) == sorted(sent)

    def forwarded() -> dict[str, int]:
        return {i: m["bridge"]["forwarded"] for i, m in members(nodes[0]).items()}

    wait_for(
        lambda: forwarded()[ids[1]] == before[ids[1]] + 12,
        message=lambda: f"node0's bridge to node1 to count 12 more: {forwarded()}",
    )
    assert forwarded()[ids[2]] == before[ids[2]]  # nothing went to node2
    bridge = members(nodes[0])[ids[1]]["bridge"]
    assert (bridge["store_and_forward_depth"], bridge["in_flight"]) == (0, 0)

    # The console's live snapshot: the same bridge numbers, the queue's counts where it is.
    stats = api(nodes[0], "/api/stats")
    assert stats["cluster"]["test"][ids[1]]["forwarded"] == before[ids[1]] + 12
    assert stats["connections"] >= 1
    counts = api(nodes[1], "/api/stats")["queues"][q]
    assert counts == {"messages": 0, "added": 12, "acknowledged": 12}


def test_a_stopped_member_is_down_and_scale_down_needs_its_configuration(cluster: Any) -> None:
    nodes = cluster(2, web=True)
    gone = node_id(nodes[1])
    assert members(nodes[0])[gone]["state"] == "up"
    # Without <scale-down> in broker.xml there is nothing to trigger.
    refused = httpx.post(f"{nodes[0].web_url}/api/cluster/scale-down", timeout=10)
    assert refused.status_code == 409, refused.text
    assert "scale-down is not configured" in refused.json()["error"]
    nodes[1].stop()
    # The web server stops with the node, quietly (it once logged a failed ASGI lifespan).
    assert "Traceback" not in nodes[1].log(since_start=True)
    wait_for(
        lambda: members(nodes[0])[gone]["state"] == "down",
        message=lambda: f"node0 to see node1 down: {members(nodes[0])}",
    )
    assert members(nodes[0])[gone]["bridge"]["connected"] is False


def test_scale_down_through_the_api_moves_every_message_and_stops_the_node(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(2, web=True, node_options={0: {"extra_core": scale_down_xml("node1")}})
    q = unique("leaving")
    sent = send_many(clients(nodes[0]), f"/queue/{q}", 40, "m")
    target = node_id(nodes[1])
    answer = httpx.post(f"{nodes[0].web_url}/api/cluster/scale-down", timeout=10)
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"scaling_down": True}
    assert nodes[0].process is not None
    assert nodes[0].process.wait(30) == 0, nodes[0].log_tail()
    log = nodes[0].log(since_start=True)
    assert f"scale-down to node {target}" in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 40)) == sorted(sent)
