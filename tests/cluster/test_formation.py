"""How a cluster forms, and what keeps a node out of it: start order, credentials, strangers
on the cluster port, and a copied data directory (clusters §1, §3.2, §4.2)."""

from __future__ import annotations

import os
import shutil
import socket
import time
from typing import Any

import pytest

from artemis_py.cluster.retry import LogBackoff
from artemis_py.protocol.cluster.wire import MAGIC
from artemis_py.transport.link import LinkError

from .conftest import (
    ClusterNode,
    node_id,
    status,
    unique,
    wait_for,
    wait_formed,
)


def test_start_order_does_not_matter(cluster: Any) -> None:
    nodes = cluster(3, start=False)
    # Reverse order, each node first failing to reach the static connector that is still down.
    nodes[2].start()
    wait_for(lambda: "cannot reach" in nodes[2].log(), 10, message="node 2 to retry node 0")
    nodes[1].start()
    wait_for(lambda: "cannot reach" in nodes[1].log(), 10, message="node 1 to retry node 0")
    nodes[0].start()
    wait_formed(nodes)
    # Every node knows every member as up, and has a link each way to each other node.
    ids = {node_id(n) for n in nodes}
    for n in nodes:
        members = status(n)["members"]
        assert {m["node_id"] for m in members} == ids
        assert all(m["up"] and (m["self"] or (m["bridge"] and m["incoming"])) for m in members)


def test_late_joiner_learns_the_others_through_topology(cluster: Any) -> None:
    """Node 2 lists only node 0; it still ends up linked with node 1 (and node 1 with it)."""
    nodes = cluster(3, start=False)
    nodes[0].start()
    nodes[1].start()
    wait_formed(nodes[:2])
    nodes[2].start()
    wait_formed(nodes)


def count(node: ClusterNode, text: str) -> int:
    return node.log().count(text)


def test_wrong_cluster_password_never_joins(cluster: Any, clients: Any) -> None:
    nodes = cluster(3, formed=False, node_options={2: {"password": "not-the-secret"}})
    wait_formed(nodes[:2])
    # Node 2 keeps dialling node 0 and keeps being refused; both sides say why.
    wait_for(
        lambda: count(nodes[2], "refused the link") >= 2,
        10,
        message=lambda: f"node 2 to be refused twice; log:\n{nodes[2].log_tail()}",
    )
    refused = [
        line for line in nodes[0].log().splitlines() if "refused" in line and "credentials" in line
    ]
    assert refused, nodes[0].log_tail()
    assert "cluster-password" in refused[0], refused[0]
    assert "credentials" in nodes[2].log()

    bad = node_id(nodes[2])  # node 2's own status (with its own password)
    for n in nodes[:2]:
        members = {m["node_id"] for m in status(n)["members"]}
        assert bad not in members
        assert len(members) == 2
    mine = status(nodes[2])
    assert [m["node_id"] for m in mine["members"]] == [bad]
    assert not any(b["connected"] for b in mine["bridges"])
    # The status API refuses the wrong password, too.
    with pytest.raises(LinkError, match="credentials"):
        status(nodes[0], password="not-the-secret")

    # Node 2 works on its own meanwhile.
    c = clients(nodes[2])
    q = unique("alone")
    c.subscribe(f"/queue/{q}")
    c.send(f"/queue/{q}", "hello")
    assert c.wait_messages(1)[0].body == "hello"


def test_a_refused_link_is_logged_once_then_ever_less_often(cluster: Any) -> None:
    """Node 1's password is wrong. Each node dials the other every 100 ms (retry-interval)
    and is refused every time, but logs the first refusal and then repeats it after 1 s,
    2 s more, 4 s more ... (each repeat counts the refusals it stands for), on the dialling
    side and on the refusing side alike."""
    nodes = cluster(2, formed=False, node_options={1: {"password": "not-the-secret"}})

    def refusals(node: ClusterNode) -> list[str]:
        return [line for line in node.log().splitlines() if "refused" in line]

    for node in nodes:
        wait_for(
            lambda node=node: count(node, "refused the link") and count(node, "link from"),
            10,
            message=lambda node=node: f"{node.name} to log both refusals:\n{node.log_tail()}",
        )
    seen = {node.name: len(refusals(node)) for node in nodes}
    # A stated window: about 30 refusals each way, which used to make about 60 lines.
    time.sleep(3)
    for node in nodes:
        lines = refusals(node)[seen[node.name] :]
        assert len(lines) <= 6, lines
        dialled = [line for line in lines if "refused the link" in line]
        served = [line for line in lines if "link from" in line]
        assert dialled, lines
        assert served, lines  # repeated, not muted
        assert "more time(s) since the last such line" in dialled[0], dialled[0]
        assert "more time(s) since the last such line" in served[0], served[0]


def test_log_back_off_of_a_repeating_failure() -> None:
    backoff = LogBackoff()
    logged = []
    for tenth in range(100):  # a failure every 0.1 s for 10 s
        quiet = backoff.occurred("refused", tenth / 10)
        if quiet is not None:
            logged.append((tenth / 10, quiet))
    assert logged == [(0.0, 0), (1.0, 9), (3.0, 19), (7.0, 39)]
    assert backoff.occurred("another reason", 9.95) == 0  # a new episode: at once
    # Quiet for longer than the longest gap: the next occurrence starts a new episode.
    assert backoff.occurred("refused", 9.9 + LogBackoff.MAX_GAP + 0.1) == 0


def test_default_cluster_password_refuses_to_form(cluster: Any, clients: Any) -> None:
    # Node 0 lists node 2 too, so someone does knock on node 2's cluster port.
    nodes = cluster(
        3,
        formed=False,
        static={0: [1, 2], 1: [0], 2: [0]},
        node_options={2: {"password": None}},  # no <cluster-password>: "CHANGE ME!!"
    )
    wait_formed(nodes[:2])
    log = nodes[2].log()
    assert "will not form a cluster: cluster-password is still the default" in log, log
    wait_for(
        lambda: "no running cluster connection" in nodes[2].log(),
        10,
        message=lambda: f"node 2 to turn node 0's link away; log:\n{nodes[2].log_tail()}",
    )
    ids = {node_id(n) for n in nodes[:2]}
    for n in nodes[:2]:
        data = status(n)
        assert {m["node_id"] for m in data["members"]} == ids
        assert all(b["node_id"] in ids for b in data["bridges"])
    # It runs as a standalone broker.
    c = clients(nodes[2])
    q = unique("standalone")
    c.subscribe(f"/queue/{q}")
    c.send(f"/queue/{q}", "hello")
    assert c.wait_messages(1)[0].body == "hello"


def read_until_closed(sock: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Read until EOF (or a reset); returns what was read and how long the close took."""
    started = time.monotonic()
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:
            break
        except TimeoutError:
            pytest.fail(f"connection still open after {timeout}s (read {data[:100]!r})")
        if not chunk:
            break
        data += chunk
    return data, time.monotonic() - started


def test_strangers_on_the_cluster_port(cluster: Any, clients: Any) -> None:
    nodes = cluster(2)
    node = nodes[0]
    q = unique("still")
    consumer = clients(node)
    consumer.subscribe(f"/queue/{q}")
    producer = clients(node)
    sent = 0

    def still_serving() -> None:
        nonlocal sent
        producer.send(f"/queue/{q}", f"m-{sent}")
        sent += 1
        consumer.wait_messages(sent)

    def refusals() -> int:
        return count(node, "refused")

    still_serving()

    # 1. A STOMP client that dialled the cluster port by mistake.
    before = refusals()
    with socket.create_connection(("127.0.0.1", node.cluster_port), timeout=5) as s:
        s.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00")
        _, took = read_until_closed(s, 10)
    wait_for(lambda: refusals() > before, 5, message="a log line for the STOMP client")
    line = [x for x in node.log().splitlines() if "refused" in x][-1]
    assert "does not speak the artemis-py cluster protocol" in line, line
    assert "STOMP" in line, line
    still_serving()

    # 2. Random garbage.
    before = refusals()
    with socket.create_connection(("127.0.0.1", node.cluster_port), timeout=5) as s:
        s.sendall(os.urandom(4096))
        read_until_closed(s, 10)
    wait_for(lambda: refusals() > before, 5, message="a log line for the garbage")
    still_serving()

    # 3. A plausible start (the preamble), then nothing: dropped after the handshake timeout
    #    (call-timeout 2 s in these clusters), not held open forever.
    before = refusals()
    with socket.create_connection(("127.0.0.1", node.cluster_port), timeout=5) as s:
        s.sendall(MAGIC)
        _, took = read_until_closed(s, 15)
    assert took < 10, took
    wait_for(lambda: refusals() > before, 5, message="a log line for the stalled peer")
    still_serving()

    # 4. A connection that sends nothing at all.
    with socket.create_connection(("127.0.0.1", node.cluster_port), timeout=5) as s:
        _, took = read_until_closed(s, 15)
    assert took < 10, took
    still_serving()

    # 5. Half a preamble, then the peer goes away.
    with socket.create_connection(("127.0.0.1", node.cluster_port), timeout=5) as s:
        s.sendall(MAGIC[:3])
    still_serving()

    # The node is still in its cluster, and no link failure was logged with a traceback.
    wait_formed(nodes)
    assert "Traceback" not in node.log(), node.log_tail()
    consumer.sync()
    assert [m.body for m in consumer.messages] == [f"m-{i}" for i in range(sent)]


def test_stalled_handshake_is_logged_with_its_reason(cluster: Any) -> None:
    """The log line for a peer dropped in the middle of the handshake says why."""
    nodes = cluster(1, static={})
    node = nodes[0]
    with socket.create_connection(("127.0.0.1", node.cluster_port), timeout=5) as s:
        s.sendall(MAGIC)
        read_until_closed(s, 15)
    line = wait_for(
        lambda: next((x for x in node.log().splitlines() if "refused" in x), None),
        5,
        message="a log line for the stalled peer",
    )
    assert "timed out" in line, line


def test_copied_data_directory_duplicate_node_id(cluster: Any) -> None:
    nodes = cluster(3, start=False)
    nodes[0].start()
    nodes[1].start()
    wait_formed(nodes[:2])
    nodes[1].stop()
    # node 2 gets a copy of node 1's data directory (server.lock holds the node id).
    shutil.copytree(nodes[1].data_dir, nodes[2].data_dir)
    nodes[1].start()
    nodes[2].start()
    assert node_id(nodes[1]) == node_id(nodes[2])

    a, b = nodes[1].connector, nodes[2].connector

    def named_both() -> str | None:
        for n in nodes:
            for line in n.log().splitlines():
                if a in line and b in line and "node ID" in line:
                    return line
        return None

    line = wait_for(
        named_both,
        15,
        message=lambda: (
            "a log line naming both connectors; logs:\n"
            + "\n".join(n.log_tail(2000) for n in nodes)
        ),
    )
    assert "data directory" in line, line


def test_restarted_node_rejoins_the_full_mesh(cluster: Any) -> None:
    """Node 2 lists only node 0; after a graceful stop, and after a crash, it comes back and
    every node is linked with every other again."""
    nodes = cluster(3)
    nodes[2].stop()
    wait_formed(nodes[:2])
    nodes[2].start()
    wait_formed(nodes)
    nodes[2].kill()
    nodes[2].start()
    wait_formed(nodes)


def test_gives_up_after_initial_connect_attempts_until_announced(cluster: Any) -> None:
    nodes = cluster(
        2,
        start=False,
        node_options={
            0: {"cluster_extra": "<initial-connect-attempts>2</initial-connect-attempts>"}
        },
    )
    nodes[0].start()
    connector = nodes[1].connector
    wait_for(
        lambda: connector in status(nodes[0])["given_up"],
        10,
        message=lambda: f"node 0 to give up on {connector}: {status(nodes[0])}",
    )
    assert "gave up" in status(nodes[0])["given_up"][connector]
    assert f"to {connector}" in nodes[0].log()
    # Node 1 (which lists node 0) announces itself: node 0 dials it after all.
    nodes[1].start()
    wait_formed(nodes)
    assert connector not in status(nodes[0])["given_up"]
