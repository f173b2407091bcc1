"""``artemis-py producer`` and ``artemis-py consumer``: send and receive messages over STOMP.

Modelled on Artemis's ``artemis producer`` / ``artemis consumer``: the same option names
where they apply (``--url``, ``--destination queue://NAME``, ``--message-count``,
``--message-size``, ``--user``/``--password``, ``--verbose``), spoken over a STOMP acceptor
with :mod:`artemis_py.client`. ``queue://NAME`` and ``topic://NAME`` are sent as ``NAME`` with
the routing type in the headers Artemis reads (``destination-type``/``subscription-type``), so
they work on any acceptor; ``--anycast-prefix``/``--multicast-prefix`` put a prefix in front
for a server that only reads prefixes.

This module holds the options and drives a run; the runs themselves are
:mod:`.producer` and :mod:`.consumer` (which says how the consumer takes exactly
``--message-count`` messages), Ctrl-C is :mod:`.interrupt`, the output :mod:`.output`.
Progress is a single ``\\r``-redrawn line on stderr (only when stderr is a terminal, unless
``--progress``); the summary goes to stdout, also after a Ctrl-C (exit code 130). Any failure
is one line on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Final

import trio

from artemis_py.cli.connect import client_url
from artemis_py.cli.consumer import consume
from artemis_py.cli.interrupt import Interrupt, run_interruptibly
from artemis_py.cli.output import Progress, Tally, format_summary
from artemis_py.cli.producer import produce
from artemis_py.client import (
    ACK_MODES,
    DEFAULT_URL,
    Destination,
    StompServerError,
    parse_destination,
)
from artemis_py.client.destination import add_destination_arguments
from artemis_py.client.errors import connect_failure
from artemis_py.client.url import BrokerUrl, ClientUrl
from artemis_py.exceptions import ArtemisError, leaves
from artemis_py.protocol.stomp import SUPPORTED_VERSIONS

__all__ = [
    "Progress",
    "add_parsers",
    "consumer_command",
    "describe_failure",
    "format_summary",
    "int_at_least",
    "positive_number",
    "producer_command",
    "resolve_destination",
]

DEFAULT_DESTINATION: Final = "queue://TEST"
DEFAULT_MESSAGE_COUNT: Final = 1000
DEFAULT_HEARTBEAT_MS: Final = 10_000
EXIT_INTERRUPTED: Final = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


# -- argument types ------------------------------------------------------------------------


def int_at_least(minimum: int) -> Callable[[str], int]:
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


def positive_number(what: str = "number") -> Callable[[str], float]:
    """An argument type: a finite number above 0 (``what`` names it in the errors)."""

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {what}: {text!r}") from None
        if not value > 0 or math.isinf(value):
            raise argparse.ArgumentTypeError(f"must be a positive {what}, got {text}")
        return value

    convert.__name__ = f"positive {what}"
    return convert


_seconds = positive_number("number of seconds")


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return (name, value)


# -- parsers -------------------------------------------------------------------------------


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``producer`` and ``consumer`` to the ``artemis-py`` sub-commands."""
    _add_producer(commands)
    _add_consumer(commands)


def _add_producer(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    producer = commands.add_parser(
        "producer",
        help="send messages to a destination over STOMP",
        description="Send messages to a queue or topic through a STOMP acceptor and report "
        "the throughput (like Artemis's 'artemis producer'). Ctrl-C stops it after the "
        "message being sent, waits for the broker to confirm what was sent and prints the "
        "count (exit code 130); a second Ctrl-C aborts at once.",
    )
    _add_common_options(producer)
    group = producer.add_argument_group("producer")
    group.add_argument(
        "--message-size",
        type=int_at_least(0),
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
        type=int_at_least(1),
        default=1,
        metavar="N",
        help="receipts kept outstanding at once (default 1: wait for each one)",
    )
    group.add_argument(
        "--sleep",
        type=int_at_least(0),
        default=0,
        metavar="MS",
        help="milliseconds to sleep between messages (default 0), as Artemis's --sleep: a "
        "gentle, steady load (with --message-count, the run takes about N x MS)",
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


def _add_consumer(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    consumer = commands.add_parser(
        "consumer",
        help="receive messages from a destination over STOMP",
        description="Receive messages from a queue or topic through a STOMP acceptor and "
        "report the throughput (like Artemis's 'artemis consumer'). It consumes exactly "
        "--message-count messages (see --ack-mode). Ctrl-C stops it after the message in "
        "hand and prints the count so far (exit code 130); a second Ctrl-C aborts at once.",
    )
    _add_common_options(consumer)
    group = consumer.add_argument_group("consumer")
    group.add_argument(
        "--ack-mode",
        choices=ACK_MODES,
        default="auto",
        help="how messages are acknowledged (default auto). Whatever the mode, the consumer "
        "acknowledges exactly the messages it receives (counts and prints), each right after, "
        "and takes one at a time (consumer-window-size 0), so it consumes --message-count "
        "messages and leaves the rest on the broker. auto and client-individual send an ACK "
        "per message on a client-individual subscription (auto is not STOMP's ack:auto, with "
        "which the broker would count every message it sent as acknowledged, including ones "
        "the consumer never took); client sends them on a client (cumulative) subscription. "
        "A message delivered but not taken is redelivered after the consumer disconnects",
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
        type=client_url,
        default=DEFAULT_URL,
        help=f"the STOMP acceptor, tcp://HOST:PORT (default {DEFAULT_URL}), or a cluster: "
        "'(tcp://A:PORT,tcp://B:PORT)?ha=true&...' with Artemis's parameters (ha, "
        "reconnectAttempts, retryInterval, retryIntervalMultiplier, maxRetryInterval, "
        "useTopologyForLoadBalancing, connectionLoadBalancingPolicyClassName): with ha=true "
        "it fails over to another node, resending unreceipted messages (docs/client.md)",
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
        type=int_at_least(0),
        default=DEFAULT_HEARTBEAT_MS,
        metavar="MS",
        help="heart-beat interval offered both ways in ms (default "
        f"{DEFAULT_HEARTBEAT_MS}; 0: none, and the broker's connection TTL applies)",
    )
    dest = parser.add_argument_group("destination")
    add_destination_arguments(dest, DEFAULT_DESTINATION)
    run = parser.add_argument_group("run")
    run.add_argument(
        "--message-count",
        type=int_at_least(0),
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


def resolve_destination(args: argparse.Namespace) -> Destination:
    """The destination the ``--destination`` and prefix options name."""
    return parse_destination(
        args.destination,
        anycast_prefix=args.anycast_prefix,
        multicast_prefix=args.multicast_prefix,
    )


# -- running -------------------------------------------------------------------------------


def describe_failure(exc: BaseException, url: BrokerUrl | ClientUrl) -> str:
    """One line for an error of a producer/consumer run."""
    if isinstance(exc, StompServerError):
        return f"the broker sent an ERROR: {exc}"
    if isinstance(exc, ArtemisError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"cannot connect to {url}: {connect_failure(exc)}"
    return f"{type(exc).__name__}: {exc}"


def _progress(args: argparse.Namespace, label: str) -> Progress:
    if args.progress is not None:
        enabled = bool(args.progress)
    else:
        enabled = not args.verbose and sys.stderr.isatty()
    return Progress(sys.stderr, args.message_count, label, enabled=enabled)


Main = Callable[[argparse.Namespace, Destination, Tally, Progress, Interrupt], Awaitable[object]]


@dataclass(slots=True)
class _Outcome:
    """How a run went: the counts so far, however it ended, and what ``main`` returned."""

    status: int
    tally: Tally
    destination: str = ""
    interrupt: Interrupt | None = None
    result: object = None

    @property
    def summary_due(self) -> bool:
        return self.status in (0, EXIT_INTERRUPTED)

    def ending(self, unconfirmed: str) -> str:
        """How an interrupted run ended, for the summary ("" for a complete run)."""
        if self.interrupt is None or not self.interrupt.happened:
            return ""
        if not self.interrupt.aborted:
            return "interrupted"
        if not self.tally.unconfirmed:
            return "aborted"
        return f"aborted: {self.tally.unconfirmed} {unconfirmed} not confirmed by the broker"


def _run(name: str, main: Main, args: argparse.Namespace) -> _Outcome:
    """Run ``main`` under Ctrl-C handling; a failure is printed here (status 1 or 2), the
    summary by the caller."""
    tally = Tally()
    try:
        destination = resolve_destination(args)
        if name == "producer" and args.url.options.fails_over and not args.receipts:
            raise ValueError(
                "--no-receipts cannot be used with failover (ha=true or reconnectAttempts): "
                "a message is sent again until a node receipts it"
            )
    except ValueError as exc:
        print(f"artemis-py {name}: {exc}", file=sys.stderr)
        return _Outcome(2, tally)
    progress = _progress(args, name)

    def stopping() -> None:
        progress.close()
        print(
            f"artemis-py {name}: stopping after the message in hand (Ctrl-C again to stop at once)",
            file=sys.stderr,
            flush=True,
        )

    outcome = _Outcome(0, tally, args.destination, Interrupt(stopping))
    assert outcome.interrupt is not None

    async def body(interrupt: Interrupt) -> None:
        outcome.result = await main(args, destination, tally, progress, interrupt)

    failure: str | None = None
    try:
        trio.run(partial(run_interruptibly, body, outcome.interrupt))
    except* (ArtemisError, OSError) as group:
        failure = describe_failure(leaves(group)[0], args.url)
    except* KeyboardInterrupt:
        outcome.interrupt.aborted = True  # a Ctrl-C before (or after) ours was listening
    finally:
        progress.close()
    if failure is not None:
        print(f"artemis-py {name}: {failure}", file=sys.stderr)
        outcome.status = 1
    elif outcome.interrupt.happened:
        outcome.status = EXIT_INTERRUPTED
    return outcome


def producer_command(args: argparse.Namespace) -> int:
    """``artemis-py producer``: exit code 0, 130 after a Ctrl-C, or 1 after printing the error."""
    outcome = _run("producer", produce, args)
    tally = outcome.tally
    if outcome.summary_due:
        print(
            format_summary(
                "Produced",
                tally.count,
                tally.nbytes,
                tally.elapsed,
                outcome.destination,
                extra=outcome.ending("of them"),
            )
        )
    return outcome.status


def consumer_command(args: argparse.Namespace) -> int:
    """``artemis-py consumer``: exit code 0, 130 after a Ctrl-C, or 1 after printing the error."""
    outcome = _run("consumer", consume, args)
    tally = outcome.tally
    if outcome.summary_due:
        # Timed from the first message to the last: a consumer usually starts before its
        # producer, and the idle wait that ends a --timeout run is not work either.
        extra = f"{tally.redelivered} redelivered"
        ending = outcome.ending("acknowledgements")
        if ending:
            extra += f", {ending}"
        elif outcome.result:  # stopped by --timeout
            extra += f" (stopped: no message for {args.timeout:g} s)"
        print(
            format_summary(
                "Consumed",
                tally.count,
                tally.nbytes,
                tally.elapsed,
                outcome.destination,
                extra=extra,
            )
        )
    return outcome.status
