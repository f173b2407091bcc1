"""HA failover time, artemis-py beside Apache Artemis 2.56.0 (issue 31 §4): a shared-store
pair and a replicated (shared-nothing) pair.

    python bench/failover.py                       # shared store, 20 rounds per target
    python bench/failover.py --mode replication    # the replicated pair
    python bench/failover.py --mode both --rounds 2   # smoke

Both targets run the same pair files unchanged, ``etc/ha/shared-store-{primary,backup}.xml``
or ``etc/ha/replication-{primary,backup}.xml`` (:data:`MODES`): artemis-py reads them from
the repository and fills their ``${...}`` (data directories, STOMP ports, and for
replication the cluster ports and password: :func:`pair_values`) from the environment;
Apache Artemis runs the instances made by ``bench/peers/artemis.sh install ha`` (``ha-*``)
or ``install replication`` (``repl-*``), whose broker.xml are copies of those files
(checked byte for byte here), with the same values as JVM system properties
(``JAVA_ARGS_APPEND``, which the instance's ``bin/artemis`` passes on).

A round, for one target:

1. empty data directories (shared store: one for both nodes; replication: one per node);
   start the primary (``artemis-py run FILE``, or the instance's ``bin/artemis run``, which
   execs the JVM: the process this script starts is the JVM, checked in
   ``/proc/PID/cmdline``) and wait until it answers a STOMP CONNECT;
2. start the backup and wait until it is ready with its STOMP port still closed: shared
   store, it logs AMQ221109 (waiting for its primary); replication, AMQ221024 (synchronized
   with its primary); a pair that does not behave so fails the run;
3. send ``--messages`` persistent messages to ``/queue/failover-bench``, each with a
   receipt, all receipted (replication: so both nodes have them); no consumer;
4. SIGKILL the primary (``os.kill`` of the PID the script holds) and, from a monotonic
   clock read just before the kill, measure **(a) accepting**: until a TCP connect and a
   STOMP CONNECT/CONNECTED exchange succeed on the backup's port (a new attempt every
   ``--poll`` s, 5 ms); **(b) first message**: until that same connection, subscribing
   (``ack:auto``) as soon as (a) succeeded, receives the first MESSAGE of the queue, which
   must be one of the round's; then that connection receives the rest: every receipted
   message must come (**lost** = 0, or the run fails);
5. check that the backup logged that it took over (shared store: AMQ221010, now active;
   replication: AMQ221037, "to become 'active'", which both log), keep the codes it logged
   after the kill, then stop it (SIGTERM) and reap the primary.

Every round starts both nodes afresh on an empty directory, so rounds are independent: no
round measures a backup that has already failed over, or a JVM warmed by earlier rounds.
The targets take turns round by round (A B, B A, ...), so a machine that gets busier or
quieter weighs on both. Printed: a Markdown table with the median and the worst of (a) and
(b) per target, the messages lost, and the ratios artemis-py / Artemis, per mode; the codes
each backup logged after the kill; the load average and whether a pytest run was going on
beside it. The JSON (every round's figures) and every node's log
(``failover-logs/MODE/TARGET/roundN-ROLE.log``) go to ``--results`` (default
``~/.cache/artemis-py-bench/results/<time>/``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
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
from stomp_client import Stomp, StompError, send_persistent, try_connect  # noqa: E402

TARGETS = ("artemis-py", "artemis")
LABELS = {"artemis-py": "artemis-py", "artemis": "Apache Artemis"}
ROLES = ("primary", "backup")
# The pair files' defaults, all moved by --port-shift: STOMP, and the replicated pair's
# cluster acceptors (the backup's replication link dials the primary's).
PRIMARY_PORT, BACKUP_PORT = 61613, 61623
PRIMARY_CLUSTER_PORT, BACKUP_CLUSTER_PORT = 61616, 61626
# The replicated pair's ${ARTEMIS_CLUSTER_PASSWORD}, the same for both targets.
CLUSTER_PASSWORD = os.environ.get("ARTEMIS_CLUSTER_PASSWORD", "bench-cluster-secret")
QUEUE = "/queue/failover-bench"
ARTEMIS_VERSION = os.environ.get("ARTEMIS_VERSION", "2.56.0")


@dataclass(frozen=True)
class Mode:
    """A kind of pair: its etc/ha files, its bench/peers/artemis.sh layout and what its backup
    logs (the same codes for both targets, as observed in Artemis 2.56.0's logs)."""

    name: str  # etc/ha/NAME-primary.xml, etc/ha/NAME-backup.xml
    layout: str  # artemis.sh's layout; its instances are LAYOUT_PREFIX-primary, -backup
    instance_prefix: str
    backup_ready: tuple[str, str]  # code and meaning: ready to take over, before the kill
    backup_live: tuple[str, str]  # code and meaning: it took over, after the kill

    def pair_file(self, role: str) -> Path:
        return bench_run.ROOT / "etc" / "ha" / f"{self.name}-{role}.xml"


MODES = {
    "shared-store": Mode(
        "shared-store",
        "ha",
        "ha",
        ("AMQ221109", "waiting for its primary"),
        ("AMQ221010", "backup server is now active"),
    ),
    # Artemis's replicated backup does not log AMQ221010 but AMQ221037 ("to become 'active'")
    # after AMQ221083 (a lone pair: no quorum to ask); artemis-py logs both.
    "replication": Mode(
        "replication",
        "replication",
        "repl",
        ("AMQ221024", "synchronized with its primary"),
        ("AMQ221037", "to become 'active'"),
    ),
}


def log(text: str) -> None:
    bench_run.log(text)


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
    mode: Mode
    argv: dict[str, list[str]]  # per role
    env: dict[str, dict[str, str]]  # per role
    data: dict[str, Path]  # per role (shared store: the same); emptied before each round
    ports: tuple[int, int]  # STOMP: the primary's, the backup's
    cluster_ports: tuple[int, ...]  # other ports the pair listens on (replication)
    instance: dict[str, Path] = field(default_factory=dict)  # Artemis: per role


def pair_values(mode: Mode, data: dict[str, Path], role: str, shift: int) -> dict[str, str]:
    """What fills the ${...} of ROLE's pair file: environment variables for artemis-py,
    JVM system properties for Artemis."""
    values = {
        "PRIMARY_STOMP_PORT": str(PRIMARY_PORT + shift),
        "BACKUP_STOMP_PORT": str(BACKUP_PORT + shift),
    }
    if mode.name == "shared-store":
        values["ARTEMIS_SHARED_DATA"] = str(data[role])
    else:
        values["ARTEMIS_DATA"] = str(data[role])
        values["PRIMARY_CLUSTER_PORT"] = str(PRIMARY_CLUSTER_PORT + shift)
        values["BACKUP_CLUSTER_PORT"] = str(BACKUP_CLUSTER_PORT + shift)
        values["ARTEMIS_CLUSTER_PASSWORD"] = CLUSTER_PASSWORD
    return values


def new_target(
    name: str, mode: Mode, workdir: Path, shift: int, argv: dict[str, list[str]]
) -> Target:
    """The data directories and ports of NAME's pair in MODE; ``env`` is filled by the
    caller from :func:`pair_values`."""
    base = workdir / mode.name / name
    if mode.name == "shared-store":
        data = dict.fromkeys(ROLES, base / "shared")
        cluster_ports: tuple[int, ...] = ()
    else:
        data = {role: base / role for role in ROLES}
        cluster_ports = (PRIMARY_CLUSTER_PORT + shift, BACKUP_CLUSTER_PORT + shift)
    ports = (PRIMARY_PORT + shift, BACKUP_PORT + shift)
    return Target(name, mode, argv, {}, data, ports, cluster_ports)


def artemis_py_target(mode: Mode, workdir: Path, shift: int) -> Target:
    command = bench_run.artemis_py_command()
    argv = {role: [*command, "run", str(mode.pair_file(role))] for role in ROLES}
    target = new_target("artemis-py", mode, workdir, shift, argv)
    base = {k: v for k, v in os.environ.items() if k not in ("ARTEMIS_DATA", "ARTEMIS_SHARED_DATA")}
    for role in ROLES:
        target.env[role] = base | pair_values(mode, target.data, role, shift)
    return target


def artemis_target(mode: Mode, workdir: Path, shift: int) -> Target:
    env = dict(os.environ, BENCH_PORT_SHIFT=str(shift))
    subprocess.run(
        [str(bench_run.PEERS / "artemis.sh"), "install", mode.layout], check=True, env=env
    )
    suffix = f"-shift{shift}" if shift else ""
    instances = bench_run.CACHE / "artemis" / "instances" / ARTEMIS_VERSION
    instance = {role: instances / f"{mode.instance_prefix}-{role}{suffix}" for role in ROLES}
    for role in ROLES:
        config = instance[role] / "etc" / "broker.xml"
        if config.read_bytes() != mode.pair_file(role).read_bytes():
            raise RuntimeError(f"{config} is not a copy of {mode.pair_file(role)}")
    argv = {role: [str(instance[role] / "bin" / "artemis"), "run"] for role in ROLES}
    target = new_target("artemis", mode, workdir, shift, argv)
    target.instance = instance
    for role in ROLES:
        values = pair_values(mode, target.data, role, shift)
        properties = " ".join(f"-D{k}={v}" for k, v in values.items())
        target.env[role] = env | {"JAVA_ARGS_APPEND": properties}
    return target


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
    for directory in set(target.data.values()):
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
    logs = results / "failover-logs" / target.mode.name / target.name
    logs.mkdir(parents=True, exist_ok=True)
    primary_port, backup_port = target.ports
    ready, meaning = target.mode.backup_ready
    for port in (*target.ports, *target.cluster_ports):
        if bench_run.port_open(port):
            raise RuntimeError(f"port {port} is in use by something else; stop it first")
    nodes: list[Node] = []
    try:

        def start(role: str) -> Node:
            logfile = logs / f"round{number}-{role}.log"
            node = Node(role, target.argv[role], target.env[role], logfile)
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

        def is_ready() -> bool:
            backup.check_running(f"before logging {ready}")
            return ready in backup.log()

        wait_for(
            is_ready,
            120,
            f"{target.name}'s backup logging {ready} ({meaning}): not a {target.mode.name} "
            f"pair? see {backup.logfile}",
        )
        if bench_run.port_open(backup_port):
            raise RuntimeError(
                f"{target.name}'s backup serves port {backup_port} while its primary lives: "
                f"not a waiting {target.mode.name} backup; see {backup.logfile}"
            )
        yield primary, backup
    finally:
        for node in reversed(nodes):
            node.stop()


@dataclass
class Round:
    mode: str
    target: str
    number: int
    accepting_s: float
    first_message_s: float
    attempts: int  # connection attempts on the backup until (a)
    receipted: int  # messages sent and receipted before the kill
    lost: int  # of those, not delivered by the backup (any makes the run fail)
    duplicates: int  # delivered more than once by the backup
    backup_codes: list[str]  # the AMQ codes the backup logged after the kill, in order


def connect_to_backup(
    target: Target, backup: Node, began: float, args: argparse.Namespace
) -> tuple[Stomp, int]:
    """(a): a new connection attempt every ``--poll`` s until the backup's STOMP port
    answers CONNECTED; returns the connection and the number of attempts."""
    attempts = 0
    while True:
        attempts += 1
        client = try_connect(target.ports[1], 5)
        if client:
            return client, attempts
        if time.monotonic() > began + args.timeout:
            backup.check_running("after the primary's death")
            raise RuntimeError(
                f"{target.name}: the backup accepted no STOMP connection within "
                f"{args.timeout:g} s of the kill; see {backup.logfile}"
            )
        time.sleep(args.poll)


def receive_all(client: Stomp, bodies: list[str], timeout: float) -> tuple[float, list[str]]:
    """(b): subscribe and wait for the first MESSAGE (its monotonic time is returned), then
    go on receiving until every one of ``bodies`` came or ``timeout`` s passed without one;
    returns the time and every body received, in order."""
    client.send("SUBSCRIBE", {"id": "0", "destination": QUEUE, "ack": "auto"})
    delivered, received, missing = 0.0, [], set(bodies)
    while missing:
        try:
            command, headers, body = client.frame(timeout)
        except StompError:
            if not received:
                raise
            break  # none for TIMEOUT s: the rest is lost
        if command == "ERROR":
            raise StompError(f"ERROR on SUBSCRIBE: {headers.get('message', body)!r}")
        if command == "MESSAGE":
            if not received:
                delivered = time.monotonic()
            received.append(body)
            missing.discard(body)
    return delivered, received


def failover_round(target: Target, results: Path, number: int, args: argparse.Namespace) -> Round:
    live, meaning = target.mode.backup_live
    with started_pair(target, results, number) as (primary, backup):
        bodies = [f"round{number}-m{i}" for i in range(args.messages)]
        send_persistent(target.ports[0], QUEUE, bodies)
        primary.check_running("after the messages were sent")
        before_kill = len(backup.log())
        began = time.monotonic()
        os.kill(primary.pid, signal.SIGKILL)
        client, attempts = connect_to_backup(target, backup, began, args)
        accepted = time.monotonic()
        try:
            delivered, received = receive_all(client, bodies, args.timeout)
        finally:
            client.close()
        if received[0] not in bodies:
            raise RuntimeError(
                f"{target.name}: the first message after failover is {received[0]!r}"
            )
        primary.process.wait(10)
        wait_for(
            lambda: live in backup.log(),
            10,
            f"{target.name}'s backup logging {live} ({meaning}); see {backup.logfile}",
        )
        codes = list(dict.fromkeys(re.findall(r"AMQ\d{6}", backup.log()[before_kill:])))
    lost = len(set(bodies) - set(received))
    if lost:
        raise RuntimeError(
            f"{target.name} ({target.mode.name}) LOST {lost} of {len(bodies)} receipted "
            f"messages in round {number}: received {received}; see {backup.logfile}"
        )
    return Round(
        target.mode.name,
        target.name,
        number,
        round(accepted - began, 6),
        round(delivered - began, 6),
        attempts,
        len(bodies),
        lost,
        len(received) - len(set(received)),
        codes,
    )


# -- report ------------------------------------------------------------------------------------


def summary(rounds: list[Round]) -> dict[str, Any]:
    a = [r.accepting_s for r in rounds]
    b = [r.first_message_s for r in rounds]
    return {
        "rounds": len(rounds),
        "accepting_median_s": statistics.median(a),
        "accepting_worst_s": max(a),
        "first_message_median_s": statistics.median(b),
        "first_message_worst_s": max(b),
        "receipted": sum(r.receipted for r in rounds),
        "lost": sum(r.lost for r in rounds),
        "duplicates": sum(r.duplicates for r in rounds),
        # Every code any round's backup logged after the kill, in the order first seen.
        "backup_codes": list(dict.fromkeys(c for r in rounds for c in r.backup_codes)),
    }


KEYS = (
    "accepting_median_s",
    "accepting_worst_s",
    "first_message_median_s",
    "first_message_worst_s",
)


def table(summaries: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| target | rounds | (a) accepting: median | worst | (b) first message: median | worst "
        "| lost |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for name, s in summaries.items():
        cells = " | ".join(f"{s[k]:.3f} s" for k in KEYS)
        lost = f"{s['lost']} of {s['receipted']}"
        lines.append(f"| {LABELS[name]} | {s['rounds']} | {cells} | {lost} |")
    ours, theirs = summaries.get("artemis-py"), summaries.get("artemis")
    if ours and theirs:
        cells = " | ".join(f"**{ours[k] / theirs[k]:.2f}**" for k in KEYS)
        lines.append(f"| **artemis-py / Artemis** | | {cells} | |")
    return "\n".join(lines)


def test_suite_running() -> bool:
    """A test suite beside the run (this machine's CI): the report says so."""
    return subprocess.run(["pgrep", "-f", "pytest"], capture_output=True).returncode == 0


def run_rounds(
    modes: list[Mode], names: list[str], results: Path, args: argparse.Namespace
) -> dict[str, dict[str, list[Round]]]:
    """Every target of every mode, ``--rounds`` times, taking turns (A B, B A, ...); the
    rounds per mode and target."""
    rounds: dict[str, dict[str, list[Round]]] = {m.name: {n: [] for n in names} for m in modes}
    with tempfile.TemporaryDirectory(prefix="artemis-py-failover-") as tmp:
        makers = {"artemis-py": artemis_py_target, "artemis": artemis_target}
        targets = [makers[n](m, Path(tmp), args.port_shift) for m in modes for n in names]
        if "artemis-py" in names:
            log(f"artemis-py: {bench_run.artemis_py_command()[0]}")
        for number in range(1, args.rounds + 1):
            for target in targets if number % 2 else targets[::-1]:
                done = failover_round(target, results, number, args)
                rounds[target.mode.name][target.name].append(done)
                log(
                    f"round {number} {target.mode.name} {target.name}: accepting "
                    f"{done.accepting_s:.3f} s, first message {done.first_message_s:.3f} s "
                    f"({done.attempts} attempts), lost {done.lost} of {done.receipted}"
                )
    return rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=(*MODES, "both"), default="shared-store")
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
    modes = list(MODES.values()) if args.mode == "both" else [MODES[args.mode]]
    results = args.results or bench_run.CACHE / "results" / time.strftime("%Y%m%d-%H%M%S")
    results.mkdir(parents=True, exist_ok=True)
    load_before, busy_before = os.getloadavg(), test_suite_running()
    rounds = run_rounds(modes, names, results, args)
    summaries = {
        mode: {name: summary(done) for name, done in per_target.items()}
        for mode, per_target in rounds.items()
    }
    load_after, busy_after = os.getloadavg(), test_suite_running()
    for mode, per_target in summaries.items():
        print(f"\n{mode} pair:\n\n{table(per_target)}\n")
        for name, s in per_target.items():
            print(f"- {LABELS[name]}'s backup logged after the kill: {' '.join(s['backup_codes'])}")
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
        "summary": summaries,  # per mode, per target
        "rounds": {
            mode: {name: [asdict(r) for r in done] for name, done in per_target.items()}
            for mode, per_target in rounds.items()
        },
    }
    path = results / "failover.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
