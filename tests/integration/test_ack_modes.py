"""Acknowledgement modes, redelivery, NACK, dead-lettering and consumer windows.

Every "nothing more arrived" check goes through ``sync()`` (a receipt round trip), never a
sleep: once its RECEIPT is in, every delivery the broker had made is in too.
"""

from __future__ import annotations

import pytest

from .conftest import unique


def fill(client, destination: str, count: int, prefix: str = "m", **headers) -> list[str]:
    bodies = [f"{prefix}{i}" for i in range(count)]
    for body in bodies:
        client.send(destination, body, **headers)
    return bodies


def drain(clients, broker, destination: str, expect: int, **options):
    """A fresh consumer's view of the queue: exactly ``expect`` messages, then nothing."""
    c = clients(broker, **options)
    c.subscribe(destination)
    msgs = c.wait_messages(expect) if expect else []
    c.sync()
    assert len(c.messages) == expect, [m.body for m in c.messages]
    return msgs


def test_auto_ack_needs_no_ack_and_nothing_is_redelivered(broker, clients):
    q = unique("/queue/auto")
    producer = clients(broker)
    bodies = fill(producer, q, 5)
    consumer = clients(broker)
    consumer.subscribe(q, ack="auto")
    assert [m.body for m in consumer.wait_messages(5)] == bodies
    assert all("ack" not in m.headers for m in consumer.messages)
    consumer.drop()
    drain(clients, broker, q, 0)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_client_ack_is_cumulative(broker, clients, version):
    q = unique("/queue/cumulative")
    producer = clients(broker)
    bodies = fill(producer, q, 5)
    consumer = clients(broker, version=version)
    consumer.subscribe(q, ack="client")
    msgs = consumer.wait_messages(5)
    assert [m.body for m in msgs] == bodies
    consumer.ack(msgs[2])  # covers m0, m1, m2
    consumer.disconnect()
    again = drain(clients, broker, q, 2)
    assert [m.body for m in again] == ["m3", "m4"]
    assert all(m.headers.get("redelivered") == "true" for m in again)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_client_individual_ack_acks_one(broker, clients, version):
    q = unique("/queue/individual")
    producer = clients(broker)
    fill(producer, q, 5)
    consumer = clients(broker, version=version)
    consumer.subscribe(q, ack="client-individual")
    msgs = consumer.wait_messages(5)
    consumer.ack(msgs[1])
    consumer.ack(msgs[3])
    consumer.disconnect()
    again = drain(clients, broker, q, 3)
    assert [m.body for m in again] == ["m0", "m2", "m4"]
    assert all(m.headers.get("redelivered") == "true" for m in again)


def test_unacked_messages_are_redelivered_when_the_connection_dies(broker, clients):
    q = unique("/queue/dies")
    producer = clients(broker)
    fill(producer, q, 3)
    consumer = clients(broker)
    consumer.subscribe(q, ack="client-individual")
    first = consumer.wait_messages(3)
    assert all(m.headers.get("redelivered") in (None, "false") for m in first)
    consumer.drop()  # socket closed, no DISCONNECT
    again = drain(clients, broker, q, 3)
    assert [m.body for m in again] == ["m0", "m1", "m2"]
    assert all(m.headers.get("redelivered") == "true" for m in again)


def test_unacked_messages_are_redelivered_when_the_subscription_ends(broker, clients):
    q = unique("/queue/unsub")
    producer = clients(broker)
    fill(producer, q, 2)
    consumer = clients(broker)
    sub = consumer.subscribe(q, ack="client")
    consumer.wait_messages(2)
    consumer.unsubscribe(sub)
    consumer.clear()
    consumer.subscribe(q, ack="client")  # same connection, new subscription
    again = consumer.wait_messages(2)
    assert [m.body for m in again] == ["m0", "m1"]
    assert all(m.headers.get("redelivered") == "true" for m in again)


def test_redelivered_message_goes_to_another_consumer(broker, clients):
    q = unique("/queue/other")
    producer = clients(broker)
    fill(producer, q, 1)
    first = clients(broker)
    first.subscribe(q, ack="client-individual", **{"consumer-window-size": "0"})
    first.wait_messages(1)
    second = clients(broker)
    second.subscribe(q, ack="client-individual")
    second.sync()
    assert second.messages == []  # the message is in flight to the first consumer
    first.drop()
    [msg] = second.wait_messages(1)
    assert msg.body == "m0"
    assert msg.headers.get("redelivered") == "true"


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_nack_redelivers(broker, clients, version):
    q = unique("/queue/nack")
    producer = clients(broker)
    fill(producer, q, 1)
    consumer = clients(broker, version=version)
    consumer.subscribe(q, ack="client-individual")
    [msg] = consumer.wait_messages(1)
    consumer.nack(msg)
    msgs = consumer.wait_messages(2)
    assert msgs[1].body == "m0"
    assert msgs[1].headers.get("redelivered") == "true"
    consumer.ack(msgs[1])
    consumer.disconnect()
    drain(clients, broker, q, 0)


def test_nack_in_client_mode_is_cumulative(broker, clients):
    q = unique("/queue/nackcum")
    producer = clients(broker)
    fill(producer, q, 3)
    consumer = clients(broker)
    consumer.subscribe(q, ack="client")
    msgs = consumer.wait_messages(3)
    consumer.nack(msgs[1])  # m0 and m1 come back; m2 stays with us
    redelivered = consumer.wait_messages(5)[3:]
    assert sorted(m.body for m in redelivered) == ["m0", "m1"]
    assert all(m.headers.get("redelivered") == "true" for m in redelivered)


# --- dead letters -------------------------------------------------------------------------------


@pytest.fixture
def dlq_node(make_broker):
    """A node of its own, so its DLQ holds only this test's messages (max attempts 3)."""
    return make_broker()


def test_nacked_message_is_dead_lettered_after_max_delivery_attempts(dlq_node, clients):
    q = unique("/queue/poison")
    producer = clients(dlq_node)
    producer.send(q, "poison", **{"x-tag": "kept"})
    consumer = clients(dlq_node)
    consumer.subscribe(q, ack="client-individual")
    for attempt in range(1, 4):
        msgs = consumer.wait_messages(attempt)
        consumer.nack(msgs[-1])
    consumer.sync()
    assert len(consumer.messages) == 3, "max-delivery-attempts is 3: exactly three deliveries"
    assert [m.headers.get("redelivered") for m in consumer.messages][1:] == ["true", "true"]
    dead = drain(clients, dlq_node, "/queue/DLQ", 1)
    assert dead[0].body == "poison"
    assert dead[0].headers.get("x-tag") == "kept"
    assert dead[0].headers.get("_AMQ_ORIG_ADDRESS") == q.removeprefix("/queue/")
    consumer.disconnect()
    drain(clients, dlq_node, q, 0)


def test_delivery_attempts_count_across_dropped_connections(dlq_node, clients):
    q = unique("/queue/crashy")
    producer = clients(dlq_node)
    producer.send(q, "crashes-consumers")
    for attempt in range(3):
        consumer = clients(dlq_node)
        consumer.subscribe(q, ack="client")
        [msg] = consumer.wait_messages(1)
        assert (msg.headers.get("redelivered") == "true") == (attempt > 0)
        consumer.drop()
    drain(clients, dlq_node, q, 0)
    dead = drain(clients, dlq_node, "/queue/DLQ", 1)
    assert dead[0].body == "crashes-consumers"


def test_without_dead_letter_address_the_message_is_dropped(make_broker, clients):
    node = make_broker(
        address_settings="""
      <address-setting match="#">
        <max-delivery-attempts>2</max-delivery-attempts>
      </address-setting>""",
        addresses="",
    )
    q = unique("/queue/nodlq")
    producer = clients(node)
    producer.send(q, "x")
    consumer = clients(node)
    consumer.subscribe(q, ack="client-individual")
    consumer.nack(consumer.wait_messages(1)[0])
    consumer.nack(consumer.wait_messages(2)[1])
    consumer.sync()
    assert len(consumer.messages) == 2
    consumer.disconnect()
    drain(clients, node, q, 0)


# --- consumer windows ---------------------------------------------------------------------------


@pytest.mark.parametrize("ack", ["client", "client-individual"])
def test_window_size_zero_delivers_one_at_a_time(broker, clients, ack):
    q = unique("/queue/w0")
    producer = clients(broker)
    bodies = fill(producer, q, 4)
    consumer = clients(broker)
    consumer.subscribe(q, ack=ack, **{"consumer-window-size": "0"})
    got = []
    for i in range(4):
        msgs = consumer.wait_messages(i + 1)
        consumer.sync()
        assert len(consumer.messages) == i + 1, "window 0: one unacknowledged message at a time"
        got.append(msgs[i].body)
        consumer.ack(msgs[i])
    assert got == bodies


def test_window_size_in_bytes_limits_unacked_deliveries(broker, clients):
    q = unique("/queue/wn")
    producer = clients(broker)
    fill(producer, q, 10, prefix="x" * 1000)
    consumer = clients(broker)
    consumer.subscribe(q, ack="client-individual", **{"consumer-window-size": "2500"})
    consumer.wait_messages(2)
    consumer.sync()
    first = consumer.messages
    # ~1 KiB messages in a 2500-byte window: two fit, a third may overshoot it.
    assert 2 <= len(first) <= 3, len(first)
    for msg in first:
        consumer.ack(msg)
    consumer.wait_messages(len(first) + 2)
    consumer.sync()
    assert len(consumer.messages) <= 2 * len(first)


def test_default_window_applies_to_client_acks(broker, clients):
    q = unique("/queue/wdefault")
    producer = clients(broker)
    fill(producer, q, 30, prefix="y" * 1000)
    consumer = clients(broker)
    consumer.subscribe(q, ack="client")
    consumer.wait_messages(5)
    consumer.sync()
    # Default stompConsumerWindowSize is 10240 bytes: about ten 1 KiB messages, not 30.
    assert 9 <= len(consumer.messages) <= 11, len(consumer.messages)
    consumer.ack(consumer.messages[-1])
    consumer.wait_messages(18)


def test_window_minus_one_is_unlimited(broker, clients):
    q = unique("/queue/wunlimited")
    producer = clients(broker)
    fill(producer, q, 30, prefix="z" * 1000)
    consumer = clients(broker)
    consumer.subscribe(q, ack="client", **{"consumer-window-size": "-1"})
    consumer.wait_messages(30)


def test_auto_ack_is_not_limited_by_the_window(broker, clients):
    q = unique("/queue/wauto")
    producer = clients(broker)
    fill(producer, q, 20, prefix="a" * 1000)
    consumer = clients(broker)
    consumer.subscribe(q, ack="auto", **{"consumer-window-size": "0"})
    consumer.wait_messages(20)


def test_a_consumer_that_stops_reading_does_not_stall_others(broker, clients, raw_clients):
    slow_q, fast_q = unique("/queue/slow"), unique("/queue/fast")
    slow = raw_clients(broker)
    slow.connect("1.2")
    assert slow.receipt("SUBSCRIBE", {"destination": slow_q, "id": "s"}).command == "RECEIPT"
    # The slow consumer now stops reading its socket; ~8 MiB go its way.
    producer = clients(broker)
    chunk = "s" * 65536
    for i in range(128):
        producer.send(slow_q, f"{i}:{chunk}", receipt=(i % 16 == 15))
    fast = clients(broker)
    fast.subscribe(fast_q)
    producer.send(fast_q, "unaffected")
    assert fast.wait_messages(1)[0].body == "unaffected"
    # When it reads again it gets everything, in order.
    got = [int(slow.read_until("MESSAGE").body.split(b":", 1)[0]) for _ in range(128)]
    assert got == list(range(128))
