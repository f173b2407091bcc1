"""The ``artemis-py`` command line: ``run`` and ``create``, as an operator uses them."""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from .conftest import BrokerProcess, Client, free_port, node_command, unique, wait_for


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
    assert "broker.xml:5" in result.stderr and "broker.xml:6" in result.stderr, result.stderr
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
    assert "--log-level" in result.stderr and "'LOUD'" in result.stderr, result.stderr
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
    created = artemis_py("create", str(instance), "--host", "127.0.0.1", "--port", str(port))
    assert created.returncode == 0, created.stderr
    config = instance / "etc" / "broker.xml"
    assert config.is_file()
    # Creating over an existing instance is refused without --force.
    again = artemis_py("create", str(instance), "--port", str(port))
    assert again.returncode != 0 and "already exists" in again.stderr

    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    node = BrokerProcess(elsewhere, name="created", config_path=config, port=port)
    node.start()
    try:
        c = Client(port)
        q = unique("/queue/created")
        c.send(q, "kept", persistent="true")
        c.close()
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
    created = artemis_py(
        "create",
        str(instance),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--user",
        "admin",
        "--password",
        "s3cret",
    )
    assert created.returncode == 0, created.stderr
    node = BrokerProcess(
        tmp_path, name="secure", config_path=instance / "etc" / "broker.xml", port=port
    )
    node.start()
    try:
        c = Client(port, login="admin", passcode="s3cret")
        assert c.conn.is_connected()
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
    assert result.returncode == 0 and "run" in result.stdout


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
