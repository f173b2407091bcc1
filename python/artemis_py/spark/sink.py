"""The ``artemis`` sink: every row a message, every partition stored once (design 16, §5).

Theory of operation
-------------------
* **Driver.** :meth:`ArtemisDataSource.writer` / ``streamWriter`` check the options and the
  columns before any task starts, and build an :class:`ArtemisWriter` (batch) or
  :class:`ArtemisStreamWriter`, which Spark pickles to the tasks. A batch write draws its
  ``writeId`` (a UUID) there, once, so every task and every retry of it sees the same one.
* **Task** (``write(rows)``) for partition ``p``: the home node is ``url[p mod n]``, fixed so
  that a re-run meets the same duplicate cache. One transaction: BEGIN, one SEND per row,
  COMMIT with a receipt. The SENDs are pipelined (no receipt per row: the node handles a
  connection's frames in order, so the COMMIT's RECEIPT confirms them all). Each carries
  ``persistent:true`` (unless option ``persistent`` is false or the row says otherwise) and
  ``_AMQ_DUPL_ID`` = the partition's id, ``spark:<queryId>:<batchId>:<p>`` (streaming, from
  the task's local properties ``sql.streaming.queryId`` and ``streaming.sql.batchId``) or
  ``spark:<writeId>:<p>`` (batch).
* **Exactly once.** The node stores a transaction's duplicate ids with its messages,
  atomically, one per address touched. A re-run of the partition (Spark retrying the task,
  re-running a micro-batch after a restart, or this module resending after a lost connection)
  carries the same id, so the node ignores the whole transaction and its COMMIT RECEIPT says
  ``duplicate:true``: success, reported in the commit message. This assumes a re-run has the
  same rows (as a multiset; the order may differ), Spark's own assumption for exactly-once
  sinks, and that the node keeps the id (``id-cache-size``, ``persist-id-cache``).
* **Connection lost before the COMMIT RECEIPT.** The node drops an open transaction with its
  connection, and whether the COMMIT got through is unknown: the task reconnects (retried
  until ``nodeTimeoutMs`` after the first loss) and sends the whole partition again; a
  duplicate answer means the first COMMIT had been stored. The rows are kept for that as
  they are sent (Spark's iterator cannot be read twice), so a task holds its partition in
  memory, as the node holds the open transaction until COMMIT: ``repartition`` large
  outputs. The task retries itself because local mode retries no task
  (``spark.task.maxFailures`` is 1 there).
* **Refusals.** A node's ERROR (a body over the acceptor's ``stompMaxBodySize``, a refused
  address) fails the task with a one-line :class:`SinkError` naming the partition, and the
  row for an oversized body. The connection ends with the transaction open, so nothing of
  the partition is stored. A row the sink cannot send (a null body, no destination) fails
  the same way before its partition commits.
* An empty partition connects to nothing and sends nothing.
* ``commit`` / ``abort`` run in the driver (for a stream, in a fresh writer each time) and
  only log a summary: nothing is kept across batches.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import trio
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from artemis_py.client import ClientConnection, ClientError, StompServerError
from artemis_py.client.url import BrokerUrl
from artemis_py.spark.options import SinkOptions
from artemis_py.spark.sink_rules import (
    Outgoing,
    SinkColumns,
    SinkError,
    batch_duplicate_id,
    home_url,
    outgoing_message,
    stream_duplicate_id,
)
from artemis_py.spark.wire import Deadline, Login, NodeUnreachableError, call, open_node

__all__ = [
    "ArtemisStreamWriter",
    "ArtemisWriter",
    "SinkCommitMessage",
    "SinkPlan",
    "send_partition",
    "write_partition",
]

log = logging.getLogger("artemis_py.spark.sink")

# Spark's local properties of a streaming task (MicroBatchExecution, StreamExecution).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"

# What breaks a connection, as opposed to the node refusing something (StompServerError).
_LOST = (ClientError, trio.BrokenResourceError, trio.ClosedResourceError, OSError)

# The node's codec names its limit when a body is too large (rust/stomp/src/decoder.rs).
_BODY_LIMIT = re.compile(
    r"(?:exceeds the maximum frame body size of|frame body larger than) (\d+) bytes"
)


@dataclass(frozen=True)
class SinkCommitMessage(WriterCommitMessage):
    """What a task reports: its partition, the rows it sent, and whether the node said the
    partition had already been stored (a re-run: nothing was stored again)."""

    partition: int
    rows: int
    duplicate: bool


@dataclass(frozen=True, slots=True)
class SinkPlan:
    """Everything a task needs, checked in the driver and pickled to the tasks."""

    options: SinkOptions
    columns: SinkColumns

    @property
    def login(self) -> Login:
        return Login(self.options.login, self.options.passcode)


class ArtemisWriter(DataSourceWriter):
    """``df.write.format("artemis")``: one transaction per partition, ids from ``writeId``."""

    def __init__(self, plan: SinkPlan, write_id: str | None = None) -> None:
        self.plan = plan
        self.write_id = write_id if write_id is not None else str(uuid.uuid4())

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        partition = _task().partitionId()
        duplicate_id = batch_duplicate_id(self.write_id, partition)
        return write_partition(self.plan, partition, duplicate_id, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("artemis write %s: %s", self.write_id, _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Partitions that committed stay stored; a rerun of the same write is a new writeId.
        log.warning("artemis write %s failed: %s", self.write_id, _summary(messages))


class ArtemisStreamWriter(DataSourceStreamWriter):
    """``df.writeStream.format("artemis")``: ids from the query id and the batch id."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        context = _task()
        partition = context.partitionId()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
        if not query_id or batch_id is None or not batch_id.isdigit():
            raise SinkError(
                f"partition {partition}: no streaming query id or batch id in the task "
                f"({QUERY_ID_PROPERTY}={query_id!r}, {BATCH_ID_PROPERTY}={batch_id!r})"
            )
        duplicate_id = stream_duplicate_id(query_id, int(batch_id), partition)
        return write_partition(self.plan, partition, duplicate_id, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("artemis micro-batch %s: %s", batchId, _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Which tasks finished is racy here (design 16, S1): a re-run sorts it out by its ids.
        log.warning("artemis micro-batch %s failed: %s", batchId, _summary(messages))


def _task() -> Any:
    context = TaskContext.get()
    if context is None:
        raise SinkError("the artemis writer runs in a Spark task only")
    return context


def _summary(messages: Sequence[WriterCommitMessage | None]) -> str:
    ours = [m for m in messages if isinstance(m, SinkCommitMessage)]
    rows = sum(m.rows for m in ours)
    duplicates = sum(1 for m in ours if m.duplicate)
    unfinished = len(messages) - len(ours)
    return (
        f"{rows} rows in {len(ours)} partitions, {duplicates} already stored (re-runs), "
        f"{unfinished} not reported"
    )


# -- one partition ---------------------------------------------------------------------------


class _Replay:
    """The partition's messages, converted once: each iteration yields those seen so far,
    then reads on from the rows (so a resend after a lost connection has them all)."""

    def __init__(self, rows: Iterator[Outgoing]) -> None:
        self._rows = rows
        self.seen: list[Outgoing] = []

    def __iter__(self) -> Iterator[Outgoing]:
        index = 0
        while index < len(self.seen):
            yield self.seen[index]
            index += 1
        for message in self._rows:
            self.seen.append(message)
            yield message


def write_partition(
    plan: SinkPlan, partition: int, duplicate_id: str, rows: Iterable[Sequence[Any]]
) -> SinkCommitMessage:
    """Send ``rows`` as one transaction to the partition's home node (see the module doc)."""
    return call(lambda: send_partition(plan, partition, duplicate_id, rows))


async def send_partition(
    plan: SinkPlan, partition: int, duplicate_id: str, rows: Iterable[Sequence[Any]]
) -> SinkCommitMessage:
    """:func:`write_partition` inside a Trio event loop."""
    options = plan.options
    messages = (
        outgoing_message(
            row,
            plan.columns,
            destination=options.destination,
            persistent=options.persistent,
            duplicate_id=duplicate_id,
            where=f"partition {partition}, row {number}",
        )
        for number, row in enumerate(rows, start=1)
    )
    first = next(messages, None)
    if first is None:
        return SinkCommitMessage(partition, 0, False)
    replay = _Replay(_chain(first, messages))
    url = home_url(options.urls, partition)
    sent, duplicate = await _send_with_retries(plan, url, partition, replay)
    return SinkCommitMessage(partition, sent, duplicate)


def _chain(first: Outgoing, rest: Iterator[Outgoing]) -> Iterator[Outgoing]:
    yield first
    yield from rest


async def _send_with_retries(
    plan: SinkPlan, url: BrokerUrl, partition: int, replay: _Replay
) -> tuple[int, bool]:
    timeout_ms = plan.options.node_timeout_ms
    deadline = Deadline.after(timeout_ms)
    lost_once = False
    attempt = 0
    while True:
        try:
            return await _send_once(plan, url, deadline, replay)
        except StompServerError as exc:
            raise _refusal(exc, url, partition, replay.seen) from None
        except _LOST as exc:
            reason = str(exc) or type(exc).__name__
        if not lost_once:
            # The node gets nodeTimeoutMs from the first loss to take the partition again.
            deadline, lost_once = Deadline.after(timeout_ms), True
        if not await deadline.pause(attempt):
            raise NodeUnreachableError(
                f"partition {partition}: the connection to node {url} was lost before the "
                f"COMMIT receipt and the partition could not be sent again within "
                f"nodeTimeoutMs={timeout_ms}: {reason}",
                url,
            )
        attempt += 1
        log.info("partition %d: connection to %s lost (%s), sending again", partition, url, reason)


async def _send_once(
    plan: SinkPlan, url: BrokerUrl, deadline: Deadline, messages: Iterable[Outgoing]
) -> tuple[int, bool]:
    outcome: tuple[int, bool] | None = None
    try:
        async with AsyncExitStack() as stack:
            conn = await open_node(stack, url, plan.login, deadline)
            outcome = await _transaction(conn, messages)
    except _LOST:
        if outcome is None:
            raise
        # The COMMIT's RECEIPT came: the partition is stored, however the goodbye went.
    assert outcome is not None
    return outcome


async def _transaction(conn: ClientConnection, messages: Iterable[Outgoing]) -> tuple[int, bool]:
    try:
        transaction = await conn.begin(receipt=False)
        sent = 0
        for message in messages:
            await conn.send(
                message.destination,
                message.body,
                headers=message.headers,
                transaction=transaction,
                receipt=False,
            )
            sent += 1
        receipt = await conn.commit(transaction)
    except _LOST:
        # A write can fail on the socket the node closed after its ERROR frame: the ERROR,
        # once read, says why, and it is a refusal, not a lost connection.
        if isinstance(conn.failure, StompServerError):
            raise conn.failure from None
        raise
    return sent, receipt is not None and receipt.get("duplicate") == "true"


def _refusal(
    error: StompServerError, url: BrokerUrl, partition: int, seen: Sequence[Outgoing]
) -> SinkError:
    """The node's ERROR as one line naming the partition, and the row if a body was too big."""
    found = _BODY_LIMIT.search(str(error))
    if found is not None:
        limit = int(found.group(1))
        for number, message in enumerate(seen, start=1):
            if message.size > limit:
                return SinkError(
                    f"partition {partition}, row {number}: body of {message.size} bytes is "
                    f"larger than node {url} accepts ({limit} bytes, acceptor parameter "
                    f"stompMaxBodySize); nothing of the partition was stored"
                )
    return SinkError(
        f"partition {partition}: node {url} refused it: {error}; nothing of the partition "
        f"was stored"
    )
