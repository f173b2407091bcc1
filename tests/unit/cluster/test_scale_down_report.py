"""The scale-down summary a node logs and prints when it stops."""

from __future__ import annotations

from collections import Counter

from artemis_py.cluster.scale_down import ScaleDownReport


def test_a_complete_scale_down_names_the_target_and_what_moved() -> None:
    report = ScaleDownReport(
        target="n2", connector="tcp://b:61616", moved=Counter({"orders": 31, "DLQ": 3})
    )
    assert report.complete
    assert report.summary() == (
        "scale-down to node n2 at tcp://b:61616: moved 34 message(s) (DLQ: 3, orders: 31)"
    )


def test_nothing_to_move_and_nobody_to_move_it_to_is_not_a_failure() -> None:
    report = ScaleDownReport()
    assert report.complete
    assert "nothing to move" in report.summary()


def test_an_incomplete_scale_down_says_why_and_what_stays() -> None:
    report = ScaleDownReport(
        target="n2",
        connector="tcp://b:61616",
        moved=Counter({"orders": 10}),
        remaining=5,
        problem="the link to node n2 broke",
    )
    assert not report.complete
    text = report.summary()
    assert text.startswith("scale-down to node n2 at tcp://b:61616: moved 10 message(s)")
    assert "INCOMPLETE: the link to node n2 broke. 5 message(s) stay" in text
    unreachable = ScaleDownReport(remaining=7, problem="no node to scale down to is reachable")
    assert unreachable.summary().startswith("scale-down; INCOMPLETE: no node")


def test_a_name_clash_is_an_error_naming_the_queue_and_both_addresses() -> None:
    report = ScaleDownReport(
        target="n2",
        connector="tcp://b:61616",
        moved=Counter({"orders": 3}),
        clashes={"clash": ("billing", "audit")},
        remaining=5,
        problem="the target has a queue of the same name on another address",
    )
    text = report.summary()
    assert "; ERROR: queue clash is on address billing here but on address audit on node n2: " in (
        text
    )
    assert "INCOMPLETE: the target has a queue of the same name on another address. 5" in text
