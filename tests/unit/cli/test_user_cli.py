"""``artemis-py user``'s edits of artemis-users.properties and artemis-roles.properties."""

from __future__ import annotations

from pathlib import Path

import pytest

from artemis_py.cli import user
from artemis_py.config import passwords


def test_edits_keep_other_lines_and_follow_artemis(tmp_path: Path) -> None:
    users, roles = tmp_path / "artemis-users.properties", tmp_path / "artemis-roles.properties"
    users.write_text("# the admins\nadmin = ENC(1024:AB:CD)\n")
    roles.write_text("## roles\namq = admin\n")
    user.add(tmp_path, "alice", "pw", ["amq", "viewer"], plaintext=False)
    user.add(tmp_path, "bob", "pw2", ["viewer"], plaintext=True)
    lines = users.read_text().splitlines()
    assert lines[:2] == ["# the admins", "admin = ENC(1024:AB:CD)"]
    assert passwords.verify(lines[2].split(" = ")[1], "pw")
    assert lines[3] == "bob = pw2"
    assert roles.read_text() == "## roles\namq = admin,alice\nviewer = alice,bob\n"
    assert user.listing(tmp_path, None)[1:4] == [
        '"admin"(amq)',
        '"alice"(amq,viewer)',
        '"bob"(viewer)',
    ]

    user.reset(tmp_path, "alice", None, ["ops"], plaintext=False)  # password kept, roles replaced
    assert passwords.verify(users.read_text().splitlines()[2].split(" = ")[1], "pw")
    assert roles.read_text() == "## roles\namq = admin\nviewer = bob\nops = alice\n"
    user.remove(tmp_path, "bob")  # a role left empty goes
    assert roles.read_text() == "## roles\namq = admin\nops = alice\n"
    assert "bob" not in users.read_text()
    # No temporary file left behind.
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["artemis-roles.properties", "artemis-users.properties"]


def test_refusals(tmp_path: Path) -> None:
    user.add(tmp_path, "alice", "pw", [], plaintext=False)
    assert (tmp_path / "artemis-users.properties").stat().st_mode & 0o777 == 0o600
    with pytest.raises(user.UserError, match="already exists"):
        user.add(tmp_path, "alice", "pw", [], plaintext=False)
    with pytest.raises(user.UserError, match="does not exist"):
        user.reset(tmp_path, "carol", "pw", [], plaintext=False)
    for bad in ("a b", "a=b", "a,b", "#a", ""):
        with pytest.raises(user.UserError, match="cannot be written"):
            user.add(tmp_path, bad, "pw", [], plaintext=False)
