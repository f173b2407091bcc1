"""The ``artemis-py`` command line as an operator uses it: ``run`` and ``create``, the
``producer`` and ``consumer`` against a real node (counts, Ctrl-C, refused logins), and
``cluster status`` against a node of the sample symmetric cluster."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio

from artemis_py.cli import build_parser
from artemis_py.client.testing import ScriptedStompServer
from artemis_py.cluster.status import TIMEOUT

from .conftest import (
    ROOT,
    BrokerProcess,
    Client,
    Running,
    create_instance,
    free_port,
    node_command,
    unique,
    wait_for,
)


def artemis_py(*args: str, cwd=None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run the installed console script (the module's ``main`` if it is not installed)."""
    script = shutil.which("artemis-py")
    command, env = node_command()
    if script is not None:
        command = [script]
    return subprocess.run(
        [*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


GOOD_HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <persistence-enabled>false</persistence-enabled>
"""


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        ("    <persistence-enabled>maybe</persistence-enabled>\n", 4, "persistence-enabled"),
        ("    <journal-file-size>ten megs</journal-file-size>\n", 4, "journal-file-size"),
        (
            '    <acceptors>\n      <acceptor name="a">tcp://127.0.0.1:99999</acceptor>\n'
            "    </acceptors>\n",
            5,
            "acceptor",
        ),
        ("    <name>unclosed\n", 5, "malformed"),
    ],
    ids=["bad-bool", "bad-size", "bad-port", "malformed-xml"],
)
def test_run_with_a_broken_config_fails_with_file_and_line(tmp_path, body, line, needle):
    path = tmp_path / "broker.xml"
    text = GOOD_HEAD.replace("    <persistence-enabled>false</persistence-enabled>\n", "") + body
    if needle != "malformed":
        text += "  </core>\n</configuration>\n"
    path.write_text(text)
    result = artemis_py("run", str(path), cwd=tmp_path)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    assert f"broker.xml:{line}" in result.stderr, result.stderr
    assert needle in result.stderr, result.stderr
    assert not (tmp_path / "data").exists(), "a refused configuration must not create data"


def test_run_reports_every_problem_at_once(tmp_path):
    path = tmp_path / "broker.xml"
    path.write_text(
        GOOD_HEAD
        + "    <journal-min-files>lots</journal-min-files>\n"
        + "    <security-enabled>perhaps</security-enabled>\n"
        + "  </core>\n</configuration>\n"
    )
    result = artemis_py("run", str(path), cwd=tmp_path)
    assert result.returncode != 0
    assert "broker.xml:5" in result.stderr, result.stderr
    assert "broker.xml:6" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_run_with_a_missing_config_file(tmp_path):
    result = artemis_py("run", str(tmp_path / "nope.xml"), cwd=tmp_path)
    assert result.returncode != 0
    assert "nope.xml" in result.stderr
    assert "Traceback" not in result.stderr


def test_run_refuses_an_unknown_log_level(tmp_path):
    # The file does not exist, so a run that accepted the level would stop there instead
    # (and never start a node).
    result = artemis_py("run", "--log-level", "LOUD", str(tmp_path / "nope.xml"), cwd=tmp_path)
    assert result.returncode == 2
    assert "usage:" in result.stderr, result.stderr
    assert "--log-level" in result.stderr, result.stderr
    assert "'LOUD'" in result.stderr, result.stderr
    assert "DEBUG, INFO, WARNING, ERROR, CRITICAL" in result.stderr, result.stderr
    assert "nope.xml" not in result.stderr  # refused before the configuration is read
    assert "Traceback" not in result.stderr


def test_run_takes_a_log_level_in_any_case(tmp_path):
    result = artemis_py("run", "--log-level", "warning", str(tmp_path / "nope.xml"), cwd=tmp_path)
    assert "usage:" not in result.stderr, result.stderr
    assert "cannot read the configuration file" in result.stderr, result.stderr


def test_run_on_a_port_in_use_fails_clearly(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = tmp_path / "broker.xml"
        path.write_text(
            GOOD_HEAD
            + "    <security-enabled>false</security-enabled>\n"
            + f'    <acceptors><acceptor name="stomp">tcp://127.0.0.1:{port}?protocols=STOMP'
            + "</acceptor></acceptors>\n  </core>\n</configuration>\n"
        )
        result = artemis_py("run", str(path), cwd=tmp_path)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    assert str(port) in result.stderr, result.stderr


def test_create_then_run_the_instance(tmp_path, make_broker):
    instance = tmp_path / "instance"
    port = free_port()
    http_port = free_port()
    create_instance(instance, port, http_port=http_port)
    config = instance / "etc" / "broker.xml"
    assert config.is_file()
    assert f'uri="http://localhost:{http_port}"' in (instance / "etc" / "bootstrap.xml").read_text()
    # Creating over an existing instance is refused without --force.
    again = artemis_py("create", str(instance), "--port", str(port))
    assert again.returncode != 0
    assert "already exists" in again.stderr

    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    node = BrokerProcess(elsewhere, name="created", config_path=config, port=port)
    node.start()
    try:
        c = Client(port)
        q = unique("/queue/created")
        c.send(q, "kept", persistent="true")
        c.close()
        # Its bootstrap.xml turns the management API on (localhost, security off).
        with urllib.request.urlopen(f"http://localhost:{http_port}/api/node", timeout=5) as r:
            assert json.load(r)["name"] == "instance"
        node.restart()  # the created instance is persistent
        c = Client(port)
        c.subscribe(q)
        assert c.wait_messages(1)[0].body == "kept"
        c.close()
    finally:
        node.close()
    # Relative data directories resolve against the instance, not the working directory.
    assert any((instance / "data" / "journal").iterdir())
    assert not (elsewhere / "data").exists()


def test_create_with_a_user_turns_security_on(tmp_path):
    instance = tmp_path / "secure"
    port = free_port()
    create_instance(instance, port, "--user", "admin", "--password", "s3cret")
    users = (instance / "etc" / "artemis-users.properties").read_text()
    assert "admin = ENC(" in users
    assert "s3cret" not in users  # hashed, as artemis create does
    node = BrokerProcess(
        tmp_path, name="secure", config_path=instance / "etc" / "broker.xml", port=port
    )
    node.start()
    try:
        c = Client(port, login="admin", passcode="s3cret")
        assert c.conn.is_connected()
        # The user has role amq (artemis-roles.properties), which may do everything.
        q = unique("/queue/secure")
        c.subscribe(q)
        c.send(q, "allowed")
        assert c.wait_messages(1)[0].body == "allowed"
        c.close()
        from .conftest import RawStomp

        with RawStomp(port) as raw:
            frame = raw.connect("1.2", login="admin", passcode="wrong")
            assert frame.command == "ERROR", frame
            assert raw.wait_closed() == []
    finally:
        node.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signals_stop_the_node_gracefully(make_broker, clients, sig):
    node = make_broker()
    c = clients(node)
    q = unique("/queue/sig")
    c.subscribe(q, ack="client")
    c.send(q, "in flight")
    c.wait_messages(1)
    node.process.send_signal(sig)
    rc = node.process.wait(15)
    assert rc == 0, node.log_tail()
    assert "Traceback" not in node.log()
    wait_for(c.listener.disconnected.is_set, message="the client to see the close")


def test_version(tmp_path):
    result = artemis_py("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("artemis-py "), result.stdout


def test_module_entry_point_runs_without_the_console_script(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from artemis_py.cli import main; sys.exit(main())",
            "--help",
        ],
        env=node_command()[1],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0
    assert "run" in result.stdout


def _server_socket_buffers(port: int) -> tuple[int, int]:
    """(receive, send) buffer bytes of the node's end of a connection on ``port`` (``ss``)."""
    out = subprocess.run(
        ["ss", "-tmnH", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = re.search(r"rb(\d+),t\d+,tb(\d+)", out)
    assert found, out
    return int(found[1]), int(found[2])


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_tcp_buffer_sizes_apply_to_accepted_connections(make_broker, clients) -> None:
    # Linux doubles the value for its bookkeeping and caps it at rmem_max / wmem_max.
    node = make_broker(acceptor_params=";tcpReceiveBufferSize=50000;tcpSendBufferSize=40000")
    clients(node)
    assert _server_socket_buffers(node.port) == (2 * 50000, 2 * 40000)


# -- producer and consumer -------------------------------------------------------------------


def queue_depth(node: BrokerProcess, queue: str) -> int:
    """How many messages ``queue`` holds: a consumer takes them all and returns them (with
    an unbounded window: the acceptor's 10 KiB default would hold back all but ~128)."""
    c = node.client()
    try:
        c.subscribe(f"/queue/{queue}", ack="client-individual", **{"consumer-window-size": "-1"})
        c.sync()
        return len(c.messages)
    finally:
        c.close()


def test_the_consumer_takes_exactly_its_message_count(broker):
    url, queue = f"tcp://127.0.0.1:{broker.port}", unique("exact")
    where = ["--url", url, "--destination", f"queue://{queue}"]
    produced = artemis_py("producer", *where, "--message-count", "5")
    assert produced.returncode == 0, produced.stderr
    first = artemis_py("consumer", *where, "--message-count", "3")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"Consumed 3 messages from queue://{queue} ")
    # The other two stayed on the broker (one may come back marked redelivered: it was
    # delivered after the third ACK and returned at the DISCONNECT).
    second = artemis_py("consumer", *where, "--message-count", "2")
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith(f"Consumed 2 messages from queue://{queue} ")
    assert queue_depth(broker, queue) == 0


def test_ctrl_c_stops_the_producer_and_prints_what_the_broker_has(broker):
    queue = unique("ctrl-c")
    producer = Running(
        "producer", "--url", f"tcp://127.0.0.1:{broker.port}", "--destination",
        f"queue://{queue}", "--message-count", "1000000", "--verbose",
    )  # fmt: skip
    wait_for(lambda: producer.count("sent ") >= 5, message="five messages sent")
    producer.process.send_signal(signal.SIGINT)
    code, lines, err = producer.finish()
    assert code == 130, err
    # One line says what happens now; no traceback, no error.
    assert err == (
        "artemis-py producer: stopping after the message in hand (Ctrl-C again to stop at once)\n"
    )
    summary = re.fullmatch(
        rf"Produced (\d+) messages to queue://{queue} in .*, interrupted", lines[-1]
    )
    assert summary, lines[-1]
    sent = int(summary[1])
    assert sent == producer.count("sent ")
    assert queue_depth(broker, queue) == sent  # every message counted is on the broker


def test_ctrl_c_stops_the_consumer_and_prints_what_it_acknowledged(broker):
    queue = unique("ctrl-c")
    c = broker.client()
    for number in range(3):
        c.send(f"/queue/{queue}", f"m{number}")
    c.close()
    consumer = Running(
        "consumer", "--url", f"tcp://127.0.0.1:{broker.port}", "--destination",
        f"queue://{queue}", "--message-count", "10", "--verbose",
    )  # fmt: skip
    wait_for(lambda: consumer.count("received ") == 3, message="three messages received")
    consumer.process.send_signal(signal.SIGINT)
    code, lines, err = consumer.finish()
    assert code == 130, err
    # One line says what happens now; no traceback, no error.
    assert err == (
        "artemis-py consumer: stopping after the message in hand (Ctrl-C again to stop at once)\n"
    )
    assert re.fullmatch(
        rf"Consumed 3 messages from queue://{queue} in .*, 0 redelivered, interrupted", lines[-1]
    ), lines[-1]
    assert queue_depth(broker, queue) == 0  # the three were acknowledged


def test_a_refused_login_is_one_line_without_escapes_or_repetition(make_broker):
    node = make_broker(security=True, users={"bob": "right"})
    result = artemis_py(
        "consumer", "--url", f"tcp://127.0.0.1:{node.port}", "--user", "bob", "--password",
        "wrong",
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stdout == ""
    err = result.stderr
    assert err.startswith("artemis-py consumer: the broker sent an ERROR: "), err
    assert err.count("\n") == 1, err
    assert "\\c" not in err, err
    assert err.count("authentication failed") == 1, err


@contextmanager
def scripted_server(server: ScriptedStompServer) -> Iterator[int]:
    """Serve ``server`` on a localhost port from a thread with its own Trio loop."""
    started: list[tuple[int, trio.lowlevel.TrioToken, trio.CancelScope]] = []

    async def main() -> None:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                port = await nursery.start(server.serve_tcp)
                started.append((port, trio.lowlevel.current_trio_token(), scope))

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    wait_for(lambda: started, message="the scripted server to listen")
    port, token, scope = started[0]
    try:
        yield port
    finally:
        trio.from_thread.run_sync(scope.cancel, trio_token=token)
        thread.join(10)


def test_a_second_ctrl_c_aborts_and_says_what_was_not_confirmed():
    server = ScriptedStompServer(auto_receipts=False)  # the broker never confirms anything
    with scripted_server(server) as port:
        producer = Running(
            "producer", "--url", f"tcp://127.0.0.1:{port}", "--max-pending", "3",
            "--message-count", "10",
        )  # fmt: skip
        wait_for(lambda: len(server.held_receipts) == 3, message="three sends in flight")
        producer.process.send_signal(signal.SIGINT)  # waits for a receipt that never comes
        wait_for(lambda: producer.errors, message="the first Ctrl-C to be noticed")
        producer.process.send_signal(signal.SIGINT)
        code, lines, err = producer.finish()
    assert code == 130, err
    assert "Traceback" not in err
    assert re.fullmatch(
        r"Produced 3 messages to queue://TEST in .*, aborted: 3 of them not confirmed by the "
        r"broker",
        lines[-1],
    ), lines


# -- cluster status ----------------------------------------------------------------------------

SAMPLE_PASSWORD = "a secret shared by all nodes"


@pytest.fixture
def sample_node(tmp_path):
    """Node 1 of etc/cluster/symmetric as the README starts it, on free local ports (its
    peers are not started: their links just retry)."""
    stomp, cluster = free_port(), free_port()
    text = (ROOT / "etc" / "cluster" / "symmetric" / "node1.xml").read_text()
    for old, new in [
        ("tcp://0.0.0.0:61613", f"tcp://127.0.0.1:{stomp}"),
        ("tcp://0.0.0.0:61616", f"tcp://127.0.0.1:{cluster}"),
        ("${NODE1_HOST:localhost}:61616", f"127.0.0.1:{cluster}"),
        ("${ARTEMIS_DATA:data/symmetric-node1}", str(tmp_path / "data")),
        ("${ARTEMIS_CLUSTER_PASSWORD}", SAMPLE_PASSWORD),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    config = tmp_path / "node1.xml"
    config.write_text(text)
    node = BrokerProcess(tmp_path, name="node1", config_path=config, port=stomp).start()
    node.cluster_port = cluster
    wait_for(lambda: f"cluster links on 127.0.0.1:{cluster}" in node.log(since_start=True))
    yield node
    node.close()


def test_cluster_status_as_the_docs_show_it(sample_node):
    url = f"tcp://127.0.0.1:{sample_node.cluster_port}"
    result = artemis_py(
        "cluster", "status", "--url", url, "--cluster", "symmetric", "--password",
        SAMPLE_PASSWORD,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "cluster symmetric, ON_DEMAND, max-hops 1" in result.stdout


def test_rejected_cluster_credentials_name_the_options_and_the_user(sample_node):
    url = f"tcp://127.0.0.1:{sample_node.cluster_port}"
    result = artemis_py(
        "cluster", "stop", "--url", url, "--cluster", "symmetric", "--user", "operator",
        "--password", SAMPLE_PASSWORD,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "credentials of user 'operator' (given with --user)" in result.stderr
    assert "--user" in result.stderr
    assert "--password" in result.stderr
    assert sample_node.running  # not stopped


def test_cluster_status_on_a_stomp_port_says_so_at_once(sample_node):
    started = time.monotonic()
    result = artemis_py(
        "cluster", "status", "--url", f"tcp://127.0.0.1:{sample_node.port}", "--cluster",
        "symmetric", "--password", SAMPLE_PASSWORD,
    )  # fmt: skip
    took = time.monotonic() - started
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"artemis-py: 127.0.0.1:{sample_node.port}: a STOMP acceptor answered, not an "
        "artemis-py cluster acceptor"
    ), result.stderr
    assert took < TIMEOUT, took  # no waiting for the handshake timeout


# -- help --------------------------------------------------------------------------------------


def _parsers(
    parser: argparse.ArgumentParser, path: str = "artemis-py"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_option_and_command_has_help():
    missing = []
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {choice.dest for choice in action._choices_actions if choice.help}
                missing += [f"{path} {name}" for name in action.choices if name not in helped]
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []
