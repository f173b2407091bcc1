"""The options of the ``artemis`` data source, parsed and checked (pure: no pyspark, no I/O).

Spark hands a data source its options as a case-insensitive dict of strings (it lowercases the
keys); the functions here accept any mapping and compare keys without case. Reading and writing
take different sets (:data:`SOURCE_OPTIONS`, :data:`SINK_OPTIONS`); an option of the wrong set,
an unknown or missing one, or a value of the wrong type or range is an :class:`OptionError`
that names the option (and the value, and a close spelling when there is one). A batch read
takes :data:`BATCH_SOURCE_OPTIONS`: :func:`check_batch_read` refuses the
:data:`STREAM_ONLY_OPTIONS` it would otherwise ignore, the same way.

Source (``spark.read`` / ``spark.readStream``):

* ``url`` (required): one node or several, ``tcp://h1:61613,tcp://h2:61613``; the Artemis list
  form ``(tcp://h1:61613,tcp://h2:61613)`` is accepted too. Each entry as the client reads it
  (:func:`artemis_py.client.parse_url`: ``tcp://``/``stomp://``, a missing port is 61613).
* ``queue``, or ``topic`` with ``subscription`` (a durable subscription the query owns).
* ``clientId``: the STOMP ``client-id`` of the durable subscription. Default ``spark-<topic>``
  (or ``spark-<queue>``), so the subscription's queue is ``<clientId>.<subscription>`` and stays
  the same across restarts without being set.
* ``login`` / ``passcode``; ``failOnDataLoss`` (default ``true``); ``fetchSize`` (messages
  per browse, default 5000); ``nodeTimeoutMs`` (how long an unreachable node is retried,
  default 60000).
* Streaming reads only: ``maxMessagesPerTrigger`` (≥ 1, default: no limit);
  ``startingOffsets`` (``earliest`` default, ``latest``, or JSON, see :mod:`.source_offsets`).

Sink (``df.write`` / ``df.writeStream``): ``url``, ``destination`` (unless the rows have a
``destination`` column; checked with the schema), ``persistent`` (default ``true``),
``login`` / ``passcode``, ``nodeTimeoutMs``, ``writeId`` (a batch write's id, so that
writing the same rows again, as ``foreachBatch`` does when Spark re-runs a batch, stores
them once; default: a new UUID per write).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from artemis_py.client.destination import parse_destination
from artemis_py.client.url import BrokerUrl, parse_url
from artemis_py.spark.errors import OptionError
from artemis_py.spark.source_offsets import SpecificOffsets, StartingOffsets, parse_starting_offsets

__all__ = [
    "BATCH_SOURCE_OPTIONS",
    "DEFAULT_FETCH_SIZE",
    "DEFAULT_NODE_TIMEOUT_MS",
    "SINK_OPTIONS",
    "SOURCE_OPTIONS",
    "STREAM_ONLY_OPTIONS",
    "SinkOptions",
    "SourceOptions",
    "check_batch_read",
    "check_option_names",
    "parse_sink_options",
    "parse_source_options",
    "parse_urls",
]

DEFAULT_FETCH_SIZE: Final = 5000
DEFAULT_NODE_TIMEOUT_MS: Final = 60_000

# The documented spelling of each option; keys are compared in lower case.
SOURCE_OPTIONS: Final = (
    "url",
    "queue",
    "topic",
    "subscription",
    "clientId",
    "login",
    "passcode",
    "maxMessagesPerTrigger",
    "startingOffsets",
    "failOnDataLoss",
    "fetchSize",
    "nodeTimeoutMs",
)
# Source options only a stream uses: a batch read takes every message held up to the stable
# end, so it has no trigger to limit and no start to choose.
STREAM_ONLY_OPTIONS: Final = ("maxMessagesPerTrigger", "startingOffsets")
BATCH_SOURCE_OPTIONS: Final = tuple(n for n in SOURCE_OPTIONS if n not in STREAM_ONLY_OPTIONS)
SINK_OPTIONS: Final = (
    "url",
    "destination",
    "persistent",
    "login",
    "passcode",
    "nodeTimeoutMs",
    "writeId",
)

# Options Spark itself adds: `writeStream` passes its checkpoint location to the sink.
_SPARK_OPTIONS: Final = frozenset({"checkpointlocation"})

_INTEGER = re.compile(r"[+-]?[0-9]+")
_WRITE_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The checked options of a read; exactly one of ``queue`` and ``topic`` is set."""

    urls: tuple[BrokerUrl, ...]
    queue: str | None
    topic: str | None
    subscription: str | None
    client_id: str
    login: str | None
    passcode: str | None
    max_messages_per_trigger: int | None
    starting_offsets: StartingOffsets
    fail_on_data_loss: bool
    fetch_size: int
    node_timeout_ms: int
    # The option names given, in lower case: a batch read refuses the stream-only ones, which
    # the parsed values cannot show (a default looks like one given).
    given: frozenset[str] = frozenset()

    @property
    def source_queue(self) -> str:
        """The queue the source browses: ``queue``, or the subscription's queue as an FQQN.

        Artemis names a durable subscription's queue ``<clientId>.<subscription>``; the
        fully qualified ``<topic>::<queue>`` finds it on its address.
        """
        if self.queue is not None:
            return self.queue
        return f"{self.topic}::{self.client_id}.{self.subscription}"


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """The checked options of a write; ``destination`` may come from a column instead."""

    urls: tuple[BrokerUrl, ...]
    destination: str | None
    persistent: bool
    login: str | None
    passcode: str | None
    node_timeout_ms: int
    write_id: str | None = None


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Check ``options`` as a read's; raise :class:`OptionError` naming the first problem."""
    values = check_option_names(
        options, SOURCE_OPTIONS, other={"writing": SINK_OPTIONS}, role="reading"
    )
    urls = parse_urls(_required(values, "url"))
    queue = _name(values, "queue")
    topic = _name(values, "topic")
    subscription = _name(values, "subscription")
    if queue is not None and (topic is not None or subscription is not None):
        given = "topic" if topic is not None else "subscription"
        raise OptionError(f"options queue and {given} exclude each other: give one source")
    if queue is None and topic is None:
        if subscription is not None:
            raise OptionError("option subscription needs option topic")
        raise OptionError("missing option: queue (or topic with subscription)")
    if topic is not None and subscription is None:
        raise OptionError("option topic needs option subscription (the durable subscription)")
    client_id = _name(values, "clientId") or f"spark-{queue if queue is not None else topic}"
    login, passcode = _credentials(values)
    max_messages = _integer(values, "maxMessagesPerTrigger", minimum=1)
    fetch_size = _integer(values, "fetchSize", minimum=1)
    node_timeout = _integer(values, "nodeTimeoutMs", minimum=0)
    starting_text = values.get("startingoffsets")
    try:
        starting = parse_starting_offsets("earliest" if starting_text is None else starting_text)
    except ValueError as exc:
        raise OptionError(f"option startingOffsets: {exc}") from None
    result = SourceOptions(
        urls=urls,
        queue=queue,
        topic=topic,
        subscription=subscription,
        client_id=client_id,
        login=login,
        passcode=passcode,
        max_messages_per_trigger=max_messages,
        starting_offsets=starting,
        fail_on_data_loss=_boolean(values, "failOnDataLoss", default=True),
        fetch_size=DEFAULT_FETCH_SIZE if fetch_size is None else fetch_size,
        node_timeout_ms=DEFAULT_NODE_TIMEOUT_MS if node_timeout is None else node_timeout,
        given=frozenset(values),
    )
    if isinstance(starting, SpecificOffsets) and starting.queue not in (None, result.source_queue):
        raise OptionError(
            f"option startingOffsets is for queue {starting.queue!r}, but the source reads "
            f"{result.source_queue!r}"
        )
    return result


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Check ``options`` as a write's; raise :class:`OptionError` naming the first problem."""
    values = check_option_names(
        options, SINK_OPTIONS, other={"reading": SOURCE_OPTIONS}, role="writing"
    )
    urls = parse_urls(_required(values, "url"))
    login, passcode = _credentials(values)
    node_timeout = _integer(values, "nodeTimeoutMs", minimum=0)
    return SinkOptions(
        urls=urls,
        destination=_name(values, "destination", plain=False),
        persistent=_boolean(values, "persistent", default=True),
        login=login,
        passcode=passcode,
        node_timeout_ms=DEFAULT_NODE_TIMEOUT_MS if node_timeout is None else node_timeout,
        write_id=_write_id(values),
    )


def check_batch_read(options: SourceOptions) -> None:
    """Refuse the options a batch read would ignore, naming them as for streaming reads only.

    Spark's ``load()`` runs the data source's ``schema()`` without saying whether the read is
    a batch or a stream, so this runs when the batch reader is made: at the read's first
    action (``collect()``, ``count()``, a write), before any I/O.
    """
    check_option_names(
        dict.fromkeys(options.given, ""),
        BATCH_SOURCE_OPTIONS,
        other={"streaming reads only (spark.readStream)": STREAM_ONLY_OPTIONS},
        role="batch reads (spark.read)",
    )


def _write_id(values: Mapping[str, str]) -> str | None:
    value = values.get("writeid")
    if value is not None and not _WRITE_ID.fullmatch(value):
        raise OptionError(
            f"option writeId takes 1 to 200 letters, digits, '.', '_' or '-', got {value!r}"
        )
    return value


def check_option_names(
    options: Mapping[str, str],
    allowed: tuple[str, ...],
    *,
    other: Mapping[str, tuple[str, ...]] | None = None,
    role: str = "",
) -> dict[str, str]:
    """``options`` with lower-case keys, after refusing any name not in ``allowed``.

    ``other`` maps each other use (``"writing"``) to its options: naming the use in the error
    tells a user who gave, say, ``destination`` to a read that it belongs to a write. Spark's
    own options (``checkpointLocation``) are dropped.
    """
    known = {name.lower(): name for name in allowed}
    elsewhere = {
        name.lower(): (name, use) for use, names in (other or {}).items() for name in names
    }
    values: dict[str, str] = {}
    for key, value in options.items():
        lower = key.lower()
        if lower in _SPARK_OPTIONS:
            continue
        if lower in values:
            raise OptionError(f"option {known.get(lower, key)} is given twice")
        if lower not in known:
            raise OptionError(_unknown(key, known, elsewhere, role))
        values[lower] = value
    return values


def parse_urls(text: str) -> tuple[BrokerUrl, ...]:
    """The nodes of option ``url``: a comma list, bare or in Artemis's ``( … )`` form.

    Repeats are dropped (order kept); anything after the closing parenthesis (Artemis's
    ``?ha=true`` and friends) is refused, as the client refuses URL parameters.
    """
    body = text.strip()
    if body.startswith("("):
        close = body.find(")")
        if close < 0:
            raise OptionError(f"option url: no closing parenthesis in {text!r}")
        if body[close + 1 :].strip():
            raise OptionError(
                f"option url: unsupported parameters {body[close + 1 :]!r} after the list in "
                f"{text!r} (use (tcp://HOST:PORT,...) or a comma list)"
            )
        body = body[1:close]
    urls: list[BrokerUrl] = []
    for part in body.split(","):
        if not part.strip():
            raise OptionError(f"option url: empty entry in {text!r}")
        try:
            url = parse_url(part)
        except ValueError as exc:
            raise OptionError(f"option url: {exc}") from None
        if url not in urls:
            urls.append(url)
    return tuple(urls)


# -- values -------------------------------------------------------------------------------


def _unknown(
    key: str, known: dict[str, str], elsewhere: dict[str, tuple[str, str]], role: str
) -> str:
    lower = key.lower()
    if lower in elsewhere:
        name, use = elsewhere[lower]
        return f"option {name} is for {use}, not for {role}"
    if lower == "path":
        return "option path is not supported: the artemis source takes no path (use option queue)"
    close = difflib.get_close_matches(lower, list(known), n=1, cutoff=0.6)
    hint = f" (did you mean {known[close[0]]}?)" if close else ""
    return f"unknown option {key}{hint}; options for {role}: {', '.join(known.values())}"


def _required(values: Mapping[str, str], name: str) -> str:
    value = values.get(name.lower())
    if value is None or not value.strip():
        raise OptionError(f"missing option: {name}")
    return value


def _name(values: Mapping[str, str], name: str, *, plain: bool = True) -> str | None:
    """A queue, topic or similar name: absent is None, blank is an error.

    ``plain``: refuse the CLI's ``queue://NAME`` form (a source names a queue, not a routing
    type); a sink's destination may use it, as ``artemis-py producer --destination`` does.
    """
    value = values.get(name.lower())
    if value is None:
        return None
    if not value.strip():
        raise OptionError(f"option {name} is empty")
    if value != value.strip():
        raise OptionError(f"option {name} has spaces around it: {value!r}")
    _, sep, rest = value.partition("://")
    if sep and plain:
        raise OptionError(f"option {name} takes a plain name, got {value!r} (use {rest!r})")
    if sep:
        try:
            parse_destination(value)
        except ValueError as exc:
            raise OptionError(f"option {name}: {exc}") from None
    return value


def _integer(values: Mapping[str, str], name: str, *, minimum: int) -> int | None:
    text = values.get(name.lower())
    if text is None:
        return None
    if not _INTEGER.fullmatch(text.strip()):
        raise OptionError(f"option {name} must be an integer, got {text!r}")
    value = int(text)
    if value < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, got {value}")
    return value


def _boolean(values: Mapping[str, str], name: str, *, default: bool) -> bool:
    text = values.get(name.lower())
    if text is None:
        return default
    lower = text.strip().lower()
    if lower not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, got {text!r}")
    return lower == "true"


def _credentials(values: Mapping[str, str]) -> tuple[str | None, str | None]:
    login = values.get("login")
    passcode = values.get("passcode")
    if passcode is not None and login is None:
        raise OptionError("option passcode needs option login")
    return login, passcode
