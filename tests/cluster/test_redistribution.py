"""Message redistribution (clusters §7): messages follow consumers to other nodes.

Modelled on Artemis's MessageRedistributionTest scenarios: a consumer closes and its backlog
moves to the nodes that still consume; a delay holds the move back and a returning consumer
cancels it; selectors decide the target; STRICT never redistributes; messages follow a
consumer back and forth.
"""

from __future__ import annotations

from typing import Any

from .conftest import (
    CLUSTER_ADDRESS_SETTINGS,
    Client,
    node_id,
    stays,
    unique,
    wait_binding,
    wait_for,
)


def settings(delay: int) -> str:
    return CLUSTER_ADDRESS_SETTINGS.replace(
        "<auto-create-queues>true</auto-create-queues>",
        f"<auto-create-queues>true</auto-create-queues>\n"
        f"        <redistribution-delay>{delay}</redistribution-delay>",
    )


def bodies(client: Client) -> list[str]:
    return [m.body for m in client.messages]


def backlog(producer: Client, queue: str, count: int, **headers: Any) -> list[str]:
    sent = [f"{queue}-{i}" for i in range(count)]
    for body in sent:
        producer.send(f"/queue/{queue}", body, persistent="true", **headers)
    return sent


def test_backlog_moves_to_a_consumer_that_appears_on_another_node(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(2, address_settings=settings(0))
    q = unique("redis")
    sent = backlog(clients(nodes[0]), q, 20)  # nobody consumes: ON_DEMAND keeps them on node 0
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}")
    consumer.wait_messages(20)
    consumer.sync()
    assert sorted(bodies(consumer)) == sorted(sent)


def test_backlog_of_a_closed_consumer_moves_round_robin_to_the_remaining_nodes(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(3, address_settings=settings(0))
    q = unique("redis")
    leaving = clients(nodes[0])
    sub = leaving.subscribe(f"/queue/{q}", ack="client-individual")
    stayers = [clients(nodes[1]), clients(nodes[2])]
    for c in stayers:
        # Consumers that take nothing yet: a selector no message matches (moved later).
        c.subscribe(f"/queue/{q}", selector="ready = 'yes'")
    for node in nodes[1:]:
        wait_binding(nodes[0], q, on=node, consumers=1)
    sent = backlog(clients(nodes[0]), q, 12, ready="yes")
    # ON_DEMAND spread them over the three consumers; the one on node 0 does not ack.
    wait_for(lambda: len(leaving.messages) == 4, message=lambda: f"{bodies(leaving)}")
    leaving.unsubscribe(sub)  # its 4 go back to node 0's queue with no local consumer left
    for c in stayers:
        c.wait_messages(6)
        c.sync()
    got = bodies(stayers[0]) + bodies(stayers[1])
    assert sorted(got) == sorted(sent)
    assert len(bodies(stayers[0])) == len(bodies(stayers[1])) == 6


def test_nothing_moves_before_the_delay_and_a_returning_consumer_cancels_it(
    cluster: Any, clients: Any
) -> None:
    nodes = cluster(2, address_settings=settings(3000))
    q = unique("delay")
    local = clients(nodes[0])
    sub = local.subscribe(f"/queue/{q}", selector="never = 1")  # creates the queue
    remote = clients(nodes[1])
    remote.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    local.unsubscribe(sub)
    # A backlog on node 0 (sent there with a FQQN, so initial distribution cannot move it).
    producer = clients(nodes[0])
    for i in range(5):
        producer.send(f"{q}::{q}", f"m{i}", persistent="true", **{"destination-type": "ANYCAST"})
    # Nothing moves for 1 s, well inside the 3 s delay even on a loaded machine (the
    # delay itself is timed in tests/unit/cluster/test_redistributor.py, on a virtual clock).
    stays(lambda: bodies(remote) == [], 1.0, message="node 1 receiving nothing")
    back = clients(nodes[0])
    back.subscribe(f"/queue/{q}")  # a local consumer returns: the move is cancelled
    back.wait_messages(5)
    # Nothing moves until well past the moment the delay would have ended.
    stays(lambda: bodies(remote) == [], 3.5, message="node 1 receiving nothing")


def test_selectors_decide_where_messages_move(cluster: Any, clients: Any) -> None:
    nodes = cluster(3, address_settings=settings(0))
    q = unique("sel")
    backlog_sent = {"red": [], "blue": []}  # type: dict[str, list[str]]
    producer = clients(nodes[0])
    for i in range(10):
        color = "red" if i % 2 else "blue"
        body = f"{color}-{i}"
        backlog_sent[color].append(body)
        producer.send(f"/queue/{q}", body, persistent="true", color=color)
    red, blue = clients(nodes[1]), clients(nodes[2])
    red.subscribe(f"/queue/{q}", selector="color = 'red'")
    blue.subscribe(f"/queue/{q}", selector="color = 'blue'")
    red.wait_messages(5)
    blue.wait_messages(5)
    red.sync()
    blue.sync()
    assert sorted(bodies(red)) == sorted(backlog_sent["red"])
    assert sorted(bodies(blue)) == sorted(backlog_sent["blue"])


def test_strict_does_not_redistribute(cluster: Any, clients: Any) -> None:
    nodes = cluster(2, policy="STRICT", address_settings=settings(0))
    q = unique("strict")
    creator = clients(nodes[0])
    creator.unsubscribe(creator.subscribe(f"/queue/{q}"))  # the queue, kept without consumers
    producer = clients(nodes[0])
    producer.send(f"{q}::{q}", "stays", persistent="true", **{"destination-type": "ANYCAST"})
    remote = clients(nodes[1])
    remote.subscribe(f"/queue/{q}")
    wait_binding(nodes[0], q, on=nodes[1], consumers=1)
    stays(lambda: bodies(remote) == [], 1.0, message="node 1 receiving nothing")
    local = clients(nodes[0])
    local.subscribe(f"/queue/{q}")
    assert [m.body for m in local.wait_messages(1)] == ["stays"]


def test_messages_follow_a_consumer_back_and_forth(cluster: Any, clients: Any) -> None:
    nodes = cluster(2, address_settings=settings(0))
    q = unique("pingpong")
    producer = clients(nodes[0])
    received: list[str] = []
    for round_ in range(3):
        at = nodes[round_ % 2]
        sent = [f"r{round_}-{i}" for i in range(5)]
        for body in sent:
            producer.send(f"/queue/{q}", body, persistent="true")
        consumer = clients(at)
        consumer.subscribe(f"/queue/{q}")
        consumer.wait_messages(5)
        consumer.sync()
        received += bodies(consumer)
        consumer.close()
    assert sorted(received) == sorted(f"r{r}-{i}" for r in range(3) for i in range(5))


def test_a_queue_owned_by_a_reader_by_offset_is_never_redistributed(
    cluster: Any, clients: Any
) -> None:
    """acknowledgeUpTo gives the queue an offset mark: its messages keep their offsets on
    their node, so a consumer elsewhere does not pull them; removeOffsetMarks ends that."""
    nodes = cluster(2, address_settings=settings(0))
    q = unique("owned")
    sent = backlog(clients(nodes[0]), q, 5)
    manager = clients(nodes[0])
    manager.send(
        "activemq.management",
        f'["{node_id(nodes[0])}", 0]',
        _AMQ_ResourceName=f"queue.{q}",
        _AMQ_OperationName="acknowledgeUpTo",
    )
    consumer = clients(nodes[1])
    consumer.subscribe(f"/queue/{q}")
    stays(lambda: not consumer.messages, 1.5, message="no message redistributed")
    manager.send(
        "activemq.management",
        "[]",
        _AMQ_ResourceName=f"queue.{q}",
        _AMQ_OperationName="removeOffsetMarks",
    )
    # The next consumer change makes the node look at the queue again.
    clients(nodes[1]).subscribe(f"/queue/{q}", selector="never = 'yes'")
    consumer.wait_messages(5)
    assert sorted(bodies(consumer)) == sorted(sent)
