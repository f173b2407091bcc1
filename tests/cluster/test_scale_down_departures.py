"""Scale-down loose ends (issue 17 §4): nodes that scale down at once, each the other's
target, and a departure that a node which was down learns of when it returns."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

from .conftest import ClusterNode, bridge, node_id, status, unique, wait_binding, wait_for
from .test_scale_down import received, scale_down_xml, send_many


def sigterm_together(*nodes: ClusterNode, timeout: float = 60) -> list[int]:
    """SIGTERM every node at once (one signal each: a second abandons the scale-down)
    and wait for them all; returns their exit codes."""
    processes = [n.process for n in nodes]
    for p in processes:
        assert p is not None
        assert p.poll() is None
        p.send_signal(signal.SIGTERM)
    codes = []
    for node, p in zip(nodes, processes, strict=True):
        assert p is not None
        try:
            codes.append(p.wait(timeout))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{node.name} did not stop; log:\n{node.log_tail()}") from None
    return codes


def queue_with_messages_on(
    nodes: list[ClusterNode], clients: Any, prefix: str
) -> tuple[str, list[str]]:
    """A queue on every node of ``nodes``, with 30 receipted messages in each copy."""
    q = unique(prefix)
    for node in nodes:
        owner = clients(node)
        owner.unsubscribe(owner.subscribe(f"/queue/{q}"))
    for node in nodes:
        for other in nodes:
            if other is not node:
                wait_binding(node, q, on=other)
    sent = []
    for node in nodes:
        sent += send_many(clients(node), f"/queue/{q}", 30, node.name)
    return q, sent  # (ON_DEMAND, no consumers: each copy keeps its own node's messages)


def test_two_nodes_scaling_down_to_each_other_lose_nothing(cluster: Any, clients: Any) -> None:
    # Each one's only possible target is the other: one moves its messages to the other,
    # which, with nobody left, keeps everything (the last node). Normally the lower node ID
    # keeps its scale-down (the tie-break); when the higher one has moved and said goodbye
    # before the lower one's announcement reached it, the roles are the other way round.
    nodes = cluster(2, extra_core=scale_down_xml())
    ids = [node_id(n) for n in nodes]
    q, sent = queue_with_messages_on(nodes, clients, "mutual")

    codes = sigterm_together(*nodes)
    assert sorted(codes) == [0, 1], nodes[0].log_tail() + nodes[1].log_tail()
    moved, kept = (0, 1) if codes[0] == 0 else (1, 0)
    assert f"scale-down to node {ids[kept]}" in nodes[moved].log(since_start=True)
    assert "moved 0 message" not in nodes[moved].log(since_start=True)
    summary = nodes[kept].log(since_start=True)
    assert "INCOMPLETE: no node to scale down to is reachable" in summary, summary[-3000:]
    assert "60 message(s) stay in this node's journal" in summary, summary[-3000:]

    nodes[kept].start()
    consumer = clients(nodes[kept])
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 60)) == sorted(sent)


def test_two_nodes_scaling_down_to_each_other_with_a_third_present(
    cluster: Any, clients: Any
) -> None:
    # node0 scales down to node1 first, node1 to node0 first; node2 stays. The lower ID
    # keeps its target, the higher picks node2: both exit 0, node2 has everything once.
    nodes = cluster(
        3,
        node_options={
            0: {"extra_core": scale_down_xml("node1", "node2")},
            1: {"extra_core": scale_down_xml("node0", "node2")},
        },
    )
    q, sent = queue_with_messages_on(nodes[:2], clients, "mutual3")

    assert sigterm_together(nodes[0], nodes[1]) == [0, 0], nodes[0].log_tail() + nodes[1].log_tail()
    for node in nodes[:2]:
        assert "moved 0 message" not in node.log(since_start=True), node.log_tail()
    consumer = clients(nodes[2])
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 60)) == sorted(sent)


def backlog_for_b_on_c(cluster: Any, clients: Any) -> tuple[Any, list[str], str]:
    """A, B, C (nodes 0, 1, 2): C holds 20 receipted messages for B's queue in its
    store-and-forward queue (B was frozen), and is then killed. Returns (nodes, the
    messages, the queue)."""
    nodes = cluster(3, node_options={1: {"extra_core": scale_down_xml()}})
    a, b = node_id(nodes[0]), node_id(nodes[1])
    q = unique("forb")
    owner = clients(nodes[1])
    owner.unsubscribe(owner.subscribe(f"/queue/{q}"))  # the queue exists on B only
    wait_binding(nodes[2], q, on=nodes[1])

    def toward_b(depth: int) -> bool:
        x = bridge(status(nodes[2]), b)
        return x is not None and x["depth"] == depth and not x["connected"]

    assert nodes[1].process is not None
    nodes[1].process.send_signal(signal.SIGSTOP)  # frozen until C's TTL drops the link
    try:
        wait_for(lambda: toward_b(0), message=lambda: f"node2: {status(nodes[2])}")
        sent = send_many(clients(nodes[2]), f"/queue/{q}", 20, "m")
        assert toward_b(20)
        nodes[2].kill()
    finally:
        nodes[1].process.send_signal(signal.SIGCONT)

    def a_and_b_linked() -> bool:
        x, y = bridge(status(nodes[0]), b), bridge(status(nodes[1]), a)
        return x is not None and y is not None and x["connected"] and y["connected"]

    wait_for(a_and_b_linked, message=lambda: f"node0 and node1 to link again: {status(nodes[1])}")
    assert nodes[1].stop() == 0  # B scales down to A, the only node running
    assert f"scale-down to node {a}" in nodes[1].log(since_start=True)
    return nodes, sent, q


def test_a_node_that_was_down_sends_its_backlog_for_a_departed_node_to_the_target(
    cluster: Any, clients: Any
) -> None:
    nodes, sent, q = backlog_for_b_on_c(cluster, clients)
    nodes[2].start()  # C learns from A that B scaled down to A
    consumer = clients(nodes[0])
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 20)) == sorted(sent)


def test_the_departure_is_remembered_across_a_restart_of_the_node_that_knows_it(
    cluster: Any, clients: Any
) -> None:
    nodes, sent, q = backlog_for_b_on_c(cluster, clients)
    nodes[0].restart()  # A remembers B's departure on disk
    nodes[2].start()
    consumer = clients(nodes[0])
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 20)) == sorted(sent)
