"""``<ha-policy>``: primary-only (``live-only``) with an optional ``<scale-down>``, the
shared-store pair (``<shared-store><primary/>`` or ``<backup/>``) and the replication pair
(``<replication><primary/>`` or ``<backup/>``).

A backup's ``<scale-down>`` (either pair) is parsed and gets its own warning: it is not
implemented. ``<colocated>`` (either pair) is named in the not-implemented summary and the
node runs as primary-only. A replication pair finds itself through a cluster-connection: one
must exist, and a ``<cluster-name>`` must name one. The old names Artemis still accepts
(``live-only``, ``master``, ``slave``, ``check-for-live-server``) are read with a warning
naming the new one.
"""

from __future__ import annotations

from ..element_reader import Children, ElementReader
from ..enums import HAPolicy
from ..model import HAPolicyConfig, ReplicationConfig, ScaleDownConfig, SharedStoreConfig
from ..values import at_least, checked, int32, int64, minus_one_or_at_least, parse_bool
from ..xmlreader import XmlElement
from .discovery import read_discovery_ref

__all__ = ["read_ha_policy"]

# Artemis's deprecated names of the shared-store and replication roles, and their new names.
_OLD_ROLE_NAMES = {"master": "primary", "slave": "backup"}

# Artemis's validators of the replication settings (GT_ZERO on a long, MINUS_ONE_OR_GE_ZERO
# and MINUS_ONE_OR_GT_ZERO on an int).
_positive_long = checked(int64, at_least(1))
_positive_int = checked(int32, at_least(1))
_count_or_minus_one = checked(int32, minus_one_or_at_least(0))
_size_or_minus_one = checked(int32, minus_one_or_at_least(1))


def read_ha_policy(
    reader: ElementReader,
    kids: Children,
    connectors: set[str],
    groups: set[str],
    clusters: set[str],
) -> HAPolicyConfig:
    """``clusters`` are the names of the cluster-connections (a replication pair's)."""
    if "ha-policy" not in kids:
        return HAPolicyConfig()
    policy = _only_child(reader, kids["ha-policy"][0], "<ha-policy> takes one policy")
    if policy is None:
        return HAPolicyConfig()
    if policy.tag == "replication":
        return _replication(reader, policy, connectors, groups, clusters)
    if policy.tag == "shared-store":
        return _shared_store(reader, policy, connectors, groups)
    if policy.tag == "live-only":
        reader.warn(policy, "<live-only> is the old name of <primary-only>")
    pkids = reader.children(policy)
    if "scale-down" not in pkids:
        return HAPolicyConfig()
    return HAPolicyConfig(
        scale_down=_scale_down(reader, pkids["scale-down"][0], connectors, groups)
    )


def _only_child(reader: ElementReader, element: XmlElement, message: str) -> XmlElement | None:
    """The one implemented child of ``element`` (an error names each extra one)."""
    found = reader.children(element)
    chosen = [e for elements in found.values() for e in elements]
    for extra in chosen[1:]:
        reader.error(extra, f"{message}; <{chosen[0].tag}> is already given")
    return chosen[0] if chosen else None


def _role(reader: ElementReader, element: XmlElement) -> tuple[XmlElement, str, Children] | None:
    """The role element a pair policy (``<shared-store>``, ``<replication>``) names, its
    current name, and its children; None (warned) when it names none. As Artemis: without a
    role no policy is set (``colocated`` is named in the not-implemented summary by the
    vocabulary check)."""
    policy = element.tag
    role = _only_child(reader, element, f"<{policy}> takes one role")
    if role is None:
        reader.warn(
            element,
            f"<{policy}> names no <primary> or <backup>; this node runs as primary-only",
        )
        return None
    name = _OLD_ROLE_NAMES.get(role.tag, role.tag)
    if role.tag != name:
        reader.warn(role, f"<{role.tag}> is the old name of <{name}>")
    return role, name, reader.children(role, f"{policy}/{name}")


def _shared_store(
    reader: ElementReader, element: XmlElement, connectors: set[str], groups: set[str]
) -> HAPolicyConfig:
    found = _role(reader, element)
    if found is None:
        return HAPolicyConfig()
    _, name, rkids = found
    failover = reader.scalar(rkids, "failover-on-shutdown", parse_bool, False)
    if name == "primary":
        wait = reader.scalar(rkids, "wait-for-activation", parse_bool, True)
        if not wait:  # a node always waits: open_broker returns once it is live
            reader.not_implemented("wait-for-activation", rkids["wait-for-activation"][0].line)
        settings = SharedStoreConfig(failover_on_shutdown=failover, wait_for_activation=wait)
    else:
        settings = SharedStoreConfig(
            backup=True,
            failover_on_shutdown=failover,
            allow_failback=reader.scalar(rkids, "allow-failback", parse_bool, True),
            restart_backup=reader.scalar(rkids, "restart-backup", parse_bool, True),
            scale_down=_backup_scale_down(reader, rkids, connectors, groups),
        )
    return HAPolicyConfig(policy=HAPolicy.SHARED_STORE, shared_store=settings)


def _replication(
    reader: ElementReader,
    element: XmlElement,
    connectors: set[str],
    groups: set[str],
    clusters: set[str],
) -> HAPolicyConfig:
    found = _role(reader, element)
    if found is None:
        return HAPolicyConfig()
    role, name, rkids = found
    # Each role's vocabulary holds only its own elements: the other role's read as defaults.
    vote_retry_wait = reader.scalar(rkids, "vote-retry-wait", _positive_long, 5000)
    settings = ReplicationConfig(
        backup=name == "backup",
        group_name=reader.optional(rkids, "group-name"),
        cluster_name=_cluster_name(reader, role, rkids, clusters),
        check_for_active_server=_check_for_active_server(reader, rkids),
        initial_replication_sync_timeout=reader.scalar(
            rkids, "initial-replication-sync-timeout", _positive_long, 30000
        ),
        allow_failback=reader.scalar(rkids, "allow-failback", parse_bool, False),
        restart_backup=reader.scalar(rkids, "restart-backup", parse_bool, True),
        max_saved_replicated_journals_size=reader.scalar(
            rkids, "max-saved-replicated-journals-size", _count_or_minus_one, 2
        ),
        vote_on_replication_failure=reader.scalar(
            rkids, "vote-on-replication-failure", parse_bool, False
        ),
        quorum_size=reader.scalar(rkids, "quorum-size", _size_or_minus_one, -1),
        quorum_vote_wait=reader.scalar(rkids, "quorum-vote-wait", _positive_int, 30),
        vote_retries=reader.scalar(rkids, "vote-retries", _count_or_minus_one, 12),
        vote_retry_wait=vote_retry_wait,
        # As Artemis's parser: an absent retry-replication-wait takes vote-retry-wait's value.
        retry_replication_wait=reader.scalar(
            rkids, "retry-replication-wait", _positive_long, vote_retry_wait
        ),
        scale_down=_backup_scale_down(reader, rkids, connectors, groups, "replication"),
    )
    return HAPolicyConfig(policy=HAPolicy.REPLICATION, replication=settings)


def _cluster_name(
    reader: ElementReader, role: XmlElement, kids: Children, clusters: set[str]
) -> str | None:
    """The cluster-connection the pair finds itself through (``None``: the first one)."""
    name = reader.optional(kids, "cluster-name")
    if not clusters:
        reader.error(
            role,
            "replication needs a <cluster-connection>: the primary and its backup find each "
            "other through its connectors; add one to <cluster-connections>",
        )
        return name
    if name is not None and name not in clusters:
        element = kids["cluster-name"][0]
        reader.error(element, reader.undefined("cluster-connection", name, clusters))
    return name


def _check_for_active_server(reader: ElementReader, kids: Children) -> bool:
    """``check-for-active-server``, or its old name ``check-for-live-server``."""
    old, new = "check-for-live-server", "check-for-active-server"
    if old not in kids:
        return reader.scalar(kids, new, parse_bool, False)
    if new in kids:
        reader.error(kids[old][0], f"<{old}> is the old name of <{new}>; give only <{new}>")
    else:
        reader.warn(kids[old][0], f"<{old}> is the old name of <{new}>")
    return reader.scalar(kids, old, parse_bool, False)


def _backup_scale_down(
    reader: ElementReader,
    kids: Children,
    connectors: set[str],
    groups: set[str],
    pair: str = "shared-store",
) -> ScaleDownConfig | None:
    """A backup's ``<scale-down>``: parsed, and named once at start-up."""
    if "scale-down" not in kids:
        return None
    element = kids["scale-down"][0]
    settings = _scale_down(reader, element, connectors, groups)
    if settings.enabled:
        reader.warn(
            element,
            f"a {pair} backup's <scale-down> is not implemented: when its primary fails, "
            "this backup becomes live instead of moving the primary's messages to another node",
        )
    return settings


def _scale_down(
    reader: ElementReader, element: XmlElement, connectors: set[str], groups: set[str]
) -> ScaleDownConfig:
    skids = reader.children(element)
    refs: tuple[str, ...] = ()
    if "connectors" in skids:
        ckids = reader.children(skids["connectors"][0], "scale-down/connectors")
        refs = reader.references(ckids.get("connector-ref", []), connectors, "connector")
    discovery: str | None = None
    if "discovery-group-ref" in skids:
        ref = skids["discovery-group-ref"][0]
        discovery = read_discovery_ref(reader, ref, groups)
        if "connectors" in skids:
            reader.error(element, "use either <connectors> or <discovery-group-ref>, not both")
    return ScaleDownConfig(
        enabled=reader.scalar(skids, "enabled", parse_bool, True),
        group_name=reader.optional(skids, "group-name"),
        connectors=refs,
        discovery_group_name=discovery,
        commit_interval=reader.scalar(
            skids, "commit-interval", checked(int32, minus_one_or_at_least(1)), -1
        ),
    )
