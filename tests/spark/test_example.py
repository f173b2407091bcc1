"""The example pipeline ``examples/spark_orders`` end to end on a three-node cluster.

The example's scripts are loaded from their files and driven through their functions, with
the test session's SparkSession: a few hundred orders go round robin to the nodes, the
pipeline runs once with ``Trigger.AvailableNow``, and then the Parquet output and the
messages on ``order-stats`` must both hold exactly the aggregates computed here from the
orders sent: one per (window, customer) whose window the watermark has closed, with the
right count and sum, none twice.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trio

from artemis_py.client import open_stomp_connection, parse_url
from artemis_py.client.offset_reader import list_streams
from cluster.conftest import Cluster, make_cluster, running
from integration.conftest import DEFAULT_ADDRESSES, ROOT

pytestmark = pytest.mark.spark

EXAMPLE = ROOT / "examples" / "spark_orders"
# As etc/cluster/symmetric declares it: the source reads the queue on every node.
ORDERS_QUEUE = '<address name="orders"><anycast><queue name="orders"/></anycast></address>'
WINDOW = timedelta(minutes=1)  # the pipeline's defaults
WATERMARK = timedelta(minutes=1)

# (window start, window end, customer) -> (orders, amount)
Aggregates = dict[tuple[datetime, datetime, str], tuple[int, Decimal]]


def load(name: str) -> ModuleType:
    """One of the example's scripts, imported from its file."""
    module_name = f"spark_orders_{name}"
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLE / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def three(tmp_path: Path) -> Iterator[Cluster]:
    nodes = make_cluster(tmp_path / "cluster", 3, addresses=DEFAULT_ADDRESSES + ORDERS_QUEUE)
    yield from running(nodes)


def closed_windows(orders: list[Any]) -> Aggregates:
    """What the pipeline must write: per window and customer, for the windows the watermark
    (latest event time minus the delay) has passed."""
    watermark = max(order.event_time for order in orders) - WATERMARK
    found: dict[tuple[datetime, datetime, str], list[int]] = defaultdict(lambda: [0, 0])
    for order in orders:
        start = order.event_time.replace(second=0, microsecond=0)  # 1-minute windows
        if start + WINDOW <= watermark:
            entry = found[(start, start + WINDOW, order.customer)]
            entry[0] += 1
            entry[1] += order.amount_cents
    return {key: (n, Decimal(cents) / 100) for key, (n, cents) in found.items()}


def differences(name: str, got: Aggregates, expected: Aggregates) -> str:
    """What differs, by window and customer only (no list of contents); "" when equal."""
    if got == expected:
        return ""

    def keys(found: set[tuple[datetime, datetime, str]]) -> list[str]:
        return [f"{start:%H:%M} {customer}" for start, _, customer in sorted(found)[:5]]

    wrong = {k for k in set(got) & set(expected) if got[k] != expected[k]}
    return (
        f"{name}: {len(got)} aggregates, {len(expected)} expected; missing "
        f"{keys(set(expected) - set(got))}, unexpected {keys(set(got) - set(expected))}, "
        f"wrong count or sum {keys(wrong)}"
    )


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def held(urls: list[str], queue: str) -> int:
    """Messages left in ``queue`` on all the nodes together."""

    async def count() -> int:
        total = 0
        for url in map(parse_url, urls):
            async with open_stomp_connection(url.host, url.port) as conn:
                listing = await list_streams(conn, queue)
            total += sum(stream.count for stream in listing.streams)
        return total

    return trio.run(count)


def test_orders_pipeline_writes_and_publishes_each_closed_window_once(
    spark: Any, three: Cluster, tmp_path: Path
) -> None:
    send, pipeline, read = load("send_orders"), load("pipeline"), load("read_stats")
    urls = [f"tcp://127.0.0.1:{node.port}" for node in three]
    # Event times over 6 minutes ending at 12:06:30: the watermark ends near 12:05:30, so
    # the windows 12:00 to 12:05 are closed and 12:05 and 12:06 stay open.
    orders = send.make_orders(
        300,
        customers=3,
        end=datetime(2026, 1, 5, 12, 6, 30, tzinfo=UTC),
        span=timedelta(minutes=6),
        seed=16,
    )
    assert send.send_orders([parse_url(u) for u in urls], orders, "orders") == [100] * 3
    expected = closed_windows(orders)
    assert len({start for start, _, _ in expected}) == 5

    settings = pipeline.Settings(
        url=",".join(urls),
        output=tmp_path / "stats",
        checkpoint=tmp_path / "checkpoint",
        available_now=True,
    )
    pipeline.run(spark, settings)

    rows = spark.read.parquet(str(settings.output)).collect()
    written: Aggregates = {
        (
            row.window_start.astimezone(UTC),
            row.window_end.astimezone(UTC),
            row.customer,
        ): (row.orders, row.amount)
        for row in rows
    }
    twice = len(rows) - len(written)
    assert twice == 0, f"{twice} aggregates written twice to Parquet"
    problem = differences("Parquet", written, expected)
    assert not problem, problem

    stats = trio.run(
        lambda: read.read_stats([parse_url(u) for u in urls], count=len(expected), idle=20)
    )
    published: Aggregates = {
        (utc(s.window_start), utc(s.window_end), s.customer): (s.orders, s.amount) for s in stats
    }
    twice = len(stats) - len(published)
    assert twice == 0, f"{twice} aggregates published twice"
    problem = differences("order-stats", published, expected)
    assert not problem, problem
    left = held(urls, "order-stats")
    assert left == 0, f"{left} more aggregates published than written"
