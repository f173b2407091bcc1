"""At the connection TTL the node sends an ERROR with Artemis's words, then closes (issue 28).

Artemis fails a connection that sent nothing within its TTL with AMQ229014, and a STOMP
connection that fails sends that text in an ERROR frame before the socket closes; the TTL
is the acceptor's ``connectionTtl`` or the one negotiated from the client's heart-beats.
"""

from __future__ import annotations

import time

import pytest

from .conftest import BrokerProcess, RawStomp

TTL_MS = 1000


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory):
    node = BrokerProcess(
        tmp_path_factory.mktemp("ttl"), name="ttl", acceptor_params=f";connectionTtl={TTL_MS}"
    )
    node.start()
    yield node
    node.close()


def expected(raw: RawStomp, ttl_ms: int) -> str:
    host, port = raw.sock.getsockname()[:2]
    return (
        f"AMQ229014: Did not receive data from {host}:{port} within the {ttl_ms}ms "
        "connection TTL. The connection will now be closed."
    )


def error_then_eof(raw: RawStomp, ttl_ms: int) -> None:
    start = time.monotonic()
    frames = raw.wait_closed(timeout=ttl_ms / 1000 + 8)
    elapsed = time.monotonic() - start
    assert raw.eof, "the node closes the connection after the ERROR"
    assert [f.command for f in frames] == ["ERROR"], frames
    assert frames[0].get("message") == expected(raw, ttl_ms), frames[0]
    assert elapsed >= ttl_ms / 1000 - 0.2, f"closed after {elapsed:.2f}s, before the TTL"


def test_a_silent_client_gets_an_error_naming_the_ttl_then_eof(broker, raw_clients):
    raw = raw_clients(broker)
    assert raw.connect("1.2").command == "CONNECTED"
    error_then_eof(raw, TTL_MS)


def test_a_client_that_stops_heart_beating_gets_the_same_error(broker, raw_clients):
    raw = raw_clients(broker)
    # It promises a beat every 700 ms: TTL 700 x 2.0 = 1400 ms; then it goes silent.
    connected = raw.connect("1.2", heart_beat="700,0")
    assert connected.get("heart-beat") == "0,700", connected
    error_then_eof(raw, 1400)


def test_a_stomp_1_0_client_gets_it_too(broker, raw_clients):
    raw = raw_clients(broker)
    assert raw.connect(None).command == "CONNECTED"
    error_then_eof(raw, TTL_MS)
