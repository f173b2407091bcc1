"""The run of ``artemis-py consumer``: take ``--message-count`` messages, exactly.

Theory of operation
-------------------
Like Artemis's ``artemis consumer --message-count N``, the consumer consumes exactly N
messages and leaves the rest on the broker. STOMP's own ``ack:auto`` cannot do that: the
broker counts every message it *sends* as acknowledged, and a subscription gets messages
ahead of the ones its client is reading, so a consumer that stops after N drops the ones
it had been sent beyond them. Hence:

* **It acknowledges what it hands over, and only that.** Every ``--ack-mode`` is a client
  mode on the wire: ``auto`` (the default, as a JMS ``AUTO_ACKNOWLEDGE`` session) and
  ``client-individual`` subscribe with ``ack:client-individual`` and ACK each message right
  after it was counted and printed; ``client`` subscribes with ``ack:client`` and sends the
  same ACKs, each cumulative.
* **It takes one message at a time.** The SUBSCRIBE asks for ``consumer-window-size:0``
  (the STOMP flow control of Artemis and artemis-py, docs/stomp.md: the next message only
  once the previous one was acknowledged; ``activemq.prefetchSize:1`` asks ActiveMQ Classic
  for the same). So at most one message is delivered that the consumer does not take: the
  broker sends it after the N-th ACK and gets it back, unacknowledged, at the DISCONNECT,
  to redeliver it (marked ``redelivered``) to the next consumer.
* **A clean end confirms.** The DISCONNECT receipt confirms every ACK before it. A first
  Ctrl-C stops after the message in hand, in the same clean way.
* **Across a failover** (a failover URL, :mod:`.connect`) the subscription is made again
  on the next node, and each ACK waits for its RECEIPT. A message is counted when it is
  handed over, as without failover: a node that goes away takes the ACKs already in its
  socket (usually without the RECEIPT), so counting only confirmed ACKs would miss those.
  If an ACK cut off by the move never reached the node, the message comes again and is
  counted twice (after a scale-down it arrives as a moved message, not marked
  redelivered): with one message at a time, at most one per move.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Final

import trio

from artemis_py.cli.connect import open_connection
from artemis_py.cli.interrupt import Interrupt
from artemis_py.cli.output import Progress, Tally, preview
from artemis_py.client import Destination, Message

__all__ = ["SUBSCRIBE_HEADERS", "WIRE_ACK_MODES", "consume"]

WIRE_ACK_MODES: Final = {
    "auto": "client-individual",
    "client": "client",
    "client-individual": "client-individual",
}
"""The STOMP ack mode each ``--ack-mode`` subscribes with (see the module doc)."""

SUBSCRIBE_HEADERS: Final = (("consumer-window-size", "0"), ("activemq.prefetchSize", "1"))
"""One message at a time: Artemis's (and artemis-py's) header, and ActiveMQ Classic's."""


async def consume(
    args: argparse.Namespace,
    destination: Destination,
    tally: Tally,
    progress: Progress,
    interrupt: Interrupt,
) -> bool:
    """Receive, hand over and acknowledge the messages; ``tally`` says how far it got,
    however it ends. True when it stopped because nothing arrived for ``--timeout``."""
    total = args.message_count
    async with open_connection(args, "consumer", progress) as conn:
        subscription = await conn.subscribe(
            destination,
            ack=WIRE_ACK_MODES[args.ack_mode],
            selector=args.filter,
            headers=SUBSCRIBE_HEADERS,
        )
        idle = confirmed = False
        try:
            while (total == 0 or tally.count < total) and not interrupt.requested:
                message: Message | None = None
                # Only the wait is cut short (by --timeout or Ctrl-C); never an ACK.
                with interrupt.cuts_short(), trio.move_on_after(args.timeout or math.inf):
                    try:
                        message = await subscription.receive()
                    except trio.EndOfChannel:
                        break
                if message is None:
                    idle = not interrupt.requested
                    break
                _hand_over(message, tally, args.verbose)
                progress.update(tally.count)
                await conn.ack(message)
            await conn.disconnect()  # its RECEIPT confirms the acknowledgements
            confirmed = True
        finally:
            if not confirmed:  # aborted (or failed): the ACKs sent may not have arrived
                tally.unconfirmed = tally.count
    return idle


def _hand_over(message: Message, tally: Tally, verbose: bool) -> None:
    now = time.perf_counter()
    if not tally.count:
        tally.first = now
    tally.last = now
    tally.count += 1
    tally.nbytes += len(message.body)
    tally.redelivered += message.redelivered
    if verbose:
        flag = " (redelivered)" if message.redelivered else ""
        print(f"received {tally.count}: {message.message_id}{flag}: {preview(message.body)}")
