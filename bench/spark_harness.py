"""The Spark benchmark's harness (``bench/spark.py``): nodes, queues, CLI clients, CPU use.

* :func:`running_nodes`: ``artemis-py run`` processes on free ports with their data in a
  directory of the caller's, linked in a cluster with message load balancing OFF (a message
  stays on the node it was sent to), stopped with SIGTERM at the end.
* :func:`held` / :func:`clear` / :func:`expect_held`: what each node holds in a queue, by
  the offset listing the Spark source uses, and acknowledging it all away.
* :func:`producers` / :func:`consumers`: ``artemis-py producer`` / ``consumer`` processes
  run at once (a :class:`Fleet`: wall time and their summary lines); :func:`client_drain`:
  windowed client connections in this process.
* :func:`cpu_now`: CPU seconds used so far by the Spark JVM, its Python workers, the nodes
  and this process with its reaped children (from ``/proc``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

from artemis_py.client import open_stomp_connection
from artemis_py.client.offset_reader import acknowledge_up_to, list_streams
from artemis_py.cluster.status import fetch_status
from artemis_py.transport.link import LinkError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import artemis_py_command, port_open  # the benchmark's own helpers

CLUSTER = "bench"
CLUSTER_USER = "bench-cluster"
CLUSTER_PASSWORD = "bench-cluster-secret"
CLIENT_ACK_EVERY = 1000
QUERY_TIMEOUT = 600.0  # seconds a query or a client fleet may take before the run gives up
NODE_XML = """<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <name>node{index}</name>
    <persistence-enabled>true</persistence-enabled>
    <security-enabled>false</security-enabled>
    <journal-directory>{data}/journal</journal-directory>
    <bindings-directory>{data}/bindings</bindings-directory>
    <paging-directory>{data}/paging</paging-directory>
    <large-messages-directory>{data}/largemessages</large-messages-directory>
    <acceptors>
      <acceptor name="stomp">tcp://127.0.0.1:{stomp}?protocols=STOMP;anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>
      <acceptor name="cluster">tcp://127.0.0.1:{core}?protocols=CORE</acceptor>
    </acceptors>
{cluster}
    <address-settings>
      <address-setting match="#">
        <dead-letter-address>DLQ</dead-letter-address>
        <auto-create-queues>true</auto-create-queues>
        <auto-create-addresses>true</auto-create-addresses>
        <auto-delete-queues>false</auto-delete-queues>
        <auto-delete-addresses>false</auto-delete-addresses>
        <redistribution-delay>-1</redistribution-delay>
      </address-setting>
    </address-settings>
    <addresses>
      <address name="DLQ"><anycast><queue name="DLQ"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""
# Every node lists every other as a static connector: the cluster forms without waiting
# for topology to spread. OFF: a message stays on the node it was sent to.
CLUSTER_XML = """    <connectors>
{connectors}
    </connectors>
    <cluster-user>{user}</cluster-user>
    <cluster-password>{password}</cluster-password>
    <cluster-connections>
      <cluster-connection name="{name}">
        <connector-ref>self</connector-ref>
        <retry-interval>200</retry-interval>
        <message-load-balancing>OFF</message-load-balancing>
        <max-hops>1</max-hops>
        <static-connectors>
{static}
        </static-connectors>
      </cluster-connection>
    </cluster-connections>"""


class BenchError(Exception):
    """A failure the run reports in one line (a node, a client or a check)."""


def log(text: str) -> None:
    print(f"[spark-bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free now (all held open together so none repeats)."""
    with contextlib.ExitStack() as stack:
        sockets = []
        for _ in range(count):
            s = stack.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise BenchError(f"{what} not within {timeout:g} s")
        time.sleep(0.1)


# -- nodes ----------------------------------------------------------------------------------


@dataclass
class Node:
    index: int
    stomp: int
    core: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.stomp}"


def node_xml(node: Node, nodes: Sequence[Node]) -> str:
    cluster = ""
    if len(nodes) > 1:
        connectors = "\n".join(
            f'      <connector name="{"self" if n is node else f"node{n.index}"}">'
            f"tcp://127.0.0.1:{n.core}</connector>"
            for n in nodes
        )
        static = "\n".join(
            f"          <connector-ref>node{n.index}</connector-ref>"
            for n in nodes
            if n is not node
        )
        cluster = CLUSTER_XML.format(
            connectors=connectors,
            static=static,
            user=CLUSTER_USER,
            password=CLUSTER_PASSWORD,
            name=CLUSTER,
        )
    return NODE_XML.format(
        index=node.index,
        data=node.directory / "data",
        stomp=node.stomp,
        core=node.core,
        cluster=cluster,
    )


def formed(nodes: Sequence[Node]) -> bool:
    """Every node has a connected bridge to every other (the status API's view)."""
    if len(nodes) < 2:
        return True
    try:
        views = [
            trio.run(
                functools.partial(
                    fetch_status,
                    "127.0.0.1",
                    n.core,
                    cluster=CLUSTER,
                    user=CLUSTER_USER,
                    password=CLUSTER_PASSWORD,
                )
            )
            for n in nodes
        ]
    except LinkError:
        return False
    ids = {view["node_id"] for view in views}
    return len(ids) == len(nodes) and all(
        {b["node_id"] for b in view["bridges"] if b["connected"]} >= ids - {view["node_id"]}
        for view in views
    )


@contextlib.contextmanager
def running_nodes(count: int, workdir: Path) -> Iterator[list[Node]]:
    """``count`` nodes in a cluster (or one alone), stopped (SIGTERM, then SIGKILL) at the end."""
    ports = free_ports(2 * count)
    nodes = [
        Node(i + 1, ports[2 * i], ports[2 * i + 1], workdir / f"node{i + 1}") for i in range(count)
    ]
    try:
        for node in nodes:
            node.directory.mkdir(parents=True)
            config = node.directory / "broker.xml"
            config.write_text(node_xml(node, nodes))
            with open(node.directory / "node.log", "ab") as logfile:  # the child keeps a copy
                node.process = subprocess.Popen(
                    [*artemis_py_command(), "run", str(config)],
                    cwd=node.directory, stdout=logfile, stderr=logfile,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # a Ctrl-C reaches the bench, which stops the nodes
                )  # fmt: skip

        def listening() -> bool:
            for node in nodes:
                assert node.process is not None
                if node.process.poll() is not None:
                    tail = (node.directory / "node.log").read_text(errors="replace")[-800:]
                    raise BenchError(f"node{node.index} exited at start:\n{tail}")
            return all(port_open(n.stomp) for n in nodes)

        wait_until(listening, 60, "the nodes' STOMP ports to open")
        wait_until(lambda: formed(nodes), 60, "the cluster to form")
        yield nodes
    finally:
        stop_nodes(nodes)


def stop_nodes(nodes: Sequence[Node]) -> None:
    alive = [n.process for n in nodes if n.process is not None and n.process.poll() is None]
    for process in alive:
        process.send_signal(signal.SIGTERM)
    for process in alive:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- queues ---------------------------------------------------------------------------------


async def _held(url: str, queue: str) -> int:
    host, port = url.removeprefix("tcp://").rsplit(":", 1)
    async with open_stomp_connection(host, int(port)) as conn:
        listing = await list_streams(conn, queue)
    return sum(stream.count for stream in listing.streams)


def held(nodes: Sequence[Node], queue: str) -> list[int]:
    """Messages each node holds in ``queue``."""
    return [trio.run(_held, node.url, queue) for node in nodes]


def clear(nodes: Sequence[Node], queue: str) -> None:
    """Acknowledge everything ``queue`` holds on every node (keeps the nodes' memory flat)."""

    async def work(url: str) -> None:
        host, port = url.removeprefix("tcp://").rsplit(":", 1)
        async with open_stomp_connection(host, int(port)) as conn:
            for stream in (await list_streams(conn, queue)).streams:
                if stream.count:
                    await acknowledge_up_to(conn, queue, stream.stream, stream.end)

    for node in nodes:
        trio.run(work, node.url)


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` nearly equal shares, larger first (as spark.range)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


@dataclass
class Fleet:
    """A set of CLI clients run at once: wall time and each one's summary line."""

    wall: float
    summaries: list[str] = field(default_factory=list)

    def own_rate(self, total: int) -> float:
        """``total`` over the longest time a client reported for itself (no process start)."""
        longest = max(float(line.split(" in ", 1)[1].split(" s", 1)[0]) for line in self.summaries)
        return total / longest if longest > 0 else 0.0


def run_fleet(commands: Sequence[list[str]], what: str) -> Fleet:
    """Run ``commands`` in parallel; raise BenchError with the stderr of one that failed."""
    began = time.perf_counter()
    processes = [
        subprocess.Popen(
            c,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        for c in commands
    ]
    try:
        outputs = [p.communicate(timeout=QUERY_TIMEOUT) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    wall = time.perf_counter() - began
    for process, (_, err) in zip(processes, outputs, strict=True):
        if process.returncode != 0:
            lines = err.decode(errors="replace").strip().splitlines() or ["(no output)"]
            raise BenchError(f"{what} exited with {process.returncode}: {lines[-1]}")
    return Fleet(wall, [out.decode().strip().splitlines()[-1] for out, _ in outputs])


def producers(targets: Sequence[tuple[str, int]], queue: str, size: int) -> Fleet:
    """One ``artemis-py producer --no-receipts`` per (url, count): persistent, pipelined."""
    commands = [
        [
            *artemis_py_command(),
            "producer",
            "--url",
            url,
            "--destination",
            f"queue://{queue}",
            "--message-count",
            str(count),
            "--message-size",
            str(size),
            "--persistent",
            "--no-receipts",
            "--no-progress",
        ]
        for url, count in targets
        if count
    ]
    return run_fleet(commands, "artemis-py producer")


def consumers(targets: Sequence[tuple[str, int]], queue: str) -> Fleet:
    commands = [
        [
            *artemis_py_command(),
            "consumer",
            "--url",
            url,
            "--destination",
            f"queue://{queue}",
            "--message-count",
            str(count),
            "--no-progress",
            "--timeout",
            "60",
        ]
        for url, count in targets
        if count
    ]
    return run_fleet(commands, "artemis-py consumer")


async def _drain(url: str, queue: str, count: int) -> None:
    host, port = url.removeprefix("tcp://").rsplit(":", 1)
    async with open_stomp_connection(host, int(port)) as conn:
        sub = await conn.subscribe(
            f"/queue/{queue}", ack="client", headers={"consumer-window-size": str(1 << 20)}
        )
        for number in range(1, count + 1):
            message = await sub.receive()
            if number % CLIENT_ACK_EVERY == 0 or number == count:
                await conn.ack(message)  # cumulative: this one and every one before
        await conn.disconnect()  # its receipt confirms the acknowledgements


def client_drain(targets: Sequence[tuple[str, int]], queue: str) -> float:
    """Seconds for one windowed client connection per node, in this process, to take
    ``count`` messages each (1 MiB window, a cumulative ACK every CLIENT_ACK_EVERY)."""

    async def work() -> None:
        with trio.fail_after(QUERY_TIMEOUT):
            async with trio.open_nursery() as nursery:
                for url, count in targets:
                    nursery.start_soon(_drain, url, queue, count)

    began = time.perf_counter()
    trio.run(work)
    return time.perf_counter() - began


def expect_held(nodes: Sequence[Node], queue: str, total: int, after: str) -> None:
    counts = held(nodes, queue)
    if sum(counts) != total:
        raise BenchError(f"after {after}, queue {queue} holds {counts} messages, not {total}")


# -- CPU use --------------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU seconds, reaped children's CPU seconds) from /proc, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return int(fields[1]), (utime + stime) / _TICK, (cutime + cstime) / _TICK


def _tree(root: int) -> tuple[float, float]:
    """(``root``'s own CPU seconds, those of its descendants, reaped ones included)."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (found := _stat(int(entry))) is not None:
            stats[int(entry)] = found
    if root not in stats:
        return 0.0, 0.0
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    below, stack = stats[root][2], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        below += stats[pid][1] + stats[pid][2]
        stack.extend(children.get(pid, []))
    return stats[root][1], below


@dataclass(frozen=True)
class Cpu:
    """CPU seconds used by each party (a reading, or the difference of two)."""

    jvm: float = 0.0
    workers: float = 0.0  # the JVM's Python workers (its child processes)
    nodes: float = 0.0
    bench: float = 0.0  # this process (Spark's driver side) and the CLI clients it ran

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(
            self.jvm - other.jvm,
            self.workers - other.workers,
            self.nodes - other.nodes,
            self.bench - other.bench,
        )


def cpu_now(jvm: int | None, nodes: Sequence[Node]) -> Cpu:
    own, below = _tree(jvm) if jvm is not None else (0.0, 0.0)
    node_cpu = sum(sum(_tree(n.process.pid)) for n in nodes if n.process is not None)
    t = os.times()
    return Cpu(own, below, node_cpu, t.user + t.system + t.children_user + t.children_system)
