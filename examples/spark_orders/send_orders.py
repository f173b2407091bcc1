"""Send orders to the cluster: JSON messages, persistent and receipted, spread over the nodes.

Each order is one message on the anycast queue ``orders``::

    {"order_id": "o-4a1f-000017", "customer": "c3", "amount": 123.45,
     "event_time": "2026-11-25T14:03:12.345Z"}

``event_time`` is when the order happened (the pipeline's windows are in event time), spread
evenly over ``--span-minutes`` minutes up to ``--end`` (default: now), each a few seconds off
its place in the sequence (orders arrive a little out of order, as real ones do).

The orders go round robin to the nodes of ``--url``, so every node holds some and the
pipeline reads from all of them. The queue must exist on every node: the sample cluster's
broker.xml files declare it (see this directory's README). At the end the script lists the
queue on every node and says where it is missing.

Run ``python send_orders.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import trio

from artemis_py.client import BrokerUrl, ClientError, open_stomp_connection, parse_url
from artemis_py.client.offset_reader import list_streams

# The STOMP acceptors of etc/cluster/symmetric/node{1,2,3}.xml.
DEFAULT_URL = "tcp://localhost:61613,tcp://localhost:61713,tcp://localhost:61813"
DEFAULT_QUEUE = "orders"
JITTER_SECONDS = 5  # how far an order's event time may be from its place in the sequence


@dataclass(frozen=True, slots=True)
class Order:
    order_id: str
    customer: str
    amount_cents: int
    event_time: datetime

    def to_json(self) -> str:
        amount = f"{self.amount_cents // 100}.{self.amount_cents % 100:02d}"
        stamp = self.event_time.astimezone(UTC).isoformat(timespec="milliseconds")
        # The amount is written as a JSON number with two decimals, exactly as typed.
        return (
            f'{{"order_id": {json.dumps(self.order_id)}, '
            f'"customer": {json.dumps(self.customer)}, "amount": {amount}, '
            f'"event_time": {json.dumps(stamp.replace("+00:00", "Z"))}}}'
        )


def make_orders(
    count: int,
    *,
    customers: int = 5,
    end: datetime | None = None,
    span: timedelta = timedelta(minutes=10),
    seed: int | None = None,
) -> list[Order]:
    """``count`` orders with event times spread over ``span`` up to ``end`` (default now)."""
    rng = random.Random(seed)
    run = f"{rng.getrandbits(16):04x}"
    last = (end or datetime.now(UTC)).astimezone(UTC)
    first = last - span
    step = span / max(count, 1)
    orders = []
    for number in range(count):
        jitter = timedelta(milliseconds=rng.randint(-JITTER_SECONDS * 1000, 0))
        orders.append(
            Order(
                order_id=f"o-{run}-{number:06d}",
                customer=f"c{rng.randint(1, customers)}",
                amount_cents=rng.randint(100, 50_000),
                event_time=max(first, first + step * (number + 1) + jitter),
            )
        )
    return orders


async def send_to_node(url: BrokerUrl, queue: str, orders: Sequence[Order]) -> None:
    """Send ``orders`` to one node, pipelined; returns once every RECEIPT has come (each
    order is then in the node's journal)."""
    async with open_stomp_connection(url.host, url.port) as conn:
        for order in orders:
            await conn.send(
                f"/queue/{queue}",
                order.to_json(),
                headers={"persistent": "true", "content-type": "application/json"},
                wait=False,
            )
        await conn.flush_receipts()


async def queue_sizes(urls: Sequence[BrokerUrl], queue: str) -> list[int | None]:
    """How many messages each node holds in ``queue`` (None: the queue is missing there)."""
    sizes: list[int | None] = []
    for url in urls:
        async with open_stomp_connection(url.host, url.port) as conn:
            listing = await list_streams(conn, queue)
        sizes.append(sum(s.count for s in listing.streams) if listing.exists else None)
    return sizes


def send_orders(urls: Sequence[BrokerUrl], orders: Sequence[Order], queue: str) -> list[int]:
    """Send ``orders`` round robin to the nodes at ``urls``; returns how many each got."""
    shares = [list(orders[index :: len(urls)]) for index in range(len(urls))]

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for url, share in zip(urls, shares, strict=True):
                nursery.start_soon(send_to_node, url, queue, share)

    trio.run(main)
    return [len(share) for share in shares]


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first error inside ``group`` (a node that cannot be reached, a refusal)."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def parse_urls(text: str) -> list[BrokerUrl]:
    return [parse_url(part) for part in text.split(",")]


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Send orders (JSON, persistent) round robin to the nodes of the cluster."
    )
    parser.add_argument(
        "--url",
        default=DEFAULT_URL,
        help="the nodes' STOMP URLs, comma separated "
        "(default: the sample cluster etc/cluster/symmetric, %(default)s)",
    )
    parser.add_argument("--queue", default=DEFAULT_QUEUE, help="queue (default %(default)s)")
    parser.add_argument("--count", type=int, default=1000, help="orders (default %(default)s)")
    parser.add_argument(
        "--customers", type=int, default=5, help="customers c1..cN (default %(default)s)"
    )
    parser.add_argument(
        "--span-minutes",
        type=float,
        default=10,
        help="event times spread over this many minutes (default %(default)s)",
    )
    parser.add_argument(
        "--end",
        type=datetime.fromisoformat,
        default=None,
        help="the last event time, ISO 8601 (default: now)",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (repeatable runs)")
    args = parser.parse_args(argv)
    try:
        args.urls = parse_urls(args.url)
    except ValueError as exc:
        parser.error(f"--url: {exc}")
    if args.count < 1 or args.customers < 1 or args.span_minutes <= 0:
        parser.error("--count, --customers and --span-minutes must be positive")
    if args.end is not None and args.end.tzinfo is None:
        args.end = args.end.replace(tzinfo=UTC)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv)
    orders = make_orders(
        args.count,
        customers=args.customers,
        end=args.end,
        span=timedelta(minutes=args.span_minutes),
        seed=args.seed,
    )
    failure: BaseException | None = None
    try:
        counts = send_orders(args.urls, orders, args.queue)
        sizes = trio.run(queue_sizes, args.urls, args.queue)
    except* (OSError, ClientError) as group:
        failure = first_error(group)
    if failure is not None:
        print(f"send_orders: {failure}", file=sys.stderr)
        return 1
    first, last = orders[0].event_time, orders[-1].event_time
    print(f"sent {len(orders)} orders, event times {first:%H:%M:%S} to {last:%H:%M:%S} UTC")
    for url, count, size in zip(args.urls, counts, sizes, strict=True):
        held = "queue missing!" if size is None else f"queue {args.queue} holds {size}"
        print(f"  {url}: {count} sent, {held}")
    if None in sizes:
        # The node routed its orders to another node's queue (ON_DEMAND load balancing).
        print(
            f"declare queue {args.queue} on every node (broker.xml <addresses>): the Spark "
            "source refuses to read a queue that some node lacks",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
