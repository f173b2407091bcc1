"""STRICT load balancing, address include/exclude lists, and chain clusters (clusters §4.1,
§6, §8.2). Each test builds the cluster it needs."""

from __future__ import annotations

from typing import Any

from .conftest import (
    DEFAULT_ADDRESSES,
    binding,
    bridge,
    consume_everywhere,
    drain,
    node_id,
    send_shared,
    status,
    stays,
    unique,
    wait_binding,
    wait_for,
)


def test_strict_spreads_messages_without_consumers(cluster: Any, clients: Any) -> None:
    q = "orders.strict"
    queue_xml = (
        DEFAULT_ADDRESSES
        + f"""
      <address name="{q}"><anycast><queue name="{q}"/></anycast></address>"""
    )
    nodes = cluster(3, policy="STRICT", addresses=queue_xml)
    ids = [node_id(n) for n in nodes]
    for n in nodes[1:]:
        wait_binding(nodes[0], q, on=n, consumers=0)

    producer = clients(nodes[0])
    for i in range(9):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")

    # Nobody consumes, yet node 0 forwards a third of the messages to each other node.
    def forwarded() -> bool:
        data = status(nodes[0])
        bs = [bridge(data, i) for i in ids[1:]]
        return all(b is not None and b["forwarded"] == 3 and b["depth"] == 0 for b in bs)

    wait_for(forwarded, 10, message=lambda: f"3 forwarded to each: {status(nodes[0])['bridges']}")

    consumers = [clients(n) for n in nodes]
    for c in consumers:
        c.subscribe(f"/queue/{q}")
    got = drain(consumers, 9)
    assert [len(g) for g in got] == [3, 3, 3], got
    assert sorted(i for g in got for i in g) == list(range(9))
    for g in got:
        assert len({i % 3 for i in g}) == 1, f"not round robin: {got}"


def test_address_include_exclude(cluster: Any, clients: Any) -> None:
    nodes = cluster(2, address="orders,!orders.secret")
    destinations = {"orders.eu": True, "orders.secret": False, "orders.secret.x": False}
    destinations["invoices"] = False
    remote = clients(nodes[1])
    for d in destinations:
        remote.subscribe(f"/queue/{d}")
    wait_binding(nodes[0], "orders.eu", on=nodes[1], consumers=1)
    # The binding of an excluded address is not even learned.
    data = status(nodes[0])
    for d, forwarded in destinations.items():
        assert bool(binding(data, d)) == forwarded, (d, data["remote_bindings"])

    producer = clients(nodes[0])
    for d in destinations:
        for i in range(3):
            producer.send(f"/queue/{d}", f"{d}-{i}", persistent="true")
    remote.wait_messages(3)
    remote.sync()
    assert sorted(m.body for m in remote.messages) == [f"orders.eu-{i}" for i in range(3)]

    local = clients(nodes[0])
    for d, forwarded in destinations.items():
        if not forwarded:
            local.subscribe(f"/queue/{d}")
    local.wait_messages(9)
    local.sync()
    assert sorted(m.body for m in local.messages) == sorted(
        f"{d}-{i}" for d, f in destinations.items() if not f for i in range(3)
    )


def chain(cluster: Any, max_hops: int) -> Any:
    """A -> B -> C: A dials only B, B dials only C, C dials nobody."""
    nodes = cluster(3, static={0: [1], 1: [2]}, direct_only=True, max_hops=max_hops, formed=False)
    ids = [node_id(n) for n in nodes]

    def linked() -> bool:
        a, b = status(nodes[0]), status(nodes[1])
        ab, bc = bridge(a, ids[1]), bridge(b, ids[2])
        return bool(ab and ab["connected"] and bc and bc["connected"])

    wait_for(linked, 15, message="the chain's links to come up")
    return nodes


def test_chain_max_hops_2_reaches_the_far_end(cluster: Any, clients: Any) -> None:
    nodes = chain(cluster, 2)
    ids = [node_id(n) for n in nodes]
    q = unique("chain")
    consumer = clients(nodes[2])
    consumer.subscribe(f"/queue/{q}")
    far = wait_binding(nodes[0], q, on=nodes[2], consumers=1)
    assert far["distance"] == 2, far
    assert far["via"] == ids[1], far

    producer = clients(nodes[0])
    for i in range(5):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    assert drain([consumer], 5) == [list(range(5))]

    # Direct connections only: A never dials C.
    a = status(nodes[0])
    assert bridge(a, ids[2]) is None, a["bridges"]
    # Messages forwarded through B are not kept there.
    mid = clients(nodes[1])
    mid.subscribe(f"/queue/{q}")
    assert drain([mid], 0) == [[]]


def test_chain_max_hops_1_stops_at_the_neighbour(cluster: Any, clients: Any) -> None:
    nodes = chain(cluster, 1)
    q = unique("chain1")
    consumer = clients(nodes[2])
    consumer.subscribe(f"/queue/{q}")
    wait_binding(nodes[1], q, on=nodes[2], consumers=1)
    # B knows C's queue (one hop) and is linked to A, but does not pass it on (two hops).
    wait_for(
        lambda: any(b["connected"] for b in status(nodes[0])["bridges"]),
        10,
        message="A's bridge to B",
    )
    assert binding(status(nodes[0]), q) == []

    producer = clients(nodes[0])
    for i in range(5):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    local = clients(nodes[0])
    local.subscribe(f"/queue/{q}")
    assert drain([local], 5) == [list(range(5))]
    consumer.sync()
    assert consumer.messages == []


def test_chain_end_without_static_connectors_dials_nobody(cluster: Any) -> None:
    """C, the end of the chain, has no <static-connectors> (as etc/cluster/chain/node3.xml:
    "The end of the chain dials nobody"; ClusterConnectionConfig: "both empty: this node only
    accepts cluster links"). It must not dial the members it hears of from B."""
    nodes = chain(cluster, 2)
    ids = [node_id(n) for n in nodes]
    # C has heard of A (through B's topology) by the time A and B are linked both ways.
    wait_for(
        lambda: {m["node_id"] for m in status(nodes[2])["members"]} == set(ids),
        10,
        message="C to learn the whole topology",
    )
    # A dial would start as soon as C learns of a member: none for 1.5 s.
    stays(lambda: status(nodes[2])["bridges"] == [], 1.5, message="C dialling nobody")
    c = status(nodes[2])
    assert c["bridges"] == [], f"C dialled: {c['bridges']}"
    assert not any(m["bridge"] for m in c["members"]), c["members"]
    a = status(nodes[0])
    assert not any(m["incoming"] for m in a["members"] if m["node_id"] == ids[2]), a["members"]


def test_symmetric_max_hops_2_delivers_each_message_once(cluster: Any, clients: Any) -> None:
    """With max-hops 2 in a full mesh every queue is known by two paths; the direct one
    wins and no message is delivered twice."""
    nodes = cluster(3, max_hops=2)
    q = unique("mesh2")
    consumers = consume_everywhere(nodes, clients, q)
    for b in binding(status(nodes[0]), q):
        assert b["distance"] == 1, b
    send_shared(clients(nodes[0]), f"/queue/{q}", consumers)
