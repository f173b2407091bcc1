"""``artemis-py queue|address|connection`` and ``cluster status --url http://`` against a
fake management API: a tiny http.server in a thread that answers as docs/management.md's
API does (its JSON, its errors), so the text, the JSON, the requests sent and every error's
one line and exit code are checked without a node. tests/integration/test_management_cli.py
runs the same commands against a real node."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from artemis_py.cli import main
from artemis_py.cli.api_client import (
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ApiError,
    ManagementClient,
)

USERS = {"admin": "secret", "viewer": "viewer"}  # viewer: no manage permission


def _queue(name: str, **counts: Any) -> dict[str, Any]:
    queue = {
        "name": name, "address": name, "routing_type": "ANYCAST", "durable": True,
        "filter": None, "consumers": 0, "messages": 0, "delivering": 0, "added": 0,
        "acknowledged": 0, "expired": 0, "killed": 0, "paused": False, "max_consumers": -1,
        "auto_created": False, "temporary": False, "paged": 0, "internal": False,
        "scheduled": 0, "replaced": 0, "exclusive": False, "groups": 0,
        "last_value_key": None, "non_destructive": False,
    }  # fmt: skip
    queue.update(counts)
    return queue


class FakeApi:
    """The API's state and the requests it saw: (method, path, query, body)."""

    def __init__(self) -> None:
        self.queues = {
            "orders": _queue("orders", consumers=2, messages=7, delivering=3, added=12,
                             acknowledged=5, scheduled=2),
            "DLQ": _queue("DLQ"),
            "events.audit": _queue("events.audit", address="events", routing_type="MULTICAST",
                                   messages=1, added=1),
        }  # fmt: skip
        self.addresses = {
            "orders": {"name": "orders", "routing_types": ["ANYCAST"], "queues": ["orders"],
                       "size_bytes": 2048, "paging": False, "auto_created": False},
            "events": {"name": "events", "routing_types": ["MULTICAST"],
                       "queues": ["events.audit"], "size_bytes": 0, "paging": True,
                       "auto_created": True},
        }  # fmt: skip
        self.connections = [
            {"id": "3f2a", "remote_address": "127.0.0.1:50312", "protocol": "STOMP",
             "version": "1.2", "user": "admin", "created": 1700000000, "sessions": 1,
             "consumers": 1, "frames_in": 14, "frames_out": 9},
        ]  # fmt: skip
        self.cluster = {
            "node": {"node_id": "aaaa-1111", "name": "node1"},
            "cluster_connections": [
                {"name": "symmetric", "address": "", "message_load_balancing": "ON_DEMAND",
                 "max_hops": 1, "members": [
                     {"node_id": "aaaa-1111", "name": "node1", "connector":
                      "tcp://10.0.0.1:61616", "self": True, "state": "up", "bridge": None},
                     {"node_id": "bbbb-2222", "self": False, "name": "tcp://10.0.0.2:61616",
                      "connector": "tcp://10.0.0.2:61616",
                      "state": "up", "bridge": {"connected": True, "store_and_forward_depth": 4,
                                                "in_flight": 1, "forwarded": 30,
                                                "redistributed": 2}}]},
            ],
        }  # fmt: skip
        self.seen: list[tuple[str, str, dict[str, list[str]], Any]] = []

    def answer(self, method: str, path: str, query: dict[str, list[str]], body: Any):
        """(status, JSON) for one authorised request."""
        parts = [unquote(p) for p in path.split("/")[2:]]  # after /api/
        if method == "GET" and parts == ["queues"]:
            return 200, list(self.queues.values())
        if method == "GET" and parts == ["addresses"]:
            return 200, list(self.addresses.values())
        if method == "GET" and parts[:1] == ["addresses"] and len(parts) == 2:
            if parts[1] not in self.addresses:
                return 404, {"error": f"no address named {parts[1]!r}"}
            return 200, self.addresses[parts[1]]
        if method == "GET" and parts == ["connections"]:
            return 200, self.connections
        if method == "GET" and parts == ["cluster"]:
            return 200, self.cluster
        if method == "POST" and parts == ["queues"]:
            if body["name"] in self.queues:
                return 409, {"error": f"queue {body['name']!r} already exists"}
            self.queues[body["name"]] = _queue(**body)
            return 201, self.queues[body["name"]]
        if method == "POST" and parts == ["addresses"]:
            return 201, {**body, "queues": [], "size_bytes": 0, "paging": False,
                         "auto_created": False}  # fmt: skip
        if parts[:1] == ["queues"] and len(parts) >= 2 and parts[1] not in self.queues:
            return 404, {"error": f"no queue named {parts[1]!r}"}
        if method == "GET" and parts[:1] == ["queues"] and len(parts) == 2:
            return 200, self.queues[parts[1]]
        if method == "DELETE" and parts[:1] == ["queues"]:
            if self.queues[parts[1]]["consumers"] and query.get("force") != ["true"]:
                return 409, {"error": f"queue {parts[1]!r} has consumers: use ?force=true"}
            del self.queues[parts[1]]
            return 200, {"deleted": parts[1]}
        if method == "POST" and parts[:1] == ["queues"] and parts[2:] == ["purge"]:
            removed, self.queues[parts[1]]["messages"] = self.queues[parts[1]]["messages"], 0
            return 200, {"removed": removed}
        if method == "DELETE" and parts[:1] == ["addresses"]:
            return 200, {"deleted": parts[1]}
        return 404, {"error": f"no such endpoint {method} {path}"}


class _Handler(BaseHTTPRequestHandler):
    api: FakeApi

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: bytes, content_type: str, extra=()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for key, value in extra:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _handle(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if url.path.startswith("/plain/"):  # not an artemis-py API: a page, no JSON error
            self._send(404, b"<h1>Not Found</h1>", "text/html")
            return
        if url.path == "/broken/api/queues":
            self._send(500, b"Internal Server Error", "text/plain")
            return
        user = _basic_user(self.headers.get("Authorization"))
        if user is None:
            self._send(401, b'{"error": "authentication required"}', "application/json",
                       [("WWW-Authenticate", 'Basic realm="artemis-py"')])  # fmt: skip
            return
        if user == "viewer":
            self._send(403, b'{"error": "forbidden"}', "application/json")
            return
        body = json.loads(raw) if raw else None
        query = parse_qs(url.query)
        self.api.seen.append((self.command, url.path, query, body))
        status, answer = self.api.answer(self.command, url.path, query, body)
        self._send(status, json.dumps(answer).encode(), "application/json")

    do_GET = do_POST = do_DELETE = _handle


def _basic_user(header: str | None) -> str | None:
    if not header or not header.startswith("Basic "):
        return None
    user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    return user if USERS.get(user) == password else None


@pytest.fixture
def api() -> Iterator[tuple[FakeApi, str]]:
    state = FakeApi()
    handler = type("Handler", (_Handler,), {"api": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run(capsys, url: str, *args: str, user: str = "admin") -> tuple[int, str, str]:
    credentials = ["--user", user, "--password", USERS.get(user, "wrong")] if user else []
    code = main([*args, "--url", url, *credentials])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    assert err.count("\n") == 1, err
    assert "Traceback" not in err, err
    return err.strip()


# -- queue stat -------------------------------------------------------------------------------


def test_queue_stat_prints_artemis_table_sorted_by_name(api, capsys):
    _, url = api
    code, out, err = run(capsys, url, "queue", "stat")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split("|")[1:-1] == [
        "NAME         ", "ADDRESS ", "CONSUMER_COUNT ", "MESSAGE_COUNT ", "MESSAGES_ADDED ",
        "DELIVERING_COUNT ", "MESSAGES_ACKED ", "SCHEDULED_COUNT ", "ROUTING_TYPE ", "INTERNAL ",
    ]  # fmt: skip
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines[1:]]
    assert rows == [
        ["DLQ", "DLQ", "0", "0", "0", "0", "0", "0", "ANYCAST", "false"],
        ["events.audit", "events", "0", "1", "1", "0", "0", "0", "MULTICAST", "false"],
        ["orders", "orders", "2", "7", "12", "3", "5", "2", "ANYCAST", "false"],
    ]


def test_queue_stat_json_is_the_api_objects(api, capsys):
    state, url = api
    code, out, _ = run(capsys, url, "queue", "stat", "--json", "--queueName", "ord")
    assert code == 0
    assert json.loads(out) == [state.queues["orders"]]


@pytest.mark.parametrize(
    ("options", "names"),
    [
        (["--queueName", "e"], ["events.audit", "orders"]),
        (["--field", "MESSAGE_COUNT", "--operation", "GREATER_THAN", "--value", "0"],
         ["events.audit", "orders"]),
        (["--field", "consumerCount", "--operation", "EQUALS", "--value", "2"], ["orders"]),
        (["--field", "ADDRESS", "--operation", "NOT_CONTAINS", "--value", "e"], ["DLQ"]),
        (["--field", "messages_acked", "--operation", "LESS_THAN", "--value", "1"],
         ["DLQ", "events.audit"]),
        (["--field", "SCHEDULED_COUNT", "--operation", "GREATER_THAN", "--value", "0"],
         ["orders"]),
        (["--field", "scheduledCount", "--operation", "EQUALS", "--value", "0"],
         ["DLQ", "events.audit"]),
    ],
    ids=["queueName", "greater", "artemis-json-name", "not-contains", "less", "scheduled",
         "scheduled-json-name"],
)  # fmt: skip
def test_queue_stat_filters_as_artemis(api, capsys, options, names):
    _, url = api
    code, out, err = run(capsys, url, "queue", "stat", "--json", *options)
    assert code == 0, err
    assert [q["name"] for q in json.loads(out)] == names


def test_queue_stat_max_rows_warns_of_the_rest(api, capsys):
    _, url = api
    code, out, _ = run(capsys, url, "queue", "stat", "--maxRows", "2")
    assert code == 0
    assert len(out.splitlines()) == 1 + 2 + 1
    assert "the displayed queues are 2/3, set --maxRows" in out


def test_queue_stat_cuts_long_values_to_the_column_size(api, capsys):
    state, url = api
    state.queues["x" * 40] = _queue("x" * 40)
    _, out, _ = run(capsys, url, "queue", "stat", "--queueName", "xxx")
    assert "|" + "x" * 22 + "... |" in out
    _, out, _ = run(capsys, url, "queue", "stat", "--queueName", "xxx", "--maxColumnSize", "-1")
    assert "|" + "x" * 40 + " |" in out


def test_queue_stat_tells_apart_names_that_share_a_long_prefix(api, capsys):
    # A three-node cluster's two store-and-forward queues: cut at the end (as Artemis
    # cuts), both would read $.artemis.internal.sf....
    state, url = api
    sf = "$.artemis.internal.sf.my-cluster."
    names = [
        sf + "8676e472-8f06-4f9a-b4ff-c226a83eee2f",
        sf + "89eeca6f-1d10-437f-9c9c-05f1bae9bba1",
    ]
    for name in names:
        state.queues[name] = _queue(name)
    _, out, _ = run(capsys, url, "queue", "stat", "--queueName", sf)
    shown = [line.split("|")[1].strip() for line in out.splitlines()[1:]]
    assert len(shown) == 2, out
    assert len(set(shown)) == 2, out
    assert all(len(cell) <= 25 for cell in shown), out
    assert shown[0].endswith("c226a83eee2f"[-11:])
    assert shown[1].endswith("05f1bae9bba1"[-11:])
    # Names still alike after a cut in the middle are shown whole.
    state.queues.clear()
    alike = [sf + "x" * 40 + "1", sf + "x" * 40 + "2" + "x" * 12 + "1"]
    for name in alike:
        state.queues[name] = _queue(name)
    _, out, _ = run(capsys, url, "queue", "stat", "--queueName", sf)
    assert all(name in out for name in alike), out


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (["--field", "NAME", "--queueName", "a", "--operation", "EQUALS", "--value", "a"],
         "cannot be given together"),
        (["--field", "COLOUR", "--operation", "EQUALS", "--value", "a"], "--field must be one"),
        (["--field", "NAME", "--value", "a"], "--operation must be one of"),
        (["--field", "NAME", "--operation", "EQUALS"], "--value is needed"),
        (["--field", "NAME", "--operation", "GREATER_THAN", "--value", "a"], "compares counts"),
        (["--field", "MESSAGE_COUNT", "--operation", "EQUALS", "--value", "x"], "is a count"),
        (["--value", "3"], "need --field"),
    ],
    ids=["both", "unknown-field", "no-operation", "no-value", "greater-on-text", "nan",
         "value-alone"],
)  # fmt: skip
def test_queue_stat_bad_filter_is_a_usage_error(api, capsys, options, needle):
    _, url = api
    code, out, err = run(capsys, url, "queue", "stat", *options)
    assert code == EXIT_USAGE
    assert out == ""
    assert needle in one_line(err)


# -- queue show -------------------------------------------------------------------------------


def test_queue_show_prints_the_counts_and_the_kind(api, capsys):
    state, url = api
    state.queues["prices"] = _queue(
        "prices", consumers=1, max_consumers=4, messages=5, delivering=1, scheduled=2,
        added=9, acknowledged=1, replaced=3, groups=2, last_value_key="stock",
        non_destructive=True, filter="region = 'EU'",
    )  # fmt: skip
    code, out, err = run(capsys, url, "queue", "show", "--name", "prices")
    assert code == 0, err
    assert out.splitlines() == [
        "queue prices",
        "  address: prices, routing type: ANYCAST, durable: yes",
        "  filter: region = 'EU'",
        "  consumers: 1 (at most: 4), paused: no",
        "  messages: 5 (delivering: 1, scheduled: 2, paged: 0)",
        "  added: 9, acknowledged: 1, expired: 0, killed: 0, replaced: 3",
        "  exclusive: no, non-destructive: yes, last-value key: stock",
        "  groups with an owner: 2",
        "  auto-created: no, temporary: no, internal: no",
    ]


def test_queue_show_of_a_plain_queue_and_as_json(api, capsys):
    state, url = api
    state.queues["jobs"] = _queue("jobs", exclusive=True)
    _, out, _ = run(capsys, url, "queue", "show", "--name", "jobs")
    assert "  consumers: 0 (at most: no limit), paused: no" in out.splitlines()
    assert "  exclusive: yes, non-destructive: no, last-value key: none" in out.splitlines()
    code, out, _ = run(capsys, url, "queue", "show", "--name", "jobs", "--json")
    assert code == 0
    assert json.loads(out) == state.queues["jobs"]


def test_queue_show_unknown_queue_is_one_line(api, capsys):
    _, url = api
    code, out, err = run(capsys, url, "queue", "show", "--name", "nope")
    assert (code, out) == (EXIT_REFUSED, "")
    assert one_line(err) == "Failed to show queue nope. Reason: no queue named 'nope'"


# -- queue create, delete, purge --------------------------------------------------------------


def test_queue_create_sends_artemis_defaults(api, capsys):
    state, url = api
    code, out, err = run(capsys, url, "queue", "create", "--name", "jobs")
    assert code == 0, err
    assert out == "Queue jobs created successfully.\n"
    assert state.seen[-1] == ("POST", "/api/queues", {}, {
        "name": "jobs", "address": "jobs", "routing_type": "ANYCAST", "durable": True,
        "filter": None, "max_consumers": -1,
    })  # fmt: skip


def test_queue_create_with_every_option(api, capsys):
    state, url = api
    code, out, err = run(
        capsys, url, "queue", "create", "--name", "audit", "--address", "events",
        "--multicast", "--no-durable", "--filter", "priority > 4", "--max-consumers", "3",
        "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["name"] == "audit"  # the API's object, no text around it
    assert state.seen[-1][3] == {
        "name": "audit", "address": "events", "routing_type": "MULTICAST", "durable": False,
        "filter": "priority > 4", "max_consumers": 3,
    }  # fmt: skip


def test_queue_create_refused_says_why_in_artemis_words(api, capsys):
    _, url = api
    code, out, err = run(capsys, url, "queue", "create", "--name", "orders")
    assert code == EXIT_REFUSED
    assert out == ""
    assert one_line(err) == "Failed to create queue orders. Reason: queue 'orders' already exists"


def test_queue_create_anycast_and_multicast_exclude_each_other(api, capsys):
    _, url = api
    with pytest.raises(SystemExit) as exit:
        main(["queue", "create", "--name", "q", "--anycast", "--multicast", "--url", url])
    assert exit.value.code == EXIT_USAGE


def test_queue_delete_unknown_queue_is_a_404_line(api, capsys):
    _, url = api
    code, _, err = run(capsys, url, "queue", "delete", "--name", "nope")
    assert code == EXIT_REFUSED
    assert one_line(err) == "Failed to delete queue nope. Reason: no queue named 'nope'"


def test_queue_delete_with_consumers_needs_remove_consumers(api, capsys):
    state, url = api
    code, _, err = run(capsys, url, "queue", "delete", "--name", "orders")
    assert code == EXIT_REFUSED
    assert one_line(err).endswith("has consumers: use --removeConsumers")  # not ?force=true
    code, out, err = run(capsys, url, "queue", "delete", "--name", "orders", "--removeConsumers")
    assert code == 0, err
    assert out == "Queue orders deleted successfully.\n"
    assert state.seen[-1][2] == {"force": ["true"]}
    assert "orders" not in state.queues


def test_queue_names_are_quoted_in_the_path(api, capsys):
    state, url = api
    state.queues["a/b#c d"] = _queue("a/b#c d", messages=2)
    code, out, err = run(capsys, url, "queue", "purge", "--name", "a/b#c d")
    assert code == 0, err
    assert state.seen[-1][1] == "/api/queues/a%2Fb%23c%20d/purge"
    assert out == "Queue a/b#c d purged successfully: 2 messages removed.\n"


def test_queue_purge_json(api, capsys):
    _, url = api
    code, out, _ = run(capsys, url, "queue", "purge", "--name", "orders", "--json")
    assert code == 0
    assert json.loads(out) == {"removed": 7}


# -- address ----------------------------------------------------------------------------------


def test_address_show_lists_every_address(api, capsys):
    _, url = api
    code, out, err = run(capsys, url, "address", "show")
    assert code == 0, err
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines()]
    assert rows == [
        ["NAME", "ROUTING_TYPES", "QUEUES", "SIZE_BYTES", "PAGING"],
        ["events", "MULTICAST", "events.audit", "0", "true"],
        ["orders", "ANYCAST", "orders", "2048", "false"],
    ]


def test_address_show_one(api, capsys):
    _, url = api
    code, out, _ = run(capsys, url, "address", "show", "--name", "events")
    assert code == 0
    assert out.splitlines() == [
        "address events",
        "  routing types: MULTICAST",
        "  queues (1): events.audit",
        "  size: 0 bytes, paging: yes",
        "  auto-created: yes",
    ]
    code, _, err = run(capsys, url, "address", "show", "--name", "nope")
    assert code == EXIT_REFUSED
    assert one_line(err) == "Failed to show address nope. Reason: no address named 'nope'"


@pytest.mark.parametrize(
    ("options", "types"),
    [([], ["ANYCAST"]), (["--multicast"], ["MULTICAST"]),
     (["--anycast", "--multicast"], ["ANYCAST", "MULTICAST"])],
)  # fmt: skip
def test_address_create_routing_types(api, capsys, options, types):
    state, url = api
    code, out, err = run(capsys, url, "address", "create", "--name", "news", *options)
    assert code == 0, err
    assert out == "Address news created successfully.\n"
    assert state.seen[-1][3] == {"name": "news", "routing_types": types}


def test_address_delete_force_is_sent(api, capsys):
    state, url = api
    code, out, _ = run(capsys, url, "address", "delete", "--name", "events", "--force")
    assert code == 0
    assert out == "Address events deleted successfully.\n"
    assert state.seen[-1][:3] == ("DELETE", "/api/addresses/events", {"force": ["true"]})
    run(capsys, url, "address", "delete", "--name", "events")
    assert state.seen[-1][2] == {}


# -- connection -------------------------------------------------------------------------------


def test_connection_list(api, capsys):
    state, url = api
    code, out, err = run(capsys, url, "connection", "list")
    assert code == 0, err
    header, row = ([c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines())
    assert header == ["ID", "REMOTE_ADDRESS", "PROTOCOL", "VERSION", "USER", "CREATED",
                      "SESSIONS", "CONSUMERS", "FRAMES_IN", "FRAMES_OUT"]  # fmt: skip
    assert row[:5] == ["3f2a", "127.0.0.1:50312", "STOMP", "1.2", "admin"]
    assert row[5].startswith("2023-11-1")
    assert row[6:] == ["1", "1", "14", "9"]
    state.connections = []
    assert run(capsys, url, "connection", "list")[1] == "no connections\n"


# -- cluster status over the API --------------------------------------------------------------


def test_cluster_status_over_the_management_api(api, capsys):
    _, url = api
    code, out, err = run(capsys, url, "cluster", "status")
    assert code == 0, err
    assert out.splitlines() == [
        "node aaaa-1111 (node1)",
        "",
        "cluster connection symmetric on address '': ON_DEMAND, max-hops 1",
        "members (2):",
        "  aaaa-1111  tcp://10.0.0.1:61616 (node1)  this node",
        "  bbbb-2222  tcp://10.0.0.2:61616  up, bridge connected  waiting 4  in flight 1"
        "  forwarded 30  redistributed 2",
    ]
    code, out, _ = run(capsys, url, "cluster", "status", "--json")
    assert json.loads(out)["node"]["name"] == "node1"
    code, _, err = run(capsys, url, "cluster", "status", user="viewer")
    assert code == EXIT_REFUSED
    assert "lacks the manage permission" in one_line(err)


# -- errors: one line, an exit code -----------------------------------------------------------


def test_wrong_password(api, capsys):
    _, url = api
    code, out, err = run(capsys, url, "queue", "stat", user="intruder")
    assert code == EXIT_REFUSED
    assert out == ""
    assert (
        one_line(err)
        == f"artemis-py: {url}: wrong user or password for 'intruder' (--user, --password)"
    )


def test_no_credentials(api, capsys):
    _, url = api
    code, _, err = run(capsys, url, "address", "show", user="")
    assert code == EXIT_REFUSED
    assert "needs a user: give --user and --password" in one_line(err)


def test_user_without_manage(api, capsys):
    _, url = api
    code, _, err = run(capsys, url, "queue", "purge", "--name", "orders", user="viewer")
    assert code == EXIT_REFUSED
    assert "user 'viewer' lacks the manage permission" in one_line(err)


def test_node_not_reachable(capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    code, out, err = run(capsys, url, "connection", "list")
    assert code == EXIT_UNREACHABLE
    assert out == ""
    assert one_line(err).startswith(f"artemis-py: cannot reach {url}: connection refused")


def test_something_else_than_the_api(api, capsys):
    _, url = api
    code, _, err = run(capsys, url + "/plain", "queue", "stat")
    assert code == EXIT_REFUSED
    assert "answered 404 Not Found without an API error" in one_line(err)
    code, _, err = run(capsys, url + "/broken", "queue", "stat")
    assert code == EXIT_REFUSED
    assert "answered 500" in one_line(err)


@pytest.mark.parametrize("url", ["tcp://localhost:61616", "localhost:8161", "http://h:99999"])
def test_bad_url_is_a_usage_error(capsys, url):
    code, _, err = run(capsys, url, "queue", "stat")
    assert code == EXIT_USAGE
    assert one_line(err).startswith(f"artemis-py: --url {url!r}")


def test_a_node_that_does_not_answer_times_out():
    with socket.socket() as listener:  # accepts (the backlog does), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = ManagementClient(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.2)
        with pytest.raises(ApiError) as error:
            client.get("/api/queues")
    assert error.value.exit_code == EXIT_UNREACHABLE
    assert str(error.value).endswith("no answer within 0.2 s")


def test_instance_gives_the_url_of_its_bootstrap_xml(api, capsys, caplog, tmp_path):
    _, url = api
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "broker.xml").write_text("<configuration/>")
    (etc / "bootstrap.xml").write_text(
        '<broker xmlns="http://activemq.apache.org/schema"><web path="web">'
        f'<binding name="artemis" uri="{url}"><app name="console" url="console" '
        'war="console.war"/></binding></web></broker>'
    )
    args = ["queue", "stat", "--json", "--instance", str(tmp_path), "--user", "admin"]
    code = main([*args, "--password", "secret"])
    out, err = capsys.readouterr()
    assert code == 0
    assert err == ""
    assert caplog.records == []  # no warning about the WAR files the node ignores
    assert len(json.loads(out)) == 3
    (etc / "bootstrap.xml").unlink()
    assert main(args) == EXIT_USAGE
    assert "bootstrap.xml (give --url)" in one_line(capsys.readouterr().err)
