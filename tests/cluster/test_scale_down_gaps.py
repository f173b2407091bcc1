"""Scale-down loose ends (issue 17 §4): a chain whose target is not every node's neighbour,
and a queue name that the target has on another address."""

from __future__ import annotations

import signal
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


def one_way_chain(cluster: Any, **node1: Any) -> tuple[Any, list[str]]:
    """A <-> B <- C, direct connections only: B dials A, C dials B, and nobody dials C
    but A, which scales down to C through its scale-down connector."""
    nodes = cluster(
        3,
        static={0: [1], 1: [0], 2: [1]},
        direct_only=True,
        formed=False,
        node_options={0: {"extra_core": scale_down_xml("node2")}, 1: node1},
    )
    a, b, _c = ids = [node_id(n) for n in nodes]

    def linked() -> bool:
        sa, sb, sc = status(nodes[0]), status(nodes[1]), status(nodes[2])
        return all(
            x is not None and x["connected"] for x in (bridge(sa, b), bridge(sb, a), bridge(sc, b))
        )

    wait_for(linked, 15, message="the chain's links to come up")
    return nodes, ids


def test_in_a_chain_no_node_gets_a_store_and_forward_queue_toward_a_target_it_has_no_link_to(
    cluster: Any, clients: Any
) -> None:
    nodes, (a, _, c) = one_way_chain(cluster)
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


def test_in_a_chain_a_backlog_for_the_departed_node_stays_when_the_target_is_not_linked(
    cluster: Any, clients: Any
) -> None:
    # B gives up on a link to A that breaks (reconnect-attempts 0), so its backlog for A is
    # still waiting when A scales down to C, which B has no link to.
    nodes, (a, _, c) = one_way_chain(
        cluster, cluster_extra="<reconnect-attempts>0</reconnect-attempts>"
    )
    q = unique("onlya")
    owner = clients(nodes[0])
    owner.unsubscribe(owner.subscribe(f"/queue/{q}"))  # the queue exists on A only
    wait_binding(nodes[1], q, on=nodes[0])

    def toward_a(depth: int) -> bool:
        x = bridge(status(nodes[1]), a)
        return x is not None and x["depth"] == depth and not x["connected"]

    assert nodes[0].process is not None
    nodes[0].process.send_signal(signal.SIGSTOP)  # frozen until B's TTL drops the link
    try:
        wait_for(lambda: toward_a(0), message=lambda: f"node1: {status(nodes[1])}")
        sent = send_many(clients(nodes[1]), f"/queue/{q}", 20, "m")
        assert toward_a(20)
    finally:
        nodes[0].process.send_signal(signal.SIGCONT)
    # A dials B again (B does not dial back), so B hears A leave.
    wait_for(
        lambda: any(m["incoming"] for m in status(nodes[1])["members"] if m["node_id"] == a),
        message=lambda: f"node0 to link to node1 again: {status(nodes[1])}",
    )
    assert nodes[0].stop() == 0
    wait_for(
        lambda: "stay in the store-and-forward queue for node" in nodes[1].log(since_start=True),
        message=lambda: nodes[1].log_tail(),
    )
    # Not moved into a queue toward C that no bridge of B's drains: still waiting for A.
    bridges = status(nodes[1])["bridges"]
    assert bridge(status(nodes[1]), c) is None, bridges
    assert toward_a(20), bridges

    # When A runs again and B links to it (B restarts and dials it), they reach A.
    nodes[0].start()
    nodes[1].restart()
    consumer = clients(nodes[0])
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 20)) == sorted(sent)
