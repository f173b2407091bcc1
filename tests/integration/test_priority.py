"""Message priority with a real node and stomp.py: a queue hands out its higher-priority
messages first (FIFO within one priority), after a crash and restart too, and a priority
outside 0-9 is refused with an ERROR."""

from __future__ import annotations

from collections.abc import Callable

from .conftest import BrokerProcess, unique

ANYCAST = {"destination-type": "ANYCAST"}


def test_higher_priorities_are_delivered_first_also_after_a_restart(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    node = make_broker(prefixes=False, persistence=True)
    queue = unique("jobs")
    producer = node.client()
    sent = [(1, "a"), (9, "b"), (4, "c"), (9, "d"), (0, "e"), (4, "f")]
    for priority, body in sent:
        producer.send(queue, body, priority=str(priority), persistent="true", **ANYCAST)
    producer.close()
    node.restart(crash=True)
    consumer = node.client()
    consumer.subscribe(queue, ack="client-individual", **{"subscription-type": "ANYCAST"})
    consumer.wait_messages(len(sent))
    assert [m.body for m in consumer.messages] == ["b", "d", "c", "f", "a", "e"]
    assert [m.headers.get("priority") for m in consumer.messages[:2]] == ["9", "9"]


def test_a_priority_outside_0_to_9_is_refused(make_broker: Callable[..., BrokerProcess]) -> None:
    node = make_broker(prefixes=False)
    client = node.client()
    client.conn.send(unique("jobs"), "x", headers={"priority": "12", "receipt": "r", **ANYCAST})
    error = client.wait_error()
    assert "0 to 9" in error.headers.get("message", "") + error.body
