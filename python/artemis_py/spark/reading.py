"""The source's talk with the nodes (no pyspark): listings, counts, marks, acknowledgements,
the durable subscription, and reading a partition's range chunk by chunk.

Everything here runs inside one :func:`~artemis_py.spark.wire.call` (one ``trio.run``).
:class:`Nodes` holds that call's connections, one per URL, opened on first use and retried
until the call's :class:`~artemis_py.spark.wire.Deadline` (option ``nodeTimeoutMs``).

:func:`survey` lists the queue on every URL in parallel. With an ``accept`` check (the
planner, which raises :class:`MissingNodeError` when a stream or a live member has no host
among the nodes reached) it returns as soon as the nodes reached suffice, so a URL of a node
that left the cluster for good does not hold every batch up for ``nodeTimeoutMs``; without
one, every URL must answer. :func:`planned` repeats a survey and a plan while the planner
misses a node, until the deadline.

:func:`read_chunk` reads up to ``fetchSize`` messages of one range. A lost connection (or a
node that no longer holds the stream) makes it survey the nodes again to find the stream's
host now, and browse there from the same position: a chunk is returned whole, so nothing
read is yielded twice and nothing is skipped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import NoReturn, TypeVar, cast

import trio

from artemis_py.client import (
    BrokerUrl,
    ClientConnection,
    ClientError,
    StompServerError,
)
from artemis_py.client.offset_reader import Listing, acknowledge_up_to, browse, list_streams
from artemis_py.spark.errors import ConnectorError, MissingNodeError
from artemis_py.spark.options import SourceOptions
from artemis_py.spark.planning import CountResult, NodeListing, StreamListing, StreamState
from artemis_py.spark.schema import SourceRow, message_row
from artemis_py.spark.wire import Deadline, Login, NodeUnreachableError, open_node

__all__ = [
    "Chunk",
    "DataLossError",
    "Nodes",
    "QueueMissingError",
    "ReadTarget",
    "StreamReadError",
    "acknowledge",
    "check_queue",
    "count",
    "data_loss",
    "ensure_subscription",
    "node_listing",
    "planned",
    "read_chunk",
    "survey",
]

log = logging.getLogger("artemis_py.spark")

T = TypeVar("T")

# What a broken connection looks like from a call on it (the sticky failure's kinds).
_LOST = (OSError, ClientError, trio.BrokenResourceError, trio.ClosedResourceError)


class QueueMissingError(ConnectorError):
    """The queue (or the subscription's queue) does not exist on a node the source reads."""


class DataLossError(ConnectorError):
    """Messages a batch should read were removed by someone else (``failOnDataLoss``)."""


class StreamReadError(ConnectorError):
    """A range could not be read (a node refused the browse, or the stream ends early)."""


@dataclass(frozen=True, slots=True)
class ReadTarget:
    """What every call of a query needs: nodes, credentials, queue, limits (picklable)."""

    urls: tuple[BrokerUrl, ...]
    login: Login
    queue: str  # what is listed and browsed: the queue, or the subscription's FQQN
    name: str  # the queue's own name: the queue column, and management operations
    timeout_ms: int
    fetch_size: int
    fail_on_data_loss: bool
    topic: str | None = None
    subscription: str | None = None
    client_id: str | None = None

    @classmethod
    def of(cls, options: SourceOptions) -> ReadTarget:
        queue = options.source_queue
        return cls(
            urls=options.urls,
            login=Login(options.login, options.passcode),
            queue=queue,
            name=queue.rpartition("::")[2],
            timeout_ms=options.node_timeout_ms,
            fetch_size=options.fetch_size,
            fail_on_data_loss=options.fail_on_data_loss,
            topic=options.topic,
            subscription=options.subscription,
            client_id=options.client_id if options.topic is not None else None,
        )


class Nodes:
    """The connections of one call, by URL text; see the module doc.

    Each connection lives in a task of :func:`with_nodes`'s nursery (a connection's own
    tasks must be closed by the task that opened them), so any task of the call may open,
    use or drop one.
    """

    def __init__(self, target: ReadTarget, deadline: Deadline, nursery: trio.Nursery) -> None:
        self.target = target
        self.deadline = deadline
        self._nursery = nursery
        self._urls = {str(url): url for url in target.urls}
        self._open: dict[str, tuple[ClientConnection, trio.Event]] = {}

    @property
    def urls(self) -> list[str]:
        return list(self._urls)

    def broker_url(self, url: str) -> BrokerUrl:
        return self._urls[url]

    async def connection(self, url: str) -> ClientConnection:
        """The open connection to ``url``, made (and retried until the deadline) if needed."""
        held = self._open.get(url)
        if held is not None and held[0].is_open:
            return held[0]
        self.drop(url)
        conn: ClientConnection = await self._nursery.start(self._hold, url)
        return conn

    @asynccontextmanager
    async def listed(self, url: str) -> AsyncIterator[ClientConnection]:
        """The connection a survey listed ``url`` on, for the plan made from that survey.

        A node gone since (a scale-down closes its connections) raises
        :class:`MissingNodeError`, so :func:`planned` surveys again at once instead of
        dialling the departed URL until the deadline.
        """
        held = self._open.get(url)
        if held is None or not held[0].is_open:
            raise MissingNodeError(f"node {url} left after it was listed", (url,))
        try:
            yield held[0]
        except StompServerError:
            raise  # the node answered: a refusal, not a departure
        except _LOST as exc:
            self.drop(url)
            raise MissingNodeError(f"node {url} left after it was listed: {exc}", (url,)) from None

    async def _hold(
        self, url: str, task_status: trio.TaskStatus[ClientConnection] = trio.TASK_STATUS_IGNORED
    ) -> None:
        done = trio.Event()
        started = False
        try:
            async with AsyncExitStack() as stack:
                conn = await open_node(stack, self._urls[url], self.target.login, self.deadline)
                self._open[url] = (conn, done)
                task_status.started(conn)
                started = True
                await done.wait()
                if not conn.is_open:
                    await conn.aclose()
        except _LOST as exc:
            if not started:
                raise
            # The node went away after our last request: nothing to lose.
            log.debug("closing the connection to %s: %s", url, exc)

    def drop(self, url: str) -> None:
        """Close the connection to ``url`` (a broken one without a word)."""
        held = self._open.pop(url, None)
        if held is not None:
            held[1].set()

    def close(self) -> None:
        for url in list(self._open):
            self.drop(url)


async def with_nodes(target: ReadTarget, work: Callable[[Nodes], Awaitable[T]]) -> T:
    """Run ``work`` with a :class:`Nodes` whose deadline starts now; close its connections."""
    try:
        async with trio.open_nursery() as nursery:
            nodes = Nodes(target, Deadline.after(target.timeout_ms), nursery)
            try:
                return await work(nodes)
            finally:
                nodes.close()
    except BaseExceptionGroup as group:
        raise_single(group)


def raise_single(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Re-raise the one exception of a nursery's ``group`` (ours raise one at a time)."""
    if len(group.exceptions) != 1:
        raise group
    error = group.exceptions[0]
    if isinstance(error, BaseExceptionGroup):
        raise_single(error)
    raise error from None


# -- listings -------------------------------------------------------------------------------


def node_listing(url: str, listing: Listing) -> NodeListing:
    """The planner's view of one node's listing."""
    streams = tuple(
        StreamListing(s.stream, s.low, s.end, cast(StreamState, s.state), s.count)
        for s in listing.streams
    )
    return NodeListing(
        url=url,
        node_id=listing.node_id,
        streams=streams,
        consumers=listing.consumers,
        members=frozenset(listing.members),
        management_address=listing.management_address,
    )


async def _list_one(nodes: Nodes, url: str) -> tuple[NodeListing, bool]:
    """One node's listing and whether the queue exists there; a connection lost on the way
    is opened again until the deadline."""
    attempt = 0
    while True:
        conn = await nodes.connection(url)
        try:
            listing = await list_streams(conn, nodes.target.queue)
            return node_listing(url, listing), listing.exists
        except StompServerError as exc:
            raise StreamReadError(
                f"node {url} refused to list queue {nodes.target.queue}: {exc}"
            ) from None
        except _LOST as exc:
            nodes.drop(url)
            if not await nodes.deadline.pause(attempt):
                raise NodeUnreachableError(
                    f"node {url} lost the connection while listing queue "
                    f"{nodes.target.queue}: {exc}",
                    nodes.broker_url(url),
                ) from None
        attempt += 1


@dataclass(frozen=True, slots=True)
class Survey:
    """The listings of the nodes reached (in URL order), and the URLs where the queue is
    missing (they are in ``listings`` too, without streams)."""

    listings: list[NodeListing]
    missing: list[str]


async def survey(nodes: Nodes, accept: Callable[[list[NodeListing]], bool] | None = None) -> Survey:
    """List the queue on every URL in parallel (see the module doc for ``accept``).

    While a URL does not answer and the nodes that did are not accepted, those are listed
    again from time to time: a node scaling down refuses connections before its target has
    taken its stream over, so a first answer that misses the stream may be followed by
    one that holds it, well before the silent URL's deadline.
    """
    found: dict[str, tuple[NodeListing, bool]] = {}
    failures: list[NodeUnreachableError] = []
    order = nodes.urls
    relisting = trio.CancelScope()

    def reached() -> list[NodeListing]:
        return [found[url][0] for url in order if url in found]

    def settle(nursery: trio.Nursery) -> None:
        if len(found) + len(failures) == len(order):
            relisting.cancel()
        elif accept is not None and found and accept(reached()):
            nursery.cancel_scope.cancel()

    try:
        async with trio.open_nursery() as nursery:

            async def one(url: str) -> None:
                try:
                    found[url] = await _list_one(nodes, url)
                except NodeUnreachableError as exc:
                    failures.append(exc)
                settle(nursery)

            async def relist() -> None:
                with relisting:
                    attempt = 0
                    while await nodes.deadline.pause(attempt):
                        for url in [url for url in order if url in found]:
                            found[url] = await _list_one(nodes, url)
                        settle(nursery)
                        attempt += 1

            for url in order:
                nursery.start_soon(one, url)
            if accept is not None:
                nursery.start_soon(relist)
    except BaseExceptionGroup as group:
        raise_single(group)
    if len(found) < len(order) and (accept is None or not accept(reached())):
        raise failures[0]
    return Survey(reached(), [url for url in order if url in found and not found[url][1]])


def check_queue(result: Survey, queue: str) -> None:
    """Raise :class:`QueueMissingError` when the queue is missing on a node reached."""
    if not result.missing:
        return
    nodes = {listing.url: listing.node_id for listing in result.listings}
    missing = ", ".join(f"{nodes[url]} ({url})" for url in result.missing)
    if len(result.missing) == len(result.listings):
        raise QueueMissingError(f"queue {queue} does not exist on any node (nodes: {missing})")
    present = ", ".join(
        f"{listing.node_id} ({listing.url})"
        for listing in result.listings
        if listing.url not in result.missing
    )
    raise QueueMissingError(
        f"queue {queue} does not exist on node {missing} (it exists on {present}): "
        "the source reads it on every node, declare it on each"
    )


def accepting(check: Callable[[list[NodeListing]], object]) -> Callable[[list[NodeListing]], bool]:
    """``check`` (a planner call) as a survey's ``accept``: True unless a node is missing."""

    def accept(listings: list[NodeListing]) -> bool:
        try:
            check(listings)
        except MissingNodeError:
            return False
        return True

    return accept


async def planned(
    nodes: Nodes,
    plan: Callable[[list[NodeListing]], Awaitable[T]],
    *,
    check: Callable[[list[NodeListing]], object] | None = None,
) -> T:
    """``plan`` on a survey of the nodes, again while it raises :class:`MissingNodeError`,
    until the deadline (then that error). ``check``: the pure part of the plan, to accept
    a survey without every URL (None: every URL must answer)."""
    attempt = 0
    while True:
        result = await survey(nodes, accepting(check) if check is not None else None)
        check_queue(result, nodes.target.queue)
        try:
            return await plan(result.listings)
        except MissingNodeError:
            if not await nodes.deadline.pause(attempt):
                raise
        attempt += 1


# -- counting, marks and acknowledgements ----------------------------------------------------


async def count(
    nodes: Nodes, url: str, stream: str, start: int, stop: int, limit: int
) -> CountResult:
    """The planner's :data:`~artemis_py.spark.planning.Counter`: a count-only browse."""
    async with nodes.listed(url) as conn:
        _, end = await browse(
            conn,
            nodes.target.queue,
            stream=stream,
            start=start,
            end=stop,
            limit=limit,
            count_only=True,
        )
    return CountResult(end.next, end.count)


async def acknowledge(
    nodes: Nodes, listings: Sequence[NodeListing], offsets: Mapping[str, int]
) -> None:
    """``acknowledgeUpTo(stream, offset)`` on every node holding each stream (durable on
    return). With offset 0 it only registers the offset mark."""
    for listing in listings:
        held = {entry.stream for entry in listing.streams}
        for stream in sorted(held & set(offsets)):
            async with nodes.listed(listing.url) as conn:
                await acknowledge_up_to(
                    conn,
                    nodes.target.name,
                    stream,
                    offsets[stream],
                    management_address=listing.management_address,
                )


async def ensure_subscription(nodes: Nodes) -> None:
    """Create the query's durable subscription on every node where it does not exist.

    SUBSCRIBE with ``durable-subscription-name`` on a connection with the query's
    ``client-id`` creates it, UNSUBSCRIBE without the name leaves it (docs/stomp.md). Only
    where it is missing: a subscriber of an existing one would be handed a message, which
    would come back as redelivered. A message published between SUBSCRIBE and UNSUBSCRIBE
    of a new one comes back so too (``client-individual``: it is never acknowledged).
    """
    target = nodes.target
    if target.topic is None or target.subscription is None:
        return
    result = await survey(nodes)
    login = Login(target.login.login, target.login.passcode, target.client_id)
    for url in result.missing:
        async with AsyncExitStack() as stack:
            conn = await open_node(stack, nodes.broker_url(url), login, nodes.deadline)
            sub = await conn.subscribe(
                target.topic,
                ack="client-individual",
                headers=[
                    ("durable-subscription-name", target.subscription),
                    ("subscription-type", "MULTICAST"),
                    ("consumer-window-size", "0"),
                ],
            )
            await sub.unsubscribe()
        log.info("created durable subscription %s on node %s", target.name, url)


# -- reading --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Chunk:
    """One browse's rows, where the range continues, and the node that served it."""

    rows: list[SourceRow]
    next: int
    url: str


def data_loss(
    stream: str, start: int, stop: int, planned_low: int | None, low: int | None, mark: int
) -> str | None:
    """Why messages of ``[start, stop)`` are gone, or None (the first chunk's check).

    * The offset mark is past ``start``: another reader acknowledged what this batch reads
      (this query's own marks never pass the start of a batch it still reads). A start of
      0 is "from the earliest held", so a mark there is no loss.
    * ``planned_low``: the lowest offset the node held when the batch was planned; if it was
      in the range and is no longer held, someone took it (a consumer on the queue).
    """
    if start > 0 and mark > start:
        return (
            f"stream {stream} was acknowledged up to {mark} by another reader, past this "
            f"batch's start {start}"
        )
    if (
        planned_low is not None
        and start <= planned_low < stop
        and (low is None or low > planned_low)
    ):
        return (
            f"message {planned_low} of stream {stream}, held when the batch was planned, is "
            "gone (a consumer on the queue took it?)"
        )
    return None


async def _browse_at(
    nodes: Nodes, url: str, stream: str, position: int, stop: int
) -> tuple[list[SourceRow], int, int | None, int, str] | None:
    """Browse a chunk at ``url``: (rows, next, low, mark, state), or None when the node does
    not hold the stream (any more)."""
    conn = await nodes.connection(url)
    target = nodes.target
    try:
        messages, end = await browse(
            conn, target.queue, stream=stream, start=position, end=stop, limit=target.fetch_size
        )
    except StompServerError as exc:
        raise StreamReadError(
            f"node {url} refused to browse queue {target.queue} (stream {stream}): {exc}"
        ) from None
    if end.state == "absent":
        return None
    rows = [message_row(m, queue=target.name, stream=stream) for m in messages]
    return rows, end.next, end.low, end.mark, end.state


async def read_chunk(
    nodes: Nodes,
    url: str,
    stream: str,
    position: int,
    stop: int,
    *,
    first: bool,
    planned_low: int | None = None,
) -> Chunk:
    """Up to ``fetchSize`` rows of ``stream`` from ``position`` (see the module doc)."""
    attempt = 0
    while True:
        try:
            found = await _browse_at(nodes, url, stream, position, stop)
        except _LOST:
            nodes.drop(url)
            found = None
        if found is not None:
            rows, following, low, mark, state = found
            if first:
                lost = data_loss(stream, position, stop, planned_low, low, mark)
                if lost is not None:
                    _lost(nodes.target, url, lost)
            if rows or following > position:
                return Chunk(rows, following, url)
            if state != "adopted":  # a native stream holds its planned range whole
                raise StreamReadError(
                    f"stream {stream} of queue {nodes.target.queue} on node {url} ends at "
                    f"{following}, below the planned end {stop}"
                )
        # The node is gone, restarting, or no longer holds the stream: find its host now.
        url = await _find_host(nodes, stream, url)
        if not await nodes.deadline.pause(attempt):
            raise NodeUnreachableError(
                f"stream {stream} of queue {nodes.target.queue} could not be read within "
                f"nodeTimeoutMs={nodes.target.timeout_ms}",
                nodes.broker_url(url),
            )
        attempt += 1


async def _find_host(nodes: Nodes, stream: str, previous: str) -> str:
    def held(listings: list[NodeListing]) -> bool:
        return any(e.stream == stream for listing in listings for e in listing.streams)

    result = await survey(nodes, held)
    hosts = [
        listing.url
        for listing in result.listings
        if any(e.stream == stream for e in listing.streams)
    ]
    if not hosts:
        raise StreamReadError(
            f"no node reached holds stream {stream} of queue {nodes.target.queue} any more"
        )
    return previous if previous in hosts else hosts[0]


def _lost(target: ReadTarget, url: str, reason: str) -> None:
    message = f"data loss in queue {target.queue} on node {url}: {reason}"
    if target.fail_on_data_loss:
        raise DataLossError(f"{message} (set failOnDataLoss=false to read on)")
    log.warning("%s; reading on (failOnDataLoss=false)", message)
