"""Shared-store HA with real processes: a primary and a backup on one data directory.

The backup waits (no acceptor open) until the primary's lock is released while the pair's
state says "live": a SIGKILL, or a graceful stop with failover-on-shutdown. Then it recovers
the journal and serves the primary's messages. A restarted primary takes its role back
(failback) and the backup waits again (restart-backup, Artemis's default).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from .conftest import (
    BACKUP_LIVE,
    BACKUP_WAITING,
    PRIMARY_LIVE,
    REPO,
    Client,
    PairNode,
    _used_by_this_test,
    free_port,
    port_open,
    stays,
    unique,
    wait_for,
)

Pair = Callable[..., tuple[PairNode, PairNode]]


def send_all(client: Client, destination: str, bodies: list[str]) -> None:
    """Pipelined persistent SENDs, each with a receipt; returns once every one is receipted."""
    receipts = []
    for body in bodies:
        receipt = client.next_receipt()
        receipts.append(receipt)
        client.conn.send(destination, body, headers={"persistent": "true", "receipt": receipt})
    for receipt in receipts:
        client.wait_receipt(receipt)


def acknowledge_some(consumer: Client, destination: str, count: int) -> set[str]:
    """Receive ``count`` messages and acknowledge each with a receipt; their bodies."""
    consumer.subscribe(
        destination, ack="client-individual", **{"activemq.prefetchSize": str(count)}
    )
    for frame in consumer.wait_messages(count)[:count]:
        consumer.ack(frame)
    return {m.body for m in consumer.messages[:count]}


def drain(node: PairNode, destination: str, expected: int) -> list[str]:
    """Consume (auto-ack) from ``node`` until ``expected`` messages arrived, and one round
    trip more so that extra ones (duplicates) would show."""
    client = node.client()
    try:
        client.subscribe(destination)
        client.wait_messages(expected)
        client.sync()
        return client.bodies()
    finally:
        client.close()


def node_id(node: PairNode) -> str:
    found = re.findall(r"node \S+ \(([0-9a-f-]{36})\) started", node.log())
    assert found, node.log_tail()
    return found[-1]


def test_sigkill_of_the_primary_the_backup_takes_over_with_every_receipted_message(
    pair: Pair,
) -> None:
    primary, backup = pair()
    primary.start()
    backup.start_waiting()
    assert "listening for STOMP" not in backup.log()
    assert not port_open(backup.port), "a waiting backup must open no acceptor"

    queue = f"/queue/{unique('orders')}"
    bodies = [f"m{i}" for i in range(200)]
    producer = primary.client()
    send_all(producer, queue, bodies)
    acked = acknowledge_some(primary.client(), queue, 20)

    killed = time.monotonic()
    primary.kill()
    backup.wait_log(BACKUP_LIVE, timeout=10)
    backup.wait_live(timeout=10)
    took = time.monotonic() - killed
    assert took < 5, f"takeover took {took:.2f}s"
    assert port_open(backup.port)

    received = drain(backup, queue, len(bodies) - len(acked))
    assert sorted(received) == sorted(set(bodies) - acked), "lost or duplicated messages"
    assert not acked & set(received), "acknowledged messages came back"
    # The backup is the primary's node now: the same node ID.
    assert node_id(backup) == node_id(primary)


def test_graceful_stop_without_failover_on_shutdown_leaves_the_backup_waiting(pair: Pair) -> None:
    primary, backup = pair()
    primary.start()
    backup.start_waiting()
    queue = f"/queue/{unique('kept')}"
    producer = primary.client()
    send_all(producer, queue, ["a", "b"])
    producer.close()
    primary.stop()
    # The state says "paused": the backup leaves the lock alone (for ten of its polls and
    # more). A restart of the primary then serves the messages; the backup still waits.
    stays(lambda: BACKUP_LIVE not in backup.log() and backup.running, 1.5)
    primary.start()
    assert BACKUP_LIVE not in backup.log()
    assert not port_open(backup.port)
    assert sorted(drain(primary, queue, 2)) == ["a", "b"]
    assert backup.running


def test_graceful_stop_with_failover_on_shutdown_hands_over(pair: Pair) -> None:
    primary, backup = pair(primary="<failover-on-shutdown>true</failover-on-shutdown>")
    primary.start()
    backup.start_waiting()
    queue = f"/queue/{unique('handed')}"
    producer = primary.client()
    send_all(producer, queue, ["x", "y", "z"])
    producer.close()
    primary.stop()
    backup.wait_log(BACKUP_LIVE, timeout=10)
    backup.wait_live()
    assert sorted(drain(backup, queue, 3)) == ["x", "y", "z"]


def test_failback_the_primary_takes_its_role_back_and_the_backup_waits_again(
    pair: Pair,
) -> None:
    primary, backup = pair()
    primary.start()
    backup.start_waiting()
    primary.kill()
    backup.wait_log(BACKUP_LIVE)
    backup.wait_live()
    queue = f"/queue/{unique('back')}"
    producer = backup.client()
    send_all(producer, queue, ["sent-to-the-backup-1", "sent-to-the-backup-2"])
    producer.close()

    offset = len(backup.log())
    primary.start()  # waits until the live backup gives the lock back, then listens
    primary.wait_log(PRIMARY_LIVE)
    backup_log = backup.log()[offset:]
    assert "AMQ221008" in backup_log
    backup.wait_log(BACKUP_WAITING, since_start=False)
    assert backup.log().count(BACKUP_WAITING) == 2
    assert not port_open(backup.port), "the backup waits again, with no acceptor"
    assert sorted(drain(primary, queue, 2)) == ["sent-to-the-backup-1", "sent-to-the-backup-2"]

    # And it takes over again when the primary dies a second time.
    primary.kill()
    wait_for(lambda: backup.log().count(BACKUP_LIVE) == 2, 10, message="a second takeover")
    wait_for(lambda: backup.log().count(f"listening for STOMP on 127.0.0.1:{backup.port}") == 2)
    assert sorted(drain(backup, queue, 0)) == []  # the primary consumed them


def test_without_restart_backup_the_backup_exits_after_failback(pair: Pair) -> None:
    primary, backup = pair(backup="<restart-backup>false</restart-backup>")
    primary.start()
    backup.start_waiting()
    primary.kill()
    backup.wait_live()
    primary.start()
    primary.wait_log(PRIMARY_LIVE)
    assert backup.process is not None
    assert backup.process.wait(10) == 0
    assert "AMQ221008" in backup.log()


def test_without_allow_failback_the_primary_waits_for_the_live_backup(pair: Pair) -> None:
    primary, backup = pair(backup="<allow-failback>false</allow-failback>")
    primary.start()
    backup.start_waiting()
    primary.kill()
    backup.wait_live()
    primary.start_waiting()  # AMQ221034: waiting indefinitely for the lock
    assert not port_open(primary.port)
    # A graceful stop of the live backup (failover-on-shutdown false) pauses; the waiting
    # primary's own request wins: it gets the lock and becomes live.
    backup.stop()
    primary.wait_log(PRIMARY_LIVE)
    primary.wait_live()


def test_a_waiting_backup_stops_promptly_on_sigterm(pair: Pair) -> None:
    primary, backup = pair()
    primary.start()
    backup.start_waiting()
    started = time.monotonic()
    assert backup.stop(timeout=5) == 0
    assert time.monotonic() - started < 3
    assert "Traceback" not in backup.log()


@pytest.mark.parametrize("first", ["backup", "primary"])
def test_either_may_start_first(pair: Pair, first: str) -> None:
    primary, backup = pair()
    if first == "backup":
        backup.start_waiting()  # nothing ever ran here: it waits for a primary
        primary.start()
    else:
        primary.start()
        backup.start_waiting()
    assert primary.log().count(PRIMARY_LIVE) == 1
    assert BACKUP_LIVE not in backup.log()
    primary.kill()
    backup.wait_live()


def test_management_says_which_side_is_live(pair: Pair) -> None:
    primary, backup = pair(web=True)
    primary.start()
    backup.start_waiting()
    ha = httpx.get(f"{primary.web_url}/api/node", timeout=10).json()["ha"]
    assert ha == {"policy": "shared-store", "role": "primary", "state": "live"}
    primary.kill()
    backup.wait_live()
    cluster = httpx.get(f"{backup.web_url}/api/cluster", timeout=10).json()
    assert cluster["node"]["ha"] == {"policy": "shared-store", "role": "backup", "state": "live"}
    metrics = httpx.get(f"{backup.web_url}/metrics", timeout=10).text
    assert re.search(
        r'artemis_ha_live\{node="[0-9a-f-]+",policy="shared-store",role="backup"\} 1\.0', metrics
    ), metrics


def test_the_sample_pair_in_etc_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARTEMIS_SHARED_DATA", str(tmp_path / "shared"))
    nodes = []
    for role in ("primary", "backup"):
        port = free_port()
        monkeypatch.setenv(f"{role.upper()}_STOMP_PORT", str(port))
        config = REPO / "etc" / "ha" / f"shared-store-{role}.xml"
        node = PairNode(tmp_path / role, role=role, settings="", config_path=config, port=port)
        nodes.append(node)
        _used_by_this_test.append((node, 0))
    primary, backup = nodes
    try:
        primary.start()
        backup.start_waiting()
        producer = primary.client()
        send_all(producer, "/queue/orders", ["one", "two"])
        producer.close()
        primary.kill()
        backup.wait_live()
        assert sorted(drain(backup, "/queue/orders", 2)) == ["one", "two"]
    finally:
        for node in nodes:
            node.close()


def test_a_primary_stopped_while_waiting_withdraws_its_failback_request(pair: Pair) -> None:
    primary, backup = pair(backup="<allow-failback>false</allow-failback>")
    primary.start()
    backup.start_waiting()
    primary.kill()
    backup.wait_live()
    state = backup.data_dir / "journal" / "server.state"
    assert state.read_bytes() == b"L"
    primary.start_waiting()
    assert state.read_bytes() == b"F"  # its request, which this backup does not grant
    assert primary.stop(timeout=5) == 0
    assert state.read_bytes() == b"L", "the live backup's pair must read as live again"
    assert backup.running
    assert port_open(backup.port)
