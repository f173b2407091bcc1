"""``artemis-py check``: the total-queue checker (:mod:`artemis_py.checker`) as a command.

Sends uniquely numbered persistent messages with receipts to every ``--url``, consumes them
from every ``--url``, and reports sent, receipted, received, lost, unexpected and duplicated
(text, or ``--json``). Exit code 0 when nothing receipted was lost and nothing unexpected
arrived, 1 when something was, 2 for bad options or when no send was ever receipted.
A ``--url`` of a primary/backup pair, ``(tcp://PRIMARY,tcp://BACKUP)``, is one node whose
clients reconnect to whichever side is live (docs/high-availability.md "Clients").
docs/check.md says how to read the report.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from typing import Final

import trio

from artemis_py.checker import CheckOptions, History, Verdict, run_check
from artemis_py.cli.clients import int_at_least, positive_number
from artemis_py.client import ANYCAST, DEFAULT_URL, Destination
from artemis_py.client.url import ClientUrl, parse_client_url
from artemis_py.exceptions import ArtemisError, leaves

__all__ = ["add_parser", "check_command"]

DEFAULT_QUEUE: Final = "artemis-py-check"
DEFAULT_COUNT: Final = 1000
EXIT_FAILED: Final = 1
EXIT_UNUSABLE: Final = 2
SHOWN: Final = 10  # lost numbers and client errors listed in the text report


def _url(text: str) -> ClientUrl:
    """One node's STOMP acceptor, with its TLS parameters if any (docs/tls.md), or a
    primary/backup pair's, ``(tcp://PRIMARY,tcp://BACKUP)``: one node that fails over."""
    try:
        url = parse_client_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if url.discovery is not None:
        raise argparse.ArgumentTypeError(
            f"{text!r}: one node per --url (tcp://HOST:PORT, or (tcp://PRIMARY,tcp://BACKUP) "
            "for a primary/backup pair; TLS parameters after '?')"
        )
    return url


def _queue(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("empty queue name")
    return text


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "check",
        help="check a cluster's promises: no receipted message lost (total-queue check)",
        description="Send uniquely numbered persistent messages with receipts to every "
        "--url (one producer per URL), consume them from every --url (client-individual "
        "acknowledgements with receipts), wait until every receipted message came back "
        "or nothing arrived for --timeout seconds, and report sent, receipted, received, "
        "lost (receipted, never received), unexpected and duplicated. Use a queue of its "
        "own: other messages on it are counted as foreign. Exit code 0: nothing lost and "
        "nothing unexpected; 1: something was; 2: bad options, or no send was receipted.",
    )
    parser.add_argument(
        "--url",
        type=_url,
        action="extend",
        nargs="+",
        default=None,
        metavar="URL",
        help=f"STOMP acceptors of the nodes, tcp://HOST:PORT, with TLS parameters after '?' "
        "as in docs/tls.md; a primary/backup pair is one node, '(tcp://PRIMARY,tcp://BACKUP)': "
        "its producer and consumer reconnect to whichever side is live "
        f"(repeatable; default {DEFAULT_URL})",
    )
    parser.add_argument(
        "--queue",
        type=_queue,
        default=DEFAULT_QUEUE,
        help=f"the anycast queue to use (default {DEFAULT_QUEUE}); sent and subscribed with "
        "the ANYCAST routing type, so it works on any acceptor",
    )
    parser.add_argument(
        "--anycast-prefix",
        default="",
        metavar="PREFIX",
        help="put PREFIX in front of the queue's name (default: none; only for a STOMP "
        "server that reads routing types from prefixes alone)",
    )
    parser.add_argument(
        "--count",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help=f"messages to send (default {DEFAULT_COUNT}; with --duration: no limit)",
    )
    parser.add_argument(
        "--rate", type=positive_number(), default=None, help="messages per second, at most"
    )
    parser.add_argument(
        "--duration", type=positive_number(), default=None, metavar="SECONDS", help="send this long"
    )
    parser.add_argument(
        "--timeout",
        type=positive_number(),
        default=10.0,
        metavar="SECONDS",
        help="end the drain when nothing arrived for this long, and sending when nothing "
        "was receipted for this long (default 10)",
    )
    parser.add_argument(
        "--receipt-timeout",
        type=positive_number(),
        default=10.0,
        metavar="SECONDS",
        help="give up on a connection whose RECEIPT takes longer, and reconnect (default 10)",
    )
    parser.add_argument("--user", "--login", dest="user", default=None, help="login")
    parser.add_argument("--password", "--passcode", dest="password", default=None, help="passcode")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=check_command)


def check_command(args: argparse.Namespace) -> int:
    given: list[ClientUrl] = args.url or [parse_client_url(DEFAULT_URL)]
    urls = tuple(url.addresses[0] for url in given)
    names = tuple(str(url) for url in given)  # a pair as (primary,backup)
    count = args.count if args.count is not None else None if args.duration else DEFAULT_COUNT
    options = CheckOptions(
        urls=urls,
        destination=Destination(args.anycast_prefix + args.queue, ANYCAST),
        count=count,
        rate=args.rate,
        duration=args.duration,
        timeout=args.timeout,
        receipt_timeout=args.receipt_timeout,
        login=args.user,
        passcode=args.password,
        tls=tuple(url.options.tls for url in given),
        failover=tuple(url.addresses[1:] for url in given),
    )
    run_id = uuid.uuid4().hex[:12]
    history = History(prefix=f"artemis-py-check {run_id} ")
    started = time.monotonic()
    failure: BaseException | None = None
    try:
        trio.run(_run, options, history)
    except* (ArtemisError, OSError) as group:  # the runner handles client errors; not these
        failure = leaves(group)[0]
    if failure is not None:
        print(f"artemis-py check: {failure}", file=sys.stderr)
        return EXIT_UNUSABLE
    verdict = history.verdict(len(urls))
    seconds = time.monotonic() - started
    if args.json:
        document = {
            "run": run_id,
            "queue": args.queue,
            "urls": list(names),
            "seconds": round(seconds, 3),
            **verdict.to_json(),
            "first_client_errors": history.errors[:SHOWN],
        }
        for entry, name in zip(document["nodes"], names, strict=False):
            entry["url"] = name
        print(json.dumps(document, indent=2))
    else:
        print(_text(verdict, history, names, args.queue, run_id, seconds))
    if not verdict.receipted:
        print("artemis-py check: no send was receipted (are the URLs right?)", file=sys.stderr)
        return EXIT_UNUSABLE
    return 0 if verdict.ok else EXIT_FAILED


async def _run(options: CheckOptions, history: History) -> None:
    """The check; a first Ctrl-C (or SIGTERM) ends the sending and the drain still runs, a
    second one ends the drain too. The report follows either way."""
    stop = threading.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signals, stop, nursery.cancel_scope)
        await run_check(options, history, stop)
        nursery.cancel_scope.cancel()


async def _stop_on_signals(stop: threading.Event, scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            if stop.is_set():
                print("artemis-py check: stopped; the drain was cut short", file=sys.stderr)
                scope.cancel()
                return
            stop.set()
            print(
                "artemis-py check: sending stopped; draining (Ctrl-C again to stop at once)",
                file=sys.stderr,
                flush=True,
            )


def _text(
    verdict: Verdict,
    history: History,
    urls: tuple[str, ...],
    queue: str,
    run_id: str,
    seconds: float,
) -> str:
    lines = [
        f"artemis-py check: {len(urls)} node(s), queue {queue}, run {run_id}, {seconds:.1f} s",
        verdict.summary(),
    ]
    for i, (sent, receipted, delivered) in enumerate(
        zip(verdict.sent_to, verdict.receipted_by, verdict.received_from, strict=True)
    ):
        url = urls[i] if i < len(urls) else "?"
        lines.append(f"  {url}: sent {sent} receipted {receipted} delivered {delivered}")
    if history.errors:
        lines.append(f"client errors: {len(history.errors)}; first:")
        lines.extend(f"  {e}" for e in history.errors[:SHOWN])
    if verdict.lost:
        listed = ", ".join(map(str, verdict.lost[:SHOWN]))
        lines.append(f"FAILED: {len(verdict.lost)} receipted message(s) lost: {listed}")
    if verdict.unexpected:
        listed = ", ".join(map(str, verdict.unexpected[:SHOWN]))
        lines.append(f"FAILED: {len(verdict.unexpected)} never sent but received: {listed}")
    if verdict.after_ack:
        lines.append(
            f"FAILED: {verdict.after_ack} message(s) delivered again after their ACK was confirmed"
        )
    if verdict.ok and verdict.receipted:
        lines.append("OK: every receipted message was received")
    return "\n".join(lines)
