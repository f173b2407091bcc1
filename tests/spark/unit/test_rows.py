"""The source's rows: schema constants and the conversion of a browsed MESSAGE frame."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from artemis_py.client.message import Message
from artemis_py.protocol.stomp import Frame
from artemis_py.spark.schema import (
    SOURCE_COLUMNS,
    SOURCE_SCHEMA,
    SOURCE_SIMPLE_STRING,
    message_row,
)

N1 = "7d3c1b2e-0000-4000-8000-000000000001"


def browsed(*headers: tuple[str, str], body: bytes = b"payload") -> Message:
    return Message(Frame("MESSAGE", headers, body))


def test_schema_is_the_design_s() -> None:
    assert [name for name, _ in SOURCE_COLUMNS] == [
        "node",
        "queue",
        "message_id",
        "offset",
        "destination",
        "headers",
        "body",
        "timestamp",
        "redelivered",
    ]
    assert SOURCE_SCHEMA.startswith("node STRING, queue STRING, message_id STRING, offset BIGINT")
    assert "headers MAP<STRING,STRING>, body BINARY, timestamp TIMESTAMP" in SOURCE_SCHEMA
    assert SOURCE_SIMPLE_STRING.startswith("struct<node:string,queue:string,")


def test_row_of_a_browsed_message() -> None:
    message = browsed(
        ("subscription", "browse-1"),
        ("message-id", "ID:42"),
        ("destination", "/queue/orders"),
        ("offset", "1234"),
        ("offset-stream", N1),
        ("timestamp", "1764072000123"),
        ("redelivered", "true"),
        ("priority", "4"),
        ("content-type", "application/json"),
        ("region", "eu"),
        ("region", "us"),  # a repeated header: the first one counts, as in STOMP 1.2
        ("content-length", "7"),
        ("ack", "a-1"),
    )
    row = message_row(message, queue="orders", stream="other-stream")
    assert row == (
        N1,
        "orders",
        "ID:42",
        1234,
        "/queue/orders",
        {"priority": "4", "content-type": "application/json", "region": "eu"},
        b"payload",
        datetime(2025, 11, 25, 12, 0, 0, 123000, tzinfo=UTC),
        True,
    )
    assert len(row) == len(SOURCE_COLUMNS)


def test_stream_of_the_partition_when_the_frame_does_not_say() -> None:
    row = message_row(browsed(("offset", "5")), queue="q", stream=N1)
    assert row[0] == N1
    # no message-id, no destination: empty, not None
    assert row[2] == ""
    assert row[4] == ""
    assert row[7] is None  # no timestamp
    assert row[8] is False


@pytest.mark.parametrize("value", ["0", "soon", "-5", ""])
def test_timestamps_that_are_not_instants_are_null(value: str) -> None:
    row = message_row(browsed(("offset", "1"), ("timestamp", value)), queue="q", stream=N1)
    assert row[7] is None


@pytest.mark.parametrize("value", [None, "", "x", "-1", "1.5"])
def test_a_frame_without_a_valid_offset_is_an_error(value: str | None) -> None:
    headers = (("message-id", "ID:7"),) + ((("offset", value),) if value is not None else ())
    with pytest.raises(ValueError, match="message ID:7 of queue orders has no valid offset header"):
        message_row(browsed(*headers), queue="orders", stream=N1)


def test_binary_bodies_are_kept_as_bytes() -> None:
    body = bytes(range(256))
    assert message_row(browsed(("offset", "1"), body=body), queue="q", stream=N1)[6] == body
