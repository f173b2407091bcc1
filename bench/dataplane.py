"""The Trio loop's CPU per frame with the Rust data plane (issue 29, step 2): what draining
events (Rust frames made into Python ``Frame``s) and submitting commands (``Frame``s handed
back to Rust) cost the loop's thread, against the codec's cost on the loop in the same run.

    python bench/dataplane.py [--seconds S] [--clients N] [--threads T] [--window W]

A client process (``--clients`` sockets, one thread each) pipelines SENDs (6 headers, 1 KiB
body, a ``receipt`` header) into one plane, keeping up to ``--window`` unreceipted per
socket. The loop (Trio: ``wait_readable`` on the plane's eventfd, ``drain()``, then one
``submit()``) answers every SEND with a RECEIPT frame, as the node does. Over the measured
window (after a warm-up) it prints the loop thread's CPU per frame split into *drain*
(``drain()``: taking the batch, building the event tuples and ``Frame``s), *python* (the
loop's own dispatch: reading the event, building the RECEIPT and the command tuple) and
*submit* (``submit()``: converting the ``Frame``s and handing them to the I/O threads), read
with ``time.thread_time``, and *with Trio*: the thread's whole CPU in the window (Trio's
``epoll_wait`` and scheduling too); the frames per drain; and the I/O threads' CPU per frame (their
``/proc/self/task/*/schedstat``). The reference line is what the codec costs on the loop
today for the same work without any socket call: ``receive_data`` + ``next_events`` of
pipelined SENDs and ``send`` of a RECEIPT per frame (``StompConnection``).

Needs a release build of the extension (``pip install -e .``).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import trio

from artemis_py._native import DataPlane, DataPlaneConn
from artemis_py.protocol.stomp import SERVER, Connection, Frame

BODY = bytes(range(256)) * 4
SEND_HEADERS = (
    ("destination", "/queue/bench"),
    ("content-type", "application/octet-stream"),
    ("persistent", "true"),
    ("priority", "4"),
    ("content-length", str(len(BODY))),
)
CONNECT = b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00"
CONNECTED = Frame("CONNECTED", (("version", "1.2"), ("server", "bench")))


def encoded_send(n: int) -> bytes:
    headers = (*SEND_HEADERS, ("receipt", str(n)))
    head = "SEND\n" + "".join(f"{k}:{v}\n" for k, v in headers) + "\n"
    return head.encode() + BODY + b"\x00"


# --- the client process -------------------------------------------------------------------


def client_socket(port: int, window: int, stop: threading.Event) -> None:
    """Pipelines SENDs in blocks of half the window; one block may be unreceipted ahead."""
    block_size = max(1, window // 2)
    block = b"".join(encoded_send(n) for n in range(block_size))
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(CONNECT)
        pending = b""
        while b"\x00" not in pending:
            pending += sock.recv(65536)
        sent = received = 0
        while not stop.is_set():
            sock.sendall(block)
            sent += block_size
            while received < sent - block_size:
                data = sock.recv(1 << 18)
                if not data:
                    return
                received += data.count(b"\x00")


def run_clients(port: int, clients: int, window: int) -> None:
    stop = threading.Event()
    threads = [
        threading.Thread(target=client_socket, args=(port, window, stop), daemon=True)
        for _ in range(clients)
    ]
    for thread in threads:
        thread.start()
    sys.stdin.read()  # until the parent closes our stdin
    stop.set()


# --- the loop ------------------------------------------------------------------------------


def io_threads_cpu() -> float:
    """CPU seconds of this process's data plane threads (schedstat: nanoseconds on a CPU)."""
    total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            if not (task / "comm").read_text().startswith("dataplane-"):
                continue
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1e9


class Loop:
    """The loop's side: drains, answers, submits, and counts its thread's CPU by phase."""

    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane
        self.conns: dict[int, DataPlaneConn] = {}
        self.cpu = {"drain": 0.0, "python": 0.0, "submit": 0.0}
        self.frames = 0
        self.drains = 0

    def reset(self) -> None:
        self.cpu = dict.fromkeys(self.cpu, 0.0)
        self.frames = self.drains = 0

    def answer(self, events: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
        commands: list[tuple[object, ...]] = []
        for event in events:
            kind = event[0]
            if kind == DataPlane.FRAME:
                frame = event[2]
                assert isinstance(frame, Frame)
                conn = self.conns[event[1]]  # type: ignore[index]
                if frame.command == "SEND":
                    receipt = Frame("RECEIPT", (("receipt-id", frame.get("receipt", "")),))
                    commands.append((DataPlane.SEND, conn, receipt))
                    self.frames += 1
                elif frame.command == "CONNECT":
                    commands.append((DataPlane.ACCEPT_CONNECT, conn, "1.2"))
                    commands.append((DataPlane.SEND, conn, CONNECTED))
            elif kind == DataPlane.OPENED:
                self.conns[event[1]] = event[2]  # type: ignore[index,assignment]
        return commands

    async def serve(self) -> None:
        clock = time.thread_time
        fd = self.plane.fileno()
        while True:
            await trio.lowlevel.wait_readable(fd)
            t0 = clock()
            events = list(self.plane.drain())  # (made into Python objects here, as measured)
            t1 = clock()
            commands = self.answer(events)
            t2 = clock()
            self.plane.submit(commands)
            t3 = clock()
            self.cpu["drain"] += t1 - t0
            self.cpu["python"] += t2 - t1
            self.cpu["submit"] += t3 - t2
            self.drains += 1


def codec_reference(seconds: float) -> float:
    """µs of this thread per frame: pipelined SENDs decoded and a RECEIPT encoded for each,
    with the codec on the loop (what the Trio shell does today, without its socket calls)."""
    batch = b"".join(encoded_send(n) for n in range(64))
    conn = Connection(SERVER)
    conn.receive_data(CONNECT)
    conn.next_event()
    conn.accept_connect("1.2")
    conn.send(CONNECTED)
    frames = 0
    start = time.thread_time()
    deadline = start + seconds
    while time.thread_time() < deadline:
        conn.receive_data(batch)
        for frame in conn.next_events():
            assert isinstance(frame, Frame)
            conn.send(Frame("RECEIPT", (("receipt-id", frame.get("receipt", "")),)))
            frames += 1
    return (time.thread_time() - start) / frames * 1e6


async def measure(plane: DataPlane, args: argparse.Namespace) -> None:
    loop = Loop(plane)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop.serve)
        await trio.sleep(args.warmup)
        loop.reset()
        io_start, wall_start = io_threads_cpu(), time.perf_counter()
        thread_start = time.thread_time()
        await trio.sleep(args.seconds)
        cpu_all = time.thread_time() - thread_start
        io_cpu, wall = io_threads_cpu() - io_start, time.perf_counter() - wall_start
        cpu, frames, drains = {**loop.cpu, "all": cpu_all}, loop.frames, loop.drains
        nursery.cancel_scope.cancel()
    report(args, cpu, frames, drains, io_cpu, wall)


def report(
    args: argparse.Namespace,
    cpu: dict[str, float],
    frames: int,
    drains: int,
    io_cpu: float,
    wall: float,
) -> None:
    if not frames:
        sys.exit("no frames measured")
    per = {phase: seconds / frames * 1e6 for phase, seconds in cpu.items()}
    loop_total = per["drain"] + per["python"] + per["submit"]
    print(
        f"data plane: {args.threads or os.cpu_count()} I/O thread(s), {args.clients} clients, "
        f"window {args.window}, {args.seconds:g} s: {frames / wall:,.0f} frames/s, "
        f"{frames / drains:.1f} frames per drain"
    )
    print()
    print("| loop thread, µs per frame | drain | python | submit | total | with Trio |")
    print("|---|--:|--:|--:|--:|--:|")
    print(
        f"| data plane | {per['drain']:.2f} | {per['python']:.2f} | {per['submit']:.2f} "
        f"| {loop_total:.2f} | {per['all']:.2f} |"
    )
    reference = codec_reference(min(args.seconds, 2.0))
    print(f"| codec on the loop (reference, no sockets) | | | | {reference:.2f} | |")
    print()
    print(f"I/O threads: {io_cpu / frames * 1e6:.2f} µs per frame")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        run_clients(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="I/O threads (0: one per core)")
    parser.add_argument("--window", type=int, default=64, help="unreceipted SENDs per client")
    args = parser.parse_args()
    plane = DataPlane(args.threads)
    _, (_, port) = plane.listen("127.0.0.1", 0)
    client = subprocess.Popen(
        [sys.executable, __file__, "--client", str(port), str(args.clients), str(args.window)],
        stdin=subprocess.PIPE,
    )
    try:
        trio.run(measure, plane, args)
    finally:
        assert client.stdin is not None
        client.stdin.close()
        plane.shutdown()
        client.wait(timeout=10)


if __name__ == "__main__":
    main()
