"""``<ha-policy>``: primary-only (``live-only``) with an optional ``<scale-down>``.

Replication and shared-store are valid Artemis policies that artemis-py does not implement:
they get their own warning and the node runs as primary-only.
"""

from __future__ import annotations

from ..element_reader import Children, ElementReader
from ..enums import HAPolicy
from ..model import HAPolicyConfig, ScaleDownConfig
from ..values import checked, int32, minus_one_or_at_least, parse_bool
from ..xmlreader import XmlElement
from .discovery import read_discovery_ref

__all__ = ["read_ha_policy"]


def read_ha_policy(
    reader: ElementReader, kids: Children, connectors: set[str], groups: set[str]
) -> HAPolicyConfig:
    if "ha-policy" not in kids:
        return HAPolicyConfig()
    hkids = reader.children(kids["ha-policy"][0])
    chosen = [e for elements in hkids.values() for e in elements]
    if len(chosen) > 1:
        for extra in chosen[1:]:
            reader.error(extra, f"<ha-policy> takes one policy; <{chosen[0].tag}> is already given")
    if not chosen:
        return HAPolicyConfig()
    policy = chosen[0]
    if policy.tag in ("replication", "shared-store"):
        reader.warn(
            policy,
            f"ha-policy <{policy.tag}> is not implemented; this node runs as primary-only",
        )
        return HAPolicyConfig(policy=HAPolicy(policy.tag))
    if policy.tag == "live-only":
        reader.warn(policy, "<live-only> is the old name of <primary-only>")
    pkids = reader.children(policy)
    if "scale-down" not in pkids:
        return HAPolicyConfig()
    return HAPolicyConfig(
        scale_down=_scale_down(reader, pkids["scale-down"][0], connectors, groups)
    )


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
