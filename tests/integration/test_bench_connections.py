"""bench/connections.py (issue 29's many-connections benchmark): its frame and /proc
helpers, and its epoll client against a real node, with short heart-beats, refusals
counted."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

from .conftest import BrokerProcess, free_port

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_connections", BENCH / "connections.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("bench_connections", None)
        sys.path.remove(str(BENCH))


def client_args(**overrides):
    values = {"user": None, "password": None, "concurrency": 4, "connect_timeout": 10.0}
    return argparse.Namespace(**(values | overrides))


def test_connect_frame_and_connected_parsing(bench):
    frame = bench.connect_frame((10_000, 10_000), "u", None)
    assert frame == (
        b"CONNECT\naccept-version:1.2\nhost:127.0.0.1\nheart-beat:10000,10000\nlogin:u\n\n\0"
    )
    command, headers = bench.parse_frame(
        b"\n\r\nCONNECTED\r\nversion:1.2\nheart-beat:5000,0\nheart-beat:1,1\n\n"
    )
    assert command == "CONNECTED"
    assert headers == {"version": "1.2", "heart-beat": "5000,0"}  # the first repeat wins


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("10000,10000", (10.0, 10.0)),
        ("5000,20000", (20.0, 10.0)),  # each side at the slower of the two
        ("0,0", (0.0, 0.0)),
        (None, (0.0, 0.0)),
        ("10000, 0", (0.0, 10.0)),
    ],
)
def test_heartbeat_negotiation(bench, server, expected):
    assert bench.negotiate((10_000, 10_000), server) == expected


def test_heartbeat_count_tells_beats_from_frames(bench):
    assert bench.heartbeat_count(b"\n") == 1
    assert bench.heartbeat_count(b"\r\n\n") == 2
    assert bench.heartbeat_count(b"ERROR\nmessage:x\n\n\0") is None


def test_proc_readers(bench):
    assert bench.vm_rss_kib("Name:\tpython\nVmPeak:\t 9 kB\nVmRSS:\t   51234 kB\n") == 51234
    with pytest.raises(ValueError, match="no VmRSS"):
        bench.vm_rss_kib("Name:\tkthreadd\n")
    limits = (
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max open files            20000                20000                files     \n"
    )
    assert bench.open_files_limit(limits) == 20000
    assert bench.open_files_limit(limits.replace("20000  ", "unlimited", 1)) is None
    assert bench.ratio(10.0, 4.0) == 2.5
    assert bench.ratio(None, 4.0) is None
    assert bench.ratio(1.0, 0.0) is None


@pytest.fixture
def node(tmp_path):
    node = BrokerProcess(tmp_path / "node", acceptor_params=";connectionsAllowed=6").start()
    yield node
    node.close()


def test_client_keeps_heartbeats_and_counts_refusals(bench, node):
    client = bench.Client(node.port, client_args(), heart_beat=(1000, 1000))
    try:
        client.run(0, open_up_to=9)  # the acceptor takes 6
        assert client.tally.established == 6
        assert sum(client.tally.failures.values()) == 3
        # Closed at once: an EOF, or a reset when the CONNECT was still unread.
        refused = {"closed before CONNECTED", "ECONNRESET before CONNECTED"}
        assert set(client.tally.failures) <= refused
        client.reset_window()
        client.run(3.0)
        window = client.window
        # Every second each way: 3 beats of each connection of ours in 3 s (2 to 4, with the
        # window's edges); the node sends at least as often.
        assert 12 <= window.heartbeats_sent <= 24
        assert window.heartbeats_received >= 12
        assert window.late == window.dropped == 0
        assert client.silent(bench.time.monotonic()) == 0
        assert client.tally.negotiated == {"client every 1 s, node every 1 s": 6}
    finally:
        client.close()


def test_client_counts_refused_connections(bench):
    client = bench.Client(free_port(), client_args())
    try:
        client.run(0, open_up_to=3)
    finally:
        client.close()
    assert client.tally.established == 0
    assert client.tally.failures == {"connect: ECONNREFUSED": 3}
