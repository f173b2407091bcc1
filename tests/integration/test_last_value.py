"""Last-value queues with a real node and stomp.py (Artemis's "Last-Value Queues"): of the
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
