"""Heart-beating and connection TTL, as an Artemis STOMP acceptor does them.

The acceptor runs with ``connectionTtl=1500`` (ms): a client that sends no heart-beats is
dropped after 1.5 s of silence. A client that offers heart-beats every ``cx`` ms gets a TTL of
``cx * heartBeatToConnectionTtlModifier`` (2.0), at least ``connectionTtlMin`` (1000).
"""

from __future__ import annotations

import time

import pytest

from .conftest import BrokerProcess, unique, wait_for

TTL_MS = 1500


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory):
    node = BrokerProcess(
        tmp_path_factory.mktemp("hb"), name="hb", acceptor_params=f";connectionTtl={TTL_MS}"
    )
    node.start()
    yield node
    node.close()


def time_until_closed(raw, timeout: float) -> float:
    start = time.monotonic()
    wait_for(lambda: not raw.poll(), timeout, message="the broker to close the connection")
    return time.monotonic() - start


def test_server_heart_beats_arrive_as_negotiated(broker, raw_clients):
    raw = raw_clients(broker)
    connected = raw.connect("1.2", heart_beat="1000,500")
    assert connected.command == "CONNECTED"
    # Server beats every max(cy, 500) ms and wants client beats every cx ms (TTL 2 s).
    assert connected.get("heart-beat") == "500,1000", connected
    start = time.monotonic()
    last_beat = start

    def four_server_beats() -> bool:
        nonlocal last_beat
        if time.monotonic() - last_beat >= 0.5:
            raw.send_bytes(b"\n")  # keep our side of the bargain
            last_beat = time.monotonic()
        assert raw.poll(), "connection closed"
        return raw.heartbeats >= 4

    wait_for(four_server_beats, 6, message="4 heart-beats")
    elapsed = time.monotonic() - start
    assert elapsed >= 1.0, f"4 beats every 500 ms took only {elapsed:.2f}s: beating too fast"
    assert raw.pending == [], "heart-beats only, no frames"


def test_an_idle_connection_gets_one_server_beat_per_interval(broker, raw_clients):
    """Artemis 2.56 beats once per negotiated interval on an idle connection (measured:
    ``heart-beat:0,1000`` got an EOL every 1.00 s, ``0,10000`` every 10.0 s), not at half
    of it: every gap is about the interval, never much longer (a scheduling margin)."""
    raw = raw_clients(broker)
    connected = raw.connect("1.2", heart_beat="1000,500")
    assert connected.get("heart-beat") == "500,1000", connected
    start = last_beat = time.monotonic()
    arrivals: list[float] = []

    def beats_for_three_seconds() -> bool:
        nonlocal last_beat
        now = time.monotonic()
        if now - last_beat >= 0.4:
            raw.send_bytes(b"\n")  # keep our side of the bargain (2 s TTL)
            last_beat = now
        before = raw.heartbeats
        assert raw.poll(0.01), "connection closed"
        arrivals.extend([time.monotonic()] * (raw.heartbeats - before))
        return time.monotonic() - start >= 3

    wait_for(beats_for_three_seconds, 6)
    gaps = [b - a for a, b in zip([start, *arrivals], arrivals, strict=False)]
    assert 4 <= len(arrivals) <= 7, f"{len(arrivals)} beats in 3 s at 500 ms: {gaps}"
    assert max(gaps) <= 0.8, gaps  # the first gap counts from CONNECTED
    assert min(gaps[1:]) >= 0.4, gaps
    assert raw.pending == [], "heart-beats only, no frames"


def test_ttl_without_client_beats_is_connection_ttl(broker, raw_clients):
    raw = raw_clients(broker)
    connected = raw.connect("1.2", heart_beat="0,500")
    # No client beats: the TTL is connectionTtl, and the server asks for TTL / modifier.
    assert connected.get("heart-beat") == f"500,{TTL_MS // 2}", connected
    elapsed = time_until_closed(raw, timeout=8)
    assert elapsed >= TTL_MS / 1000 - 0.2, f"closed after {elapsed:.2f}s, before the TTL"
    assert raw.heartbeats >= 1, "the server beat every 500 ms until then"


def test_first_server_heart_beat_comes_within_the_negotiated_interval(broker, raw_clients):
    raw = raw_clients(broker)
    connected = raw.connect("1.2", heart_beat="0,500")
    assert connected.get("heart-beat", "").startswith("500,")
    start = time.monotonic()
    wait_for(lambda: raw.poll(0.01) and raw.heartbeats >= 1, 3, message="the first heart-beat")
    elapsed = time.monotonic() - start
    assert elapsed <= 0.75, f"first heart-beat {elapsed:.2f}s after CONNECTED, 0.5 s negotiated"


def test_server_beats_no_faster_than_500ms(broker, raw_clients):
    raw = raw_clients(broker)
    connected = raw.connect("1.2", heart_beat="0,100")
    assert connected.get("heart-beat").split(",")[0] == "500"  # Artemis MIN_SERVER_PING


def test_no_heart_beat_header_means_no_heart_beats(broker, raw_clients):
    raw = raw_clients(broker)
    connected = raw.connect("1.2")
    assert connected.get("heart-beat") in (None, "0,0"), connected
    # A 1.0 client never gets a heart-beat header.
    assert raw_clients(broker).connect(None).get("heart-beat") is None


def test_silent_client_without_heart_beats_is_dropped_after_connection_ttl(broker, raw_clients):
    raw = raw_clients(broker)
    assert raw.connect("1.2").command == "CONNECTED"
    elapsed = time_until_closed(raw, timeout=8)
    assert elapsed >= TTL_MS / 1000 - 0.2, f"closed after {elapsed:.2f}s, before the TTL"


def test_silent_client_that_promised_heart_beats_is_dropped(broker, raw_clients):
    raw = raw_clients(broker)
    connected = raw.connect("1.2", heart_beat="500,0")
    # TTL = 500 ms x 2.0 = 1000 ms (connectionTtlMin), asking for a beat every 500 ms.
    assert connected.get("heart-beat") == "0,500", connected
    elapsed = time_until_closed(raw, timeout=6)
    assert elapsed >= 0.8, f"closed after {elapsed:.2f}s, before the 1 s TTL"


def test_raw_client_that_beats_stays_connected(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2", heart_beat="500,500")
    start = time.monotonic()
    last_beat = 0.0

    def beat_for_three_seconds() -> bool:
        nonlocal last_beat
        now = time.monotonic()
        if now - last_beat >= 0.3:
            raw.send_bytes(b"\n")
            last_beat = now
        assert raw.poll(0.05), "the broker closed a connection that kept beating"
        return now - start >= 3  # three times the 1 s TTL

    wait_for(beat_for_three_seconds, 6)
    assert raw.heartbeats >= 3  # and the broker beat back
    q = unique("/queue/alive")
    assert raw.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"


def test_stomp_py_client_with_heart_beats_stays_connected(broker, clients):
    c = clients(broker, heartbeats=(1000, 500))
    # 2 s TTL; stay connected until 6 server beats (~3 s) arrived.
    wait_for(lambda: c.listener.heartbeats >= 6, 8, message="6 server heart-beats")
    assert not c.listener.disconnected.is_set()
    q = unique("/queue/hb")
    c.subscribe(q)
    c.send(q, "still here")
    assert c.wait_messages(1)[0].body == "still here"


def test_unacked_messages_of_a_timed_out_client_are_redelivered(broker, raw_clients, clients):
    q = unique("/queue/ttl")
    producer = clients(broker, heartbeats=(1000, 0))
    producer.send(q, "held")
    silent = raw_clients(broker)
    silent.connect("1.2", heart_beat="500,0")
    assert (
        silent.receipt("SUBSCRIBE", {"destination": q, "id": "s", "ack": "client"}).command
        == "RECEIPT"
    )
    assert silent.read_until("MESSAGE").body == b"held"
    time_until_closed(silent, timeout=6)
    other = clients(broker, heartbeats=(1000, 0))
    other.subscribe(q)
    [msg] = other.wait_messages(1)
    assert msg.body == "held"
    assert msg.headers.get("redelivered") == "true"


def test_malformed_heart_beat_header_is_an_error(broker, raw_clients):
    raw = raw_clients(broker)
    frame = raw.connect("1.2", heart_beat="soon,later")
    assert frame.command == "ERROR", frame
    assert raw.wait_closed() == []
