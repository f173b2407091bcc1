"""``artemis-py perf`` against a real node: two worker processes, counts that add up; and
against no node at all: a clear error at once."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from .conftest import BrokerProcess, free_port, node_command, unique


@pytest.fixture
def node(tmp_path):
    node = BrokerProcess(tmp_path / "node", persistence=True).start()
    yield node
    node.close()


def test_perf_two_processes_counts_add_up(node, tmp_path):
    report_path = tmp_path / "perf.json"
    command, env = node_command()
    queue = unique("perf")
    result = subprocess.run(
        [
            *command, "perf", "--url", f"tcp://127.0.0.1:{node.port}",
            "--destination", f"queue://{queue}", "--producers", "2", "--consumers", "2",
            "--processes", "2", "--max-pending", "4", "--message-size", "256",
            "--duration", "2", "--warmup", "0.5", "--json", str(report_path),
        ],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "measure" in result.stderr  # the per-second progress lines
    report = json.loads(report_path.read_text())
    totals = report["totals"]
    assert totals["sent"] > 0
    assert totals["sent"] == totals["receipted"] == totals["received"]
    assert totals["complete"]
    assert totals["drained"]
    assert report["errors"] == {"count": 0, "messages": []}
    assert report["generator"]["processes"] == 2
    assert len(report["generator"]["per_process_cores"]) == 2
    generator = report["generator"]  # its CPU per message sent in the window
    per_message = generator["cpu_seconds_window"] / report["window"]["sent"] * 1e6
    assert generator["cpu_us_per_message"] == pytest.approx(per_message, rel=0.01)
    node_counts = report["nodes"][f"tcp://127.0.0.1:{node.port}"]
    assert node_counts == {"sent": totals["sent"], "received": totals["sent"]}
    window = report["window"]
    assert 0 < window["sent"] < totals["sent"]  # the warm-up is not in the window
    assert report["rates"]["sent"] == pytest.approx(window["sent"] / 2)
    assert report["latency_us"]["send_to_receipt"]["count"] == window["sent"]
    assert report["latency_us"]["end_to_end"]["count"] == window["sent"]
    assert f"sent {totals['sent']:,}, received {totals['sent']:,}" in result.stdout


def test_perf_priorities_and_groups_are_checked(node, tmp_path):
    # Each group at one consumer, in order: the node keeps Artemis's promise, so no error;
    # a node that spread the groups over the three consumers would fail this run (exit 1).
    report_path = tmp_path / "perf.json"
    command, env = node_command()
    result = subprocess.run(
        [
            *command, "perf", "--url", f"tcp://127.0.0.1:{node.port}",
            "--destination", f"queue://{unique('perf')}", "--producers", "2",
            "--consumers", "3", "--processes", "2", "--max-pending", "4",
            "--message-size", "64", "--priorities", "0-9", "--groups", "8",
            "--duration", "2", "--warmup", "0.5", "--json", str(report_path),
        ],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    assert report["errors"] == {"count": 0, "messages": []}
    assert report["totals"]["complete"]
    features = report["features"]
    assert features["groups_seen"] == 8
    assert features["groups_on_several_consumers"] == features["out_of_order"] == 0
    assert sum(features["groups_per_consumer"].values()) == 8
    assert len(features["groups_per_consumer"]) > 1  # the groups did spread
    by_priority = features["latency_by_priority"]
    assert sorted(by_priority, key=int) == [str(p) for p in range(10)]
    received = sum(entry["received"] for entry in by_priority.values())
    assert received == report["latency_us"]["end_to_end"]["count"]
    assert "0 at several consumers" in result.stdout


def test_perf_that_cannot_connect_fails_at_once():
    port = free_port()  # nothing listens there
    command, env = node_command()
    duration = 30.0
    started = time.monotonic()
    result = subprocess.run(
        [
            *command, "perf", "--url", f"tcp://127.0.0.1:{port}", "--duration", str(duration),
            "--warmup", "0", "--processes", "2", "--producers", "2", "--consumers", "2",
        ],
        env=env, capture_output=True, text=True, timeout=2 * duration,
    )  # fmt: skip
    assert time.monotonic() - started < duration  # not the whole --duration for nothing
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"artemis-py perf: tcp://127.0.0.1:{port}: cannot connect: Connection refused\n"
    )
