"""Message expiry on real nodes with stomp.py clients: the expiry reaper empties queues nobody
consumes (page files included), expired messages gather in auto-created per-address queues
on the expiry address, expiry delays and their clamps, auto-created dead-letter queues, and
a crash restart brings nothing expired back.

Every node scans every 100 ms (``message-expiry-scan-period``), so the tests wait for a
scan with :func:`wait_for`, never for a guessed time.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from integration.conftest import (
    DEFAULT_ADDRESS_SETTINGS,
    BrokerProcess,
    Client,
    stays,
    unique,
    wait_for,
)

SCAN = "<message-expiry-scan-period>100</message-expiry-scan-period>"
ANYCAST = {"destination-type": "ANYCAST"}
RESOURCES = """
      <address-setting match="#">
        <expiry-address>EXP</expiry-address>
        <auto-create-expiry-resources>true</auto-create-expiry-resources>
        <dead-letter-address>DLA</dead-letter-address>
        <auto-create-dead-letter-resources>true</auto-create-dead-letter-resources>
        <max-delivery-attempts>2</max-delivery-attempts>
      </address-setting>
"""


def soon(ms: int = 200) -> str:
    """An ``expires`` header ``ms`` from now (epoch ms, as STOMP clients send it)."""
    return str(int(time.time() * 1000) + ms)


def node_with(
    make_broker: Any, settings: str = RESOURCES, scan: str = SCAN, **options: Any
) -> BrokerProcess:
    node: BrokerProcess = make_broker(
        prefixes=False, extra_core=scan, address_settings=settings, addresses="", **options
    )
    return node


def queue_stats(node: BrokerProcess, name: str) -> dict[str, Any]:
    response = httpx.get(f"{node.web_url}/api/queues/{name}", timeout=10)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def drain(node: BrokerProcess, address: str, queue: str, count: int) -> list[Any]:
    """Consume ``queue`` of ``address``: exactly ``count`` messages (checked after a sync)."""
    client: Client = node.client()
    try:
        client.subscribe(f"{address}::{queue}")
        client.wait_messages(count)
        client.sync()
        assert len(client.messages) == count, [m.body for m in client.messages]
        return client.messages
    finally:
        client.close()


def test_expired_messages_leave_a_queue_nobody_consumes(make_broker: Any) -> None:
    node = node_with(make_broker, web=True)
    producer = node.client()
    for n in range(3):
        producer.send("orders", f"short-{n}", expires=soon(), **ANYCAST)
    producer.send("orders", "kept", **ANYCAST)
    producer.send("invoices", "short", expires=soon(), **ANYCAST)
    # Nobody consumes orders: only the reaper can move them.
    wait_for(lambda: queue_stats(node, "orders")["expired"] == 3, message="three expired")
    stats = queue_stats(node, "orders")
    assert (stats["messages"], stats["acknowledged"]) == (1, 0)
    moved = drain(node, "EXP", "EXP.orders", 3)
    assert sorted(m.body for m in moved) == ["short-0", "short-1", "short-2"]
    assert {m.headers["_AMQ_ORIG_ADDRESS"] for m in moved} == {"orders"}
    assert all("expires" not in m.headers for m in moved), "the copy never expires"
    resource = queue_stats(node, "EXP.orders")
    assert resource["filter"] == "_AMQ_ORIG_ADDRESS = 'orders'"
    assert resource["auto_created"]
    [other] = drain(node, "EXP", "EXP.invoices", 1)
    assert other.body == "short"
    metrics = httpx.get(f"{node.web_url}/metrics", timeout=10).text
    assert any(
        line.startswith("artemis_queue_messages_expired_total{")
        and 'queue="orders"' in line
        and line.endswith(" 3.0")
        for line in metrics.splitlines()
    ), "the reaper's expiries are the queue's expired counter in /metrics"
    assert [m.body for m in drain(node, "orders", "orders", 1)] == ["kept"]


def test_expiry_delay_and_its_clamps(make_broker: Any) -> None:
    settings = (
        RESOURCES
        + """
      <address-setting match="timed">
        <expiry-delay>300</expiry-delay>
      </address-setting>
      <address-setting match="clamped">
        <min-expiry-delay>60000</min-expiry-delay>
        <max-expiry-delay>120000</max-expiry-delay>
      </address-setting>
      <address-setting match="forever">
        <no-expiry>true</no-expiry>
      </address-setting>
"""
    )
    node = node_with(make_broker, settings, web=True)
    producer = node.client()
    producer.send("timed", "no-expires-header", **ANYCAST)
    for n in range(2):
        producer.send("clamped", f"too-soon-{n}", expires=soon(50), **ANYCAST)
    producer.send("clamped", "too-late", expires=soon(3_600_000), **ANYCAST)
    producer.send("clamped", "none", **ANYCAST)
    producer.send("forever", "ignored", expires=soon(50), **ANYCAST)
    sent = int(time.time() * 1000)
    # expiry-delay gave the message sent without one an expiration: the reaper moves it.
    [timed] = drain(node, "EXP", "EXP.timed", 1)
    assert timed.body == "no-expires-header"
    # The clamped ones and the no-expiry one outlive many scans.
    for name in ("clamped", "forever"):
        stays(lambda n=name: queue_stats(node, n)["expired"] == 0, 0.5, message=name)
    clamped = {m.body: int(m.headers["expires"]) for m in drain(node, "clamped", "clamped", 4)}
    assert all(sent + 55_000 <= clamped[f"too-soon-{n}"] <= sent + 61_000 for n in range(2))
    assert sent + 115_000 <= clamped["too-late"] <= sent + 121_000
    assert sent + 115_000 <= clamped["none"] <= sent + 121_000  # max applies to "none"
    [forever] = drain(node, "forever", "forever", 1)
    assert "expires" not in forever.headers


def test_a_dead_letter_goes_to_its_address_queue_on_the_dead_letter_address(
    make_broker: Any,
) -> None:
    node = node_with(make_broker)
    q = unique("poison")
    node.client().send(q, "poison", **ANYCAST)
    consumer = node.client()
    consumer.subscribe(q, ack="client-individual", **{"subscription-type": "ANYCAST"})
    for attempt in range(1, 3):
        consumer.nack(consumer.wait_messages(attempt)[-1])
    [dead] = drain(node, "DLA", f"DLQ.{q}", 1)
    assert dead.body == "poison"
    assert dead.headers["_AMQ_ORIG_ADDRESS"] == q


def test_a_message_no_queue_takes_goes_to_the_dead_letter_address(make_broker: Any) -> None:
    settings = """
      <address-setting match="#">
        <dead-letter-address>DLA</dead-letter-address>
        <send-to-dla-on-no-route>true</send-to-dla-on-no-route>
      </address-setting>
"""
    node = node_with(make_broker, settings)
    watcher = node.client()
    watcher.subscribe("DLA")  # a multicast subscription on the dead-letter address
    node.client().send("news", "nobody listens")  # multicast, no subscriber
    [dead] = watcher.wait_messages(1)
    assert dead.body == "nobody listens"
    assert dead.headers["_AMQ_ORIG_ADDRESS"] == "news"


def test_paged_messages_expire_too(make_broker: Any) -> None:
    settings = (
        DEFAULT_ADDRESS_SETTINGS
        + """
      <address-setting match="paged.#">
        <max-size-bytes>20KiB</max-size-bytes>
        <page-size-bytes>16KiB</page-size-bytes>
        <max-read-page-messages>10</max-read-page-messages>
        <expiry-address>EXP</expiry-address>
        <auto-create-expiry-resources>true</auto-create-expiry-resources>
      </address-setting>
"""
    )
    # Scans a second apart: one scan must go through every page.
    scan = SCAN.replace(">100<", ">1000<")
    node = node_with(make_broker, settings, scan, persistence=True, web=True)
    producer = node.client()
    count = 60
    expires = soon(2000)  # (after the check that the address pages)
    for n in range(count):
        producer.send("paged.a", f"{n:03d}" + "x" * 1000, expires=expires, **ANYCAST)
    assert queue_stats(node, "paged.a")["paged"] > 0, "the address must page"
    # max-read-page-messages is 10: a scan expires ten, waits for the next ten to be read
    # from the pages, and so on (Artemis's scanner depages and scans again).
    wait_for(lambda: queue_stats(node, "paged.a")["expired"] > 0, 10, message="a first scan")
    wait_for(
        lambda: queue_stats(node, "paged.a")["expired"] == count,
        0.9,
        message="all expired by that scan, before the next",
    )
    assert queue_stats(node, "paged.a")["messages"] == 0
    moved = drain(node, "EXP", "EXP.paged.a", count)
    assert sorted(m.body[:3] for m in moved) == [f"{n:03d}" for n in range(count)]


def test_after_a_crash_restart_nothing_expired_comes_back(make_broker: Any) -> None:
    node = node_with(make_broker, persistence=True, web=True)
    producer = node.client()
    for n in range(5):
        producer.send("orders", f"short-{n}", expires=soon(), persistent="true", **ANYCAST)
    producer.send("orders", "kept", persistent="true", **ANYCAST)
    wait_for(lambda: queue_stats(node, "orders")["expired"] == 5, message="five expired")
    # A barrier: this receipt comes once a journal batch after the moves' records is durable.
    producer.send("barrier", "b", persistent="true", **ANYCAST)
    producer.close()
    node.restart(crash=True)
    stays(lambda: queue_stats(node, "orders")["expired"] == 0, 0.5, message="nothing expired")
    assert queue_stats(node, "orders")["messages"] == 1
    assert [m.body for m in drain(node, "orders", "orders", 1)] == ["kept"]
    assert len(drain(node, "EXP", "EXP.orders", 5)) == 5
