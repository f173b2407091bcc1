"""Planning the source's batches from the nodes' listings (pure: no I/O, no pyspark).

Theory of operation. A queue's messages are numbered per *stream* (the node that stored them
first); each node's listing of the queue says, per stream it holds, ``low`` (lowest offset
still held, or its offset mark), ``end`` (the exclusive *stable* end: nothing can appear below
it later), ``state`` and ``count``; and per stream ``hold``, the lowest offset still in transit
between nodes (store-and-forward) or None. A stream is usually held by its own node only
(``native``); a scale-down moves it, in offset order, to a target that holds it ``adopted``
and, once everything arrived, ``sealed``. During an incomplete scale-down one stream is on two
nodes, each with a disjoint part. Every node lists its own stream, empty or not.

Invariants the functions keep:

* **Never past a stable end**: a stream's end is the largest ``end`` of the nodes holding it,
  capped by the lowest ``hold`` any node reports for it (messages in transit are below no
  one's ``end`` yet, and would otherwise surface below an offset Spark already passed).
* **Never below the start**: a planned end is at least the start, or a later batch would
  read again what an earlier one passed (an adopted stream's end may lag for a while).
* **No stream without a host**: a stream the offsets know, and the own stream of every
  cluster member a node reports, must be held by a node reached. Otherwise
  :class:`MissingNodeError` names the node; the source retries it until ``nodeTimeoutMs``.
  A member that is not reached is fine when another node holds its stream (it scaled down).
* **A limit is shared by backlog**: ``maxMessagesPerTrigger`` (Spark's ``ReadMaxRows``) is
  split over streams in proportion to the messages they hold; each stream with a backlog gets
  at least one message (so none starves; with fewer messages allowed than streams that have
  a backlog, a batch may exceed the limit by that difference, as Kafka's source does; so may
  a stream held by two nodes at once, by one). The
  count-only browse that turns "k messages from here" into an end offset is a callback
  (:data:`Counter`), so this module stays pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from artemis_py.client.offset_reader import MANAGEMENT_ADDRESS
from artemis_py.spark.errors import MissingNodeError, OffsetError
from artemis_py.spark.source_offsets import EARLIEST, LATEST, SourceOffset, StartingOffsets

__all__ = [
    "CountResult",
    "Counter",
    "NodeListing",
    "StreamListing",
    "StreamRange",
    "batch_partitions",
    "initial_offset",
    "latest_offset",
    "ownership_warnings",
    "stable_ends",
    "stream_partitions",
]

StreamState = Literal["native", "adopted", "sealed"]


@dataclass(frozen=True, slots=True)
class StreamListing:
    """One stream as one node holds it."""

    stream: str
    low: int
    end: int
    state: StreamState
    count: int


@dataclass(frozen=True, slots=True)
class NodeListing:
    """What one node answered for the queue, with the URL it was reached at."""

    url: str
    node_id: str
    streams: tuple[StreamListing, ...]
    consumers: int = 0
    members: frozenset[str] = frozenset()
    hold: Mapping[str, int | None] = field(default_factory=dict)
    management_address: str = MANAGEMENT_ADDRESS


@dataclass(frozen=True, slots=True)
class StreamRange:
    """What one partition reads: offsets ``[start, stop)`` of ``stream`` on one node.

    ``state`` is the node's state of the stream when planned: a reader of an ``adopted``
    range may have to wait for the rest of it to arrive.
    """

    stream: str
    url: str
    node_id: str
    start: int
    stop: int
    state: StreamState


@dataclass(frozen=True, slots=True)
class CountResult:
    """A count-only browse's answer: ``count`` messages, continue at ``next_offset``."""

    next_offset: int
    count: int


# (url, stream, start, stop, max count) -> where the max-th message's successor starts.
Counter = Callable[[str, str, int, int, int], CountResult]

_Host = tuple[NodeListing, StreamListing]
K = TypeVar("K")


def stable_ends(listings: Sequence[NodeListing]) -> dict[str, int]:
    """Each held stream's stable end across the nodes, capped by what is in transit."""
    holds: dict[str, int] = {}
    for listing in listings:
        for stream, hold in listing.hold.items():
            if hold is not None:
                holds[stream] = min(hold, holds.get(stream, hold))
    ends: dict[str, int] = {}
    for stream, hosts in _hosts(listings).items():
        end = max(entry.end for _, entry in hosts)
        ends[stream] = min(end, holds[stream]) if stream in holds else end
    return ends


def check_complete(listings: Sequence[NodeListing]) -> None:
    """Raise :class:`MissingNodeError` unless the nodes reached hold every member's stream:
    a URL of a node that left the cluster (scaled down) need not answer."""
    _check_hosts(listings, ())


def initial_offset(
    listings: Sequence[NodeListing], queue: str, starting: StartingOffsets
) -> SourceOffset:
    """The first start of a new query, from option ``startingOffsets``."""
    _check_hosts(listings, ())
    ends = stable_ends(listings)
    if starting == "earliest":
        return SourceOffset(queue, dict.fromkeys(ends, 0))
    if starting == "latest":
        return SourceOffset(queue, ends)
    streams = dict.fromkeys(ends, 0)
    for stream, position in starting.streams.items():
        if stream not in ends:
            held = ", ".join(sorted(ends)) or "none"
            raise OffsetError(
                f"startingOffsets names stream {stream}, which no node reached holds "
                f"(streams of queue {queue}: {held})"
            )
        if position == EARLIEST:
            streams[stream] = 0
        elif position == LATEST:
            streams[stream] = ends[stream]
        else:
            streams[stream] = position
    return SourceOffset(queue, streams)


def latest_offset(
    listings: Sequence[NodeListing],
    start: SourceOffset,
    *,
    max_rows: int | None = None,
    count: Counter | None = None,
    ceiling: Mapping[str, int] | None = None,
) -> SourceOffset:
    """The end of the next batch from ``start``.

    ``max_rows``: Spark's ``ReadMaxRows`` (None: all available); it needs ``count``.
    ``ceiling``: the ends recorded by ``prepareForTriggerAvailableNow`` (a stream not in it
    does not advance).
    """
    _check_hosts(listings, start.streams)
    ends = stable_ends(listings)
    targets: dict[str, int] = {}
    for stream in sorted(set(ends) | set(start.streams)):
        begin = start.position(stream)
        target = ends.get(stream, begin)
        if ceiling is not None:
            target = min(target, ceiling.get(stream, begin))
        targets[stream] = max(begin, target)
    if max_rows is not None:
        if count is None:
            raise ValueError("a limit needs a count callback")
        targets = _limit(listings, start, targets, max_rows, count)
    return SourceOffset(start.queue, targets)


def stream_partitions(
    listings: Sequence[NodeListing], start: SourceOffset, end: SourceOffset
) -> list[StreamRange]:
    """One range per (stream, node holding it) for each stream that advances."""
    if start.queue != end.queue:
        raise OffsetError(f"a batch from queue {start.queue!r} to queue {end.queue!r}")
    advancing = {
        stream: (start.position(stream), stop)
        for stream, stop in end.streams.items()
        if stop > start.position(stream)
    }
    _check_hosts(listings, advancing)
    hosts = _hosts(listings)
    return [
        StreamRange(stream, listing.url, listing.node_id, begin, stop, entry.state)
        for stream, (begin, stop) in sorted(advancing.items())
        for listing, entry in hosts[stream]
    ]


def batch_partitions(listings: Sequence[NodeListing]) -> list[StreamRange]:
    """A batch read's snapshot: on each node, each stream it holds messages of, low to end."""
    _check_hosts(listings, ())
    ends = stable_ends(listings)
    return [
        StreamRange(stream, listing.url, listing.node_id, entry.low, ends[stream], entry.state)
        for stream, hosts in sorted(_hosts(listings).items())
        for listing, entry in hosts
        if entry.count > 0 and entry.low < ends[stream]
    ]


def ownership_warnings(listings: Sequence[NodeListing], queue: str) -> list[str]:
    """One line per node where the queue has consumers: the query must own its queue."""
    return [
        f"queue {queue} has {listing.consumers} consumer(s) on node {listing.node_id} "
        f"({listing.url}): messages they take are not read by the query"
        for listing in listings
        if listing.consumers > 0
    ]


# -- internals ----------------------------------------------------------------------------


def _hosts(listings: Iterable[NodeListing]) -> dict[str, list[_Host]]:
    hosts: dict[str, list[_Host]] = {}
    for listing in listings:
        for entry in listing.streams:
            hosts.setdefault(entry.stream, []).append((listing, entry))
    return hosts


def _check_hosts(listings: Sequence[NodeListing], streams: Iterable[str]) -> None:
    """Raise :class:`MissingNodeError` for a stream or member held by no node reached."""
    reached = {listing.node_id for listing in listings}
    held = set(_hosts(listings))
    members = set().union(*(listing.members for listing in listings))
    missing = sorted((members - reached - held) | (set(streams) - held))
    if not missing:
        return
    seen = ", ".join(f"{listing.node_id} ({listing.url})" for listing in listings) or "none"
    # A node reached that lists no stream of its own lost its copy of the queue (deleted and
    # made again, or a new data directory), and with it messages Spark expects.
    gone = [node for node in missing if node in reached]
    away = [node for node in missing if node not in reached]
    problems = []
    if away:
        problems.append(
            f"node {', '.join(away)} is not reachable and no node reached holds its messages"
        )
    if gone:
        problems.append(f"node {', '.join(gone)} no longer holds its stream of the queue")
    problem = "; ".join(problems)
    raise MissingNodeError(f"{problem} (nodes reached: {seen})", tuple(missing))


def _limit(
    listings: Sequence[NodeListing],
    start: SourceOffset,
    targets: Mapping[str, int],
    max_rows: int,
    count: Counter,
) -> dict[str, int]:
    """Cut each stream's target so the batch holds about ``max_rows`` messages."""
    hosts = _hosts(listings)
    ends = {stream: start.position(stream) for stream in targets}
    # Streams with a range to read; one whose nodes hold no message at all advances freely
    # (its range is gaps only) and costs nothing against the limit.
    pending = {}
    for stream, target in targets.items():
        held = sum(entry.count for _, entry in hosts.get(stream, ()))
        if target > ends[stream]:
            if held > 0:
                pending[stream] = held
            else:
                ends[stream] = target
    budget = max_rows
    first = True
    # Each round spends budget (a stream that used all of its share stays for the next
    # round) or drops the streams that had less than their share: the loop ends.
    while budget > 0 and pending:
        shares = _shares(budget, pending, at_least_one=first)
        first = False
        saturated: dict[str, int] = {}
        for stream, share in shares.items():
            if share == 0:
                saturated[stream] = pending[stream]
                continue
            cut, used, full = _cut(
                hosts[stream], stream, ends[stream], targets[stream], share, count
            )
            ends[stream] = cut
            budget -= used
            if full and cut < targets[stream]:
                saturated[stream] = pending[stream]
        pending = saturated
    return ends


def _cut(
    hosts: Sequence[_Host], stream: str, begin: int, target: int, share: int, count: Counter
) -> tuple[int, int, bool]:
    """Where ``stream`` ends with ``share`` messages from ``begin``: (end, counted, full).

    With several nodes holding parts of the stream (an incomplete scale-down), the share is
    split by what each holds, each node with messages getting at least one (so a share of 1
    may read 2), and the stream ends where the first node that used all of its part
    stopped: no node then contributes more than its part.
    """
    weights = {index: entry.count for index, (_, entry) in enumerate(hosts) if entry.count > 0}
    parts = _shares(share, weights, at_least_one=True)
    cut = target
    used = 0
    full = False
    for index, part in parts.items():
        listing, _ = hosts[index]
        result = count(listing.url, stream, begin, target, part)
        used += min(result.count, part)
        if result.count >= part:
            full = True
            cut = min(cut, max(begin, min(result.next_offset, target)))
    return cut, used, full


def _shares(budget: int, weights: Mapping[K, int], *, at_least_one: bool) -> dict[K, int]:
    """Split ``budget`` by ``weights`` with the largest remainders.

    ``at_least_one``: every key gets 1 first, even past the budget (no stream starves);
    otherwise the sum is exactly ``budget`` and a key may get 0.
    """
    total = sum(weights.values())
    base = 1 if at_least_one else 0
    spare = max(budget - base * len(weights), 0)
    shares = {key: base + spare * weight // total for key, weight in weights.items()}
    left = spare - sum(share - base for share in shares.values())
    by_remainder = sorted(weights, key=lambda key: (-(spare * weights[key] % total), str(key)))
    for key in by_remainder[:left]:
        shares[key] += 1
    return shares
