"""Persistence across restarts and crashes (``<persistence-enabled>true``).

A RECEIPT for a ``persistent:true`` SEND is a promise that the message survives anything,
SIGKILL included; an ACK's RECEIPT is a promise that the message is gone for good. These
tests hold the node to both with graceful restarts (SIGTERM, exit 0) and kill -9.
"""

from __future__ import annotations

import re
import threading
import time

import pytest

from .conftest import Client, encode_frame, start_refused, unique, wait_for

PERSISTENT = {"persistent": "true"}


@pytest.fixture
def node(make_broker):
    return make_broker(persistence=True)


def drain(clients, node, destination: str, expect: int | None = None, **sub_headers) -> list:
    """Consume everything now in ``destination`` and return the MESSAGE frames.

    Acknowledged with one cumulative client ACK whose RECEIPT means the acks are durable
    (auto-acks are not synchronous, in Artemis either), so a crash right after cannot bring
    the drained messages back.
    """
    c = clients(node)
    c.subscribe(destination, ack="client", **{"consumer-window-size": "-1"}, **sub_headers)
    if expect is not None:
        c.wait_messages(expect)
    # Until a round trip brings nothing new: the queue had all it will have at subscribe.
    previous = -1
    while len(c.messages) != previous:
        previous = len(c.messages)
        c.sync()
    if expect is not None:
        assert len(c.messages) == expect, [m.body for m in c.messages]
    if c.messages:
        c.ack(c.messages[-1])
    c.disconnect()
    return c.messages


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "sigkill"])
def test_restart_keeps_persistent_messages(node, clients, crash):
    q = unique("/queue/keep")
    producer = clients(node)
    for i in range(5):
        producer.send(q, f"p{i}", **PERSISTENT, **{"x-seq": str(i)})
    node.restart(crash=crash)
    msgs = drain(clients, node, q, 5)
    assert [m.body for m in msgs] == [f"p{i}" for i in range(5)]
    assert [m.headers.get("x-seq") for m in msgs] == [str(i) for i in range(5)]
    assert all(m.headers.get("persistent") == "true" for m in msgs)
    # Consumed: they are gone after another restart.
    node.restart(crash=crash)
    drain(clients, node, q, 0)


def test_restart_keeps_bodies_and_headers_byte_for_byte(node, raw_clients):
    q = unique("/queue/bytes")
    body = bytes(range(256)) + b"\x00tail\x00"
    weird = "colon:newline\nbackslash\\cr\rüñí"
    raw = raw_clients(node)
    raw.connect("1.2")
    headers = [
        ("destination", q),
        ("persistent", "true"),
        ("x-weird", weird),
        ("priority", "6"),
        ("content-length", str(len(body))),
    ]
    assert raw.receipt("SEND", headers, body).command == "RECEIPT"
    node.restart(crash=True)
    raw = raw_clients(node)
    raw.connect("1.2")
    assert raw.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"
    msg = raw.read_until("MESSAGE")
    assert msg.body == body
    assert msg.get("x-weird") == weird
    assert msg.get("priority") == "6"
    assert msg.get("persistent") == "true"


def test_non_persistent_messages_are_gone_after_restart(node, clients):
    q = unique("/queue/mixed")
    producer = clients(node)
    producer.send(q, "durable-1", **PERSISTENT)
    producer.send(q, "transient")
    producer.send(q, "durable-2", **PERSISTENT)
    producer.send(q, "transient-explicit", persistent="false")
    # Before the restart all four are there (checked on a queue of the same kind).
    node.restart()
    msgs = drain(clients, node, q, 2)
    assert [m.body for m in msgs] == ["durable-1", "durable-2"]


def test_acknowledged_messages_stay_acknowledged_after_a_crash(node, clients):
    q = unique("/queue/acked")
    producer = clients(node)
    for i in range(6):
        producer.send(q, f"a{i}", **PERSISTENT)
    consumer = clients(node)
    consumer.subscribe(q, ack="client-individual")
    msgs = consumer.wait_messages(6)
    for msg in msgs[::2]:
        consumer.ack(msg)  # waits for the ACK's RECEIPT
    node.restart(crash=True)
    left = drain(clients, node, q, 3)
    assert [m.body for m in left] == ["a1", "a3", "a5"]


def test_restart_keeps_durable_subscriptions_and_their_messages(node, clients):
    t = unique("/topic/news")
    client_id = unique("cid")
    durable = {"durable-subscription-name": "sub"}
    reader = clients(node, client_id=client_id)
    reader.subscribe(t, **durable)
    reader.disconnect()
    producer = clients(node)
    producer.send(t, "before-restart", **PERSISTENT)
    node.restart()
    # The subscription itself survived: it collects messages sent while its owner is away.
    producer = clients(node)
    producer.send(t, "after-restart", **PERSISTENT)
    back = clients(node, client_id=client_id)
    back.subscribe(t, **durable)
    back.wait_messages(2)
    back.sync()
    assert [m.body for m in back.messages] == ["before-restart", "after-restart"]


def test_durable_subscription_keeps_its_selector_after_restart(node, clients):
    t = unique("/topic/picky")
    client_id = unique("cid")
    durable = {"durable-subscription-name": "s", "selector": "kind = 'wanted'"}
    c = clients(node, client_id=client_id)
    c.subscribe(t, **durable)
    c.disconnect()
    node.restart(crash=True)
    producer = clients(node)
    producer.send(t, "unwanted", kind="other", **PERSISTENT)
    producer.send(t, "wanted", kind="wanted", **PERSISTENT)
    back = clients(node, client_id=client_id)
    back.subscribe(t, **durable)
    back.wait_messages(1)
    back.sync()
    assert [m.body for m in back.messages] == ["wanted"]


def test_restart_keeps_addresses_and_queues(node, clients):
    address = unique("addr")
    # A multicast queue created through its FQQN, and an auto-created anycast queue, each
    # holding a message; nobody is subscribed to either when the node stops. (Empty, they
    # would go at the start: Artemis's initial auto-delete check, test_auto_delete.py.)
    creator = clients(node)
    sub = creator.subscribe(f"{address}::kept", **{"subscription-type": "MULTICAST"})
    creator.unsubscribe(sub)
    creator.send(f"/topic/{address}", "routed-before", **PERSISTENT)
    anycast = unique("/queue/auto")
    creator.send(anycast, "holding", **PERSISTENT)
    node.restart(crash=True)
    producer = clients(node)
    producer.send(f"/topic/{address}", "routed-after-restart", **PERSISTENT)
    msgs = drain(clients, node, f"{address}::kept", 2)
    assert [m.body for m in msgs] == ["routed-before", "routed-after-restart"]
    assert [m.body for m in drain(clients, node, anycast, 1)] == ["holding"]


def test_restart_keeps_delivery_counts(node, clients):
    q = unique("/queue/counted")
    producer = clients(node)
    producer.send(q, "flaky", **PERSISTENT)
    # Two failed deliveries (max-delivery-attempts is 3) ...
    for attempt in range(2):
        consumer = clients(node)
        consumer.subscribe(q, ack="client")
        [msg] = consumer.wait_messages(1)
        assert (msg.headers.get("redelivered") == "true") == (attempt > 0)
        consumer.disconnect()
    node.restart()
    # ... so after the restart it is a redelivery, and the third failure dead-letters it.
    consumer = clients(node)
    consumer.subscribe(q, ack="client-individual")
    [msg] = consumer.wait_messages(1)
    assert msg.headers.get("redelivered") == "true"
    consumer.nack(msg)
    consumer.sync()
    assert len(consumer.messages) == 1, "the third failed delivery was the last"
    dead = drain(clients, node, "/queue/DLQ", 1)
    assert dead[0].body == "flaky"


def test_committed_transaction_survives_a_crash_and_open_one_does_not(node, clients):
    q = unique("/queue/txp")
    producer = clients(node)
    producer.begin("done")
    producer.send(q, "committed-1", transaction="done", **PERSISTENT)
    producer.send(q, "committed-2", transaction="done", **PERSISTENT)
    producer.commit("done")
    producer.begin("open")
    producer.send(q, "uncommitted", transaction="open", **PERSISTENT)
    node.restart(crash=True)
    msgs = drain(clients, node, q, 2)
    assert [m.body for m in msgs] == ["committed-1", "committed-2"]


def test_graceful_stop_returns_deliveries_with_their_delivery_count(node, clients):
    q = unique("/queue/inflight")
    producer = clients(node)
    producer.send(q, "unacked", **PERSISTENT)
    consumer = clients(node)
    consumer.subscribe(q, ack="client")
    [first] = consumer.wait_messages(1)
    assert first.headers.get("redelivered") in (None, "false")
    node.restart()  # SIGTERM with the delivery outstanding; must still exit 0
    [again] = drain(clients, node, q, 1)
    assert again.body == "unacked"
    assert again.headers.get("redelivered") == "true"


def test_journal_churn_with_reclaim_and_compaction_survives_crashes(make_broker, clients):
    """~16 MiB through 1 MiB journal files: dead files are reclaimed, the few live records
    (one kept message per round, written mid-churn) are compacted, and a crash at the end
    loses nothing and resurrects nothing."""
    node = make_broker(
        persistence=True,
        extra_core="<journal-compact-min-files>3</journal-compact-min-files>"
        "<journal-pool-files>2</journal-pool-files>",
    )
    churn, keep = unique("/queue/churn"), unique("/queue/keep")
    producer = clients(node)
    consumer = clients(node)
    consumer.subscribe(churn, ack="auto")
    filler = "x" * 4000
    for round_ in range(4):
        for i in range(1000):
            if i == 500:
                producer.send(keep, f"k{round_}", **PERSISTENT)
            producer.send(churn, f"{round_}-{i}-{filler}", receipt=(i % 200 == 199), **PERSISTENT)
        consumer.wait_messages(1000 * (round_ + 1), timeout=20)
    assert len(consumer.messages) == 4000
    consumer.disconnect()
    files = sorted(p.name for p in (node.data_dir / "journal").iterdir())
    node.restart(crash=True)
    drain(clients, node, churn, 0)
    assert [m.body for m in drain(clients, node, keep, 4)] == ["k0", "k1", "k2", "k3"], files
    node.restart(crash=True)
    drain(clients, node, keep, 0)


# --- the crash test -----------------------------------------------------------------------------


class Producer(threading.Thread):
    """Sends numbered persistent messages with receipts, pipelined, until the node dies."""

    def __init__(self, port: int, destination: str, window: int = 100) -> None:
        super().__init__(daemon=True)
        self.client = Client(port)
        self.destination = destination
        self.window = window
        self.sent = 0
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def receipted(self) -> set[int]:
        return {int(r.rpartition("-")[2]) for r in self.client.receipts if r.startswith("n-")}

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                # Keep at most `window` sends awaiting their receipts (group commit).
                while self.sent - len(self.client.receipts) >= self.window:
                    if self.client.listener.disconnected.is_set():
                        return
                    time.sleep(0.001)
                self.client.conn.send(
                    self.destination,
                    f"n{self.sent}",
                    headers={
                        "receipt": f"n-{self.sent}",
                        "persistent": "true",
                        "x-n": str(self.sent),
                    },
                )
                self.sent += 1
        except Exception as exc:  # the node was killed under us: expected
            self.error = exc


def test_sigkill_mid_stream_loses_no_receipted_message(node, clients):
    q = unique("/queue/crash")
    producer = Producer(node.port, q)
    producer.start()
    try:
        wait_for(
            lambda: len(producer.receipted()) >= 1500,
            30,
            message=lambda: f"1500 receipts, have {len(producer.receipted())}",
        )
        node.kill()  # mid-stream: sends are still in flight
        receipted = producer.receipted()
        sent = producer.sent
    finally:
        producer.stopped.set()
        producer.join(10)
        producer.client.close()
    assert sent > len(receipted), "the kill should have caught sends in flight"

    node.start()
    msgs = drain(clients, node, q)
    numbers = [int(m.headers["x-n"]) for m in msgs]
    missing = sorted(receipted - set(numbers))
    assert not missing, f"{len(missing)} receipted messages lost, e.g. {missing[:10]}"
    fresh = [
        n for m, n in zip(msgs, numbers, strict=True) if m.headers.get("redelivered") != "true"
    ]
    duplicates = sorted({n for n in fresh if fresh.count(n) > 1})
    assert not duplicates, f"messages present twice: {duplicates[:10]}"
    assert all(0 <= n < sent for n in numbers), "a message nobody sent"
    assert fresh == sorted(fresh), "one producer, one queue: recovery keeps the send order"
    assert all(m.body == f"n{n}" for m, n in zip(msgs, numbers, strict=True)), "bodies intact"


def test_sigkill_with_a_consumer_acking(node, clients):
    """Acked-with-receipt messages never come back; every receipted one is somewhere."""
    q = unique("/queue/crashack")
    producer = clients(node)
    for i in range(300):
        producer.send(q, f"c{i}", receipt=False, **PERSISTENT, **{"x-n": str(i)})
    producer.send(q, "c-last", **PERSISTENT, **{"x-n": "300"})  # receipt: all 301 are durable
    consumer = clients(node)
    consumer.subscribe(q, ack="client-individual")
    msgs = consumer.wait_messages(5)
    acked = set()
    for msg in msgs[:5]:
        consumer.ack(msg)
        acked.add(int(msg.headers["x-n"]))
    node.kill()
    node.start()
    after = drain(clients, node, q)
    numbers = [int(m.headers["x-n"]) for m in after]
    assert not acked & set(numbers), f"acknowledged messages came back: {acked & set(numbers)}"
    assert set(numbers) | acked == set(range(301))
    assert len(numbers) == len(set(numbers))


class TxProducer(threading.Thread):
    """Commits transactions of 5 numbered persistent messages, one after another."""

    def __init__(self, port: int, destination: str) -> None:
        super().__init__(daemon=True)
        self.client = Client(port)
        self.destination = destination
        self.committed: list[int] = []  # transactions whose COMMIT got its RECEIPT
        self.stopped = threading.Event()

    def run(self) -> None:
        tx = 0
        try:
            while not self.stopped.is_set():
                name = f"tx{tx}"
                self.client.conn.begin(name)
                for i in range(5):
                    self.client.conn.send(
                        self.destination,
                        f"{tx}.{i}",
                        headers={"transaction": name, "persistent": "true", "x-tx": str(tx)},
                    )
                receipt = f"commit-{tx}"
                self.client.conn.commit(name, headers={"receipt": receipt})
                listener = self.client.listener
                while receipt not in self.client.receipts:
                    if listener.disconnected.wait(0.001):
                        return  # the node was killed under us: expected
                self.committed.append(tx)
                tx += 1
        except Exception:  # the node was killed under us: expected
            pass


def test_sigkill_mid_stream_keeps_transactions_atomic(node, clients):
    q = unique("/queue/txcrash")
    producer = TxProducer(node.port, q)
    producer.start()
    try:
        wait_for(lambda: len(producer.committed) >= 60, 30, message="60 committed transactions")
        node.kill()
        committed = set(producer.committed)
    finally:
        producer.stopped.set()
        producer.join(15)
        producer.client.close()
    node.start()
    msgs = drain(clients, node, q)
    by_tx: dict[int, list[str]] = {}
    for m in msgs:
        by_tx.setdefault(int(m.headers["x-tx"]), []).append(m.body)
    missing = sorted(committed - set(by_tx))
    assert not missing, f"committed transactions lost: {missing[:10]}"
    partial = {tx: bodies for tx, bodies in by_tx.items() if len(bodies) != 5}
    assert not partial, f"transactions recovered in part: {dict(list(partial.items())[:3])}"
    for tx, bodies in by_tx.items():
        assert bodies == [f"{tx}.{i}" for i in range(5)], (tx, bodies)


# --- the data directory lock --------------------------------------------------------------------


def test_second_node_on_the_same_data_directory_fails_clearly(node, make_broker):
    second = make_broker(persistence=True, data_dir=node.data_dir, start=False)
    log = start_refused(second)
    assert re.search(re.escape(str(node.data_dir)), log), (
        f"the error should name the locked directory {node.data_dir}:\n{log}"
    )
    # The first node is unaffected.
    c = Client(node.port)
    try:
        q = unique("/queue/first")
        c.subscribe(q)
        c.send(q, "fine", **PERSISTENT)
        c.wait_messages(1)
    finally:
        c.close()


def test_multicast_message_acked_by_one_subscription_stays_for_the_other(node, clients):
    t = unique("/topic/two")
    durable = {"durable-subscription-name": "s"}
    ids = [unique("a"), unique("b")]
    for client_id in ids:
        c = clients(node, client_id=client_id)
        c.subscribe(t, **durable)
        c.disconnect()
    producer = clients(node)
    producer.send(t, "shared", **PERSISTENT)
    first = clients(node, client_id=ids[0])
    first.subscribe(t, ack="client-individual", **durable)
    [msg] = first.wait_messages(1)
    first.ack(msg)
    node.restart(crash=True)
    for client_id, expect in zip(ids, (0, 1), strict=True):
        c = clients(node, client_id=client_id)
        c.subscribe(t, **durable)
        if expect:
            c.wait_messages(1)
        c.sync()
        assert [m.body for m in c.messages] == ["shared"] * expect, client_id


def test_deleted_durable_subscription_stays_deleted_after_restart(node, clients):
    t = unique("/topic/del")
    client_id = unique("cid")
    durable = {"durable-subscription-name": "s"}
    c = clients(node, client_id=client_id)
    sub = c.subscribe(t, **durable)
    c.unsubscribe(sub)
    producer = clients(node)
    producer.send(t, "kept-for-a-while", **PERSISTENT)
    c.subscribe(t, **durable)
    c.wait_messages(1)
    c.unsubscribe(c.messages[0].headers["subscription"], **durable)  # deletes the queue
    producer.send(t, "nobody-wants-this", **PERSISTENT)
    node.restart(crash=True)
    back = clients(node, client_id=client_id)
    back.subscribe(t, **durable)
    back.sync()
    assert back.messages == []


def test_a_producer_keeps_its_order_across_persistent_and_non_persistent(node, raw_clients):
    # A non-persistent SEND right behind a persistent one (still waiting for its fsync) must
    # not overtake it: only a SEND with nothing ahead of it is completed at once.
    raw = raw_clients(node)
    raw.connect("1.2")
    q = unique("/queue/order")
    assert raw.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"
    kinds = ["true", "false", "true", "false", "false", "true", "false"]
    raw.send_bytes(
        b"".join(
            encode_frame("SEND", [("destination", q), ("persistent", p), ("n", str(i))], b"x")
            for i, p in enumerate(kinds)
        )
    )
    got = [raw.read_until("MESSAGE").get("n") for _ in kinds]
    assert got == [str(i) for i in range(len(kinds))]


def test_a_send_racing_the_last_consumers_departure_is_not_lost(node, clients):
    """The consumer's DISCONNECT and another connection's SEND cross: the queue (auto-created,
    emptied) must not be auto-deleted while that receipted send is on its way to it."""
    q = unique("/queue/race")
    producer = clients(node)
    for round_number in range(3):
        for i in range(5):
            producer.send(q, f"old{i}", **PERSISTENT)
        consumer = clients(node)
        consumer.subscribe(q, ack="client-individual", **{"consumer-window-size": "-1"})
        for frame in consumer.wait_messages(5):
            consumer.ack(frame)
        consumer.sync()
        consumer.disconnect()
        producer.send(q, f"new{round_number}", **PERSISTENT)  # right after the DISCONNECT
        c = clients(node)
        c.subscribe(q)
        c.wait_messages(1)
        c.sync()
        assert [m.body for m in c.messages] == [f"new{round_number}"]
        c.disconnect()
