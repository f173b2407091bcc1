"""``<ha-policy>``: primary-only (``live-only``) with an optional ``<scale-down>``, and the
shared-store pair (``<shared-store><primary/>`` or ``<backup/>``).

Replication is a valid Artemis policy that artemis-py does not implement: it gets its own
warning and the node runs as primary-only. The old names Artemis still accepts
(``live-only``, ``master``, ``slave``) are read with a warning naming the new one.
"""

from __future__ import annotations

from ..element_reader import Children, ElementReader
from ..enums import HAPolicy
from ..model import HAPolicyConfig, ScaleDownConfig, SharedStoreConfig
from ..values import checked, int32, minus_one_or_at_least, parse_bool
from ..xmlreader import XmlElement
from .discovery import read_discovery_ref

__all__ = ["read_ha_policy"]

# Artemis's deprecated names of the shared-store roles, and the names that replace them.
_OLD_ROLE_NAMES = {"master": "primary", "slave": "backup"}


def read_ha_policy(
    reader: ElementReader, kids: Children, connectors: set[str], groups: set[str]
) -> HAPolicyConfig:
    if "ha-policy" not in kids:
        return HAPolicyConfig()
    policy = _only_child(reader, kids["ha-policy"][0], "<ha-policy> takes one policy")
    if policy is None:
        return HAPolicyConfig()
    if policy.tag == "replication":
        reader.warn(
            policy,
            f"ha-policy <{policy.tag}> is not implemented; this node runs as primary-only",
        )
        return HAPolicyConfig(policy=HAPolicy(policy.tag))
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


def _shared_store(
    reader: ElementReader, element: XmlElement, connectors: set[str], groups: set[str]
) -> HAPolicyConfig:
    role = _only_child(reader, element, "<shared-store> takes one role")
    if role is None:
        # As Artemis: a shared-store without a role sets no policy (colocated is named in
        # the not-implemented summary by the vocabulary check).
        reader.warn(
            element,
            "<shared-store> names no <primary> or <backup>; this node runs as primary-only",
        )
        return HAPolicyConfig()
    name = _OLD_ROLE_NAMES.get(role.tag, role.tag)
    if role.tag != name:
        reader.warn(role, f"<{role.tag}> is the old name of <{name}>")
    rkids = reader.children(role, f"shared-store/{name}")
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


def _backup_scale_down(
    reader: ElementReader, kids: Children, connectors: set[str], groups: set[str]
) -> ScaleDownConfig | None:
    """A shared-store backup's ``<scale-down>``: parsed, and named once at start-up."""
    if "scale-down" not in kids:
        return None
    element = kids["scale-down"][0]
    settings = _scale_down(reader, element, connectors, groups)
    if settings.enabled:
        reader.warn(
            element,
            "a shared-store backup's <scale-down> is not implemented: when its primary fails, "
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
