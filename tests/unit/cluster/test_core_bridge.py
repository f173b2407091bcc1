"""A core bridge's parts without I/O: what a message is sent as (forwarding address,
routing types), its duplicate id, and where each connect attempt dials (static connectors
and discovery members in turn)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from artemis_py.broker.message import Message, decode_message
from artemis_py.cluster.bridge import duplicate_id
from artemis_py.cluster.core_bridge import CoreBridge, bridge_duplicate_id, bridged_payload
from artemis_py.config import BridgeConfig, ComponentRoutingType, ConnectorConfig, RoutingType


def config(**fields: Any) -> BridgeConfig:
    return BridgeConfig(name="b1", queue_name="outbox", static_connectors=("x",), **fields)


def sent_as(message: Message, **fields: Any) -> Message:
    return decode_message(1, bridged_payload(message, config(**fields)))


def test_the_message_keeps_its_bytes_unless_the_bridge_changes_something() -> None:
    message = Message(7, "orders", body=b"hi", routing_type=RoutingType.ANYCAST, durable=True)
    message.encoded = b"as journaled"
    assert bridged_payload(message, config()) == b"as journaled"  # PASS, own address


@pytest.mark.parametrize(
    ("routing", "expected"),
    [
        (ComponentRoutingType.PASS, RoutingType.ANYCAST),
        (ComponentRoutingType.STRIP, None),
        (ComponentRoutingType.MULTICAST, RoutingType.MULTICAST),
        (ComponentRoutingType.ANYCAST, RoutingType.ANYCAST),
    ],
)
def test_forwarding_address_and_routing_type(
    routing: ComponentRoutingType, expected: RoutingType | None
) -> None:
    message = Message(
        7,
        "orders",
        body=b"hi",
        properties=(("color", "red"),),
        routing_type=RoutingType.ANYCAST,
        durable=True,
        priority=7,
    )
    copy = sent_as(message, forwarding_address="incoming", routing_type=routing)
    assert (copy.address, copy.routing_type) == ("incoming", expected)
    assert (copy.body, copy.properties, copy.durable, copy.priority) == (
        b"hi",
        (("color", "red"),),
        True,
        7,
    )
    assert (message.address, message.routing_type) == ("orders", RoutingType.ANYCAST)


def test_duplicate_ids_name_the_bridge() -> None:
    ids = {
        bridge_duplicate_id("node", "b1", 42),
        bridge_duplicate_id("node", "b2", 42),
        duplicate_id("node", 42),  # a cluster link's, for the same message
    }
    assert len(ids) == 3


class FakeGroup:
    def __init__(self) -> None:
        self.found: list[tuple[str, int]] = []
        self.membership = SimpleNamespace(connectors=lambda: self.found)


def core_bridge(spec: BridgeConfig, discovery: FakeGroup | None = None) -> CoreBridge:
    node = SimpleNamespace(
        connectors=(
            ConnectorConfig("x", "tcp://x:1", host="x", port=1),
            ConnectorConfig("y", "tcp://y:2", host="y", port=2),
        ),
        cluster_user="cluster-admin",
        cluster_password="secret",
    )
    broker: Any = SimpleNamespace(config=node, node_id="me")
    return CoreBridge(broker, spec, None, instance_id="i", discovery=discovery)


def test_static_connectors_are_dialled_in_turn_with_the_cluster_credentials() -> None:
    bridge = core_bridge(BridgeConfig(name="b", queue_name="q", static_connectors=("x", "y")))
    assert [bridge._target(i)[:2] for i in range(3)] == [("x", 1), ("y", 2), ("x", 1)]
    assert (bridge.user, bridge.password) == ("cluster-admin", "secret")
    own = core_bridge(config(user="u", password="p"))
    assert (own.user, own.password) == ("u", "p")


def test_discovery_members_are_dialled_in_turn_once_found() -> None:
    group = FakeGroup()
    spec = BridgeConfig(name="b", queue_name="q", discovery_group_name="dg")
    bridge = core_bridge(spec, group)
    assert bridge._target(0) is None  # nobody found yet: a failed attempt
    group.found = [("n1", 5), ("n2", 6)]
    assert [bridge._target(i) for i in (0, 1, 2)] == [
        ("n1", 5, None),
        ("n2", 6, None),
        ("n1", 5, None),
    ]
