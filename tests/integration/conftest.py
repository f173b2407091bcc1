"""Integration-test harness: real ``artemis-py run`` processes and real STOMP clients.

* :class:`BrokerProcess` writes a broker.xml (every data directory absolute, under the test's
  ``tmp_path``), starts ``artemis-py run`` as a subprocess with its stderr in a log file,
  waits for the acceptor's "listening" line, and can ``stop()`` (SIGTERM; the node must exit
  0), ``kill()`` (SIGKILL) and ``restart()`` it on the same port and data.
* :func:`wait_for` is the one way these tests wait: it polls a predicate until it holds or a
  deadline passes (nats ``checkFor``, Artemis ``Wait.assertTrue``). No bare sleeps.
* :class:`Client` wraps a stomp.py connection with a listener that collects MESSAGE, ERROR
  and RECEIPT frames in thread-safe lists. :meth:`Client.sync` is the barrier that makes
  "nothing (more) arrived" checkable: it sends a frame with a receipt and waits for the
  RECEIPT; every MESSAGE the broker had already decided to deliver to this connection is on
  the wire before that RECEIPT, and stomp.py hands frames to the listener in order.
* :class:`RawStomp` is a plain socket with an independent little frame parser, for bytes
  stomp.py cannot produce (NULs in bodies, 1.0 CONNECT, malformed and over-size frames).

When a test fails, the log of every node it used is attached to the report.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import stomp

ROOT = Path(__file__).resolve().parents[2]
PYTHON_SRC = ROOT / "python"

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------
# waiting


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 10,
    interval: float = 0.02,
    message: str | Callable[[], str] | None = None,
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that.

    The blocking twin of ``tests/conftest.py``'s async ``wait_for`` (these tests drive
    thread-based clients, not Trio). Fails the test with ``message`` (a callable is evaluated
    at the deadline, so it can describe the state then) and the last value seen when
    ``timeout`` seconds pass first; an exception raised by the predicate propagates at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            what = text or getattr(predicate, "__name__", repr(predicate))
            pytest.fail(f"timed out after {timeout}s waiting for {what}; last value: {value!r}")
        time.sleep(interval)


def stays(
    predicate: Callable[[], object],
    window: float,
    interval: float = 0.05,
    message: str | Callable[[], str] | None = None,
) -> None:
    """Check that ``predicate`` holds for ``window`` seconds, polling it (Artemis's
    ``Wait.assertFalse`` turned around): for things that must *not* happen. The window is
    part of the claim ("nothing moves for 1 s"), never a guess at how long something
    takes; fails with ``message`` at the first poll where the predicate is false."""
    deadline = time.monotonic() + window
    while True:
        value = predicate()
        if not value:
            text = message() if callable(message) else message
            what = text or getattr(predicate, "__name__", repr(predicate))
            pytest.fail(f"{what} stopped holding within {window}s; value: {value!r}")
        if time.monotonic() >= deadline:
            return
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------
# nodes


def free_port() -> int:
    """A port nothing listens on now, and one this test process never handed out before:
    the kernel may give a just-closed ephemeral port again, and a cluster's ports are all
    picked before its first node binds one (two nodes once got the same port)."""
    if len(_handed_out) > 20_000:  # most of the ephemeral range: start over
        _handed_out.clear()
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


_handed_out: set[int] = set()


def node_command() -> tuple[list[str], dict[str, str]]:
    """How to run ``artemis-py`` from this checkout: its ``main`` under this interpreter.

    (The installed console script is exercised by test_cli.py; going through the
    interpreter directly avoids wrapper start-up cost and picks up this checkout.)
    """
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    # The suite's nodes serve STOMP clients, plain TCP and TLS, on the data plane (the
    # product's default); .ci/run runs the STOMP and TLS modules again with
    # ARTEMIS_PY_DATA_PLANE=0, the socket shell.
    env.setdefault("ARTEMIS_PY_DATA_PLANE", "1")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PYTHON_SRC), env.get("PYTHONPATH", "")) if p
    )
    return [
        sys.executable,
        "-c",
        "import sys; from artemis_py.cli import main; sys.exit(main())",
    ], env


class Running:
    """An ``artemis-py`` command in the background; a thread collects its stdout lines."""

    def __init__(self, *args: str) -> None:
        command, env = node_command()  # PYTHONUNBUFFERED: each line arrives as printed
        self.process = subprocess.Popen(
            [*command, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []  # stderr lines
        self._readers = [
            threading.Thread(target=self._read, args=(pipe, lines), daemon=True)
            for pipe, lines in (
                (self.process.stdout, self.lines),
                (self.process.stderr, self.errors),
            )
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(pipe: Any, lines: list[str]) -> None:
        for line in pipe:
            lines.append(line.rstrip("\n"))

    def count(self, prefix: str) -> int:
        return sum(line.startswith(prefix) for line in self.lines)

    def finish(self, timeout: float = 30) -> tuple[int, list[str], str]:
        """Exit code, stdout lines and stderr once the command ended."""
        try:
            code = self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        for reader in self._readers:
            reader.join(10)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        return code, self.lines, "".join(f"{line}\n" for line in self.errors)


def artemis_py(
    *args: str, cwd: Path | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run ``artemis-py ARGS`` from this checkout (see :func:`node_command`) to the end;
    its exit code and text output, whatever the exit code."""
    command, env = node_command()
    return subprocess.run(
        [*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def create_instance(
    instance: Path, port: int, *extra: str, http_port: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``artemis-py create INSTANCE EXTRA...`` whose STOMP acceptor listens on
    127.0.0.1:``port`` and its web server on ``http_port`` (a free one if not given);
    asserts it succeeded."""
    created = artemis_py(
        "create", str(instance), "--host", "127.0.0.1", "--port", str(port),
        "--http-port", str(http_port or free_port()), *extra,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    return created


# With security on and no security_settings given: every permission to role "amq", which
# every user has (what `artemis create` writes).
ALL_PERMISSIONS = [
    "send",
    "consume",
    "browse",
    "createAddress",
    "deleteAddress",
    "createDurableQueue",
    "deleteDurableQueue",
    "createNonDurableQueue",
    "deleteNonDurableQueue",
    "manage",
]
DEFAULT_SECURITY_SETTINGS = (
    '<security-setting match="#">'
    + "".join(f'<permission type="{p}" roles="amq"/>' for p in ALL_PERMISSIONS)
    + "</security-setting>"
)

DEFAULT_ADDRESS_SETTINGS = """
      <address-setting match="#">
        <dead-letter-address>DLQ</dead-letter-address>
        <max-delivery-attempts>3</max-delivery-attempts>
        <redelivery-delay>0</redelivery-delay>
        <auto-create-queues>true</auto-create-queues>
        <auto-create-addresses>true</auto-create-addresses>
      </address-setting>
"""

DEFAULT_ADDRESSES = """
      <address name="DLQ">
        <anycast><queue name="DLQ"/></anycast>
      </address>
"""


class BrokerProcess:
    """One ``artemis-py run`` process on its own port and data directory."""

    # Where the acceptors listen, the command prefix the node runs under and whether its
    # first start picks free ports: tests/cluster/hosts.py runs nodes in network namespaces
    # (``ip netns exec NS``), each on its own address with the same, fixed ports.
    host = "127.0.0.1"
    launcher: tuple[str, ...] = ()
    pick_ports = True

    def __init__(
        self,
        directory: Path,
        *,
        name: str = "node",
        persistence: bool = False,
        security: bool = False,
        acceptor_params: str = "",
        extra_acceptors: dict[str, str] | None = None,
        prefixes: bool = True,
        address_settings: str = DEFAULT_ADDRESS_SETTINGS,
        addresses: str = DEFAULT_ADDRESSES,
        extra_core: str = "",
        data_dir: Path | None = None,
        users: dict[str, str] | None = None,
        roles: dict[str, list[str]] | None = None,
        security_settings: str | None = None,
        config_path: Path | None = None,
        port: int | None = None,
        web: bool = False,
    ) -> None:
        """``config_path`` + ``port``: run an existing broker.xml (not written by us) whose
        STOMP acceptor listens on 127.0.0.1:``port``. ``web``: a bootstrap.xml beside it
        turns the management web server on (at :attr:`web_url`). ``prefixes=False``: the
        STOMP acceptors have no anycastPrefix/multicastPrefix, as ``artemis create`` writes
        them (otherwise ``/queue/`` and ``/topic/``)."""
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.persistence = persistence
        self.security = security
        self.acceptor_params = acceptor_params
        self.prefixes = ";anycastPrefix=/queue/;multicastPrefix=/topic/" if prefixes else ""
        self.extra_acceptor_params = dict(extra_acceptors or {})
        self.address_settings = address_settings
        self.addresses = addresses
        self.extra_core = extra_core
        self.data_dir = data_dir or (self.dir / "data")
        self.users = users
        # artemis-roles.properties (role -> users) and <security-settings> (with security on).
        self.roles = roles
        if security and security_settings is None and roles is None:
            self.roles = {"amq": list(users or {})}
            security_settings = DEFAULT_SECURITY_SETTINGS
        self.security_settings = security_settings
        self.external_config = config_path is not None
        self.config_path = config_path or self.dir / "broker.xml"
        self.log_path = self.dir / "node.log"
        self.port = port or 0
        self.extra_ports: dict[str, int] = {}
        self.web = web
        self.web_port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._log_offset = 0
        self._log_file: Any = None

    # -- configuration ---------------------------------------------------------------------

    def broker_xml(self) -> str:
        data = self.data_dir
        acceptors = [
            f'<acceptor name="stomp">tcp://{self.host}:{self.port}?protocols=STOMP'
            f"{self.prefixes}{self.acceptor_params}</acceptor>"
        ]
        for acceptor_name, params in self.extra_acceptor_params.items():
            acceptors.append(
                f'<acceptor name="{acceptor_name}">tcp://{self.host}:'
                f"{self.extra_ports[acceptor_name]}?protocols=STOMP{self.prefixes}{params}"
                "</acceptor>"
            )
        acceptor_xml = "\n        ".join(acceptors)
        # The shared machines that run the suite sit near Artemis's default disk limit (90%
        # used, counting reserved blocks): the suite's nodes stop only at a truly full disk
        # unless a test sets a limit (test_disk.py tests the limits).
        disk = (
            ""
            if "max-disk-usage" in self.extra_core or "min-disk-free" in self.extra_core
            else "<max-disk-usage>100</max-disk-usage>"
        )
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <core xmlns="urn:activemq:core">
    <name>{self.name}</name>
    <persistence-enabled>{str(self.persistence).lower()}</persistence-enabled>
    <security-enabled>{str(self.security).lower()}</security-enabled>
    <journal-directory>{data}/journal</journal-directory>
    <bindings-directory>{data}/bindings</bindings-directory>
    <paging-directory>{data}/paging</paging-directory>
    <large-messages-directory>{data}/largemessages</large-messages-directory>
    <journal-file-size>1MiB</journal-file-size>
    {disk}
    {self.extra_core}
    {self.security_xml()}
    <acceptors>
        {acceptor_xml}
    </acceptors>
    <address-settings>{self.address_settings}
    </address-settings>
    <addresses>{self.addresses}
    </addresses>
  </core>
</configuration>
"""

    @property
    def web_url(self) -> str:
        """The management web server's base URL (with ``web=True``)."""
        return f"http://{self.host}:{self.web_port}"

    def security_xml(self) -> str:
        if self.security_settings is None:
            return ""
        return f"<security-settings>{self.security_settings}</security-settings>"

    def write_config(self) -> None:
        if self.external_config:
            return
        self.config_path.write_text(self.broker_xml())
        if self.web:
            (self.config_path.parent / "bootstrap.xml").write_text(
                '<broker xmlns="http://activemq.apache.org/schema"><web path="web">'
                f'<binding name="artemis" uri="{self.web_url}"/></web></broker>\n'
            )
        if self.roles is not None:
            (self.dir / "artemis-roles.properties").write_text(
                "".join(f"{role} = {','.join(users)}\n" for role, users in self.roles.items())
            )
        if self.users is not None:
            (self.dir / "artemis-users.properties").write_text(
                "".join(f"{user} = {password}\n" for user, password in self.users.items())
            )

    # -- life cycle ------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self, since_start: bool = False) -> str:
        try:
            data = self.log_path.read_bytes()
        except FileNotFoundError:
            return ""
        if since_start:
            data = data[self._log_offset :]
        return data.decode("utf-8", "replace")

    def log_tail(self, chars: int = 6000) -> str:
        return self.log()[-chars:]

    def start(self, *, wait: bool = True, attempts: int = 3) -> BrokerProcess:
        """Start the node; the first start picks free ports, restarts keep them."""
        assert not self.running, "node already running"
        for attempt in range(attempts):
            if self.starts == 0 and not self.external_config and self.pick_ports:
                self.port = free_port()
                self.extra_ports = {n: free_port() for n in self.extra_acceptor_params}
                self.web_port = free_port() if self.web else 0
            self.write_config()
            self._spawn()
            if not wait:
                return self
            try:
                self.wait_ready()
                break
            except PortTaken:
                # Another test grabbed the port between our probe and the node's bind.
                if self.starts > 0 or self.external_config or attempt == attempts - 1:
                    raise
        self.starts += 1
        return self

    def _spawn(self) -> None:
        command, env = node_command()
        self.log_path.touch()
        self._log_offset = self.log_path.stat().st_size
        if self._log_file is not None:
            self._log_file.close()
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the node
        self._log_file.write(f"===== start #{self.starts + 1} =====\n".encode())
        self._log_file.flush()
        self._log_offset = self.log_path.stat().st_size
        self.process = subprocess.Popen(
            [*self.launcher, *command, "run", str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=self._log_file,
            cwd=self.dir,
            env=env,
        )

    def wait_ready(self, timeout: float = 20) -> None:
        needles = [f"listening for STOMP on {self.host}:{self.port}"] + [
            f"listening for STOMP on {self.host}:{p}" for p in self.extra_ports.values()
        ]
        if self.web:
            needles.append(f"management web server listening on {self.web_url}")

        def ready() -> bool:
            text = self.log(since_start=True)
            if all(n in text for n in needles):
                return True
            if self.process is not None and self.process.poll() is not None:
                if "Address already in use" in text or "address already in use" in text:
                    raise PortTaken(text)
                raise AssertionError(
                    f"node exited with {self.process.returncode} before listening:\n{text}"
                )
            return False

        wait_for(ready, timeout, 0.05, lambda: f"node to listen; log:\n{self.log_tail()}")

    def stop(self, timeout: float = 15, check: bool = True) -> int:
        """SIGTERM and wait; with ``check`` the node must exit 0 (graceful shutdown)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(
                    f"node did not stop within {timeout}s of SIGTERM; log:\n{self.log_tail()}"
                ) from None
        rc = self.process.returncode
        if check:
            assert rc == 0, f"node exited with {rc} after SIGTERM; log:\n{self.log_tail()}"
        return rc

    def kill(self) -> None:
        """SIGKILL: a crash, no shutdown code runs."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def restart(self, *, crash: bool = False) -> BrokerProcess:
        if crash:
            self.kill()
        else:
            self.stop()
        return self.start()

    def close(self) -> None:
        """Test teardown: stop a still-running node (it must still shut down cleanly)."""
        try:
            if self.running:
                self.stop()
        finally:
            if self.running:
                self.kill()
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    # -- clients ---------------------------------------------------------------------------

    def client(self, **kwargs: Any) -> Client:
        return Client(self.port, **kwargs)

    def raw(self, port: int | None = None, **kwargs: Any) -> RawStomp:
        return RawStomp(port or self.port, **kwargs)


def close_nodes(nodes: Iterable[BrokerProcess]) -> list[str]:
    """Close every node, even after one complains; what each complained of (an ERROR it
    logged, a traceback, an exit code)."""
    errors = []
    for node in nodes:
        try:
            node.close()
        except AssertionError as exc:
            errors.append(str(exc))
    return errors


class PortTaken(Exception):
    pass


def start_refused(node: BrokerProcess) -> str:
    """Start ``node`` and expect it to give up before listening, with no traceback; the
    log of this start."""
    node.start(wait=False)
    assert node.process is not None
    wait_for(
        lambda: node.process.poll() is not None,
        20,
        message=lambda: f"the node to give up; log:\n{node.log_tail()}",
    )
    log = node.log(since_start=True)
    assert node.process.returncode != 0, log
    assert "Traceback" not in log, log
    assert "listening for STOMP" not in log, "it must not serve clients"
    return log


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """``make_broker(**options)`` -> a started node of its own; ``start=False`` leaves it
    stopped. Nodes still running at the end of the test must stop cleanly (exit 0)."""
    nodes: list[BrokerProcess] = []
    counter = itertools.count(1)

    def factory(*, start: bool = True, **options: Any) -> BrokerProcess:
        node = BrokerProcess(tmp_path / f"node{next(counter)}", **options)
        nodes.append(node)
        _used_by_this_test.append((node, 0))
        if start:
            node.start()
        return node

    yield factory
    errors = close_nodes(nodes)
    assert not errors, "\n".join(errors)


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    node = BrokerProcess(tmp_path_factory.mktemp("shared"), name="shared")
    node.start()
    yield node
    node.close()


@pytest.fixture
def broker(shared_node: BrokerProcess) -> Iterator[BrokerProcess]:
    """The module's non-persistent node (DLQ, max-delivery-attempts 3). Tests share it, so
    each uses destinations of its own (:func:`unique`). A test during which the node dies
    fails, and the next test gets a fresh process."""
    if not shared_node.running:
        shared_node.start()
    _used_by_this_test.append((shared_node, shared_node.log_path.stat().st_size))
    yield shared_node
    assert shared_node.running, (
        f"the node died during this test (exit {shared_node.process.returncode}); log:\n"
        f"{shared_node.log_tail()}"
    )


# Nodes the running test used, with the log offset where its part of their log begins.
_used_by_this_test: list[tuple[BrokerProcess, int]] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _used_by_this_test.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when in ("setup", "call"):
        for node, offset in _used_by_this_test:
            try:
                text = node.log_path.read_bytes()[offset:].decode("utf-8", "replace")
            except FileNotFoundError:
                text = ""
            if len(text) > 30000:
                text = "...\n" + text[-30000:]
            report.sections.append((f"node log {node.log_path}", text))


# ---------------------------------------------------------------------------------------------
# stomp.py clients


class Collector(stomp.ConnectionListener):
    """Collects frames from stomp.py's receiver thread into lists guarded by a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[stomp.utils.Frame] = []
        self.errors: list[stomp.utils.Frame] = []
        self.receipts: list[str] = []
        self.connected_frames: list[stomp.utils.Frame] = []
        self.heartbeats = 0
        self.disconnected = threading.Event()

    def on_connected(self, frame: stomp.utils.Frame) -> None:
        with self.lock:
            self.connected_frames.append(frame)

    def on_message(self, frame: stomp.utils.Frame) -> None:
        with self.lock:
            self.messages.append(frame)

    def on_error(self, frame: stomp.utils.Frame) -> None:
        with self.lock:
            self.errors.append(frame)

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        with self.lock:
            self.receipts.append(frame.headers.get("receipt-id", ""))

    def on_heartbeat(self) -> None:
        with self.lock:
            self.heartbeats += 1

    def on_disconnected(self) -> None:
        self.disconnected.set()


_VERSIONS = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Client:
    """A connected stomp.py client with collected frames and receipt-waiting helpers."""

    def __init__(
        self,
        port: int,
        *,
        version: str = "1.2",
        client_id: str | None = None,
        heartbeats: tuple[int, int] = (0, 0),
        login: str | None = None,
        passcode: str | None = None,
        connect: bool = True,
        host: str = "127.0.0.1",
        ssl: dict[str, Any] | None = None,
    ) -> None:
        """``ssl``: connect over TLS, with these keyword arguments of stomp.py's
        ``set_ssl`` (``ca_certs``, ``key_file``, ``cert_file``, ``password``...)."""
        self.version = version
        kwargs: dict[str, Any] = {"auto_content_length": True}
        if version != "1.0":
            kwargs["heartbeats"] = heartbeats
        self.conn = _VERSIONS[version]([(host, port)], reconnect_attempts_max=1, **kwargs)
        if ssl is not None:
            self.conn.set_ssl(for_hosts=[(host, port)], **ssl)
        self.listener = Collector()
        self.conn.set_listener("collector", self.listener)
        self.client_id = client_id
        self._receipt_ids = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:6]
        if connect:
            headers = {"client-id": client_id} if client_id else {}
            self.conn.connect(login, passcode, wait=True, headers=headers)

    # -- collected frames ----------------------------------------------------------------------

    @property
    def messages(self) -> list[stomp.utils.Frame]:
        with self.listener.lock:
            return list(self.listener.messages)

    @property
    def errors(self) -> list[stomp.utils.Frame]:
        with self.listener.lock:
            return list(self.listener.errors)

    @property
    def receipts(self) -> list[str]:
        with self.listener.lock:
            return list(self.listener.receipts)

    def bodies(
        self, destination_filter: Callable[[stomp.utils.Frame], bool] | None = None
    ) -> list[str]:
        return [
            m.body for m in self.messages if destination_filter is None or destination_filter(m)
        ]

    def clear(self) -> None:
        with self.listener.lock:
            self.listener.messages.clear()
            self.listener.errors.clear()

    def wait_messages(self, count: int, timeout: float = 10) -> list[stomp.utils.Frame]:
        wait_for(
            lambda: len(self.messages) >= count,
            timeout,
            message=lambda: (
                f"{count} messages, got {len(self.messages)}: "
                f"{[m.body for m in self.messages]!r}; errors {[e.body for e in self.errors]!r}"
            ),
        )
        return self.messages

    def wait_error(self, timeout: float = 10) -> stomp.utils.Frame:
        wait_for(lambda: self.errors, timeout, message="an ERROR frame")
        return self.errors[0]

    # -- frames with receipts ------------------------------------------------------------------

    def next_receipt(self) -> str:
        return f"r-{self._prefix}-{next(self._receipt_ids)}"

    def wait_receipt(self, receipt: str, timeout: float = 10) -> None:
        wait_for(
            lambda: receipt in self.receipts,
            timeout,
            message=lambda: f"RECEIPT {receipt}; errors {[e.body for e in self.errors]!r}",
        )

    def send(
        self, destination: str, body: str = "", *, receipt: bool = True, **headers: Any
    ) -> None:
        """SEND; with ``receipt`` wait until the broker confirms it."""
        r = self.next_receipt() if receipt else None
        if r is not None:
            headers["receipt"] = r
        self.conn.send(destination, body, headers=headers)
        if r is not None:
            self.wait_receipt(r)

    def subscribe(
        self, destination: str, sub_id: str | None = None, ack: str = "auto", **headers: Any
    ) -> str:
        """SUBSCRIBE and wait for the broker to confirm it (so later sends reach it)."""
        sub_id = sub_id or unique("sub")
        r = self.next_receipt()
        headers["receipt"] = r
        if self.version == "1.0":
            headers["id"] = sub_id
            self.conn.subscribe(destination, ack=ack, headers=headers)
        else:
            self.conn.subscribe(destination, sub_id, ack=ack, headers=headers)
        self.wait_receipt(r)
        return sub_id

    def unsubscribe(self, sub_id: str, **headers: Any) -> None:
        r = self.next_receipt()
        headers["receipt"] = r
        if self.version == "1.0":
            self.conn.unsubscribe(id=sub_id, headers=headers)
        else:
            self.conn.unsubscribe(sub_id, headers=headers)
        self.wait_receipt(r)

    def ack(
        self, frame: stomp.utils.Frame, transaction: str | None = None, receipt: bool = True
    ) -> None:
        r = self.next_receipt() if receipt else None
        self._ack_or_nack("ack", frame, transaction, r)
        if r is not None:
            self.wait_receipt(r)

    def nack(
        self, frame: stomp.utils.Frame, transaction: str | None = None, receipt: bool = True
    ) -> None:
        r = self.next_receipt() if receipt else None
        self._ack_or_nack("nack", frame, transaction, r)
        if r is not None:
            self.wait_receipt(r)

    def _ack_or_nack(
        self, what: str, frame: stomp.utils.Frame, transaction: str | None, receipt: str | None
    ) -> None:
        h = frame.headers
        method = getattr(self.conn, what)
        if self.version == "1.2":
            method(h["ack"], transaction=transaction, receipt=receipt)
        elif self.version == "1.1":
            method(h["message-id"], h["subscription"], transaction=transaction, receipt=receipt)
        else:
            headers = {"message-id": h["message-id"]}
            if transaction:
                headers["transaction"] = transaction
            if receipt:
                headers["receipt"] = receipt
            self.conn.send_frame(what.upper(), headers)

    def begin(self, transaction: str) -> None:
        r = self.next_receipt()
        self.conn.begin(transaction, headers={"receipt": r})
        self.wait_receipt(r)

    def commit(self, transaction: str) -> None:
        r = self.next_receipt()
        self.conn.commit(transaction, headers={"receipt": r})
        self.wait_receipt(r)

    def abort(self, transaction: str) -> None:
        r = self.next_receipt()
        self.conn.abort(transaction, headers={"receipt": r})
        self.wait_receipt(r)

    def sync(self) -> None:
        """Round trip: afterwards every delivery the broker already made has arrived."""
        tx = unique("sync")
        self.conn.begin(tx)
        self.abort(tx)

    def disconnect(self) -> None:
        if self.conn.is_connected():
            self.conn.disconnect(receipt=self.next_receipt())

    def drop(self) -> None:
        """Close the socket without DISCONNECT (as if the client died)."""
        with contextlib.suppress(Exception):
            transport = self.conn.transport
            sock = transport.socket
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self.conn.transport.stop()
        wait_for(self.listener.disconnected.is_set, 10, message="client socket to close")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.conn.is_connected():
                self.conn.disconnect()
        with contextlib.suppress(Exception):
            self.conn.transport.stop()


@pytest.fixture
def clients() -> Iterator[Callable[..., Client]]:
    """``clients(broker_or_port, **options)`` -> a connected Client, closed after the test."""
    made: list[Client] = []

    def factory(target: BrokerProcess | int, **options: Any) -> Client:
        port = target.port if isinstance(target, BrokerProcess) else target
        client = Client(port, **options)
        made.append(client)
        return client

    yield factory
    for client in made:
        client.close()


# ---------------------------------------------------------------------------------------------
# raw sockets


def escape_header(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n").replace(":", "\\c")


_UNESCAPES = {"\\\\": "\\", "\\r": "\r", "\\n": "\n", "\\c": ":"}


def unescape_header(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        if text[i] == "\\":
            pair = text[i : i + 2]
            if pair not in _UNESCAPES:
                raise ValueError(f"invalid escape {pair!r} in {text!r}")
            out.append(_UNESCAPES[pair])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class RawFrame:
    def __init__(self, command: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.command = command
        self.headers = headers
        self.body = body

    def get(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.headers:  # first occurrence wins (STOMP 1.2)
            if key == name:
                return value
        return default

    def __repr__(self) -> str:
        return f"RawFrame({self.command!r}, {self.headers!r}, {self.body[:200]!r})"


def encode_frame(
    command: str,
    headers: list[tuple[str, str]] | dict[str, str] = (),
    body: bytes = b"",
    *,
    escape: bool = True,
) -> bytes:
    items = headers.items() if isinstance(headers, dict) else headers
    lines = [command]
    for key, value in items:
        if escape:
            key, value = escape_header(key), escape_header(value)
        lines.append(f"{key}:{value}")
    return ("\n".join(lines) + "\n\n").encode() + body + b"\x00"


class RawStomp:
    """A blocking socket client with its own frame parser (independent of artemis_py)."""

    def __init__(self, port: int, *, timeout: float = 10) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.timeout = timeout
        self.buffer = b""
        self.eof = False
        self.heartbeats = 0
        self.version = "1.0"
        self.pending: list[RawFrame] = []  # frames read ahead, returned first by read_frame

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self) -> RawStomp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(
        self,
        command: str,
        headers: list[tuple[str, str]] | dict[str, str] = (),
        body: bytes = b"",
        *,
        escape: bool | None = None,
    ) -> None:
        if escape is None:
            escape = self.version != "1.0" and command not in ("CONNECT", "STOMP")
        self.send_bytes(encode_frame(command, headers, body, escape=escape))

    def connect(
        self, version: str | None = "1.2", command: str = "CONNECT", **headers: str
    ) -> RawFrame:
        h = [("host", "localhost")]
        if version is not None:
            h.insert(0, ("accept-version", version))
        h += [(k.replace("_", "-"), v) for k, v in headers.items()]
        self.send(command, h, escape=False)
        frame = self.read_frame()
        assert frame is not None, "connection closed instead of CONNECTED"
        if frame.command == "CONNECTED":
            self.version = frame.get("version", "1.0") or "1.0"
        return frame

    def _fill(self, deadline: float) -> bool:
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no frame in time")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        except TimeoutError:
            raise TimeoutError(f"no frame in time; buffered {self.buffer[:200]!r}") from None
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    def _skip_heartbeats(self) -> None:
        while self.buffer[:1] in (b"\n", b"\r"):
            if self.buffer.startswith(b"\r\n"):
                self.buffer = self.buffer[2:]
            elif self.buffer.startswith(b"\r"):
                if len(self.buffer) < 2:
                    return
                raise AssertionError(f"bare CR on the wire: {self.buffer[:50]!r}")
            else:
                self.buffer = self.buffer[1:]
            self.heartbeats += 1

    def read_frame(self, timeout: float | None = None) -> RawFrame | None:
        """The next frame (heart-beat EOLs are counted and skipped); None at EOF."""
        if self.pending:
            return self.pending.pop(0)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            self._skip_heartbeats()
            frame = self._parse()
            if frame is not None:
                return frame
            if not self._fill(deadline):
                if self.buffer.strip(b"\r\n"):
                    raise AssertionError(f"EOF inside a frame: {self.buffer[:200]!r}")
                return None

    def poll(self, timeout: float = 0.05) -> bool:
        """Read what arrives within ``timeout`` into ``pending`` (counting heart-beats);
        False once the broker has closed the connection."""
        with contextlib.suppress(TimeoutError):
            self._fill(time.monotonic() + timeout)
        while True:
            self._skip_heartbeats()
            frame = self._parse()
            if frame is None:
                break
            self.pending.append(frame)
        return not self.eof

    def _parse(self) -> RawFrame | None:
        end = self.buffer.find(b"\n\n")
        end_crlf = self.buffer.find(b"\r\n\r\n")
        if end < 0 and end_crlf < 0:
            return None
        if end_crlf >= 0 and (end < 0 or end_crlf < end):
            head, body_start = self.buffer[:end_crlf], end_crlf + 4
        else:
            head, body_start = self.buffer[:end], end + 2
        lines = head.decode().replace("\r\n", "\n").split("\n")
        command, header_lines = lines[0], lines[1:]
        headers = []
        for line in header_lines:
            key, _, value = line.partition(":")
            if command != "CONNECTED" and self.version != "1.0":
                key, value = unescape_header(key), unescape_header(value)
            headers.append((key, value))
        length = next((v for k, v in headers if k == "content-length"), None)
        if length is not None:
            n = int(length)
            if len(self.buffer) < body_start + n + 1:
                return None
            body = self.buffer[body_start : body_start + n]
            assert self.buffer[body_start + n : body_start + n + 1] == b"\x00", (
                "frame body not followed by NUL"
            )
            self.buffer = self.buffer[body_start + n + 1 :]
        else:
            nul = self.buffer.find(b"\x00", body_start)
            if nul < 0:
                return None
            body = self.buffer[body_start:nul]
            self.buffer = self.buffer[nul + 1 :]
        return RawFrame(command, headers, body)

    def read_until(self, command: str, timeout: float | None = None) -> RawFrame:
        while True:
            frame = self.read_frame(timeout)
            assert frame is not None, f"connection closed before a {command} frame"
            if frame.command == command:
                return frame

    def wait_closed(self, timeout: float = 10) -> list[RawFrame]:
        """Read until the broker closes the connection; return the frames read meanwhile."""
        frames = []
        deadline = time.monotonic() + timeout
        while True:
            frame = self.read_frame(max(0.01, deadline - time.monotonic()))
            if frame is None:
                return frames
            frames.append(frame)

    def receipt(
        self, command: str, headers: list[tuple[str, str]] | dict[str, str] = (), body: bytes = b""
    ) -> RawFrame:
        """Send a frame with a receipt header and return the RECEIPT (or the ERROR)."""
        r = unique("raw")
        items = list(headers.items() if isinstance(headers, dict) else headers)
        self.send(command, [*items, ("receipt", r)], body)
        stash = []
        while True:
            frame = self.read_frame()
            if frame is None:
                self.pending.extend(stash)
                raise AssertionError(
                    f"connection closed before the receipt for {command}: {stash!r}"
                )
            if frame.command == "ERROR" or (
                frame.command == "RECEIPT" and frame.get("receipt-id") == r
            ):
                self.pending.extend(stash)
                return frame
            stash.append(frame)

    def sync(self) -> list[RawFrame]:
        """Round trip; returns the frames that arrived before its RECEIPT (left unread)."""
        tx = unique("sync")
        self.send("BEGIN", {"transaction": tx})
        reply = self.receipt("ABORT", {"transaction": tx})
        assert reply.command == "RECEIPT", reply
        return list(self.pending)


@pytest.fixture
def raw_clients() -> Iterator[Callable[..., RawStomp]]:
    made: list[RawStomp] = []

    def factory(target: BrokerProcess | int, **options: Any) -> RawStomp:
        port = target.port if isinstance(target, BrokerProcess) else target
        client = RawStomp(port, **options)
        made.append(client)
        return client

    yield factory
    for client in made:
        client.close()
