"""What the sink checks and derives before it sends anything (pure: no pyspark, no I/O).

* :func:`check_sink_schema`: the columns of the rows to send. ``body`` (binary or string) is
  required; ``headers`` (``map<string,string>``) and ``destination`` (string) are optional;
  any other column, or a type that does not fit, is a :class:`SchemaError` naming the column,
  raised in the driver before a task starts. Names compare without case, as Spark resolves
  columns by default. Without a ``destination`` column the option ``destination`` is needed;
  with both, a row's non-null column value wins and the option fills the nulls.
* Duplicate ids (Artemis's ``_AMQ_DUPL_ID``): every message of one partition's transaction
  carries ``spark:<queryId>:<batchId>:<partition>`` (streaming) or ``spark:<writeId>:<partition>``
  (batch, ``writeId`` a UUID made once per write), so a re-run of the partition is recognised
  by the node's duplicate cache and ignored whole.
* :func:`home_url`: the node a partition's task sends to, fixed so a re-run meets the same
  duplicate cache.
* :func:`outgoing_message`: one row as the SEND that carries it. A row the sink cannot send
  (a null body, no destination, a header the sink sets itself) is a :class:`SinkError`
  naming the partition and the row (counted from 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from artemis_py.client.destination import Destination, parse_destination
from artemis_py.client.url import BrokerUrl
from artemis_py.spark.errors import ConnectorError, SchemaError

__all__ = [
    "DUPLICATE_ID_HEADER",
    "RESERVED_HEADERS",
    "SINK_COLUMN_TYPES",
    "Outgoing",
    "SinkColumns",
    "SinkError",
    "batch_duplicate_id",
    "check_sink_schema",
    "home_url",
    "outgoing_message",
    "stream_duplicate_id",
]

# Artemis's duplicate-detection property (docs/duplicate-detection.md).
DUPLICATE_ID_HEADER: Final = "_AMQ_DUPL_ID"

# Headers a row's map may not set: the frame's own (the sink sets them) and the duplicate id,
# which must be the partition's on every message for a re-run to be ignored whole.
RESERVED_HEADERS: Final = frozenset(
    {"destination", "transaction", "receipt", "content-length", DUPLICATE_ID_HEADER.lower()}
)

# Column -> the Spark types it may have (as `DataType.simpleString()` spells them).
SINK_COLUMN_TYPES: Final = {
    "body": ("binary", "string"),
    "headers": ("map<string,string>",),
    "destination": ("string",),
}


@dataclass(frozen=True, slots=True)
class SinkColumns:
    """Where each column is in a row (None: absent), and whether ``body`` is text."""

    body: int
    body_is_text: bool
    headers: int | None
    destination: int | None


def check_sink_schema(fields: Sequence[tuple[str, str]], *, destination: str | None) -> SinkColumns:
    """Check the rows' ``(name, type)`` columns; ``destination`` is the option's value."""
    positions: dict[str, int] = {}
    types: dict[str, str] = {}
    for index, (name, type_name) in enumerate(fields):
        lower = name.lower()
        spelled = type_name.replace(" ", "").lower()
        if lower not in SINK_COLUMN_TYPES:
            raise SchemaError(
                f"column {name} ({spelled}) is not one the artemis sink sends; it takes "
                f"{_expected()}: select only those"
            )
        if lower in positions:
            raise SchemaError(f"column {lower} appears twice")
        if spelled not in SINK_COLUMN_TYPES[lower]:
            raise SchemaError(
                f"column {name} is {spelled}, the artemis sink needs "
                f"{' or '.join(SINK_COLUMN_TYPES[lower])}"
            )
        positions[lower] = index
        types[lower] = spelled
    if "body" not in positions:
        given = ", ".join(name for name, _ in fields) or "none"
        raise SchemaError(f"the artemis sink needs a column body (binary or string); got {given}")
    if "destination" not in positions and destination is None:
        raise SchemaError("no destination: set option destination or add a destination column")
    return SinkColumns(
        body=positions["body"],
        body_is_text=types["body"] == "string",
        headers=positions.get("headers"),
        destination=positions.get("destination"),
    )


class SinkError(ConnectorError):
    """A partition could not be written: a row the sink cannot send, or a node refused it.

    The message names the partition (and the row, counted from 1, when one is to blame);
    nothing of that partition was stored.
    """


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One row as a SEND: its destination (``queue://NAME`` is sent as ``NAME`` with
    ``destination-type:ANYCAST``, :mod:`artemis_py.client.destination`), body (``str``: a
    text message) and headers."""

    destination: Destination
    body: bytes | str
    headers: dict[str, str]

    @property
    def size(self) -> int:
        """The body's size in bytes on the wire."""
        return len(self.body.encode("utf-8")) if isinstance(self.body, str) else len(self.body)


def outgoing_message(
    row: Sequence[Any],
    columns: SinkColumns,
    *,
    destination: str | None,
    persistent: bool,
    duplicate_id: str,
    where: str,
) -> Outgoing:
    """The SEND for ``row`` (positions from ``columns``); ``destination`` and ``persistent``
    are the options, ``where`` names the row in errors (``partition 2, row 7``).

    A row's ``persistent`` header overrides the option; null header values are left out.
    """
    body = row[columns.body]
    if body is None:
        raise SinkError(f"{where}: body is null")
    if not isinstance(body, str):
        body = bytes(body)
    target = row[columns.destination] if columns.destination is not None else None
    if target is None:
        target = destination
    if target is None:
        raise SinkError(f"{where}: destination is null and option destination is not set")
    try:
        stomp_target = parse_destination(target)
    except ValueError as exc:
        raise SinkError(f"{where}: {exc}") from None
    headers = {"persistent": "true"} if persistent else {}
    given = row[columns.headers] if columns.headers is not None else None
    if given is not None:
        own = _row_headers(given, where)
        if any(name.lower() == "persistent" for name in own):
            headers.clear()  # the row's own persistent header, however it spells it, wins
        headers.update(own)
    headers[DUPLICATE_ID_HEADER] = duplicate_id
    return Outgoing(stomp_target, body, headers)


def _row_headers(given: Mapping[str, str | None], where: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in given.items():
        if name.lower() in RESERVED_HEADERS:
            raise SinkError(f"{where}: header {name} is set by the sink, not by a row")
        if value is not None:
            headers[name] = value
    return headers


def stream_duplicate_id(query_id: str, batch_id: int, partition: int) -> str:
    """The duplicate id of a streaming write's partition (one per micro-batch)."""
    if not query_id or ":" in query_id:
        raise ValueError(f"invalid streaming query id {query_id!r}")
    _check_numbers(batch_id=batch_id, partition=partition)
    return f"spark:{query_id}:{batch_id}:{partition}"


def batch_duplicate_id(write_id: str, partition: int) -> str:
    """The duplicate id of a batch write's partition."""
    if not write_id or ":" in write_id:
        raise ValueError(f"invalid write id {write_id!r}")
    _check_numbers(partition=partition)
    return f"spark:{write_id}:{partition}"


def home_url(urls: Sequence[BrokerUrl], partition: int) -> BrokerUrl:
    """The node partition ``partition`` writes to: ``urls[partition mod len(urls)]``."""
    if not urls:
        raise ValueError("no node to write to")
    _check_numbers(partition=partition)
    return urls[partition % len(urls)]


def _expected() -> str:
    return ", ".join(f"{name} ({' or '.join(kinds)})" for name, kinds in SINK_COLUMN_TYPES.items())


def _check_numbers(**numbers: int) -> None:
    for name, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer ≥ 0, got {value!r}")
