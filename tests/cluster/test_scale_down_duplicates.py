"""Scale-down hands the clients' duplicate ids (``_AMQ_DUPL_ID``) to the target: a client
that resends to the target what the departed node had accepted is still detected, also
after the target restarts (docs/duplicate-detection.md)."""

from __future__ import annotations

from typing import Any

from integration.test_duplicate_detection import (
    accepted,
    duplicate,
    producer,
    send,
    stored,
    transaction,
)

from .conftest import node_id, unique

SCALE_DOWN = "<ha-policy><primary-only><scale-down/></primary-only></ha-policy>"


def test_the_target_of_a_scale_down_knows_the_departed_nodes_client_ids(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(2, node_options={0: {"extra_core": SCALE_DOWN}})
    queue, other = unique("orders"), unique("audit")
    with producer(nodes[0]) as raw:
        assert accepted(send(raw, queue, "o1", dup="order-1"))
        assert accepted(send(raw, queue, "o2", dup="order-2"))
        assert accepted(send(raw, other, "a1", dup="order-1"))  # another address, same id
        assert accepted(transaction(raw, queue, [("t1", "batch-7"), ("t2", "batch-7")]))

    assert nodes[0].stop() == 0
    assert f"scale-down to node {node_id(nodes[1])}" in nodes[0].log(since_start=True)

    def resend_everything(raw: Any) -> None:
        assert duplicate(send(raw, queue, "o1", dup="order-1"))
        assert duplicate(send(raw, queue, "o2", dup="order-2"))
        assert duplicate(send(raw, other, "a1", dup="order-1"))
        assert duplicate(transaction(raw, queue, [("t1", "batch-7"), ("t2", "batch-7")]))

    with producer(nodes[1]) as raw:
        resend_everything(raw)
        assert accepted(send(raw, queue, "o3", dup="order-3"))
    # Journaled there: a crash of the target keeps them.
    nodes[1].restart(crash=True)
    with producer(nodes[1]) as raw:
        resend_everything(raw)
    assert sorted(m.body for m in stored(clients, nodes[1], queue, 5)) == [
        "o1",
        "o2",
        "o3",
        "t1",
        "t2",
    ]
    assert [m.body for m in stored(clients, nodes[1], other, 1)] == ["a1"]
