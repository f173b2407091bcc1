"""Shared-store failover time, artemis-py beside Apache Artemis 2.56.0 (issue 31 §4).

    python bench/failover.py                 # 20 rounds per target; about 5 minutes
    python bench/failover.py --rounds 2      # smoke

Both targets run the same pair files, ``etc/ha/shared-store-primary.xml`` and
``etc/ha/shared-store-backup.xml``, unchanged: artemis-py reads them from the repository
and fills their ``${ARTEMIS_SHARED_DATA}``, ``${PRIMARY_STOMP_PORT}`` and
``${BACKUP_STOMP_PORT}`` from the environment; Apache Artemis runs the instances
``ha-primary`` and ``ha-backup`` made by ``bench/peers/artemis.sh install ha`` (whose
broker.xml are copies of those files, checked byte for byte here) with the same values as
JVM system properties (``JAVA_ARGS_APPEND``, which the instance's ``bin/artemis`` passes on).

A round, for one target:

1. an empty shared data directory; start the primary (``artemis-py run FILE``, or the
   instance's ``bin/artemis run``, which execs the JVM: the process this script starts is
   the JVM, checked in ``/proc/PID/cmdline``) and wait until it answers a STOMP CONNECT;
2. start the backup and wait until it logs AMQ221109 (waiting for its primary) with its
   STOMP port still closed: a pair that does not behave so fails the run;
3. send ``--messages`` persistent messages to ``/queue/failover-bench``, each with a
   receipt, all receipted; no consumer;
4. SIGKILL the primary (``os.kill`` of the PID the script holds) and, from a monotonic
   clock read just before the kill, measure **(a) accepting**: until a TCP connect and a
   STOMP CONNECT/CONNECTED exchange succeed on the backup's port (a new attempt every
   ``--poll`` s, 5 ms); **(b) first message**: until that same connection, subscribing
   (``ack:auto``) as soon as (a) succeeded, receives the first MESSAGE of the queue, which
   must be one of the round's;
5. check that the backup logged AMQ221010 (now active), then stop it (SIGTERM) and reap the
   primary.

Every round starts both nodes afresh on an empty directory, so rounds are independent: no
round measures a backup that has already failed over, or a JVM warmed by earlier rounds.
The targets take turns round by round (A B, B A, ...), so a machine that gets busier or
quieter weighs on both. Printed: a Markdown table with the median and the worst of (a) and
(b) per target and the ratios artemis-py / Artemis, the load average and whether a pytest
run was going on beside it. The JSON (every round's figures) and every node's log
(``failover-logs/TARGET/roundN-ROLE.log``) go to ``--results`` (default
``~/.cache/artemis-py-bench/results/<time>/``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as bench_run  # noqa: E402  (bench/run.py: artemis-py's command, the cache, logging)

TARGETS = ("artemis-py", "artemis")
LABELS = {"artemis-py": "artemis-py", "artemis": "Apache Artemis"}
ROLES = ("primary", "backup")
PAIR_FILES = {role: bench_run.ROOT / "etc" / "ha" / f"shared-store-{role}.xml" for role in ROLES}
PRIMARY_PORT, BACKUP_PORT = 61613, 61623  # the pair files' defaults; moved by --port-shift
QUEUE = "/queue/failover-bench"
BACKUP_WAITING = "AMQ221109"  # the backup started and waits for its primary
BACKUP_LIVE = "AMQ221010"  # the backup took over
ARTEMIS_VERSION = os.environ.get("ARTEMIS_VERSION", "2.56.0")


def log(text: str) -> None:
    bench_run.log(text)


# -- a minimal STOMP 1.2 client over one blocking socket ---------------------------------------


class StompError(Exception):
    """The node refused, closed or answered with something else than expected."""


def encode(command: str, headers: dict[str, str], body: str = "") -> bytes:
    lines = [command, *(f"{k}:{v}" for k, v in headers.items())]
    return ("\n".join(lines) + "\n\n" + body).encode() + b"\x00"


def decode(raw: bytes) -> tuple[str, dict[str, str], str]:
    """One frame without its NUL; leading EOLs (heart-beats) are skipped."""
    head, _, body = raw.lstrip(b"\r\n").partition(b"\n\n")
    command, *lines = head.decode().splitlines()
    headers: dict[str, str] = {}
    for line in lines:
        key, _, value = line.partition(":")
        headers.setdefault(key, value)  # STOMP 1.2: the first of repeated headers wins
    return command, headers, body.decode()


class Stomp:
    """CONNECT on ``port`` and wait for CONNECTED; raises :class:`StompError` or OSError."""

    def __init__(self, port: int, timeout: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.send("CONNECT", {"accept-version": "1.2", "host": "127.0.0.1"})
            command, headers, body = self.frame(timeout)
            if command != "CONNECTED":
                raise StompError(f"{command} to CONNECT: {headers.get('message', body)!r}")
        except BaseException:
            self.sock.close()
            raise

    def send(self, command: str, headers: dict[str, str], body: str = "") -> None:
        self.sock.sendall(encode(command, headers, body))

    def frame(self, timeout: float) -> tuple[str, dict[str, str], str]:
        deadline = time.monotonic() + timeout
        while b"\x00" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StompError(f"no frame within {timeout:g} s")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                raise StompError("connection closed by the node")
            self.buffer += data
        raw, _, self.buffer = self.buffer.partition(b"\x00")
        return decode(raw)

    def close(self) -> None:
        self.sock.close()


def try_connect(port: int, timeout: float) -> Stomp | None:
    try:
        return Stomp(port, timeout)
    except (OSError, StompError):
        return None


def send_persistent(port: int, bodies: list[str]) -> None:
    """SEND each body (persistent, with a receipt), then wait for every receipt."""
    client = Stomp(port, 10)
    try:
        for i, body in enumerate(bodies):
            headers = {"destination": QUEUE, "persistent": "true", "receipt": f"r{i}"}
            client.send("SEND", headers, body)
        waiting = {f"r{i}" for i in range(len(bodies))}
        while waiting:
            command, headers, body = client.frame(10)
            if command != "RECEIPT":
                raise StompError(f"{command} instead of a RECEIPT: {headers} {body!r}")
            waiting.discard(headers.get("receipt-id", ""))
    finally:
        client.close()


# -- the pair ----------------------------------------------------------------------------------


class Node:
    """One process of a pair, its output (the node's log) in a file."""

    def __init__(self, role: str, argv: list[str], env: dict[str, str], logfile: Path) -> None:
        self.role, self.logfile = role, logfile
        with open(logfile, "wb") as out:
            self.process = subprocess.Popen(
                argv, env=env, cwd=logfile.parent, stdout=out, stderr=out, stdin=subprocess.DEVNULL
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.logfile.read_text(errors="replace")

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def check_running(self, what: str) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(
                f"the {self.role} exited ({self.process.returncode}) {what}; its log "
                f"{self.logfile} ends:\n{self.tail()}"
            )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait()


@dataclass
class Target:
    name: str
    argv: dict[str, list[str]]  # per role
    env: dict[str, str]
    shared: Path  # the pair's data directory, emptied before each round
    ports: tuple[int, int]  # STOMP: the primary's, the backup's
    instance: dict[str, Path] = field(default_factory=dict)  # Artemis: per role


def artemis_py_target(workdir: Path, shift: int) -> Target:
    shared = workdir / "artemis-py" / "shared"
    env = dict(
        os.environ,
        ARTEMIS_SHARED_DATA=str(shared),
        PRIMARY_STOMP_PORT=str(PRIMARY_PORT + shift),
        BACKUP_STOMP_PORT=str(BACKUP_PORT + shift),
    )
    env.pop("ARTEMIS_DATA", None)
    command = bench_run.artemis_py_command()
    log(f"artemis-py: {command[0]}")
    argv = {role: [*command, "run", str(PAIR_FILES[role])] for role in ROLES}
    return Target("artemis-py", argv, env, shared, (PRIMARY_PORT + shift, BACKUP_PORT + shift))


def artemis_target(workdir: Path, shift: int) -> Target:
    env = dict(os.environ, BENCH_PORT_SHIFT=str(shift))
    subprocess.run([str(bench_run.PEERS / "artemis.sh"), "install", "ha"], check=True, env=env)
    suffix = f"-shift{shift}" if shift else ""
    instances = bench_run.CACHE / "artemis" / "instances" / ARTEMIS_VERSION
    instance = {role: instances / f"ha-{role}{suffix}" for role in ROLES}
    for role in ROLES:
        config = instance[role] / "etc" / "broker.xml"
        if config.read_bytes() != PAIR_FILES[role].read_bytes():
            raise RuntimeError(f"{config} is not a copy of {PAIR_FILES[role]}")
    shared = workdir / "artemis" / "shared"
    env["JAVA_ARGS_APPEND"] = (
        f"-DARTEMIS_SHARED_DATA={shared} -DPRIMARY_STOMP_PORT={PRIMARY_PORT + shift} "
        f"-DBACKUP_STOMP_PORT={BACKUP_PORT + shift}"
    )
    argv = {role: [str(instance[role] / "bin" / "artemis"), "run"] for role in ROLES}
    return Target(
        "artemis", argv, env, shared, (PRIMARY_PORT + shift, BACKUP_PORT + shift), instance
    )


def check_jvm(target: Target, node: Node) -> None:
    """The PID to SIGKILL must be the instance's JVM itself, not the shell script that starts
    it: ``bin/artemis`` execs java, so the PID becomes the JVM's within a moment."""
    if not target.instance:
        return
    expected = f"-Dartemis.instance={target.instance[node.role]}".encode()

    def is_jvm() -> bool:
        node.check_running("before its JVM started")
        cmdline = Path(f"/proc/{node.pid}/cmdline").read_bytes().split(b"\x00")
        return os.path.basename(cmdline[0]) == b"java" and expected in cmdline

    wait_for(is_jvm, 10, f"pid {node.pid} becoming the {node.role}'s JVM ({expected.decode()})")


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s: {what}")
        time.sleep(interval)


@contextlib.contextmanager
def started_pair(target: Target, results: Path, number: int) -> Iterator[tuple[Node, Node]]:
    """Start the primary, then the backup once the primary serves STOMP; stop both at exit.
    The nodes' logs are kept beside the JSON report."""
    shutil.rmtree(target.shared, ignore_errors=True)
    target.shared.mkdir(parents=True)
    logs = results / "failover-logs" / target.name
    logs.mkdir(parents=True, exist_ok=True)
    primary_port, backup_port = target.ports
    for port in (primary_port, backup_port):
        if bench_run.port_open(port):
            raise RuntimeError(f"port {port} is in use by something else; stop it first")
    nodes: list[Node] = []
    try:

        def start(role: str) -> Node:
            node = Node(role, target.argv[role], target.env, logs / f"round{number}-{role}.log")
            nodes.append(node)
            return node

        primary = start("primary")
        check_jvm(target, primary)

        def serves() -> bool:
            primary.check_running("before serving STOMP")
            client = try_connect(primary_port, 2)
            if client:
                client.close()
            return client is not None

        wait_for(serves, 120, f"{target.name}'s primary serving STOMP on {primary_port}")
        backup = start("backup")
        check_jvm(target, backup)

        def waiting() -> bool:
            backup.check_running(f"before logging {BACKUP_WAITING}")
            return BACKUP_WAITING in backup.log()

        wait_for(
            waiting,
            120,
            f"{target.name}'s backup logging {BACKUP_WAITING} (waiting for its primary): not a "
            f"shared-store pair? see {backup.logfile}",
        )
        if bench_run.port_open(backup_port):
            raise RuntimeError(
                f"{target.name}'s backup serves port {backup_port} while its primary lives: "
                f"not a waiting shared-store backup; see {backup.logfile}"
            )
        yield primary, backup
    finally:
        for node in reversed(nodes):
            node.stop()


@dataclass
class Round:
    target: str
    number: int
    accepting_s: float
    first_message_s: float
    attempts: int  # connection attempts on the backup until (a)


def failover_round(target: Target, results: Path, number: int, args: argparse.Namespace) -> Round:
    primary_port, backup_port = target.ports
    with started_pair(target, results, number) as (primary, backup):
        bodies = [f"round{number}-m{i}" for i in range(args.messages)]
        send_persistent(primary_port, bodies)
        primary.check_running("after the messages were sent")
        began = time.monotonic()
        os.kill(primary.pid, signal.SIGKILL)
        attempts = 0
        deadline = began + args.timeout
        while True:
            attempts += 1
            client = try_connect(backup_port, 5)
            if client:
                break
            if time.monotonic() > deadline:
                backup.check_running("after the primary's death")
                raise RuntimeError(
                    f"{target.name}: the backup accepted no STOMP connection within "
                    f"{args.timeout:g} s of the kill; see {backup.logfile}"
                )
            time.sleep(args.poll)
        accepted = time.monotonic()
        try:
            client.send("SUBSCRIBE", {"id": "0", "destination": QUEUE, "ack": "auto"})
            while True:
                command, headers, body = client.frame(args.timeout)
                if command == "MESSAGE":
                    break
                if command == "ERROR":
                    raise StompError(f"ERROR on SUBSCRIBE: {headers.get('message', body)!r}")
            delivered = time.monotonic()
        finally:
            client.close()
        if body not in bodies:
            raise RuntimeError(f"{target.name}: the first message after failover is {body!r}")
        primary.process.wait(10)
        wait_for(
            lambda: BACKUP_LIVE in backup.log(),
            10,
            f"{target.name}'s backup logging {BACKUP_LIVE} (now active); see {backup.logfile}",
        )
    return Round(
        target.name, number, round(accepted - began, 6), round(delivered - began, 6), attempts
    )


# -- report ------------------------------------------------------------------------------------


def summary(rounds: list[Round]) -> dict[str, float]:
    a = [r.accepting_s for r in rounds]
    b = [r.first_message_s for r in rounds]
    return {
        "rounds": len(rounds),
        "accepting_median_s": statistics.median(a),
        "accepting_worst_s": max(a),
        "first_message_median_s": statistics.median(b),
        "first_message_worst_s": max(b),
    }


KEYS = (
    "accepting_median_s",
    "accepting_worst_s",
    "first_message_median_s",
    "first_message_worst_s",
)


def table(summaries: dict[str, dict[str, float]]) -> str:
    lines = [
        "| target | rounds | (a) accepting: median | worst | (b) first message: median | worst |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for name, s in summaries.items():
        cells = " | ".join(f"{s[k]:.3f} s" for k in KEYS)
        lines.append(f"| {LABELS[name]} | {s['rounds']} | {cells} |")
    ours, theirs = summaries.get("artemis-py"), summaries.get("artemis")
    if ours and theirs:
        cells = " | ".join(f"**{ours[k] / theirs[k]:.2f}**" for k in KEYS)
        lines.append(f"| **artemis-py / Artemis** | | {cells} |")
    return "\n".join(lines)


def test_suite_running() -> bool:
    """A test suite beside the run (this machine's CI): the report says so."""
    return subprocess.run(["pgrep", "-f", "pytest"], capture_output=True).returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--messages", type=int, default=10, help="persistent messages per round")
    parser.add_argument("--poll", type=float, default=0.005, help="s between connect attempts")
    parser.add_argument("--timeout", type=float, default=60, help="s for (a) and for (b)")
    parser.add_argument("--port-shift", type=int, default=0)
    parser.add_argument("--results", type=Path, help="directory of the JSON report")
    args = parser.parse_args()
    names = [t for t in args.targets.split(",") if t]
    unknown = set(names) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets {sorted(unknown)}; choose among {', '.join(TARGETS)}")
    results = args.results or bench_run.CACHE / "results" / time.strftime("%Y%m%d-%H%M%S")
    results.mkdir(parents=True, exist_ok=True)
    load_before, busy_before = os.getloadavg(), test_suite_running()
    rounds: dict[str, list[Round]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="artemis-py-failover-") as tmp:
        workdir = Path(tmp)
        makers = {"artemis-py": artemis_py_target, "artemis": artemis_target}
        targets = [makers[name](workdir, args.port_shift) for name in names]
        for number in range(1, args.rounds + 1):
            order = targets if number % 2 else targets[::-1]
            for target in order:
                done = failover_round(target, results, number, args)
                rounds[target.name].append(done)
                log(
                    f"round {number} {target.name}: accepting {done.accepting_s:.3f} s, first "
                    f"message {done.first_message_s:.3f} s ({done.attempts} attempts)"
                )
    summaries = {name: summary(done) for name, done in rounds.items()}
    load_after, busy_after = os.getloadavg(), test_suite_running()
    print(table(summaries))
    print(
        f"\nload average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}; "
        f"a pytest run beside: {'yes' if busy_before or busy_after else 'no'} "
        f"(before: {busy_before}, after: {busy_after})"
    )
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "artemis_version": ARTEMIS_VERSION,
        "options": {k: str(v) for k, v in vars(args).items()},
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "pytest_running_before": busy_before,
        "pytest_running_after": busy_after,
        "summary": summaries,
        "rounds": {name: [asdict(r) for r in done] for name, done in rounds.items()},
    }
    path = results / "failover.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
