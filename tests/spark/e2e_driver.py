"""The end-to-end tests' streaming query, and a driver process that runs it.

:func:`start_query` reads a queue of the cluster into Spark's file sink (Parquet) with a
checkpoint. Run as ``python -m spark.e2e_driver URLS QUEUE OUT CHECKPOINT [--available-now]``
(from ``tests/``), it is a Spark driver of its own, with its own JVM, that a test can kill
with SIGKILL: without ``--available-now`` it runs until killed, with it it reads what is
there and exits 0.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

# Small batches, so that a fault lands between batches and inside one.
MAX_PER_BATCH = "150"
TRIGGER = "200 milliseconds"


def start_query(
    spark: Any,
    urls: str,
    queue: str,
    out: Path,
    checkpoint: Path,
    *,
    available_now: bool = False,
    **options: str,
) -> Any:
    """Start the query: (node, offset, body) of every message into Parquet files at ``out``;
    ``options`` are more of the source's."""
    frame = (
        spark.readStream.format("artemis")
        .options(url=urls, queue=queue, maxMessagesPerTrigger=MAX_PER_BATCH, **options)
        .load()
        .select("node", "offset", "body")
    )
    writer = frame.writeStream.format("parquet").option("checkpointLocation", str(checkpoint))
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=TRIGGER)
    return writer.start(str(out))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m spark.e2e_driver")
    parser.add_argument("urls")
    parser.add_argument("queue")
    parser.add_argument("out", type=Path)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args()

    from spark.session import local_session

    spark = local_session("artemis-py e2e driver")
    query = start_query(
        spark, args.urls, args.queue, args.out, args.checkpoint, available_now=args.available_now
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
