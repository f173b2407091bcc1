"""The source's offsets: the JSON Spark writes to its checkpoint, and ``startingOffsets``.

An offset is where the source stands in each *stream* of its queue (a stream is the messages
one node stored first, numbered by that node; offsets are comparable only within a stream):

    {"v": 1, "queue": "orders", "streams": {"<node id>": <end>, ...}}

Each value is the exclusive end reached in that stream. A stream missing from an offset starts
at 0 (all it holds). ``queue`` is the queue the source browses (for a topic, the subscription's
queue ``<topic>::<clientId>.<subscription>``): a checkpoint belongs to one source, so a restart
with other options is refused instead of reading the wrong queue from someone else's position.

``startingOffsets`` is ``earliest`` (0 in every stream), ``latest`` (every stream's stable end
when the query first starts) or JSON: the whole offset above, or just its ``streams`` map. In
JSON a position may also be ``-2`` (earliest) or ``-1`` (latest), as in Kafka's option.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from artemis_py.spark.errors import OffsetError

__all__ = [
    "EARLIEST",
    "LATEST",
    "OFFSET_VERSION",
    "SourceOffset",
    "SpecificOffsets",
    "StartingOffsets",
    "parse_starting_offsets",
]

OFFSET_VERSION: Final = 1
EARLIEST: Final = -2
LATEST: Final = -1


@dataclass(frozen=True, slots=True)
class SourceOffset:
    """The end reached in each stream of ``queue`` (see the module doc)."""

    queue: str
    streams: Mapping[str, int] = field(default_factory=dict)

    def position(self, stream: str) -> int:
        """Where ``stream`` continues: its end, or 0 for a stream not seen yet."""
        return self.streams.get(stream, 0)

    def to_json(self) -> dict[str, object]:
        """The dict Spark stores (it serialises it with ``json.dumps``); streams sorted."""
        return {
            "v": OFFSET_VERSION,
            "queue": self.queue,
            "streams": {stream: self.streams[stream] for stream in sorted(self.streams)},
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def parse(cls, data: Mapping[str, object] | str, *, queue: str | None = None) -> SourceOffset:
        """Read an offset Spark hands back (a dict, or its JSON text).

        ``queue``: the queue the options name; an offset of another queue is an
        :class:`OffsetError` saying so. Malformed offsets are :class:`OffsetError` too.
        """
        obj = _load(data) if isinstance(data, str) else data
        if not isinstance(obj, Mapping):
            raise OffsetError(f"an artemis offset is a JSON object, got {_short(obj)}")
        if "v" not in obj:
            raise OffsetError(f"artemis offset without a version (field v): {_short(obj)}")
        version = obj["v"]
        if version != OFFSET_VERSION:
            raise OffsetError(
                f"artemis offset version {_short(version)} is not supported (this connector "
                f"reads version {OFFSET_VERSION}; was the checkpoint written by a newer one?)"
            )
        unknown = sorted(set(obj) - {"v", "queue", "streams"})
        if unknown:
            raise OffsetError(f"unknown field {unknown[0]!r} in artemis offset {_short(obj)}")
        offset_queue = obj.get("queue")
        if not isinstance(offset_queue, str) or not offset_queue:
            raise OffsetError(f"artemis offset without a queue: {_short(obj)}")
        if queue is not None and offset_queue != queue:
            raise OffsetError(
                f"the checkpoint's offsets are for queue {offset_queue!r}, but the options "
                f"read queue {queue!r}: a checkpoint belongs to one source (use a new "
                "checkpointLocation)"
            )
        streams = _streams(obj.get("streams", {}), allow_special=False)
        return cls(offset_queue, streams)


@dataclass(frozen=True, slots=True)
class SpecificOffsets:
    """``startingOffsets`` given as JSON: positions, possibly :data:`EARLIEST`/:data:`LATEST`.

    ``queue`` is set when the whole offset form was given; the options check it.
    """

    streams: Mapping[str, int]
    queue: str | None = None


StartingOffsets = Literal["earliest", "latest"] | SpecificOffsets


def parse_starting_offsets(text: str) -> StartingOffsets:
    """Read ``startingOffsets``; raise :class:`OffsetError` (a ``ValueError``) when wrong."""
    word = text.strip().lower()
    if word == "earliest":
        return "earliest"
    if word == "latest":
        return "latest"
    if not text.strip().startswith("{"):
        raise OffsetError(f"expected earliest, latest or a JSON object, got {text!r}")
    obj = _load(text)
    if not isinstance(obj, Mapping):
        raise OffsetError(f"expected a JSON object, got {text!r}")
    if "streams" not in obj and "v" not in obj:
        return SpecificOffsets(_streams(obj, allow_special=True))
    # The whole offset form; "v" and "queue" may be left out by a user writing it by hand.
    unknown = sorted(set(obj) - {"v", "queue", "streams"})
    if unknown:
        raise OffsetError(f"unknown field {unknown[0]!r} in {text!r}")
    if obj.get("v", OFFSET_VERSION) != OFFSET_VERSION:
        raise OffsetError(f"offset version {_short(obj['v'])} is not supported, use 1")
    queue = obj.get("queue")
    if queue is not None and (not isinstance(queue, str) or not queue):
        raise OffsetError(f"queue must be a queue name, got {_short(queue)}")
    return SpecificOffsets(_streams(obj.get("streams", {}), allow_special=True), queue)


def _streams(value: object, *, allow_special: bool) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise OffsetError(
            f"the streams of an artemis offset are a JSON object, got {_short(value)}"
        )
    streams: dict[str, int] = {}
    for stream, position in value.items():
        if not isinstance(stream, str) or not stream:
            raise OffsetError(f"empty stream id in artemis offset {_short(value)}")
        lowest = EARLIEST if allow_special else 0
        # bool is an int to Python, never to JSON: refuse it.
        if isinstance(position, bool) or not isinstance(position, int) or position < lowest:
            allowed = "an offset ≥ 0, -1 (latest) or -2 (earliest)" if allow_special else "≥ 0"
            raise OffsetError(
                f"position of stream {stream} must be {allowed}, got {_short(position)}"
            )
        streams[stream] = position
    return streams


def _load(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise OffsetError(f"invalid JSON ({exc.args[0] if exc.args else exc}): {text!r}") from None


def _short(value: object) -> str:
    try:
        text = json.dumps(value)  # as the user or the checkpoint wrote it
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
