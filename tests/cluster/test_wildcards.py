"""Wildcard routing across a cluster: a subscription on a pattern on one node draws what is
sent to the matching addresses on the others (its remote binding is on the pattern), and a
backlog on a pattern's queue is redistributed to a consumer on another node."""

from __future__ import annotations

from typing import Any

from .conftest import (
    CLUSTER_ADDRESS_SETTINGS,
    DEFAULT_ADDRESSES,
    Client,
    Cluster,
    status,
    unique,
    wait_binding,
    wait_for,
)


def bodies(client: Client) -> list[str]:
    return sorted(m.body for m in client.messages)


def test_subscriptions_on_patterns_on_other_nodes_receive(nodes: Cluster, clients: Any) -> None:
    top = unique("news")
    every, one_level = clients(nodes[1]), clients(nodes[2])
    every.subscribe(f"/topic/{top}.#")
    one_level.subscribe(f"/topic/{top}.*")

    def learned() -> bool:
        known = {b["address"] for b in status(nodes[0])["remote_bindings"] if b["consumers"]}
        return {f"{top}.#", f"{top}.*"} <= known

    wait_for(learned, 15, message="node 0 to learn both patterns' bindings")
    producer = clients(nodes[0])
    for address in (f"{top}.eu", f"{top}.us", f"{top}.eu.sport"):
        producer.send(f"/topic/{address}", address, persistent="true")
    every.wait_messages(3)
    one_level.wait_messages(2)
    every.sync()
    one_level.sync()
    assert bodies(every) == sorted([f"{top}.eu", f"{top}.eu.sport", f"{top}.us"])
    assert bodies(one_level) == sorted([f"{top}.eu", f"{top}.us"])
    # Deliveries name the address each message was sent to, on the subscriber's node too.
    assert {m.headers["destination"] for m in one_level.messages} == {
        f"/topic/{top}.eu",
        f"/topic/{top}.us",
    }


PATTERN = "orders.#"
PATTERN_QUEUE = f"""
      <address name="{PATTERN}"><anycast><queue name="all-orders"/></anycast></address>"""


def test_a_pattern_queue_s_backlog_follows_a_consumer_to_another_node(
    cluster: Any, clients: Any
) -> None:
    settings = CLUSTER_ADDRESS_SETTINGS.replace(
        "<auto-create-queues>true</auto-create-queues>",
        "<auto-create-queues>true</auto-create-queues>\n"
        "        <redistribution-delay>0</redistribution-delay>",
    )
    nodes = cluster(2, address_settings=settings, addresses=DEFAULT_ADDRESSES + PATTERN_QUEUE)
    producer = clients(nodes[0])
    sent = [f"o{n}" for n in range(12)]
    for n, body in enumerate(sent):
        region = ("eu", "us", "eu.north")[n % 3]
        producer.send(f"/queue/orders.{region}", body, persistent="true")
    consumer = clients(nodes[1])
    consumer.subscribe("/queue/orders.#::all-orders")
    wait_binding(nodes[0], "all-orders", on=nodes[1], consumers=1)
    consumer.wait_messages(len(sent))
    consumer.sync()
    assert bodies(consumer) == sorted(sent)


def test_scale_down_moves_a_durable_subscription_on_a_pattern(cluster: Any, clients: Any) -> None:
    nodes = cluster(
        2,
        node_options={
            0: {
                "extra_core": "<ha-policy><primary-only><scale-down><connectors>"
                "<connector-ref>node1</connector-ref></connectors></scale-down></primary-only>"
                "</ha-policy>"
            }
        },
    )
    top = unique("prices")
    subscriber = clients(nodes[0], client_id="c0")
    durable = {"durable-subscription-name": "all"}
    subscriber.subscribe(f"/topic/{top}.#", **durable)
    subscriber.disconnect()
    producer = clients(nodes[0])
    sent = [f"p{n}" for n in range(9)]
    for n, body in enumerate(sent):
        producer.send(f"/topic/{top}.{('fx', 'bonds', 'fx.spot')[n % 3]}", body, persistent="true")
    producer.disconnect()
    assert nodes[0].stop() == 0
    assert "moved 9 message(s)" in nodes[0].log(since_start=True)
    back = clients(nodes[1], client_id="c0")
    back.subscribe(f"/topic/{top}.#", **durable)
    back.wait_messages(len(sent), timeout=20)
    back.sync()
    assert [m.body for m in back.messages] == sent
    # The moved messages keep the addresses they were sent to.
    assert back.messages[2].headers["destination"] == f"/topic/{top}.fx.spot"
