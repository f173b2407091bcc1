"""address-full-policy BLOCK, FAIL and DROP, page limits, and transactions on a paging address."""

from __future__ import annotations

import threading

from integration.conftest import unique, wait_for

from .conftest import paging_settings
from .test_page_policy import BODY, PERSISTENT, consume, send_numbered


def send_until_error(client, destination: str, limit: int = 200) -> int:
    """Send numbered persistent messages until one gets an ERROR; returns how many were
    accepted (receipted) before it."""
    for i in range(limit):
        r = client.next_receipt()
        client.conn.send(
            destination, BODY, headers={"persistent": "true", "receipt": r, "seq": str(i)}
        )
        wait_for(lambda r=r: r in client.receipts or client.errors, 10)
        if client.errors:
            return i
    raise AssertionError(f"no ERROR after {limit} messages")


def test_fail_refuses_a_send_with_an_error_naming_the_address_and_limit(make_broker, clients):
    node = make_broker(persistence=True, address_settings=paging_settings("FAIL"))
    q = unique("/queue/paged.fail")
    producer = clients(node)
    accepted = send_until_error(producer, q)
    error = producer.errors[0]
    assert "paged.fail" in error.body, error.body
    assert "max-size-bytes 20480" in error.body, error.body
    assert 15 <= accepted <= 20
    assert consume(clients, node, q, accepted) == list(range(accepted)), "nothing accepted is lost"


def test_drop_drops_and_logs_once_per_episode(make_broker, clients):
    node = make_broker(persistence=True, address_settings=paging_settings("DROP"))
    q = unique("/queue/paged.drop")
    producer = clients(node)
    send_numbered(producer, q, 40)  # each is receipted: dropped ones too, as Artemis does
    assert node.log().count("dropping messages until there is room") == 1
    got = consume(clients, node, q, 20)
    assert got == list(range(20))
    send_numbered(producer, q, 5, start=100)
    c = clients(node)
    c.subscribe(q)
    wait_for(lambda: len(c.messages) >= 4, 10)
    c.sync()
    assert [int(m.headers["seq"]) for m in c.messages] == list(range(100, 105))


def test_block_holds_the_producer_until_a_consumer_makes_room(make_broker, clients):
    node = make_broker(persistence=True, address_settings=paging_settings("BLOCK"))
    q = unique("/queue/paged.block")
    producer, other = clients(node), clients(node)
    done = threading.Event()

    def produce() -> None:
        send_numbered(producer, q, 40)
        done.set()

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    assert not done.wait(2), "the producer must be held back while the address is full"
    # Another connection to another address is not slowed down.
    other.send(unique("/queue/free"), "x", **PERSISTENT)
    assert consume(clients, node, q, 40) == list(range(40))
    assert done.wait(10)
    thread.join()


def test_reject_threshold_turns_a_blocked_send_into_an_error(make_broker, clients):
    extra = "\n        <max-size-bytes-reject-threshold>30KiB</max-size-bytes-reject-threshold>"
    node = make_broker(persistence=True, address_settings=paging_settings("BLOCK", extra))
    q = unique("/queue/paged.reject")
    producer = clients(node)
    accepted = send_until_error(producer, q)
    assert "max-size-bytes-reject-threshold 30720" in producer.errors[0].body
    assert 25 <= accepted <= 30, "let through up to the threshold, not blocked at max-size-bytes"


def test_page_limit_with_fail(make_broker, clients):
    extra = (
        "\n        <page-limit-messages>30</page-limit-messages>"
        "\n        <page-full-policy>FAIL</page-full-policy>"
    )
    node = make_broker(persistence=True, address_settings=paging_settings("PAGE", extra))
    q = unique("/queue/paged.limit")
    producer = clients(node)
    accepted = send_until_error(producer, q)
    assert "page-limit-messages 30" in producer.errors[0].body
    assert 40 <= accepted <= 60
    assert consume(clients, node, q, accepted) == list(range(accepted))


def test_a_transaction_pages_its_sends_and_commits_them_together(paged_node, clients):
    q = unique("/queue/paged.tx")
    producer = clients(paged_node)
    send_numbered(producer, q, 30)  # the address pages from here
    producer.begin("t1")
    send_numbered(producer, q, 20, start=30, transaction="t1")
    producer.commit("t1")
    producer.begin("t2")
    send_numbered(producer, q, 5, start=50, transaction="t2")
    producer.abort("t2")
    paged_node.restart(crash=True)
    assert consume(clients, paged_node, q, 50) == list(range(50))
    c = clients(paged_node)
    c.subscribe(q)
    c.sync()
    assert c.messages == [], "an aborted transaction's messages never appear"


def test_selectors_pick_paged_messages(paged_node, clients):
    """Two consumers with selectors share a paged backlog. (One selector alone can stall
    once max-read-page-messages non-matching messages sit in memory, as in Artemis:
    docs/paging.md.)"""
    q = unique("/queue/paged.sel")
    producer = clients(paged_node)
    for i in range(80):
        producer.send(q, BODY, **PERSISTENT, seq=str(i), colour="red" if i % 2 else "blue")
    red, blue = clients(paged_node), clients(paged_node)
    for client, colour in ((red, "red"), (blue, "blue")):
        client.subscribe(
            q,
            ack="client-individual",
            selector=f"colour = '{colour}'",
            **{"consumer-window-size": "-1"},
        )
    acked = {id(red): 0, id(blue): 0}

    def progress() -> bool:
        for client in (red, blue):
            for frame in client.messages[acked[id(client)] :]:
                client.ack(frame, receipt=False)
                acked[id(client)] += 1
        return sum(acked.values()) >= 80

    wait_for(progress, 30, message=lambda: f"{acked}")
    assert [int(m.headers["seq"]) for m in red.messages] == list(range(1, 80, 2))
    assert [int(m.headers["seq"]) for m in blue.messages] == list(range(0, 80, 2))
