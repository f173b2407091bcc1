"""Non-destructive queues on a real node with stomp.py (Artemis's "Non-Destructive Queues"):
every consumer gets every message, an ACK or NACK removes nothing, a non-destructive
last-value queue gives a newcomer the latest value per key, ``default-non-destructive``
makes an address's auto-created queues so, the messages survive a crash restart, and expiry
is what takes them out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from .conftest import BrokerProcess, Client, unique, wait_for

ANYCAST_SEND = {"destination-type": "ANYCAST", "persistent": "true"}
ANYCAST_SUB = {"subscription-type": "ANYCAST"}


def queue_stats(node: BrokerProcess, name: str) -> dict[str, Any]:
    response = httpx.get(f"{node.web_url}/api/queues/{name}", timeout=10)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def read_all(node: BrokerProcess, queue: str, count: int, ack: str = "auto") -> Client:
    """A new consumer of ``queue`` that got exactly ``count`` messages (checked after a sync)."""
    client = node.client()
    client.subscribe(queue, ack=ack, **ANYCAST_SUB)
    client.wait_messages(count)
    client.sync()
    assert len(client.messages) == count, client.bodies()
    return client


def test_every_consumer_gets_every_message_and_acks_remove_nothing(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    feed, prices, cache = unique("feed"), unique("prices"), unique("cache")
    node = make_broker(
        prefixes=False,
        persistence=True,
        web=True,
        addresses=(
            f'<address name="{feed}"><anycast><queue name="{feed}" non-destructive="true"/>'
            f'</anycast></address><address name="{prices}"><anycast><queue name="{prices}" '
            'non-destructive="true" last-value-key="stock"/></anycast></address>'
        ),
        address_settings=(
            f'<address-setting match="{cache}"><default-non-destructive>true'
            "</default-non-destructive><auto-create-queues>true</auto-create-queues>"
            "<auto-create-addresses>true</auto-create-addresses></address-setting>"
        ),
    )
    producer = node.client()
    for n in range(3):
        producer.send(feed, f"m{n}", **ANYCAST_SEND)
    for n, stock in enumerate(["IBM", "AAPL", "IBM"]):
        producer.send(prices, f"{stock}-{n}", stock=stock, **ANYCAST_SEND)
    producer.send(cache, "cached", **ANYCAST_SEND)  # (its queue is auto-created)

    individual = read_all(node, feed, 3, ack="client-individual")
    individual.ack(individual.messages[0])
    individual.nack(individual.messages[1])  # (the third stays unacknowledged)
    cumulative = read_all(node, feed, 3, ack="client")
    cumulative.begin("tx")
    cumulative.ack(cumulative.messages[-1], transaction="tx")
    cumulative.abort("tx")  # (changes nothing durable: it ended the deliveries at once)
    automatic = read_all(node, feed, 3)
    assert automatic.bodies() == cumulative.bodies() == ["m0", "m1", "m2"]
    assert automatic.messages[0].headers.get("redelivered") == "true"  # (a shared count)
    stats = queue_stats(node, feed)
    assert (stats["messages"], stats["acknowledged"], stats["delivering"]) == (3, 0, 1)
    assert stats["non_destructive"] is True
    individual.close()
    assert read_all(node, prices, 2).bodies() == ["AAPL-1", "IBM-2"]  # latest value per key
    assert read_all(node, cache, 1).bodies() == read_all(node, cache, 1).bodies() == ["cached"]

    node.restart(crash=True)
    assert read_all(node, feed, 3).bodies() == ["m0", "m1", "m2"]
    assert read_all(node, prices, 2).bodies() == ["AAPL-1", "IBM-2"]
    latest = read_all(node, prices, 2)
    producer = node.client()
    producer.send(prices, "IBM-3", stock="IBM", **ANYCAST_SEND)
    latest.wait_messages(3)  # a consumer that is there gets the new value at once
    assert read_all(node, prices, 2).bodies() == ["AAPL-1", "IBM-3"]
    assert queue_stats(node, prices)["replaced"] == 1


def test_expiry_takes_messages_out_of_a_non_destructive_queue(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    feed = unique("feed")
    node = make_broker(
        prefixes=False,
        persistence=True,
        web=True,
        extra_core="<message-expiry-scan-period>100</message-expiry-scan-period>",
        addresses=(
            f'<address name="{feed}"><anycast><queue name="{feed}" non-destructive="true"/>'
            "</anycast></address>"
        ),
        address_settings=(
            '<address-setting match="#"><expiry-address>EXP</expiry-address>'
            "<auto-create-expiry-resources>true</auto-create-expiry-resources></address-setting>"
        ),
    )
    watcher = node.client()
    watcher.subscribe(feed, ack="client-individual", **ANYCAST_SUB)
    producer = node.client()
    producer.send(feed, "stays", **ANYCAST_SEND)
    producer.send(feed, "expires", expires=str(int(time.time() * 1000) + 300), **ANYCAST_SEND)
    watcher.wait_messages(2)  # read before it expired: still in the queue for others
    wait_for(lambda: queue_stats(node, feed)["messages"] == 1, 10, message="the expiry")
    assert queue_stats(node, feed)["expired"] == 1
    assert read_all(node, feed, 1).bodies() == ["stays"]
    node.restart(crash=True)
    assert read_all(node, feed, 1).bodies() == ["stays"]
    assert read_all(node, f"EXP::EXP.{feed}", 1).bodies() == ["expires"]
