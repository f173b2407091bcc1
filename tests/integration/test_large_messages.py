"""Large messages (docs/large-messages.md): a persistent message of at least the acceptor's
``stompMinLargeMessageSize`` (100 KiB) is a file of its own in ``large-messages-directory``,
synced before the SEND's receipt, removed when the last queue acknowledges it, found again
after a crash; an orphaned file is removed at start. Real nodes, stomp.py and raw sockets.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import BrokerProcess, unique, wait_for

PERSISTENT = {"persistent": "true"}
LARGE = 200 * 1024  # above the default 100 KiB threshold
# Client-acknowledged subscriptions take more than one large message at a time.
UNBOUNDED = {"consumer-window-size": "-1"}


def body_of(size: int, seed: str = "") -> str:
    """A recognisable text body of ``size`` bytes (ASCII, so characters are bytes)."""
    pattern = (seed + "abcdefghijklmnopqrstuvwxyz0123456789") * (size // 36 + 2)
    return pattern[:size]


def files(node: BrokerProcess) -> list[str]:
    directory = node.data_dir / "largemessages"
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def journal_bytes(node: BrokerProcess) -> int:
    return sum(p.stat().st_size for p in (node.data_dir / "journal").glob("*.amq"))


@pytest.fixture
def node(make_broker):
    return make_broker(persistence=True)


def test_persistent_large_message_is_a_file_that_survives_kill_9(node, clients):
    q = unique("/queue/large")
    body = body_of(LARGE, "k9")
    producer = clients(node)
    producer.send(q, body, **PERSISTENT, **{"x-tag": "big"})  # waits for the RECEIPT
    producer.send(q, "small", **PERSISTENT)
    # The receipt came after the file was written: exactly one file, the large message's.
    assert len(files(node)) == 1
    node.kill()
    node.start()
    consumer = clients(node)
    consumer.subscribe(q, ack="client-individual", **UNBOUNDED)
    big, small = consumer.wait_messages(2)
    assert big.body == body
    assert big.headers["x-tag"] == "big"
    assert small.body == "small"
    assert len(files(node)) == 1  # delivered, not yet acknowledged
    consumer.ack(big)
    wait_for(lambda: files(node) == [], message="the file to go after the ACK")
    # Acknowledged: gone for good, even after another crash.
    node.restart(crash=True)
    again = clients(node)
    again.subscribe(q, ack="client-individual", **UNBOUNDED)
    assert [m.body for m in again.wait_messages(1)] == ["small"]
    again.sync()
    assert len(again.messages) == 1


def test_auto_acknowledged_large_message_leaves_no_file(node, clients):
    q = unique("/queue/auto")
    clients(node).send(q, body_of(LARGE), **PERSISTENT)
    assert len(files(node)) == 1
    consumer = clients(node)
    consumer.subscribe(q)  # auto ack: nobody waits for the acknowledgement
    consumer.wait_messages(1)
    wait_for(lambda: files(node) == [], message="the file to go after the auto-ack")
    node.restart(crash=True)
    assert files(node) == []


def test_small_and_non_persistent_large_messages_have_no_file(node, clients):
    q = unique("/queue/mem")
    body = body_of(LARGE, "np")
    producer = clients(node)
    producer.send(q, body)  # non-persistent: memory only
    producer.send(q, body_of(1000), **PERSISTENT)  # small: in the journal
    producer.send(q, body, **PERSISTENT)  # the only one with a file
    assert len(files(node)) == 1
    consumer = clients(node)
    consumer.subscribe(q)
    got = consumer.wait_messages(3)
    assert got[0].body == body
    assert got[2].body == body
    wait_for(lambda: files(node) == [], message="the file to go after the auto-ack")
    # A non-persistent message never survives a restart, large or not.
    producer.send(q, body)
    node.restart()
    late = clients(node)
    late.subscribe(q)
    late.sync()
    assert late.messages == []


def test_multicast_to_several_subscriptions_is_one_file(node, clients):
    topic = unique("/topic/fan")
    subscribers = [clients(node, client_id=unique("c")) for _ in range(3)]
    for i, c in enumerate(subscribers):
        c.subscribe(topic, ack="client", **{"durable-subscription-name": f"d{i}"}, **UNBOUNDED)
    body = body_of(LARGE, "mc")
    clients(node).send(topic, body, **PERSISTENT)
    assert len(files(node)) == 1
    received = [c.wait_messages(1)[0] for c in subscribers]
    assert all(m.body == body for m in received)
    for c, m in zip(subscribers[:2], received[:2], strict=True):
        c.ack(m)
    # Two of three subscriptions acknowledged: the file stays for the third, also after
    # a crash.
    node.restart(crash=True)
    assert len(files(node)) == 1
    last = clients(node, client_id=subscribers[2].client_id)
    last.subscribe(topic, ack="client", **{"durable-subscription-name": "d2"}, **UNBOUNDED)
    (m,) = last.wait_messages(1)
    assert m.body == body
    last.ack(m)
    wait_for(lambda: files(node) == [], message="the file to go after the last ACK")


def test_message_bigger_than_a_journal_file(node, raw_clients):
    """The harness's journal files are 1 MiB; this message is 3 MiB. It used to be refused."""
    q = unique("/queue/huge")
    body = bytes(range(256)) * (3 * 1024 * 4)  # 3 MiB, every byte value
    raw = raw_clients(node)
    raw.connect("1.2")
    headers = {"destination": q, "persistent": "true", "content-length": str(len(body))}
    reply = raw.receipt("SEND", headers, body)
    assert reply.command == "RECEIPT", reply
    # The journal holds the headers only: it did not grow by the body.
    assert journal_bytes(node) < 4 * 1024 * 1024
    node.restart(crash=True)
    raw = raw_clients(node)
    raw.connect("1.2")
    sub = {"destination": q, "id": "s", "ack": "client-individual"}
    assert raw.receipt("SUBSCRIBE", sub).command == "RECEIPT"
    msg = raw.read_until("MESSAGE")
    assert msg.body == body
    assert raw.receipt("ACK", {"id": msg.get("ack") or ""}).command == "RECEIPT"
    wait_for(lambda: files(node) == [], message="the file to go after the ACK")


def test_large_message_in_a_transaction(node, clients):
    q = unique("/queue/tx")
    body = body_of(2 * 1024 * 1024, "tx")  # bigger than a journal file too
    producer = clients(node)
    producer.begin("t1")
    producer.send(q, body, transaction="t1", **PERSISTENT)
    producer.send(q, "after", transaction="t1", **PERSISTENT)
    producer.commit("t1")
    node.restart(crash=True)
    consumer = clients(node)
    consumer.subscribe(q, ack="client", **UNBOUNDED)
    got = consumer.wait_messages(2)
    assert [len(m.body) for m in got] == [len(body), 5]
    consumer.begin("t2")
    consumer.ack(got[1], transaction="t2")  # cumulative: both
    consumer.commit("t2")
    wait_for(lambda: files(node) == [], message="the file to go after the commit")


def test_threshold_is_the_acceptors_stomp_min_large_message_size(make_broker, clients):
    node = make_broker(persistence=True, acceptor_params=";stompMinLargeMessageSize=512KiB")
    q = unique("/queue/threshold")
    producer = clients(node)
    producer.send(q, body_of(LARGE), **PERSISTENT)
    assert files(node) == []
    producer.send(q, body_of(600 * 1024), **PERSISTENT)
    assert len(files(node)) == 1


def test_orphaned_files_are_removed_at_start(node, clients):
    q = unique("/queue/orphans")
    clients(node).send(q, body_of(LARGE, "kept"), **PERSISTENT)
    (kept,) = files(node)
    node.stop()
    directory = node.data_dir / "largemessages"
    for name in ("999999991.msg", "999999992.msg"):
        (directory / name).write_bytes(b"left over")
    (directory / "README.txt").write_text("not ours")
    node.start()
    log = node.log(since_start=True)
    assert "removing 2 orphaned large message file(s)" in log
    wait_for(lambda: files(node) == sorted([kept, "README.txt"]), message="orphans removed")
    consumer = clients(node)
    consumer.subscribe(q)
    assert consumer.wait_messages(1)[0].body == body_of(LARGE, "kept")


def test_missing_file_skips_the_message_with_a_clear_error(node, clients):
    q = unique("/queue/missing")
    producer = clients(node)
    producer.send(q, body_of(LARGE, "lost"), **PERSISTENT)
    producer.send(q, "survivor", **PERSISTENT)
    (name,) = files(node)
    node.stop()
    (node.data_dir / "largemessages" / name).unlink()
    node.start()
    log = node.log(since_start=True)
    assert f"{Path(node.data_dir / 'largemessages' / name)} is missing" in log
    assert "Traceback" not in log
    consumer = clients(node)
    consumer.subscribe(q)
    assert [m.body for m in consumer.wait_messages(1)] == ["survivor"]
    # The record went too: the next start does not complain again.
    node.restart()
    assert "is missing" not in node.log(since_start=True)


def test_body_over_the_frame_limit_is_refused(make_broker, raw_clients):
    """The limit of a large message is the acceptor's stompMaxBodySize."""
    node = make_broker(persistence=True, acceptor_params=";stompMaxBodySize=1MiB")
    raw = raw_clients(node)
    raw.connect("1.2")
    body = b"x" * (1024 * 1024 + 1)
    headers = {"destination": unique("/queue/over"), "persistent": "true"}
    reply = raw.receipt("SEND", {**headers, "content-length": str(len(body))}, body)
    assert reply.command == "ERROR", reply
    assert files(node) == []
