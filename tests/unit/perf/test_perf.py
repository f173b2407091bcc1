"""``artemis-py perf``: option parsing, the spread of actors, histogram merging across
processes, and the JSON report (no broker needed; the integration test runs a real one)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from artemis_py.cli import build_parser
from artemis_py.client import BrokerUrl, Destination
from artemis_py.perf import histogram
from artemis_py.perf.cluster import spread
from artemis_py.perf.options import PerfOptions, options_from_args
from artemis_py.perf.report import (
    PlotUnavailable,
    build_report,
    check_plot_available,
    format_summary,
    plot,
    write_json,
)
from artemis_py.perf.runner import RunData
from artemis_py.perf.worker import assign

ROOT = Path(__file__).resolve().parents[3]


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["perf", *argv])


def options(*argv: str) -> PerfOptions:
    return options_from_args(parse(*argv))


# -- options -----------------------------------------------------------------------------------


def test_defaults() -> None:
    o = options()
    assert o.producer_urls == o.consumer_urls == (BrokerUrl("localhost", 61613),)
    assert (o.destination, o.topic) == ("queue://TEST", False)
    assert o.stomp_destination == Destination("TEST", "ANYCAST")
    assert (o.producers, o.consumers, o.processes) == (1, 1, 1)
    assert (o.message_size, o.persistent, o.receipts, o.max_pending) == (1024, True, True, 1)
    assert (o.rate, o.duration, o.warmup, o.tx_size, o.ack_mode) == (None, 10.0, 2.0, 0, "auto")
    assert o.receipt_mode() == "every message, awaited"
    assert o.expected_copies == 1


@pytest.mark.parametrize(
    ("argv", "topic"),
    [
        (["--destination", "/topic/raw"], True),  # the usual multicastPrefix
        (["--destination", "/queue/raw"], False),
        (["--destination", "mc.raw", "--multicast-prefix", "mc."], True),
        (["--destination", "topic://t", "--multicast-prefix", "mc."], True),
    ],
)
def test_a_raw_destination_is_a_topic_by_its_multicast_prefix(argv: list[str], topic: bool) -> None:
    o = options(*argv, "--consumers", "2")
    assert (o.topic, o.expected_copies) == (topic, 2 if topic else 1)


def test_several_urls_by_comma_and_repetition_and_per_side_overrides() -> None:
    o = options("--url", "tcp://a:1,b:2", "--url", "c")
    assert (
        o.producer_urls
        == o.consumer_urls
        == (
            BrokerUrl("a", 1),
            BrokerUrl("b", 2),
            BrokerUrl("c", 61613),
        )
    )
    o = options("--url", "a:1,b:2,c:3", "--producer-url", "a:1")
    assert o.producer_urls == (BrokerUrl("a", 1),)
    assert len(o.consumer_urls) == 3


def test_load_options() -> None:
    o = options(
        "--destination", "topic://PRICES", "--producers", "16", "--consumers", "3",
        "--no-persistent", "--max-pending", "8", "--rate", "5000", "--duration", "2.5",
        "--warmup", "0", "--tx-size", "10", "--ack-mode", "client-individual",
        "--processes", "4", "--message-size", "0",
    )  # fmt: skip
    assert o.stomp_destination == Destination("PRICES", "MULTICAST")
    assert (o.topic, o.expected_copies) == (True, 3)
    assert (o.producers, o.consumers, o.persistent, o.max_pending) == (16, 3, False, 8)
    assert (o.rate, o.duration, o.warmup, o.tx_size) == (5000.0, 2.5, 0.0, 10)
    assert (o.ack_mode, o.processes, o.message_size) == ("client-individual", 4, 0)
    assert o.receipt_mode() == "transactions of 10 (COMMIT receipt)"
    assert options("--no-receipts").receipt_mode() == "none (pipelined)"
    assert options("--max-pending", "32").receipt_mode() == "every message, window of 32"


@pytest.mark.parametrize(
    "argv",
    [
        ["--rate", "0"],
        ["--rate", "fast"],
        ["--processes", "0"],
        ["--max-pending", "0"],
        ["--duration", "0"],
        ["--warmup", "-1"],
        ["--producers", "-1"],
        ["--ack-mode", "sometimes"],
        ["--url", "http://x:1"],
    ],
)
def test_bad_values_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse(*argv)
    assert info.value.code == 2
    assert "artemis-py perf: error:" in capsys.readouterr().err


def test_nothing_to_do_and_bad_destinations_are_refused() -> None:
    with pytest.raises(ValueError, match="no producers and no consumers"):
        options("--producers", "0", "--consumers", "0")
    with pytest.raises(ValueError, match="unknown destination type"):
        options("--destination", "fifo://X")


def test_actors_are_spread_over_processes_and_nodes() -> None:
    o = options("--url", "a:1,b:2,c:3", "--producers", "4", "--consumers", "3", "--processes", "2")
    workers = assign(o)
    assert [w.index for w in workers] == [0, 1]
    producers = [p for w in workers for p in w.producers]
    consumers = [c for w in workers for c in w.consumers]
    assert sorted(n for n, _ in producers) == [0, 1, 2, 3]
    assert sorted(n for n, _ in consumers) == [0, 1, 2]
    assert dict(producers)[3] == BrokerUrl("a", 1)  # round-robin over the nodes
    assert {url.port for _, url in consumers} == {1, 2, 3}
    assert sorted(len(w.producers) + len(w.consumers) for w in workers) == [3, 4]
    # One producer, one consumer, two processes: one each, never an idle process.
    workers = assign(options("--processes", "2"))
    assert [(len(w.producers), len(w.consumers)) for w in workers] == [(1, 0), (0, 1)]
    assert len(assign(options("--processes", "8"))) == 2


# -- histograms ------------------------------------------------------------------------------------

_RECORDER = """
import sys
from artemis_py.perf import histogram
h = histogram.new_histogram()
for value in range(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])):
    histogram.record(h, value)
print(histogram.encode(h))
"""


def _record_in_subprocess(start: int, stop: int, step: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _RECORDER, str(start), str(stop), str(step)],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(ROOT / "python")},
    )


def test_histograms_recorded_in_two_processes_merge_exactly() -> None:
    # Two processes record disjoint halves; the merge must equal one histogram of it all.
    children = [_record_in_subprocess(1, 200_000, 2), _record_in_subprocess(2, 200_001, 2)]
    encoded = [child.communicate(timeout=60)[0].strip() for child in children]
    assert all(child.returncode == 0 for child in children)
    merged = histogram.merge(encoded)
    reference = histogram.new_histogram()
    for value in range(1, 200_001):
        histogram.record(reference, value)
    assert histogram.summarize(merged) == histogram.summarize(reference)
    summary = histogram.summarize(merged)
    assert summary["count"] == 200_000
    assert summary["p50"] == pytest.approx(100_000, rel=1e-3)
    assert summary["p99.9"] == pytest.approx(199_800, rel=1e-3)
    # Merging is not averaging: one process's p99 alone is far from the merged p99.
    only_fast = histogram.merge([encoded[0]])
    assert only_fast.get_total_count() == 100_000


def test_histogram_edges() -> None:
    empty = histogram.summarize(histogram.new_histogram())
    assert empty["count"] == 0
    assert empty["p50"] is None
    assert empty["max"] is None
    h = histogram.new_histogram()
    histogram.record(h, -5)  # a wall-clock step backwards
    histogram.record(h, 10**12)  # beyond the range
    s = histogram.summarize(h)
    assert s["count"] == 2
    assert s["min"] == 1
    assert s["max"] == pytest.approx(histogram.HIGHEST_US, rel=1e-3)


def test_a_recorder_records_exactly_what_record_does() -> None:
    # Values wait in the recorder's dict, rounded to their bucket's lowest value; more
    # distinct ones than FLUSH_AT force flushes on the way, and encode() flushes the rest:
    # the histogram is the one recorded value by value, bucket for bucket.
    values = [-5000, -5, 0, 1, 2047, 2048, 2049, 10**12, histogram.HIGHEST_US + 1]
    values += [v % 9_973 * 37 for v in range(30_000)] + [v * 7919 for v in range(5_000)]
    recorder = histogram.Recorder()
    reference = histogram.new_histogram()
    for value in values:
        recorder.record(value)
        histogram.record(reference, value)
    assert recorder.histogram.get_total_count() >= histogram.Recorder.FLUSH_AT  # flushed early
    merged = histogram.merge([recorder.encode()])
    assert histogram.summarize(merged) == histogram.summarize(reference)
    assert merged.get_total_count() == len(values)
    assert recorder.encode() == histogram.encode(reference)  # same counts, none twice
    # Rounding keeps the dict small: 10 to 50 ms in µs is about 2,600 buckets, so 40,000
    # distinct latencies never fill it (without rounding they flush ten times).
    recorder = histogram.Recorder()
    for value in range(10_000, 50_000):
        recorder.record(value)
    assert recorder.histogram.get_total_count() == 0
    assert histogram.merge([recorder.encode()]).get_total_count() == 40_000


# -- report ------------------------------------------------------------------------------------


def _result(worker: int, *, sent: int, received: int, cpu: float, latency: int) -> dict:
    receipts = histogram.new_histogram()
    e2e = histogram.new_histogram()
    for _ in range(sent):
        histogram.record(receipts, latency)
        histogram.record(e2e, 2 * latency)
    return {
        "worker": worker,
        "producers": 1,
        "consumers": 1,
        "sent": sent + 10,
        "receipted": sent + 10,
        "received": received + 10,
        "window_sent": sent,
        "window_receipted": sent,
        "window_received": received,
        "errors": 0,
        "error_texts": [],
        "warning_texts": [],
        "node_sent": {"tcp://a:1": sent + 10},
        "node_received": {"tcp://b:2": received + 10},
        "cpu_seconds_window": cpu,
        "cpu_seconds_total": cpu + 1,
        "receipt_latency": histogram.encode(receipts),
        "e2e_latency": histogram.encode(e2e),
    }


def _data() -> RunData:
    o = options("--duration", "2", "--processes", "2", "--producers", "2", "--consumers", "2")
    results = [
        _result(0, sent=1000, received=990, cpu=0.5, latency=100),
        _result(1, sent=3000, received=3010, cpu=1.9, latency=300),
    ]
    timeline = [{"t": 1.0, "phase": "measure", "sent": 2000.0, "receipted": 2000.0,
                 "received": 2000.0, "cpu": 1.2, "errors": 0.0}]  # fmt: skip
    return RunData(o, assign(o), results, timeline, runner_cpu_seconds=0.1, wall_seconds=3.0)


def test_json_report(tmp_path: Path) -> None:
    report = build_report(_data())
    path = tmp_path / "perf.json"
    write_json(report, path)
    loaded = json.loads(path.read_text())
    assert loaded == json.loads(json.dumps(report))
    assert loaded["rates"] == {"sent": 2000.0, "receipted": 2000.0, "received": 2000.0}
    assert loaded["totals"]["sent"] == 4020
    assert loaded["totals"]["received"] == loaded["totals"]["expected_received"] == 4020
    assert loaded["totals"]["complete"] is True
    assert loaded["nodes"] == {
        "tcp://a:1": {"sent": 4020, "received": 0},
        "tcp://b:2": {"sent": 0, "received": 4020},
    }
    receipts = loaded["latency_us"]["send_to_receipt"]
    assert receipts["count"] == 4000
    assert receipts["p50"] == pytest.approx(300, rel=1e-2)  # 3000 of the 4000 took 300 µs
    assert receipts["p90"] == pytest.approx(300, rel=1e-2)
    assert receipts["min"] == pytest.approx(100, rel=1e-2)
    assert loaded["latency_us"]["end_to_end"]["max"] == pytest.approx(600, rel=1e-2)
    generator = loaded["generator"]
    assert generator["cores_used"] == pytest.approx(1.2)
    assert generator["busiest_process_cores"] == pytest.approx(0.95)
    assert generator["per_process_cores"] == [0.25, 0.95]
    assert generator["cpu_us_per_message"] == pytest.approx(600)  # 2.4 CPU-s, 4000 sent
    assert loaded["options"]["producer_urls"] == ["tcp://localhost:61613"]
    assert "password" not in loaded["options"]
    assert loaded["options"]["stomp_destination"] == "TEST"
    assert loaded["options"]["destination_type"] == "ANYCAST"
    assert loaded["machine"]["cpus"] >= 1
    text = format_summary(report)
    assert "2,000.0 msg/s" in text
    assert "generator: 2 process(es), 1.20 cores" in text
    assert "600.0 µs of CPU per message" in text
    assert "CPU-bound" in text  # the busiest process used 0.95 of a core
    assert loaded["monitored"] == {"pids": [], "cores": None, "loop_cores": None}
    assert loaded["warnings"] == []


def test_incomplete_run_is_flagged() -> None:
    data = _data()
    data.results[0]["received"] -= 5
    report = build_report(data)
    assert report["totals"]["complete"] is False
    assert "INCOMPLETE" in format_summary(report)


def test_plot_writes_a_small_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "perf.png"
    plot(build_report(_data()), path, title="test")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG")
    assert len(data) < 100_000


def test_plot_without_matplotlib_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(PlotUnavailable):
        check_plot_available()
    args = parse("--plot", "out.png")
    assert args.func(args) == 2
    # Right for an install from the package index and for one from a checkout (README).
    assert capsys.readouterr().err == (
        "artemis-py perf: --plot needs matplotlib: "
        "pip install 'artemis-py[perf]' (or '.[perf]' from a checkout)\n"
    )


def test_perf_without_hdrh_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import artemis_py.perf

    for module in ("hdrh", "hdrh.histogram"):
        monkeypatch.setitem(sys.modules, module, None)  # import hdrh -> ImportError
    for name in ("report", "histogram"):
        monkeypatch.delitem(sys.modules, f"artemis_py.perf.{name}", raising=False)
        monkeypatch.delattr(artemis_py.perf, name, raising=False)
    # Should it run after all, it fails at once: nothing listens on port 1.
    args = parse("--url", "tcp://127.0.0.1:1", "--duration", "0.1", "--warmup", "0")
    assert args.func(args) == 2
    assert capsys.readouterr().err == (
        "artemis-py perf: hdrh is missing: "
        "pip install 'artemis-py[perf]' (or '.[perf]' from a checkout)\n"
    )


def test_monitored_processes() -> None:
    import os

    from artemis_py.perf.runner import process_cpu_seconds

    o = options("--monitor-pid", "12,13", "--monitor-pid", "14")
    assert o.monitor_pids == (12, 13, 14)
    with pytest.raises(SystemExit):
        parse("--monitor-pid", "abc")
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs Linux /proc")
    before = process_cpu_seconds((os.getpid(),))
    sum(i * i for i in range(3_000_000))  # burn some CPU
    assert process_cpu_seconds((os.getpid(),)) > before
    assert process_cpu_seconds((2**22 + 12345,)) == 0.0  # no such process


def test_disconnect_warnings_are_reported_but_are_not_errors() -> None:
    data = _data()
    data.results[1]["warning_texts"] = ["producer 3 (tcp://a:1): ConnectionLostError: closed"]
    report = build_report(data)
    assert report["errors"]["count"] == 0
    assert report["warnings"] == ["producer 3 (tcp://a:1): ConnectionLostError: closed"]
    assert "warnings: 1 (DISCONNECT failed after every receipt had arrived" in format_summary(
        report
    )


def test_the_test_extra_has_what_the_perf_tests_need() -> None:
    # Otherwise `pip install -e '.[test]'` (README) silently skips the --plot test.
    import re
    import tomllib

    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]

    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}

    assert names(extras["perf"]) <= names(extras["test"])


# -- cluster URLs ------------------------------------------------------------------------------

CLUSTER = "(tcp://a:1,tcp://b:2,tcp://c:3)?useTopologyForLoadBalancing=false"


def test_a_cluster_url_is_kept_with_its_parameters() -> None:
    o = options("--url", f"{CLUSTER}&ha=true&retryInterval=50")
    assert (
        o.producer_urls
        == o.consumer_urls
        == (BrokerUrl("a", 1), BrokerUrl("b", 2), BrokerUrl("c", 3))
    )
    assert o.producer_cluster is not None
    assert o.producer_cluster == o.consumer_cluster
    assert o.fails_over
    assert o.producer_cluster.options.retry_interval == 50
    assert o.to_json()["producer_cluster"] == "(tcp://a:1,tcp://b:2,tcp://c:3)"
    plain = options("--url", "tcp://a:1,tcp://b:2")  # no parentheses, no query: as before
    assert plain.producer_cluster is None
    assert not plain.fails_over
    side = options("--url", "tcp://a:1", "--consumer-url", "tcp://b:2?ha=true")
    assert side.producer_cluster is None
    assert side.consumer_cluster is not None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", f"{CLUSTER}&ha=true", "--no-receipts"], "--no-receipts cannot be used"),
        (["--url", f"{CLUSTER}&ha=true", "--tx-size", "5"], "--tx-size cannot be used"),
        (["--url", CLUSTER, "--url", "tcp://d:4"], "must be the only --url"),
        (["--url", "udp://231.7.7.7:9876?ha=true"], "perf takes tcp:// URLs"),
    ],
)
def test_cluster_url_conflicts_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        options(*argv)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"{CLUSTER}&retries=3", "unknown URL parameter 'retries'"),
        ("(tcp://a:1,tcp://b:2?ha=true", "unbalanced parenthesis"),
    ],
)
def test_malformed_cluster_urls_are_usage_errors(
    url: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse("--url", url)
    assert info.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]  # after argparse's usage lines
    assert last.startswith("artemis-py perf: error: argument --url: ")
    assert message in last


def test_a_cluster_url_spreads_connections_by_its_policy() -> None:
    o = spread(
        options("--url", CLUSTER, "--producers", "3", "--consumers", "3", "--processes", "2")
    )
    workers = assign(o)
    producers = [url.port for w in workers for _, url in w.producers]
    consumers = [url.port for w in workers for _, url in w.consumers]
    assert sorted(producers) == sorted(consumers) == [1, 2, 3]  # round robin: one each
    first = spread(
        options(
            "--url",
            f"{CLUSTER}&connectionLoadBalancingPolicyClassName=first-element",
            "--producers",
            "3",
        )
    )
    assert first.producer_urls == (BrokerUrl("a", 1),) * 3
    plain = options("--url", "a:1,b:2")
    assert spread(plain) is plain


def test_the_report_counts_failovers_resends_and_connections() -> None:
    data = _data()
    data.results[0].update(failovers=2, resends=5)
    report = build_report(data)
    assert report["failover"] == {"failovers": 2, "resends": 5}
    options = data.options
    assert sum(report["connections"].values()) == options.producers + options.consumers
    assert "failover: 2 failover(s), 5 send(s) resent" in format_summary(report)
    assert "failover" not in format_summary(build_report(_data()))
