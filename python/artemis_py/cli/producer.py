"""The run of ``artemis-py producer``: send ``--message-count`` messages, then DISCONNECT.

Each message waits for its RECEIPT by default (``--max-pending 1``); a larger
``--max-pending`` keeps that many receipts outstanding, and ``--no-receipts`` asks for none.
Either way the final DISCONNECT receipt confirms the whole run, so the count printed is what
the broker has. A first Ctrl-C stops after the message being sent and confirms what was sent.
"""

from __future__ import annotations

import argparse
import time
from typing import Final

from artemis_py.cli.interrupt import Interrupt
from artemis_py.cli.output import Progress, Tally
from artemis_py.client import BrokerUrl, ClientConnection, open_stomp_connection

__all__ = ["produce"]

_FILLER: Final = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


async def produce(
    args: argparse.Namespace,
    destination: str,
    tally: Tally,
    progress: Progress,
    interrupt: Interrupt,
) -> None:
    """Send the messages; ``tally`` says how far it got, however it ends."""
    url: BrokerUrl = args.url
    total = args.message_count
    headers = [("persistent", "true" if args.persistent else "false"), *args.header]
    payload: bytes | None = None
    if args.message_size:
        repeats = args.message_size // len(_FILLER) + 1
        payload = (_FILLER * repeats)[: args.message_size]
    async with open_stomp_connection(
        url.host,
        url.port,
        login=args.user,
        passcode=args.password,
        version=args.stomp_version,
        heartbeat=(args.heart_beat, args.heart_beat),
        max_pending=args.max_pending,
    ) as conn:
        tally.first = time.perf_counter()
        confirmed = False
        try:
            for number in range(1, total + 1):
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
