"""The sink's column check, duplicate ids and home node."""

from __future__ import annotations

import re
from typing import Any

import pytest

from artemis_py.client.destination import Destination
from artemis_py.client.url import BrokerUrl
from artemis_py.spark.errors import SchemaError
from artemis_py.spark.sink_rules import (
    Outgoing,
    SinkColumns,
    SinkError,
    batch_duplicate_id,
    check_sink_schema,
    home_url,
    outgoing_message,
    stream_duplicate_id,
)

QUERY = "3f1e2d4c-5b6a-4789-9abc-def012345678"


def schema_error(fields: list[tuple[str, str]], destination: str | None = "out") -> str:
    with pytest.raises(SchemaError) as info:
        check_sink_schema(fields, destination=destination)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_body_alone_with_the_destination_option() -> None:
    assert check_sink_schema([("body", "binary")], destination="out") == SinkColumns(
        body=0, body_is_text=False, headers=None, destination=None
    )


def test_all_columns_in_any_order_and_case() -> None:
    fields = [("Destination", "string"), ("headers", "map<string, string>"), ("BODY", "string")]
    assert check_sink_schema(fields, destination=None) == SinkColumns(
        body=2, body_is_text=True, headers=1, destination=0
    )


def test_missing_body_lists_what_was_given() -> None:
    message = schema_error([("destination", "string")])
    assert "needs a column body (binary or string); got destination" in message


def test_another_column_is_named() -> None:
    message = schema_error([("body", "binary"), ("key", "string")])
    assert message.startswith("column key (string) is not one the artemis sink sends")
    assert "body (binary or string), headers (map<string,string>), destination (string)" in message


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ([("body", "int")], ["column body is int", "binary or string"]),
        ([("body", "binary"), ("headers", "map<string,int>")], ["headers is map<string,int>"]),
        ([("body", "binary"), ("destination", "binary")], ["destination is binary", "string"]),
        ([("body", "binary"), ("Body", "string")], ["column body appears twice"]),
    ],
)
def test_wrong_types_and_repeats(fields: list[tuple[str, str]], words: list[str]) -> None:
    message = schema_error(fields)
    for word in words:
        assert word in message


def test_a_destination_is_needed_somewhere() -> None:
    message = schema_error([("body", "binary")], destination=None)
    assert "set option destination or add a destination column" in message


def test_duplicate_ids() -> None:
    assert stream_duplicate_id(QUERY, 12, 3) == f"spark:{QUERY}:12:3"
    assert batch_duplicate_id("a1b2", 0) == "spark:a1b2:0"
    # Each part of the id is what tells a re-run from new work.
    ids = {stream_duplicate_id(QUERY, b, p) for b in range(3) for p in range(3)}
    assert len(ids) == 9


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: stream_duplicate_id("", 1, 1), "invalid streaming query id ''"),
        (lambda: stream_duplicate_id("a:b", 1, 1), "invalid streaming query id 'a:b'"),
        (lambda: stream_duplicate_id(QUERY, -1, 1), "batch_id must be an integer ≥ 0, got -1"),
        (lambda: stream_duplicate_id(QUERY, 1, True), "partition must be an integer ≥ 0, got True"),
        (lambda: batch_duplicate_id("", 1), "invalid write id ''"),
        (lambda: batch_duplicate_id("w", -2), "partition must be an integer ≥ 0, got -2"),
    ],
)
def test_bad_duplicate_id_parts(call: object, error: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(error)}$"):
        call()  # type: ignore[operator]


def test_home_url_is_fixed_per_partition() -> None:
    urls = (BrokerUrl("a", 1), BrokerUrl("b", 2), BrokerUrl("c", 3))
    assert [home_url(urls, p).host for p in range(7)] == ["a", "b", "c", "a", "b", "c", "a"]
    with pytest.raises(ValueError, match="no node to write to"):
        home_url((), 0)


# -- rows as SENDs ------------------------------------------------------------------------------

ALL = SinkColumns(body=0, body_is_text=False, headers=1, destination=2)


def outgoing(row: tuple[object, ...], columns: SinkColumns = ALL, **options: object) -> Outgoing:
    settings: dict[str, Any] = {"destination": "fallback", "persistent": True, **options}
    return outgoing_message(
        row, columns, duplicate_id="spark:w:3", where="partition 3, row 9", **settings
    )


def test_a_row_becomes_a_send() -> None:
    message = outgoing((bytearray(b"\x00\xff"), {"k": "v", "skip": None}, "queue://orders"))
    assert message == Outgoing(
        Destination("orders", "ANYCAST"),  # destination-type:ANYCAST, on any acceptor
        b"\x00\xff",
        {"persistent": "true", "k": "v", "_AMQ_DUPL_ID": "spark:w:3"},
    )
    assert isinstance(message.body, bytes)
    assert message.size == 2


def test_text_bodies_the_destination_option_and_persistence() -> None:
    columns = SinkColumns(body=0, body_is_text=True, headers=None, destination=None)
    message = outgoing(("é",), columns, persistent=False)
    assert message == Outgoing(Destination("fallback"), "é", {"_AMQ_DUPL_ID": "spark:w:3"})
    assert message.size == 2  # UTF-8 bytes on the wire
    # A null destination column falls back to the option.
    assert outgoing((b"x", None, None)).destination == Destination("fallback")
    assert outgoing((b"x", None, None), destination="topic://t").destination == Destination(
        "t", "MULTICAST"
    )


def test_a_rows_own_persistent_header_wins() -> None:
    message = outgoing((b"x", {"Persistent": "false"}, "q"))
    assert message.headers == {"Persistent": "false", "_AMQ_DUPL_ID": "spark:w:3"}


@pytest.mark.parametrize(
    ("row", "options", "expected"),
    [
        ((None, None, "q"), {}, "partition 3, row 9: body is null"),
        (
            (b"x", None, None),
            {"destination": None},
            "partition 3, row 9: destination is null and option destination is not set",
        ),
        ((b"x", None, "bogus://q"), {}, "partition 3, row 9: unknown destination type"),
        (
            (b"x", {"_amq_dupl_id": "mine"}, "q"),
            {},
            "partition 3, row 9: header _amq_dupl_id is set by the sink, not by a row",
        ),
        (
            (b"x", {"transaction": "t"}, "q"),
            {},
            "partition 3, row 9: header transaction is set by the sink, not by a row",
        ),
    ],
)
def test_rows_the_sink_cannot_send(
    row: tuple[object, ...], options: dict[str, object], expected: str
) -> None:
    with pytest.raises(SinkError) as info:
        outgoing(row, **options)
    assert str(info.value).startswith(expected)
