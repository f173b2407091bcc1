"""``artemis_py.spark``: a PySpark data source for the cluster, format name ``artemis``.

::

    from artemis_py.spark import register
    register(spark)                                   # spark.dataSource.register(...)
    df = (spark.readStream.format("artemis")
          .option("url", "tcp://h1:61613,tcp://h2:61613").option("queue", "orders").load())

pyspark (4.0 or newer) and pyarrow come with the optional extra ``artemis-py[spark]``.
Importing this package imports neither: :func:`register` and the attribute
:data:`ArtemisDataSource` do, and say in one line what to install when one is missing.

The pure parts need no JVM and are tested on their own: :mod:`.options` (the options),
:mod:`.source_offsets` (the checkpoint's offsets), :mod:`.planning` (ends and partitions from the
nodes' listings), :mod:`.schema` (the rows' schema and conversion), :mod:`.sink_rules` (the
sink's column check and duplicate ids). :mod:`.datasource` is the pyspark side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from artemis_py.spark.errors import MissingDependencyError

if TYPE_CHECKING:
    from artemis_py.spark.datasource import ArtemisDataSource

__all__ = ["ArtemisDataSource", "MissingDependencyError", "register", "require_spark"]

_INSTALL: Final = "install artemis-py[spark]"


def require_spark() -> None:
    """Import pyspark's data source API and pyarrow; :class:`MissingDependencyError` if absent.

    pyarrow is checked here because Spark's streaming source runner imports it only in its
    Python worker: without it a query fails after ~10 s with "Python worker failed to
    connect back", the real cause only on the worker's stderr (design 16, S1).
    """
    try:
        import pyspark
    except ImportError:
        raise MissingDependencyError(f"pyspark is not installed: {_INSTALL}") from None
    try:
        import pyspark.sql.datasource  # new in pyspark 4.0
    except ImportError:
        version = getattr(pyspark, "__version__", "?")
        raise MissingDependencyError(
            f"pyspark {version} has no Python data sources (4.0 or newer needed): {_INSTALL}"
        ) from None
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise MissingDependencyError(f"pyarrow is not installed: {_INSTALL}") from None


def register(spark: Any) -> None:
    """Register the ``artemis`` format with ``spark`` (a ``SparkSession``)."""
    require_spark()
    from artemis_py.spark.datasource import ArtemisDataSource

    spark.dataSource.register(ArtemisDataSource)


def __getattr__(name: str) -> object:
    # `from artemis_py.spark import ArtemisDataSource` imports pyspark only then.
    if name == "ArtemisDataSource":
        require_spark()
        from artemis_py.spark.datasource import ArtemisDataSource

        return ArtemisDataSource
    raise AttributeError(f"module 'artemis_py.spark' has no attribute {name!r}")
