"""Wildcard routing with real nodes and stomp.py (Artemis's "Routing Messages With Wild
Cards"): a subscription on ``news.#`` or ``news.*`` receives what is sent to the addresses
the pattern matches; a durable one keeps it through a restart; sending to a pattern is
refused; ``<wildcard-addresses>`` changes the syntax or turns routing off.

The acceptor is as ``artemis create`` writes it (no ``/queue/`` or ``/topic/`` prefixes):
destinations are plain addresses and the routing type is a header.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .conftest import BrokerProcess, Client, start_refused, unique

MULTICAST = {"subscription-type": "MULTICAST"}
ANYCAST = {"subscription-type": "ANYCAST"}


def bodies(client: Client) -> list[str]:
    return sorted(client.bodies())


def send_all(node: BrokerProcess, sends: list[tuple[str, str]], **headers: Any) -> None:
    producer = node.client()
    try:
        for destination, body in sends:
            producer.send(destination, body, **headers)
    finally:
        producer.close()


def test_subscriptions_on_patterns_receive_what_their_addresses_are_sent(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    node = make_broker(prefixes=False)
    top = unique("news")
    every, one_level, exact = node.client(), node.client(), node.client()
    every.subscribe(f"{top}.#", **MULTICAST)
    one_level.subscribe(f"{top}.*", **MULTICAST)
    exact.subscribe(f"{top}.eu", **MULTICAST)
    send_all(
        node,
        [(f"{top}.eu", "eu"), (f"{top}.us", "us"), (f"{top}.eu.sport", "eu-sport"), (top, "top")],
        **{"destination-type": "MULTICAST"},
    )
    every.wait_messages(4)
    one_level.wait_messages(2)
    exact.wait_messages(1)
    assert bodies(every) == ["eu", "eu-sport", "top", "us"]
    assert bodies(one_level) == ["eu", "us"]
    assert bodies(exact) == ["eu"]
    # Each message keeps the address it was sent to.
    assert {m.body: m.headers["destination"] for m in every.messages}["eu-sport"] == (
        f"{top}.eu.sport"
    )
    # Nothing more arrives (one copy per subscription, however many patterns match).
    exact.send(f"{top}.eu", "sync", **{"destination-type": "MULTICAST"})
    exact.wait_messages(2)
    assert bodies(every).count("eu") == 1


def test_a_browse_of_a_pattern_s_queue_names_each_message_s_address(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    node = make_broker(prefixes=False, persistence=True)
    top, client_id = unique("news"), unique("cid")
    owner = node.client(client_id=client_id)
    owner.subscribe(f"{top}.#", **{"durable-subscription-name": "all", **MULTICAST})
    owner.close()
    send_all(
        node,
        [(f"{top}.eu", "eu"), (f"{top}.us.tech", "tech")],
        persistent="true",
        **{"destination-type": "MULTICAST"},
    )
    reader = node.client()
    reader.subscribe(f"{top}.#::{client_id}.all", "b1", browser="true")
    frames = reader.wait_messages(3)
    assert [(f.body, f.headers["destination"]) for f in frames[:2]] == [
        ("eu", f"{top}.eu"),
        ("tech", f"{top}.us.tech"),
    ]
    assert frames[2].headers["browser"] == "end"


def test_an_anycast_queue_on_a_pattern_shares_with_the_address_s_own_queue(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    node = make_broker(prefixes=False)
    top = unique("orders")
    node_wide, local = node.client(), node.client()
    node_wide.subscribe(f"{top}.#", **ANYCAST)
    local.subscribe(f"{top}.eu", **ANYCAST)
    send_all(node, [(f"{top}.eu", f"o{n}") for n in range(6)], **{"destination-type": "ANYCAST"})
    node_wide.wait_messages(3)
    local.wait_messages(3)
    assert sorted(bodies(node_wide) + bodies(local)) == [f"o{n}" for n in range(6)]


def test_a_durable_subscription_on_a_pattern_keeps_messages_through_a_restart(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    node = make_broker(prefixes=False, persistence=True)
    top, client_id = unique("prices"), unique("cid")
    durable = {"durable-subscription-name": "all", **MULTICAST}
    reader = node.client(client_id=client_id)
    reader.subscribe(f"{top}.#", **durable)
    reader.close()
    send_all(
        node,
        [(f"{top}.fx", "fx"), (f"{top}.bonds.eu", "bonds")],
        persistent="true",
        **{"destination-type": "MULTICAST"},
    )
    node.restart(crash=True)
    back = node.client(client_id=client_id)
    back.subscribe(f"{top}.#", **durable)
    back.wait_messages(2)
    assert bodies(back) == ["bonds", "fx"]
    send_all(node, [(f"{top}.fx", "after")], **{"destination-type": "MULTICAST"})
    back.wait_messages(3)


def test_sending_to_a_pattern_is_refused_with_an_error(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    node = make_broker(prefixes=False)
    top = unique("news")
    subscriber = node.client()
    subscriber.subscribe(f"{top}.#", **MULTICAST)
    producer = node.client()
    producer.conn.send(f"{top}.#", "to-the-pattern", headers={"receipt": "r1"})
    error = producer.wait_error()
    assert "wildcard" in error.headers.get("message", "") + error.body
    assert subscriber.messages == []


def test_a_custom_syntax_and_routing_turned_off(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    custom = make_broker(
        prefixes=False,
        extra_core="<wildcard-addresses><delimiter>/</delimiter><any-words>&gt;</any-words>"
        "<single-word>+</single-word></wildcard-addresses>",
    )
    top = unique("news")
    subscriber = custom.client()
    subscriber.subscribe(f"{top}/>", **MULTICAST)
    send_all(custom, [(f"{top}/eu/sport", "deep")], **{"destination-type": "MULTICAST"})
    subscriber.wait_messages(1)
    assert bodies(subscriber) == ["deep"]

    off = make_broker(
        prefixes=False,
        extra_core="<wildcard-addresses><routing-enabled>false</routing-enabled>"
        "</wildcard-addresses>",
    )
    literal = off.client()
    literal.subscribe(f"{top}.#", **MULTICAST)
    # With routing off a pattern is an ordinary address: it matches nothing, and a send to
    # it is a send to that very name.
    send_all(
        off,
        [(f"{top}.eu", "not-routed"), (f"{top}.#", "literal")],
        **{"destination-type": "MULTICAST"},
    )
    literal.wait_messages(1)
    assert bodies(literal) == ["literal"]


def test_a_malformed_pattern_is_refused_at_subscribe_and_in_the_configuration(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    node = make_broker(prefixes=False)
    client = node.client()
    client.conn.subscribe(
        "news*", "s1", headers={"subscription-type": "MULTICAST", "receipt": "r1"}
    )
    error = client.wait_error()
    assert "did you mean 'news.*'" in error.headers.get("message", "") + error.body

    broken = make_broker(
        prefixes=False,
        start=False,
        addresses='<address name="prices.fx#"><multicast/></address>',
    )
    refused = start_refused(broken)
    assert "broker.xml:" in refused, refused
    assert "<address@name>" in refused, refused
    assert "did you mean 'prices.fx.#'" in refused, refused
