"""``artemis-py producer`` and ``artemis-py consumer``: send and receive messages over STOMP.

Modelled on Artemis's ``artemis producer`` / ``artemis consumer``: the same option names
where they apply (``--url``, ``--destination queue://NAME``, ``--message-count``,
``--message-size``, ``--user``/``--password``, ``--verbose``), spoken over a STOMP acceptor
with :mod:`artemis_py.client`. ``queue://`` and ``topic://`` become the acceptor's anycast
and multicast prefixes (``--anycast-prefix``/``--multicast-prefix``).

The producer waits for each message's RECEIPT by default (``--max-pending 1``); a larger
``--max-pending`` keeps that many receipts outstanding, and ``--no-receipts`` asks for none.
Either way the final DISCONNECT receipt confirms the whole run. The consumer stops after
``--message-count`` messages (0: no limit) or when nothing arrived for ``--timeout`` seconds.

Progress is a single ``\\r``-redrawn line on stderr (only when stderr is a terminal, unless
``--progress``); the summary goes to stdout. Any failure is one line on stderr and exit
code 1, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Final, TextIO

import trio

from artemis_py.client import (
    ACK_MODES,
    DEFAULT_ANYCAST_PREFIX,
    DEFAULT_MULTICAST_PREFIX,
    DEFAULT_URL,
    BrokerUrl,
    ClientConnection,
    Message,
    StompServerError,
    open_stomp_connection,
    parse_url,
    stomp_destination,
)
from artemis_py.exceptions import ArtemisError
from artemis_py.protocol.stomp import SUPPORTED_VERSIONS

__all__ = [
    "Progress",
    "add_parsers",
    "consumer_command",
    "describe_failure",
    "format_summary",
    "producer_command",
    "resolve_destination",
]

MiB: Final = 1024 * 1024
DEFAULT_DESTINATION: Final = "queue://TEST"
DEFAULT_MESSAGE_COUNT: Final = 1000
DEFAULT_HEARTBEAT_MS: Final = 10_000
_FILLER: Final = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_PREVIEW_CHARS: Final = 200


# -- argument types ------------------------------------------------------------------------


def _url(text: str) -> BrokerUrl:
    try:
        return parse_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    convert.__name__ = f"integer >= {minimum}"
    return convert


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return (name, value)


# -- parsers -------------------------------------------------------------------------------


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``producer`` and ``consumer`` to the ``artemis-py`` sub-commands."""
    producer = commands.add_parser(
        "producer",
        help="send messages to a destination over STOMP",
        description="Send messages to a queue or topic through a STOMP acceptor and report "
        "the throughput (like Artemis's 'artemis producer').",
    )
    _add_common_options(producer)
    group = producer.add_argument_group("producer")
    group.add_argument(
        "--message-size",
        type=_int_at_least(0),
        default=0,
        metavar="BYTES",
        help="send bytes messages of this size (default 0: short text messages 'test message: N')",
    )
    durability = group.add_mutually_exclusive_group()
    durability.add_argument(
        "--persistent",
        dest="persistent",
        action="store_true",
        default=True,
        help="send persistent messages (header persistent:true; the default)",
    )
    durability.add_argument(
        "--non-persistent",
        dest="persistent",
        action="store_false",
        help="send non-persistent messages (persistent:false)",
    )
    group.add_argument(
        "--receipts",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask for a RECEIPT per message (default: yes); with --no-receipts only the "
        "final DISCONNECT is confirmed",
    )
    group.add_argument(
        "--max-pending",
        type=_int_at_least(1),
        default=1,
        metavar="N",
        help="receipts kept outstanding at once (default 1: wait for each one)",
    )
    group.add_argument(
        "--header",
        type=_header,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="add a header to every message (repeatable)",
    )
    producer.set_defaults(func=producer_command)

    consumer = commands.add_parser(
        "consumer",
        help="receive messages from a destination over STOMP",
        description="Receive messages from a queue or topic through a STOMP acceptor and "
        "report the throughput (like Artemis's 'artemis consumer').",
    )
    _add_common_options(consumer)
    group = consumer.add_argument_group("consumer")
    group.add_argument(
        "--ack-mode",
        choices=ACK_MODES,
        default="auto",
        help="STOMP ack mode of the subscription (default auto); with client and "
        "client-individual every message is acknowledged",
    )
    group.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="stop when no message arrived for this long (default: wait forever)",
    )
    group.add_argument(
        "--filter",
        "--selector",
        dest="filter",
        default=None,
        metavar="EXPRESSION",
        help="only receive messages matching this Artemis filter (STOMP selector header)",
    )
    consumer.set_defaults(func=consumer_command)


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    connection = parser.add_argument_group("connection")
    connection.add_argument(
        "--url",
        type=_url,
        default=DEFAULT_URL,
        help=f"the STOMP acceptor, tcp://HOST:PORT (default {DEFAULT_URL})",
    )
    connection.add_argument("--user", default=None, help="login")
    connection.add_argument("--password", default=None, help="passcode")
    connection.add_argument(
        "--stomp-version",
        choices=SUPPORTED_VERSIONS,
        default="1.2",
        help="highest STOMP version to offer (default 1.2)",
    )
    connection.add_argument(
        "--heart-beat",
        type=_int_at_least(0),
        default=DEFAULT_HEARTBEAT_MS,
        metavar="MS",
        help="heart-beat interval offered both ways in ms (default "
        f"{DEFAULT_HEARTBEAT_MS}; 0: none, and the broker's connection TTL applies)",
    )
    dest = parser.add_argument_group("destination")
    dest.add_argument(
        "--destination",
        default=DEFAULT_DESTINATION,
        help=f"queue://NAME or topic://NAME, or a raw STOMP destination "
        f"(default {DEFAULT_DESTINATION})",
    )
    dest.add_argument(
        "--anycast-prefix",
        default=DEFAULT_ANYCAST_PREFIX,
        metavar="PREFIX",
        help=f"the acceptor's anycastPrefix: queue://NAME becomes PREFIX+NAME "
        f"(default {DEFAULT_ANYCAST_PREFIX})",
    )
    dest.add_argument(
        "--multicast-prefix",
        default=DEFAULT_MULTICAST_PREFIX,
        metavar="PREFIX",
        help=f"the acceptor's multicastPrefix: topic://NAME becomes PREFIX+NAME "
        f"(default {DEFAULT_MULTICAST_PREFIX})",
    )
    run = parser.add_argument_group("run")
    run.add_argument(
        "--message-count",
        type=_int_at_least(0),
        default=DEFAULT_MESSAGE_COUNT,
        metavar="N",
        help=f"number of messages (default {DEFAULT_MESSAGE_COUNT}; consumer: 0 = no limit)",
    )
    run.add_argument("--verbose", action="store_true", help="print a line per message on stdout")
    run.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress line on stderr (default: when stderr is a terminal and not --verbose)",
    )


def resolve_destination(args: argparse.Namespace) -> str:
    """The STOMP destination the ``--destination`` and prefix options name."""
    return stomp_destination(
        args.destination,
        anycast_prefix=args.anycast_prefix,
        multicast_prefix=args.multicast_prefix,
    )


# -- output --------------------------------------------------------------------------------


class Progress:
    """A one-line progress bar redrawn with ``\\r`` (plain ANSI, no dependency).

    Redraws at most every ``interval`` seconds; :meth:`close` erases the line so the summary
    or an error message starts on a clean line.
    """

    def __init__(
        self,
        stream: TextIO,
        total: int | None,
        label: str,
        *,
        enabled: bool,
        width: int = 30,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.total = total or None
        self.label = label
        self.enabled = enabled
        self.width = width
        self.interval = interval
        self._clock = clock
        self._start = clock()
        self._last_draw = -math.inf
        self._drawn = False

    def line(self, done: int, elapsed: float) -> str:
        """The text of the bar after ``done`` messages in ``elapsed`` seconds."""
        rate = done / elapsed if elapsed > 0 else 0.0
        if self.total is None:
            return f"{self.label} {done} messages  {rate:,.0f} msg/s"
        fraction = min(done / self.total, 1.0)
        filled = int(self.width * fraction)
        bar = "#" * filled + "-" * (self.width - filled)
        return f"{self.label} [{bar}] {done}/{self.total} {fraction:4.0%}  {rate:,.0f} msg/s"

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if now - self._last_draw < self.interval and done != self.total:
            return
        self._last_draw = now
        self.stream.write("\r\x1b[K" + self.line(done, now - self._start))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def format_summary(
    verb: str,
    count: int,
    nbytes: int,
    elapsed: float,
    destination: str,
    *,
    extra: str = "",
) -> str:
    """``Produced 1000 messages to /queue/TEST in 1.234 s: 810.4 msg/s, 0.12 MiB/s``."""
    rate = count / elapsed if elapsed > 0 else 0.0
    mib_rate = nbytes / MiB / elapsed if elapsed > 0 else 0.0
    noun = "message" if count == 1 else "messages"
    preposition = "to" if verb == "Produced" else "from"
    text = (
        f"{verb} {count} {noun} {preposition} {destination} in {elapsed:.3f} s: "
        f"{rate:,.1f} msg/s, {mib_rate:.2f} MiB/s"
    )
    return f"{text}, {extra}" if extra else text


def _progress_enabled(args: argparse.Namespace) -> bool:
    if args.progress is not None:
        return bool(args.progress)
    return not args.verbose and sys.stderr.isatty()


def _preview(body: bytes) -> str:
    text = body[: _PREVIEW_CHARS * 4].decode("utf-8", "replace")
    text = " ".join(text.split())
    return text[:_PREVIEW_CHARS] + ("..." if len(text) > _PREVIEW_CHARS else "")


# -- running -------------------------------------------------------------------------------


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def describe_failure(exc: BaseException, url: BrokerUrl) -> str:
    """One line for an error of a producer/consumer run."""
    if isinstance(exc, StompServerError):
        return f"the broker sent an ERROR: {exc}"
    if isinstance(exc, ArtemisError):
        return str(exc)
    if isinstance(exc, OSError):
        # trio.open_tcp_stream: "all attempts to connect ... failed", the reasons in __cause__.
        causes = list(_leaves(exc.__cause__)) if exc.__cause__ is not None else [exc]
        reasons: list[str] = []
        for cause in causes:
            reason = _os_reason(cause)
            if reason not in reasons:
                reasons.append(reason)
        return f"cannot connect to {url}: {'; '.join(reasons) or type(exc).__name__}"
    return f"{type(exc).__name__}: {exc}"


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, socket.gaierror) and exc.strerror:
        return exc.strerror  # "Name or service not known"
    if isinstance(exc, OSError) and exc.errno and exc.errno > 0:
        return os.strerror(exc.errno)  # "Connection refused", without trio's address prefix
    return str(exc) or type(exc).__name__


def _run(
    name: str,
    main: Callable[[argparse.Namespace, str], Awaitable[None]],
    args: argparse.Namespace,
) -> int:
    try:
        destination = resolve_destination(args)
    except ValueError as exc:
        print(f"artemis-py {name}: {exc}", file=sys.stderr)
        return 2
    failure: str | None = None
    try:
        trio.run(main, args, destination)
    except* (ArtemisError, OSError) as group:
        failure = describe_failure(next(_leaves(group)), args.url)
    if failure is not None:
        print(f"artemis-py {name}: {failure}", file=sys.stderr)
        return 1
    return 0


def producer_command(args: argparse.Namespace) -> int:
    """``artemis-py producer``: exit code 0, or 1 after printing the error."""
    return _run("producer", _produce, args)


def consumer_command(args: argparse.Namespace) -> int:
    """``artemis-py consumer``: exit code 0, or 1 after printing the error."""
    return _run("consumer", _consume, args)


@dataclass(slots=True)
class _Tally:
    count: int = 0
    nbytes: int = 0
    redelivered: int = 0


async def _produce(args: argparse.Namespace, destination: str) -> None:
    url: BrokerUrl = args.url
    total = args.message_count
    headers = [("persistent", "true" if args.persistent else "false"), *args.header]
    payload: bytes | None = None
    if args.message_size:
        repeats = args.message_size // len(_FILLER) + 1
        payload = (_FILLER * repeats)[: args.message_size]
    progress = Progress(sys.stderr, total, "producer", enabled=_progress_enabled(args))
    tally = _Tally()
    async with open_stomp_connection(
        url.host,
        url.port,
        login=args.user,
        passcode=args.password,
        version=args.stomp_version,
        heartbeat=(args.heart_beat, args.heart_beat),
        max_pending=args.max_pending,
    ) as conn:
        start = time.perf_counter()
        try:
            for number in range(1, total + 1):
                if payload is not None:
                    body: bytes | str = payload
                    size = len(payload)
                else:
                    body = f"test message: {number}"  # a text message, as Artemis sends
                    size = len(body.encode())
                await _send_one(conn, args, destination, body, headers)
                tally.count += 1
                tally.nbytes += size
                if args.verbose:
                    print(f"sent {number}/{total}: {size} bytes")
                progress.update(tally.count)
            await conn.flush_receipts()
            await conn.disconnect()  # its RECEIPT confirms everything, receipts or not
        finally:
            progress.close()
        elapsed = time.perf_counter() - start
    print(format_summary("Produced", tally.count, tally.nbytes, elapsed, destination))


async def _send_one(
    conn: ClientConnection,
    args: argparse.Namespace,
    destination: str,
    body: bytes | str,
    headers: list[tuple[str, str]],
) -> None:
    if not args.receipts:
        await conn.send(destination, body, headers=headers, receipt=False)
    elif args.max_pending == 1:
        await conn.send(destination, body, headers=headers)
    else:
        await conn.send(destination, body, headers=headers, wait=False)


async def _consume(args: argparse.Namespace, destination: str) -> None:
    url: BrokerUrl = args.url
    total = args.message_count
    progress = Progress(sys.stderr, total, "consumer", enabled=_progress_enabled(args))
    tally = _Tally()
    idle_stop = False
    async with open_stomp_connection(
        url.host,
        url.port,
        login=args.user,
        passcode=args.password,
        version=args.stomp_version,
        heartbeat=(args.heart_beat, args.heart_beat),
    ) as conn:
        subscription = await conn.subscribe(destination, ack=args.ack_mode, selector=args.filter)
        first = last = 0.0
        try:
            while total == 0 or tally.count < total:
                message: Message | None = None
                try:
                    # Only the wait is timed: an ACK must never be cut short by it.
                    with trio.move_on_after(args.timeout if args.timeout else math.inf):
                        message = await subscription.receive()
                except trio.EndOfChannel:
                    break
                if message is None:
                    idle_stop = True
                    break
                if args.ack_mode != "auto":
                    await conn.ack(message)
                last = time.perf_counter()
                if not tally.count:
                    first = last
                tally.count += 1
                tally.nbytes += len(message.body)
                tally.redelivered += message.redelivered
                if args.verbose:
                    flag = " (redelivered)" if message.redelivered else ""
                    print(
                        f"received {tally.count}: {message.message_id}{flag}: "
                        f"{_preview(message.body)}"
                    )
                progress.update(tally.count)
            await conn.disconnect()  # its RECEIPT confirms the acknowledgements
        finally:
            progress.close()
    # Timed from the first message to the last: a consumer usually starts before its
    # producer, and the idle wait that ends a --timeout run is not work either.
    extra = f"{tally.redelivered} redelivered"
    if idle_stop:
        extra += f" (stopped: no message for {args.timeout:g} s)"
    print(
        format_summary(
            "Consumed", tally.count, tally.nbytes, last - first, destination, extra=extra
        )
    )
