"""Read the aggregates the pipeline published to ``order-stats``, from every node, and print them.

The pipeline's sink sends each partition of aggregates to one node, so the messages are
spread over the cluster: this consumer subscribes on every node of ``--url`` at once and
acknowledges each message once it is printed (``client-individual``; a message not yet
printed when the script stops stays in the queue for the next run). It stops after
``--count`` messages, or when none has come for ``--idle`` seconds.

Run ``python read_stats.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import trio

from artemis_py.client import BrokerUrl, ClientError, open_stomp_connection, parse_url

# The STOMP acceptors of etc/cluster/symmetric/node{1,2,3}.xml.
DEFAULT_URL = "tcp://localhost:61613,tcp://localhost:61713,tcp://localhost:61813"


@dataclass(frozen=True, slots=True)
class Stat:
    """One aggregate: orders of ``customer`` in ``[window_start, window_end)``."""

    window_start: str
    window_end: str
    customer: str
    orders: int
    amount: Decimal

    @classmethod
    def parse(cls, body: bytes) -> Stat:
        data: dict[str, Any] = json.loads(body, parse_float=Decimal)
        return cls(
            window_start=data["window_start"],
            window_end=data["window_end"],
            customer=data["customer"],
            orders=int(data["orders"]),
            amount=Decimal(data["amount"]),
        )

    def line(self) -> str:
        start, end = self.window_start[11:16], self.window_end[11:16]
        return (
            f"{self.window_start[:10]} {start}-{end}  {self.customer:>4}  "
            f"{self.orders:4d} orders  {self.amount:>10}"
        )


async def read_stats(
    urls: Sequence[BrokerUrl],
    queue: str = "order-stats",
    *,
    count: int | None = None,
    idle: float = 5.0,
    on_stat: Callable[[Stat], None] | None = None,
) -> list[Stat]:
    """The aggregates on ``queue`` across the nodes at ``urls``, acknowledged as they come;
    stops after ``count`` (None: no limit) or when ``idle`` seconds pass without one."""
    found: list[Stat] = []
    arrived = trio.Event()

    async def consume(url: BrokerUrl, done: trio.CancelScope) -> None:
        async with open_stomp_connection(url.host, url.port) as conn:
            subscription = await conn.subscribe(
                f"/queue/{queue}",
                ack="client-individual",
                headers={"consumer-window-size": "0"},  # one at a time: none taken unprinted
            )
            async with subscription:
                async for message in subscription:
                    stat = Stat.parse(message.body)
                    if on_stat is not None:
                        on_stat(stat)
                    await conn.ack(message, receipt=True)
                    found.append(stat)
                    arrived.set()
                    if count is not None and len(found) >= count:
                        done.cancel()

    async with trio.open_nursery() as nursery:
        for url in urls:
            nursery.start_soon(consume, url, nursery.cancel_scope)
        seen = -1
        while seen != len(found):
            seen = len(found)
            with trio.move_on_after(idle):
                await arrived.wait()
            arrived = trio.Event()
        nursery.cancel_scope.cancel()
    return found


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Print the aggregates the pipeline published, from every node."
    )
    parser.add_argument(
        "--url",
        default=DEFAULT_URL,
        help="the nodes' STOMP URLs, comma separated (default: the sample cluster "
        "etc/cluster/symmetric, %(default)s)",
    )
    parser.add_argument(
        "--queue", default="order-stats", help="queue to read (default %(default)s)"
    )
    parser.add_argument("--count", type=int, default=None, help="stop after this many")
    parser.add_argument(
        "--idle",
        type=float,
        default=5.0,
        help="stop when nothing came for this many seconds (default %(default)s; 0: never)",
    )
    args = parser.parse_args(argv)
    try:
        args.urls = [parse_url(part) for part in args.url.split(",")]
    except ValueError as exc:
        parser.error(f"--url: {exc}")
    if args.count is not None and args.count < 1:
        parser.error("--count must be at least 1")
    if args.idle < 0:
        parser.error("--idle must not be negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv)
    idle = math.inf if args.idle == 0 else args.idle

    def show(stat: Stat) -> None:
        print(stat.line(), flush=True)

    failure: BaseException | None = None
    found: list[Stat] = []
    try:
        found = trio.run(
            lambda: read_stats(args.urls, args.queue, count=args.count, idle=idle, on_stat=show)
        )
    except* (OSError, ClientError, ValueError, KeyError) as group:
        # A node not reachable, refused, or a message that is not an aggregate.
        failure = group
        while isinstance(failure, BaseExceptionGroup):
            failure = failure.exceptions[0]
    except* KeyboardInterrupt:
        failure = KeyboardInterrupt()
    if isinstance(failure, KeyboardInterrupt):
        return 130
    if failure is not None:
        print(f"read_stats: {failure}", file=sys.stderr)
        return 1
    total = sum(stat.orders for stat in found)
    print(f"{len(found)} aggregates, {total} orders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
