"""The source's offset JSON (design 16 §3) and ``startingOffsets``."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from artemis_py.spark.errors import OffsetError
from artemis_py.spark.source_offsets import (
    EARLIEST,
    LATEST,
    SourceOffset,
    SpecificOffsets,
    parse_starting_offsets,
)

N1 = "7d3c1b2e-0000-4000-8000-000000000001"
N2 = "7d3c1b2e-0000-4000-8000-000000000002"


def test_serialised_form_is_the_design_s() -> None:
    offset = SourceOffset("orders", {N2: 10, N1: 3})
    assert offset.to_json() == {"v": 1, "queue": "orders", "streams": {N1: 3, N2: 10}}
    # Sorted streams: the same position is the same line in Spark's offset log.
    assert offset.dumps() == json.dumps({"v": 1, "queue": "orders", "streams": {N1: 3, N2: 10}})


def test_a_stream_not_seen_yet_starts_at_zero() -> None:
    offset = SourceOffset("orders", {N1: 3})
    assert offset.position(N1) == 3
    assert offset.position(N2) == 0


@given(
    queue=st.text(min_size=1),
    streams=st.dictionaries(st.text(min_size=1), st.integers(min_value=0, max_value=2**63)),
)
def test_round_trip_through_spark_s_json(queue: str, streams: dict[str, int]) -> None:
    offset = SourceOffset(queue, streams)
    assert SourceOffset.parse(json.loads(offset.dumps())) == offset
    assert SourceOffset.parse(offset.dumps(), queue=queue) == offset


def test_checkpoint_of_another_queue_is_refused() -> None:
    with pytest.raises(OffsetError) as info:
        SourceOffset.parse({"v": 1, "queue": "orders", "streams": {}}, queue="invoices")
    message = str(info.value)
    assert "offsets are for queue 'orders'" in message
    assert "read queue 'invoices'" in message
    assert "checkpointLocation" in message


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ([1, 2], ["a JSON object"]),
        ({"queue": "q", "streams": {}}, ["without a version (field v)"]),
        ({"v": 2, "queue": "q", "streams": {}}, ["version 2 is not supported", "newer"]),
        ({"v": 1, "streams": {}}, ["without a queue"]),
        ({"v": 1, "queue": "", "streams": {}}, ["without a queue"]),
        ({"v": 1, "queue": "q", "streams": []}, ["streams", "JSON object"]),
        ({"v": 1, "queue": "q", "streams": {N1: -1}}, [f"stream {N1}", "≥ 0", "-1"]),
        ({"v": 1, "queue": "q", "streams": {N1: 1.5}}, [f"stream {N1}", "1.5"]),
        ({"v": 1, "queue": "q", "streams": {N1: True}}, [f"stream {N1}", "got true"]),
        ({"v": 1, "queue": "q", "streams": {"": 1}}, ["empty stream id"]),
        ({"v": 1, "queue": "q", "streams": {}, "x": 1}, ["unknown field 'x'"]),
    ],
)
def test_malformed_offsets(data: object, words: list[str]) -> None:
    with pytest.raises(OffsetError) as info:
        SourceOffset.parse(data)  # type: ignore[arg-type]
    for word in words:
        assert word in str(info.value)


def test_malformed_json_text() -> None:
    with pytest.raises(OffsetError, match="invalid JSON"):
        SourceOffset.parse("{not json")


def test_starting_offsets_words() -> None:
    assert parse_starting_offsets("earliest") == "earliest"
    assert parse_starting_offsets(" LATEST ") == "latest"


def test_starting_offsets_as_a_streams_map_with_kafka_s_special_values() -> None:
    assert parse_starting_offsets(f'{{"{N1}": 12, "{N2}": -1}}') == SpecificOffsets(
        {N1: 12, N2: LATEST}
    )
    assert parse_starting_offsets(f'{{"{N1}": -2}}') == SpecificOffsets({N1: EARLIEST})


def test_starting_offsets_in_the_whole_form() -> None:
    text = json.dumps({"v": 1, "queue": "orders", "streams": {N1: 4, N2: -2}})
    assert parse_starting_offsets(text) == SpecificOffsets({N1: 4, N2: EARLIEST}, "orders")
    # "v" and "queue" may be left out by hand.
    assert parse_starting_offsets(json.dumps({"streams": {N1: 4}})) == SpecificOffsets({N1: 4})


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("first", ["earliest, latest or a JSON object", "'first'"]),
        ("[1]", ["earliest, latest or a JSON object"]),
        (f'{{"{N1}": -3}}', [f"stream {N1}", "-1 (latest) or -2 (earliest)", "-3"]),
        ('{"streams": {}, "v": 3}', ["version 3"]),
        ('{"streams": {}, "queue": 5}', ["queue must be a queue name", "5"]),
        ('{"streams": {}, "from": 5}', ["unknown field 'from'"]),
    ],
)
def test_bad_starting_offsets(text: str, words: list[str]) -> None:
    with pytest.raises(OffsetError) as info:
        parse_starting_offsets(text)
    for word in words:
        assert word in str(info.value)
