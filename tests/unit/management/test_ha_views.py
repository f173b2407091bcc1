"""The ``ha`` view of a replication pair's sides (management/views.py), the metrics made of
it (management/metrics.py) and its line in ``cluster status`` (cli/management_output.py):
the peer, the replication state and the lag, read from real journals with their tap on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.authorization import Authorizer
from artemis_py.cli.management_output import render_ha
from artemis_py.config import ReplicationConfig, parse_config
from artemis_py.ha import ReplicationBackup, ReplicationPrimary
from artemis_py.management.metrics import identity, metrics_of
from artemis_py.management.site import ManagementSite
from artemis_py.management.views import ha_side_view
from artemis_py.node import journal_settings
from artemis_py.storage.journal import Journal, open_journal

CONFIG = parse_config(
    '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
    "<name>pair</name></core></configuration>"
)
ZERO = {"tickets": 0, "pending_bytes": 0}


@pytest.fixture
async def journals(tmp_path: Path) -> AsyncIterator[tuple[Journal, Journal]]:
    async with (
        open_journal(tmp_path / "journal") as messages,
        open_journal(tmp_path / "bindings") as bindings,
    ):
        yield messages, bindings


def samples(families: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in families  # type: ignore[attr-defined]
        for s in family.samples
    }


async def test_a_primary_shows_its_backup_the_state_and_each_journals_lag(
    journals: tuple[Journal, Journal],
) -> None:
    messages, bindings = journals
    primary = ReplicationPrimary(ReplicationConfig())
    assert ha_side_view(primary)["lag"] == {"messages": ZERO, "bindings": ZERO}  # not open
    primary.store = SimpleNamespace(storage=SimpleNamespace(messages=messages, bindings=bindings))  # type: ignore[assignment]
    await messages.add(1, 30, b"before any backup")
    view = ha_side_view(primary)
    assert view == {
        "policy": "replication",
        "role": "primary",
        "state": "live",
        "replication": "no backup",
        "backup": None,
        "lag": {"messages": ZERO, "bindings": ZERO},
    }

    primary.backup = "127.0.0.1:5555"
    for journal in journals:
        await journal.start_replication()
    view = ha_side_view(primary)
    # What was written before the tap goes in the sync's files: it is no lag.
    assert view["replication"] == "synchronizing"
    assert view["lag"] == {"messages": ZERO, "bindings": ZERO}
    await messages.add(2, 30, b"tapped")
    await messages.add(3, 30, b"tapped too")
    await bindings.add(4, 21, b"a binding")
    lag = ha_side_view(primary)["lag"]
    assert lag["messages"]["tickets"] == 2
    assert lag["bindings"]["tickets"] == 1
    assert lag["messages"]["pending_bytes"] > lag["bindings"]["pending_bytes"] > 0

    assert messages.take_replicated()
    messages.replicated(messages.last_ticket)
    primary.in_sync = True
    view = ha_side_view(primary)
    assert view["replication"] == "in sync"
    assert view["lag"]["messages"] == ZERO
    assert view["lag"]["bindings"]["tickets"] == 1

    metrics = samples(identity("n1", "pair", view, True))
    assert metrics[("artemis_ha_replication_in_sync", (("node", "n1"), ("role", "primary")))] == 1
    lag_of = (("journal", "bindings"), ("node", "n1"))
    assert metrics[("artemis_ha_replication_lag_tickets", lag_of)] == 1
    assert metrics[("artemis_ha_replication_pending_bytes", lag_of)] > 0
    assert (
        metrics[("artemis_ha_replication_lag_tickets", (("journal", "messages"), ("node", "n1")))]
        == 0
    )
    assert render_ha(dict(view)) == (
        "replication primary, live, backup 127.0.0.1:5555 in sync, lag 1"
    )

    primary.backup, primary.in_sync = None, False  # the link ended
    for journal in journals:
        journal.stop_replication()
    view = ha_side_view(primary)
    assert view["replication"] == "no backup"
    assert view["lag"] == {"messages": ZERO, "bindings": ZERO}
    assert render_ha(dict(view)) == "replication primary, live, no backup"
    metrics = samples(identity("n1", "pair", view, True))
    assert metrics[("artemis_ha_replication_in_sync", (("node", "n1"), ("role", "primary")))] == 0


def test_a_waiting_backup_shows_its_primary_and_serves_in_sync_from_its_site(
    tmp_path: Path,
) -> None:
    backup = ReplicationBackup(
        CONFIG, tmp_path, ReplicationConfig(backup=True), journal_settings(CONFIG)
    )
    site = ManagementSite(
        CONFIG, Authenticator.from_directory(False, None), Authorizer.from_config(CONFIG, None),
        ha=backup,
    )  # fmt: skip
    assert site.node_view()["ha"] == {
        "policy": "replication",
        "role": "backup",
        "state": "waiting",
        "replication": "looking for its primary",
        "primary": None,
    }
    backup.primary = "127.0.0.1:61616"
    backup.in_sync = True
    assert site.ha()["primary"] == "127.0.0.1:61616"
    assert render_ha(dict(site.ha())) == (
        "replication backup, waiting, primary 127.0.0.1:61616 in sync"
    )
    body, _ = metrics_of(site).exposition()
    scraped = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }
    assert scraped[("artemis_ha_replication_in_sync", (("node", ""), ("role", "backup")))] == 1
    assert not [name for name, _ in scraped if "replication_lag" in name]  # the primary's

    backup.live = True  # took over: it replicates nothing now
    assert render_ha(dict(site.ha())) == "replication backup, live"
    assert (
        samples(identity("n", None, site.ha(), True))[
            ("artemis_ha_replication_in_sync", (("node", "n"), ("role", "backup")))
        ]
        == 0
    )


def test_other_sides_have_no_replication_fields_or_metrics() -> None:
    view = {"policy": "shared-store", "role": "backup", "state": "live"}
    assert render_ha(view) == "shared-store backup, live"
    names = {name for name, _ in samples(identity("n", None, view, True))}  # type: ignore[arg-type]
    assert not [name for name in names if "replication" in name]
