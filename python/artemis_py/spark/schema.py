"""The source's rows: their Spark schema and how a browsed message becomes one (pure).

A row per message: ``node`` (the stream: the node that stored it first, which numbered its
``offset``), ``queue``, ``message_id``, ``offset`` (ordering within a stream), ``destination``,
``headers`` (every other header of the MESSAGE frame, first one of a repeated name),
``body`` (binary; ``CAST(body AS STRING)`` reads it as text), ``timestamp`` (Artemis's
``timestamp`` header, milliseconds since the epoch, as a UTC instant) and ``redelivered``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from artemis_py.client.message import Message

__all__ = [
    "COLUMN_HEADERS",
    "SOURCE_COLUMNS",
    "SOURCE_SCHEMA",
    "SOURCE_SIMPLE_STRING",
    "SourceRow",
    "message_row",
]

# (name, Spark type as `DataType.simpleString()` spells it), in row order.
SOURCE_COLUMNS: Final = (
    ("node", "string"),
    ("queue", "string"),
    ("message_id", "string"),
    ("offset", "bigint"),
    ("destination", "string"),
    ("headers", "map<string,string>"),
    ("body", "binary"),
    ("timestamp", "timestamp"),
    ("redelivered", "boolean"),
)
# The schema as DDL (what `DataSource.schema()` returns) and as `StructType.simpleString()`.
SOURCE_SCHEMA: Final = ", ".join(f"{name} {kind.upper()}" for name, kind in SOURCE_COLUMNS)
SOURCE_SIMPLE_STRING: Final = (
    "struct<" + ",".join(f"{name}:{kind}" for name, kind in SOURCE_COLUMNS) + ">"
)

# Headers that become columns, or belong to the delivery rather than the message (the
# browse's subscription, ack id and offset headers, the frame's length): not in `headers`.
COLUMN_HEADERS: Final = frozenset(
    {
        "message-id",
        "destination",
        "timestamp",
        "redelivered",
        "subscription",
        "ack",
        "offset",
        "offset-stream",
        "content-length",
    }
)

SourceRow = tuple[
    str, str, str, int, str, dict[str, str], bytes, datetime | None, bool
]  # in SOURCE_SCHEMA's column order


def message_row(message: Message, *, queue: str, stream: str) -> SourceRow:
    """The row of one browsed message of ``stream`` (its ``offset-stream`` header wins).

    Raises :class:`ValueError` when the frame has no usable ``offset`` header: a browse by
    offset always sends one, so its absence is a protocol error, never a row to guess.
    """
    offset_text = message.get("offset")
    if offset_text is None or not offset_text.isdigit():
        raise ValueError(
            f"message {message.message_id or '?'} of queue {queue} has no valid offset header "
            f"(got {offset_text!r})"
        )
    headers: dict[str, str] = {}
    for name, value in message.headers:
        if name not in COLUMN_HEADERS and name not in headers:
            headers[name] = value
    return (
        message.get("offset-stream") or stream,
        queue,
        message.message_id,
        int(offset_text),
        message.destination,
        headers,
        message.body,
        _timestamp(message.get("timestamp")),
        message.redelivered,
    )


def _timestamp(text: str | None) -> datetime | None:
    # Artemis stamps every message; a client-set or missing value that is no number of
    # milliseconds is left null rather than failing the batch.
    if text is None or not text.strip().isdigit():
        return None
    millis = int(text)
    if millis == 0:  # Artemis: 0 is "no timestamp"
        return None
    try:
        return datetime.fromtimestamp(millis / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
