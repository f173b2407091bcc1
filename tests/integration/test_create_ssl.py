"""A TLS node in two commands: ``artemis-py create --ssl`` then ``run``; stomp.py and the
printed ``artemis-py consumer`` command talk to it over TLS with the generated trust store,
and ``artemis-py cert create`` makes the stores of a cluster under one CA."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest
import stomp

from artemis_py.config.passwords import reveal
from artemis_py.config.urls import parse_transport_url
from artemis_py.transport.certificates import load_keystore, load_truststore

from .conftest import (
    BrokerProcess,
    Collector,
    artemis_py,
    create_instance,
    free_port,
    node_command,
    unique,
    wait_for,
)


def acceptor_params(broker_xml: Path) -> dict[str, str]:
    url = re.search(r'<acceptor name="stomp">([^<]*)</acceptor>', broker_xml.read_text())
    assert url is not None
    return dict(parse_transport_url(url.group(1).replace("&amp;", "&")).params)


def create_ssl(instance: Path, port: int, *extra: str) -> tuple[Path, str]:
    created = create_instance(instance, port, "--ssl", *extra)
    return instance / "etc" / "broker.xml", created.stdout


def printed_consumer_url(stdout: str) -> str:
    line = next(line for line in stdout.splitlines() if "artemis-py consumer --url" in line)
    return shlex.split(line)[3]


def test_create_ssl_writes_stores_the_acceptor_can_open(tmp_path):
    port = free_port()
    broker_xml, stdout = create_ssl(tmp_path / "node", port)
    params = acceptor_params(broker_xml)
    assert params["sslEnabled"] == "true"
    assert params["keyStorePassword"].startswith("ENC(")  # masked, as Artemis masks it
    _, cert, chain = load_keystore(Path(params["keyStorePath"]), reveal(params["keyStorePassword"]))
    cert.verify_directly_issued_by(chain[0])
    assert "127.0.0.1" in str(cert.extensions)
    url = printed_consumer_url(stdout)
    assert url.startswith(f"tcp://127.0.0.1:{port}?sslEnabled=true&trustStorePath=")
    ca = Path(unquote(dict(parse_transport_url(url).params)["trustStorePath"]))
    assert load_truststore(ca, "unused", store_type="PEM") == chain
    # The key store's password is not printed; the clients' trust store password is.
    assert reveal(params["keyStorePassword"]) not in stdout


def test_cert_create_makes_a_cluster_under_one_ca(tmp_path):
    made = artemis_py(
        "cert",
        "create",
        str(tmp_path),
        "--node",
        "n1",
        "--node",
        "n2",
        "--host",
        "10.0.0.7",
        "--password",
        "s3cret",
    )
    assert made.returncode == 0, made.stderr
    trusted = load_truststore(tmp_path / "truststore.p12", "s3cret")
    for node in ("n1", "n2"):
        _, cert, _ = load_keystore(tmp_path / f"{node}-keystore.p12", "s3cret")
        cert.verify_directly_issued_by(trusted[0])
    assert "s3cret" not in made.stdout
    refused = artemis_py("cert", "create", str(tmp_path), "--type", "JKS")
    assert refused.returncode == 2
    assert "invalid choice" in refused.stderr


@pytest.fixture
def tls_node(tmp_path) -> Iterator[tuple[BrokerProcess, Path, str]]:
    """A node made by ``create --ssl`` and run, with its broker.xml and create's output."""
    port = free_port()
    broker_xml, stdout = create_ssl(tmp_path / "node", port)
    node = BrokerProcess(tmp_path, name="tls", config_path=broker_xml, port=port)
    node.start()
    try:
        yield node, broker_xml, stdout
    finally:
        node.close()


def tls_client(port: int, ca: Path) -> tuple[stomp.Connection12, Collector]:
    """stomp.py over TLS, verifying the node's certificate (and host) against ``ca``."""
    conn = stomp.Connection12([("127.0.0.1", port)], reconnect_attempts_max=1)
    conn.set_ssl(for_hosts=[("127.0.0.1", port)], ca_certs=str(ca))
    listener = Collector()
    conn.set_listener("c", listener)
    conn.connect(wait=True)
    return conn, listener


def test_a_created_tls_node_serves_stomp_py(tls_node):
    node, broker_xml, _ = tls_node
    conn, listener = tls_client(node.port, broker_xml.parent / "ca.pem")
    queue = unique("/queue/tls")
    conn.subscribe(queue, id="1", ack="auto")
    conn.send(queue, "over TLS")
    wait_for(lambda: listener.messages, 10, message="the message back over TLS")
    assert listener.messages[0].body == "over TLS"
    conn.disconnect()


def test_the_printed_consumer_command_receives_over_tls(tls_node):
    node, broker_xml, stdout = tls_node
    queue = unique("printed")
    conn, listener = tls_client(node.port, broker_xml.parent / "ca.pem")
    conn.send(f"/queue/{queue}", "for the consumer", receipt="sent")
    wait_for(lambda: "sent" in listener.receipts, 10, message="the receipt of the send")
    conn.disconnect()
    command, env = node_command()
    url = printed_consumer_url(stdout)
    consumer = [*command, "consumer", "--url", url, "--destination", f"queue://{queue}"]
    received = subprocess.run(
        [*consumer, "--message-count", "1", "--verbose", "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert received.returncode == 0, received.stderr
    assert "for the consumer" in received.stdout


def test_perf_runs_over_tls(tls_node, tmp_path):
    """The load generator (bench/run --tls) speaks TLS with the URL's trust store."""
    _node, _broker_xml, stdout = tls_node
    report = tmp_path / "perf.json"
    command, env = node_command()
    perf = subprocess.run(
        [*command, "perf", "--url", printed_consumer_url(stdout), "--producers", "1",
         "--consumers", "1", "--duration", "1", "--warmup", "0", "--processes", "1",
         "--destination", f"queue://{unique('perf')}", "--quiet", "--json", str(report)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert perf.returncode == 0, perf.stdout + perf.stderr
    assert json.loads(report.read_text())["totals"]["received"] > 0
