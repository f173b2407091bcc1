"""The run of ``artemis-py producer``: send ``--message-count`` messages, then DISCONNECT.

Each message waits for its RECEIPT by default (``--max-pending 1``); a larger
``--max-pending`` keeps that many receipts outstanding, and ``--no-receipts`` asks for none.
Either way the final DISCONNECT receipt confirms the whole run, so the count printed is what
the broker has. A first Ctrl-C stops after the message being sent and confirms what was sent.
``--sleep MS`` waits that long between two messages (Artemis's option; a Ctrl-C cuts the wait
short).

With a failover URL (:mod:`.connect`) every send is receipted, and one whose RECEIPT did not
come is sent again on the next node with the same ``_AMQ_DUPL_ID``; ``--max-pending`` is
then the failover connection's window of unreceipted sends.
"""

from __future__ import annotations

import argparse
import time
from typing import Final

import trio

from artemis_py.cli.connect import open_connection
from artemis_py.cli.interrupt import Interrupt
from artemis_py.cli.output import Progress, Tally
from artemis_py.client import ClientConnection, Destination
from artemis_py.client.failover import FailoverConnection

__all__ = ["produce"]

_FILLER: Final = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


async def produce(
    args: argparse.Namespace,
    destination: Destination,
    tally: Tally,
    progress: Progress,
    interrupt: Interrupt,
) -> None:
    """Send the messages; ``tally`` says how far it got, however it ends."""
    total = args.message_count
    headers = [("persistent", "true" if args.persistent else "false"), *args.header]
    payload: bytes | None = None
    if args.message_size:
        repeats = args.message_size // len(_FILLER) + 1
        payload = (_FILLER * repeats)[: args.message_size]
    async with open_connection(args, "producer", progress, max_pending=args.max_pending) as conn:
        tally.first = time.perf_counter()
        confirmed = False
        try:
            for number in range(1, total + 1):
                if number > 1 and args.sleep:
                    with interrupt.cuts_short():
                        await trio.sleep(args.sleep / 1000)
                if interrupt.requested:
                    break
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
            confirmed = True
        finally:
            tally.last = time.perf_counter()
            if not confirmed:  # aborted (or failed): what has the broker not confirmed?
                # A send cut short while waiting for its receipt is not in the count.
                pending = min(conn.pending_receipts, tally.count)
                tally.unconfirmed = pending if args.receipts else tally.count


async def _send_one(
    conn: ClientConnection | FailoverConnection,
    args: argparse.Namespace,
    destination: Destination,
    body: bytes | str,
    headers: list[tuple[str, str]],
) -> None:
    if isinstance(conn, FailoverConnection):  # receipted, always (--no-receipts is refused)
        await conn.send(destination, body, headers=headers, wait=args.max_pending == 1)
    elif not args.receipts:
        await conn.send(destination, body, headers=headers, receipt=False)
    elif args.max_pending == 1:
        await conn.send(destination, body, headers=headers)
    else:
        await conn.send(destination, body, headers=headers, wait=False)
