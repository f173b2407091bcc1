"""Spark connector benchmark: the ``artemis`` source and sink beside the CLI clients, same run.

    python bench/spark.py                      # 3 nodes, 20000 x 256 B, 5 trials: ~2 min
    python bench/spark.py --nodes 1 --messages 50000 --trials 3 --max-per-trigger 10000

Nodes: ``--nodes`` ``artemis-py run`` processes (persistent, data in a temp dir or under
``--dir``, free ports), linked in a cluster with message load balancing OFF so each node
keeps what is sent to it (bench/spark_harness.py). One local SparkSession (``local[2]``, no
UI, loopback, 2 shuffle partitions, Python workers run by this interpreter) with the
``artemis`` format registered; its start is timed once and reported apart. A small warm-up
trial (2000 messages, not counted) runs first, so trial 1 does not pay alone for the JVM's
first compilation.

Each trial uses queues of its own; the runs of a trial take turns going first.

* **source**: before each run, M persistent messages of S bytes, spread evenly over the
  nodes, are sent by one ``artemis-py producer`` per node (not timed); after it the queue
  must be empty on every node.

  - *Spark*: a streaming query ``readStream.format("artemis")`` into the ``noop`` sink with
    ``Trigger.AvailableNow`` (``--max-per-trigger``: ``maxMessagesPerTrigger``, default
    none; ``--fetch-size``: ``fetchSize``), timed from ``start()`` until it has ended and
    its last batch is acknowledged. Spark commits (so the source acknowledges) every batch
    but a run's last, which the query's next run would acknowledge: the bench does that
    itself, with the source's own ``commit`` and the last progress's end offset. The
    batches' ``numInputRows`` must add up to M. Reported apart: the query's start
    (``start()`` to the first trigger), the first batch's duration, and the rate inside the
    batches (rows / trigger execution time; over the batches after the first when there are
    several, which needs ``--max-per-trigger``).
  - *consumers*: one ``artemis-py consumer`` per node, in parallel, each taking what its
    node holds (the CLI takes one message at a time and acknowledges each); timed from
    their launch to the last exit. Their own rate (first to last message, no process start)
    is printed too.
  - *client*: one connection per node in this process (Trio), a 1 MiB consumer window and a
    cumulative ACK every 1000 messages: what a consumer tuned for throughput does.

* **sink**: the nodes must hold M messages after each run; they are then acknowledged away
  (not timed).

  - *Spark*: ``spark.range(M)`` in P partitions (``--partitions``, default 2 per node; no
    shuffle) with a ``body`` of S bytes, ``df.write.format("artemis")``: a batch write, one
    transaction per partition, SENDs pipelined, one COMMIT receipt.
  - *producers*: P ``artemis-py producer --no-receipts`` processes in parallel, producer p
    sending partition p's share to node p mod N as the sink's task p does: SENDs pipelined,
    the DISCONNECT receipt confirms them all. Timed from their launch to the last exit.

Printed: a table per direction (one row per trial), the CPU seconds each party used during
each run (the Spark JVM, its Python workers, the nodes, this process with the CLI clients;
from /proc), and the median and range over the trials of the ratios Spark / reference (of
msg/s: above 1, Spark is faster).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spark_harness import (  # the benchmark's own helpers
    QUERY_TIMEOUT,
    BenchError,
    Cpu,
    Fleet,
    Node,
    clear,
    client_drain,
    consumers,
    cpu_now,
    expect_held,
    log,
    producers,
    running_nodes,
    shares,
)

# -- Spark ----------------------------------------------------------------------------------


def start_spark() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no warning about the host's name
    from pyspark.sql import SparkSession

    from artemis_py.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("artemis-py spark bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.numRecentProgressUpdates", "100000")  # every batch kept
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


@dataclass
class SourceRun:
    wall: float  # start() to the end of the final acknowledgement
    startup: float  # start() to the first trigger
    first_batch: float  # the first batch's trigger execution
    batches: int
    batch_rate: float  # rows / trigger execution, over the batches after the first if any
    acknowledge: float  # the final commit, done by the bench


def spark_source(
    spark: Any, nodes: Sequence[Node], queue: str, args: Any, checkpoint: Path
) -> SourceRun:
    """One AvailableNow query into ``noop`` and its final commit (see the module doc);
    checks that it read ``--messages`` rows."""
    from artemis_py.spark.options import parse_source_options
    from artemis_py.spark.source import ArtemisStreamReader

    total = args.messages
    options = {"url": ",".join(n.url for n in nodes), "queue": queue}
    if args.max_per_trigger is not None:
        options["maxMessagesPerTrigger"] = str(args.max_per_trigger)
    if args.fetch_size is not None:
        options["fetchSize"] = str(args.fetch_size)
    began_at = time.time()
    began = time.perf_counter()
    query = (
        spark.readStream.format("artemis").options(**options).load()
        .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    try:
        if not query.awaitTermination(QUERY_TIMEOUT):
            raise BenchError(f"the source query did not end within {QUERY_TIMEOUT:g} s")
    finally:
        query.stop()
    ended = time.perf_counter()
    progress = [p for p in query.recentProgress if p.numInputRows]
    rows = sum(p.numInputRows for p in progress)
    if rows != total:
        raise BenchError(f"the source query read {rows} rows, not {total}")
    # The run's last batch is never committed by Spark within the run: commit it as the
    # next run would, through the source's own commit (acknowledgeUpTo on every node).
    ArtemisStreamReader(parse_source_options(options)).commit(
        json.loads(progress[-1].sources[0].endOffset)
    )
    acknowledged = time.perf_counter()
    durations = [p.durationMs["triggerExecution"] / 1000 for p in progress]
    steady = progress[1:] or progress
    steady_time = sum(durations[1:]) if len(progress) > 1 else durations[0]
    first_trigger = datetime.fromisoformat(progress[0].timestamp.replace("Z", "+00:00")).timestamp()
    return SourceRun(
        wall=acknowledged - began,
        startup=max(first_trigger - began_at, 0.0),
        first_batch=durations[0],
        batches=len(progress),
        batch_rate=sum(p.numInputRows for p in steady) / steady_time,
        acknowledge=acknowledged - ended,
    )


def spark_sink(spark: Any, nodes: Sequence[Node], queue: str, args: Any) -> float:
    """Seconds to write ``--messages`` rows with ``df.write.format("artemis")``."""
    total = args.messages
    body = f"cast(lpad(cast(id as string), {args.size}, 'x') as binary)"
    frame = spark.range(0, total, 1, args.partitions).selectExpr(f"{body} as body")
    began = time.perf_counter()
    (
        frame.write.format("artemis")
        .option("url", ",".join(n.url for n in nodes))
        .option("destination", f"queue://{queue}")
        .mode("append")
        .save()
    )
    return time.perf_counter() - began


# -- trials ---------------------------------------------------------------------------------


@dataclass
class Trial:
    source: SourceRun
    consumer: Fleet
    client: float  # seconds of the windowed in-process drain
    sink: float
    producer: Fleet
    cpu: dict[str, Cpu]  # CPU seconds used by each party during each run (RUNS)


RUNS = ("Spark source", "consumers", "client", "Spark sink", "producers")


def rotated(number: int, runs: list[Callable[[], Any]]) -> list[Any]:
    """Run ``runs`` starting at a different one each trial (drift hits each in turn); the
    results in the order given."""
    results: list[Any] = [None] * len(runs)
    for k in range(len(runs)):
        index = (number + k) % len(runs)
        results[index] = runs[index]()
    return results


@dataclass
class Runner:
    """One trial's runs (see the module doc) against ``nodes`` with ``spark``."""

    spark: Any
    nodes: Sequence[Node]
    args: argparse.Namespace
    work: Path

    def measured(self, name: str, cpu: dict[str, Cpu], run: Callable[[], Any]) -> Any:
        # The JVM's pid: py4j's launcher keeps its process (pyspark.java_gateway).
        jvm = getattr(getattr(self.spark.sparkContext._gateway, "proc", None), "pid", None)
        before = cpu_now(jvm, self.nodes)
        result = run()
        cpu[name] = cpu_now(jvm, self.nodes) - before
        return result

    def trial(self, number: int) -> Trial:
        cpu: dict[str, Cpu] = {}
        log(f"trial {number}: source")
        source, consumer, client = self.source(number, cpu)
        log(f"trial {number}: sink")
        sink, producer = self.sink(number, cpu)
        return Trial(source, consumer, client, sink, producer, cpu)

    def source(self, number: int, cpu: dict[str, Cpu]) -> tuple[SourceRun, Fleet, float]:
        """The Spark query, the CLI consumers and the windowed client on one queue, each
        after a refill (the fill is not timed)."""
        nodes, args = self.nodes, self.args
        queue = f"bench-source-{number}"
        counts = shares(args.messages, len(nodes))
        targets = [(n.url, c) for n, c in zip(nodes, counts, strict=True)]
        checkpoint = self.work / f"checkpoint-{number}"

        def filled(name: str, run: Callable[[], Any]) -> Callable[[], Any]:
            def step() -> Any:
                producers(targets, queue, args.size)
                expect_held(nodes, queue, args.messages, "the fill")
                result = self.measured(name, cpu, run)
                expect_held(nodes, queue, 0, name)
                return result

            return step

        query, fleet, client = rotated(
            number,
            [
                filled(RUNS[0], lambda: spark_source(self.spark, nodes, queue, args, checkpoint)),
                filled(RUNS[1], lambda: consumers(targets, queue)),
                filled(RUNS[2], lambda: client_drain(targets, queue)),
            ],
        )
        return query, fleet, client

    def sink(self, number: int, cpu: dict[str, Cpu]) -> tuple[float, Fleet]:
        nodes, args = self.nodes, self.args
        counts = shares(args.messages, args.partitions)
        targets = [(nodes[p % len(nodes)].url, c) for p, c in enumerate(counts)]

        def stored(name: str, queue: str, run: Callable[[], Any]) -> Callable[[], Any]:
            def step() -> Any:
                result = self.measured(name, cpu, run)
                expect_held(nodes, queue, args.messages, name)
                clear(nodes, queue)
                return result

            return step

        spark_queue, cli_queue = f"bench-sink-{number}", f"bench-produced-{number}"
        seconds, fleet = rotated(
            number,
            [
                stored(
                    RUNS[3], spark_queue, lambda: spark_sink(self.spark, nodes, spark_queue, args)
                ),
                stored(RUNS[4], cli_queue, lambda: producers(targets, cli_queue, args.size)),
            ],
        )
        return seconds, fleet


def warm_up(runner: Runner) -> float:
    """A small source query and sink write first, so trial 1 does not pay alone for the
    JVM's first compilation of the code paths. Returns its seconds."""
    began = time.perf_counter()
    args = runner.args
    small = argparse.Namespace(**{**vars(args), "messages": min(args.messages, 2000)})
    Runner(runner.spark, runner.nodes, small, runner.work).trial(0)
    return time.perf_counter() - began


# -- report ---------------------------------------------------------------------------------


def rate(total: int, seconds: float) -> str:
    return f"{total / seconds:,.0f}" if seconds > 0 else "–"


def spread(values: Sequence[float], digits: int = 2) -> str:
    """``median (min–max)``."""
    return f"**{statistics.median(values):.{digits}f}** ({min(values):.{digits}f}–{max(values):.{digits}f})"


def source_table(trials: Sequence[Trial], total: int) -> str:
    head = (
        "| trial | Spark wall s | Spark msg/s | query start s | first batch s | batches | "
        "in-batch msg/s | consumers wall s | consumers msg/s | consumers' own msg/s | "
        "client s | client msg/s | Spark / consumers | Spark / client |\n|" + "---|" * 14
    )
    lines = [head]
    for i, t in enumerate(trials, 1):
        s = t.source
        lines.append(
            f"| {i} | {s.wall:.2f} | {rate(total, s.wall)} | {s.startup:.2f} | "
            f"{s.first_batch:.2f} | {s.batches} | {s.batch_rate:,.0f} | {t.consumer.wall:.2f} | "
            f"{rate(total, t.consumer.wall)} | {t.consumer.own_rate(total):,.0f} | "
            f"{t.client:.2f} | {rate(total, t.client)} | "
            f"{t.consumer.wall / s.wall:.2f} | {t.client / s.wall:.2f} |"
        )
    return "\n".join(lines)


def sink_table(trials: Sequence[Trial], total: int) -> str:
    head = (
        "| trial | Spark write s | Spark msg/s | producers wall s | producers msg/s | "
        "producers' own msg/s | Spark / producers |\n|" + "---|" * 7
    )
    lines = [head]
    for i, t in enumerate(trials, 1):
        lines.append(
            f"| {i} | {t.sink:.2f} | {rate(total, t.sink)} | {t.producer.wall:.2f} | "
            f"{rate(total, t.producer.wall)} | {t.producer.own_rate(total):,.0f} | "
            f"{t.producer.wall / t.sink:.2f} |"
        )
    return "\n".join(lines)


def cpu_table(trials: Sequence[Trial]) -> str:
    lines = [
        "| run | Spark JVM | Python workers | nodes | bench process + CLI clients |",
        "|---|---|---|---|---|",
    ]
    for name in RUNS:
        readings = [t.cpu[name] for t in trials]
        cells = [
            f"{statistics.median(getattr(c, part) for c in readings):.2f}"
            for part in ("jvm", "workers", "nodes", "bench")
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(trials: Sequence[Trial], args: Any) -> list[str]:
    m = args.messages
    return [
        "- source, Spark / consumers (wall msg/s): "
        + spread([t.consumer.wall / t.source.wall for t in trials]),
        "- source, Spark / client (wall msg/s): "
        + spread([t.client / t.source.wall for t in trials]),
        "- source, Spark in-batch / client: "
        + spread([t.source.batch_rate * t.client / m for t in trials]),
        "- sink, Spark / producers (wall msg/s): "
        + spread([t.producer.wall / t.sink for t in trials]),
        f"- Spark msg/s (wall): source {spread([m / t.source.wall for t in trials], 0)}, "
        f"sink {spread([m / t.sink for t in trials], 0)}",
    ]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000, help="M, per phase (default 20000)")
    parser.add_argument("--size", type=int, default=256, help="body bytes (default 256)")
    parser.add_argument("--nodes", type=int, default=3, help="cluster nodes (default 3)")
    parser.add_argument("--trials", type=int, default=5, help="default 5")
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="sink partitions and producers (default 2 per node)",
    )
    parser.add_argument(
        "--max-per-trigger",
        type=int,
        default=None,
        help="the source's maxMessagesPerTrigger (default none)",
    )
    parser.add_argument(
        "--fetch-size",
        type=int,
        default=None,
        help="the source's fetchSize (default the connector's)",
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the nodes' data goes (default a temp dir)"
    )
    parser.add_argument(
        "--no-warm-up", dest="warm_up", action="store_false", help="skip the small warm-up run"
    )
    args = parser.parse_args()
    if args.partitions is None:
        args.partitions = 2 * args.nodes
    for name in (
        "messages",
        "size",
        "nodes",
        "trials",
        "partitions",
        "max_per_trigger",
        "fetch_size",
    ):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.messages < max(args.nodes, args.partitions):
        parser.error("--messages must be at least --nodes and --partitions")
    return args


def bench(args: argparse.Namespace, work: Path) -> None:
    load_before = os.getloadavg()
    log(f"starting {args.nodes} node(s) in {work}")
    with running_nodes(args.nodes, work) as nodes:
        began = time.perf_counter()
        spark = start_spark()
        session_start = time.perf_counter() - began
        log(f"SparkSession {spark.version} started in {session_start:.1f} s")
        runner = Runner(spark, nodes, args, work)
        try:
            if args.warm_up:
                log("warm-up (not counted)")
                log(f"warm-up done in {warm_up(runner):.1f} s")
            trials = []
            for number in range(1, args.trials + 1):
                trials.append(runner.trial(number))
                log(f"trial {number} done; load average {os.getloadavg()[0]:.2f}")
        finally:
            for query in spark.streams.active:
                query.stop()
            spark.stop()
    load_after = os.getloadavg()
    m, s = args.messages, args.size
    print(f"\n## Source: {m} messages of {s} B on {args.nodes} node(s), into Spark's noop sink\n")
    print(source_table(trials, m))
    print(f"\n## Sink: {m} rows of {s} B in {args.partitions} partitions\n")
    print(sink_table(trials, m))
    print("\n## CPU seconds used during each run (median over the trials)\n")
    print(cpu_table(trials))
    print()
    for line in summary(trials, args):
        print(line)
    limit = args.max_per_trigger or "none"
    final_commit = statistics.median(t.source.acknowledge for t in trials)
    print(
        f"- SparkSession start (once): {session_start:.1f} s; final commit of the source's "
        f"last batch (median, in its wall time): {final_commit:.2f} s; "
        f"maxMessagesPerTrigger {limit}; "
        f"{os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after"
    )
    print(
        "- wall: Spark source = start() to the end of the query and of its final commit; "
        "in-batch = rows / trigger execution time (batches after the first, if several); "
        "CLI clients: launch of the processes to the last exit; own = the clients' printed "
        "times; client = windowed connections in the bench process"
    )


def one_line(exc: BaseException) -> str:
    """A Spark failure in one line: the connector's own error inside it if there is one
    (Spark wraps a worker's exception in its traceback), else the first line."""
    text = str(exc)
    ours = re.findall(r"artemis_py\.spark\.\w+\.(\w+): (.*)", text)
    if ours:
        return f"{ours[-1][0]}: {ours[-1][1]}"
    return (text.strip().splitlines() or [type(exc).__name__])[0]


def main() -> int:
    args = parse_args()
    try:
        from py4j.protocol import Py4JError  # type: ignore[import-untyped]
        from pyspark.errors import PySparkException

        from artemis_py.spark import require_spark

        require_spark()
    except ImportError as exc:
        print(f"spark bench: {exc} (pip install -e '.[spark]')", file=sys.stderr)
        return 1
    try:
        with contextlib.ExitStack() as stack:
            if args.dir is None:
                temp = tempfile.TemporaryDirectory(prefix="artemis-py-spark-bench-")
                work = Path(stack.enter_context(temp))
            else:
                work = args.dir / time.strftime("spark-bench-%Y%m%d-%H%M%S")
                work.mkdir(parents=True)
                stack.callback(shutil.rmtree, work, ignore_errors=True)
            bench(args, work)
    except KeyboardInterrupt:
        print("spark bench: interrupted; nodes stopped, temporary files removed", file=sys.stderr)
        return 130
    except (BenchError, OSError, subprocess.SubprocessError) as exc:
        print(f"spark bench: {exc}", file=sys.stderr)
        return 1
    except (PySparkException, Py4JError) as exc:
        print(f"spark bench: Spark failed: {one_line(exc)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
