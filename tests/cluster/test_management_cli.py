"""``artemis-py cluster status`` against a remote node of a running cluster, both ways: over
the cluster acceptor with the cluster credentials (``--url tcp://... --user --password``), and
over the management API with a user that may manage (``--url http://... --user
--password``). Both show the other node up and the bridge to it connected."""

from __future__ import annotations

import json
import re

import pytest

from artemis_py.cli import main
from integration.conftest import ALL_PERMISSIONS, wait_for

from .conftest import CLUSTER_NAME, CLUSTER_PASSWORD, cli, node_id

ADMIN = ("ops", "ops-secret")
SECURITY_SETTINGS = (
    '<security-setting match="#">'
    + "".join(f'<permission type="{p}" roles="ops"/>' for p in ALL_PERMISSIONS)
    + "</security-setting>"
)


def test_cluster_status_of_a_remote_node_with_credentials(cluster):
    nodes = cluster(
        2,
        web=True,
        security=True,
        users=dict([ADMIN]),
        roles={"ops": [ADMIN[0]]},
        security_settings=SECURITY_SETTINGS,
    )
    first, second = nodes
    credentials = ["--user", ADMIN[0], "--password", ADMIN[1]]

    def answered() -> dict | None:
        # The web server may start a moment after the node's acceptors.
        over_api = cli("cluster", "status", "--url", first.web_url, *credentials, "--json")
        return json.loads(over_api.stdout) if over_api.returncode == 0 else None

    view = wait_for(answered, message="cluster status over the management API")
    assert view["node"]["node_id"] == node_id(first)
    (connection,) = view["cluster_connections"]
    assert connection["name"] == CLUSTER_NAME
    me, member = connection["members"]
    assert (me["node_id"], me["self"], me["bridge"]) == (node_id(first), True, None)
    assert (member["node_id"], member["name"], member["state"]) == (node_id(second), "node1", "up")
    assert member["bridge"]["connected"] is True
    text = cli("cluster", "status", "--url", first.web_url, *credentials)
    assert text.returncode == 0, text.stderr
    member_line = f"  {node_id(second)}  {second.connector} (node1)  up, bridge connected  "
    assert member_line in text.stdout

    over_link = cli(
        "cluster", "status", "--url", first.connector, "--cluster", CLUSTER_NAME,
        "--user", first.user, "--password", first.password or "",
    )  # fmt: skip
    assert over_link.returncode == 0, over_link.stderr
    assert node_id(second) in over_link.stdout

    refused = cli(
        "cluster", "status", "--url", first.web_url, "--user", ADMIN[0], "--password", "x"
    )
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr.strip() == (
        f"artemis-py: {first.web_url}: wrong user or password for 'ops' (--user, --password)"
    )


def members_of(text: str) -> tuple[int, list[str]]:
    """The count a ``cluster status`` text gives its members, and their node IDs."""
    (count,) = re.findall(r"^members \((\d+)\):$", text, re.MULTILINE)
    ids = re.findall(r"^  ([0-9a-f-]{36})  ", text, re.MULTILINE)
    return int(count), ids


VARIABLE = "ARTEMIS_TEST_CLUSTER_PASSWORD"


def test_both_ways_count_this_node_among_the_members_even_from_a_fresh_terminal(
    cluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # As the samples: the broker.xml takes its cluster-password from a variable the nodes'
    # terminals export.
    monkeypatch.setenv(VARIABLE, CLUSTER_PASSWORD)
    nodes = cluster(3, web=True, start=False, password=f"${{{VARIABLE}}}")
    nodes.start()
    for node in nodes:
        node.password = CLUSTER_PASSWORD  # what the tests' helpers dial with
    nodes.wait_formed()
    ids = sorted(node_id(n) for n in nodes)
    first = nodes[0]

    over_file = cli("cluster", "status", str(first.config_path))
    assert over_file.returncode == 0, over_file.stderr
    over_api = wait_for(
        lambda: (done := cli("cluster", "status", "--url", first.web_url)).returncode == 0 and done,
        message="cluster status over the management API",
    )
    for text in (over_file.stdout, over_api.stdout):
        count, listed = members_of(text)
        assert (count, sorted(listed)) == (3, ids), text
        assert f"  {node_id(first)}  {first.connector}" in text, text
        assert "this node" in text, text
    (connection,) = json.loads(cli("cluster", "status", "--url", first.web_url, "--json").stdout)[
        "cluster_connections"
    ]
    assert [m["self"] for m in connection["members"]].count(True) == 1
    # queue stat tells the two store-and-forward queues apart within its 25 columns.
    stat = cli("queue", "stat", "--url", first.web_url, "--queueName", "$.artemis.internal.sf")
    assert stat.returncode == 0, stat.stderr
    names = [line.split("|")[1].strip() for line in stat.stdout.splitlines()[1:]]
    assert len(names) == len(set(names)) == 2, stat.stdout
    assert all(len(n) <= 25 for n in names), stat.stdout

    # A fresh terminal: the variable is not set there.
    monkeypatch.delenv(VARIABLE)
    code = main(["cluster", "status", str(first.config_path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert f"takes its <cluster-password> from {VARIABLE}, which is not set here" in err
    given = cli("cluster", "status", str(first.config_path), "--password", CLUSTER_PASSWORD)
    assert given.returncode == 0, given.stderr
    assert members_of(given.stdout)[0] == 3
