"""Duplicate detection for client sends (``_AMQ_DUPL_ID``, docs/duplicate-detection.md), on
real node processes: a resend is dropped and its RECEIPT says ``duplicate:true``; caches
are per address with their own ``id-cache-size``; a transaction with a known id is ignored
whole; ids survive ``kill -9`` with ``persist-id-cache`` and not without; concurrent
resends store one copy; large and paged messages are covered too."""

from __future__ import annotations

from typing import Any

from paging.conftest import data_summary, page_files, paging_settings

from .conftest import (
    DEFAULT_ADDRESS_SETTINGS,
    RawFrame,
    RawStomp,
    encode_frame,
    unique,
    wait_for,
)

DUP = "_AMQ_DUPL_ID"

SMALL_AND_OFF = (
    DEFAULT_ADDRESS_SETTINGS
    + """
      <address-setting match="small.#"><id-cache-size>2</id-cache-size></address-setting>
      <address-setting match="free.#"><id-cache-size>0</id-cache-size></address-setting>
"""
)


def producer(node: Any) -> RawStomp:
    raw = node.raw()
    raw.connect()
    return raw


def send(raw: RawStomp, queue: str, body: str, dup: str | None = None, **headers: str) -> RawFrame:
    """A persistent SEND with a receipt; its RECEIPT (or ERROR)."""
    items = {"destination": f"/queue/{queue}", "persistent": "true", **headers}
    if dup is not None:
        items[DUP] = dup
    return raw.receipt("SEND", items, body.encode())


def accepted(reply: RawFrame) -> bool:
    assert reply.command == "RECEIPT", reply
    return reply.get("duplicate") is None


def duplicate(reply: RawFrame) -> bool:
    assert reply.command == "RECEIPT", reply
    return reply.get("duplicate") == "true"


def transaction(raw: RawStomp, queue: str, messages: list[tuple[str, str | None]]) -> RawFrame:
    """BEGIN, the sends (body, duplicate id), COMMIT; the COMMIT's RECEIPT."""
    tx = unique("tx")
    raw.send("BEGIN", {"transaction": tx})
    for body, dup in messages:
        headers = {"destination": f"/queue/{queue}", "persistent": "true", "transaction": tx}
        if dup is not None:
            headers[DUP] = dup
        raw.send("SEND", headers, body.encode())
    return raw.receipt("COMMIT", {"transaction": tx})


def stored(clients: Any, node: Any, queue: str, count: int, timeout: float = 10) -> list[Any]:
    """Consume ``queue``: exactly ``count`` messages are there (the frames)."""
    consumer = clients(node)
    consumer.subscribe(f"/queue/{queue}")
    consumer.wait_messages(count, timeout)
    consumer.sync()
    messages = consumer.messages
    assert len(messages) == count, [m.body for m in messages]
    consumer.disconnect()
    return messages


def test_a_resend_is_dropped_and_its_receipt_says_duplicate(make_broker, clients) -> None:
    node = make_broker(persistence=True)
    queue = unique("orders")
    with producer(node) as raw:
        assert accepted(send(raw, queue, "first", dup="order-1"))
        assert duplicate(send(raw, queue, "again", dup="order-1"))
        assert accepted(send(raw, queue, "plain"))  # no id: never checked
        assert accepted(send(raw, queue, "plain"))
    messages = stored(clients, node, queue, 3)
    assert [m.body for m in messages] == ["first", "plain", "plain"]
    assert messages[0].headers[DUP] == "order-1"  # the header stays on the message


def test_each_address_has_its_own_cache(make_broker, clients) -> None:
    node = make_broker(persistence=True)
    orders, invoices = unique("orders"), unique("invoices")
    with producer(node) as raw:
        assert accepted(send(raw, orders, "o", dup="same"))
        assert accepted(send(raw, invoices, "i", dup="same"))
        assert duplicate(send(raw, invoices, "i2", dup="same"))
    assert [m.body for m in stored(clients, node, orders, 1)] == ["o"]
    assert [m.body for m in stored(clients, node, invoices, 1)] == ["i"]


def test_the_address_setting_sizes_the_cache_and_the_oldest_id_is_evicted(
    make_broker, clients
) -> None:
    node = make_broker(persistence=True, address_settings=SMALL_AND_OFF)
    small, big = unique("small.q"), unique("big")
    with producer(node) as raw:
        for queue in (small, big):
            for dup in ("a", "b", "c"):
                assert accepted(send(raw, queue, dup, dup=dup))
        assert accepted(send(raw, small, "a-again", dup="a"))  # evicted by c (size 2)
        assert duplicate(send(raw, small, "c-again", dup="c"))
        assert duplicate(send(raw, big, "a-again", dup="a"))  # default size 20000
    assert [m.body for m in stored(clients, node, small, 4)] == ["a", "b", "c", "a-again"]


def test_id_cache_size_zero_turns_detection_off(make_broker, clients) -> None:
    node = make_broker(persistence=True, address_settings=SMALL_AND_OFF)
    queue = unique("free.q")
    with producer(node) as raw:
        assert accepted(send(raw, queue, "one", dup="x"))
        assert accepted(send(raw, queue, "two", dup="x"))
    assert [m.body for m in stored(clients, node, queue, 2)] == ["one", "two"]


def test_a_transaction_with_a_known_id_is_ignored_whole(make_broker, clients) -> None:
    node = make_broker(persistence=True)
    queue = unique("orders")
    with producer(node) as raw:
        assert accepted(send(raw, queue, "earlier", dup="known"))
        reply = transaction(raw, queue, [("t1", "new-1"), ("t2", "known"), ("t3", None)])
        assert duplicate(reply)
        # Nothing of the ignored transaction was kept, its other ids included.
        assert accepted(send(raw, queue, "later", dup="new-1"))
        assert accepted(transaction(raw, queue, [("u1", "new-2"), ("u2", None)]))
        assert duplicate(transaction(raw, queue, [("u1", "new-2"), ("u2", None)]))
    assert [m.body for m in stored(clients, node, queue, 4)] == ["earlier", "later", "u1", "u2"]


def test_an_id_on_every_message_of_a_transaction_marks_the_transaction(
    make_broker, clients
) -> None:
    # Design 16's sink: one id per partition and batch on each of its messages. Within the
    # transaction it is one id (Artemis adds a transaction's ids at commit); the re-run of
    # the transaction is the duplicate.
    node = make_broker(persistence=True)
    queue = unique("sink")
    rows = [(f"row-{i}", "spark:q:7:0") for i in range(3)]
    with producer(node) as raw:
        assert accepted(transaction(raw, queue, rows))
        assert duplicate(transaction(raw, queue, list(reversed(rows))))
    assert [m.body for m in stored(clients, node, queue, 3)] == ["row-0", "row-1", "row-2"]


def test_ids_survive_kill_9_when_persisted(make_broker, clients) -> None:
    node = make_broker(persistence=True)
    queue = unique("orders")
    with producer(node) as raw:
        for i in range(5):
            assert accepted(send(raw, queue, f"m{i}", dup=f"id-{i}"))
        assert accepted(transaction(raw, queue, [("t0", "tx-id"), ("t1", None)]))
    node.restart(crash=True)
    with producer(node) as raw:
        for i in range(5):
            assert duplicate(send(raw, queue, f"m{i}", dup=f"id-{i}"))
        assert duplicate(transaction(raw, queue, [("t0", "tx-id"), ("t1", None)]))
        assert accepted(send(raw, queue, "m5", dup="id-5"))
    bodies = [m.body for m in stored(clients, node, queue, 8)]
    assert bodies == ["m0", "m1", "m2", "m3", "m4", "t0", "t1", "m5"]


def test_ids_are_forgotten_at_restart_without_persist_id_cache(make_broker, clients) -> None:
    node = make_broker(persistence=True, extra_core="<persist-id-cache>false</persist-id-cache>")
    queue = unique("orders")
    with producer(node) as raw:
        assert accepted(send(raw, queue, "m0", dup="id-0"))
        assert duplicate(send(raw, queue, "m0", dup="id-0"))  # in memory meanwhile
    node.restart(crash=True)
    with producer(node) as raw:
        assert accepted(send(raw, queue, "m0", dup="id-0"))
    assert [m.body for m in stored(clients, node, queue, 2)] == ["m0", "m0"]


def test_concurrent_resends_from_two_connections_store_one_copy_each(make_broker, clients) -> None:
    # Large messages: their journal records wait for their files, so the second copy of
    # an id arrives while the first is reserved but not yet in the cache.
    node = make_broker(persistence=True, acceptor_params=";stompMinLargeMessageSize=10240")
    queue = unique("race")
    count = 60
    frames = b"".join(
        encode_frame(
            "SEND",
            {
                "destination": f"/queue/{queue}",
                "persistent": "true",
                DUP: f"r-{i}",
                "receipt": f"r-{i}",
            },
            f"m{i}:".encode() + b"x" * 20_000,
        )
        for i in range(count)
    )
    one, two = producer(node), producer(node)
    with one, two:
        # Both pipeline every send before reading a receipt.
        one.send_bytes(frames)
        two.send_bytes(frames)
        verdicts: dict[str, list[bool]] = {}
        for raw in (one, two):
            for _ in range(count):
                reply = raw.read_frame()
                assert reply is not None, reply
                assert reply.command == "RECEIPT", reply
                verdicts.setdefault(reply.get("receipt-id") or "", []).append(
                    reply.get("duplicate") == "true"
                )
    assert all(sorted(v) == [False, True] for v in verdicts.values()), verdicts
    bodies = [m.body.partition(":")[0] for m in stored(clients, node, queue, count)]
    assert sorted(bodies) == sorted(f"m{i}" for i in range(count))


def test_a_large_message_with_an_id_is_stored_once_and_its_id_survives(
    make_broker, clients
) -> None:
    node = make_broker(persistence=True, acceptor_params=";stompMinLargeMessageSize=10240")
    queue = unique("large")
    body = "L" * 50_000
    with producer(node) as raw:
        assert accepted(send(raw, queue, body, dup="big-1"))
        assert duplicate(send(raw, queue, body, dup="big-1"))
    assert list((node.data_dir / "largemessages").iterdir())  # it is a large message
    node.restart(crash=True)
    with producer(node) as raw:
        assert duplicate(send(raw, queue, body, dup="big-1"))
    assert [m.body for m in stored(clients, node, queue, 1)] == [body]


def test_paged_messages_with_ids_and_a_paged_transaction(make_broker) -> None:
    node = make_broker(persistence=True, address_settings=paging_settings())
    queue = unique("paged.q")
    body = "p" * 1000
    with producer(node) as raw:
        for i in range(40):
            assert accepted(send(raw, queue, body, dup=f"p-{i}"))
        wait_for(lambda: page_files(node), message="the address to page")
        assert accepted(transaction(raw, queue, [(body, "ptx"), (body, None)]))
        for i in range(40):
            assert duplicate(send(raw, queue, body, dup=f"p-{i}"))
        assert duplicate(transaction(raw, queue, [(body, "ptx"), (body, None)]))
    node.restart(crash=True)
    with producer(node) as raw:
        for i in (0, 20, 39):  # in memory and paged alike
            assert duplicate(send(raw, queue, body, dup=f"p-{i}"))
        assert duplicate(transaction(raw, queue, [(body, "ptx"), (body, None)]))
    node.stop()
    assert data_summary(node)[queue] == 42


def test_the_acks_of_an_ignored_transaction_do_not_happen(make_broker) -> None:
    node = make_broker(persistence=True)
    source, target = unique("in"), unique("out")
    with producer(node) as raw:
        assert accepted(send(raw, source, "work"))
        assert accepted(send(raw, target, "result", dup="result-1"))
        raw.send("SUBSCRIBE", {"destination": f"/queue/{source}", "id": "s", "ack": "client"})
        delivered = raw.read_until("MESSAGE")
        # Consume and produce in one transaction, as a processing step does; its output
        # was produced before (a re-run), so the whole step is ignored.
        tx = unique("tx")
        raw.send("BEGIN", {"transaction": tx})
        raw.send("ACK", {"id": delivered.get("ack") or "", "transaction": tx})
        raw.send(
            "SEND",
            {"destination": f"/queue/{target}", "transaction": tx, DUP: "result-1"},
            b"result",
        )
        assert duplicate(raw.receipt("COMMIT", {"transaction": tx}))
        # Not acknowledged: it comes back.
        again = raw.read_until("MESSAGE")
        assert again.body == b"work", again
        assert again.get("redelivered") == "true", again
