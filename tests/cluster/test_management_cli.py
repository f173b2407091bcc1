"""``artemis-py cluster status`` against a remote node of a running cluster, both ways: over
the cluster acceptor with the cluster credentials (``--url tcp://... --user --password``), and
over the management API with a user that may manage (``--url http://... --user
--password``). Both show the other node up and the bridge to it connected."""

from __future__ import annotations

import json

from integration.conftest import ALL_PERMISSIONS, wait_for

from .conftest import CLUSTER_NAME, cli, node_id

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
    (member,) = connection["members"]
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
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.strip() == (
        f"artemis-py: {first.web_url}: wrong user or password for 'ops' (--user, --password)"
    )
