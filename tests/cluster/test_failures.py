"""Nodes that stop, crash and come back: store-and-forward backlogs and duplicate detection
(Artemis's ``ClusterTestBase`` restart scenarios, clusters §4.1 retry-interval and
use-duplicate-detection)."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from typing import Any

import pytest

from .conftest import (
    DEFAULT_ADDRESSES,
    Client,
    bridge,
    node_id,
    status,
    unique,
    wait_binding,
    wait_for,
)


def backlog_delivered(nodes: Any, ids: list[str], clients: Any, q: str, count: int) -> list[str]:
    """Start node 1, wait for node 0's backlog for it to drain, and return what a new
    consumer of ``q`` on node 1 receives (``count`` messages, in order)."""
    nodes[1].start()
    wait_for(
        lambda: (b := bridge(status(nodes[0]), ids[1])) and b["connected"] and b["depth"] == 0,
        15,
        message=lambda: f"the backlog to drain: {status(nodes[0])['bridges']}",
    )
    again = clients(nodes[1])
    again.subscribe(f"/queue/{q}")
    again.wait_messages(count)
    again.sync()
    return [m.body for m in again.messages]


def drain_once(
    nodes: Any, ids: list[str], clients: Any, q: str, total: int
) -> tuple[list[Client], Counter[str]]:
    """Wait until node 0's bridge to node 1 is empty, consume ``q`` on every node until
    ``total`` messages arrived, and count them by body; fail on any duplicate."""
    wait_for(
        lambda: (
            (b := bridge(status(nodes[0]), ids[1]))
            and b["connected"]
            and b["depth"] == 0
            and b["in_flight"] == 0
        ),
        30,
        message=lambda: f"node 0's bridge to drain: {status(nodes[0])['bridges']}",
    )
    consumers = [clients(n) for n in nodes]
    for c in consumers:
        c.subscribe(f"/queue/{q}")
    wait_for(
        lambda: sum(len(c.messages) for c in consumers) >= total,
        30,
        message=lambda: f"{total} messages, got {[len(c.messages) for c in consumers]}",
    )
    for c in consumers:
        c.sync()
    counts = Counter(m.body for c in consumers for m in c.messages)
    duplicates = {body: n for body, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} duplicated: {sorted(duplicates)[:20]}"
    return consumers, counts


def test_stopped_node_gets_its_backlog_after_restart(cluster: Any, clients: Any) -> None:
    """Node 0 has no queue of its own for q, only node 1's (with a consumer): what node 0
    receives for q while node 1 is down waits in node 0's store-and-forward queue."""
    nodes = cluster(2)
    ids = [node_id(n) for n in nodes]
    q = unique("backlog")
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    producer = clients(nodes[0])
    for i in range(3):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    consumer.wait_messages(3)
    consumer.close()

    nodes[1].stop()
    wait_for(
        lambda: (b := bridge(status(nodes[0]), ids[1])) is not None and not b["connected"],
        10,
        message="node 0 to see its bridge to node 1 go down",
    )
    for i in range(3, 10):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    b = bridge(status(nodes[0]), ids[1])
    assert b is not None, b
    assert b["depth"] == 7, b
    assert not b["connected"], b

    assert backlog_delivered(nodes, ids, clients, q, 7) == [f"m-{i}" for i in range(3, 10)]


def send_pipelined(producer: Client, destination: str, bodies: list[str]) -> list[str]:
    """SEND every body with a receipt without waiting in between; the receipt ids."""
    receipts = []
    for body in bodies:
        r = producer.next_receipt()
        producer.conn.send(destination, body, headers={"receipt": r, "persistent": "true"})
        receipts.append(r)
    return receipts


def wait_receipt(producer: Client, receipt: str, timeout: float = 20) -> None:
    """Wait for a RECEIPT; fail at once, saying so, if the broker drops the connection."""
    wait_for(
        lambda: receipt in producer.receipts or producer.listener.disconnected.is_set(),
        timeout,
        message=f"RECEIPT {receipt}",
    )
    assert receipt in producer.receipts, (
        f"node 0 closed the producer's connection; errors: {[e.body for e in producer.errors]}"
    )


def strict_pair(cluster: Any, q: str) -> tuple[Any, list[str]]:
    """Two STRICT nodes that both have the anycast queue ``q``, node 0 knowing node 1's;
    returns the nodes and their ids."""
    queue_xml = (
        DEFAULT_ADDRESSES
        + f"""
      <address name="{q}"><anycast><queue name="{q}"/></anycast></address>"""
    )
    nodes = cluster(2, policy="STRICT", addresses=queue_xml)
    wait_binding(nodes[0], q, on=nodes[1], consumers=0)
    return nodes, [node_id(n) for n in nodes]


def test_target_killed_while_forwarding_no_loss_no_duplicates(cluster: Any, clients: Any) -> None:
    q = "stream"
    nodes, ids = strict_pair(cluster, q)

    producer = clients(nodes[0])
    total, batch = 2000, 100
    receipts: list[str] = []
    for start in range(0, total, batch):
        receipts += send_pipelined(
            producer, f"/queue/{q}", [f"m-{i}" for i in range(start, start + batch)]
        )
        if start == 500:
            nodes[1].kill()  # while batches are being forwarded to it
        elif start == 1200:
            nodes[1].start()
        else:
            wait_receipt(producer, receipts[-1])
    wait_for(
        lambda: set(receipts) <= set(producer.receipts),
        30,
        message=lambda: f"{len(set(receipts) - set(producer.receipts))} receipts missing",
    )
    assert not producer.errors, [e.body for e in producer.errors]

    # Everything node 0 routed to node 1 gets there once the bridge is back.
    consumers, counts = drain_once(nodes, ids, clients, q, total)
    assert set(counts) == {f"m-{i}" for i in range(total)}
    # STRICT spread them over both nodes (node 1 got fewer: it was down for a while).
    assert all(c.messages for c in consumers), [len(c.messages) for c in consumers]


def test_repeated_crashes_under_a_steady_stream(cluster: Any, clients: Any) -> None:
    """Kill the target several times while a producer streams to the other node: the
    producer's own connection must not suffer, and every receipted message arrives once."""
    q = "steady"
    nodes, ids = strict_pair(cluster, q)

    producer = clients(nodes[0])
    stop = threading.Event()
    receipts: dict[str, str] = {}  # receipt id -> body
    failures: list[BaseException] = []

    def produce() -> None:
        try:
            i, size = 0, 50
            while not stop.is_set():
                bodies = [f"m-{j}" for j in range(i, i + size)]
                batch = send_pipelined(producer, f"/queue/{q}", bodies)
                receipts.update(zip(batch, bodies, strict=True))
                i += size
                wait_for(
                    lambda b=batch[-1]: (
                        b in producer.receipts or producer.listener.disconnected.is_set()
                    ),
                    20,
                    message="a batch receipt",
                )
                if producer.listener.disconnected.is_set():
                    raise AssertionError(
                        f"node 0 closed the producer's connection; errors: "
                        f"{[e.body for e in producer.errors]}"
                    )
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    def forwarded() -> int:
        b = bridge(status(nodes[0]), ids[1])
        return b["forwarded"] if b and b["connected"] else -1

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        for _ in range(5):
            floor = max(forwarded(), 0)
            wait_for(
                lambda f=floor: forwarded() > f + 50 or failures,
                20,
                message="messages to flow to node 1",
            )
            if failures:
                break
            nodes[1].kill()
            sent = len(receipts)
            wait_for(lambda s=sent: len(receipts) > s + 100 or failures, 20, message="sends")
            nodes[1].start()
            if failures:
                break
    finally:
        stop.set()
        thread.join(30)
    assert not failures, f"the producer failed: {failures[0]!r}"
    assert not producer.errors, [e.body for e in producer.errors]
    wait_for(
        lambda: set(receipts) <= set(producer.receipts),
        30,
        message=lambda: f"{len(set(receipts) - set(producer.receipts))} receipts missing",
    )

    _consumers, counts = drain_once(nodes, ids, clients, q, len(receipts))
    assert set(counts) == set(receipts.values())


def test_restart_after_a_crash_is_not_a_duplicate_node_id(cluster: Any) -> None:
    """A node that crashed and comes back has the same node ID and connector but a new
    instance: the others still remember the old instance. That is not a copied data
    directory, and must not be reported as one."""
    nodes = cluster(2)
    ids = [node_id(n) for n in nodes]
    nodes[1].kill()
    nodes[1].start()
    wait_for(
        lambda: (b := bridge(status(nodes[0]), ids[1])) and b["connected"],
        15,
        message="node 0 to reconnect to node 1",
    )
    nodes.wait_formed()
    for n in nodes:
        bad = [line for line in n.log().splitlines() if "same node ID" in line]
        assert not bad, bad


def test_backlog_survives_a_restart_of_the_sending_node(cluster: Any, clients: Any) -> None:
    nodes = cluster(2)
    ids = [node_id(n) for n in nodes]
    q = unique("durable-backlog")
    c = clients(nodes[1])
    c.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    c.close()
    nodes[1].stop()
    producer = clients(nodes[0])
    for i in range(5):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    b = bridge(status(nodes[0]), ids[1])
    assert b is not None, b
    assert b["depth"] == 5, b
    producer.close()

    nodes[0].restart(crash=True)  # SIGKILL: the backlog is only in node 0's journal
    assert "5 message(s) wait for node" in nodes[0].log(since_start=True)
    b = bridge(status(nodes[0]), ids[1])
    assert b is not None, b
    assert b["depth"] == 5, b
    assert not b["connected"], b

    assert backlog_delivered(nodes, ids, clients, q, 5) == [f"m-{i}" for i in range(5)]


def test_sending_node_killed_while_forwarding_no_duplicates(cluster: Any, clients: Any) -> None:
    """Kill the node that forwards: what it had in flight is resent after its restart, and
    the receiver's duplicate-id cache drops what it already stored."""
    q = "outbound"
    nodes, ids = strict_pair(cluster, q)

    producer = clients(nodes[0])
    receipts: dict[str, str] = {}
    for start in range(0, 600, 100):
        bodies = [f"m-{i}" for i in range(start, start + 100)]
        receipts.update(zip(send_pipelined(producer, f"/queue/{q}", bodies), bodies, strict=True))
        wait_for(lambda r=list(receipts)[-1]: r in producer.receipts, 20, message="receipts")
    bodies = [f"m-{i}" for i in range(600, 800)]
    receipts.update(zip(send_pipelined(producer, f"/queue/{q}", bodies), bodies, strict=True))
    nodes[0].kill()  # with the last batch in progress, some of it on its way to node 1
    confirmed = {body for r, body in receipts.items() if r in producer.receipts}
    producer.close()

    nodes[0].start()
    _consumers, counts = drain_once(nodes, ids, clients, q, len(confirmed))
    assert confirmed <= set(counts), sorted(confirmed - set(counts))[:20]


def test_frozen_node_is_detected_by_connection_ttl(cluster: Any, clients: Any) -> None:
    """SIGSTOP: the TCP connection stays open but nothing comes through. After
    connection-ttl (3 s here) node 0 gives up on the link; after SIGCONT the cluster re-forms
    and messages routed meanwhile arrive."""
    nodes = cluster(2)
    ids = [node_id(n) for n in nodes]
    q = unique("frozen")
    c = clients(nodes[1])
    c.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    assert nodes[1].process is not None
    frozen_at = time.monotonic()
    nodes[1].process.send_signal(signal.SIGSTOP)
    try:
        producer = clients(nodes[0])
        producer.send(f"/queue/{q}", "m-0", persistent="true")
        wait_for(
            lambda: (b := bridge(status(nodes[0]), ids[1])) is not None and not b["connected"],
            15,
            message="node 0 to give up on the frozen node",
        )
        took = time.monotonic() - frozen_at
        assert 2.5 < took < 10, took
        assert "connection-ttl" in nodes[0].log()
    finally:
        nodes[1].process.send_signal(signal.SIGCONT)
    nodes.wait_formed()
    producer.send(f"/queue/{q}", "m-1", persistent="true")
    c.wait_messages(2, timeout=15)
    c.sync()
    assert sorted(m.body for m in c.messages) == ["m-0", "m-1"]


def test_messages_after_a_restart_of_the_sender_are_not_taken_for_duplicates(
    cluster: Any, clients: Any
) -> None:
    """Forwarded messages carry a duplicate id made from the sender's node id and message
    id; the sender's message ids after a restart (graceful or not) must not repeat earlier
    ones, or the receiver's duplicate-id cache would drop new messages."""
    nodes = cluster(2)
    q = unique("ids")
    c = clients(nodes[1])
    c.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    sent = 0
    for how in ("first", "stop", "crash"):
        if how == "stop":
            nodes[0].restart()
        elif how == "crash":
            nodes[0].restart(crash=True)
        nodes.wait_formed()
        wait_binding(nodes[0], q, on=nodes[1], consumers=1)
        producer = clients(nodes[0])
        for _ in range(5):
            producer.send(f"/queue/{q}", f"m-{sent}", persistent="true")
            sent += 1
        producer.close()
        c.wait_messages(sent, timeout=15)
    c.sync()
    assert [m.body for m in c.messages] == [f"m-{i}" for i in range(sent)]


@pytest.mark.parametrize(
    "which",
    [
        "sender",
        "target",
    ],
)
def test_graceful_stop_in_the_middle_of_a_stream(cluster: Any, clients: Any, which: str) -> None:
    """SIGTERM either end of a busy bridge: the node exits 0, and after its restart every
    receipted message is there exactly once."""
    q = "busy"
    nodes, ids = strict_pair(cluster, q)
    victim = nodes[0] if which == "sender" else nodes[1]

    producer = clients(nodes[0])
    receipts: dict[str, str] = {}
    for start in range(0, 400, 100):
        bodies = [f"m-{i}" for i in range(start, start + 100)]
        receipts.update(zip(send_pipelined(producer, f"/queue/{q}", bodies), bodies, strict=True))
        wait_receipt(producer, list(receipts)[-1])
    bodies = [f"m-{i}" for i in range(400, 700)]
    receipts.update(zip(send_pipelined(producer, f"/queue/{q}", bodies), bodies, strict=True))
    victim.stop()  # must exit 0
    if which == "target":
        wait_receipt(producer, list(receipts)[-1])  # node 0 is still up: everything is receipted
    confirmed = {body for r, body in receipts.items() if r in producer.receipts}
    producer.close()
    victim.start()

    _consumers, counts = drain_once(nodes, ids, clients, q, len(confirmed))
    assert confirmed <= set(counts), sorted(confirmed - set(counts))[:20]


def test_durable_subscription_on_a_stopped_node_gets_its_copies(cluster: Any, clients: Any) -> None:
    """Multicast: a durable subscription that lives only on node 1 still gets a copy of what
    is published on node 0 while node 1 is down; the copies wait in the store-and-forward
    queue and arrive once it is back."""
    nodes = cluster(2)
    ids = [node_id(n) for n in nodes]
    topic, client_id, name = unique("news"), unique("cid"), unique("sub")
    sub = clients(nodes[1], client_id=client_id)
    sub.subscribe(f"/topic/{topic}", **{"durable-subscription-name": name})
    here = clients(nodes[0])
    here.subscribe(f"/topic/{topic}")
    wait_binding(nodes[0], f"{client_id}.{name}", on=nodes[1], consumers=1)
    sub.close()
    nodes[1].stop()
    producer = clients(nodes[0])
    for i in range(3):
        producer.send(f"/topic/{topic}", f"m-{i}", persistent="true")
    here.wait_messages(3)
    b = bridge(status(nodes[0]), ids[1])
    assert b is not None, b
    assert b["depth"] == 3, b
    assert not b["connected"], b

    nodes[1].start()
    again = clients(nodes[1], client_id=client_id)
    again.subscribe(f"/topic/{topic}", **{"durable-subscription-name": name})
    again.wait_messages(3, timeout=15)
    again.sync()
    assert [m.body for m in again.messages] == ["m-0", "m-1", "m-2"]
    here.sync()
    assert len(here.messages) == 3


def test_a_graceful_stop_is_a_departure_not_a_lost_link(cluster: Any) -> None:
    """The stopping node announces that it leaves before it closes its links: the others
    log that it left, not that they lost it (and the ones that list it as a static
    connector keep dialling it quietly until it is back)."""
    nodes = cluster(3)
    departed = node_id(nodes[0])
    assert nodes[0].stop() == 0
    for node in nodes[1:]:
        wait_for(
            lambda node=node: (
                not [
                    m
                    for m in status(node)["members"]
                    if m["node_id"] == departed and (m["up"] or m["bridge"] or m["incoming"])
                ]
            ),
            10,
            message=lambda node=node: f"{node.name} to let node0 go: {status(node)['members']}",
        )
        log = node.log(since_start=True)
        warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
        assert not warnings, warnings
        assert f"node {departed} at {nodes[0].connector} left the cluster" in log, log[-3000:]
