"""What travels between nodes besides messages: consumer and queue changes, and what a
forwarded message keeps (headers, large bodies, transactions). Uses the shared symmetric
ON_DEMAND cluster, with names of its own per test."""

from __future__ import annotations

from typing import Any

from .conftest import (
    Cluster,
    binding,
    consume_everywhere,
    drain,
    node_id,
    status,
    unique,
    wait_binding,
    wait_for,
)


def test_consumer_leaving_stops_forwarding(nodes: Cluster, clients: Any) -> None:
    q = unique("leave")
    local = clients(nodes[0])
    local.subscribe(f"/queue/{q}")
    remote = clients(nodes[1])
    sub = remote.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    remote.unsubscribe(sub)
    wait_binding(nodes[0], q, on=nodes[1], consumers=0)

    producer = clients(nodes[0])
    for i in range(4):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    assert drain([local], 4) == [[0, 1, 2, 3]]


def test_consumer_count_follows_connections(nodes: Cluster, clients: Any) -> None:
    q = unique("count")
    made = [clients(nodes[2]) for _ in range(3)]
    for c in made:
        c.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[2], consumers=3)
    made[0].drop()  # a consumer that dies without UNSUBSCRIBE or DISCONNECT
    made[1].disconnect()
    wait_binding(nodes[0], q, on=nodes[2], consumers=1)
    wait_binding(nodes[1], q, on=nodes[2], consumers=1)


def test_deleted_queue_is_forgotten(nodes: Cluster, clients: Any) -> None:
    """A non-durable topic subscription is a temporary queue: it goes when it ends."""
    topic = unique("gone")
    c = clients(nodes[1])
    sub = c.subscribe(f"/topic/{topic}")

    def bindings(node: Any) -> list[dict[str, Any]]:
        return [b for b in status(node)["remote_bindings"] if b["address"] == topic]

    wait_for(lambda: bindings(nodes[0]) and bindings(nodes[2]), 10, message="the binding")
    c.unsubscribe(sub)
    wait_for(lambda: not bindings(nodes[0]) and not bindings(nodes[2]), 10, message="no binding")

    # Nothing is forwarded to it any more.
    before = sum(b["forwarded"] for b in status(nodes[0])["bridges"])
    clients(nodes[0]).send(f"/topic/{topic}", "nobody listens", persistent="true")
    data = status(nodes[0])
    assert sum(b["forwarded"] + b["depth"] + b["in_flight"] for b in data["bridges"]) == before


def test_symmetric_max_hops_1_learns_only_direct_neighbours(nodes: Cluster, clients: Any) -> None:
    q = unique("hops")
    c = clients(nodes[2])
    c.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[2], consumers=1)
    wait_binding(nodes[1], q, on=nodes[2], consumers=1)
    for n in nodes:
        for b in status(n)["remote_bindings"]:
            assert b["distance"] == 1, b
            assert b["via"] == b["origin"], b
    origin = node_id(nodes[2])
    assert len(binding(status(nodes[0]), q, origin)) == 1
    # A message forwarded 0 -> 2 is delivered once (not bounced on through node 1).
    producer = clients(nodes[0])
    for i in range(3):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    assert drain([c], 3) == [[0, 1, 2]]


def test_forwarded_messages_keep_their_headers(nodes: Cluster, clients: Any) -> None:
    q = unique("headers")
    c = clients(nodes[1])
    c.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    producer = clients(nodes[0])
    producer.send(
        f"/queue/{q}",
        "héllo wörld ✓",
        persistent="true",
        priority="7",
        **{"content-type": "text/plain;charset=utf-8", "x-custom": "a:b\\c", "JMSXGroupID": "g1"},
    )
    producer.send(f"/queue/{q}", "plain")  # non-persistent, no headers
    c.wait_messages(2)
    m = c.messages[0]
    assert m.body == "héllo wörld ✓"
    assert m.headers["x-custom"] == "a:b\\c"
    assert m.headers["priority"] == "7"
    assert m.headers["persistent"] == "true"
    assert m.headers["content-type"].startswith("text/plain")
    assert m.headers["_AMQ_GROUP_ID"] == "g1"  # (Artemis's name for JMSXGroupID)
    assert m.headers["destination"] == f"/queue/{q}"
    internal = [k for k in m.headers if k.startswith(("_AMQ", "$.artemis", "__"))]
    assert internal == ["_AMQ_GROUP_ID"], m.headers  # (no routing property leaks out)
    assert c.messages[1].body == "plain"
    assert c.messages[1].headers.get("persistent", "false") != "true"


def test_large_message_is_forwarded_intact(nodes: Cluster, clients: Any) -> None:
    q = unique("large")
    c = clients(nodes[2])
    c.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[2], consumers=1)
    body = "".join(chr(ord("a") + i % 26) for i in range(600_000))  # > 100 KiB min-large
    producer = clients(nodes[0])
    producer.send(f"/queue/{q}", body, persistent="true")
    producer.send(f"/queue/{q}", "after", persistent="true")
    c.wait_messages(2, timeout=20)
    assert [len(m.body) for m in c.messages] == [len(body), 5]
    assert c.messages[0].body == body


def test_transaction_is_balanced_on_commit(nodes: Cluster, clients: Any) -> None:
    q = unique("tx")
    consumers = consume_everywhere(nodes, clients, q)
    producer = clients(nodes[0])
    producer.begin("t1")
    for i in range(6):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true", transaction="t1")
    for c in consumers:
        c.sync()
    assert all(not c.messages for c in consumers), "delivered before COMMIT"
    producer.commit("t1")
    got = drain(consumers, 6)
    assert [len(g) for g in got] == [2, 2, 2], got

    producer.begin("t2")
    for i in range(6, 9):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true", transaction="t2")
    producer.abort("t2")
    assert drain(consumers, 6) == got


def test_client_ack_of_a_forwarded_message_and_redelivery(nodes: Cluster, clients: Any) -> None:
    q = unique("ack")
    c = clients(nodes[1])
    c.subscribe(f"/queue/{q}", ack="client-individual")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    producer = clients(nodes[0])
    for i in range(2):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    c.wait_messages(2)
    c.ack(c.messages[0])
    c.close()  # m-1 unacknowledged: back to node 1's queue, not lost
    again = clients(nodes[1])
    again.subscribe(f"/queue/{q}")
    assert drain([again], 1) == [[1]]


def test_local_consumer_selector_is_considered_too(nodes: Cluster, clients: Any) -> None:
    """ON_DEMAND: node 0's own consumer only takes red; blue goes to node 1's consumer."""
    q = unique("local-sel")
    local = clients(nodes[0])
    local.subscribe(f"/queue/{q}", selector="color = 'red'")
    remote = clients(nodes[1])
    remote.subscribe(f"/queue/{q}", selector="color = 'blue'")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    producer = clients(nodes[0])
    for i in range(6):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true", color="red" if i % 2 else "blue")
    assert drain([local, remote], 6) == [[1, 3, 5], [0, 2, 4]]
