"""Message groups and exclusive queues with a real node and stomp.py (Artemis's "Message
Grouping" and "Exclusive Queues"): a group goes whole to one consumer and moves whole when
that consumer leaves; JMSXGroupSeq -1 ends a group; group-buckets 0 turns grouping off;
group-first-key marks a consumer's first message of a group; an exclusive queue (declared or
by default-exclusive-queue) feeds one consumer at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .conftest import BrokerProcess, Client, unique, wait_for

ANYCAST_SEND = {"destination-type": "ANYCAST"}
ANYCAST_SUB = {"subscription-type": "ANYCAST"}


def consumers(node: BrokerProcess, queue: str, count: int = 2, **headers: Any) -> list[Client]:
    made = []
    for _ in range(count):
        client = node.client()
        client.subscribe(queue, **ANYCAST_SUB, **headers)
        made.append(client)
    return made


def send(node: BrokerProcess, queue: str, bodies: list[str], **headers: Any) -> None:
    producer = node.client()
    try:
        for body in bodies:
            producer.send(queue, body, **ANYCAST_SEND, **headers)
    finally:
        producer.close()


def received(clients: list[Client], total: int) -> list[list[str]]:
    for client in clients:
        client.sync()
    got = [[m.body for m in c.messages] for c in clients]
    assert sum(len(g) for g in got) == total, got
    return got


def test_a_group_goes_whole_to_one_consumer_and_keeps_artemis_s_header(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    node = make_broker(prefixes=False)
    queue = unique("orders")
    a, b = consumers(node, queue)
    send(node, queue, [f"A{n}" for n in range(10)], JMSXGroupID="A")
    send(node, queue, [f"x{n}" for n in range(4)])  # no group: round robin
    got = received([a, b], 14)
    owner = got[0] if "A0" in got[0] else got[1]
    assert [body for body in owner if body.startswith("A")] == [f"A{n}" for n in range(10)]
    grouped = next(m for m in a.messages + b.messages if m.body == "A3")
    assert grouped.headers["_AMQ_GROUP_ID"] == "A"
    assert "JMSXGroupID" not in grouped.headers
    assert sorted(len([x for x in g if x.startswith("x")]) for g in got) == [2, 2]


def test_a_group_moves_whole_when_its_consumer_leaves(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    node = make_broker(prefixes=False)
    queue = unique("orders")
    first = node.client()
    first.subscribe(queue, ack="client-individual", **ANYCAST_SUB)
    second = node.client()
    second.subscribe(queue, ack="client-individual", **ANYCAST_SUB)
    send(node, queue, ["g0", "g1", "g2"], JMSXGroupID="G")
    wait_for(lambda: len(first.messages) + len(second.messages) == 3, 10, message="3 messages")
    owner, other = (first, second) if first.messages else (second, first)
    assert len(owner.messages) == 3
    owner.ack(owner.messages[0])
    owner.close()  # g1 and g2 were not acknowledged: they come back
    send(node, queue, ["g3"], JMSXGroupID="G")
    other.wait_messages(3)
    other.sync()
    assert [m.body for m in other.messages] == ["g1", "g2", "g3"]


def test_sequence_minus_one_ends_a_group(make_broker: Callable[..., BrokerProcess]) -> None:
    node = make_broker(prefixes=False)
    queue = unique("orders")
    a, b = consumers(node, queue)
    send(node, queue, ["one"], JMSXGroupID="S")
    send(node, queue, ["last"], JMSXGroupID="S", JMSXGroupSeq="-1")
    send(node, queue, ["next"], JMSXGroupID="S")  # a new group: the other consumer's turn
    got = received([a, b], 3)
    assert sorted(got) == [["next"], ["one", "last"]]


def test_group_buckets_0_turns_grouping_off_and_first_key_marks_the_first(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    off, marked = unique("off"), unique("marked")
    addresses = (
        f'<address name="{off}"><anycast><queue name="{off}" group-buckets="0"/></anycast>'
        f'</address><address name="{marked}"><anycast>'
        f'<queue name="{marked}" group-first-key="JMSXGroupFirstForConsumer"/></anycast></address>'
    )
    node = make_broker(prefixes=False, addresses=addresses)
    a, b = consumers(node, off)
    send(node, off, ["1", "2", "3", "4"], JMSXGroupID="A")
    assert sorted(len(g) for g in received([a, b], 4)) == [2, 2]

    (c,) = consumers(node, marked, count=1)
    send(node, marked, ["first", "second"], JMSXGroupID="M")
    c.wait_messages(2)
    flags = [m.headers.get("JMSXGroupFirstForConsumer") for m in c.messages]
    assert flags == ["true", None]


def test_an_exclusive_queue_feeds_one_consumer_until_it_leaves(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    declared, by_default = unique("declared"), unique("defaulted")
    node = make_broker(
        prefixes=False,
        addresses=f'<address name="{declared}"><anycast><queue name="{declared}" '
        'exclusive="true"/></anycast></address>',
        address_settings=f'<address-setting match="{by_default}"><default-exclusive-queue>'
        "true</default-exclusive-queue></address-setting>",
    )
    for queue in (declared, by_default):
        a, b = consumers(node, queue)
        send(node, queue, [f"m{n}" for n in range(6)])
        got = received([a, b], 6)
        assert sorted(len(g) for g in got) == [0, 6], got
        sole, other = (a, b) if got[0] else (b, a)
        sole.close()
        send(node, queue, ["after"])
        other.wait_messages(1)
        assert [m.body for m in other.messages] == ["after"]
        other.close()


def test_a_group_id_far_too_long_is_refused(make_broker: Callable[..., BrokerProcess]) -> None:
    node = make_broker(prefixes=False)
    client = node.client()
    client.conn.send(unique("orders"), "x", headers={"JMSXGroupID": "g" * 5000, "receipt": "r"})
    error = client.wait_error()
    assert "at most 1024" in error.headers.get("message", "") + error.body
