"""Spark's read limits as the planner's ``max_rows`` (needs pyspark 4.2+, not a JVM)."""

from __future__ import annotations

import pytest

limits = pytest.importorskip("pyspark.sql.streaming.datasource")

from artemis_py.spark.datasource import max_rows_of  # noqa: E402
from artemis_py.spark.errors import ConnectorError  # noqa: E402


def test_read_limits() -> None:
    assert max_rows_of(None) is None
    assert max_rows_of(limits.ReadAllAvailable()) is None
    assert max_rows_of(limits.ReadMaxRows(7)) == 7


def test_a_limit_the_source_never_asks_for_is_refused() -> None:
    with pytest.raises(ConnectorError, match="does not support the read limit"):
        max_rows_of(limits.ReadMaxFiles(3))
