"""A replicated pair as management shows it (real processes, web servers on): the primary's
``/api/node`` and ``/api/cluster`` name its backup, the replication state and the lag, its
metrics say in sync; the waiting backup's site names its primary; ``cluster status`` prints
it; and once the backup is gone the primary shows ``no backup`` (docs/management.md)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from artemis_py.cli import main
from cluster.conftest import ClusterNode
from ha.conftest import unique, wait_for
from ha.test_replication import Pair, pair, start_synced, wait_log  # noqa: F401 - fixture
from ha.test_shared_store import send_all

JOURNALS = {"messages", "bindings"}


def get(node: ClusterNode, path: str) -> httpx.Response:
    return httpx.get(f"{node.web_url}{path}", timeout=10)


def ha_of(node: ClusterNode) -> dict[str, Any]:
    view: dict[str, Any] = get(node, "/api/node").json()["ha"]
    return view


def metric(node: ClusterNode, name: str, **labels: str) -> float | None:
    """The value of the one sample ``name`` whose labels include ``labels`` (None: none)."""
    for line in get(node, "/metrics").text.splitlines():
        found = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if found and all(f'{k}="{v}"' in found[1] for k, v in labels.items()):
            return float(found[2])
    return None


def test_the_pair_shows_its_peers_replication_state_and_lag(
    pair: Pair,  # noqa: F811 - the fixture imported above
    capsys: pytest.CaptureFixture[str],
) -> None:
    primary, backup = start_synced(pair(web=True))
    wait_for(lambda: ha_of(primary).get("replication") == "in sync", 10, 0.05, "in sync")
    send_all(primary.client(), f"/queue/{unique('watched')}", [f"m{i}" for i in range(20)])

    ha = ha_of(primary)
    assert (ha["policy"], ha["role"], ha["state"]) == ("replication", "primary", "live")
    assert re.fullmatch(r"127\.0\.0\.1:\d+", ha["backup"]), ha
    assert set(ha["lag"]) == JOURNALS
    # Receipts wait for the backup: once they came, nothing the producer sent is behind.
    wait_for(
        lambda: all(lag["tickets"] == 0 for lag in ha_of(primary)["lag"].values()),
        10,
        0.05,
        lambda: f"no lag: {ha_of(primary)}",
    )
    assert get(primary, "/api/cluster").json()["node"]["ha"]["backup"] == ha["backup"]

    assert metric(primary, "artemis_ha_replication_in_sync", role="primary") == 1
    for journal in JOURNALS:
        assert metric(primary, "artemis_ha_replication_lag_tickets", journal=journal) == 0
        assert metric(primary, "artemis_ha_replication_pending_bytes", journal=journal) is not None

    waiting = ha_of(backup)
    assert waiting == {
        "policy": "replication",
        "role": "backup",
        "state": "waiting",
        "replication": "in sync",
        "primary": f"{primary.host}:{primary.cluster_port}",
    }
    assert metric(backup, "artemis_ha_replication_in_sync", role="backup") == 1
    assert metric(backup, "artemis_ha_replication_lag_tickets") is None  # the primary's

    assert main(["cluster", "status", "--url", primary.web_url]) == 0
    out = capsys.readouterr().out
    assert f"replication primary, live, backup {ha['backup']} in sync, lag 0" in out, out

    backup.kill()
    wait_log(primary, "AMQ222092", timeout=10)
    wait_for(lambda: ha_of(primary)["replication"] == "no backup", 10, 0.05, "no backup")
    ha = ha_of(primary)
    assert ha["backup"] is None
    assert all(lag == {"tickets": 0, "pending_bytes": 0} for lag in ha["lag"].values())
    assert metric(primary, "artemis_ha_replication_in_sync", role="primary") == 0
