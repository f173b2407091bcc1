"""The errors the Spark connector raises on purpose, rooted in :class:`ArtemisError`.

Every message is one line that names what is wrong (the option, the stream, the node, the
column): Spark wraps it in its own exception, and the last line is what a user reads.
"""

from __future__ import annotations

from artemis_py.exceptions import ArtemisError

__all__ = [
    "ConnectorError",
    "MissingDependencyError",
    "MissingNodeError",
    "OffsetError",
    "OptionError",
    "SchemaError",
]


class ConnectorError(ArtemisError):
    """Base class of the Spark connector's errors."""


class MissingDependencyError(ConnectorError, ImportError):
    """pyspark (4.0 or newer) or pyarrow is not installed."""


class OptionError(ConnectorError, ValueError):
    """An option of ``spark.read[Stream].format("artemis")`` or of the sink is wrong."""


class OffsetError(ConnectorError, ValueError):
    """An offset (from a checkpoint or ``startingOffsets``) is malformed or does not fit."""


class SchemaError(ConnectorError, ValueError):
    """The columns given to the sink do not fit the messages it sends."""


class MissingNodeError(ConnectorError):
    """A node the plan needs is not reachable, and no reachable node holds its streams.

    The source retries on this error until ``nodeTimeoutMs``, then lets it fail the query.
    """

    def __init__(self, message: str, node_ids: tuple[str, ...]) -> None:
        super().__init__(message)
        self.node_ids = node_ids
