"""The planner: stable ends, start offsets, limits, holds, missing nodes, partitions."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from artemis_py.spark.errors import MissingNodeError, OffsetError
from artemis_py.spark.planning import (
    CountResult,
    NodeListing,
    StreamListing,
    StreamRange,
    StreamState,
    batch_partitions,
    initial_offset,
    latest_offset,
    ownership_warnings,
    stable_ends,
    stream_partitions,
)
from artemis_py.spark.source_offsets import EARLIEST, LATEST, SourceOffset, SpecificOffsets

Q = "orders"
N1, N2, N3 = "node-1", "node-2", "node-3"


@dataclass
class Node:
    """A node as the planner sees it: the offsets of the messages it holds, per stream."""

    node_id: str
    held: dict[str, list[int]] = field(default_factory=dict)
    ends: dict[str, int] = field(default_factory=dict)
    states: dict[str, StreamState] = field(default_factory=dict)
    members: frozenset[str] = frozenset()
    hold: dict[str, int | None] = field(default_factory=dict)
    consumers: int = 0

    @property
    def url(self) -> str:
        return f"tcp://{self.node_id}:61613"

    def listing(self) -> NodeListing:
        streams = []
        for stream, offsets in sorted(self.held.items()):
            end = self.ends.get(stream, max(offsets, default=-1) + 1)
            streams.append(
                StreamListing(
                    stream,
                    low=min(offsets, default=end),
                    end=end,
                    state=self.states.get(
                        stream, "native" if stream == self.node_id else "adopted"
                    ),
                    count=len(offsets),
                )
            )
        return NodeListing(
            self.url,
            self.node_id,
            tuple(streams),
            consumers=self.consumers,
            members=self.members,
            hold=dict(self.hold),
        )


class Cluster:
    """Nodes plus the count-only browse the planner takes as a callback (calls recorded)."""

    def __init__(self, *nodes: Node) -> None:
        self.nodes = {node.url: node for node in nodes}
        self.calls: list[tuple[str, str, int, int, int]] = []

    def listings(self) -> list[NodeListing]:
        return [node.listing() for node in self.nodes.values()]

    def count(self, url: str, stream: str, start: int, stop: int, max_count: int) -> CountResult:
        self.calls.append((url, stream, start, stop, max_count))
        offsets = [o for o in self.nodes[url].held.get(stream, []) if start <= o < stop]
        if len(offsets) >= max_count:
            return CountResult(offsets[max_count - 1] + 1, max_count)
        return CountResult(stop, len(offsets))

    def messages(self, start: SourceOffset, end: SourceOffset) -> int:
        """How many held messages a batch from ``start`` to ``end`` reads."""
        return sum(
            1
            for node in self.nodes.values()
            for stream, offsets in node.held.items()
            for o in offsets
            if start.position(stream) <= o < end.position(stream)
        )


def offset(**streams: int) -> SourceOffset:
    return SourceOffset(Q, {name.replace("_", "-"): value for name, value in streams.items()})


# -- stable ends --------------------------------------------------------------------------


def test_stable_end_is_the_largest_end_capped_by_the_lowest_hold() -> None:
    cluster = Cluster(
        Node(N1, held={N1: [60, 70]}, ends={N1: 100}, hold={N1: 50}),
        Node(N2, held={N1: [10, 20], N2: [5]}, ends={N1: 40, N2: 9}, hold={N2: None}),
        Node(N3, held={N3: []}, ends={N3: 0}, hold={N1: 55}),
    )
    assert stable_ends(cluster.listings()) == {N1: 50, N2: 9, N3: 0}


def test_without_hold_the_native_end_counts() -> None:
    cluster = Cluster(
        Node(N1, held={N1: [60, 70]}, ends={N1: 100}),
        Node(N2, held={N1: [10, 20]}, ends={N1: 40}),
    )
    assert stable_ends(cluster.listings()) == {N1: 100}


# -- the first start ----------------------------------------------------------------------


def three_nodes() -> Cluster:
    members = frozenset({N1, N2, N3})
    return Cluster(
        Node(N1, held={N1: [1, 2, 3]}, ends={N1: 10}, members=members),
        Node(N2, held={N2: [4, 8]}, ends={N2: 9}, members=members),
        Node(N3, held={N3: []}, ends={N3: 7}, members=members),
    )


def test_initial_offset_earliest_and_latest() -> None:
    listings = three_nodes().listings()
    assert initial_offset(listings, Q, "earliest") == offset(node_1=0, node_2=0, node_3=0)
    assert initial_offset(listings, Q, "latest") == offset(node_1=10, node_2=9, node_3=7)


def test_initial_offset_from_json_with_special_values_and_defaults() -> None:
    starting = SpecificOffsets({N1: 2, N2: LATEST, N3: EARLIEST})
    assert initial_offset(three_nodes().listings(), Q, starting) == offset(
        node_1=2, node_2=9, node_3=0
    )
    # A stream left out starts at 0.
    assert initial_offset(three_nodes().listings(), Q, SpecificOffsets({N1: 2})) == offset(
        node_1=2, node_2=0, node_3=0
    )


def test_initial_offset_naming_an_unknown_stream() -> None:
    with pytest.raises(OffsetError) as info:
        initial_offset(three_nodes().listings(), Q, SpecificOffsets({"node-9": 1}))
    assert "stream node-9" in str(info.value)
    assert "node-1, node-2, node-3" in str(info.value)


def test_initial_offset_needs_every_member() -> None:
    listings = three_nodes().listings()
    with pytest.raises(MissingNodeError) as info:
        initial_offset(listings[:2], Q, "earliest")
    assert info.value.node_ids == (N3,)
    message = str(info.value)
    assert "node node-3 is not reachable" in message
    assert "node-1 (tcp://node-1:61613)" in message


# -- the next batch without a limit -------------------------------------------------------


def test_latest_offset_reads_up_to_the_stable_ends() -> None:
    listings = three_nodes().listings()
    assert latest_offset(listings, offset(node_1=2)) == offset(node_1=10, node_2=9, node_3=7)


def test_end_is_never_below_the_start() -> None:
    # node-2's stream is adopted by node-3 and its end there lags the start already reached.
    cluster = Cluster(Node(N3, held={N3: [1], N2: [20, 21]}, ends={N3: 5, N2: 22}))
    assert latest_offset(cluster.listings(), offset(node_2=30, node_3=2)) == offset(
        node_2=30, node_3=5
    )


def test_hold_caps_the_end() -> None:
    # Incomplete scale-down of node-1: 50..59 are in transit to node-2.
    cluster = Cluster(
        Node(N1, held={N1: [60, 61]}, ends={N1: 62}, hold={N1: 50}),
        Node(N2, held={N1: [10, 20], N2: []}, ends={N1: 21, N2: 0}),
    )
    end = latest_offset(cluster.listings(), offset(node_1=0))
    assert end == offset(node_1=50, node_2=0)


def test_ceiling_of_trigger_available_now() -> None:
    listings = three_nodes().listings()
    end = latest_offset(listings, offset(node_1=2), ceiling={N1: 5, N2: 9})
    # node-3 was not in the ceiling: it stays where it is.
    assert end == offset(node_1=5, node_2=9, node_3=0)
    assert latest_offset(listings, offset(node_1=6), ceiling={N1: 5}).position(N1) == 6


# -- missing nodes ------------------------------------------------------------------------


def test_a_member_not_reached_is_missing() -> None:
    cluster = Cluster(Node(N1, held={N1: [1]}, members=frozenset({N1, N2})))
    with pytest.raises(MissingNodeError) as info:
        latest_offset(cluster.listings(), offset())
    assert info.value.node_ids == (N2,)


def test_a_member_not_reached_is_fine_when_another_node_holds_its_stream() -> None:
    cluster = Cluster(
        Node(N1, held={N1: [1], N2: [3, 4]}, states={N2: "sealed"}, members=frozenset({N1, N2}))
    )
    assert latest_offset(cluster.listings(), offset()) == offset(node_1=2, node_2=5)


def test_a_stream_of_the_offsets_without_a_host_is_missing() -> None:
    # node-2 left the cluster (no longer a member) but its stream is in the checkpoint.
    cluster = Cluster(Node(N1, held={N1: [1]}, members=frozenset({N1})))
    with pytest.raises(MissingNodeError) as info:
        latest_offset(cluster.listings(), offset(node_2=7))
    assert info.value.node_ids == (N2,)


def test_a_reached_node_that_lost_its_stream() -> None:
    cluster = Cluster(Node(N1, held={N1: [1]}), Node(N2, held={}))
    with pytest.raises(MissingNodeError) as info:
        latest_offset(cluster.listings(), offset(node_2=7))
    assert info.value.node_ids == (N2,)
    assert str(info.value).startswith("node node-2 no longer holds its stream of the queue")


def test_nothing_reached() -> None:
    with pytest.raises(MissingNodeError) as info:
        latest_offset([], offset(node_1=1))
    assert "nodes reached: none" in str(info.value)


# -- limits -------------------------------------------------------------------------------


def backlog(**counts: int) -> Cluster:
    """One node per stream, holding offsets 0..count-1 (offsets spaced by 2: gaps)."""
    return Cluster(
        *(
            Node(name.replace("_", "-"), held={name.replace("_", "-"): list(range(0, 2 * n, 2))})
            for name, n in counts.items()
        )
    )


def test_limit_split_by_backlog() -> None:
    cluster = backlog(node_1=60, node_2=30, node_3=10)
    start = offset()
    end = latest_offset(cluster.listings(), start, max_rows=10, count=cluster.count)
    assert cluster.messages(start, end) == 10
    # Shares 1 each, the other 7 by 60:30:10 with the largest remainders: 4+1, 2+1, 1+1.
    assert per_stream(cluster, start, end) == {N1: 5, N2: 3, N3: 2}


def test_limit_larger_than_the_backlog_reads_everything() -> None:
    cluster = backlog(node_1=3, node_2=2)
    end = latest_offset(cluster.listings(), offset(), max_rows=100, count=cluster.count)
    assert end == latest_offset(cluster.listings(), offset())


def test_unused_share_goes_to_streams_that_have_more() -> None:
    # node-1 holds 100 messages but 98 are below the start (a batch not committed yet):
    # its share by held count is too big, and what it cannot use goes to node-2.
    cluster = backlog(node_1=100, node_2=100)
    start = offset(node_1=196, node_2=0)
    end = latest_offset(cluster.listings(), start, max_rows=20, count=cluster.count)
    assert end.position(N1) == latest_offset(cluster.listings(), start).position(N1)
    assert per_stream(cluster, start, end) == {N1: 2, N2: 18}


def test_every_stream_with_a_backlog_advances_even_with_a_small_limit() -> None:
    cluster = backlog(node_1=50, node_2=1, node_3=1)
    start = offset()
    end = latest_offset(cluster.listings(), start, max_rows=1, count=cluster.count)
    assert all(end.position(s) > 0 for s in (N1, N2, N3))
    assert cluster.messages(start, end) == 3  # the limit is exceeded by streams - limit


def test_a_range_of_gaps_only_advances_without_counting() -> None:
    cluster = Cluster(Node(N1, held={N1: []}, ends={N1: 40}), Node(N2, held={N2: [0, 1, 2]}))
    end = latest_offset(cluster.listings(), offset(), max_rows=2, count=cluster.count)
    assert end == offset(node_1=40, node_2=2)
    assert {url for url, *_ in cluster.calls} == {"tcp://node-2:61613"}


def test_limit_on_a_stream_held_by_two_nodes() -> None:
    # Incomplete scale-down: node-2 holds node-1's older part, node-1 the rest.
    cluster = Cluster(
        Node(N1, held={N1: list(range(40, 100))}),
        Node(N2, held={N1: list(range(0, 40)), N2: []}),
    )
    start = offset()
    end = latest_offset(cluster.listings(), start, max_rows=10, count=cluster.count)
    assert 1 <= cluster.messages(start, end) <= 10
    assert end.position(N1) > 0


def test_a_limit_needs_the_count_callback() -> None:
    with pytest.raises(ValueError, match="count callback"):
        latest_offset(backlog(node_1=5).listings(), offset(), max_rows=1)


@given(
    counts=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=4),
    starts=st.lists(st.integers(min_value=0, max_value=70), min_size=4, max_size=4),
    max_rows=st.integers(min_value=1, max_value=50),
)
def test_limit_invariants(counts: list[int], starts: list[int], max_rows: int) -> None:
    cluster = backlog(**{f"node_{i}": n for i, n in enumerate(counts)})
    listings = cluster.listings()
    start = SourceOffset(Q, {f"node-{i}": starts[i] for i in range(len(counts))})
    unlimited = latest_offset(listings, start)
    end = latest_offset(listings, start, max_rows=max_rows, count=cluster.count)
    for stream in unlimited.streams:
        assert start.position(stream) <= end.position(stream) <= unlimited.position(stream)
    available = cluster.messages(start, unlimited)
    read = cluster.messages(start, end)
    with_backlog = sum(1 for n in per_stream(cluster, start, unlimited).values() if n > 0)
    if max_rows >= with_backlog:
        assert read == min(max_rows, available)
    else:  # every stream with a backlog gets one message
        assert read == with_backlog


# -- partitions ---------------------------------------------------------------------------


def test_stream_partitions_one_per_stream_and_host() -> None:
    cluster = Cluster(
        Node(N1, held={N1: [40, 41]}, members=frozenset({N1, N2})),
        Node(N2, held={N1: [1, 2], N2: [5]}, members=frozenset({N1, N2})),
    )
    parts = stream_partitions(
        cluster.listings(), offset(node_1=1, node_2=6), offset(node_1=42, node_2=6)
    )
    assert parts == [
        StreamRange(N1, "tcp://node-1:61613", N1, 1, 42, "native"),
        StreamRange(N1, "tcp://node-2:61613", N2, 1, 42, "adopted"),
    ]


def test_empty_batch_has_no_partition() -> None:
    listings = three_nodes().listings()
    assert stream_partitions(listings, offset(node_1=3), offset(node_1=3)) == []


def test_partitions_of_a_stream_without_host() -> None:
    listings = three_nodes().listings()
    with pytest.raises(MissingNodeError) as info:
        stream_partitions(listings, offset(), offset(node_9=3))
    assert info.value.node_ids == ("node-9",)


def test_partitions_between_queues_are_refused() -> None:
    with pytest.raises(OffsetError):
        stream_partitions([], offset(), SourceOffset("other", {}))


def test_batch_partitions_snapshot_from_low_to_stable_end() -> None:
    cluster = Cluster(
        Node(N1, held={N1: [12, 40]}, ends={N1: 50}, hold={N1: 45}),
        Node(N2, held={N1: [3, 5], N2: []}, ends={N1: 6, N2: 4}),
    )
    assert batch_partitions(cluster.listings()) == [
        StreamRange(N1, "tcp://node-1:61613", N1, 12, 45, "native"),
        StreamRange(N1, "tcp://node-2:61613", N2, 3, 45, "adopted"),
    ]


def test_ownership_warnings_name_node_and_count() -> None:
    cluster = Cluster(Node(N1, held={N1: []}, consumers=2), Node(N2, held={N2: []}))
    (warning,) = ownership_warnings(cluster.listings(), Q)
    assert "queue orders has 2 consumer(s) on node node-1 (tcp://node-1:61613)" in warning


def per_stream(cluster: Cluster, start: SourceOffset, end: SourceOffset) -> dict[str, int]:
    """Messages a batch reads in each stream."""
    return {
        stream: sum(
            1
            for node in cluster.nodes.values()
            for o in node.held.get(stream, [])
            if start.position(stream) <= o < end.position(stream)
        )
        for stream in end.streams
    }
