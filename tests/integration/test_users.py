"""Hashed users (``artemis-py user``), ``artemis-py mask``, and a cluster whose
cluster-password is masked: real nodes, stomp.py clients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import stomp

from artemis_py.config import passwords
from cluster.conftest import ClusterNode, make_cluster
from integration.conftest import BrokerProcess, wait_for
from integration.conftest import artemis_py as cli


def login(node: BrokerProcess, user: str, password: str) -> bool | str:
    """True if stomp.py logs in; else the ERROR frame's message."""
    conn = stomp.Connection12([("127.0.0.1", node.port)], reconnect_attempts_max=1)
    errors: list[str] = []

    class Listener(stomp.ConnectionListener):
        def on_error(self, frame: Any) -> None:
            errors.append(frame.headers.get("message", ""))

    conn.set_listener("errors", Listener())
    try:
        conn.connect(user, password, wait=True)
    except stomp.exception.ConnectFailedException:
        return errors[0] if errors else "refused"
    conn.disconnect()
    return True


def test_hashed_users_log_in_and_changes_reach_a_running_node(make_broker: Any) -> None:
    node = make_broker(security=True, users={"old": "plain-pw"})
    users_file = node.dir / "artemis-users.properties"
    added = cli("user", "add", "--instance", str(node.dir), "-u", "alice", "-p", "wönder land")
    assert added.returncode == 0, added
    assert "alice added successfully." in added.stdout, added
    assert "alice = ENC(1024:" in users_file.read_text()
    assert "old = plain-pw" in users_file.read_text()  # other lines kept
    # The running node reads the changed file again.
    wait_for(lambda: login(node, "alice", "wönder land") is True, message="alice logs in")
    refused = login(node, "alice", "wonder land")
    assert isinstance(refused, str), refused
    assert "authentication failed" in refused, refused
    assert login(node, "old", "plain-pw") is True

    removed = cli("user", "rm", "--instance", str(node.dir), "--user-command-user", "alice")
    assert removed.returncode == 0, removed
    wait_for(lambda: login(node, "alice", "wönder land") is not True, message="alice refused")
    missing = cli("user", "rm", "--instance", str(node.dir), "-u", "alice")
    assert missing.returncode == 1
    assert "Failed to remove user alice. Reason: user alice does not exist" in missing.stderr


def test_mask_round_trip_through_the_cli() -> None:
    masked = cli("mask", "s3cret pässword")
    assert masked.returncode == 0, masked
    value = masked.stdout.strip()
    assert value.startswith("ENC(")
    assert passwords.reveal(value) == "s3cret pässword"
    hashed = cli("mask", "--hash", "s3cret")
    assert passwords.verify(hashed.stdout.strip(), "s3cret")
    keyed = cli("mask", "--key", "my-key-1", "s3cret")
    assert passwords.reveal(keyed.stdout.strip(), "my-key-1") == "s3cret"
    bad = cli("mask", "--key", "ab", "s3cret")
    assert bad.returncode == 1
    assert "4 to 56 bytes" in bad.stderr
    assert "Traceback" not in bad.stderr


KEY = "node-one-key"


class MaskedNode(ClusterNode):
    """A node whose broker.xml has its cluster-password masked (node 0: ``ENC()`` with the
    default key; node 1: ``<mask-password>true</mask-password>``, no ``ENC()``, and its own
    key in ``<password-codec>``); ``self.password`` stays plain for the status API."""

    def broker_xml(self) -> str:
        text = super().broker_xml()
        plain = f"<cluster-password>{self.password}</cluster-password>"
        assert plain in text
        assert self.password is not None
        if self.index == 0:
            masked = f"<cluster-password>{passwords.mask(self.password)}</cluster-password>"
        else:
            codec = f"{passwords.DEFAULT_CODEC_CLASS};key={KEY}"
            bare = passwords.mask_bare(self.password, KEY)
            masked = (
                f"<mask-password>true</mask-password><password-codec>{codec}</password-codec>"
                f"<cluster-password>{bare}</cluster-password>"
            )
        return text.replace(plain, masked)


def test_a_masked_cluster_password_forms_a_cluster(tmp_path: Path) -> None:
    nodes = make_cluster(tmp_path, 2, node_class=MaskedNode)
    try:
        nodes.start()
        nodes.wait_formed()  # both nodes unmasked the same password
    finally:
        errors = nodes.close()
    assert not errors, errors
    assert "<cluster-password>ENC(" in nodes[0].config_path.read_text()
