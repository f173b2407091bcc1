"""Scale-down loose ends (issue 17 §4): a chain whose target is not every node's neighbour,
and a queue name that the target has on another address."""

from __future__ import annotations

from typing import Any

from .conftest import (
    DEFAULT_ADDRESSES,
    bridge,
    node_id,
    status,
    stays,
    unique,
    wait_binding,
    wait_for,
)
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


def test_a_queue_the_target_has_on_another_address_is_not_moved_and_the_summary_says_so(
    cluster: Any, clients: Any
) -> None:
    # Queue "clash" is on address clash-here on node0 and on clash-there on node1.
    here = '<address name="clash-here"><anycast><queue name="clash"/></anycast></address>'
    there = '<address name="clash-there"><anycast><queue name="clash"/></anycast></address>'
    nodes = cluster(
        2,
        node_options={
            0: {"extra_core": scale_down_xml("node1"), "addresses": DEFAULT_ADDRESSES + here},
            1: {"addresses": DEFAULT_ADDRESSES + there},
        },
    )
    wait_binding(nodes[0], "clash", on=nodes[1])
    q = unique("fine")
    producer = clients(nodes[0])
    clashing = send_many(producer, "/queue/clash-here", 5, "c")
    fine = send_many(producer, f"/queue/{q}", 3, "f")
    producer.disconnect()
    target = node_id(nodes[1])

    assert nodes[0].stop(check=False) == 1  # incomplete: not a clean exit
    log = nodes[0].log(since_start=True)
    assert f"scale-down to node {target}" in log, log[-3000:]
    assert "moved 3 message(s)" in log, log[-3000:]
    assert (
        f"ERROR: queue clash is on address clash-here here but on address clash-there on "
        f"node {target}: not moved" in log
    ), log[-3000:]
    assert "INCOMPLETE: the target has a queue of the same name on another address" in log
    assert "5 message(s) stay in this node's journal" in log, log[-3000:]

    # The other queue moved; the target's own "clash" got nothing.
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 3)) == sorted(fine)
    theirs = clients(nodes[1])
    theirs.subscribe("clash-there::clash")
    stays(lambda: not theirs.messages, 1.0, message=lambda: f"misrouted: {theirs.messages}")

    # The messages stayed on node0: it delivers them when it runs again.
    nodes[0].start()
    back = clients(nodes[0])
    back.subscribe("clash-here::clash")
    assert sorted(received(back, 5)) == sorted(clashing)
    back.disconnect()
    # Empty, the clashing queue no longer keeps the scale-down from completing.
    assert nodes[0].stop() == 0
