"""``<bridges>``: each ``<bridge name=...>`` (Artemis's ``bridgeType``; docs/bridges.md).

A bridge consumes a local queue and forwards to another node, found through
``<static-connectors>`` or a ``<discovery-group-ref>`` (exactly one, as the schema says).
Scalars take the defaults of Artemis's parser (``FileConfigurationParser``) and its checks:
intervals and periods greater than 0, attempts -1 or more, windows -1 or at least 1 byte.

Refused here, with the line of the element at fault: a transformer (a Java class we cannot
run; its bridge would forward something other than what it configures), and a bridge whose
connector is this node itself (one of its acceptors' host and port, or the connector its
cluster connections announce as theirs): it would consume its own queue to send the
messages back into the same node.
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace

from ..element_reader import Children, ElementReader, Invalid
from ..enums import ComponentRoutingType
from ..model import AcceptorConfig, BridgeConfig, BrokerConfig, ConnectorConfig
from ..values import (
    at_least,
    bytes32,
    checked,
    int32,
    int64,
    minus_one_or_at_least,
    parse_bool,
    parse_enum,
    positive_float,
)
from ..xmlreader import XmlElement
from .discovery import read_discovery_ref
from .transports import Unmask

__all__ = ["read_bridges"]

# Parsed and validated; nothing acts on them (docs/bridges.md says why): named in the
# start-up warning unless set to Artemis's default. Element -> BridgeConfig field.
_NOT_IMPLEMENTED = {
    "ha": "ha",
    "use-duplicate-detection": "use_duplicate_detection",
    "confirmation-window-size": "confirmation_window_size",
    "min-large-message-size": "min_large_message_size",
    "reconnect-attempts-same-node": "reconnect_attempts_same_node",
    "concurrency": "concurrency",
    "client-id": "client_id",
}
_DEFAULTS = BridgeConfig(name="", queue_name="")
_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def read_bridges(
    reader: ElementReader, kids: Children, node: BrokerConfig, unmask: Unmask
) -> tuple[BridgeConfig, ...]:
    """Every ``<bridge>``; ``node``: the rest of the file (connectors, acceptors, cluster
    connections and discovery groups), read before."""
    if "bridges" not in kids:
        return ()
    own = {c.connector_name for c in node.cluster_connections}
    by_name = {c.name: c for c in node.connectors}
    groups = {g.name for g in node.discovery_groups}
    acceptors = node.acceptors
    bridges: list[BridgeConfig] = []
    lines: dict[str, int] = {}
    for element in reader.children(kids["bridges"][0]).get("bridge", []):
        bkids = reader.children(element)
        bridge = _bridge(reader, element, bkids, set(by_name), groups, unmask)
        if bridge is None or reader.duplicate(element, bridge.name, lines, "bridge"):
            continue
        reader.not_implemented_unless_default(bkids, _NOT_IMPLEMENTED, bridge, _DEFAULTS)
        if "failover-on-server-shutdown" in bkids:
            reader.warn(
                bkids["failover-on-server-shutdown"][0],
                "deprecated, and without effect (in Artemis too); remove it",
            )
        if _to_itself(reader, bkids, bridge, by_name, acceptors, own):
            continue
        bridges.append(bridge)
    return tuple(bridges)


def _bridge(
    reader: ElementReader,
    element: XmlElement,
    bkids: Children,
    connectors: set[str],
    groups: set[str],
    unmask: Unmask,
) -> BridgeConfig | None:
    name = reader.attribute(element, "name")
    label = f"bridge '{name}'" if name else "bridge"
    for java in ("transformer-class-name", "transformer"):
        if java in bkids:
            reader.error(
                bkids[java][0],
                f"{label}: transformers are Java classes, which artemis-py cannot run; "
                "remove the transformer (the bridge would forward something else than it "
                "configures)",
            )
    queue_name = reader.optional(bkids, "queue-name")
    if "queue-name" not in bkids:
        reader.error(element, f"{label} needs a <queue-name> (the local queue it consumes)")
    elif queue_name is None:
        reader.error(bkids["queue-name"][0], f"{label}: <queue-name> is empty")
    static, discovery = _target(reader, element, bkids, label, connectors, groups)
    filter_string = None
    if "filter" in bkids:
        filter_element = bkids["filter"][0]
        reader.children(filter_element)
        filter_string = reader.attribute(filter_element, "string", required=False)
    settings = _scalars(reader, bkids, unmask)
    if name is None or queue_name is None or not (static or discovery):
        return None
    if bkids.keys() & {"transformer-class-name", "transformer"}:
        return None
    return replace(
        settings,
        name=name,
        queue_name=queue_name,
        filter=filter_string or None,
        static_connectors=static,
        discovery_group_name=discovery,
        line=element.line,
    )


def _scalars(reader: ElementReader, bkids: Children, unmask: Unmask) -> BridgeConfig:
    """The bridge's scalar settings (Artemis's parser's checks), on a nameless bridge."""
    scalar = reader.scalar
    positive = checked(int64, at_least(1))
    attempts = checked(int32, minus_one_or_at_least(0))
    window = checked(bytes32, minus_one_or_at_least(1))
    d = _DEFAULTS
    return BridgeConfig(
        name="",
        queue_name="",
        forwarding_address=reader.optional(bkids, "forwarding-address"),
        ha=scalar(bkids, "ha", parse_bool, d.ha),
        min_large_message_size=scalar(
            bkids, "min-large-message-size", checked(bytes32, at_least(1)), d.min_large_message_size
        ),
        check_period=scalar(bkids, "check-period", positive, d.check_period),
        connection_ttl=scalar(bkids, "connection-ttl", positive, d.connection_ttl),
        retry_interval=scalar(bkids, "retry-interval", positive, d.retry_interval),
        retry_interval_multiplier=scalar(
            bkids, "retry-interval-multiplier", positive_float, d.retry_interval_multiplier
        ),
        max_retry_interval=scalar(bkids, "max-retry-interval", positive, d.max_retry_interval),
        initial_connect_attempts=scalar(
            bkids, "initial-connect-attempts", attempts, d.initial_connect_attempts
        ),
        reconnect_attempts=scalar(bkids, "reconnect-attempts", attempts, d.reconnect_attempts),
        reconnect_attempts_same_node=scalar(
            bkids, "reconnect-attempts-same-node", attempts, d.reconnect_attempts_same_node
        ),
        use_duplicate_detection=scalar(
            bkids, "use-duplicate-detection", parse_bool, d.use_duplicate_detection
        ),
        confirmation_window_size=scalar(
            bkids, "confirmation-window-size", window, d.confirmation_window_size
        ),
        producer_window_size=scalar(bkids, "producer-window-size", window, d.producer_window_size),
        user=reader.optional(bkids, "user"),
        password=_password(reader, bkids, unmask),
        routing_type=scalar(
            bkids,
            "routing-type",
            lambda text: parse_enum(text, ComponentRoutingType),
            d.routing_type,
        ),
        concurrency=scalar(bkids, "concurrency", checked(int32, at_least(1)), d.concurrency),
        pending_ack_timeout=scalar(bkids, "pending-ack-timeout", positive, d.pending_ack_timeout),
        client_id=reader.optional(bkids, "client-id"),
    )


def _password(reader: ElementReader, bkids: Children, unmask: Unmask) -> str | None:
    """``<password>``, unmasked as broker.xml's other passwords (None: absent)."""
    if "password" not in bkids:
        return None
    value = reader.convert(bkids["password"][0], unmask)
    return None if isinstance(value, Invalid) else value


def _target(
    reader: ElementReader,
    element: XmlElement,
    bkids: Children,
    label: str,
    connectors: set[str],
    groups: set[str],
) -> tuple[tuple[str, ...], str | None]:
    """Where the bridge forwards to: (static connectors, discovery group)."""
    static: tuple[str, ...] = ()
    discovery: str | None = None
    if "static-connectors" in bkids:
        static_element = bkids["static-connectors"][0]
        skids = reader.children(static_element)
        if static_element.attributes.get("allow-direct-connections-only") is not None:
            reader.warn(
                static_element,
                f"{label}: allow-direct-connections-only applies to cluster connections only",
            )
        if not skids.get("connector-ref"):
            reader.error(static_element, "<static-connectors> needs at least one <connector-ref>")
        static = reader.references(skids.get("connector-ref", []), connectors, "connector")
    if "discovery-group-ref" in bkids:
        discovery = read_discovery_ref(reader, bkids["discovery-group-ref"][0], groups)
        if "static-connectors" in bkids:
            reader.error(
                bkids["discovery-group-ref"][0],
                "use either <static-connectors> or <discovery-group-ref>, not both",
            )
    if "static-connectors" not in bkids and "discovery-group-ref" not in bkids:
        reader.error(
            element,
            f"{label} needs <static-connectors> or <discovery-group-ref> (the node it forwards to)",
        )
    return static, discovery


def _to_itself(
    reader: ElementReader,
    bkids: Children,
    bridge: BridgeConfig,
    connectors: dict[str, ConnectorConfig],
    acceptors: tuple[AcceptorConfig, ...],
    own: set[str],
) -> bool:
    """Report each static connector of ``bridge`` that is this node itself (see the module
    doc); whether there was one."""
    found = False
    for name in bridge.static_connectors:
        connector = connectors[name]
        why = None
        if name in own:
            why = "the connector this node's cluster connection announces as its own"
        for acceptor in acceptors:
            if _same_endpoint(connector, acceptor):
                why = f"the address of this node's acceptor '{acceptor.name}'"
        if why is not None:
            found = True
            reader.error(
                bkids["static-connectors"][0],
                f"bridge '{bridge.name}' would forward to this node itself: connector "
                f"'{name}' ({connector.url}) is {why}; a bridge forwards to another node",
            )
    return found


def _same_endpoint(connector: ConnectorConfig, acceptor: AcceptorConfig) -> bool:
    """Whether dialling ``connector`` reaches ``acceptor`` of this node, as far as the file
    tells: the same port, and the same host, or a wildcard acceptor and a loopback host."""
    if acceptor.port == 0 or connector.port != acceptor.port:
        return False
    host = connector.host
    if host in acceptor.hosts:
        return True
    return _loopback(host) and any(h in _WILDCARD_HOSTS or _loopback(h) for h in acceptor.hosts)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
