"""``artemis-py perf --priorities/--groups``: the options, the headers producers add, and
the consumers' checks (a split group and a message out of order are caught; no broker
needed: tests/integration/test_perf.py runs them against a real node)."""

from __future__ import annotations

import pytest

from artemis_py.cli import build_parser
from artemis_py.client import Message
from artemis_py.perf.features import SEQ_HEADER, Check, Plan, Stamper, summarize, summary_lines
from artemis_py.perf.options import PerfOptions, options_from_args
from artemis_py.protocol.stomp import Frame


def options(*argv: str) -> PerfOptions:
    return options_from_args(build_parser().parse_args(["perf", *argv]))


def test_no_features_by_default() -> None:
    o = options()
    assert (o.priorities, o.priority_order, o.groups, o.has_features) == (None, "random", 0, False)


def test_feature_options() -> None:
    o = options("--priorities", "0-9", "--groups", "64", "--priority-order", "cycle")
    assert (o.priorities, o.priority_order, o.groups, o.has_features) == ((0, 9), "cycle", 64, True)
    assert options("--priorities", "4").priorities == (4, 4)
    assert options("--groups", "3").has_features


@pytest.mark.parametrize("argv", [["--priorities", "3-1"], ["--priorities", "0-10"],
                                  ["--priorities", "high"], ["--groups", "-1"]])  # fmt: skip
def test_bad_feature_values_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        options(*argv)
    assert info.value.code == 2
    assert "artemis-py perf: error:" in capsys.readouterr().err


def test_groups_need_a_queue_and_no_failover() -> None:
    with pytest.raises(ValueError, match="--groups needs a queue"):
        options("--groups", "4", "--destination", "topic://T")
    with pytest.raises(ValueError, match="not checked with failover"):
        options("--priorities", "0-9", "--url", "(tcp://a:1,tcp://b:2)?ha=true")


def _sent(stamper: Stamper, count: int) -> list[dict[str, str]]:
    return [dict(stamper.headers(1000 + i)) for i in range(count)]


def test_headers_carry_sequence_group_and_priority() -> None:
    plan = Plan.of(options("--priorities", "2-5", "--groups", "4"))
    base = [("persistent", "true")]
    sent = _sent(Stamper(plan, 3, base), 200)
    assert [h[SEQ_HEADER] for h in sent[:3]] == ["3:0", "3:1", "3:2"]
    assert (sent[0]["persistent"], sent[5]["perf-ts"]) == ("true", "1005")
    assert [h["JMSXGroupID"] for h in sent[:5]] == ["g3", "g0", "g1", "g2", "g3"]
    priorities = [int(h["priority"]) for h in sent]
    assert set(priorities) == {2, 3, 4, 5}  # drawn, every value of the range
    assert priorities == [plan.priority(3, seq) for seq in range(200)]  # the consumer's view
    assert priorities != sorted(priorities)
    # The table is the same in another process: a fixed seed, not the process's.
    assert Plan.of(options("--priorities", "2-5")).priorities == plan.priorities
    cycle = Plan.of(options("--priorities", "0-2", "--priority-order", "cycle"))
    assert [cycle.priority(7, s) for s in range(5)] == [0, 1, 2, 0, 1]
    only_groups = _sent(Stamper(Plan.of(options("--groups", "2")), 0, base), 2)
    assert "priority" not in only_groups[0]
    assert only_groups[1]["JMSXGroupID"] == "g1"


def _message(headers: dict[str, str]) -> Message:
    return Message(Frame("MESSAGE", headers, b""))


def test_a_faithful_delivery_has_no_errors() -> None:
    o = options("--priorities", "0-9", "--groups", "4", "--consumers", "2")
    plan = Plan.of(o)
    check = Check(plan, lambda ts: True)
    for producer in (0, 1):
        for h in _sent(Stamper(plan, producer, []), 100):
            group = int(h["JMSXGroupID"][1:])
            check.observe(group % 2, _message(h), 2000 + int(h["perf-ts"]), int(h["perf-ts"]))
    summary = summarize(o, [{"features": check.result()}])
    assert (summary["errors"], summary["error_texts"]) == (0, [])
    assert (summary["groups_seen"], summary["groups_on_several_consumers"]) == (4, 0)
    assert summary["groups_per_consumer"] == {"0": 2, "1": 2}
    latency = summary["latency_by_priority"]
    assert sum(v["received"] for v in latency.values()) == 200
    assert {v["mean_e2e_us"] for v in latency.values()} == {2}  # 2000 ns


def test_a_split_group_and_a_message_out_of_order_are_errors() -> None:
    o = options("--groups", "4", "--consumers", "2", "--processes", "2")
    plan = Plan.of(o)
    sent = [_message(h) for h in _sent(Stamper(plan, 0, []), 8)]
    first, second = Check(plan, lambda ts: True), Check(plan, lambda ts: True)
    for m in sent[:4]:
        first.observe(0, m, 0, 0)
    second.observe(1, sent[4], 0, 0)  # group g0 again, in another worker's consumer 1
    first.observe(0, sent[5], 0, 0)
    first.observe(0, sent[1], 0, 0)  # producer 0's message 1 (g1) again, after 5
    first.observe(0, _message({}), 0, 0)  # not stamped
    summary = summarize(o, [{"features": first.result()}, {"features": second.result()}])
    assert (summary["groups_on_several_consumers"], summary["out_of_order"]) == (1, 1)
    assert summary["errors"] == 3
    assert summary["error_texts"][0] == "group g0 went to consumers 0, 1"
    assert (
        "producer 0's message 1 (group 1, priority -1) after its message 5"
        in (summary["error_texts"][1])
    )
    assert summary["error_texts"][2] == f"1 message(s) without a {SEQ_HEADER} header"
    assert summary_lines(summary)[0].startswith("  groups: 4 of 4 received, 1 at several")
