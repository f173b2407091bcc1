"""STOMP transactions: BEGIN / COMMIT / ABORT around sends and acknowledgements."""

from __future__ import annotations

from .conftest import unique


def received(client) -> list[str]:
    client.sync()
    return [m.body for m in client.messages]


def test_commit_makes_sends_visible_together(broker, clients):
    q = unique("/queue/txsend")
    consumer = clients(broker)
    consumer.subscribe(q)
    producer = clients(broker)
    tx = unique("tx")
    producer.begin(tx)
    for i in range(3):
        producer.send(q, f"t{i}", transaction=tx)  # each with a receipt
    assert received(consumer) == [], "transactional sends are invisible before COMMIT"
    producer.commit(tx)
    consumer.wait_messages(3)
    assert received(consumer) == ["t0", "t1", "t2"]


def test_abort_discards_sends(broker, clients):
    q = unique("/queue/txabort")
    consumer = clients(broker)
    consumer.subscribe(q)
    producer = clients(broker)
    tx = unique("tx")
    producer.begin(tx)
    producer.send(q, "discarded-1", transaction=tx)
    producer.send(q, "discarded-2", transaction=tx)
    producer.abort(tx)
    producer.send(q, "plain")
    consumer.wait_messages(1)
    assert received(consumer) == ["plain"]


def test_uncommitted_sends_are_discarded_when_the_connection_closes(broker, clients):
    q = unique("/queue/txclose")
    producer = clients(broker)
    tx = unique("tx")
    producer.begin(tx)
    producer.send(q, "never", transaction=tx)
    producer.disconnect()
    consumer = clients(broker)
    consumer.subscribe(q)
    assert received(consumer) == []


def test_acks_in_an_aborted_transaction_are_redelivered(broker, clients):
    q = unique("/queue/txack")
    producer = clients(broker)
    for i in range(2):
        producer.send(q, f"a{i}")
    consumer = clients(broker)
    consumer.subscribe(q, ack="client-individual")
    first = consumer.wait_messages(2)
    tx = unique("tx")
    consumer.begin(tx)
    for msg in first:
        consumer.ack(msg, transaction=tx)
    consumer.abort(tx)
    again = consumer.wait_messages(4)[2:]
    assert [m.body for m in again] == ["a0", "a1"]
    assert all(m.headers.get("redelivered") == "true" for m in again)
    # Acknowledged for real this time: nothing comes back after a reconnect.
    for msg in again:
        consumer.ack(msg)
    consumer.disconnect()
    check = clients(broker)
    check.subscribe(q)
    assert received(check) == []


def test_acks_in_a_committed_transaction_stick(broker, clients):
    q = unique("/queue/txcommitack")
    producer = clients(broker)
    for i in range(3):
        producer.send(q, f"c{i}")
    consumer = clients(broker)
    consumer.subscribe(q, ack="client-individual")
    msgs = consumer.wait_messages(3)
    tx = unique("tx")
    consumer.begin(tx)
    consumer.ack(msgs[0], transaction=tx)
    consumer.ack(msgs[2], transaction=tx)
    consumer.commit(tx)
    consumer.disconnect()
    check = clients(broker)
    check.subscribe(q)
    check.wait_messages(1)
    assert received(check) == ["c1"]


def test_acks_of_an_open_transaction_roll_back_on_disconnect(broker, clients):
    q = unique("/queue/txopenack")
    producer = clients(broker)
    producer.send(q, "o")
    consumer = clients(broker)
    consumer.subscribe(q, ack="client-individual")
    [msg] = consumer.wait_messages(1)
    tx = unique("tx")
    consumer.begin(tx)
    consumer.ack(msg, transaction=tx)
    consumer.drop()
    check = clients(broker)
    check.subscribe(q)
    [again] = check.wait_messages(1)
    assert again.body == "o"
    assert again.headers.get("redelivered") == "true"


def test_consume_and_produce_in_one_transaction(broker, clients):
    source, target = unique("/queue/src"), unique("/queue/dst")
    producer = clients(broker)
    producer.send(source, "work")
    worker = clients(broker)
    worker.subscribe(source, ack="client-individual")
    [msg] = worker.wait_messages(1)
    tx = unique("tx")
    worker.begin(tx)
    worker.ack(msg, transaction=tx)
    worker.send(target, "result", transaction=tx)
    worker.commit(tx)
    worker.disconnect()
    out = clients(broker)
    out.subscribe(target)
    out.wait_messages(1)
    assert received(out) == ["result"]
    src = clients(broker)
    src.subscribe(source)
    assert received(src) == []


def test_transactions_on_one_connection_are_independent(broker, clients):
    q = unique("/queue/txpair")
    consumer = clients(broker)
    consumer.subscribe(q)
    producer = clients(broker)
    t1, t2 = unique("t1"), unique("t2")
    producer.begin(t1)
    producer.begin(t2)
    producer.send(q, "from-t1", transaction=t1)
    producer.send(q, "from-t2", transaction=t2)
    producer.send(q, "no-tx")
    producer.abort(t2)
    producer.commit(t1)
    consumer.wait_messages(2)
    assert received(consumer) == ["no-tx", "from-t1"]


def test_a_transaction_name_can_be_reused_after_commit(broker, clients):
    q = unique("/queue/txreuse")
    producer = clients(broker)
    for round_ in range(2):
        producer.begin("same")
        producer.send(q, f"r{round_}", transaction="same")
        producer.commit("same")
    consumer = clients(broker)
    consumer.subscribe(q)
    consumer.wait_messages(2)
    assert received(consumer) == ["r0", "r1"]
