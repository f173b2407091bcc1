"""Shared-store HA harness: a primary and a backup, real ``artemis-py run`` processes on one
data directory, each with its own STOMP port (built on tests/integration/conftest.py).

* :class:`PairNode` is a :class:`BrokerProcess` whose broker.xml has
  ``<ha-policy><shared-store><primary/>`` or ``<backup/>`` with the given settings and
  whose data directory is the pair's. :meth:`PairNode.start_waiting` starts a backup and
  returns once it logs that it waits for its primary (it opens no port meanwhile);
  :meth:`PairNode.wait_live` waits for its STOMP acceptor after a takeover.
* The ``pair`` fixture makes them: ``pair(primary="", backup="")`` (the XML inside
  ``<primary>`` and ``<backup>``); both are stopped (cleanly) at the end of the test.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.conftest import (  # the same module object pytest loaded for tests/integration
    BrokerProcess,
    Client,
    _used_by_this_test,
    close_nodes,
    free_port,
    pytest_runtest_makereport,  # noqa: F401 - re-exported: attaches node logs to failures
    pytest_runtest_setup,  # noqa: F401 - re-exported: resets the per-test node list
    stays,
    unique,
    wait_for,
)

__all__ = [
    "REPO",
    "Client",
    "PairNode",
    "_used_by_this_test",
    "free_port",
    "port_open",
    "stays",
    "unique",
    "wait_for",
    "wait_log",
]

REPO = Path(__file__).resolve().parents[2]

# Artemis's codes this harness waits for (docs/high-availability.md).
BACKUP_WAITING = "AMQ221109"
BACKUP_LIVE = "AMQ221010"
PRIMARY_LIVE = "AMQ221007"


class PairNode(BrokerProcess):
    """One node of a shared-store pair."""

    def __init__(self, directory: Path, *, role: str, settings: str, **options: Any) -> None:
        ha = f"<ha-policy><shared-store><{role}>{settings}</{role}></shared-store></ha-policy>"
        super().__init__(directory, name=role, persistence=True, extra_core=ha, **options)
        self.role = role

    def start_waiting(self) -> PairNode:
        """Start a backup (or a primary whose backup is live) and return once it waits."""
        self.start(wait=False)
        self.starts += 1  # keep its ports on a restart
        code = BACKUP_WAITING if self.role == "backup" else "AMQ221034"
        self.wait_log(code)
        return self

    def wait_log(self, needle: str, timeout: float = 20, *, since_start: bool = True) -> None:
        wait_log(self, needle, timeout, since_start=since_start)

    def wait_live(self, timeout: float = 20) -> None:
        """Wait for the STOMP acceptor (and the web server, if any) of a node that became
        live after starting."""
        self.wait_ready(timeout)


def wait_log(
    node: BrokerProcess, needle: str, timeout: float = 20, *, since_start: bool = True
) -> None:
    """Wait until ``node`` logs ``needle``; fails at once, with its log, if it exits."""

    def logged() -> bool:
        if needle in node.log(since_start=since_start):
            return True
        assert node.running, (
            f"{node.name} exited ({node.process and node.process.returncode}):\n{node.log_tail()}"
        )
        return False

    wait_for(logged, timeout, 0.02, lambda: f"{needle} in {node.name}'s log:\n{node.log_tail()}")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Callable[..., tuple[PairNode, PairNode]]]:
    """``pair(primary=XML, backup=XML)`` -> (primary, backup), neither started."""
    nodes: list[PairNode] = []
    shared = tmp_path / "shared"

    def factory(
        primary: str = "", backup: str = "", *, web: bool = False
    ) -> tuple[PairNode, PairNode]:
        """``web``: both serve the management API (security off, on 127.0.0.1)."""
        made = (
            PairNode(
                tmp_path / "primary", role="primary", settings=primary, data_dir=shared, web=web
            ),
            PairNode(tmp_path / "backup", role="backup", settings=backup, data_dir=shared, web=web),
        )
        for node in made:
            nodes.append(node)
            _used_by_this_test.append((node, 0))
        return made

    yield factory
    errors = close_nodes(nodes)
    assert not errors, "\n".join(errors)
