"""The tie-break between nodes that scale down at once (cluster/targets.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from artemis_py.cluster.targets import Retarget, check, forbidden
from artemis_py.cluster.topology import Topology
from artemis_py.protocol.cluster import Member


def connection(me: str, *others: Member) -> Any:
    topology = Topology(Member(me, "i", "h", 1, True, 1))
    for other in others:
        topology.update(other)
    return SimpleNamespace(node_id=me, topology=topology, scaled_down={}, scale_down_committed=None)


def node(node_id: str, scaling_down_to: str | None = None) -> Member:
    return Member(node_id, "i", node_id, 1, True, 1, scaling_down_to=scaling_down_to)


def test_two_nodes_that_picked_each_other_the_lower_id_keeps_its_target() -> None:
    low = connection("a", node("b", scaling_down_to="a"))
    high = connection("b", node("a", scaling_down_to="b"))
    check(low, "b")  # no Retarget
    with pytest.raises(Retarget, match="has the lower node ID"):
        check(high, "a")


def test_a_node_that_is_not_scaling_down_or_undecided_with_a_higher_id_is_allowed() -> None:
    me = connection("b", node("a"), node("c", scaling_down_to=""), node("d", scaling_down_to="x"))
    assert not forbidden(me, "a")
    assert not forbidden(me, "c")
    assert not forbidden(me, "d")
    assert forbidden(connection("b", node("a", scaling_down_to="")), "a")


def test_a_node_that_scaled_down_is_never_a_target_unless_this_node_committed_to_it() -> None:
    me = connection("a", node("b"))
    me.scaled_down["b"] = "c"
    with pytest.raises(Retarget, match="scaled down to c"):
        check(me, "b")
    me.scale_down_committed = "b"
    check(me, "b")
