"""Paging in a cluster: a store-and-forward backlog for a node that is down pages like any
other queue, and scale-down moves a paged backlog to the target, in order (and
test_scale_down moves a neighbour's paged backlog for the node that left)."""

from __future__ import annotations

from typing import Any

from paging.conftest import take_acking

from .conftest import FEW_DEPAGED, SMALL_MEMORY, Client, unique, wait_binding
from .test_scale_down import scale_down_xml

BODY = "y" * 1000
# node0 pages nearly everything, reads few paged messages at a time, scales down to node1.
PAGED_NODE0_SCALES_DOWN = {
    0: {"extra_core": SMALL_MEMORY + scale_down_xml("node1"), "address_settings": FEW_DEPAGED}
}


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
    nodes = cluster(2, node_options=PAGED_NODE0_SCALES_DOWN)
    q = unique("orders")
    send_numbered(clients(nodes[0]), f"/queue/{q}", 120)
    assert paging_dir_files(nodes[0]) >= 1
    assert "paging starts" in nodes[0].log()
    nodes[0].stop()  # SIGTERM: scale down
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}", ack="client-individual", **{"consumer-window-size": "-1"})
    assert take_acking(consumer, 120) == list(range(120))
