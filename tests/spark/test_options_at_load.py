"""Wrong options and columns fail where the user calls Spark, naming what is wrong.

``load()`` runs the data source's ``schema()`` (reads); ``save()`` and the first micro-batch
of ``start()`` run its writer methods (writes). A batch read's stream-only options fail when
Spark makes the batch reader, at the first action: ``schema()`` cannot tell a batch read from
a stream. Spark wraps our error in its own exception with the Python traceback; its last
line is our one-line message, checked here whole.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from artemis_py.spark.schema import SOURCE_SIMPLE_STRING

pytestmark = pytest.mark.spark

URL = "tcp://127.0.0.1:61613"  # never connected to: these tests stop before any I/O


def reader(spark: Any, options: dict[str, str], *, stream: bool = True) -> Any:
    read = spark.readStream if stream else spark.read
    return read.format("artemis").options(**options)


def our_error(exc: BaseException) -> str:
    """The one-line message of our error inside Spark's exception."""
    found = re.findall(r"artemis_py\.spark\.errors\.(\w+): (.*)", str(exc))
    assert found, f"no artemis_py error in: {exc}"
    kind, message = found[-1]
    return f"{kind}: {message}"


def test_load_with_good_options_has_the_source_schema(spark: Any) -> None:
    options = {"url": URL, "queue": "orders", "maxMessagesPerTrigger": "100"}
    stream = reader(spark, options).load()
    assert stream.isStreaming
    assert stream.schema.simpleString() == SOURCE_SIMPLE_STRING
    batch = reader(spark, {"url": URL, "topic": "t", "subscription": "s"}, stream=False).load()
    assert batch.schema.simpleString() == SOURCE_SIMPLE_STRING


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            {"url": URL, "queeu": "orders"},
            "OptionError: unknown option queeu (did you mean queue?); options for reading or "
            "writing: url, queue, topic, subscription, clientId, login, passcode, "
            "maxMessagesPerTrigger, startingOffsets, failOnDataLoss, fetchSize, nodeTimeoutMs, "
            "destination, persistent, writeId",
        ),
        ({"queue": "orders"}, "OptionError: missing option: url"),
        ({"url": URL}, "OptionError: missing option: queue (or topic with subscription)"),
        (
            {"url": URL, "queue": "orders", "fetchSize": "0"},
            "OptionError: option fetchSize must be at least 1, got 0",
        ),
        (
            {"url": URL, "queue": "orders", "destination": "out"},
            "OptionError: option destination is for writing, not for reading",
        ),
        (
            {"url": "tcp://h:1?x=y", "queue": "orders"},
            "OptionError: option url: unsupported broker URL 'tcp://h:1?x=y' "
            "(use tcp://HOST:PORT, no parameters)",
        ),
    ],
)
@pytest.mark.parametrize("stream", [True, False], ids=["readStream", "read"])
def test_bad_options_fail_load(
    spark: Any, options: dict[str, str], expected: str, stream: bool
) -> None:
    with pytest.raises(Exception) as info:
        reader(spark, options, stream=stream).load()
    assert our_error(info.value) == expected


def test_a_schema_of_ones_own_is_refused(spark: Any) -> None:
    with pytest.raises(Exception) as info:
        (
            spark.read.format("artemis")
            .schema("body BINARY")
            .options(url=URL, queue="orders")
            .load()
            .collect()
        )
    assert our_error(info.value).startswith(
        "SchemaError: the artemis source has a fixed schema, do not set one with .schema()"
    )


def test_a_batch_read_refuses_a_stream_only_option_at_its_first_action(spark: Any) -> None:
    options = {"url": URL, "queue": "orders", "maxMessagesPerTrigger": "100"}
    frame = reader(spark, options, stream=False).load()  # schema() cannot tell it is a batch
    with pytest.raises(Exception) as info:
        frame.collect()
    assert our_error(info.value) == (
        "OptionError: option maxMessagesPerTrigger is for streaming reads only "
        "(spark.readStream), not for batch reads (spark.read)"
    )


@pytest.mark.parametrize(
    ("columns", "options", "expected"),
    [
        (
            "body BINARY, key STRING",
            {"destination": "out"},
            "SchemaError: column key (string) is not one the artemis sink sends; it takes "
            "body (binary or string), headers (map<string,string>), destination (string): "
            "select only those",
        ),
        (
            "body STRING",
            {},
            "SchemaError: no destination: set option destination or add a destination column",
        ),
        (
            "body INT",
            {"destination": "out"},
            "SchemaError: column body is int, the artemis sink needs binary or string",
        ),
        (
            "body BINARY",
            {"destination": "out", "queue": "orders"},
            "OptionError: option queue is for reading, not for writing",
        ),
    ],
)
def test_bad_columns_or_options_fail_a_batch_write(
    spark: Any, columns: str, options: dict[str, str], expected: str
) -> None:
    frame = spark.createDataFrame([], columns)
    with pytest.raises(Exception) as info:
        frame.write.format("artemis").options(url=URL, **options).mode("append").save()
    assert our_error(info.value) == expected


@pytest.mark.parametrize(
    ("columns", "options", "expected"),
    [
        (
            ["CAST(value AS STRING) AS body", "timestamp"],
            {},
            "SchemaError: column timestamp (timestamp) is not one the artemis sink sends; it "
            "takes body (binary or string), headers (map<string,string>), destination "
            "(string): select only those",
        ),
        (
            ["CAST(value AS STRING) AS body"],
            {"writeId": "w1"},
            "OptionError: option writeId is for batch writes: a stream's duplicate ids come "
            "from its query and batch",
        ),
    ],
)
def test_bad_columns_or_options_fail_a_streaming_write(
    spark: Any, tmp_path: Path, columns: list[str], options: dict[str, str], expected: str
) -> None:
    rows = spark.readStream.format("rate").option("rowsPerSecond", "1").load()
    query = (
        rows.selectExpr(*columns)
        .writeStream.format("artemis")
        .options(url=URL, destination="out", **options)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        with pytest.raises(Exception) as info:
            query.awaitTermination(60)
    finally:
        query.stop()
    assert our_error(info.value) == expected
