"""Many idle connections: what N STOMP connections with heart-beats cost a node (issue 29).

    python bench/connections.py                          # 10,000 connections; about 6 minutes
    python bench/connections.py --connections 300 --settle 3 --idle-window 3 --window 5

For each target in turn (artemis-py, then Apache Artemis 2.56.0; each node started by this
script and stopped before the next starts, so they never share the machine):

1. start the node (``bench/run.py``'s artemis-py instance, ``bench/peers/artemis.sh start``);
   wait ``--settle`` s, read its RSS (VmRSS, ``/proc/PID/status``) and its CPU over
   ``--idle-window`` s with nothing connected;
2. open ``--connections`` STOMP connections (CONNECT, ``accept-version:1.2``,
   ``heart-beat:10000,10000``), at most ``--concurrency`` connecting at once, each waiting
   for its CONNECTED; every connection sends its heart-beats as negotiated and checks the
   node's from then on;
3. wait ``--settle`` s, read the RSS again: (after - before) / N is the RSS per connection;
4. measure the node's CPU over ``--window`` s (utime + stime of every thread, and of the
   main thread alone: artemis-py's event loop), as a share of one core; the client's own
   CPU, the heart-beats each way, and the connections dropped or silent;
5. close the connections and stop the node.

The client is this one process: a ``select.epoll`` loop with a timer heap, a few µs per
heart-beat (its CPU is printed, to show it is not the limit). The open-files limit is raised
to the hard limit before the nodes start, so they inherit it; each node's own limit is read
from ``/proc/PID/limits`` and the run stops if it cannot hold N connections.

Printed: one Markdown table (a row per target, then artemis-py / Artemis), the failures by
kind, and the JSON written to ``--results``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import heapq
import itertools
import json
import os
import resource
import select
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as bench_run  # noqa: E402  (bench/run.py: the nodes, their ports and pids)

TARGETS = ("artemis-py", "artemis")
HEART_BEAT = (10_000, 10_000)
LATE_FACTOR = 1.5
"""A node's heart-beat counts as late when the gap since the connection's last byte passes
this many times the negotiated interval (STOMP leaves the tolerance to the receiver)."""
FD_MARGIN = 200
"""File descriptors a node needs besides its client connections (journal, logs, jars)."""


# -- pure helpers (tests/unit/bench/test_connections_bench.py) ---------------------------------


def connect_frame(heart_beat: tuple[int, int], login: str | None, passcode: str | None) -> bytes:
    lines = ["CONNECT", "accept-version:1.2", "host:127.0.0.1"]
    lines.append(f"heart-beat:{heart_beat[0]},{heart_beat[1]}")
    if login is not None:
        lines.append(f"login:{login}")
    if passcode is not None:
        lines.append(f"passcode:{passcode}")
    return ("\n".join(lines) + "\n\n\0").encode()


def parse_frame(raw: bytes) -> tuple[str, dict[str, str]]:
    """The command and headers of one frame (without its NUL); the first of a repeated
    header wins, as STOMP 1.2 says. Leading EOLs (heart-beats) are skipped."""
    head = raw.lstrip(b"\r\n").split(b"\n\n", 1)[0].decode("utf-8", "replace")
    lines = [line.rstrip("\r") for line in head.split("\n")]
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.setdefault(name, value)
    return lines[0], headers


def negotiate(client: tuple[int, int], server_header: str | None) -> tuple[float, float]:
    """(client sends every, client expects every) in seconds, from the CONNECT's
    ``heart-beat`` and the CONNECTED's (STOMP 1.2 "Heart-beating"); 0: none."""
    cx, cy = client
    sx, sy = (0, 0)
    if server_header:
        first, _, second = server_header.partition(",")
        sx, sy = int(first.strip() or 0), int(second.strip() or 0)
    send = max(cx, sy) if cx and sy else 0
    expect = max(sx, cy) if sx and cy else 0
    return send / 1000, expect / 1000


def heartbeat_count(data: bytes) -> int | None:
    """EOL heart-beats in ``data``, or None if it holds anything else (a frame)."""
    if data.strip(b"\r\n"):
        return None
    return data.count(b"\n")


def vm_rss_kib(status_text: str) -> int:
    """VmRSS in KiB from the text of /proc/PID/status."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError("no VmRSS line (a kernel thread, or not Linux)")


def open_files_limit(limits_text: str) -> int | None:
    """The soft 'Max open files' of /proc/PID/limits (None: unlimited)."""
    for line in limits_text.splitlines():
        if line.startswith("Max open files"):
            soft = line.split()[3]
            return None if soft == "unlimited" else int(soft)
    raise ValueError("no 'Max open files' line")


def ratio(ours: float | None, theirs: float | None) -> float | None:
    return None if ours is None or not theirs else ours / theirs


# -- the client -----------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """What the client saw; the window counters are reset by :meth:`Client.reset_window`."""

    established: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    dropped: int = 0
    heartbeats_sent: int = 0
    heartbeats_received: int = 0
    late: int = 0
    frames: list[str] = field(default_factory=list)
    negotiated: dict[str, int] = field(default_factory=dict)
    """Connections per negotiated "client sends every S s, the node every S s"."""

    def fail(self, kind: str) -> None:
        self.failures[kind] = self.failures.get(kind, 0) + 1


class Conn:
    __slots__ = (
        "began",
        "buf",
        "connected",
        "expect_every",
        "fd",
        "last_rx",
        "send_every",
        "sent",
        "sock",
    )  # fmt: skip

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.sent = False  # CONNECT sent
        self.connected = False  # CONNECTED received
        self.buf = b""
        self.send_every = 0.0
        self.expect_every = 0.0
        self.last_rx = now
        self.began = now


class Client:
    """N STOMP connections on one epoll loop; heart-beats sent from a timer heap."""

    def __init__(
        self, port: int, args: argparse.Namespace, heart_beat: tuple[int, int] = HEART_BEAT
    ) -> None:
        self.address = ("127.0.0.1", port)
        self.heart_beat = heart_beat
        self.frame = connect_frame(heart_beat, args.user, args.password)
        self.concurrency = args.concurrency
        self.connect_timeout = args.connect_timeout
        self.epoll = select.epoll()
        self.conns: dict[int, Conn] = {}
        self.connecting: dict[int, Conn] = {}
        self.timers: list[tuple[float, int, Conn]] = []
        self.seq = itertools.count()
        self.tally = Tally()
        self.window = Tally()

    def reset_window(self) -> None:
        self.window = Tally()

    def _close(self, conn: Conn) -> None:
        self.conns.pop(conn.fd, None)
        self.connecting.pop(conn.fd, None)
        with contextlib.suppress(OSError, ValueError):
            self.epoll.unregister(conn.fd)
        conn.sock.close()

    def _failed(self, conn: Conn, kind: str) -> None:
        if conn.connected:
            self.tally.dropped += 1
            self.window.dropped += 1
            self.tally.fail(f"dropped: {kind}")
        else:
            self.tally.fail(kind)
        self._close(conn)

    def _open(self) -> None:
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as exc:
            self.tally.fail(f"socket: {errno.errorcode.get(exc.errno or 0, exc)}")
            return
        sock.setblocking(False)
        conn = Conn(sock, time.monotonic())
        code = sock.connect_ex(self.address)
        if code not in (0, errno.EINPROGRESS):
            self.tally.fail(f"connect: {errno.errorcode.get(code, code)}")
            sock.close()
            return
        self.conns[conn.fd] = conn
        self.connecting[conn.fd] = conn
        self.epoll.register(conn.fd, select.EPOLLOUT)

    def _writable(self, conn: Conn) -> None:
        code = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self._failed(conn, f"connect: {errno.errorcode.get(code, code)}")
            return
        try:
            conn.sock.send(self.frame)  # a few dozen bytes into an empty buffer: all of it
        except OSError as exc:
            self._failed(conn, f"CONNECT: {errno.errorcode.get(exc.errno or 0, exc)}")
            return
        conn.sent = True
        self.epoll.modify(conn.fd, select.EPOLLIN)

    def _readable(self, conn: Conn, now: float) -> None:
        try:
            data = conn.sock.recv(65536)
        except OSError as exc:
            kind = errno.errorcode.get(exc.errno or 0, str(exc))
            self._failed(conn, kind if conn.connected else f"{kind} before CONNECTED")
            return
        if not data:
            self._failed(
                conn, "closed by the node" if conn.connected else "closed before CONNECTED"
            )
            return
        if not conn.connected:
            self._handshake(conn, data, now)
            return
        gap = now - conn.last_rx
        conn.last_rx = now
        if conn.expect_every and gap > conn.expect_every * LATE_FACTOR:
            self.tally.late += 1
            self.window.late += 1
        beats = heartbeat_count(data)
        if beats is None:
            if len(self.tally.frames) < 5:
                self.tally.frames.append(data[:200].decode("utf-8", "replace"))
            if b"ERROR" in data:
                self._failed(conn, "ERROR frame")
            return
        self.tally.heartbeats_received += beats
        self.window.heartbeats_received += beats

    def _handshake(self, conn: Conn, data: bytes, now: float) -> None:
        conn.buf += data
        if b"\0" not in conn.buf:
            return
        raw, conn.buf = conn.buf.split(b"\0", 1)
        command, headers = parse_frame(raw)
        if command != "CONNECTED":
            message = headers.get("message", "")[:80]
            self._failed(conn, f"{command}: {message}" if message else command)
            return
        conn.connected = True
        conn.last_rx = now
        del self.connecting[conn.fd]
        self.tally.established += 1
        conn.send_every, conn.expect_every = negotiate(self.heart_beat, headers.get("heart-beat"))
        key = f"client every {conn.send_every:g} s, node every {conn.expect_every:g} s"
        self.tally.negotiated[key] = self.tally.negotiated.get(key, 0) + 1
        if conn.send_every:
            heapq.heappush(self.timers, (now + conn.send_every, next(self.seq), conn))

    def _beat(self, now: float) -> None:
        timers = self.timers
        while timers and timers[0][0] <= now:
            due, _, conn = heapq.heappop(timers)
            if self.conns.get(conn.fd) is not conn:
                continue  # closed since
            try:
                conn.sock.send(b"\n")
            except BlockingIOError:
                pass  # the node reads nothing: its TTL will tell
            except OSError as exc:
                self._failed(conn, errno.errorcode.get(exc.errno or 0, str(exc)))
                continue
            self.tally.heartbeats_sent += 1
            self.window.heartbeats_sent += 1
            heapq.heappush(timers, (due + conn.send_every, next(self.seq), conn))

    def _expire(self, now: float) -> None:
        for conn in list(self.connecting.values()):
            if now - conn.began > self.connect_timeout:
                self._failed(conn, f"no CONNECTED within {self.connect_timeout:g} s")

    def run(self, seconds: float, open_up_to: int = 0) -> None:
        """Serve every connection for ``seconds`` (or, with ``open_up_to``, until that many
        connections have been tried and none is still connecting)."""
        deadline = time.monotonic() + seconds
        to_open = open_up_to
        next_expiry = 0.0
        while True:
            now = time.monotonic()
            if open_up_to:
                while to_open and len(self.connecting) < self.concurrency:
                    self._open()
                    to_open -= 1
                if not to_open and not self.connecting:
                    return
                if now >= next_expiry:
                    self._expire(now)
                    next_expiry = now + 1.0
            elif now >= deadline:
                return
            wake = deadline if not open_up_to else now + 0.05
            if self.timers:
                wake = min(wake, self.timers[0][0])
            for fd, events in self.epoll.poll(max(0.0, wake - now), 1024):
                conn = self.conns.get(fd)
                if conn is None:
                    continue
                if not conn.sent:
                    self._writable(conn)  # connected, or failed: SO_ERROR tells
                elif events & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
                    self._readable(conn, time.monotonic())
            self._beat(time.monotonic())

    def silent(self, now: float) -> int:
        """Connections whose node has sent nothing for longer than it should have."""
        return sum(
            1
            for c in self.conns.values()
            if c.connected and c.expect_every and now - c.last_rx > c.expect_every * LATE_FACTOR
        )

    def close(self) -> None:
        for conn in list(self.conns.values()):
            self._close(conn)
        self.epoll.close()


# -- measuring a node -----------------------------------------------------------------------


def proc_text(pid: int, name: str) -> str:
    return Path(f"/proc/{pid}/{name}").read_text()


def cpu_seconds(pid: int, main_thread: bool = False) -> float:
    from artemis_py.perf.runner import process_cpu_seconds

    return process_cpu_seconds((pid,), main_thread=main_thread)


def measure_cpu(pid: int, client: Client | None, seconds: float) -> dict[str, float]:
    """Shares of one core over ``seconds``: the node (all threads, main thread) and this
    client process; the client keeps its connections' heart-beats going meanwhile."""
    began = time.monotonic()
    node, loop = cpu_seconds(pid), cpu_seconds(pid, main_thread=True)
    own = time.process_time()
    if client is None:
        time.sleep(seconds)
    else:
        client.run(seconds)
    wall = time.monotonic() - began
    return {
        "seconds": round(wall, 3),
        "node_core_pct": round((cpu_seconds(pid) - node) / wall * 100, 2),
        "node_main_thread_core_pct": round(
            (cpu_seconds(pid, main_thread=True) - loop) / wall * 100, 2
        ),
        "client_core_pct": round((time.process_time() - own) / wall * 100, 2),
    }


@dataclass(slots=True)
class Result:
    target: str
    connections: int
    pid: int
    node_open_files_limit: int | None
    rss_started_kib: int = 0
    """RSS --settle s after the start; ``rss_before_kib`` is read after the idle window, right
    before connecting: their difference is the drift of a node left alone."""
    rss_before_kib: int = 0
    rss_after_kib: int = 0
    rss_end_kib: int = 0
    rss_per_connection_kib: float | None = None
    connect_seconds: float = 0.0
    idle: dict[str, float] = field(default_factory=dict)
    window: dict[str, float] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)


def measure_target(target: str, args: argparse.Namespace, workdir: Path) -> Result:
    with bench_run.target_nodes(target, False, workdir / target) as urls:
        port = bench_run.ports_of(urls)[0]
        pids = bench_run.listening_pids([port])
        if len(pids) != 1:
            raise RuntimeError(f"{target}: expected one process on port {port}, found {pids}")
        pid = pids[0]
        limit = open_files_limit(proc_text(pid, "limits"))
        if limit is not None and limit < args.connections + FD_MARGIN:
            raise RuntimeError(
                f"{target} (pid {pid}) may open {limit} files, fewer than {args.connections} "
                f"connections need; raise the hard limit (ulimit -Hn) and run again"
            )
        result = Result(target, args.connections, pid, limit)
        bench_run.log(f"{target}: pid {pid}, open files limit {limit}; settling {args.settle:g} s")
        time.sleep(args.settle)
        result.rss_started_kib = vm_rss_kib(proc_text(pid, "status"))
        result.idle = measure_cpu(pid, None, args.idle_window)
        result.rss_before_kib = vm_rss_kib(proc_text(pid, "status"))
        client = Client(port, args)
        try:
            bench_run.log(f"{target}: opening {args.connections} connections")
            began = time.monotonic()
            client.run(0, open_up_to=args.connections)
            result.connect_seconds = round(time.monotonic() - began, 2)
            bench_run.log(
                f"{target}: {client.tally.established} established in "
                f"{result.connect_seconds:g} s; settling {args.settle:g} s"
            )
            client.run(args.settle)
            result.rss_after_kib = vm_rss_kib(proc_text(pid, "status"))
            established = client.tally.established
            if established:
                growth = result.rss_after_kib - result.rss_before_kib
                result.rss_per_connection_kib = round(growth / established, 2)
            bench_run.log(f"{target}: measuring CPU over {args.window:g} s")
            client.reset_window()
            result.window = measure_cpu(pid, client, args.window)
            result.rss_end_kib = vm_rss_kib(proc_text(pid, "status"))
            window = client.window
            result.client = {
                "established": established,
                "open_at_end": sum(1 for c in client.conns.values() if c.connected),
                "failures": client.tally.failures,
                "negotiated": client.tally.negotiated,
                "dropped_in_window": window.dropped,
                "heartbeats_sent_per_s": round(window.heartbeats_sent / args.window, 1),
                "heartbeats_received_per_s": round(window.heartbeats_received / args.window, 1),
                "late_heartbeats_in_window": window.late,
                "silent_at_end": client.silent(time.monotonic()),
                "unexpected_frames": client.tally.frames,
            }
        finally:
            client.close()
    return result


# -- output ---------------------------------------------------------------------------------


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "–" if value is None else format(value, spec)


def table(results: list[Result]) -> str:
    head = [
        "target", "connections (established / asked)", "failed or dropped",
        "RSS before → after MiB (idle drift)", "**KiB per connection**", "idle CPU, % of a core",
        "**CPU with the connections, % of a core**", "main thread %", "client CPU %",
        "heart-beats out / in per s", "late / silent",
    ]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        c = r.client
        failed = sum(c.get("failures", {}).values())
        row = [
            r.target,
            f"{c.get('established', 0):,} / {r.connections:,}",
            f"{failed:,}",
            f"{r.rss_before_kib / 1024:.1f} → {r.rss_after_kib / 1024:.1f} "
            f"({(r.rss_before_kib - r.rss_started_kib) / 1024:+.1f})",
            f"**{fmt(r.rss_per_connection_kib)}**",
            fmt(r.idle.get("node_core_pct")),
            f"**{fmt(r.window.get('node_core_pct'))}**",
            fmt(r.window.get("node_main_thread_core_pct")),
            fmt(r.window.get("client_core_pct")),
            f"{c.get('heartbeats_sent_per_s', 0):,.0f} / {c.get('heartbeats_received_per_s', 0):,.0f}",
            f"{c.get('late_heartbeats_in_window', 0)} / {c.get('silent_at_end', 0)}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    by_target = {r.target: r for r in results}
    ours, theirs = by_target.get("artemis-py"), by_target.get("artemis")
    if ours and theirs:
        rss = ratio(ours.rss_per_connection_kib, theirs.rss_per_connection_kib)
        cpu = ratio(ours.window.get("node_core_pct"), theirs.window.get("node_core_pct"))
        row = ["**artemis-py / Artemis**", "", "", "", f"**{fmt(rss, '.2f')}**", "",
               f"**{fmt(cpu, '.2f')}**", "", "", "", ""]  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def raise_open_files(needed: int) -> tuple[int, int]:
    """Raise this process's soft limit to the hard one (the nodes started from here inherit
    it); the (soft, hard) pair now in force. Exits if the hard limit is too low."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < needed:
        sys.exit(
            f"connections.py: the open-files hard limit is {hard}, {needed} are needed "
            f"(the client holds every connection); raise it (ulimit -Hn, or LimitNOFILE) first"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def check_port_range(connections: int) -> None:
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    if high - low + 1 < connections + 100:
        sys.exit(
            f"connections.py: the local port range {low}-{high} is too small for "
            f"{connections} connections to one port; widen net.ipv4.ip_local_port_range"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated")
    parser.add_argument("--connections", type=int, default=10_000, metavar="N")
    parser.add_argument(
        "--window", type=float, default=60.0, help="seconds of CPU measurement (default 60)"
    )
    parser.add_argument(
        "--idle-window", type=float, default=10.0, help="CPU seconds with nothing connected"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=15.0,
        help="seconds after the start and after the last connection before reading the RSS "
        "(default 15: every connection has exchanged a heart-beat)",
    )
    parser.add_argument("--concurrency", type=int, default=100, help="connecting at once")
    parser.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS")
    parser.add_argument("--user", default=None)
    parser.add_argument("--password", default=None)
    parser.add_argument("--results", type=Path, default=None, help="directory for the JSON")
    parser.add_argument(
        "--port-shift", type=int, default=int(os.environ.get("BENCH_PORT_SHIFT", "0"))
    )
    args = parser.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    if set(targets) - set(TARGETS) or args.connections < 1 or args.concurrency < 1:
        parser.error(f"targets are {TARGETS}; --connections and --concurrency at least 1")
    bench_run.SHIFT = args.port_shift
    check_port_range(args.connections)
    soft, hard = raise_open_files(args.connections + FD_MARGIN)
    results_dir = args.results or bench_run.CACHE / "results" / time.strftime("%Y%m%d-%H%M%S")
    results_dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory(prefix="artemis-py-connections-") as tmp:
        for target in targets:
            results.append(measure_target(target, args, Path(tmp)))
            bench_run.log(f"{target}: done, node stopped")
    load_after = os.getloadavg()
    document = {
        "benchmark": "connections",
        "heart_beat": list(HEART_BEAT),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "open_files_limit": [soft, hard],
        "loadavg": [load_before[0], load_after[0]],
        "results": [asdict(r) for r in results],
    }
    path = results_dir / "connections.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    print()
    print(table(results))
    print()
    for r in results:
        print(f"- {r.target}: heart-beats negotiated: {r.client.get('negotiated')}")
        if r.client.get("failures"):
            print(f"- {r.target} failures: {r.client['failures']}")
        if r.client.get("unexpected_frames"):
            print(f"- {r.target} sent frames on idle connections: {r.client['unexpected_frames']}")
    print(
        f"- {args.connections:,} connections, heart-beat {HEART_BEAT[0]},{HEART_BEAT[1]}; RSS "
        f"read {args.settle:g} s after the start and after the last connection; CPU over "
        f"{args.window:g} s (idle: {args.idle_window:g} s before connecting); "
        f"{os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after; JSON: {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
