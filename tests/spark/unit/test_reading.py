"""The source's pure decisions: data loss, a missing queue, listings, the read target."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import pytest
import trio

from artemis_py.client import BrokerUrl
from artemis_py.client.offset_reader import Listing, StreamInfo
from artemis_py.spark import reading
from artemis_py.spark.errors import MissingNodeError
from artemis_py.spark.options import parse_source_options
from artemis_py.spark.planning import NodeListing, StreamListing
from artemis_py.spark.reading import (
    DataLossError,
    QueueMissingError,
    ReadTarget,
    Survey,
    check_queue,
    data_loss,
    node_listing,
    raise_single,
    survey,
    with_nodes,
)
from artemis_py.spark.wire import NodeUnreachableError


@pytest.mark.parametrize(
    ("start", "stop", "planned_low", "low", "mark", "lost"),
    [
        (100, 200, 120, 120, 100, False),  # as planned; the mark is our own last commit
        (100, 200, 90, 150, 100, False),  # below the start: our commit took them
        (100, 200, None, None, 0, False),  # nothing held when planned
        (100, 200, 250, None, 0, False),  # held only past the range
        (0, 200, 5, 5, 150, False),  # from the earliest: an old mark is no loss
        (100, 200, 120, 130, 100, True),  # 120 was taken
        (100, 200, 120, None, 100, True),  # everything was taken
        (100, 200, 120, 120, 150, True),  # another reader acknowledged past our start
    ],
)
def test_data_loss(
    start: int, stop: int, planned_low: int | None, low: int | None, mark: int, lost: bool
) -> None:
    reason = data_loss("s1", start, stop, planned_low, low, mark)
    assert (reason is not None) == lost
    if reason is not None:
        assert "stream s1" in reason


def listing(url: str, node: str, *streams: str) -> NodeListing:
    return NodeListing(url, node, tuple(StreamListing(s, 0, 0, "native", 0) for s in streams))


def test_a_queue_missing_everywhere_names_every_node() -> None:
    a, b = listing("tcp://a:1", "A"), listing("tcp://b:1", "B")
    with pytest.raises(QueueMissingError) as caught:
        check_queue(Survey([a, b], ["tcp://a:1", "tcp://b:1"]), "orders")
    assert str(caught.value) == (
        "queue orders does not exist on any node (nodes: A (tcp://a:1), B (tcp://b:1))"
    )


def test_a_queue_missing_on_some_nodes_names_them_and_the_others() -> None:
    a, b = listing("tcp://a:1", "A", "A"), listing("tcp://b:1", "B")
    with pytest.raises(QueueMissingError, match=r"does not exist on node B \(tcp://b:1\) "):
        check_queue(Survey([a, b], ["tcp://b:1"]), "orders")
    check_queue(Survey([a, b], []), "orders")


def test_node_listing_keeps_what_the_planner_needs() -> None:
    raw = Listing("N1", True, (StreamInfo("N1", 5, 9, "native", 3),), 2, ("N2", "N3"))
    assert node_listing("tcp://h:1", raw) == NodeListing(
        "tcp://h:1",
        "N1",
        (StreamListing("N1", 5, 9, "native", 3),),
        consumers=2,
        members=frozenset({"N2", "N3"}),
    )


def test_read_target_of_a_subscription_and_pickling() -> None:
    options = parse_source_options(
        {"url": "tcp://h:1,tcp://g:2", "topic": "t", "subscription": "s", "login": "u"}
    )
    target = ReadTarget.of(options)
    assert (target.queue, target.name, target.client_id) == ("t::spark-t.s", "spark-t.s", "spark-t")
    assert target.urls == (BrokerUrl("h", 1), BrokerUrl("g", 2))
    assert pickle.loads(pickle.dumps(target)) == target
    queue = ReadTarget.of(parse_source_options({"url": "tcp://h:1", "queue": "orders"}))
    assert (queue.queue, queue.name, queue.client_id) == ("orders", "orders", None)


def test_errors_raised_in_executors_pickle() -> None:
    error = DataLossError("data loss in queue q")
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


def test_a_nursery_s_single_error_is_raised_as_it_is() -> None:
    inner = DataLossError("x")
    with pytest.raises(DataLossError):
        raise_single(BaseExceptionGroup("g", [ExceptionGroup("h", [inner])]))
    with pytest.raises(BaseExceptionGroup):
        raise_single(BaseExceptionGroup("g", [inner, ValueError()]))


class SilentNode:
    """``reading._list_one`` for two URLs: A answers, and holds B's stream from its
    ``moved_at``-th listing on; B does not answer before the deadline."""

    def __init__(self, moved_at: int | None) -> None:
        self.moved_at = moved_at
        self.listings = 0

    async def __call__(self, nodes: reading.Nodes, url: str) -> tuple[NodeListing, bool]:
        if url == "tcp://b:1":
            await trio.sleep_until(nodes.deadline.at)
            raise NodeUnreachableError("node tcp://b:1 is not reachable", BrokerUrl("b", 1))
        self.listings += 1
        moved = self.moved_at is not None and self.listings >= self.moved_at
        return listing(url, "A", *(("A", "B") if moved else ("A",))), True


def holds_b(listings: list[NodeListing]) -> bool:
    return any(entry.stream == "B" for node in listings for entry in node.streams)


SILENT_B = ReadTarget.of(parse_source_options({"url": "tcp://a:1,tcp://b:1", "queue": "q"}))


async def test_a_survey_lists_again_until_a_silent_node_s_stream_has_moved(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    # B is scaling down: it refuses connections before A has taken its stream over.
    fake = SilentNode(moved_at=3)
    monkeypatch.setattr(reading, "_list_one", fake)
    started = trio.current_time()
    result = await with_nodes(SILENT_B, lambda nodes: survey(nodes, holds_b))
    assert [node.node_id for node in result.listings] == ["A"]
    assert holds_b(result.listings)
    assert fake.listings == 3
    assert trio.current_time() - started < 5  # not B's deadline (60 s)


async def test_a_survey_not_accepted_ends_with_the_silent_node_s_error(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    monkeypatch.setattr(reading, "_list_one", SilentNode(moved_at=None))
    with pytest.raises(NodeUnreachableError, match="tcp://b:1 is not reachable"):
        await with_nodes(SILENT_B, lambda nodes: survey(nodes, holds_b))


class LeavingNode:
    """``reading._list_one`` for A and B, both answering the first survey; after
    :meth:`leave`, B's connection is closed and B is silent, and A holds B's stream."""

    class Connection:
        is_open = True

    def __init__(self) -> None:
        self.left = False
        self.connections: dict[str, LeavingNode.Connection] = {}

    async def __call__(self, nodes: reading.Nodes, url: str) -> tuple[NodeListing, bool]:
        if url == "tcp://b:1" and self.left:
            await trio.sleep_until(nodes.deadline.at)
            raise NodeUnreachableError("node tcp://b:1 is not reachable", BrokerUrl("b", 1))
        conn = self.connections.setdefault(url, LeavingNode.Connection())
        nodes._open[url] = (conn, trio.Event())  # type: ignore[assignment]
        if url == "tcp://b:1":
            return listing(url, "B", "B"), True
        return listing(url, "A", *(("A", "B") if self.left else ("A",))), True

    def leave(self) -> None:
        self.left = True
        self.connections["tcp://b:1"].is_open = False


async def test_a_node_leaving_between_survey_and_plan_makes_the_plan_again(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.abc.Clock
) -> None:
    # B answers the survey, then scales down before the plan counts on it: the plan is made
    # again from a new survey (A holds B's stream by then), not stalled on dialling B.
    fake = LeavingNode()
    monkeypatch.setattr(reading, "_list_one", fake)

    async def never_reached(stack: object, url: BrokerUrl, login: object, deadline: Any) -> None:
        await trio.sleep_until(deadline.at)
        raise NodeUnreachableError(f"node {url} is not reachable", url)

    async def browse(conn: object, queue: str, **kwargs: object) -> tuple[None, SimpleNamespace]:
        return None, SimpleNamespace(next=kwargs["end"], count=3)

    monkeypatch.setattr(reading, "open_node", never_reached)
    monkeypatch.setattr(reading, "browse", browse)
    plans: list[list[str]] = []

    async def plan(nodes: reading.Nodes, listings: list[NodeListing]) -> int:
        plans.append([node.node_id for node in listings])
        if not fake.left:
            fake.leave()
        total = 0
        for node in listings:
            for entry in node.streams:
                total += (await reading.count(nodes, node.url, entry.stream, 0, 9, 9)).count
        return total

    def check(listings: list[NodeListing]) -> None:
        if not holds_b(listings):
            raise MissingNodeError("B's stream has no host", ("B",))

    async def work(nodes: reading.Nodes) -> int:
        return await reading.planned(nodes, lambda ls: plan(nodes, ls), check=check)

    started = trio.current_time()
    assert await with_nodes(SILENT_B, work) == 6  # A's stream and B's, counted on A
    assert plans == [["A", "B"], ["A"]]
    assert trio.current_time() - started < 5  # not the deadline (60 s)
