"""Replication HA with real processes: a primary and a backup, each with its own data
directory, linked by a cluster connection; the backup copies the primary's journals, follows
every record, and takes over when the primary dies (docs/high-availability.md)."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.conftest import Cluster, ClusterNode, make_cluster
from ha.conftest import _used_by_this_test, port_open, stays, unique, wait_for, wait_log
from ha.test_shared_store import acknowledge_some, drain, node_id, send_all
from integration.conftest import close_nodes

SYNCED = "AMQ221024"
BACKUP_LIVE = "AMQ221007"  # as Artemis's replicated backup (221010 is shared store's)
BACKUP_WAITING = "AMQ221109"

Pair = Callable[..., Cluster]


def ha(role: str, settings: str = "") -> str:
    return f"<ha-policy><replication><{role}>{settings}</{role}></replication></ha-policy>"


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    """``pair(primary=XML, backup=XML, **options)`` -> [primary, backup] (stopped), each
    listing the other as its static connector in the cluster connection ``test``;
    ``options`` apply to both (``web=True``: their management web servers)."""
    made: list[ClusterNode] = []

    def factory(
        primary: str = "",
        backup: str = "",
        backup_options: dict[str, Any] | None = None,
        **options: Any,
    ) -> Cluster:
        """``backup_options``: the backup's own (a wrong password)."""
        nodes = make_cluster(
            tmp_path,
            2,
            static={0: [1], 1: [0]},
            node_options={
                0: {"extra_core": ha("primary", primary)},
                1: {"extra_core": ha("backup", backup), **(backup_options or {})},
            },
            **options,
        )
        for node in nodes:
            made.append(node)
            _used_by_this_test.append((node, 0))
        return nodes

    yield factory
    errors = close_nodes(made)
    assert not errors, "\n".join(errors)


def start_synced(nodes: Cluster) -> tuple[ClusterNode, ClusterNode]:
    primary, backup = nodes
    primary.start()
    backup.start(wait=False)
    backup.starts += 1  # keep its ports on a restart
    wait_log(backup, SYNCED)
    return primary, backup


def test_sigkill_of_the_primary_the_backup_takes_over_with_every_receipted_message(
    pair: Pair,
) -> None:
    primary, backup = start_synced(pair())
    assert not port_open(backup.port), "a backup that is not live must open no acceptor"

    queue = f"/queue/{unique('orders')}"
    bodies = [f"m{i}" for i in range(200)]
    producer = primary.client()
    send_all(producer, queue, bodies)
    acked = acknowledge_some(primary.client(), queue, 20)  # before the kill

    killed = time.monotonic()
    primary.kill()
    wait_log(backup, BACKUP_LIVE, timeout=10)
    backup.wait_ready(timeout=10)
    took = time.monotonic() - killed
    assert took < 5, f"takeover took {took:.2f}s"

    received = drain(backup, queue, len(bodies) - len(acked))
    assert sorted(received) == sorted(set(bodies) - acked), "lost or duplicated messages"
    assert not acked & set(received), "acknowledged messages came back"
    assert node_id(backup) == node_id(primary), "the backup serves as the primary's node"


def test_messages_sent_before_the_backup_started_are_copied_by_the_initial_sync(
    pair: Pair,
) -> None:
    primary, backup = pair()
    primary.start()
    queue = f"/queue/{unique('before')}"
    producer = primary.client()
    send_all(producer, queue, [f"early{i}" for i in range(50)])
    backup.start(wait=False)
    backup.starts += 1
    wait_log(backup, SYNCED)
    send_all(producer, queue, [f"late{i}" for i in range(50)])
    assert "AMQ221025" in primary.log(since_start=True)  # the files it sent

    primary.kill()
    wait_log(backup, BACKUP_LIVE, timeout=10)
    backup.wait_ready(timeout=10)
    received = drain(backup, queue, 100)
    assert sorted(received) == sorted(
        [f"early{i}" for i in range(50)] + [f"late{i}" for i in range(50)]
    )


def test_a_receipt_waits_until_the_backup_has_the_message(pair: Pair) -> None:
    primary, backup = start_synced(pair())
    assert backup.process is not None
    producer = primary.client()
    queue = f"/queue/{unique('gated')}"
    os.kill(backup.process.pid, signal.SIGSTOP)
    try:
        receipt = producer.next_receipt()
        producer.conn.send(queue, "held", headers={"persistent": "true", "receipt": receipt})
        stays(
            lambda: receipt not in producer.receipts,
            1.0,
            message="no receipt while the backup is stopped",
        )
    finally:
        os.kill(backup.process.pid, signal.SIGCONT)
    producer.wait_receipt(receipt)


def test_losing_the_backup_lets_the_primary_go_on_alone(pair: Pair) -> None:
    primary, backup = start_synced(pair())
    backup.kill()
    wait_log(primary, "AMQ222092", timeout=10)
    producer = primary.client()
    send_all(producer, f"/queue/{unique('alone')}", ["one", "two"])


def test_a_restarted_backup_sets_its_old_data_aside_and_syncs_again(pair: Pair) -> None:
    primary, backup = start_synced(pair())
    queue = f"/queue/{unique('again')}"
    producer = primary.client()
    send_all(producer, queue, ["a", "b"])
    backup.stop()
    send_all(producer, queue, ["c"])
    backup.start(wait=False)
    wait_log(backup, SYNCED)
    saved = backup.data_dir / "journal" / "oldreplica.1"
    assert any(saved.iterdir()), "the old copy is kept (max-saved-replicated-journals-size)"
    send_all(producer, queue, ["d"])
    primary.kill()
    wait_log(backup, BACKUP_LIVE, timeout=10)
    backup.wait_ready(timeout=10)
    assert sorted(drain(backup, queue, 4)) == ["a", "b", "c", "d"]


def test_a_backup_started_first_waits_for_its_primary(pair: Pair) -> None:
    primary, backup = pair()
    backup.start(wait=False)
    backup.starts += 1
    wait_log(backup, BACKUP_WAITING)
    stays(lambda: not port_open(backup.port), 1.0, message="the backup stays passive")
    primary.start()
    wait_log(backup, SYNCED)
    found = re.findall(r"nodeID=([0-9a-f-]{36})", backup.log(since_start=True))
    assert found, backup.log_tail()
    assert found[-1] == node_id(primary)


def test_large_messages_reach_the_backup(pair: Pair) -> None:
    primary, backup = pair()
    primary.start()
    queue = f"/queue/{unique('large')}"
    producer = primary.client()
    early = "e" * 300_000  # past the acceptor's 100 KiB: a large-message file
    send_all(producer, queue, [early])
    backup.start(wait=False)
    backup.starts += 1
    wait_log(backup, SYNCED)
    late = "l" * 250_000
    send_all(producer, queue, [late])
    primary.kill()
    wait_log(backup, BACKUP_LIVE, timeout=10)
    backup.wait_ready(timeout=10)
    assert sorted(drain(backup, queue, 2), key=len) == [late, early]


def test_a_transaction_open_when_the_sync_starts_commits_on_the_backup(pair: Pair) -> None:
    primary, backup = pair()
    primary.start()
    queue = f"/queue/{unique('tx')}"
    producer = primary.client()
    producer.begin("tx1")
    for body in ("t1", "t2"):
        producer.conn.send(queue, body, headers={"persistent": "true", "transaction": "tx1"})
    producer.sync()  # the broker has both sends (journaled in the open transaction)
    backup.start(wait=False)
    backup.starts += 1
    wait_log(backup, SYNCED)
    producer.conn.send(queue, "t3", headers={"persistent": "true", "transaction": "tx1"})
    producer.commit("tx1")
    primary.kill()
    wait_log(backup, BACKUP_LIVE, timeout=10)
    backup.wait_ready(timeout=10)
    assert sorted(drain(backup, queue, 3)) == ["t1", "t2", "t3"]


def test_failback_the_restarted_primary_syncs_from_the_live_backup_and_takes_over(
    pair: Pair,
) -> None:
    primary, backup = start_synced(
        pair(
            primary="<check-for-active-server>true</check-for-active-server>",
            backup="<allow-failback>true</allow-failback>",
        )
    )
    queue = f"/queue/{unique('back')}"
    send_all(primary.client(), queue, ["before"])
    primary.kill()
    wait_log(backup, BACKUP_LIVE, timeout=10)
    backup.wait_ready(timeout=10)
    send_all(backup.client(), queue, ["while-backup-live"])

    primary.start(wait=False)
    wait_log(primary, "check-for-active-server")
    wait_log(backup, "AMQ221039")  # the backup hands back, then syncs as backup again
    primary.wait_ready(timeout=20)
    wait_for(
        lambda: backup.log(since_start=True).count(SYNCED) >= 2,
        20,
        message=lambda: f"the backup syncs from its primary again:\n{backup.log_tail()}",
    )
    assert not port_open(backup.port), "the backup is passive again"
    send_all(primary.client(), queue, ["after"])
    assert sorted(drain(primary, queue, 3)) == ["after", "before", "while-backup-live"]


def test_a_graceful_stop_of_the_primary_hands_over_with_every_acknowledgement(
    pair: Pair,
) -> None:
    primary, backup = start_synced(pair())
    queue = f"/queue/{unique('graceful')}"
    bodies = [f"g{i}" for i in range(30)]
    send_all(primary.client(), queue, bodies)
    consumer = primary.client()
    consumer.subscribe(queue, ack="client-individual", **{"activemq.prefetchSize": "10"})
    for frame in consumer.wait_messages(10)[:10]:
        consumer.ack(frame, receipt=False)  # no receipt: the stop must still carry them over
    acked = {m.body for m in consumer.messages[:10]}
    consumer.sync()
    primary.stop()  # graceful: as Artemis's replication, the backup takes over
    wait_log(backup, BACKUP_LIVE, timeout=10)
    backup.wait_ready(timeout=10)
    received = drain(backup, queue, len(bodies) - len(acked))
    assert sorted(received) == sorted(set(bodies) - acked)


def test_a_backup_with_a_wrong_cluster_password_says_so_and_the_primary_serves_alone(
    pair: Pair,
) -> None:
    primary, backup = pair(
        backup="<retry-replication-wait>200</retry-replication-wait>",
        backup_options={"password": "not-the-cluster-password"},
    )
    primary.start()
    backup.start(wait=False)
    backup.starts += 1
    wait_log(backup, "refused this backup")
    stays(  # about ten retries: each node logs the refusal ever less often
        lambda: all(n.log(since_start=True).count("refused") <= 3 for n in (primary, backup)),
        2.0,
        message="the refusal is logged on every retry",
    )
    assert SYNCED not in backup.log(since_start=True)
    send_all(primary.client(), f"/queue/{unique('alone')}", ["served"])


def test_a_backup_of_another_group_is_refused_and_one_of_the_same_group_syncs(
    pair: Pair,
) -> None:
    primary, backup = pair(
        primary="<group-name>orders</group-name>",
        backup="<group-name>billing</group-name><retry-replication-wait>200</retry-replication-wait>",
    )
    primary.start()
    backup.start(wait=False)
    backup.starts += 1
    wait_log(backup, "group-name is 'billing', this primary's 'orders'")
    wait_log(primary, "refused: its group-name")
    assert SYNCED not in backup.log(since_start=True)
