"""Cluster links over TLS (docs/tls.md): three nodes whose cluster acceptors require client
certificates (needClientAuth) and whose connectors verify the peers' certificates against a
shared trust store form a symmetric cluster and balance round robin; a node whose
certificate comes from another CA never joins, and the logs say why."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from artemis_py.transport.certificates import TlsFiles, create_tls_files

from .conftest import (
    Cluster,
    cli,
    consume_everywhere,
    send_shared,
    status,
    stays,
    unique,
    wait_for,
)

PASSWORD = "cluster-tls-pass"
HOSTS = ["localhost", "127.0.0.1"]


def tls_options(files: TlsFiles, node: str) -> dict[str, str]:
    """The cluster acceptor and connectors of ``node``: its own key store, the shared CA."""
    trust = f"trustStorePath={files.truststore};trustStorePassword={PASSWORD}"
    key = f"keyStorePath={files.keystores[node]};keyStorePassword={PASSWORD}"
    return {
        "acceptor_tls": f"sslEnabled=true;{key};needClientAuth=true;{trust}",
        "connector_tls": f"sslEnabled=true;{trust};{key}",
    }


def test_three_nodes_over_tls_balance_round_robin(cluster: Any, clients: Any, tmp_path: Path):
    names = ["node0", "node1", "node2"]
    files = create_tls_files(tmp_path / "tls", names, HOSTS, PASSWORD)
    nodes: Cluster = cluster(
        3,
        policy="ON_DEMAND",
        node_options={i: tls_options(files, name) for i, name in enumerate(names)},
    )
    assert all("over TLS" in node.log() for node in nodes)
    q = unique("tls-rr")
    consumers = consume_everywhere(nodes, clients, q)
    send_shared(clients(nodes[0]), f"/queue/{q}", consumers)
    # cluster status dials TLS too: with the connector of the node's broker.xml, or --url.
    shown = cli("cluster", "status", str(nodes[0].config_path), "--json")
    assert shown.returncode == 0, shown.stderr
    assert len(json.loads(shown.stdout)["members"]) == 3
    url = f"tcp://{nodes[1].host}:{nodes[1].cluster_port}?{nodes[1].connector_tls}"
    args = ["--cluster", nodes[1].cluster_name, "--password", nodes[1].password or ""]
    shown = cli("cluster", "status", "--url", url, *args, "--user", nodes[1].user, "--json")
    assert shown.returncode == 0, shown.stderr
    plain = cli("cluster", "status", "--url", url.split("?")[0], *args, "--user", nodes[1].user)
    assert plain.returncode == 1, plain.stderr
    assert "Traceback" not in plain.stderr, plain.stderr
    assert "sslEnabled=true" in plain.stderr, plain.stderr


def test_a_node_with_an_untrusted_certificate_never_joins(cluster: Any, tmp_path: Path) -> None:
    files = create_tls_files(tmp_path / "tls", ["node0", "node1"], HOSTS, PASSWORD)
    stranger = create_tls_files(tmp_path / "other-ca", ["node2"], HOSTS, PASSWORD)
    options = {0: tls_options(files, "node0"), 1: tls_options(files, "node1")}
    # node2 trusts the cluster's CA, but its own certificate comes from another CA.
    node2 = tls_options(stranger, "node2")
    node2["acceptor_tls"] = node2["acceptor_tls"].replace(
        str(stranger.truststore), str(files.truststore)
    )
    node2["connector_tls"] = node2["connector_tls"].replace(
        str(stranger.truststore), str(files.truststore)
    )
    options[2] = node2
    # node0 dials node2 too (a static connector), so both directions are tried.
    static = {0: [1, 2], 1: [0], 2: [0]}
    nodes: Cluster = cluster(3, formed=False, node_options=options, static=static)
    wait_for(lambda: len(status(nodes[0])["members"]) == 2, 20)
    # node0 refuses node2's certificate when node2 dials it, and cannot verify it when it
    # dials node2; each side's log says why, once (then ever less often).
    wait_for(lambda: "client certificate refused" in nodes[0].log(), 20)
    wait_for(lambda: "certificate verify failed" in nodes[0].log(), 20)
    assert f"trust store: {files.truststore}" in nodes[0].log()
    wait_for(lambda: "refused the link: TLS handshake failed" in nodes[2].log(), 20)
    stays(lambda: len(status(nodes[1])["members"]) == 2, 1.0, message="node2 stays out")
    assert nodes[0].log().count("client certificate refused") < 5, nodes[0].log()
    assert all("Traceback" not in node.log() for node in nodes)


def test_links_over_a_tls_acceptor_that_serves_stomp_too(cluster: Any, clients: Any, tmp_path):
    """A TLS acceptor that serves STOMP and cluster links is the data plane's when it is on:
    a link's TLS session stays on the plane's I/O thread, which relays its plaintext to the
    link code through a socket pair (docs/tls.md "With the data plane"); the cluster forms
    and balances as over the socket shell."""
    names = ["node0", "node1"]
    files = create_tls_files(tmp_path / "tls", names, HOSTS, PASSWORD)
    nodes: Cluster = cluster(
        2,
        policy="ON_DEMAND",
        cluster_protocols="STOMP,CORE",
        node_options={i: tls_options(files, name) for i, name in enumerate(names)},
    )
    plane = os.environ.get("ARTEMIS_PY_DATA_PLANE", "1") == "1"
    for node in nodes:
        line = "listening for STOMP and cluster links on"
        lines = [text for text in node.log().splitlines() if line in text]
        assert lines, node.log()
        assert all(("over TLS (data plane)" in text) == plane for text in lines), lines
    q = unique("tls-relay")
    consumers = consume_everywhere(nodes, clients, q)
    send_shared(clients(nodes[0]), f"/queue/{q}", consumers, count=10)
    assert all("Traceback" not in node.log() for node in nodes)
