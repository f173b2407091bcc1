"""Clustered grouping with real nodes (Artemis's "Clustered Grouping", ClusteredGroupingTest):
node 0 has the LOCAL grouping handler, nodes 1 and 2 REMOTE ones, a consumer on every node.

A group's messages reach one consumer on one node wherever they are sent; different groups
spread; the arbiter keeps its decisions across a restart; its reaper forgets idle groups;
with the arbiter down a new group's send fails after the handler's timeout, and a COMMIT refused so
redelivers what it acknowledged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import (
    Cluster,
    consume_everywhere,
    make_cluster,
    running,
    unique,
    use_shared,
    wait_binding,
    wait_for,
)

TIMEOUT_MS = 1500
LOCAL = f"""<grouping-handler name="gh">
      <type>LOCAL</type><timeout>{TIMEOUT_MS}</timeout>
      <group-timeout>4000</group-timeout><reaper-period>500</reaper-period>
    </grouping-handler>"""
REMOTE = f"""<grouping-handler name="gh">
      <type>REMOTE</type><timeout>{TIMEOUT_MS}</timeout><group-timeout>2000</group-timeout>
    </grouping-handler>"""


@pytest.fixture(scope="module")
def grouped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    nodes = make_cluster(
        tmp_path_factory.mktemp("grouping"),
        3,
        node_options={i: {"extra_core": LOCAL if i == 0 else REMOTE} for i in range(3)},
    )
    yield from running(nodes)


@pytest.fixture
def nodes(grouped: Cluster) -> Cluster:
    use_shared(grouped)
    grouped.wait_formed()
    return grouped


def where(consumers: list[Any], total: int) -> dict[str, set[int]]:
    """Body prefix (the group) -> the indexes of the consumers that got its messages."""
    wait_for(
        lambda: sum(len(c.messages) for c in consumers) >= total,
        15,
        message=lambda: f"{total} messages, got {[c.bodies() for c in consumers]}",
    )
    for c in consumers:
        c.sync()
    found: dict[str, set[int]] = {}
    for index, c in enumerate(consumers):
        for body in c.bodies():
            found.setdefault(body.split(":")[0], set()).add(index)
    return found


def test_a_group_sent_on_every_node_reaches_one_consumer(nodes: Cluster, clients: Any) -> None:
    q = unique("grp")
    consumers = consume_everywhere(nodes, clients, q)
    producers = [clients(n) for n in nodes]
    for i in range(9):  # the group's messages come in on all three nodes in turn
        producers[i % 3].send(f"/queue/{q}", f"g1:{i}", JMSXGroupID="g1")
    found = where(consumers, 9)
    assert len(found["g1"]) == 1, found
    (index,) = found["g1"]
    assert [b.split(":")[1] for b in consumers[index].bodies()] == [str(i) for i in range(9)]

    # Different groups spread over the nodes (load balancing picks each group's binding).
    for c in consumers:
        c.clear()
    for g in range(6):
        for i in range(3):
            producers[(g + i) % 3].send(f"/queue/{q}", f"s{g}:{i}", JMSXGroupID=f"s{g}")
    found = where(consumers, 18)
    assert all(len(found[f"s{g}"]) == 1 for g in range(6)), found
    assert len(set().union(*found.values())) >= 2, f"groups did not spread: {found}"


def test_the_arbiter_keeps_its_decisions_across_a_restart(nodes: Cluster, clients: Any) -> None:
    q = unique("keep")
    consumers = consume_everywhere(nodes, clients, q)
    sender = clients(nodes[1])
    groups = [f"k{g}" for g in range(6)]
    for g in groups:
        sender.send(f"/queue/{q}", f"{g}:0", JMSXGroupID=g)
    before = where(consumers, len(groups))
    assert all(len(before[g]) == 1 for g in groups), before

    nodes[0].restart()
    nodes.wait_formed()
    consumers[0] = clients(nodes[0])
    consumers[0].subscribe(f"/queue/{q}")
    for n in nodes[1:]:
        wait_binding(nodes[0], q, on=n, consumers=1)
    for c in consumers:
        c.clear()
    # Sent on the arbiter itself: only its journal can say where these groups went.
    arbiter = clients(nodes[0])
    for g in groups:
        arbiter.send(f"/queue/{q}", f"{g}:1", JMSXGroupID=g)
    after = where(consumers, len(groups))
    assert after == before


def test_the_reaper_forgets_idle_groups(nodes: Cluster, clients: Any) -> None:
    q = unique("reap")
    consume_everywhere(nodes, clients, q)
    start = len(nodes[0].log())
    clients(nodes[2]).send(f"/queue/{q}", "idle:0", JMSXGroupID="idle")
    # group-timeout 4 s, reaper-period 0.5 s on the arbiter.
    wait_for(lambda: "unused for group-timeout forgotten" in nodes[0].log()[start:], 10)


def test_a_new_group_fails_after_timeout_while_the_arbiter_is_down(
    nodes: Cluster, clients: Any
) -> None:
    q = unique("down")
    consume_everywhere(nodes, clients, q)
    sender = clients(nodes[1])
    sender.send(f"/queue/{q}", "known:0", JMSXGroupID="known")
    nodes[0].stop()
    # A group decided before keeps going where it went: node 1 remembers the answer.
    sender.send(f"/queue/{q}", "known:1", JMSXGroupID="known")

    began = time.monotonic()
    sender.send(f"/queue/{q}", "new:0", receipt=False, JMSXGroupID="new")
    error = sender.wait_error(timeout=10)
    waited = time.monotonic() - began
    assert "LOCAL grouping handler" in error.body, error.body
    assert "new." in error.body
    assert f"{TIMEOUT_MS} ms" in error.body
    assert waited >= TIMEOUT_MS / 1000 - 0.1, waited
    assert "Traceback" not in nodes[1].log()


def test_a_refused_commit_gives_its_acknowledgements_back(nodes: Cluster, clients: Any) -> None:
    # A COMMIT held for a group's decision and refused after the timeout did not happen:
    # the message it acknowledged is delivered again, not kept as delivering for ever.
    q, jobs = unique("txdown"), unique("jobs")
    consume_everywhere(nodes, clients, q)
    worker = clients(nodes[1])
    worker.subscribe(f"/queue/{jobs}", ack="client-individual")
    clients(nodes[1]).send(f"/queue/{jobs}", "job")
    job = worker.wait_messages(1)[0]
    nodes[0].stop()
    worker.begin("t")
    worker.ack(job, transaction="t")
    worker.conn.send(f"/queue/{q}", "new:0", headers={"JMSXGroupID": "fresh", "transaction": "t"})
    worker.conn.commit("t")
    assert "LOCAL grouping handler" in worker.wait_error(timeout=10).body
    again = clients(nodes[1])
    again.subscribe(f"/queue/{jobs}")
    again.wait_messages(1)
    assert again.bodies() == ["job"]
