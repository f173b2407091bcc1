"""The ``artemis`` sink against a real node: batch and stream writes, re-runs stored once,
errors before anything is sent, an oversized body, a node that is down.

One persistent node serves the module; each test writes to queues of its own. What a write
stored is read back by browsing (copies; nothing is consumed), so a count is exact.
"""

from __future__ import annotations

import json
import pickle
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from artemis_py.client import Message, StompServerError, open_stomp_connection
from artemis_py.client.offset_reader import browse
from artemis_py.spark import sink
from artemis_py.spark.options import parse_sink_options
from artemis_py.spark.sink import ArtemisStreamWriter, ArtemisWriter, SinkCommitMessage, SinkPlan
from artemis_py.spark.sink_rules import check_sink_schema
from integration.conftest import BrokerProcess, free_port, unique

pytestmark = pytest.mark.spark

BODY_LIMIT = 1024  # the "small" acceptor's stompMaxBodySize


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path_factory.mktemp("sink"),
        name="sink",
        persistence=True,
        extra_acceptors={"small": f";stompMaxBodySize={BODY_LIMIT}"},
    )
    broker.start()
    yield broker
    broker.close()


def url_of(node: BrokerProcess) -> str:
    return f"tcp://127.0.0.1:{node.port}"


def stored(node: BrokerProcess, queue: str) -> list[Message]:
    """Copies of every message in ``queue`` ([] when the queue does not exist)."""

    async def read() -> list[Message]:
        try:
            async with open_stomp_connection("127.0.0.1", node.port) as conn:
                messages, _ = await browse(conn, queue)
                return messages
        except StompServerError as exc:
            if "does not exist" in str(exc):
                return []
            raise

    return trio.run(read)


def our_error(exc: BaseException) -> str:
    """The one-line message of our error inside Spark's exception."""
    found = re.findall(r"artemis_py\.spark\.\w+\.(\w+Error): (.*)", str(exc))
    assert found, f"no artemis_py error in: {exc}"
    kind, message = found[-1]
    return f"{kind}: {message}"


# -- batch ------------------------------------------------------------------------------------


def test_a_batch_write_stores_every_row_once_with_its_headers(
    spark: Any, node: BrokerProcess
) -> None:
    odd, even = unique("sink-odd"), unique("sink-even")
    rows = [
        (f"text {n}", {"seq": str(n), "kind": "order"}, f"queue://{odd if n % 2 else even}")
        for n in range(20)
    ]
    frame = spark.createDataFrame(
        rows, "body STRING, headers MAP<STRING,STRING>, destination STRING"
    ).repartition(3)
    frame.write.format("artemis").option("url", url_of(node)).mode("append").save()

    for queue, parity in ((odd, 1), (even, 0)):
        messages = stored(node, queue)
        assert sorted(m.text for m in messages) == sorted(
            f"text {n}" for n in range(20) if n % 2 == parity
        )
        for message in messages:
            assert message.get("seq") == message.text.split()[1]
            assert message.get("kind") == "order"
            assert message.get("persistent") == "true"
            assert message.get("_AMQ_DUPL_ID").startswith("spark:")

    # Binary bodies, the destination from the option, non-persistent on request.
    target = unique("sink-binary")
    bodies = [bytes([n, 0, 255 - n]) * 3 for n in range(6)]
    binary = spark.createDataFrame([(b,) for b in bodies], "body BINARY").repartition(2)
    (
        binary.write.format("artemis")
        .options(url=url_of(node), destination=f"/queue/{target}", persistent="false")
        .mode("append")
        .save()
    )
    messages = stored(node, target)
    assert sorted(m.body for m in messages) == sorted(bodies)
    assert all(m.get("persistent") is None for m in messages)


# -- streaming --------------------------------------------------------------------------------


def run_files_to_artemis(
    spark: Any, source: Path, checkpoint: Path, options: dict[str, str]
) -> None:
    """One file per micro-batch from ``source`` into the sink, until all are done."""
    query = (
        spark.readStream.schema("body STRING")
        .option("maxFilesPerTrigger", "1")
        .json(str(source))
        .writeStream.format("artemis")
        .options(**options)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the query did not finish"
    finally:
        query.stop()
    assert query.exception() is None


def test_a_stream_stores_every_row_once_and_a_rerun_batch_is_not_stored_again(
    spark: Any, node: BrokerProcess, tmp_path: Path
) -> None:
    queue = unique("sink-stream")
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    expected = []
    for batch in range(3):
        lines = [json.dumps({"body": f"b{batch}-{n}"}) for n in range(5)]
        (source / f"{batch}.json").write_text("\n".join(lines) + "\n")
        expected += [f"b{batch}-{n}" for n in range(5)]
    options = {"url": url_of(node), "destination": f"queue://{queue}"}

    run_files_to_artemis(spark, source, checkpoint, options)
    assert sorted(m.text for m in stored(node, queue)) == sorted(expected)
    commits = sorted(p.name for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert commits == ["0", "1", "2"]

    # As after a driver crash between the sink's commit and Spark's: the last batch has
    # offsets but no commit entry, so a restart runs it again, same query id and batch id.
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)  # Hadoop's checksum of it
    run_files_to_artemis(spark, source, checkpoint, options)
    assert (checkpoint / "commits" / "2").exists()
    assert sorted(m.text for m in stored(node, queue)) == sorted(expected)


# -- re-runs of a partition, in process ---------------------------------------------------------


class FakeTask:
    """What the writers read of Spark's TaskContext."""

    def __init__(self, partition: int, **properties: str) -> None:
        self.partition = partition
        self.properties = properties

    def partitionId(self) -> int:  # Spark's name
        return self.partition

    def getLocalProperty(self, key: str) -> str | None:  # Spark's name
        return self.properties.get(key)


def in_task(monkeypatch: pytest.MonkeyPatch, task: FakeTask) -> None:
    monkeypatch.setattr(sink.TaskContext, "get", staticmethod(lambda: task))


def test_a_partition_run_twice_is_stored_once(
    node: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = unique("sink-rerun")
    options = parse_sink_options({"url": url_of(node), "destination": f"queue://{queue}"})
    plan = SinkPlan(options, check_sink_schema([("body", "string")], destination=queue))
    rows = [(f"r{n}",) for n in range(5)]
    query = {"sql.streaming.queryId": "3f1e2d4c-5b6a-4789-9abc-def012345678"}

    in_task(monkeypatch, FakeTask(1, **query, **{"streaming.sql.batchId": "4"}))
    first = ArtemisStreamWriter(plan).write(iter(rows))
    # A retried task: a fresh writer (Spark's micro-batch writer), the same ids.
    again = ArtemisStreamWriter(plan).write(iter(reversed(rows)))
    assert first == SinkCommitMessage(partition=1, rows=5, duplicate=False)
    assert again == SinkCommitMessage(partition=1, rows=5, duplicate=True)
    assert len(stored(node, queue)) == 5

    # The next micro-batch is new work.
    in_task(monkeypatch, FakeTask(1, **query, **{"streaming.sql.batchId": "5"}))
    assert not ArtemisStreamWriter(plan).write(iter(rows)).duplicate
    assert len(stored(node, queue)) == 10

    # A batch write: the writer reaches its tasks pickled, with its writeId.
    in_task(monkeypatch, FakeTask(0))
    writer = ArtemisWriter(plan)
    assert not writer.write(iter(rows)).duplicate
    assert pickle.loads(pickle.dumps(writer)).write(iter(rows)).duplicate
    assert not ArtemisWriter(plan).write(iter(rows)).duplicate  # another write
    assert len(stored(node, queue)) == 20


# -- errors -------------------------------------------------------------------------------------


def test_a_batch_write_given_its_write_id_twice_is_stored_once(
    spark: Any, node: BrokerProcess
) -> None:
    """What ``foreachBatch`` needs: Spark runs a batch again, the function writes the same
    rows again with the same ``writeId`` (e.g. ``f"{query_id}-{batch_id}"``)."""
    target = unique("sink-write-id")
    frame = spark.createDataFrame([(f"w{n}",) for n in range(9)], "body STRING").repartition(3)
    for _ in range(2):
        (
            frame.write.format("artemis")
            .options(url=url_of(node), destination=f"/queue/{target}", writeId="q7-b3")
            .mode("append")
            .save()
        )
    messages = stored(node, target)
    assert sorted(m.text for m in messages) == [f"w{n}" for n in range(9)]
    assert {m.get("_AMQ_DUPL_ID") for m in messages} == {f"spark:q7-b3:{p}" for p in range(3)}


@pytest.mark.parametrize(
    ("columns", "mode", "expected"),
    [
        (
            "body STRING",
            "overwrite",
            "OptionError: mode overwrite is not supported: the artemis sink only appends",
        ),
        (
            "body STRING, headers MAP<STRING,INT>",
            "append",
            "SchemaError: column headers is map<string,int>, the artemis sink needs "
            "map<string,string>",
        ),
    ],
)
def test_a_bad_write_fails_before_anything_is_sent(
    spark: Any, node: BrokerProcess, columns: str, mode: str, expected: str
) -> None:
    queue = unique("sink-refused")
    row = ("x", {"a": 1}) if "headers" in columns else ("x",)
    frame = spark.createDataFrame([row], columns)
    with pytest.raises(Exception) as info:
        frame.write.format("artemis").options(
            url=url_of(node), destination=f"queue://{queue}"
        ).mode(mode).save()
    assert our_error(info.value) == expected
    assert stored(node, queue) == []


def test_a_bad_row_fails_its_partition_naming_the_row(spark: Any, node: BrokerProcess) -> None:
    queue = unique("sink-null")
    frame = spark.createDataFrame([("a",), ("b",), (None,), ("d",)], "body STRING").coalesce(1)
    with pytest.raises(Exception) as info:
        frame.write.format("artemis").options(
            url=url_of(node), destination=f"queue://{queue}"
        ).mode("append").save()
    assert our_error(info.value) == "SinkError: partition 0, row 3: body is null"
    assert stored(node, queue) == []


def test_an_oversized_body_names_its_row_and_nothing_of_the_partition_is_stored(
    spark: Any, node: BrokerProcess
) -> None:
    queue = unique("sink-big")
    port = node.extra_ports["small"]
    bodies = [b"small"] * 5 + [b"x" * (BODY_LIMIT + 1000)] + [b"after"] * 3
    frame = spark.createDataFrame([(b,) for b in bodies], "body BINARY").coalesce(1)
    with pytest.raises(Exception) as info:
        frame.write.format("artemis").options(
            url=f"tcp://127.0.0.1:{port}", destination=f"queue://{queue}"
        ).mode("append").save()
    assert our_error(info.value) == (
        f"SinkError: partition 0, row 6: body of {BODY_LIMIT + 1000} bytes is larger than "
        f"node tcp://127.0.0.1:{port} accepts ({BODY_LIMIT} bytes, acceptor parameter "
        "stompMaxBodySize); nothing of the partition was stored"
    )
    assert stored(node, queue) == []


def test_a_node_that_is_down_fails_the_write_within_node_timeout(spark: Any) -> None:
    port = free_port()
    frame = spark.createDataFrame([("x",)], "body STRING")
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        frame.write.format("artemis").options(
            url=f"tcp://127.0.0.1:{port}", destination="queue://nowhere", nodeTimeoutMs="1000"
        ).mode("append").save()
    assert time.monotonic() - started < 20  # 1 s of retries, plus Spark's job and worker start
    assert our_error(info.value) == (
        f"NodeUnreachableError: node tcp://127.0.0.1:{port} is not reachable (tried for 1 s, "
        "nodeTimeoutMs=1000): Connection refused"
    )
