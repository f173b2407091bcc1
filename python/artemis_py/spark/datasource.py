"""The pyspark side of the connector: :class:`ArtemisDataSource`, format name ``artemis``.

This module imports pyspark; reach it through :func:`artemis_py.spark.register` (or the
package attribute ``ArtemisDataSource``), which first checks pyspark and pyarrow are there.

Spark builds the data source in a Python worker with the options as given (keys lowercased)
whenever a reader or writer is made: :meth:`ArtemisDataSource.__init__` refuses names that
are no option at all, :meth:`~ArtemisDataSource.schema` (run by ``load()``) checks a read's
options fully, and the writer methods check a write's options and columns in the driver,
before any task. So a wrong option fails ``load()`` or a batch ``save()`` naming it; a
streaming write fails at its first micro-batch (``awaitTermination()`` raises it), and a
batch read given a stream-only option at its first action (docs/spark.md).

The readers live in :mod:`.source`, the writers in :mod:`.sink`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from artemis_py.spark.errors import ConnectorError, OptionError, SchemaError
from artemis_py.spark.options import (
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    SinkOptions,
    SourceOptions,
    check_option_names,
    parse_sink_options,
    parse_source_options,
)
from artemis_py.spark.schema import SOURCE_SCHEMA, SOURCE_SIMPLE_STRING
from artemis_py.spark.sink import ArtemisStreamWriter, ArtemisWriter, SinkPlan
from artemis_py.spark.sink_rules import SinkColumns, check_sink_schema
from artemis_py.spark.source import ArtemisBatchReader, ArtemisStreamReader


def _streaming_limits() -> ModuleType | None:
    # Read limits are new in pyspark 4.2 (SPARK-55304); before, Spark never passes one.
    try:
        return importlib.import_module("pyspark.sql.streaming.datasource")
    except ImportError:
        return None


_LIMITS = _streaming_limits()

__all__ = ["ArtemisDataSource", "max_rows_of"]

_ALL_OPTIONS = tuple(dict.fromkeys(SOURCE_OPTIONS + SINK_OPTIONS))


class ArtemisDataSource(DataSource):
    """Read a queue (or a durable subscription) of the cluster, or send rows to it."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        # Which way it is used is not known yet: only names that are no option at all fail.
        check_option_names(self.options, _ALL_OPTIONS, role="reading or writing")

    @classmethod
    def name(cls) -> str:
        return "artemis"

    def schema(self) -> str:
        self.source_options()
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_read_schema(schema)
        return ArtemisBatchReader(self.source_options())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_read_schema(schema)
        return ArtemisStreamReader(self.source_options())

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        plan = self.sink_plan(schema)
        if overwrite:
            # Messages already sent cannot be taken back: a queue is appended to, never replaced.
            raise OptionError("mode overwrite is not supported: the artemis sink only appends")
        return ArtemisWriter(plan, plan.options.write_id)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        plan = self.sink_plan(schema)
        if plan.options.write_id is not None:
            raise OptionError(
                "option writeId is for batch writes: a stream's duplicate ids come from its "
                "query and batch"
            )
        return ArtemisStreamWriter(plan)

    # -- checks shared with the readers and writers ------------------------------------------

    def source_options(self) -> SourceOptions:
        return parse_source_options(self.options)

    def sink_options(self) -> SinkOptions:
        return parse_sink_options(self.options)

    def sink_columns(self, schema: StructType) -> SinkColumns:
        """The write's options and its rows' columns, checked together."""
        return self.sink_plan(schema).columns

    def sink_plan(self, schema: StructType) -> SinkPlan:
        """The write's checked options and columns, as the writers take them."""
        options = self.sink_options()
        fields = [(field.name, field.dataType.simpleString()) for field in schema.fields]
        return SinkPlan(options, check_sink_schema(fields, destination=options.destination))

    @staticmethod
    def _check_read_schema(schema: StructType) -> None:
        # `.schema(...)` on the reader skips `schema()`; the rows' layout is fixed.
        if schema.simpleString() != SOURCE_SIMPLE_STRING:
            raise SchemaError(
                "the artemis source has a fixed schema, do not set one with .schema(): "
                f"{SOURCE_SCHEMA}"
            )


def max_rows_of(limit: Any) -> int | None:
    """Spark's ``ReadLimit`` as the planner's ``max_rows`` (None: all available)."""
    if limit is None or (_LIMITS is not None and isinstance(limit, _LIMITS.ReadAllAvailable)):
        return None
    if _LIMITS is not None and isinstance(limit, _LIMITS.ReadMaxRows):
        return int(limit.max_rows)
    raise ConnectorError(f"the artemis source does not support the read limit {limit!r}")
