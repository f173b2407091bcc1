"""``<broadcast-groups>``, ``<discovery-groups>`` and ``<discovery-group-ref>``s to them.

Both kinds of group share an endpoint: a UDP multicast group (``group-address``,
``group-port``, optional local bind address and port) or a JGroups channel.

A JGroups group's stack file is read here too (:mod:`.jgroups`): what cannot be used of it
is a configuration error naming the file, so a discovery that cannot work never starts
silently. The groups run in :mod:`artemis_py.cluster.discovery`.
"""

from __future__ import annotations

import ipaddress

from ..element_reader import Children, ElementReader
from ..model import (
    BroadcastGroupConfig,
    ClusterConnectionConfig,
    DiscoveryGroupConfig,
    HAPolicyConfig,
)
from ..values import at_least, checked, int64, local_port, port
from ..xmlreader import XmlElement
from .jgroups import read_jgroups

__all__ = [
    "check_discovery_use",
    "read_broadcast_groups",
    "read_discovery_groups",
    "read_discovery_ref",
]


def read_broadcast_groups(
    reader: ElementReader, kids: Children, connectors: set[str]
) -> tuple[BroadcastGroupConfig, ...]:
    if "broadcast-groups" not in kids:
        return ()
    groups: list[BroadcastGroupConfig] = []
    lines: dict[str, int] = {}
    for element in reader.children(kids["broadcast-groups"][0]).get("broadcast-group", []):
        name = reader.attribute(element, "name")
        gkids = reader.children(element)
        endpoint = _read_endpoint(reader, element, gkids, "broadcast-group")
        refs = reader.references(gkids.get("connector-ref", []), connectors, "connector")
        if not refs:
            reader.error(
                element, "a broadcast-group needs at least one <connector-ref> to announce"
            )
        if name is None or reader.duplicate(element, name, lines, "broadcast-group"):
            continue
        groups.append(
            BroadcastGroupConfig(
                name=name,
                connectors=refs,
                broadcast_period=reader.scalar(
                    gkids, "broadcast-period", checked(int64, at_least(1)), 2000
                ),
                **endpoint,  # type: ignore[arg-type]
            )
        )
    return tuple(groups)


def read_discovery_groups(
    reader: ElementReader, kids: Children
) -> tuple[DiscoveryGroupConfig, ...]:
    if "discovery-groups" not in kids:
        return ()
    groups: list[DiscoveryGroupConfig] = []
    lines: dict[str, int] = {}
    for element in reader.children(kids["discovery-groups"][0]).get("discovery-group", []):
        name = reader.attribute(element, "name")
        gkids = reader.children(element)
        endpoint = _read_endpoint(reader, element, gkids, "discovery-group")
        if name is None or reader.duplicate(element, name, lines, "discovery-group"):
            continue
        groups.append(
            DiscoveryGroupConfig(
                name=name,
                refresh_timeout=reader.scalar(
                    gkids, "refresh-timeout", checked(int64, at_least(1)), 10_000
                ),
                initial_wait_timeout=reader.scalar(
                    gkids, "initial-wait-timeout", checked(int64, at_least(1)), 10_000
                ),
                **endpoint,  # type: ignore[arg-type]
            )
        )
    return tuple(groups)


def read_discovery_ref(reader: ElementReader, element: XmlElement, groups: set[str]) -> str | None:
    """The group a ``<discovery-group-ref discovery-group-name=...>`` names, if defined."""
    reader.children(element, "discovery-group-ref")
    name = reader.attribute(element, "discovery-group-name")
    if name is not None and name not in groups:
        reader.error(element, reader.undefined("discovery-group", name, groups))
        return None
    return name


def _read_endpoint(
    reader: ElementReader, element: XmlElement, gkids: Children, what: str
) -> dict[str, object]:
    """The UDP/JGroups part shared by broadcast and discovery groups."""
    jgroups = [n for n in ("jgroups-file", "jgroups-channel") if n in gkids]
    udp = [
        n
        for n in ("group-address", "group-port", "local-bind-address", "local-bind-port")
        if n in gkids
    ]
    values: dict[str, object] = {
        "local_bind_address": reader.optional(gkids, "local-bind-address"),
        "local_bind_port": reader.scalar(gkids, "local-bind-port", local_port, -1),
        "jgroups_file": reader.optional(gkids, "jgroups-file"),
        "jgroups_channel": reader.optional(gkids, "jgroups-channel"),
    }
    if jgroups and udp:
        reader.error(
            element,
            f"{what} mixes JGroups ({', '.join(jgroups)}) and UDP ({', '.join(udp)}) settings",
        )
    elif jgroups:
        if "jgroups-file" in gkids:
            values["jgroups"] = read_jgroups(reader, element, gkids)
        else:
            reader.error(element, f"{what} with <jgroups-channel> needs <jgroups-file>")
    else:
        group_address = reader.optional(gkids, "group-address")
        if group_address is None:
            reader.error(element, f"{what} needs <group-address> (a multicast address)")
        else:
            _check_multicast(reader, gkids["group-address"][0], group_address)
        if "group-port" not in gkids:
            reader.error(element, f"{what} needs <group-port>")
        values["group_address"] = group_address
        values["group_port"] = reader.scalar(gkids, "group-port", port, -1)
    return values


def _check_multicast(reader: ElementReader, element: XmlElement, address: str) -> None:
    try:
        if not ipaddress.ip_address(address).is_multicast:
            raise ValueError
    except ValueError:
        reader.problems.error(
            element.line,
            "group-address",
            f"'{address}' is not a multicast IP address (224.0.0.0 to 239.255.255.255, or ff00::/8)",
        )


def check_discovery_use(
    reader: ElementReader,
    kids: Children,
    broadcast_groups: tuple[BroadcastGroupConfig, ...],
    discovery_groups: tuple[DiscoveryGroupConfig, ...],
    cluster_connections: tuple[ClusterConnectionConfig, ...],
    ha_policy: HAPolicyConfig,
) -> None:
    """Warn about discovery that is half configured: groups that nothing uses (they do not
    run), and a cluster that discovers others while nothing announces this node."""
    used = {c.discovery_group_name for c in cluster_connections}
    if ha_policy.scale_down is not None:
        used.add(ha_policy.scale_down.discovery_group_name)
    if "discovery-groups" in kids:
        elements = _group_elements(kids["discovery-groups"][0])
        for unused in discovery_groups:
            if unused.name not in used:
                reader.warn(
                    elements.get(unused.name, kids["discovery-groups"][0]),
                    f"discovery-group {unused.name!r} is not used by a cluster-connection or "
                    "scale-down: it does not run",
                )
    endpoints = {b.endpoint for b in broadcast_groups}
    for cc in cluster_connections:
        if cc.discovery_group_name is None:
            continue
        group = next((g for g in discovery_groups if g.name == cc.discovery_group_name), None)
        if group is None or group.endpoint in endpoints:
            continue
        if group.jgroups is not None and group.jgroups.protocol == "DNS_PING":
            continue  # DNS announces the members; nothing to broadcast
        reader.warn(
            kids["cluster-connections"][0],
            f"cluster-connection {cc.name!r} discovers others through {group.endpoint}, but "
            "no <broadcast-group> of this node announces on it: the others learn of this "
            "node only when it links to them",
        )


def _group_elements(element: XmlElement) -> dict[str, XmlElement]:
    return {
        child.attributes.get("name", ""): child
        for child in element.children
        if child.tag == "discovery-group"
    }
