"""Which path serves a node's clients (docs/architecture.md, "A STOMP SEND"): with
``ARTEMIS_PY_DATA_PLANE=1`` an acceptor's STOMP clients (plain TCP, and TLS: test_tls.py
checks those) are served by the data plane's Rust I/O threads, otherwise (the product's
default) by the socket shell on the event loop. The suite's nodes run with the plane on
(conftest.py), and .ci/run runs the STOMP modules again with it off; these check which one
serves."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from .conftest import BrokerProcess, Client, RawStomp, unique


def thread_names(node: BrokerProcess) -> list[str]:
    assert node.process is not None
    tasks = Path(f"/proc/{node.process.pid}/task")
    return [(task / "comm").read_text().strip() for task in tasks.iterdir()]


def round_trip(client: Client) -> None:
    queue, bodies = f"/queue/{unique('plane')}", [unique("body") for _ in range(50)]
    client.subscribe(queue, ack="client-individual")
    for body in bodies:
        client.send(queue, body, receipt=True)
    messages = client.wait_messages(len(bodies))
    assert [m.body for m in messages] == bodies
    for message in messages:
        client.ack(message)


def test_plain_tcp_clients_are_served_by_the_data_plane_threads(make_broker, monkeypatch):
    monkeypatch.setenv("ARTEMIS_PY_DATA_PLANE", "1")
    node = make_broker()
    names = thread_names(node)
    assert "dataplane-0" in names, names
    client = node.client()
    round_trip(client)
    client.disconnect()
    assert "Traceback" not in node.log()


def test_with_the_data_plane_off_the_event_loop_serves_every_client(make_broker, monkeypatch):
    monkeypatch.setenv("ARTEMIS_PY_DATA_PLANE", "0")
    node = make_broker()
    names = thread_names(node)
    assert not [n for n in names if n.startswith("dataplane")], names
    client = node.client()
    round_trip(client)
    client.disconnect()
    assert "Traceback" not in node.log()


@pytest.mark.parametrize("plane", ["1", "0"])
def test_a_pipeline_deeper_than_the_read_pause_gets_every_receipt_in_order(
    make_broker, monkeypatch, plane
):
    """5,000 receipted SENDs written at once, more than a connection's pipeline holds
    (4,096): reading pauses and resumes, and every RECEIPT comes, in frame order."""
    monkeypatch.setenv("ARTEMIS_PY_DATA_PLANE", plane)
    node = make_broker()
    raw = RawStomp(node.port, timeout=60)
    assert raw.connect("1.2").command == "CONNECTED"
    count = 5000
    raw.send_bytes(
        b"".join(
            b"SEND\ndestination:deep\npersistent:true\nreceipt:r%d\n\nx\x00" % n
            for n in range(count)
        )
    )
    receipts = [raw.read_frame(timeout=60) for _ in range(count)]
    assert [f.get("receipt-id") if f else None for f in receipts] == [f"r{n}" for n in range(count)]
    raw.close()


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback")
@pytest.mark.parametrize("plane", ["1", "0"])
def test_a_wildcard_acceptor_serves_ipv4_and_ipv6_clients(make_broker, monkeypatch, plane):
    """An acceptor on 0.0.0.0 (how Artemis writes them) listens on IPv4's and IPv6's
    wildcards on either path, so a client whose "localhost" resolves to ::1 gets in."""
    monkeypatch.setenv("ARTEMIS_PY_DATA_PLANE", plane)
    node = make_broker(start=False)
    node.host = "0.0.0.0"
    node.start()
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family) as sock:
            sock.settimeout(10)
            sock.connect((address, node.port))
            sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00")
            assert sock.recv(64).startswith(b"CONNECTED\n"), address
    assert ("dataplane-0" in thread_names(node)) == (plane == "1")
