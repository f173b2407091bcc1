"""The ``artemis`` source: Spark's stream reader and batch reader for a queue of the cluster.

How the source works
--------------------
A queue's messages are numbered per *stream* (the node that stored them first); an offset
of the query is the end reached in each stream (:mod:`.source_offsets`). Nothing is taken from the
queue while it is read: executors *browse* copies, and a message leaves the broker only
when Spark has durably finished the batch that read it.

* ``initialOffset`` (a new query, driver): for ``topic`` + ``subscription`` the durable
  subscription is created first on every node where it is missing. Then every URL lists the
  queue (in parallel; each node is retried until ``nodeTimeoutMs``), the members the nodes
  report must all be reached, every stream gets its *offset mark* (``acknowledgeUpTo(stream,
  0)``: the queue now belongs to a reader by offset and is never redistributed), and
  ``startingOffsets`` gives the first position. Consumers on the queue are warned about in
  the log, once per query start.
* ``latestOffset`` (every trigger): the nodes list the queue again; the next end is each
  stream's stable end (never below the start), cut to ``maxMessagesPerTrigger`` by
  count-only browses (:func:`~artemis_py.spark.planning.latest_offset`). Spark 4.2+ passes
  the start and the read limit; 4.0 and 4.1 call it without arguments, and the reader caps
  from the end it returned last in this process (the first call after a driver start returns
  everything available). A stream seen for the first time gets its mark before it appears in
  an offset. A node that does not answer is waited for (``nodeTimeoutMs``) unless the nodes
  reached hold everything the plan needs.
* ``partitions(start, end)``: one partition per (stream, node holding it) that advances.
  ``read`` (executors) browses ``fetchSize`` messages at a time from the start to the end
  of its range; a lost connection makes it find the stream's host again and continue at
  the same offset. A range whose messages someone else acknowledged or took is a
  :class:`~artemis_py.spark.reading.DataLossError` (``failOnDataLoss``, default true).
* ``commit(end)``: Spark calls it once the batch ending there is done and the next batch's
  offsets are in the checkpoint: ``acknowledgeUpTo(stream, end)`` on each stream's node
  removes what the batch read. A failure is logged and the acknowledgement is sent again at
  the next ``latestOffset``/``commit`` (it is cumulative); it never fails the query. Spark
  does not call it for a run's last batch: its messages stay until the query runs again.
  As ``acknowledgeUpTo`` takes everything below the offset, a query that started above a
  stream's lowest message (``latest``, or a JSON position) removes the messages below its
  start, unread, at its first commit: the query owns the queue.
* Batch reads (``spark.read``): one listing, and every message each node holds from its
  lowest offset to the stable end, read the same way; nothing is acknowledged. The
  stream-only options (``maxMessagesPerTrigger``, ``startingOffsets``) would be ignored, so
  the batch reader refuses them when Spark makes it (the read's first action).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import trio
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from artemis_py.client import ClientError
from artemis_py.spark import reading
from artemis_py.spark.errors import ConnectorError
from artemis_py.spark.options import SourceOptions, check_batch_read
from artemis_py.spark.planning import (
    NodeListing,
    StreamRange,
    batch_partitions,
    check_complete,
    initial_offset,
    latest_offset,
    ownership_warnings,
    stable_ends,
    stream_partitions,
)
from artemis_py.spark.reading import Nodes, ReadTarget
from artemis_py.spark.schema import SourceRow
from artemis_py.spark.source_offsets import SourceOffset
from artemis_py.spark.wire import call

__all__ = [
    "ArtemisBatchReader",
    "ArtemisPartition",
    "ArtemisStreamReader",
    "next_request",
    "read_range",
]

log = logging.getLogger("artemis_py.spark")
T = TypeVar("T")


def _streaming_limits() -> Any:
    # Read limits and SupportsTriggerAvailableNow are new in pyspark 4.2 (SPARK-55304).
    try:
        return importlib.import_module("pyspark.sql.streaming.datasource")
    except ImportError:
        return None


_LIMITS = _streaming_limits()
_MIXINS: tuple[type, ...] = (
    (_LIMITS.SupportsTriggerAvailableNow,)
    if _LIMITS is not None and hasattr(_LIMITS, "SupportsTriggerAvailableNow")
    else ()
)
# Errors of the network a commit logs instead of failing the query.
_COMMIT_ERRORS = (ConnectorError, ClientError, OSError, trio.BrokenResourceError)


class ArtemisPartition(InputPartition):
    """One range to read: offsets ``[start, stop)`` of ``stream`` on the node at ``url``.

    ``low``: the lowest offset that node held when the range was planned (None: none), for
    the data-loss check of the first chunk.
    """

    def __init__(self, rng: StreamRange, low: int | None) -> None:
        super().__init__(None)
        self.stream = rng.stream
        self.url = rng.url
        self.node_id = rng.node_id
        self.start = rng.start
        self.stop = rng.stop
        self.low = low

    def __repr__(self) -> str:
        return f"ArtemisPartition({self.stream}@{self.url} [{self.start}, {self.stop}))"


def _partitions(ranges: Sequence[StreamRange], listings: Sequence[NodeListing]) -> list[Any]:
    lows: dict[tuple[str, str], int | None] = {}
    for listing in listings:
        for entry in listing.streams:
            lows[(listing.url, entry.stream)] = entry.low if entry.count > 0 else None
    return [ArtemisPartition(rng, lows.get((rng.url, rng.stream))) for rng in ranges]


def read_range(target: ReadTarget, partition: ArtemisPartition) -> Iterator[SourceRow]:
    """The rows of ``partition``, a chunk (one ``trio.run``) at a time."""
    position = partition.start
    url = partition.url
    first = True
    while position < partition.stop:

        async def chunk(at: int = position, host: str = url, is_first: bool = first) -> Any:
            return await reading.with_nodes(
                target,
                lambda nodes: reading.read_chunk(
                    nodes,
                    host,
                    partition.stream,
                    at,
                    partition.stop,
                    first=is_first,
                    planned_low=partition.low,
                ),
            )

        found = call(chunk)
        yield from found.rows
        position, url, first = found.next, found.url, False


class ArtemisStreamReader(DataSourceStreamReader, *_MIXINS):  # type: ignore[misc]
    """Spark's stream reader for a queue (or a durable subscription); see the module doc.

    The driver keeps one instance for the whole run; another, made in a planner worker, is
    pickled to the executors for :meth:`read`, so only :meth:`read` may run there and it
    needs nothing but the options.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.target = ReadTarget.of(options)
        self._initial: SourceOffset | None = None
        self._last_end: SourceOffset | None = None  # for the argument-less latestOffset
        self._ceiling: dict[str, int] | None = None  # Trigger.AvailableNow
        self._marked: set[str] = set()  # streams given their offset mark in this process
        self._unacknowledged: SourceOffset | None = None
        self._warned = False
        self._subscribed = self.target.topic is None

    # -- offsets ------------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        # Spark 4.2+ calls this twice at a query's first start: one answer, or "latest"
        # could move between the calls.
        if self._initial is None:
            self._initial = self._call(self._start)
            self._last_end = self._initial
        return self._initial.to_json()

    async def _start(self, nodes: Nodes) -> SourceOffset:
        async def plan(listings: list[NodeListing]) -> SourceOffset:
            offset = initial_offset(listings, self.target.queue, self.options.starting_offsets)
            await self._mark(nodes, listings, offset.streams)
            self._warn(listings)
            return offset

        # Every URL must answer: a node down at a query's first start is an error naming it.
        return await reading.planned(nodes, plan)

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        # One method for every Spark: 4.2+ passes (start, limit), 4.0/4.1 nothing (design 16,
        # S1: Spark tells the two apart by the number of parameters, which is two here).
        self._retry_acknowledgements()
        begin, max_rows = next_request(
            start, limit, self._last_end, self.target.queue, self.options.max_messages_per_trigger
        )
        end = self._call(lambda nodes: self._latest(nodes, begin, max_rows))
        self._last_end = end
        return end.to_json()

    async def _latest(
        self, nodes: Nodes, begin: SourceOffset, max_rows: int | None
    ) -> SourceOffset:
        ceiling = self._ceiling

        def check(listings: list[NodeListing]) -> object:
            return latest_offset(listings, begin, ceiling=ceiling)

        async def plan(listings: list[NodeListing]) -> SourceOffset:
            new = set(stable_ends(listings)) - set(begin.streams) - self._marked
            await self._mark(nodes, listings, dict.fromkeys(new, 0))
            self._warn(listings)

            def counter(url: str, stream: str, at: int, stop: int, most: int) -> Any:
                return trio.from_thread.run(reading.count, nodes, url, stream, at, stop, most)

            # The planner is pure and calls its counter synchronously: it runs in a thread
            # whose counts come back to this event loop.
            return await trio.to_thread.run_sync(
                lambda: latest_offset(
                    listings, begin, max_rows=max_rows, count=counter, ceiling=ceiling
                )
            )

        return await reading.planned(nodes, plan, check=check)

    def getDefaultReadLimit(self) -> Any:
        most = self.options.max_messages_per_trigger
        if _LIMITS is None:
            return None
        return _LIMITS.ReadAllAvailable() if most is None else _LIMITS.ReadMaxRows(most)

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to the ends of this moment, in limited batches."""

        async def ends(nodes: Nodes) -> dict[str, int]:
            async def plan(listings: list[NodeListing]) -> dict[str, int]:
                return stable_ends(listings)

            # A URL of a node that scaled down need not answer: others hold its streams.
            return await reading.planned(nodes, plan, check=check_complete)

        self._ceiling = self._call(ends)

    # -- batches ------------------------------------------------------------------------------

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = SourceOffset.parse(start, queue=self.target.queue)
        stop = SourceOffset.parse(end, queue=self.target.queue)

        def check(listings: list[NodeListing]) -> object:
            return stream_partitions(listings, begin, stop)

        async def plan(nodes: Nodes) -> list[Any]:
            async def ranges(listings: list[NodeListing]) -> list[Any]:
                return _partitions(stream_partitions(listings, begin, stop), listings)

            return await reading.planned(nodes, ranges, check=check)

        if all(stop.streams.get(s, 0) <= begin.position(s) for s in stop.streams):
            return []
        return call(lambda: reading.with_nodes(self.target, plan))

    def read(self, partition: InputPartition) -> Iterator[SourceRow]:
        assert isinstance(partition, ArtemisPartition)
        return read_range(self.target, partition)

    def commit(self, end: dict[str, Any]) -> None:
        offset = SourceOffset.parse(end, queue=self.target.queue)
        self._unacknowledged = offset
        self._retry_acknowledgements()

    def stop(self) -> None:
        # Nothing is kept open between calls; Spark does not always call this (S1).
        pass

    # -- helpers ------------------------------------------------------------------------------

    def _call(self, work: Callable[[Nodes], Awaitable[T]]) -> T:
        """``work`` in one :func:`call`; the process's first also makes sure the durable
        subscription exists (Spark's first call may be ``prepareForTriggerAvailableNow``,
        ``initialOffset`` or, after a restart, ``latestOffset``)."""

        async def run(nodes: Nodes) -> T:
            if not self._subscribed:
                await reading.ensure_subscription(nodes)
                self._subscribed = True
            return await work(nodes)

        return call(lambda: reading.with_nodes(self.target, run))

    def _retry_acknowledgements(self) -> None:
        offset = self._unacknowledged
        if offset is None:
            return

        async def work(nodes: Nodes) -> None:
            async def plan(listings: list[NodeListing]) -> None:
                await reading.acknowledge(nodes, listings, offset.streams)

            await reading.planned(nodes, plan, check=lambda ls: latest_offset(ls, offset))

        try:
            call(lambda: reading.with_nodes(self.target, work))
        except _COMMIT_ERRORS as exc:
            log.warning(
                "acknowledging queue %s up to %s failed (sent again at the next batch): %s",
                self.target.queue,
                offset.dumps(),
                exc,
            )
            return
        if self._unacknowledged is offset:
            self._unacknowledged = None

    async def _mark(
        self, nodes: Nodes, listings: Sequence[NodeListing], streams: Mapping[str, int]
    ) -> None:
        fresh = {stream: 0 for stream in streams if stream not in self._marked}
        if fresh:
            await reading.acknowledge(nodes, listings, fresh)
            self._marked.update(fresh)

    def _warn(self, listings: Sequence[NodeListing]) -> None:
        if self._warned:
            return
        self._warned = True
        for line in ownership_warnings(listings, self.target.queue):
            log.warning("%s", line)


class ArtemisBatchReader(DataSourceReader):
    """Spark's batch reader: a snapshot of what every node holds, nothing taken."""

    def __init__(self, options: SourceOptions) -> None:
        # Here, not in load(): Spark's schema() call does not say whether it is a batch read.
        check_batch_read(options)
        self.options = options
        self.target = ReadTarget.of(options)

    def partitions(self) -> Sequence[InputPartition]:
        async def plan(nodes: Nodes) -> list[Any]:
            async def ranges(listings: list[NodeListing]) -> list[Any]:
                return _partitions(batch_partitions(listings), listings)

            return await reading.planned(nodes, ranges)

        found = call(lambda: reading.with_nodes(self.target, plan))
        # Spark needs a partition to run a batch read: an empty queue reads one empty range.
        return found or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[SourceRow]:
        if not isinstance(partition, ArtemisPartition):
            return iter(())
        return read_range(self.target, partition)


def next_request(
    start: dict[str, Any] | None,
    limit: Any,
    last_end: SourceOffset | None,
    queue: str,
    max_messages: int | None,
) -> tuple[SourceOffset, int | None]:
    """Where ``latestOffset`` plans from, and its ``max_rows``.

    Spark 4.2+ passes the start and its read limit. 4.0 and 4.1 pass nothing: the start is
    the end returned last in this process, with ``maxMessagesPerTrigger``; the first call
    after a driver start has none and plans everything available from nothing (ends only
    grow, so that is never below the checkpoint's start: a bigger first batch, no loss).
    """
    if start is not None:
        return SourceOffset.parse(start, queue=queue), _max_rows(limit)
    if last_end is not None:
        return last_end, max_messages
    return SourceOffset(queue, {}), None


def _max_rows(limit: Any) -> int | None:
    from artemis_py.spark.datasource import max_rows_of

    return max_rows_of(limit)
