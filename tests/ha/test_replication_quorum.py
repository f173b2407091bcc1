"""The quorum vote of a replication backup, with nodes on hosts of their own (network
namespaces, tests/cluster/hosts.py): a backup cut off from a primary that still serves stays
passive, and takes over once the other primary of the cluster sees the primary gone too."""

from __future__ import annotations

import socket
from collections.abc import Callable

from cluster.conftest import hosts  # noqa: F401 - the fixture
from cluster.hosts import HostCluster
from ha.test_replication import BACKUP_LIVE, SYNCED, ha, wait_log
from ha.test_shared_store import drain, send_all
from integration.conftest import stays, unique

# Quick rounds, so that the test sees several votes fail before the primary dies.
FAST_VOTES = (
    "<quorum-vote-wait>2</quorum-vote-wait><vote-retries>40</vote-retries>"
    "<vote-retry-wait>500</vote-retry-wait><retry-replication-wait>500</retry-replication-wait>"
)


def accepts(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def test_a_partitioned_backup_stays_passive_until_the_quorum_sees_its_primary_gone(
    hosts: Callable[..., HostCluster],  # noqa: F811 - the fixture
) -> None:
    nodes = hosts(
        3,
        start=False,
        static={0: [1, 2], 1: [0, 2], 2: [0, 1]},
        node_options={
            0: {"extra_core": ha("primary")},
            1: {"extra_core": ha("backup", FAST_VOTES)},
        },
    )
    primary, backup, other = nodes
    primary.start()
    other.start()
    backup.start(wait=False)
    backup.starts += 1
    wait_log(backup, SYNCED)
    queue = f"/queue/{unique('quorum')}"
    send_all(primary.client(), queue, [f"q{i}" for i in range(20)])

    nodes.network.cut_both(0, 1)  # the backup loses its primary, which still serves
    wait_log(backup, "AMQ221066", timeout=30)  # its link's TTL, then a vote
    wait_log(backup, "this backup stays passive", timeout=30)
    stays(
        lambda: not accepts(backup.host, backup.port),
        3.0,
        message="an outvoted backup must not become live",
    )
    send_all(primary.client(), queue, ["while-cut"])  # the primary serves all along

    primary.kill()  # now the other primary loses it too: the next vote passes
    wait_log(backup, "AMQ221071", timeout=60)
    wait_log(backup, BACKUP_LIVE, timeout=20)
    backup.wait_ready(timeout=20)
    received = drain(backup, queue, 20)
    assert sorted(received) == sorted(f"q{i}" for i in range(20))
