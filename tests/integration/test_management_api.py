"""The management HTTP API against a real node, with stomp.py clients doing the traffic.

One persistent node with security on serves the module (users ``admin``, who has the
``manage`` role, and ``viewer``, who has not); its web server is turned on by a bootstrap.xml
beside broker.xml. Counts the API shows are checked against what the clients did.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import (
    ALL_PERMISSIONS,
    BrokerProcess,
    Client,
    free_port,
    node_command,
    stays,
    unique,
    wait_for,
)

ADMIN = ("admin", "secret")
SETTINGS = (
    '<security-setting match="#">'
    + "".join(f'<permission type="{p}" roles="amq"/>' for p in ALL_PERMISSIONS if p != "manage")
    + '<permission type="manage" roles="admins"/>'
    + "</security-setting>"
)


@pytest.fixture(scope="module")
def web_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    node = BrokerProcess(
        tmp_path_factory.mktemp("management"),
        name="managed",
        persistence=True,
        security=True,
        users={"admin": "secret", "viewer": "secret"},
        roles={"amq": ["admin", "viewer"], "admins": ["admin"]},
        security_settings=SETTINGS,
        web=True,
    )
    node.start()
    yield node
    node.close()


@pytest.fixture
def api(web_node: BrokerProcess) -> Iterator[httpx.Client]:
    if not web_node.running:
        web_node.start()
    with httpx.Client(base_url=web_node.web_url, auth=ADMIN, timeout=10) as client:
        yield client


@pytest.fixture
def stomp(web_node: BrokerProcess, clients: Callable[..., Client]) -> Callable[[], Client]:
    return lambda: clients(web_node, login="admin", passcode="secret")


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def new_queue(api: httpx.Client, **fields: Any) -> str:
    name = unique("q")
    ok(api.post("/api/queues", json={"name": name, **fields}), 201)
    return name


def queue(api: httpx.Client, name: str) -> dict[str, Any]:
    result: dict[str, Any] = ok(api.get(f"/api/queues/{name}"))
    return result


# -- reads --------------------------------------------------------------------------------


def test_node_shows_its_acceptors_and_web_binding(api: httpx.Client, web_node: BrokerProcess):
    node = ok(api.get("/api/node"))
    assert node["name"] == "managed"
    assert node["web"] == web_node.web_url
    assert node["security_enabled"]
    assert node["persistence_enabled"]
    assert node["acceptors"][0]["listening"] == [f"127.0.0.1:{web_node.port}"]


def test_queue_counts_match_what_clients_did(api: httpx.Client, stomp: Callable[[], Client]):
    name = new_queue(api)
    producer, consumer = stomp(), stomp()
    for n in range(5):
        producer.send(f"/queue/{name}", f"m{n}")
    consumer.subscribe(f"/queue/{name}", ack="client-individual")
    frames = consumer.wait_messages(5)
    consumer.ack(frames[0])
    consumer.ack(frames[1])
    view = queue(api, name)
    assert (view["messages"], view["added"], view["acknowledged"]) == (3, 5, 2)
    assert (view["consumers"], view["delivering"], view["durable"]) == (1, 3, True)
    consumers = [c for c in ok(api.get("/api/consumers")) if c["queue"] == name]
    assert [(c["acknowledged"], c["delivering"], c["ack_mode"]) for c in consumers] == [
        (2, 3, "client-individual")
    ]
    connections = {c["id"]: c for c in ok(api.get("/api/connections"))}
    mine = connections[consumers[0]["connection_id"]]
    assert (mine["protocol"], mine["user"], mine["consumers"]) == ("STOMP", "admin", 1)
    # In: CONNECT, SUBSCRIBE, 2 ACKs; out: CONNECTED, 3 RECEIPTs, 5 MESSAGEs.
    assert (mine["frames_in"], mine["frames_out"]) == (4, 9)
    stats = ok(api.get("/api/stats"))
    assert stats["queues"][name] == {"messages": 3, "added": 5, "acknowledged": 2}
    addresses = {a["name"]: a for a in ok(api.get("/api/addresses"))}
    assert addresses[name]["queues"] == [name]
    assert ok(api.get(f"/api/addresses/{name}"))["routing_types"] == ["ANYCAST"]


def test_browse_shows_bodies_without_consuming(api: httpx.Client, stomp: Callable[[], Client]):
    name = new_queue(api)
    producer = stomp()
    for n in range(3):
        producer.send(f"/queue/{name}", f"body {n}", color="red")
    browsed = ok(api.get(f"/api/queues/{name}/messages", params={"limit": 2}))
    assert [m["body"] for m in browsed] == ["body 0", "body 1"]
    assert browsed[0]["headers"]["color"] == "red"
    assert browsed[0]["destination"] == name
    assert queue(api, name)["messages"] == 3
    consumer = stomp()
    consumer.subscribe(f"/queue/{name}")
    assert [f.body for f in consumer.wait_messages(3)] == ["body 0", "body 1", "body 2"]


# -- operations ---------------------------------------------------------------------------


def test_purge_removes_the_ready_messages(api: httpx.Client, stomp: Callable[[], Client]):
    name = new_queue(api)
    producer = stomp()
    for n in range(4):
        producer.send(f"/queue/{name}", f"m{n}")
    assert ok(api.post(f"/api/queues/{name}/purge")) == {"removed": 4, "remaining": 0}
    view = queue(api, name)
    assert (view["messages"], view["added"]) == (0, 4)
    # Killed, not acknowledged, as Artemis counts a purge.
    assert (view["killed"], view["acknowledged"], view["delivering"]) == (4, 0, 0)


def test_a_queue_name_with_slashes(api: httpx.Client, stomp: Callable[[], Client]):
    """/queue/orders/eu is the queue orders/eu: its name is a path in the API's URLs,
    written as it is or with %2F (as the CLI sends it)."""
    name = f"{unique('orders')}/eu"
    stomp().send(f"/queue/{name}", "one")
    assert queue(api, name)["messages"] == 1
    encoded = name.replace("/", "%2F")
    assert ok(api.get(f"/api/queues/{encoded}"))["name"] == name
    assert [m["body"] for m in ok(api.get(f"/api/queues/{name}/messages"))] == ["one"]
    assert ok(api.post(f"/api/queues/{encoded}/purge"))["removed"] == 1
    assert ok(api.delete(f"/api/queues/{name}")) == {"deleted": name}


def test_another_sites_page_cannot_change_anything(api: httpx.Client, stomp: Callable[[], Client]):
    """A browser sends cached Basic credentials with a form another site posts (CSRF), and
    reaches a loopback server under a rebound host name: both refused, nothing changed."""
    name = new_queue(api)
    stomp().send(f"/queue/{name}", "kept")
    base = str(api.base_url).rstrip("/")
    refused = api.post(f"/api/queues/{name}/purge", headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403
    assert "cross-origin" in refused.json()["error"]
    rebound = api.get("/api/queues", headers={"Host": "evil.example:8161"})
    assert rebound.status_code == 403
    assert "evil.example" in rebound.json()["error"]
    assert queue(api, name)["messages"] == 1
    # The console's own requests (same origin) and clients without Origin are served.
    assert ok(api.post(f"/api/queues/{name}/purge", headers={"Origin": base}))["removed"] == 1


def test_move_hands_every_message_to_the_other_queue(
    api: httpx.Client, stomp: Callable[[], Client]
):
    source, target = new_queue(api), new_queue(api)
    producer = stomp()
    for n in range(3):
        producer.send(f"/queue/{source}", f"m{n}")
    assert ok(api.post(f"/api/queues/{source}/move", json={"to": target}))["moved"] == 3
    assert queue(api, source)["messages"] == 0
    consumer = stomp()
    consumer.subscribe(f"/queue/{target}")
    frames = consumer.wait_messages(3)
    assert [f.body for f in frames] == ["m0", "m1", "m2"]
    stays(lambda: len(consumer.messages) == 3, 0.3, message="each message once")


def test_purge_and_move_take_the_held_messages_too(api: httpx.Client, stomp: Callable[[], Client]):
    # As Artemis's removeAllMessages and moveMessages: scheduled messages are the queue's.
    purged, source, target = new_queue(api), new_queue(api), new_queue(api)
    producer = stomp()
    for name in (purged, source):
        producer.send(f"/queue/{name}", "now")
        producer.send(f"/queue/{name}", "later", AMQ_SCHEDULED_DELAY="60000")
    assert ok(api.post(f"/api/queues/{purged}/purge")) == {"removed": 2, "remaining": 0}
    assert (queue(api, purged)["messages"], queue(api, purged)["scheduled"]) == (0, 0)
    assert ok(api.post(f"/api/queues/{source}/move", json={"to": target}))["moved"] == 2
    assert queue(api, source)["messages"] == 0
    view = queue(api, target)
    assert (view["messages"], view["scheduled"]) == (2, 1)  # held there until its time
    consumer = stomp()
    consumer.subscribe(f"/queue/{target}")
    consumer.wait_messages(1)
    stays(lambda: consumer.bodies() == ["now"], 0.5, message="the held copy stays held")


def test_pause_stops_delivery_and_resume_restarts_it(
    api: httpx.Client, stomp: Callable[[], Client]
):
    name = new_queue(api)
    assert ok(api.post(f"/api/queues/{name}/pause"))["paused"] is True
    consumer, producer = stomp(), stomp()
    consumer.subscribe(f"/queue/{name}")
    producer.send(f"/queue/{name}", "held")
    stays(lambda: not consumer.messages, 0.5, message="nothing delivered while paused")
    assert queue(api, name)["messages"] == 1
    assert ok(api.post(f"/api/queues/{name}/resume"))["paused"] is False
    assert [f.body for f in consumer.wait_messages(1)] == ["held"]


def test_closing_a_connection_disconnects_the_client(
    api: httpx.Client, stomp: Callable[[], Client]
):
    client = stomp()
    name = new_queue(api)
    client.subscribe(f"/queue/{name}")
    connection = next(c for c in ok(api.get("/api/consumers")) if c["queue"] == name)
    closed = connection["connection_id"]
    assert ok(api.delete(f"/api/connections/{closed}")) == {"closed": closed}
    wait_for(lambda: not client.conn.is_connected(), message="the client to be disconnected")
    wait_for(lambda: closed not in {c["id"] for c in ok(api.get("/api/connections"))})


def test_addresses_are_created_and_deleted(api: httpx.Client, stomp: Callable[[], Client]):
    name = unique("addr")
    created = ok(
        api.post("/api/addresses", json={"name": name, "routing_types": ["MULTICAST"]}), 201
    )
    assert (created["routing_types"], created["auto_created"]) == (["MULTICAST"], False)
    ok(
        api.post(
            "/api/queues",
            json={"name": f"{name}.sub", "address": name, "routing_type": "MULTICAST"},
        ),
        201,
    )
    assert api.delete(f"/api/addresses/{name}").status_code == 409  # it has a queue
    assert ok(api.delete(f"/api/addresses/{name}", params={"force": "true"})) == {"deleted": name}
    assert api.get(f"/api/addresses/{name}").status_code == 404
    assert api.get(f"/api/queues/{name}.sub").status_code == 404


def test_a_deleted_durable_queue_stays_deleted_after_a_restart(
    api: httpx.Client, web_node: BrokerProcess, stomp: Callable[[], Client]
):
    kept, deleted = new_queue(api), new_queue(api)
    stomp().send(f"/queue/{deleted}", "gone", persistent="true")
    stomp().send(f"/queue/{kept}", "kept", persistent="true")
    assert ok(api.delete(f"/api/queues/{deleted}")) == {"deleted": deleted}
    web_node.restart(crash=True)  # what was acknowledged before is durable
    assert api.get(f"/api/queues/{deleted}").status_code == 404
    assert queue(api, kept)["messages"] == 1


def test_a_created_queue_and_address_survive_a_kill_right_after_the_answer(
    api: httpx.Client, web_node: BrokerProcess
):
    # The API answers 201 once the bindings records are durable (operations.py; the
    # waiting itself is checked in tests/unit/management/test_management_operations.py).
    name, address = unique("q"), unique("addr")
    ok(api.post("/api/queues", json={"name": name, "filter": "color = 'red'"}), 201)
    ok(api.post("/api/addresses", json={"name": address, "routing_types": ["MULTICAST"]}), 201)
    web_node.restart(crash=True)
    assert queue(api, name)["filter"] == "color = 'red'"
    assert ok(api.get(f"/api/addresses/{address}"))["routing_types"] == ["MULTICAST"]


def test_a_queue_with_consumers_is_deleted_only_with_force(
    api: httpx.Client, stomp: Callable[[], Client]
):
    name = new_queue(api)
    stomp().subscribe(f"/queue/{name}")
    refused = api.delete(f"/api/queues/{name}")
    assert refused.status_code == 409
    assert "force" in refused.json()["error"]
    ok(api.delete(f"/api/queues/{name}", params={"force": "true"}))


# -- auth and bad input ---------------------------------------------------------------------


def test_auth_refused_without_credentials_or_manage(web_node: BrokerProcess):
    base = web_node.web_url
    anonymous = httpx.get(f"{base}/api/queues")
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == 'Basic realm="artemis-py"'
    assert httpx.get(f"{base}/api/queues", auth=("admin", "wrong")).status_code == 401
    assert httpx.get(f"{base}/console/", auth=("nobody", "x")).status_code == 401
    viewer = httpx.post(f"{base}/api/queues", json={"name": "x"}, auth=("viewer", "secret"))
    assert viewer.status_code == 403
    assert "manage" in viewer.json()["error"]
    # A Prometheus on the same host scrapes a loopback binding without credentials.
    assert httpx.get(f"{base}/metrics").status_code == 200


def test_the_index_lists_every_endpoint_and_each_answers(
    api: httpx.Client, web_node: BrokerProcess
):
    index = ok(api.get("/api/"))
    listed = {(e["method"], e["path"]) for e in index["endpoints"]}
    assert all(e["description"] for e in index["endpoints"]), index
    for expected in [
        ("GET", "/api/"),
        ("GET", "/api/queues"),
        ("POST", "/api/queues/{name}/purge"),
        ("DELETE", "/api/connections/{id}"),
        ("GET", "/api/stats"),
        ("GET", "/metrics"),
    ]:
        assert expected in listed, expected
    # Each listed read answers at the path it names (a name filled in where it has one).
    filled = {"{name}": "DLQ", "{id}": "x"}
    for method, path in sorted(listed):
        if method != "GET":
            continue
        for placeholder, value in filled.items():
            path = path.replace(placeholder, value)
        assert api.get(path).status_code == 200, path
    # It is behind the same authentication as the rest of /api/.
    assert httpx.get(f"{web_node.web_url}/api/").status_code == 401
    assert httpx.get(f"{web_node.web_url}/api/", auth=("viewer", "secret")).status_code == 403


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/api/queues", b"{not json", 400),
        ("POST", "/api/queues", b"[1, 2]", 400),
        ("POST", "/api/queues", b'{"name": 7}', 400),
        ("POST", "/api/queues", b'{"name": "q", "durable": "yes"}', 400),
        ("POST", "/api/queues", b'{"name": "q", "routing_type": "SIDEWAYS"}', 400),
        ("POST", "/api/queues", b'{"name": "q", "max_consumers": true}', 400),
        ("POST", "/api/queues", b'{"name": "q", "filter": "color = "}', 400),
        ("POST", "/api/queues", b'{"name": "DLQ"}', 409),
        ("GET", "/api/queues/no-such-queue", b"", 404),
        ("POST", "/api/queues/no-such-queue/purge", b"", 404),
        ("POST", "/api/queues/DLQ/move", b'{"to": "no-such-queue"}', 404),
        ("GET", "/api/queues/DLQ/messages?limit=5000", b"", 400),
        ("GET", "/api/queues/DLQ/messages?limit=many", b"", 400),
        ("DELETE", "/api/connections/nobody", b"", 404),
        ("GET", "/api/nothing-here", b"", 404),
        ("DELETE", "/api/node", b"", 405),
    ],
)
def test_bad_input_gets_a_json_error(
    api: httpx.Client, method: str, path: str, body: bytes, status: int
):
    response = api.request(method, path, content=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]
    assert "Traceback" not in response.text


def test_scale_down_without_a_cluster_is_refused(api: httpx.Client):
    refused = api.post("/api/cluster/scale-down")
    assert refused.status_code == 409
    assert "scale-down" in refused.json()["error"]
    assert ok(api.get("/api/cluster"))["cluster_connections"] == []


# -- where the server listens ---------------------------------------------------------------


def run_node(directory: Path, *args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """``artemis-py run`` that is expected to exit by itself (a start-up error)."""
    command, env = node_command()
    return subprocess.run(
        [*command, "run", *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_web_flag_overrides_bootstrap_xml(make_broker: Callable[..., BrokerProcess]):
    node = make_broker(web=True, start=False)
    node.start()
    assert httpx.get(f"{node.web_url}/api/node").status_code == 200
    node.stop()
    other = free_port()
    command, env = node_command()
    process = subprocess.Popen(
        [*command, "run", str(node.config_path), "--web", f"http://127.0.0.1:{other}"],
        cwd=node.dir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        answer = wait_for(lambda: _get(f"http://127.0.0.1:{other}/api/node"), 20)
        assert answer.json()["web"] == f"http://127.0.0.1:{other}"
        assert _get(f"{node.web_url}/api/node") is None  # bootstrap.xml's binding unused
    finally:
        process.terminate()
        process.wait(15)
        if process.stderr is not None:
            process.stderr.close()


def _get(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, timeout=2)
    except httpx.TransportError:
        return None


def test_start_up_errors_name_the_problem(tmp_path: Path):
    broker_xml = tmp_path / "broker.xml"
    node = BrokerProcess(tmp_path, persistence=False)
    node.port = free_port()
    node.write_config()
    (tmp_path / "bootstrap.xml").write_text(
        '<broker xmlns="http://activemq.apache.org/schema">\n<web>\n'
    )
    malformed = run_node(tmp_path, str(broker_xml))
    assert malformed.returncode == 2
    assert f"{tmp_path / 'bootstrap.xml'}:3: malformed XML" in malformed.stderr
    (tmp_path / "bootstrap.xml").write_text(
        '<broker xmlns="http://activemq.apache.org/schema"><web path="web">'
        '<binding uri="https://localhost:8443"/></web></broker>'
    )
    no_key_store = run_node(tmp_path, str(broker_xml))
    assert no_key_store.returncode == 2
    assert "keyStorePath" in no_key_store.stderr
    exposed = run_node(tmp_path, str(broker_xml), "--web", f"http://0.0.0.0:{free_port()}")
    assert exposed.returncode == 1
    assert "security-enabled false" in exposed.stderr
    assert "Traceback" not in exposed.stderr + no_key_store.stderr + malformed.stderr
