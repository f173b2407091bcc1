"""Server-side load balancing in a symmetric three-node ON_DEMAND cluster (clusters §4, §8.1).

Modelled on Artemis's ``SymmetricClusterTest`` / ``OnDemandMessageRedistributionTest``
scenarios. The tests share one started cluster (state cannot leak: every test uses queue and
topic names of its own). Consumer information travels between nodes asynchronously, so every
test waits (with the status API) until node 0 knows the consumers it relies on before sending.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from integration.conftest import free_port

from .conftest import (
    FILTERED,
    Cluster,
    binding,
    bridge,
    cli,
    consume_everywhere,
    drain,
    numbers,
    send_shared,
    status,
    unique,
    wait_binding,
    wait_for,
)


def create_everywhere(nodes: Cluster, clients: Any, queue: str) -> None:
    """Create anycast queue ``queue`` on every node, without consumers (subscribe, then
    unsubscribe: the harness turns auto-delete-queues off)."""
    for node in nodes:
        c = clients(node)
        c.unsubscribe(c.subscribe(f"/queue/{queue}"))
    for node in nodes[1:]:
        wait_binding(nodes[0], queue, on=node, consumers=0)


def forwarded_total(node: Any) -> int:
    data = status(node)
    return sum(b["forwarded"] + b["depth"] + b["in_flight"] for b in data["bridges"])


def test_round_robin_across_three_nodes(nodes: Cluster, clients: Any) -> None:
    q = unique("rr")
    consumers = consume_everywhere(nodes, clients, q)

    got = send_shared(clients(nodes[0]), f"/queue/{q}", consumers)
    # Interleaved: each node gets every third message, in order, and together all residues.
    residues = []
    for g in got:
        assert g == sorted(g), got
        assert len({i % 3 for i in g}) == 1, f"not round robin: {got}"
        residues.append(g[0] % 3)
    assert sorted(residues) == [0, 1, 2], got


def test_on_demand_keeps_messages_local_without_consumers(nodes: Cluster, clients: Any) -> None:
    q = unique("idle")
    create_everywhere(nodes, clients, q)
    before = forwarded_total(nodes[0])

    producer = clients(nodes[0])
    for i in range(6):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    assert forwarded_total(nodes[0]) == before, "ON_DEMAND forwarded with no consumer anywhere"

    # Consumers on the other nodes come too late: there is no redistribution.
    late = [clients(n) for n in nodes[1:]]
    for c in late:
        c.subscribe(f"/queue/{q}")
    local = clients(nodes[0])
    local.subscribe(f"/queue/{q}")
    assert drain([local, *late], 6) == [list(range(6)), [], []]


def test_on_demand_forwards_only_to_nodes_with_consumers(nodes: Cluster, clients: Any) -> None:
    q = unique("od")
    create_everywhere(nodes, clients, q)
    # Consumers on node 1 and node 2; node 0 (where the producer is) has the queue but none.
    remote = [clients(n) for n in nodes[1:]]
    for c in remote:
        c.subscribe(f"/queue/{q}")
    for n in nodes[1:]:
        wait_binding(nodes[0], q, on=n, consumers=1)

    producer = clients(nodes[0])
    for i in range(8):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    got = drain(remote, 8)
    assert [len(g) for g in got] == [4, 4], got
    assert sorted(i for g in got for i in g) == list(range(8))

    local = clients(nodes[0])
    local.subscribe(f"/queue/{q}")
    local.sync()
    assert local.messages == [], "node 0 kept messages though it had no consumer"


def test_on_demand_only_the_node_with_a_consumer(nodes: Cluster, clients: Any) -> None:
    q = unique("one")
    create_everywhere(nodes, clients, q)
    only = clients(nodes[2])
    only.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[2], consumers=1)

    producer = clients(nodes[0])
    for i in range(5):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    assert drain([only], 5) == [list(range(5))]

    others = [clients(n) for n in nodes[:2]]
    for c in others:
        c.subscribe(f"/queue/{q}")
    assert drain(others, 0) == [[], []]


def wait_topic_bindings(node: Any, address: str, count: int) -> list[dict[str, Any]]:
    def found() -> list[dict[str, Any]] | None:
        bs = [
            b
            for b in status(node)["remote_bindings"]
            if b["address"] == address and b["consumers"] >= 1 and b["connected"]
        ]
        return bs if len(bs) >= count else None

    return wait_for(
        found,
        15,
        0.05,
        message=lambda: f"{count} subscriptions of {address}: {status(node)['remote_bindings']}",
    )


def test_multicast_every_subscription_gets_every_message(nodes: Cluster, clients: Any) -> None:
    topic = unique("topic")
    # Node 0: a non-durable subscription; nodes 1 and 2: one non-durable and one durable each.
    subscribers = []
    for n in nodes:
        c = clients(n)
        c.subscribe(f"/topic/{topic}")
        subscribers.append(c)
    for i, n in enumerate(nodes[1:], 1):
        c = clients(n, client_id=unique(f"cid{i}"))
        c.subscribe(f"/topic/{topic}", **{"durable-subscription-name": unique("dur")})
        subscribers.append(c)
    wait_topic_bindings(nodes[0], topic, 4)

    producer = clients(nodes[0])
    for i in range(5):
        producer.send(f"/topic/{topic}", f"m-{i}", persistent="true")
    for c in subscribers:
        c.wait_messages(5)
    for c in subscribers:
        c.sync()
        assert numbers(c) == list(range(5))


def test_multicast_one_subscription_name_on_two_nodes_shares_messages(
    nodes: Cluster, clients: Any
) -> None:
    """Each subscription name gets one copy, wherever its queues live (a group per name)."""
    topic = unique("shared-topic")
    client_id, sub = unique("cid"), unique("dur")
    members = [clients(n, client_id=client_id) for n in nodes[1:]]
    for c in members:
        c.subscribe(f"/topic/{topic}", **{"durable-subscription-name": sub})
    wait_topic_bindings(nodes[0], topic, 2)

    send_shared(clients(nodes[0]), f"/topic/{topic}", members, 6)


def test_queue_filter_on_one_node(nodes: Cluster, clients: Any) -> None:
    consumers = consume_everywhere(nodes, clients, FILTERED)
    assert binding(status(nodes[0]), FILTERED, status(nodes[1])["node_id"])[0]["filter"]

    # Six red messages, then six blue ones: the red ones go round robin over all three
    # queues, the blue ones only over the two queues without a filter.
    producer = clients(nodes[0])
    for i in range(12):
        color = "red" if i < 6 else "blue"
        producer.send(f"/queue/{FILTERED}", f"m-{i}", persistent="true", color=color)
    got = drain(consumers, 12)
    assert sorted(i for g in got for i in g) == list(range(12)), got
    assert len(got[1]) == 2, f"node 1 (filter color = 'red') got {got[1]}: {got}"
    assert all(i < 6 for i in got[1]), f"node 1 (filter color = 'red') got {got[1]}: {got}"
    reds = [[i for i in g if i < 6] for g in got]
    blues = [[i for i in g if i >= 6] for g in got]
    assert [len(r) for r in reds] == [2, 2, 2], got
    assert [len(b) for b in blues] == [3, 0, 3], got


def test_consumer_selectors_decide_where_messages_go(nodes: Cluster, clients: Any) -> None:
    q = unique("sel")
    create_everywhere(nodes, clients, q)
    red = clients(nodes[1])
    red.subscribe(f"/queue/{q}", selector="color = 'red'")
    blue = clients(nodes[2])
    blue.subscribe(f"/queue/{q}", selector="color = 'blue'")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    wait_binding(nodes[0], q, on=nodes[2], consumers=1)

    producer = clients(nodes[0])
    for i in range(8):
        color = "red" if i % 2 == 0 else "blue"
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true", color=color)
    got = drain([red, blue], 8)
    assert got == [[0, 2, 4, 6], [1, 3, 5, 7]]
    for m in red.messages:
        assert m.headers["color"] == "red"

    # A message no selector matches stays on node 0.
    producer.send(f"/queue/{q}", "m-8", persistent="true", color="green")
    local = clients(nodes[0])
    local.subscribe(f"/queue/{q}")
    assert drain([local], 1) == [[8]]
    red.sync()
    blue.sync()
    assert len(red.messages) + len(blue.messages) == 8


def test_cli_cluster_status(nodes: Cluster, clients: Any) -> None:
    q = unique("cli")
    c = clients(nodes[1])
    c.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    ids = [status(n)["node_id"] for n in nodes]

    result = cli("cluster", "status", str(nodes[0].config_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"node {ids[0]} at {nodes[0].connector}: cluster test, ON_DEMAND, max-hops 1" in out
    assert "members (3):" in out
    assert f"  {ids[0]}  {nodes[0].connector}  this node" in out
    for i in (1, 2):
        line = f"  {ids[i]}  {nodes[i].connector}  up, bridge connected, incoming link yes"
        assert line in out, out
        assert f"  -> {ids[i][:8]}  connected" in out, out
    assert f"  {q}  ANYCAST queue {q} on {ids[1][:8]} (distance 1)  consumers 1" in out, out

    # A wrong password is refused with a message about the credentials.
    bad = cli("cluster", "status", "--password", "wrong", str(nodes[0].config_path))
    assert bad.returncode == 1, (bad.stdout, bad.stderr)
    assert "credentials" in bad.stderr, bad.stderr

    # --json prints what the status API returns.
    raw = cli("cluster", "status", "--json", str(nodes[2].config_path))
    assert raw.returncode == 0, raw.stderr
    data = json.loads(raw.stdout)
    assert data["node_id"] == ids[2]
    assert {m["node_id"] for m in data["members"]} == set(ids)

    # Nobody there: a one-line error, exit status 1.
    nobody = cli(
        "cluster",
        "status",
        "--url",
        f"tcp://127.0.0.1:{free_port()}",
        "--cluster",
        "test",
        "--password",
        "x",
    )
    assert nobody.returncode == 1, (nobody.stdout, nobody.stderr)
    assert "cannot connect" in nobody.stderr, nobody.stderr
    assert "Traceback" not in nobody.stderr, nobody.stderr


def test_status_bridges_count_forwarded_messages(nodes: Cluster, clients: Any) -> None:
    q = unique("count")
    c = clients(nodes[2])
    c.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[2], consumers=1)
    node2 = status(nodes[2])["node_id"]
    before = bridge(status(nodes[0]), node2)
    assert before is not None
    producer = clients(nodes[0])
    for i in range(4):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    assert drain([c], 4) == [[0, 1, 2, 3]]
    after = wait_for(
        lambda: (b := bridge(status(nodes[0]), node2)) and b["in_flight"] == 0 and b,
        10,
        message="the bridge to node 2 to have no messages in flight",
    )
    assert after["forwarded"] - before["forwarded"] == 4
    assert after["depth"] == 0
    assert Counter(m.headers["message-id"] for m in c.messages).most_common(1)[0][1] == 1
