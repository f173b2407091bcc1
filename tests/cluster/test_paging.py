"""Paging in a cluster: a store-and-forward backlog for a node that is down pages like any
other queue, and scale-down moves a paged backlog to the target, in order (this node's own,
and the one a neighbour kept for the node that left)."""

from __future__ import annotations

import signal
from typing import Any

from paging.conftest import take_acking

from .conftest import (
    CLUSTER_ADDRESS_SETTINGS,
    Client,
    node_id,
    status,
    unique,
    wait_binding,
    wait_for,
)
from .test_scale_down import scale_down_xml

# The node's global limit makes every address page, store-and-forward ones included.
SMALL_MEMORY = "<global-max-size>24KiB</global-max-size>"
BODY = "y" * 1000
# Only a few paged messages in memory at a time: most stay in the pages while a node moves
# them, so scale-down goes round several times.
FEW_DEPAGED = CLUSTER_ADDRESS_SETTINGS.replace(
    "<auto-delete-queues>",
    "<max-read-page-messages>10</max-read-page-messages><auto-delete-queues>",
)


def send_numbered(client: Client, destination: str, count: int) -> None:
    for i in range(count):
        client.send(destination, BODY, persistent="true", seq=str(i))


def paging_dir_files(node: Any) -> int:
    return len(list((node.data_dir / "paging").glob("*/*.page")))


def test_a_store_and_forward_backlog_for_a_node_that_is_down_pages(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(2, node_options={0: {"extra_core": SMALL_MEMORY}})
    topic = unique("prices")
    away = clients(nodes[1], client_id="c1")
    away.subscribe(f"/topic/{topic}", **{"durable-subscription-name": "s1"})
    away.disconnect()
    wait_binding(nodes[0], "c1.s1", on=nodes[1])
    nodes[1].stop()
    send_numbered(clients(nodes[0]), f"/topic/{topic}", 150)
    assert paging_dir_files(nodes[0]) >= 1, "the backlog for node1 must be in page files"
    assert "paging starts" in nodes[0].log()
    nodes[1].start()
    back = clients(nodes[1], client_id="c1")
    back.subscribe(
        f"/topic/{topic}",
        ack="client-individual",
        **{"durable-subscription-name": "s1", "consumer-window-size": "-1"},
    )
    assert take_acking(back, 150) == list(range(150))


def test_scale_down_moves_a_paged_backlog_in_order(cluster: Any, clients: Any) -> None:
    nodes = cluster(
        2,
        node_options={
            0: {
                "extra_core": SMALL_MEMORY + scale_down_xml("node1"),
                "address_settings": FEW_DEPAGED,
            }
        },
    )
    q = unique("orders")
    send_numbered(clients(nodes[0]), f"/queue/{q}", 120)
    assert paging_dir_files(nodes[0]) >= 1 and "paging starts" in nodes[0].log()
    nodes[0].stop()  # SIGTERM: scale down
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}", ack="client-individual", **{"consumer-window-size": "-1"})
    assert take_acking(consumer, 120) == list(range(120))


def test_a_paged_backlog_for_a_node_that_scales_down_goes_to_its_target_in_order(
    cluster: Any, clients: Any
) -> None:
    # As test_scale_down's "the others send what waited for the departed node", with node2's
    # backlog for node0 paged: node2 moves all of it to node1, not only what is in memory.
    nodes = cluster(
        3,
        node_options={
            0: {"extra_core": scale_down_xml("node1")},
            2: {
                "extra_core": SMALL_MEMORY,
                "address_settings": FEW_DEPAGED,
                "cluster_extra": "<reconnect-attempts>0</reconnect-attempts>",
            },
        },
    )
    q = unique("only0")
    owner = clients(nodes[0])
    owner.unsubscribe(owner.subscribe(f"/queue/{q}"))  # the queue exists on node0 only
    wait_binding(nodes[2], q, on=nodes[0])
    departed = node_id(nodes[0])

    def disconnected(depth: int) -> bool:
        b = next((b for b in status(nodes[2])["bridges"] if b["node_id"] == departed), None)
        return b is not None and b["depth"] == depth and not b["connected"]

    assert nodes[0].process is not None
    nodes[0].process.send_signal(signal.SIGSTOP)  # frozen until node2's TTL drops the link
    try:
        # Sent once the link is down, so none of it reaches node0 before it leaves.
        wait_for(lambda: disconnected(0), message=lambda: f"node2: {status(nodes[2])}")
        send_numbered(clients(nodes[2]), f"/queue/{q}", 150)
        assert disconnected(150)
    finally:
        nodes[0].process.send_signal(signal.SIGCONT)
    assert paging_dir_files(nodes[2]) >= 1, "node2's backlog for node0 must be in page files"
    wait_for(
        lambda: any(m["incoming"] for m in status(nodes[2])["members"] if m["node_id"] == departed),
        message=lambda: f"node0 to link to node2 again: {status(nodes[2])}",
    )
    assert nodes[0].stop() == 0
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}", ack="client-individual", **{"consumer-window-size": "-1"})
    assert take_acking(consumer, 150) == list(range(150))
    wait_for(
        lambda: not [b for b in status(nodes[2])["bridges"] if b["node_id"] == departed],
        message=lambda: f"node2 to drop its queue for node0: {status(nodes[2])}",
    )
    assert "150 message(s) that waited for node" in nodes[2].log(since_start=True)
