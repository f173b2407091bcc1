"""The ``artemis`` source on a real three-node cluster: batch snapshot, streaming with a
limit, restart from a checkpoint, a topic's durable subscription, and errors at start.

One cluster for the module (message load balancing OFF, messages sent to each node
directly, so every node has a stream of its own); each test uses queues of its own.
Streaming queries run with ``Trigger.AvailableNow``: they read what is there in limited
batches and stop by themselves, so no test waits on a guess.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from artemis_py.client import open_stomp_connection
from artemis_py.client.offset_reader import list_streams
from artemis_py.spark.options import parse_source_options
from artemis_py.spark.reading import Nodes, ReadTarget, read_chunk, with_nodes
from artemis_py.spark.source import ArtemisBatchReader, read_range
from artemis_py.spark.wire import NodeUnreachableError
from cluster.conftest import Cluster, make_cluster, running
from integration.conftest import (  # noqa: F401 - fixtures used by the tests here
    BrokerProcess,
    free_port,
    make_broker,
    unique,
)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from running(make_cluster(tmp_path_factory.mktemp("source"), 3, policy="OFF"))


def urls(nodes: Cluster) -> str:
    return ",".join(f"tcp://127.0.0.1:{node.port}" for node in nodes)


def send(node: BrokerProcess, destination: str, bodies: list[str]) -> None:
    """Persistent, receipted sends to ``node``."""

    async def work() -> None:
        async with open_stomp_connection("127.0.0.1", node.port) as conn:
            for body in bodies:
                await conn.send(destination, body, headers={"persistent": "true"})

    trio.run(work)


def declare(nodes: Cluster, queue: str) -> None:
    """Create ``queue`` on every node (a subscriber makes it; the cluster's queues stay)."""

    async def work(node: BrokerProcess) -> None:
        async with open_stomp_connection("127.0.0.1", node.port) as conn:
            await (await conn.subscribe(f"/queue/{queue}")).unsubscribe()

    for node in nodes:
        trio.run(work, node)


def fill(nodes: Cluster, queue: str, per_node: int, tag: str = "") -> list[str]:
    """``per_node`` messages to each node's ``queue``; returns every body sent."""
    sent = []
    for index, node in enumerate(nodes):
        bodies = [f"{tag}n{index}-{k}" for k in range(per_node)]
        send(node, f"/queue/{queue}", bodies)
        sent += bodies
    return sent


def held(nodes: Cluster, queue: str) -> list[int]:
    """How many messages each node holds in ``queue`` (its own stream)."""

    async def count(node: BrokerProcess) -> int:
        async with open_stomp_connection("127.0.0.1", node.port) as conn:
            listing = await list_streams(conn, queue)
        return sum(stream.count for stream in listing.streams)

    return [trio.run(count, node) for node in nodes]


def node_ids(nodes: Cluster) -> list[str]:
    async def node_id(node: BrokerProcess) -> str:
        async with open_stomp_connection("127.0.0.1", node.port) as conn:
            return (await list_streams(conn, "DLQ")).node_id

    return [trio.run(node_id, node) for node in nodes]


def our_error(exc: BaseException) -> str:
    """The one-line message of our error inside Spark's exception."""
    found = re.findall(r"artemis_py\.spark\.\w+\.(\w+): (.*)", str(exc))
    assert found, f"no artemis_py error in: {exc}"
    kind, message = found[-1]
    return f"{kind}: {message}"


def run_available(spark: Any, options: dict[str, str], sink: str, checkpoint: Path, **kw: Any):
    """Run a streaming query with Trigger.AvailableNow until it stops; returns it."""
    writer = (
        spark.readStream.format("artemis")
        .options(**options)
        .load()
        .writeStream.format(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    if sink == "memory":
        writer = writer.queryName(kw["name"])
    query = writer.start(kw["path"]) if "path" in kw else writer.start()
    try:
        assert query.awaitTermination(120), "the query did not finish"
    finally:
        query.stop()
    return query


def bodies(rows: list[Any]) -> list[str]:
    return sorted(bytes(row.body).decode() for row in rows)


# -- batch ----------------------------------------------------------------------------------


def test_batch_read_is_a_snapshot_of_every_node(spark: Any, three: Cluster) -> None:
    queue = unique("snap")
    sent = fill(three, queue, 5)
    frame = spark.read.format("artemis").options(url=urls(three), queue=queue).load()
    rows = frame.collect()
    assert bodies(rows) == sorted(sent)
    assert len({(row.node, row.offset) for row in rows}) == len(sent)
    assert {row.node for row in rows} == set(node_ids(three))
    assert {row.queue for row in rows} == {queue}
    assert not any(row.redelivered for row in rows)
    assert held(three, queue) == [5, 5, 5]  # nothing taken


# -- streaming ------------------------------------------------------------------------------


def test_stream_reads_in_limited_batches_and_acknowledges_committed_ones(
    spark: Any, three: Cluster, tmp_path: Path
) -> None:
    queue = unique("limited")
    sent = fill(three, queue, 6)
    name = queue.replace("-", "_")
    options = {"url": urls(three), "queue": queue, "maxMessagesPerTrigger": "4"}
    query = run_available(spark, options, "memory", tmp_path / "checkpoint", name=name)
    rows = spark.sql(f"SELECT * FROM {name}").collect()
    assert bodies(rows) == sorted(sent)  # every message once
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == len(sent)
    assert max(sizes) <= 4
    assert len(sizes) >= len(sent) // 4
    # Spark committed (so acknowledged) every batch but the last, which it never commits
    # in a run: exactly the last batch's messages are still on the nodes.
    assert sum(held(three, queue)) == sizes[-1]


def test_a_restarted_query_reads_nothing_twice_and_misses_nothing(
    spark: Any, three: Cluster, tmp_path: Path
) -> None:
    queue = unique("restart")
    options = {"url": urls(three), "queue": queue, "maxMessagesPerTrigger": "5"}
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    sent = fill(three, queue, 4, tag="a")
    run_available(spark, options, "parquet", checkpoint, path=str(out))
    sent += fill(three, queue, 3, tag="b")
    second = run_available(spark, options, "parquet", checkpoint, path=str(out))
    rows = spark.read.parquet(str(out)).collect()
    assert bodies(rows) == sorted(sent)
    # The second run acknowledged the first run's last batch when it planned its first one.
    last = [p["numInputRows"] for p in second.recentProgress if p["numInputRows"]][-1]
    assert sum(held(three, queue)) == last


def test_a_topic_is_read_through_the_query_s_durable_subscription(
    spark: Any, three: Cluster, tmp_path: Path
) -> None:
    topic = unique("prices")
    options = {"url": urls(three), "topic": topic, "subscription": "spark"}
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    # The first run creates the subscription on every node (nothing to read yet) ...
    run_available(spark, options, "parquet", checkpoint, path=str(out))
    sent = []
    for index, node in enumerate(three):
        published = [f"t{index}-{k}" for k in range(3)]
        send(node, f"/topic/{topic}", published)
        sent += published
    assert held(three, f"{topic}::spark-{topic}.spark") == [3, 3, 3]
    # ... the second reads what was published since.
    run_available(spark, options, "parquet", checkpoint, path=str(out))
    rows = spark.read.parquet(str(out)).collect()
    assert bodies(rows) == sorted(sent)
    assert {row.queue for row in rows} == {f"spark-{topic}.spark"}


# -- errors at start ------------------------------------------------------------------------


def start_error(spark: Any, options: dict[str, str], checkpoint: Path) -> str:
    with pytest.raises(Exception) as info:
        run_available(spark, options, "memory", checkpoint, name=unique("e").replace("-", "_"))
    return our_error(info.value)


def test_a_queue_missing_everywhere_is_named(spark: Any, three: Cluster, tmp_path: Path) -> None:
    queue = unique("missing")
    message = start_error(spark, {"url": urls(three), "queue": queue}, tmp_path / "c")
    ids = node_ids(three)
    assert message.startswith(f"QueueMissingError: queue {queue} does not exist on any node")
    assert all(node_id in message for node_id in ids)


def test_a_node_down_at_start_is_named_after_node_timeout(
    spark: Any, three: Cluster, tmp_path: Path
) -> None:
    queue = unique("down")
    fill(three, queue, 1)
    port = free_port()  # nothing listens there: connection refused
    url = f"{urls(three)},tcp://127.0.0.1:{port}"
    options = {"url": url, "queue": queue, "nodeTimeoutMs": "300"}
    message = start_error(spark, options, tmp_path / "c")
    assert message.startswith(f"NodeUnreachableError: node tcp://127.0.0.1:{port} is not reachable")
    assert "nodeTimeoutMs=300" in message
    assert held(three, queue) == [1, 1, 1]


def test_wrong_credentials_are_refused_at_once(spark: Any, make_broker: Any) -> None:  # noqa: F811
    node = make_broker(security=True, users={"bob": "right"})
    options = {"url": f"tcp://127.0.0.1:{node.port}", "queue": "orders", "login": "bob"}
    with pytest.raises(Exception) as info:
        spark.read.format("artemis").options(**options, passcode="wrong").load().collect()
    message = our_error(info.value)
    assert message.startswith(f"NodeRefusedError: node tcp://127.0.0.1:{node.port} refused")


# -- reading a range ------------------------------------------------------------------------


def test_a_range_is_read_on_across_a_node_restart(three: Cluster) -> None:
    """``read()`` (run here without Spark) continues at the same offset after its node was
    killed and came back within nodeTimeoutMs: every message once, in offset order."""
    queue = unique("restarted")
    node = three[0]
    declare(three, queue)
    sent = [f"r{k}" for k in range(7)]
    send(node, f"/queue/{queue}", sent)
    options = parse_source_options(
        {"url": urls(three), "queue": queue, "fetchSize": "3", "nodeTimeoutMs": "30000"}
    )
    target = ReadTarget.of(options)
    (partition,) = ArtemisBatchReader(options).partitions()
    rows = read_range(target, partition)
    got = [next(rows) for _ in range(3)]  # the first chunk
    node.kill()
    restarter = threading.Thread(target=node.start)
    restarter.start()  # the next chunk waits for it
    try:
        got += list(rows)
    finally:
        restarter.join()
    assert [bytes(row[6]).decode() for row in got] == sent
    offsets = [row[3] for row in got]
    assert offsets == sorted(set(offsets))


def test_a_node_that_hangs_mid_read_fails_it_within_node_timeout(make_broker: Any) -> None:  # noqa: F811
    """A stopped node (SIGSTOP) keeps its sockets open but says nothing: the read gives up
    at the deadline, naming it, instead of waiting for ever (connections ask for heart-beats)."""
    node = make_broker(persistence=True)
    queue = unique("hung")
    send(node, f"/queue/{queue}", ["h0", "h1"])
    url = f"tcp://127.0.0.1:{node.port}"
    target = ReadTarget.of(
        parse_source_options({"url": url, "queue": queue, "nodeTimeoutMs": "2000"})
    )
    (stream,) = node_ids([node])

    async def work(nodes: Nodes) -> Any:
        await nodes.connection(url)
        assert node.process is not None
        node.process.send_signal(signal.SIGSTOP)
        with trio.fail_after(10):  # without heart-beats: for ever
            return await read_chunk(nodes, url, stream, 0, 2**62, first=False)

    started = time.monotonic()
    try:
        with pytest.raises(NodeUnreachableError, match=f"node {url}"):
            trio.run(with_nodes, target, work)
    finally:
        assert node.process is not None
        node.process.send_signal(signal.SIGCONT)
    assert time.monotonic() - started < 8


def test_acknowledgements_go_to_the_node_s_own_management_address(
    spark: Any,
    make_broker: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    node = make_broker(
        persistence=True, extra_core="<management-address>ops.management</management-address>"
    )
    queue = unique("managed")
    sent = [f"m{k}" for k in range(6)]
    send(node, f"/queue/{queue}", sent)
    options = {"url": f"tcp://127.0.0.1:{node.port}", "queue": queue, "maxMessagesPerTrigger": "2"}
    name = queue.replace("-", "_")
    query = run_available(spark, options, "memory", tmp_path / "checkpoint", name=name)
    assert bodies(spark.sql(f"SELECT * FROM {name}").collect()) == sorted(sent)
    # Every batch but the last was committed, so acknowledged there.
    last = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]][-1]
    assert held([node], queue) == [last]
