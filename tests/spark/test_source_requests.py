"""Where ``latestOffset`` plans from on every Spark (needs pyspark 4.2+, not a JVM)."""

from __future__ import annotations

import pytest

limits = pytest.importorskip("pyspark.sql.streaming.datasource")

from artemis_py.spark.source import ArtemisStreamReader, next_request  # noqa: E402
from artemis_py.spark.source_offsets import SourceOffset  # noqa: E402

START = {"v": 1, "queue": "q", "streams": {"A": 5}}


def test_spark_4_2_passes_the_start_and_the_limit() -> None:
    last = SourceOffset("q", {"A": 9})
    begin, max_rows = next_request(START, limits.ReadMaxRows(3), last, "q", 7)
    assert (begin, max_rows) == (SourceOffset("q", {"A": 5}), 3)
    assert next_request(START, limits.ReadAllAvailable(), last, "q", 7)[1] is None


def test_spark_4_1_caps_from_the_last_end_of_this_process() -> None:
    last = SourceOffset("q", {"A": 9})
    assert next_request(None, None, last, "q", 7) == (last, 7)
    # The first call after a driver start: everything available, from nothing.
    assert next_request(None, None, None, "q", 7) == (SourceOffset("q", {}), None)


def test_latest_offset_takes_the_arguments_spark_4_2_looks_for() -> None:
    import inspect

    # Spark 4.2+ passes (start, limit) when latestOffset has parameters (design 16, S1);
    # 4.0/4.1 call it without arguments, so both need defaults.
    parameters = inspect.signature(ArtemisStreamReader.latestOffset).parameters
    assert list(parameters) == ["self", "start", "limit"]
    assert all(p.default is None for name, p in parameters.items() if name != "self")
