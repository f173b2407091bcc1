"""``<cluster-connections>``: how this node joins a cluster (Artemis clusters §4.1).

Each ``<cluster-connection>`` names the connector it advertises and finds the other nodes
through ``<static-connectors>`` or a ``<discovery-group-ref>`` (not both); the rest are
scalars with Artemis's defaults.
"""

from __future__ import annotations

from ..element_reader import Children, ElementReader
from ..enums import MessageLoadBalancing
from ..model import ClusterConnectionConfig
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

__all__ = ["read_cluster_connections"]

# Parsed and validated, but nothing acts on them yet (cluster links send whole messages, always
# with duplicate ids, and have no confirmation window or failover): named in the start-up
# warning unless set to Artemis's default. Element -> ClusterConnectionConfig field.
_NOT_IMPLEMENTED = {
    "min-large-message-size": "min_large_message_size",
    "use-duplicate-detection": "use_duplicate_detection",
    "confirmation-window-size": "confirmation_window_size",
    "call-failover-timeout": "call_failover_timeout",
    "notification-interval": "notification_interval",
    "notification-attempts": "notification_attempts",
}
_DEFAULTS = ClusterConnectionConfig(name="", connector_name="")


def read_cluster_connections(
    reader: ElementReader, kids: Children, connectors: set[str], groups: set[str]
) -> tuple[ClusterConnectionConfig, ...]:
    if "cluster-connections" not in kids:
        return ()
    result: list[ClusterConnectionConfig] = []
    lines: dict[str, int] = {}
    elements = reader.children(kids["cluster-connections"][0]).get("cluster-connection", [])
    for element in elements:
        name = reader.attribute(element, "name")
        ckids = reader.children(element)
        connection = _cluster_connection(reader, element, name or "", ckids, connectors, groups)
        if connection is not None:
            reader.not_implemented_unless_default(ckids, _NOT_IMPLEMENTED, connection, _DEFAULTS)
        if (
            name is None
            or connection is None
            or reader.duplicate(element, name, lines, "cluster-connection")
        ):
            continue
        for earlier in result:
            _warn_overlap(reader, element, earlier, connection)
        result.append(connection)
    return tuple(result)


def _warn_overlap(
    reader: ElementReader,
    element: XmlElement,
    earlier: ClusterConnectionConfig,
    later: ClusterConnectionConfig,
) -> None:
    """Addresses that two cluster connections both cover belong to the first of them (the
    later one neither balances them nor learns their queues): say so, naming both."""
    shared = earlier.overlap(later)
    if shared is None:
        return
    where = f"addresses starting with {shared!r}" if shared else "every address"
    reader.warn(
        element,
        f"cluster-connection {later.name!r} overlaps cluster-connection {earlier.name!r} "
        f"(<address>): {where} belong to {earlier.name!r}, the first in the file; give "
        "the connections address filters that do not overlap",
    )


def _cluster_connection(
    reader: ElementReader,
    element: XmlElement,
    name: str,
    ckids: Children,
    connectors: set[str],
    groups: set[str],
) -> ClusterConnectionConfig | None:
    connector_name: str | None = None
    if "connector-ref" not in ckids:
        reader.error(
            element, "a cluster-connection needs <connector-ref> (the connector it advertises)"
        )
    else:
        refs = reader.references(ckids["connector-ref"], connectors, "connector")
        connector_name = refs[0] if refs else None
    load_balancing = _load_balancing(reader, ckids)
    static, allow_direct, discovery = _peers(reader, ckids, connectors, groups)
    if connector_name is None:
        return None
    scalar = reader.scalar
    return ClusterConnectionConfig(
        name=name,
        connector_name=connector_name,
        address=scalar(ckids, "address", str.strip, ""),
        check_period=scalar(ckids, "check-period", checked(int64, at_least(1)), 30_000),
        connection_ttl=scalar(ckids, "connection-ttl", checked(int64, at_least(1)), 60_000),
        min_large_message_size=scalar(
            ckids, "min-large-message-size", checked(bytes32, at_least(1)), 100 * 1024
        ),
        call_timeout=scalar(ckids, "call-timeout", checked(int64, at_least(1)), 30_000),
        retry_interval=scalar(ckids, "retry-interval", checked(int64, at_least(1)), 500),
        retry_interval_multiplier=scalar(ckids, "retry-interval-multiplier", positive_float, 1.0),
        max_retry_interval=scalar(ckids, "max-retry-interval", checked(int64, at_least(1)), 2000),
        initial_connect_attempts=scalar(
            ckids, "initial-connect-attempts", checked(int32, minus_one_or_at_least(0)), -1
        ),
        reconnect_attempts=scalar(
            ckids, "reconnect-attempts", checked(int32, minus_one_or_at_least(0)), -1
        ),
        use_duplicate_detection=scalar(ckids, "use-duplicate-detection", parse_bool, True),
        message_load_balancing=load_balancing,
        max_hops=scalar(ckids, "max-hops", checked(int32, at_least(0)), 1),
        # The manual documents -1 as "no window"; Artemis's parser only takes > 0. Accept both.
        confirmation_window_size=scalar(
            ckids,
            "confirmation-window-size",
            checked(bytes32, minus_one_or_at_least(1)),
            1024 * 1024,
        ),
        producer_window_size=scalar(
            ckids, "producer-window-size", checked(bytes32, minus_one_or_at_least(1)), 1024 * 1024
        ),
        call_failover_timeout=scalar(
            ckids, "call-failover-timeout", checked(int64, minus_one_or_at_least(1)), -1
        ),
        notification_interval=scalar(
            ckids, "notification-interval", checked(int64, at_least(1)), 1000
        ),
        notification_attempts=scalar(
            ckids, "notification-attempts", checked(int32, at_least(1)), 2
        ),
        static_connectors=static,
        allow_direct_connections_only=allow_direct,
        discovery_group_name=discovery,
    )


def _load_balancing(reader: ElementReader, ckids: Children) -> MessageLoadBalancing:
    load_balancing = reader.scalar(
        ckids,
        "message-load-balancing",
        lambda t: parse_enum(t, MessageLoadBalancing),
        MessageLoadBalancing.ON_DEMAND,
    )
    if "forward-when-no-consumers" in ckids:
        legacy = ckids["forward-when-no-consumers"][0]
        message = "deprecated; use <message-load-balancing> (true = STRICT, false = ON_DEMAND)"
        if "message-load-balancing" in ckids:
            message += "; it takes precedence over <message-load-balancing> here, as in Artemis"
        reader.warn(legacy, message)
        forward = reader.scalar(ckids, "forward-when-no-consumers", parse_bool, False)
        load_balancing = MessageLoadBalancing.STRICT if forward else MessageLoadBalancing.ON_DEMAND
    return load_balancing


def _peers(
    reader: ElementReader, ckids: Children, connectors: set[str], groups: set[str]
) -> tuple[tuple[str, ...], bool, str | None]:
    """How the other nodes are found: (static connectors, allow-direct-connections-only,
    discovery group name)."""
    static: tuple[str, ...] = ()
    allow_direct = False
    if "static-connectors" in ckids:
        static_element = ckids["static-connectors"][0]
        skids = reader.children(static_element)
        allow_direct = bool(
            reader.convert_attribute(static_element, "allow-direct-connections-only", parse_bool)
        )
        static = reader.references(skids.get("connector-ref", []), connectors, "connector")
        if not skids.get("connector-ref"):
            reader.error(static_element, "<static-connectors> needs at least one <connector-ref>")
    discovery: str | None = None
    if "discovery-group-ref" in ckids:
        discovery = read_discovery_ref(reader, ckids["discovery-group-ref"][0], groups)
        if "static-connectors" in ckids:
            reader.error(
                ckids["discovery-group-ref"][0],
                "use either <static-connectors> or <discovery-group-ref>, not both",
            )
    return static, allow_direct, discovery
