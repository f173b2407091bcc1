"""A waiting shared-store backup serves its management web server (real processes): its
state at /api/node and /metrics, 503 for what needs a broker, and the full API on the same
port once it took over (docs/high-availability.md "Management")."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx

from .conftest import BACKUP_LIVE, BACKUP_WAITING, PRIMARY_LIVE, PairNode, port_open, wait_for

Pair = Callable[..., tuple[PairNode, PairNode]]
HA_LIVE = r'artemis_ha_live\{node="[0-9a-f-]*",policy="shared-store",role="backup"\} '


def get(node: PairNode, path: str) -> httpx.Response:
    return httpx.get(f"{node.web_url}{path}", timeout=10)


def assert_waiting(backup: PairNode) -> None:
    """The backup's web server answers as a waiting backup, and no acceptor is open."""
    assert not port_open(backup.port), "a waiting backup opens no acceptor"
    view = get(backup, "/api/node").json()
    assert view["ha"] == {"policy": "shared-store", "role": "backup", "state": "waiting"}
    assert all(a["listening"] == [] for a in view["acceptors"])
    assert view["web"] == backup.web_url
    metrics = get(backup, "/metrics")
    assert metrics.status_code == 200
    assert re.search(HA_LIVE + r"0\.0", metrics.text), metrics.text
    for path in ("/api/queues", "/api/addresses", "/api/connections", "/api/cluster"):
        refused = get(backup, path)
        assert refused.status_code == 503, (path, refused.text)
        assert "waiting shared-store backup" in refused.json()["error"]
    operation = httpx.post(f"{backup.web_url}/api/queues/q/purge", timeout=10)
    assert operation.status_code == 503
    assert "waiting shared-store backup" in operation.json()["error"]
    assert get(backup, "/console/").status_code == 200  # the page loads; it shows the 503


def test_a_waiting_backup_serves_its_state_then_the_full_api_once_live(pair: Pair) -> None:
    primary, backup = pair(web=True)
    primary.start()
    backup.start_waiting()
    primary_id = get(primary, "/api/node").json()["node_id"]
    assert_waiting(backup)
    assert get(backup, "/api/node").json()["node_id"] == primary_id  # the pair's node ID
    queue = "orders"
    created = httpx.post(
        f"{primary.web_url}/api/queues", json={"name": queue, "durable": True}, timeout=10
    )
    assert created.status_code == 201, created.text

    primary.kill()
    backup.wait_log(BACKUP_LIVE, timeout=10)
    backup.wait_live(timeout=10)
    # The same web server (one "listening" line, one port) now serves the full API.
    assert backup.log().count("management web server listening") == 1
    # Attached to the site just after its acceptors opened: a moment later, at most.
    wait_for(lambda: get(backup, "/api/queues").status_code == 200, 10, 0.05)
    queues = get(backup, "/api/queues")
    assert queue in [q["name"] for q in queues.json()]
    view = get(backup, "/api/node").json()
    assert view["ha"]["state"] == "live"
    assert view["node_id"] == primary_id
    assert view["web"] == backup.web_url
    assert re.search(HA_LIVE + r"1\.0", get(backup, "/metrics").text)


def test_after_failback_the_backup_serves_its_waiting_state_again(pair: Pair) -> None:
    primary, backup = pair(web=True)
    primary.start()
    backup.start_waiting()
    primary.kill()
    backup.wait_live()
    assert get(backup, "/api/queues").status_code == 200
    primary.start()
    primary.wait_log(PRIMARY_LIVE)
    backup.wait_log(BACKUP_WAITING, since_start=False)
    wait_for(lambda: backup.log().count(BACKUP_WAITING) == 2, 10)
    assert_waiting(backup)
    assert backup.log().count("management web server listening") == 1
