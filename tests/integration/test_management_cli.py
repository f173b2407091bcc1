"""``artemis-py queue|address|connection`` and ``cluster status --url http://`` against real
nodes with their management API on (a bootstrap.xml beside broker.xml), security on: the
counts ``queue stat`` prints are what stomp.py clients did, operations round-trip, refused
credentials are one line and an exit code, and a second node is reached by its URL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from artemis_py.cli import main
from artemis_py.cli.api_client import EXIT_REFUSED, EXIT_USAGE

from .conftest import (
    ALL_PERMISSIONS,
    DEFAULT_ADDRESSES,
    BrokerProcess,
    artemis_py,
    unique,
    wait_for,
)

ADMIN = ("admin", "admin-secret")
APP = ("app", "app-secret")  # sends and consumes; no manage
USERS = dict([ADMIN, APP])
SECURITY_SETTINGS = (
    '<security-setting match="#">'
    + "".join(
        f'<permission type="{p}" roles="{"admins" if p == "manage" else "admins,apps"}"/>'
        for p in ALL_PERMISSIONS
    )
    + "</security-setting>"
)
# Queues of the kinds `queue show` tells (docs/queues.md): a latest-value cache, an exclusive one.
PRICES, JOBS = "cli-prices", "cli-jobs"
KIND_ADDRESSES = (
    DEFAULT_ADDRESSES
    + f'<address name="{PRICES}"><anycast><queue name="{PRICES}" last-value-key="stock" '
    'non-destructive="true"/></anycast></address>'
    + f'<address name="{JOBS}"><anycast><queue name="{JOBS}" exclusive="true"/></anycast>'
    "</address>"
)


def web_node(directory, name: str) -> BrokerProcess:
    """A started node with its management API on (a bootstrap.xml beside its broker.xml)."""
    node = BrokerProcess(
        directory,
        name=name,
        web=True,
        security=True,
        users=USERS,
        roles={"admins": [ADMIN[0]], "apps": [APP[0]]},
        security_settings=SECURITY_SETTINGS,
        addresses=KIND_ADDRESSES,
    )
    node.start()
    return node


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    started = web_node(tmp_path_factory.mktemp("web"), "web1")
    yield started
    started.close()


def cli(capsys, node: BrokerProcess, *args: str, user: tuple[str, str] | None = ADMIN):
    """``artemis-py ARGS --url NODE`` in this process: (exit code, stdout, stderr)."""
    credentials = ["--user", user[0], "--password", user[1]] if user else []
    code = main([*args, "--url", node.web_url, *credentials])
    out, err = capsys.readouterr()
    return code, out, err


def api_json(capsys, node: BrokerProcess, *args: str) -> Any:
    code, out, err = cli(capsys, node, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def stat_of(capsys, node: BrokerProcess, queue: str) -> dict[str, Any] | None:
    found = [q for q in api_json(capsys, node, "queue", "stat", "--queueName", queue)]
    return next((q for q in found if q["name"] == queue), None)


def one_line(err: str) -> str:
    assert err.count("\n") == 1, err
    assert "Traceback" not in err, err
    return err.strip()


# -- queue stat: what the clients did ---------------------------------------------------------


def test_queue_stat_counts_are_what_stomp_clients_did(node, capsys, clients):
    queue = unique("stat")
    producer = clients(node, login=APP[0], passcode=APP[1])
    consumer = clients(node, login=APP[0], passcode=APP[1])
    for n in range(5):
        producer.send(f"/queue/{queue}", f"m{n}")
    consumer.subscribe(f"/queue/{queue}", ack="client-individual")
    frames = consumer.wait_messages(5)
    for frame in frames[:2]:
        consumer.ack(frame)
    expected = {"consumers": 1, "messages": 3, "added": 5, "delivering": 3, "acknowledged": 2}
    wait_for(
        lambda: {k: (stat_of(capsys, node, queue) or {}).get(k) for k in expected} == expected,
        message=lambda: f"counts {expected}, got {stat_of(capsys, node, queue)}",
    )
    code, out, err = cli(capsys, node, "queue", "stat", "--queueName", queue)
    assert code == 0, err
    header, row = out.splitlines()
    assert header.startswith("|NAME")
    assert "|CONSUMER_COUNT |MESSAGE_COUNT |" in header
    assert [c.strip() for c in row.split("|")[1:-1]] == [
        queue, queue, "1", "3", "5", "3", "2", "0", "ANYCAST", "false",
    ]  # fmt: skip


# -- queue show: the queue's kind and what it holds -------------------------------------------


def test_queue_show_tells_the_kind_and_the_held_messages(node, capsys, clients):
    producer = clients(node, login=APP[0], passcode=APP[1])
    for n, stock in enumerate(["IBM", "AAPL", "IBM", "IBM"]):
        producer.send(f"/queue/{PRICES}", f"{stock}-{n}", stock=stock)
    producer.send(f"/queue/{PRICES}", "later", AMQ_SCHEDULED_DELAY="60000")
    code, out, err = cli(capsys, node, "queue", "show", "--name", PRICES)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"queue {PRICES}"
    # The two latest prices wait, the scheduled message is held; two prices were replaced.
    assert "  messages: 3 (delivering: 0, scheduled: 1, paged: 0)" in lines, out
    assert "  added: 5, acknowledged: 0, expired: 0, killed: 0, replaced: 2" in lines, out
    assert "  exclusive: no, non-destructive: yes, last-value key: stock" in lines, out
    code, out, err = cli(capsys, node, "queue", "show", "--name", JOBS)
    assert "  exclusive: yes, non-destructive: no, last-value key: none" in out.splitlines()
    # queue stat's SCHEDULED_COUNT column and filter see the held message too.
    held = api_json(
        capsys, node, "queue", "stat", "--field", "SCHEDULED_COUNT", "--operation",
        "GREATER_THAN", "--value", "0",
    )  # fmt: skip
    assert [q["name"] for q in held] == [PRICES]
    _, out, _ = cli(capsys, node, "queue", "stat", "--queueName", PRICES)
    assert [c.strip() for c in out.splitlines()[1].split("|")[1:-1]][3:9] == [
        "3", "5", "0", "0", "1", "ANYCAST",
    ]  # fmt: skip


def test_queue_show_counts_the_groups_with_an_owner(node, capsys, clients):
    queue = unique("grouped")
    consumer = clients(node, login=APP[0], passcode=APP[1])
    consumer.subscribe(f"/queue/{queue}", ack="client-individual")
    producer = clients(node, login=APP[0], passcode=APP[1])
    for group in ("eu", "us", "eu"):
        producer.send(f"/queue/{queue}", group, JMSXGroupID=group)
    consumer.wait_messages(3)
    code, out, err = cli(capsys, node, "queue", "show", "--name", queue)
    assert code == 0, err
    assert "  groups with an owner: 2" in out.splitlines(), out
    code, _, err = cli(capsys, node, "queue", "show", "--name", unique("none"))
    assert code == EXIT_REFUSED
    assert one_line(err).startswith("Failed to show queue ")


# -- queue create, purge, delete --------------------------------------------------------------


def test_queue_create_purge_delete_round_trip(node, capsys, clients):
    queue, address = unique("made"), unique("addr")
    code, out, err = cli(
        capsys, node, "queue", "create", "--name", queue, "--address", address, "--anycast",
        "--no-durable", "--max-consumers", "2",
    )  # fmt: skip
    assert (code, out) == (0, f"Queue {queue} created successfully.\n"), err
    made = stat_of(capsys, node, queue)
    assert made is not None
    assert (made["address"], made["routing_type"], made["durable"], made["max_consumers"]) == (
        address, "ANYCAST", False, 2,
    )  # fmt: skip
    code, _, err = cli(capsys, node, "queue", "create", "--name", queue)
    assert code == EXIT_REFUSED
    assert one_line(err).startswith(f"Failed to create queue {queue}. Reason: ")

    producer = clients(node, login=APP[0], passcode=APP[1])
    for n in range(4):
        producer.send(f"/queue/{address}", f"m{n}")  # the address routes to the new queue
    wait_for(lambda: (stat_of(capsys, node, queue) or {}).get("messages") == 4)
    code, out, err = cli(capsys, node, "queue", "purge", "--name", queue)
    assert (code, out) == (0, f"Queue {queue} purged successfully: 4 messages removed.\n"), err
    assert stat_of(capsys, node, queue)["messages"] == 0  # type: ignore[index]

    code, out, err = cli(capsys, node, "queue", "delete", "--name", queue)
    assert (code, out) == (0, f"Queue {queue} deleted successfully.\n"), err
    assert stat_of(capsys, node, queue) is None
    code, out, err = cli(capsys, node, "queue", "delete", "--name", queue)
    assert code == EXIT_REFUSED
    assert out == ""
    assert one_line(err).startswith(f"Failed to delete queue {queue}. Reason: ")


def test_queue_with_a_consumer_is_deleted_with_remove_consumers(node, capsys, clients):
    queue = unique("busy")
    consumer = clients(node, login=APP[0], passcode=APP[1])
    consumer.subscribe(f"/queue/{queue}")
    code, _, err = cli(capsys, node, "queue", "delete", "--name", queue)
    assert code == EXIT_REFUSED
    assert one_line(err).startswith(f"Failed to delete queue {queue}. Reason: ")
    assert "--removeConsumers" in err
    code, _, err = cli(capsys, node, "queue", "delete", "--name", queue, "--removeConsumers")
    assert code == 0, err
    assert stat_of(capsys, node, queue) is None


# -- address ----------------------------------------------------------------------------------


def test_address_create_show_delete(node, capsys, clients):
    address = unique("news")
    code, out, err = cli(capsys, node, "address", "create", "--name", address, "--multicast")
    assert (code, out) == (0, f"Address {address} created successfully.\n"), err
    code, out, _ = cli(capsys, node, "address", "show", "--name", address)
    assert out.splitlines()[:3] == [
        f"address {address}", "  routing types: MULTICAST", "  queues (0): none",
    ]  # fmt: skip
    listed = api_json(capsys, node, "address", "show")
    assert address in [a["name"] for a in listed]
    _, table, _ = cli(capsys, node, "address", "show")
    assert any(line.startswith(f"|{address} ") for line in table.splitlines())

    subscriber = clients(node, login=APP[0], passcode=APP[1])
    subscriber.subscribe(f"/topic/{address}")  # a subscription queue on the address
    wait_for(lambda: api_json(capsys, node, "address", "show", "--name", address)["queues"])
    code, _, err = cli(capsys, node, "address", "delete", "--name", address)
    assert code == EXIT_REFUSED
    assert one_line(err).startswith(f"Failed to delete address {address}. Reason: ")
    assert "--force" in err
    code, out, err = cli(capsys, node, "address", "delete", "--name", address, "--force")
    assert (code, out) == (0, f"Address {address} deleted successfully.\n"), err
    code, _, err = cli(capsys, node, "address", "show", "--name", address)
    assert code == EXIT_REFUSED
    assert one_line(err).startswith(f"Failed to show address {address}. Reason: ")


# -- connection list --------------------------------------------------------------------------


def test_connection_list_shows_the_stomp_connection(node, capsys, clients):
    stomp_client = clients(node, login=APP[0], passcode=APP[1])
    local_port = stomp_client.conn.transport.socket.getsockname()[1]
    connections = api_json(capsys, node, "connection", "list")
    mine = [c for c in connections if c["remote_address"].endswith(f":{local_port}")]
    assert len(mine) == 1, connections
    assert (mine[0]["protocol"], mine[0]["version"], mine[0]["user"]) == ("STOMP", "1.2", "app")
    _code, out, _ = cli(capsys, node, "connection", "list")
    row = next(line for line in out.splitlines() if f":{local_port} " in line)
    assert [c.strip() for c in row.split("|")[1:-1]][2:5] == ["STOMP", "1.2", "app"]


# -- refusals: one line, an exit code ---------------------------------------------------------


def test_wrong_password_is_one_line_and_exit_1(node):
    result = artemis_py(
        "queue", "stat", "--url", node.web_url, "--user", "admin", "--password", "wrong"
    )
    assert (result.returncode, result.stdout) == (EXIT_REFUSED, "")
    assert one_line(result.stderr) == (
        f"artemis-py: {node.web_url}: wrong user or password for 'admin' (--user, --password)"
    )


def test_user_without_manage_and_no_user(node, capsys):
    code, _, err = cli(capsys, node, "connection", "list", user=APP)
    assert code == EXIT_REFUSED
    assert one_line(err) == (
        f"artemis-py: {node.web_url}: user 'app' lacks the manage permission (a role with "
        "'manage' on the management address in security-settings)"
    )
    code, _, err = cli(capsys, node, "queue", "stat", user=None)
    assert code == EXIT_REFUSED
    assert "the management API needs a user: give --user and --password" in one_line(err)


def test_the_stomp_port_is_not_the_api(node, capsys):
    code = main(["queue", "stat", "--url", f"tcp://127.0.0.1:{node.port}"])
    assert code == EXIT_USAGE
    assert "not a STOMP or cluster URL" in one_line(capsys.readouterr().err)


# -- a second node, by its URL ----------------------------------------------------------------


def test_a_second_node_by_url(node, capsys, tmp_path):
    other = web_node(tmp_path / "other", "web2")
    try:
        queue = unique("remote")
        code, _, err = cli(capsys, other, "queue", "create", "--name", queue)
        assert code == 0, err
        assert stat_of(capsys, other, queue) is not None
        assert stat_of(capsys, node, queue) is None  # the first node has no such queue
        code, out, err = cli(capsys, other, "cluster", "status")
        assert code == 0, err
        assert out.startswith("node ")
        assert "(web2)" in out.splitlines()[0]
        assert (
            json.loads(cli(capsys, other, "cluster", "status", "--json")[1])["node"]["name"]
            == "web2"
        )
    finally:
        other.close()
