"""Paging memory benchmark: a backlog far bigger than the address's memory limit.

    python bench/paging.py                      # 2 GiB backlog, then a 200 MiB reference
    python bench/paging.py --total 50MiB        # a quick run

A real node (a subprocess with its own data directory and port) gets an address whose
``max-size-bytes`` is 10 MiB with ``address-full-policy`` PAGE and one queue. A few
producers (one STOMP connection each, receipts pipelined) send ``--total`` bytes of
persistent 4 KiB messages with no consumer, while the node's RSS is sampled from
/proc/PID/status every 0.2 s (its idle RSS is measured before the send). Then one consumer
drains the queue and checks the order: each message carries its producer and a sequence
number, which must strictly increase per producer.

Printed: idle and peak RSS and the growth (target: under 64 MiB), the backlog on disk (the
paging and journal directories), the send and drain rates; then the same send and drain on
a node with paging off (``max-size-bytes`` -1) and a smaller backlog (``--reference-total``)
as the reference: the rates' ratios are the cost of paging. The exit status is 1 if the
memory target is missed or the order check fails.

Without paging in the node the backlog stays in memory: the run still completes and shows
it (the growth is then about the backlog). ``--rss-limit`` stops the send early, so a node
that does not page cannot exhaust the machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from artemis_py.client import open_stomp_connection
from artemis_py.config.values import parse_bytes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import artemis_py_command, port_open  # the benchmark's own helpers

MiB = 1024 * 1024
QUEUE = "paged"
GROWTH_TARGET = 64 * MiB
BROKER_XML = """<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <persistence-enabled>true</persistence-enabled>
    <security-enabled>false</security-enabled>
    <journal-directory>data/journal</journal-directory>
    <bindings-directory>data/bindings</bindings-directory>
    <paging-directory>data/paging</paging-directory>
    <large-messages-directory>data/largemessages</large-messages-directory>
    <acceptors>
      <acceptor name="stomp">tcp://127.0.0.1:{port}?protocols=STOMP;anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>
    </acceptors>
    <address-settings>
      <address-setting match="{queue}">
        <max-size-bytes>{max_size}</max-size-bytes>
        <page-size-bytes>10MiB</page-size-bytes>
        <address-full-policy>PAGE</address-full-policy>
      </address-setting>
    </address-settings>
    <addresses>
      <address name="{queue}"><anycast><queue name="{queue}"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""


def size(text: str) -> int:
    """``2GiB``, ``50MiB``, ``4096``: Artemis's byte notation, as broker.xml reads it."""
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


class RssSampler:
    """Samples a process's RSS every ``interval`` s in a thread; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.pid, self.interval = pid, interval
        self.peak = self.last = rss(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.last = rss(self.pid)
            except OSError:
                return
            self.peak = max(self.peak, self.last)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Run:
    label: str
    total: int
    idle_rss: int = 0
    send_peak_rss: int = 0  # the peak while the backlog builds
    peak_rss: int = 0
    sent: int = 0
    send_s: float = 0.0
    drained: int = 0
    drain_s: float = 0.0
    paging_bytes: int = 0
    journal_bytes: int = 0
    stopped_early: str = ""
    order_errors: list[str] = field(default_factory=list)

    def rate(self, count: int, seconds: float) -> str:
        if not seconds:
            return "-"
        mib = count * ARGS.message_size / MiB / seconds
        return f"{count / seconds:,.0f} msg/s  {mib:,.1f} MiB/s  ({count} in {seconds:.1f} s)"


async def produce(port: int, run: Run, sampler: RssSampler, limit: int) -> None:
    count = run.total // ARGS.message_size
    per = [count // ARGS.producers + (i < count % ARGS.producers) for i in range(ARGS.producers)]
    body = b"x" * ARGS.message_size
    sent = [0] * ARGS.producers

    async def producer(index: int) -> None:
        async with open_stomp_connection("127.0.0.1", port, max_pending=ARGS.window) as conn:
            for seq in range(per[index]):
                if sampler.last > limit:
                    run.stopped_early = (
                        f"send stopped: node RSS {sampler.last / MiB:.0f} MiB over --rss-limit"
                    )
                    break
                headers = {"persistent": "true", "producer": str(index), "seq": str(seq)}
                await conn.send(f"/queue/{QUEUE}", body, headers=headers, wait=False)
                sent[index] += 1
            await conn.flush_receipts()

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(ARGS.producers):
            nursery.start_soon(producer, i)
    run.send_s = time.perf_counter() - start
    run.sent = sum(sent)


async def drain(port: int, run: Run) -> None:
    last: dict[str, int] = {}
    start = time.perf_counter()
    async with (
        open_stomp_connection("127.0.0.1", port) as conn,
        await conn.subscribe(f"/queue/{QUEUE}", ack="auto") as sub,
    ):
        while run.drained < run.sent:
            with trio.move_on_after(ARGS.stall_timeout) as scope:
                message = await sub.receive()
            if scope.cancelled_caught:
                run.order_errors.append(f"drain stalled after {run.drained} of {run.sent} messages")
                break
            producer, seq = message.get("producer") or "?", int(message.get("seq") or -1)
            if seq <= last.get(producer, -1) and len(run.order_errors) < 5:
                run.order_errors.append(f"producer {producer}: seq {seq} after {last[producer]}")
            last[producer] = seq
            run.drained += 1
    run.drain_s = time.perf_counter() - start


def measure(label: str, total: int, max_size: str, workdir: Path) -> Run:
    run = Run(label, total)
    port = free_port()
    (workdir / "etc").mkdir(parents=True)
    (workdir / "etc" / "broker.xml").write_text(
        BROKER_XML.format(port=port, queue=QUEUE, max_size=max_size)
    )
    with open(workdir / "node.log", "wb") as logfile:
        node = subprocess.Popen(
            [*artemis_py_command(), "run", "etc/broker.xml"],
            cwd=workdir, stdout=logfile, stderr=logfile, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not port_open(port):
            if node.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the node did not start; see {workdir / 'node.log'}")
            time.sleep(0.2)
        time.sleep(1.0)  # settle: start-up allocations done before the idle figure
        run.idle_rss = rss(node.pid)
        with RssSampler(node.pid) as sampler:
            limit = ARGS.rss_limit
            trio.run(produce, port, run, sampler, limit)
            run.send_peak_rss = sampler.peak
            run.paging_bytes = tree_bytes(workdir / "data" / "paging")
            run.journal_bytes = tree_bytes(workdir / "data" / "journal")
            trio.run(drain, port, run)
            run.peak_rss = sampler.peak
    finally:
        node.send_signal(signal.SIGTERM)
        try:
            node.wait(60)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()
    return run


def report(run: Run) -> None:
    growth = run.peak_rss - run.idle_rss
    print(f"{run.label}: {run.total / MiB:,.0f} MiB of {ARGS.message_size}-byte persistent "
          f"messages, {ARGS.producers} producers")  # fmt: skip
    print(f"  idle RSS    {run.idle_rss / MiB:9,.1f} MiB")
    print(f"  peak RSS    {run.peak_rss / MiB:9,.1f} MiB   growth {growth / MiB:,.1f} MiB "
          f"(while sending: {run.send_peak_rss / MiB:,.1f} MiB)")  # fmt: skip
    print(f"  on disk     paging {run.paging_bytes / MiB:,.1f} MiB, "
          f"journal {run.journal_bytes / MiB:,.1f} MiB (after the send)")  # fmt: skip
    print(f"  send        {run.rate(run.sent, run.send_s)}")
    print(f"  drain       {run.rate(run.drained, run.drain_s)}")
    if run.stopped_early:
        print(f"  {run.stopped_early}")
    order = "; ".join(run.order_errors) or f"ok ({run.drained} messages, per-producer sequence)"
    print(f"  order       {order}")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="artemis-py-paging-", dir=ARGS.dir))
    try:
        paged = measure("paging (max-size-bytes 10MiB, PAGE)", ARGS.total, "10MiB", tmp / "paged")
        report(paged)
        results = [paged]
        if ARGS.reference_total:
            total = min(ARGS.reference_total, ARGS.total)
            ref = measure("reference (paging off: max-size-bytes -1)", total, "-1", tmp / "ref")
            report(ref)
            results.append(ref)
            send = ratio(paged.sent / paged.send_s, ref.sent / ref.send_s)
            drain_ratio = ratio(paged.drained / paged.drain_s, ref.drained / ref.drain_s)
            print(f"cost of paging: send rate paging/reference {send}, drain {drain_ratio}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    growth = paged.peak_rss - paged.idle_rss
    met = growth < GROWTH_TARGET and not paged.stopped_early
    print(f"memory: growth {growth / MiB:,.1f} MiB, target < {GROWTH_TARGET // MiB} MiB: "
          f"{'met' if met else 'MISSED'}")  # fmt: skip
    broken = any(r.order_errors for r in results)
    return 1 if broken or not met else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total", type=size, default=size("2GiB"), help="backlog (2GiB)")
    parser.add_argument(
        "--reference-total", type=size, default=size("200MiB"),
        help="backlog of the paging-off reference (200MiB; 0: no reference)",
    )  # fmt: skip
    parser.add_argument("--message-size", type=size, default=4096, help="body bytes (4096)")
    parser.add_argument("--producers", type=int, default=4, help="connections sending (4)")
    parser.add_argument("--window", type=int, default=64, help="receipts pending/producer")
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    parser.add_argument(
        "--rss-limit", type=size, default=min(8 * 1024 * MiB, available // 2),
        help="stop sending when the node's RSS passes this (default: half the free memory, "
        "at most 8GiB)",
    )  # fmt: skip
    parser.add_argument("--stall-timeout", type=float, default=60.0, help="drain gives up (s)")
    parser.add_argument("--dir", type=Path, default=None, help="where the nodes' data go")
    return parser.parse_args()


ARGS = argparse.Namespace()

if __name__ == "__main__":
    ARGS = parse_args()
    sys.exit(main())
