"""``<grouping-handler name=...>``: clustered message grouping (Artemis's
``groupingHandlerType``; docs/clustering.md "Clustered grouping").

The checks Artemis's parser makes (``type`` required, ``timeout`` and ``reaper-period``
above zero, ``group-timeout`` -1 or above zero), and one it cannot: which cluster
connection carries the proposals. Artemis sends them as management notifications, which a
cluster connection passes on only when its ``address`` filter covers the handler's
``address``; a REMOTE handler no cluster connection covers would wait ``timeout`` on every
new group and never get an answer, so that is an error here. A LOCAL handler without one
still decides for this node alone (a warning).

One handler per node: ``<core>`` allows the element once (the schema's ``maxOccurs``),
which the vocabulary enforces. Two LOCAL handlers in one cluster are another node's file;
the running nodes report that (:mod:`artemis_py.cluster.grouping`).
"""

from __future__ import annotations

from .. import defaults
from ..element_reader import Children, ElementReader
from ..enums import GroupingHandlerType
from ..model import ClusterConnectionConfig, GroupingHandlerConfig
from ..values import at_least, checked, int32, int64, minus_one_or_at_least, parse_enum

__all__ = ["read_grouping_handler"]


def read_grouping_handler(
    reader: ElementReader,
    kids: Children,
    cluster_connections: tuple[ClusterConnectionConfig, ...],
) -> GroupingHandlerConfig | None:
    """The node's ``<grouping-handler>``, if any (None also when it is invalid: reported)."""
    if "grouping-handler" not in kids:
        return None
    element = kids["grouping-handler"][0]
    name = reader.attribute(element, "name")
    hkids = reader.children(element)
    label = f"grouping-handler '{name}'" if name else "grouping-handler"
    kind: GroupingHandlerType | None = None
    if "type" not in hkids:
        reader.error(element, f"{label} needs a <type>: LOCAL or REMOTE")
    else:
        kind = reader.scalar(hkids, "type", lambda t: parse_enum(t, GroupingHandlerType), None)
    address = reader.scalar(hkids, "address", str.strip, "")
    timeout = reader.scalar(
        hkids, "timeout", checked(int32, at_least(1)), defaults.GROUPING_HANDLER_TIMEOUT
    )
    group_timeout = reader.scalar(
        hkids,
        "group-timeout",
        checked(int64, minus_one_or_at_least(1)),
        defaults.GROUPING_HANDLER_GROUP_TIMEOUT,
    )
    reaper_period = reader.scalar(
        hkids,
        "reaper-period",
        checked(int64, at_least(1)),
        defaults.GROUPING_HANDLER_REAPER_PERIOD,
    )
    if name is None or kind is None:
        return None
    if not any(c.matches_address(address) for c in cluster_connections):
        where = f"address '{address}'" if address else "the empty address"
        if kind is GroupingHandlerType.REMOTE:
            reader.error(
                element,
                f"{label}: no cluster connection covers {where}, so its proposals would "
                "never reach the LOCAL grouping handler and every new group would fail after "
                "<timeout>; set <address> to one a cluster connection's <address> covers",
            )
            return None
        reader.warn(
            element,
            f"{label}: no cluster connection covers {where}; this LOCAL handler decides "
            "for this node's queues only, and no other node can ask it",
        )
    return GroupingHandlerConfig(
        name=name,
        type=kind,
        address=address,
        timeout=timeout,
        group_timeout=group_timeout,
        reaper_period=reaper_period,
        line=element.line,
    )
