"""OFF load balancing, a node leaving and coming back, and one acceptor for STOMP and
cluster links (clusters §4.1 message-load-balancing; acceptors without ``protocols``)."""

from __future__ import annotations

from typing import Any

from .conftest import (
    bridge,
    drain,
    node_id,
    status,
    unique,
    wait_binding,
    wait_for,
    wait_formed,
)


def test_off_never_forwards_anycast(cluster: Any, clients: Any) -> None:
    nodes = cluster(2, policy="OFF")
    q = unique("off")
    remote = clients(nodes[1])
    remote.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    producer = clients(nodes[0])
    for i in range(4):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    local = clients(nodes[0])
    local.subscribe(f"/queue/{q}")
    assert drain([local, remote], 4) == [[0, 1, 2, 3], []]
    assert all(b["forwarded"] == 0 and b["depth"] == 0 for b in status(nodes[0])["bridges"])


def test_off_still_feeds_a_subscription_that_only_exists_elsewhere(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(2, policy="OFF")
    topic = unique("off-topic")
    here = clients(nodes[0])
    here.subscribe(f"/topic/{topic}")
    there = clients(nodes[1])
    there.subscribe(f"/topic/{topic}")
    wait_for(
        lambda: any(b["address"] == topic for b in status(nodes[0])["remote_bindings"]),
        10,
        message="node 0 to learn node 1's subscription",
    )
    producer = clients(nodes[0])
    for i in range(3):
        producer.send(f"/topic/{topic}", f"m-{i}", persistent="true")
    assert drain([here, there], 6) == [[0, 1, 2], [0, 1, 2]]


def test_leaving_node_is_skipped_then_used_again(cluster: Any, clients: Any) -> None:
    nodes = cluster(2)
    ids = [node_id(n) for n in nodes]
    q = unique("leave")
    local = clients(nodes[0])
    local.subscribe(f"/queue/{q}")
    remote = clients(nodes[1])
    remote.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)

    nodes[1].stop()
    wait_for(
        lambda: (b := bridge(status(nodes[0]), ids[1])) is not None and not b["connected"],
        10,
        message="node 0 to see node 1 leave",
    )
    member = next(m for m in status(nodes[0])["members"] if m["node_id"] == ids[1])
    assert not member["up"], member
    producer = clients(nodes[0])
    for i in range(4):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    assert drain([local], 4) == [[0, 1, 2, 3]]
    assert bridge(status(nodes[0]), ids[1])["depth"] == 0

    nodes[1].start()
    wait_formed(nodes)
    back = clients(nodes[1])
    back.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    for i in range(4, 8):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    got = drain([local, back], 8)
    assert sorted(got[0] + got[1]) == list(range(8))
    assert [len(g) for g in got] == [6, 2], got


def test_one_acceptor_for_stomp_and_cluster_links(cluster: Any, clients: Any) -> None:
    nodes = cluster(2, cluster_protocols="STOMP,CORE;anycastPrefix=/queue/;multicastPrefix=/topic/")
    q = unique("both")
    # STOMP clients on the cluster acceptors, too.
    consumer = clients(nodes[1].cluster_port)
    consumer.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    producer = clients(nodes[0].cluster_port)
    for i in range(3):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    assert drain([consumer], 3) == [[0, 1, 2]]
