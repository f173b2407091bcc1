"""Auto-deletion on real nodes with stomp.py clients: the address-queue scan deletes an
auto-created queue only after ``auto-delete-queues-delay``, keeps one holding more than
``auto-delete-queues-message-count`` messages, deletes an auto-created address only after
``auto-delete-addresses-delay``, and at the start deletes the empty ones.

Every node scans every 100 ms (``address-queue-scan-period``); the tests watch the
management API and wait with :func:`wait_for`, never for a guessed time.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from integration.conftest import DEFAULT_ADDRESS_SETTINGS, BrokerProcess, stays, unique, wait_for

SCAN = "<address-queue-scan-period>100</address-queue-scan-period>"
ANYCAST_SEND = {"destination-type": "ANYCAST"}
ANYCAST_SUBSCRIBE = {"subscription-type": "ANYCAST"}


def node_with(make_broker: Any, settings: str, **options: Any) -> BrokerProcess:
    node: BrokerProcess = make_broker(
        prefixes=False,
        persistence=True,
        web=True,
        extra_core=SCAN,
        address_settings=DEFAULT_ADDRESS_SETTINGS
        + f'<address-setting match="auto.#">{settings}</address-setting>',
        **options,
    )
    return node


def exists(node: BrokerProcess, kind: str, name: str) -> bool:
    response = httpx.get(f"{node.web_url}/api/{kind}/{name}", timeout=10)
    assert response.status_code in (200, 404), response.text
    return response.status_code == 200


def use_once(node: BrokerProcess, name: str, receive: int = 0) -> None:
    """A consumer subscribes to the anycast queue ``name``, takes ``receive`` messages
    (acknowledging them) and leaves."""
    client = node.client()
    client.subscribe(
        name, ack="client-individual", **ANYCAST_SUBSCRIBE, **{"consumer-window-size": "1"}
    )
    for n in range(receive):
        client.wait_messages(n + 1)
        client.ack(client.messages[n])
    client.sync()
    client.disconnect()


def test_an_auto_created_queue_goes_only_after_its_delay(make_broker: Any) -> None:
    node = node_with(make_broker, "<auto-delete-queues-delay>1500</auto-delete-queues-delay>")
    name = unique("auto.delayed")
    producer = node.client()
    producer.send(name, "one", **ANYCAST_SEND)
    use_once(node, name, receive=1)
    left = time.monotonic()
    stays(lambda: exists(node, "queues", name), 1.2, message="the queue during its delay")
    wait_for(lambda: not exists(node, "queues", name), message="the queue deleted")
    assert time.monotonic() - left >= 1.5
    # Its address (delay 0) goes by the next scans.
    wait_for(lambda: not exists(node, "addresses", name), message="the address deleted")


def test_a_queue_holding_more_than_the_message_count_stays(make_broker: Any) -> None:
    node = node_with(
        make_broker, "<auto-delete-queues-message-count>2</auto-delete-queues-message-count>"
    )
    name = unique("auto.counted")
    producer = node.client()
    for n in range(3):
        producer.send(name, f"m{n}", **ANYCAST_SEND)
    use_once(node, name)  # used, nothing taken: 3 messages
    stays(lambda: exists(node, "queues", name), 1.0, message="a queue of 3 messages")
    use_once(node, name, receive=1)  # 2 left: few enough
    wait_for(lambda: not exists(node, "queues", name), message="the queue deleted")


def test_an_auto_created_address_goes_only_after_its_delay(make_broker: Any) -> None:
    node = node_with(make_broker, "<auto-delete-addresses-delay>1500</auto-delete-addresses-delay>")
    name = unique("auto.topic")
    client = node.client()
    client.subscribe(name, **{"subscription-type": "MULTICAST"})
    client.disconnect()  # its temporary queue goes at once
    left = time.monotonic()
    stays(lambda: exists(node, "addresses", name), 1.2, message="the address during its delay")
    wait_for(lambda: not exists(node, "addresses", name), message="the address deleted")
    assert time.monotonic() - left >= 1.5


def test_unused_and_empty_ones_go_at_the_start(make_broker: Any) -> None:
    node = node_with(make_broker, "<auto-delete-queues-delay>3600000</auto-delete-queues-delay>")
    empty, full = unique("auto.empty"), unique("auto.full")
    producer = node.client()
    producer.send(full, "kept", persistent="true", **ANYCAST_SEND)
    use_once(node, empty)
    producer.close()
    stays(lambda: exists(node, "queues", empty), 0.5, message="the empty queue (an hour's delay)")
    node.restart()
    # The initial check deletes the empty auto-created queue and its address, whatever the
    # delay; the one holding a message stays.
    assert not exists(node, "queues", empty)
    assert not exists(node, "addresses", empty)
    assert exists(node, "queues", full)
