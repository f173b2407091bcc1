"""Scaling (clusters §8.3): a node stopped gracefully hands every message to another node,
and a new node joins through one member.

Modelled on Artemis's ScaleDownTest scenarios: several queues, a durable subscription and a
store-and-forward backlog for a third node move to the target; a group name restricts the
target; with no target reachable nothing is lost and the next stop tries again.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest

from paging.conftest import take_acking

from .conftest import (
    CLUSTER_ADDRESS_SETTINGS,
    FEW_DEPAGED,
    SMALL_MEMORY,
    Client,
    cli,
    node_id,
    status,
    unique,
    wait_binding,
    wait_for,
    wait_formed,
)


def scale_down_xml(*connectors: str, group: str | None = None) -> str:
    refs = "".join(f"<connector-ref>{c}</connector-ref>" for c in connectors)
    return (
        "<ha-policy><primary-only><scale-down>"
        + (f"<group-name>{group}</group-name>" if group else "")
        + (f"<connectors>{refs}</connectors>" if refs else "")
        + "</scale-down></primary-only></ha-policy>"
    )


def send_many(
    client: Client, destination: str, count: int, prefix: str, **headers: Any
) -> list[str]:
    sent = [f"{prefix}-{i}" for i in range(count)]
    for body in sent:
        client.send(destination, body, persistent="true", **headers)
    return sent


def received(client: Client, count: int) -> list[str]:
    client.wait_messages(count, timeout=20)
    client.sync()
    return [m.body for m in client.messages]


def test_scale_down_moves_queues_subscriptions_and_backlog_for_a_third_node(
    cluster: Any, clients: Any
) -> None:
    # node0 scales down to the first reachable connector: node2 is down, so node1.
    nodes = cluster(
        3,
        static={0: [1], 1: [0], 2: [0, 1]},  # node2 finds node1 when node0 is gone
        node_options={0: {"extra_core": scale_down_xml("node2", "node1")}},
    )
    orders, topic = unique("orders"), unique("prices")
    # A durable subscription on node2 that will be away: node0 keeps its share in the
    # store-and-forward queue for node2.
    away = clients(nodes[2], client_id="c2")
    away.subscribe(f"/topic/{topic}", **{"durable-subscription-name": "s2"})
    away.disconnect()
    wait_binding(nodes[0], "c2.s2", on=nodes[2])
    subscriber = clients(nodes[0], client_id="c0")
    subscriber.subscribe(f"/topic/{topic}", **{"durable-subscription-name": "s0"})
    subscriber.disconnect()
    nodes[2].stop()

    producer = clients(nodes[0])
    sent = send_many(producer, f"/queue/{orders}", 30, "order")
    producer.send(f"/queue/{orders}", "order-volatile", persistent="false")
    published = send_many(producer, f"/topic/{topic}", 10, "price")
    dead = send_many(producer, "/queue/DLQ", 3, "dead")
    # A consumer that took messages without acknowledging them: they move too.
    holder = clients(nodes[0])
    holder.subscribe(f"/queue/{orders}", ack="client-individual")
    holder.wait_messages(31)
    producer.disconnect()

    departed = node_id(nodes[0])
    assert nodes[0].stop() == 0
    log = nodes[0].log(since_start=True)
    target = node_id(nodes[1])
    assert f"scale-down to node {target}" in log, log[-3000:]
    assert "moved 54 message(s)" in log, log[-3000:]

    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{orders}")
    assert sorted(received(consumer, 31)) == sorted([*sent, "order-volatile"])
    back = clients(nodes[1], client_id="c0")
    back.subscribe(f"/topic/{topic}", **{"durable-subscription-name": "s0"})
    assert received(back, 10) == published
    dlq = clients(nodes[1])
    dlq.subscribe("/queue/DLQ")
    assert received(dlq, 3) == dead

    # node1 forgot node0 (no bindings, no store-and-forward queue) and forwards node2's share
    # once node2 is back.
    def forgotten() -> bool:
        data = status(nodes[1])
        return not [b for b in data["remote_bindings"] if b["origin"] == departed] and not [
            b for b in data["bridges"] if b["node_id"] == departed
        ]

    wait_for(forgotten, message=lambda: f"node1 to forget node0: {status(nodes[1])}")
    nodes[2].start()
    returning = clients(nodes[2], client_id="c2")
    returning.subscribe(f"/topic/{topic}", **{"durable-subscription-name": "s2"})
    assert received(returning, 10) == published


def test_scale_down_without_connectors_picks_the_lowest_node_id_of_its_group(
    cluster: Any, clients: Any
) -> None:
    # node0 and node2 are in group "east", node1 in "west": only node2 qualifies, whatever
    # the node IDs. (node1 and node2 announce their group without scaling down themselves.)
    west = scale_down_xml(group="west").replace(
        "<scale-down>", "<scale-down><enabled>false</enabled>"
    )
    east = scale_down_xml(group="east").replace(
        "<scale-down>", "<scale-down><enabled>false</enabled>"
    )
    nodes = cluster(
        3,
        node_options={
            0: {"extra_core": scale_down_xml(group="east")},
            1: {"extra_core": west},
            2: {"extra_core": east},
        },
    )
    q = unique("grouped")
    sent = send_many(clients(nodes[0]), f"/queue/{q}", 20, "m")
    target = node_id(nodes[2])
    assert nodes[0].stop() == 0
    assert f"scale-down to node {target}" in nodes[0].log(since_start=True)
    consumer = clients(nodes[2])
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 20)) == sorted(sent)
    assert "created queue" not in nodes[1].log(since_start=True)


def test_scale_down_without_a_group_picks_the_lowest_node_id(cluster: Any, clients: Any) -> None:
    nodes = cluster(3, node_options={0: {"extra_core": scale_down_xml()}})
    q = unique("lowest")
    sent = send_many(clients(nodes[0]), f"/queue/{q}", 10, "m")
    lowest = min(nodes[1:], key=node_id)
    target, departed = node_id(lowest), node_id(nodes[0])
    # The admin command instead of a signal: it authenticates with the cluster credentials.
    answer = cli("cluster", "stop", str(nodes[0].config_path))
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.startswith(f"node {departed} at "), answer.stdout
    assert nodes[0].process is not None
    assert nodes[0].process.wait(30) == 0
    assert f"scale-down to node {target}" in nodes[0].log(since_start=True)
    consumer = clients(lowest)
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 10)) == sorted(sent)


def stop_again(nodes: Any, clients: Any, q: str, count: int) -> list[str]:
    """Start node1 and node0 again, stop node0 (it must scale down fully now) and return
    what a consumer of ``q`` on node1 then receives."""
    nodes[1].start()
    nodes[0].start()
    nodes.wait_formed()
    assert nodes[0].stop() == 0
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}")
    return received(consumer, count)


def test_with_no_target_reachable_nothing_is_lost_and_the_next_stop_tries_again(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(2, node_options={0: {"extra_core": scale_down_xml("node1")}})
    q = unique("stay")
    sent = send_many(clients(nodes[0]), f"/queue/{q}", 25, "m")
    nodes[1].stop()
    assert nodes[0].stop(check=False) == 1
    log = nodes[0].log(since_start=True)
    assert "INCOMPLETE: no node to scale down to is reachable" in log, log[-2000:]
    assert "25 message(s) stay in this node's journal" in log, log[-2000:]

    # The next graceful stop, with the target back, moves them.
    assert sorted(stop_again(nodes, clients, q, 25)) == sorted(sent)


def test_a_target_that_dies_during_scale_down_loses_nothing(cluster: Any, clients: Any) -> None:
    nodes = cluster(2, node_options={0: {"extra_core": scale_down_xml("node1")}})
    q = unique("dies")
    sent = send_many(clients(nodes[0]), f"/queue/{q}", 200, "m")
    assert nodes[0].process is not None
    nodes[0].process.send_signal(signal.SIGTERM)
    nodes[1].kill()  # while node0 is choosing it, creating the queue or moving
    assert nodes[0].process.wait(30) in (0, 1)
    # Whatever was moved before the crash is in node1's journal, the rest in node0's: after
    # both come back and node0 stops again, node1 has every message exactly once.
    assert sorted(stop_again(nodes, clients, q, 200)) == sorted(sent)


def test_a_new_node_joins_through_one_member_and_receives_redistributed_backlog(
    cluster: Any, clients: Any
) -> None:
    settings = CLUSTER_ADDRESS_SETTINGS.replace(
        "<auto-create-queues>true</auto-create-queues>",
        "<auto-create-queues>true</auto-create-queues>\n"
        "        <redistribution-delay>0</redistribution-delay>",
    )
    # node2 is the new node: its only static connector is node1.
    nodes = cluster(3, start=False, static={0: [1], 1: [0], 2: [1]}, address_settings=settings)
    nodes.start(0, 1)
    wait_formed(nodes[:2])
    q = unique("backlog")
    sent = send_many(clients(nodes[0]), f"/queue/{q}", 40, "m")
    nodes.start(2)
    nodes.wait_formed()  # every node knows every other, node0 included
    consumer = clients(nodes[2])
    consumer.subscribe(f"/queue/{q}")
    assert sorted(received(consumer, 40)) == sorted(sent)
    # New messages reach it too, now that it has a consumer.
    more = send_many(clients(nodes[0]), f"/queue/{q}", 5, "n")
    consumer.wait_messages(45, timeout=20)
    assert sorted(m.body for m in consumer.messages[40:]) == sorted(more)


@pytest.mark.parametrize("paged", [False, True], ids=["in-memory", "paged"])
def test_the_others_send_what_waited_for_the_departed_node_to_the_target(
    cluster: Any, clients: Any, paged: bool
) -> None:
    # node2 gives up on a link to node0 that breaks (reconnect-attempts 0), so its backlog
    # for node0 is still waiting when node0 scales down. Paged: most of that backlog is in
    # node2's page files, and all of it goes, in order.
    count = 150 if paged else 20
    paging = {"extra_core": SMALL_MEMORY, "address_settings": FEW_DEPAGED} if paged else {}
    nodes = cluster(
        3,
        node_options={
            0: {"extra_core": scale_down_xml("node1")},
            2: {"cluster_extra": "<reconnect-attempts>0</reconnect-attempts>", **paging},
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
        sent = send_many(clients(nodes[2]), f"/queue/{q}", count, "m")
        assert disconnected(count)
    finally:
        nodes[0].process.send_signal(signal.SIGCONT)
    if paged:
        assert list((nodes[2].data_dir / "paging").glob("*/*.page")), "node2 must have paged"
    # node0 dials node2 again (node2 does not dial back), so it hears node0 leave.
    wait_for(
        lambda: any(m["incoming"] for m in status(nodes[2])["members"] if m["node_id"] == departed),
        message=lambda: f"node0 to link to node2 again: {status(nodes[2])}",
    )
    assert nodes[0].stop() == 0
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}", ack="client-individual", **{"consumer-window-size": "-1"})
    assert take_acking(consumer, count, key="body") == sent
    wait_for(
        lambda: not [b for b in status(nodes[2])["bridges"] if b["node_id"] == departed],
        message=lambda: f"node2 to drop its queue for node0: {status(nodes[2])}",
    )
    assert f"{count} message(s) that waited for node" in nodes[2].log(since_start=True)
