"""The orders pipeline: a streaming aggregate of the cluster's ``orders``, to Parquet and back.

Two streaming queries, each exactly-once, chained through the Parquet output:

1. **aggregate**: ``orders`` (the ``artemis`` source, every node of ``--url``) -> the JSON body
   parsed -> a watermark on the order's event time -> per tumbling window and customer: the
   number of orders and the sum of their amounts -> Parquet files in ``--output`` (Spark's file
   sink, append mode: a window is written once, when the watermark has passed its end).
2. **publish**: the Parquet files the first query committed (Spark's file source follows the
   sink's ``_spark_metadata`` log) -> one JSON message per aggregate -> the queue
   ``order-stats`` (the ``artemis`` sink).

Why two queries and not one ``foreachBatch`` that does both: inside ``foreachBatch`` both
writes are batch writes. The artemis one can be made idempotent (option ``writeId`` from the
batch id), but a Parquet batch write has no log that would keep a re-run batch from adding
its files twice. Chained, each query
has its own checkpoint and its own exactly-once sink: the file sink's log for the Parquet
files, the broker's duplicate detection (one id per query, batch and partition) for the
messages; a re-run batch of the second query reads the same files, so it sends the same
partitions, which the nodes recognise and ignore.

``--available-now`` runs the first query until it has read every order there is, then the
second until it has published every aggregate written, and stops. Without it both run until
Ctrl-C, starting a micro-batch every ``--interval``.

Run ``python pipeline.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The STOMP acceptors of etc/cluster/symmetric/node{1,2,3}.xml.
DEFAULT_URL = "tcp://localhost:61613,tcp://localhost:61713,tcp://localhost:61813"

# An order as send_orders.py writes it; a message that does not parse is left out.
ORDER_SCHEMA = "order_id STRING, customer STRING, amount DECIMAL(10,2), event_time TIMESTAMP"
# One aggregate: what the first query writes to Parquet and the second reads back.
STATS_SCHEMA = (
    "window_start TIMESTAMP, window_end TIMESTAMP, customer STRING, orders BIGINT, "
    "amount DECIMAL(20,2)"
)


@dataclass(frozen=True, slots=True)
class Settings:
    """What the two queries need (the command line's options)."""

    url: str
    output: Path
    checkpoint: Path
    queue: str = "orders"
    stats: str = "order-stats"
    window: str = "1 minute"
    watermark: str = "1 minute"
    available_now: bool = False
    interval: str = "10 seconds"
    max_per_trigger: int | None = None


def aggregate(spark: Any, settings: Settings) -> Any:
    """The first query, ready to start: orders -> windowed aggregates -> Parquet."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("artemis")
        .option("url", settings.url)
        .option("queue", settings.queue)
    )
    if settings.max_per_trigger is not None:
        reader = reader.option("maxMessagesPerTrigger", str(settings.max_per_trigger))
    orders = (
        reader.load()
        .select(F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("order"))
        .select("order.*")
        .where(
            F.col("order_id").isNotNull()
            & F.col("customer").isNotNull()
            & F.col("amount").isNotNull()
            & F.col("event_time").isNotNull()
        )
    )
    stats = (
        orders.withWatermark("event_time", settings.watermark)
        .groupBy(F.window("event_time", settings.window), "customer")
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("amount"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "customer",
            "orders",
            "amount",
        )
    )
    return (
        stats.writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(settings.output))
        .option("checkpointLocation", str(settings.checkpoint / "aggregate"))
    )


def publish(spark: Any, settings: Settings) -> Any:
    """The second query, ready to start: the aggregates in Parquet -> ``order-stats``."""
    from pyspark.sql import functions as F

    stats = spark.readStream.schema(STATS_SCHEMA).parquet(str(settings.output))
    aggregate_json = F.to_json(F.struct(*stats.columns))
    messages = stats.select(
        aggregate_json.alias("body"),
        F.create_map(F.lit("content-type"), F.lit("application/json")).alias("headers"),
    )
    return (
        messages.writeStream.format("artemis")
        .option("url", settings.url)
        .option("destination", f"queue://{settings.stats}")
        .option("checkpointLocation", str(settings.checkpoint / "publish"))
    )


def run(spark: Any, settings: Settings, stop: threading.Event | None = None) -> None:
    """Run the pipeline on ``spark`` (the ``artemis`` format registered): to the end of
    what is there with ``available_now``, otherwise until a query fails or ``stop`` is set.
    A query's failure is raised (Spark's ``StreamingQueryException``)."""
    stop = stop or threading.Event()
    if settings.available_now:
        for build in (aggregate, publish):
            if not stop.is_set():
                wait([build(spark, settings).trigger(availableNow=True).start()], stop)
        return
    first = aggregate(spark, settings).trigger(processingTime=settings.interval).start()
    # The second query reads the first one's output through its `_spark_metadata` log, which
    # the file sink creates when it starts: wait for it, or the file source would take the
    # directory for a plain one.
    log = settings.output / "_spark_metadata"
    while not log.is_dir() and first.isActive and not stop.is_set():
        stop.wait(0.2)
    if not first.isActive or stop.is_set():
        wait([first], stop)
        return
    second = publish(spark, settings).trigger(processingTime=settings.interval).start()
    wait([first, second], stop)


def wait(queries: list[Any], stop: threading.Event) -> None:
    """Until every query of ``queries`` has ended, or ``stop`` is set; the others are
    stopped when one fails (its error is raised) or at ``stop``."""
    active = list(queries)
    try:
        while active and not stop.is_set():
            for query in list(active):
                # Short waits, so that Ctrl-C is seen between them; raises a query's error.
                if query.awaitTermination(0.5):
                    active.remove(query)
    finally:
        for query in queries:
            if query.isActive:
                query.stop()


def session(master: str) -> Any:
    """A SparkSession for the pipeline, with the ``artemis`` format registered."""
    from artemis_py.spark import register, require_spark

    require_spark()  # a one-line error when pyspark or pyarrow is missing
    from pyspark.sql import SparkSession

    # Spark's Python workers run this interpreter, so they find pyspark and artemis_py too.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master)
        .appName("spark_orders")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def error_line(error: BaseException) -> str:
    """One line for a failed query: the connector's own message when there is one (Spark
    wraps it in a long report of its own)."""
    text = str(error)
    ours = re.findall(r"artemis_py\.spark\.[\w.]+?\.(\w+Error): (.*)", text)
    if ours:
        kind, message = ours[-1]
        return f"{kind}: {message}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def arguments(argv: Sequence[str] | None = None) -> tuple[Settings, str]:
    parser = argparse.ArgumentParser(
        description="Orders from the cluster -> windowed aggregates -> Parquet and the "
        "queue order-stats (two exactly-once streaming queries).",
    )
    parser.add_argument(
        "--url",
        default=DEFAULT_URL,
        help="the nodes' STOMP URLs, comma separated (default: the sample cluster "
        "etc/cluster/symmetric, %(default)s)",
    )
    parser.add_argument("--output", type=Path, required=True, help="Parquet directory")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        required=True,
        help="checkpoint directory (one per pipeline; keep it to resume where it stopped)",
    )
    parser.add_argument("--queue", default="orders", help="orders queue (default %(default)s)")
    parser.add_argument(
        "--stats", default="order-stats", help="queue for the aggregates (default %(default)s)"
    )
    parser.add_argument("--window", default="1 minute", help="window length (%(default)s)")
    parser.add_argument(
        "--watermark", default="1 minute", help="how late an order may be (%(default)s)"
    )
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="read everything there is, publish it, then stop (Trigger.AvailableNow)",
    )
    parser.add_argument(
        "--interval", default="10 seconds", help="micro-batch interval otherwise (%(default)s)"
    )
    parser.add_argument(
        "--max-per-trigger",
        type=int,
        default=None,
        help="at most about this many orders per micro-batch (maxMessagesPerTrigger)",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (%(default)s)")
    args = parser.parse_args(argv)
    if args.max_per_trigger is not None and args.max_per_trigger < 1:
        parser.error("--max-per-trigger must be at least 1")
    settings = Settings(
        url=args.url,
        output=args.output.resolve(),
        checkpoint=args.checkpoint.resolve(),
        queue=args.queue,
        stats=args.stats,
        window=args.window,
        watermark=args.watermark,
        available_now=args.available_now,
        interval=args.interval,
        max_per_trigger=args.max_per_trigger,
    )
    return settings, args.master


def main(argv: Sequence[str] | None = None) -> int:
    settings, master = arguments(argv)
    from artemis_py.spark import MissingDependencyError

    try:
        spark = session(master)
    except MissingDependencyError as exc:
        print(f"pipeline: {exc}", file=sys.stderr)
        return 1
    # Ctrl-C (or SIGTERM) stops the queries; a micro-batch cut short runs again at the next
    # start. This replaces pyspark's own handler, which makes calls into the JVM from inside
    # the signal handler while the main thread waits in one (tracebacks, no clean stop).
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    try:
        run(spark, settings, stop)
    except Exception as exc:  # a failed query: Spark's exception types vary by version
        print(f"pipeline: {error_line(exc)}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    if stop.is_set():
        print("stopped: run it again with the same --checkpoint to go on from here")
        return 0
    print(f"done: aggregates in {settings.output}, published to queue {settings.stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
