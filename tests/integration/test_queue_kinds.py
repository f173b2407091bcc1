"""Last-value and ring queues with a real node and stomp.py (Artemis's "Last-Value Queues" and
"Ring Queues"), and dispatch held for consumers-before-dispatch. Of the
messages waiting with one value of the key only the latest is kept, through a restart too;
``last-value="true"`` keys on ``_AMQ_LVQ_NAME``, and ``default-last-value-key`` makes every
queue of an address one."""

from __future__ import annotations

from collections.abc import Callable

from .conftest import BrokerProcess, unique

ANYCAST_SEND = {"destination-type": "ANYCAST", "persistent": "true"}
ANYCAST_SUB = {"subscription-type": "ANYCAST"}


def test_only_the_latest_waiting_value_per_key_is_kept(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    keyed, flagged, defaulted = unique("prices"), unique("flagged"), unique("defaulted")
    node = make_broker(
        prefixes=False,
        persistence=True,
        addresses=(
            f'<address name="{keyed}"><anycast><queue name="{keyed}" last-value-key="stock"/>'
            f'</anycast></address><address name="{flagged}"><anycast>'
            f'<queue name="{flagged}" last-value="true"/></anycast></address>'
        ),
        address_settings=f'<address-setting match="{defaulted}"><default-last-value-key>stock'
        "</default-last-value-key></address-setting>",
    )
    producer = node.client()
    for queue, key in ((keyed, "stock"), (flagged, "_AMQ_LVQ_NAME"), (defaulted, "stock")):
        for n, stock in enumerate(["IBM", "AAPL", "IBM", "IBM"]):
            producer.send(queue, f"{stock}-{n}", **{key: stock}, **ANYCAST_SEND)
        producer.send(queue, "no-key", **ANYCAST_SEND)
    producer.close()
    node.restart(crash=True)
    for queue in (keyed, flagged, defaulted):
        consumer = node.client()
        consumer.subscribe(queue, **ANYCAST_SUB)
        consumer.wait_messages(3)
        consumer.sync()
        assert [m.body for m in consumer.messages] == ["AAPL-1", "IBM-3", "no-key"], queue
        consumer.close()


def test_a_ring_queue_keeps_its_newest_and_dispatch_waits_for_its_consumers(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    ring, gated = unique("ring"), unique("gated")
    node = make_broker(
        prefixes=False,
        persistence=True,
        addresses=(
            f'<address name="{ring}"><anycast><queue name="{ring}" ring-size="3"/></anycast>'
            f'</address><address name="{gated}"><anycast>'
            f'<queue name="{gated}" consumers-before-dispatch="2"/></anycast></address>'
        ),
    )
    producer = node.client()
    for n in range(6):
        producer.send(ring, f"r{n}", **ANYCAST_SEND)
        producer.send(gated, f"g{n}", **ANYCAST_SEND)
    producer.close()
    node.restart(crash=True)
    reader = node.client()
    reader.subscribe(ring, **ANYCAST_SUB)
    reader.wait_messages(3)
    reader.sync()
    assert [m.body for m in reader.messages] == ["r3", "r4", "r5"]
    first = node.client()
    first.subscribe(gated, **ANYCAST_SUB)
    first.sync()
    assert first.messages == []  # one consumer of the two it waits for
    second = node.client()
    second.subscribe(gated, **ANYCAST_SUB)
    second.wait_messages(3)
    first.wait_messages(3)
