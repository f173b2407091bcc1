"""Scale-down loose ends (issue 17 §4): a chain whose target is not every node's neighbour,
and a queue name that the target has on another address."""

from __future__ import annotations

from typing import Any

from .conftest import bridge, node_id, status, unique, wait_for
from .test_scale_down import received, scale_down_xml, send_many


def test_in_a_chain_no_node_gets_a_store_and_forward_queue_toward_a_target_it_has_no_link_to(
    cluster: Any, clients: Any
) -> None:
    # A <-> B <- C, direct connections only: B dials A, C dials B, nobody dials C but A,
    # which scales down to C through its scale-down connector.
    nodes = cluster(
        3,
        static={0: [1], 1: [0], 2: [1]},
        direct_only=True,
        formed=False,
        node_options={0: {"extra_core": scale_down_xml("node2")}},
    )
    a, b, c = (node_id(n) for n in nodes)

    def linked() -> bool:
        sa, sb, sc = status(nodes[0]), status(nodes[1]), status(nodes[2])
        return all(
            x is not None and x["connected"] for x in (bridge(sa, b), bridge(sb, a), bridge(sc, b))
        )

    wait_for(linked, 15, message="the chain's links to come up")
    q = unique("chained")
    sent = send_many(clients(nodes[0]), f"/queue/{q}", 10, "m")
    assert nodes[0].stop() == 0
    assert f"scale-down to node {c}" in nodes[0].log(since_start=True)
    consumer = clients(nodes[2])
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 10)) == sorted(sent)

    # B took over from A (its queue for A is gone) without a queue toward C, which no
    # bridge of B's would ever drain.
    wait_for(
        lambda: bridge(status(nodes[1]), a) is None,
        message=lambda: f"node1 to drop its queue for node0: {status(nodes[1])['bridges']}",
    )
    assert bridge(status(nodes[1]), c) is None, status(nodes[1])["bridges"]
