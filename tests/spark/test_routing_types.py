"""The sink's ``queue://`` and ``topic://`` destinations and the source's queues and topics
mean anycast and multicast on any acceptor.

Each test runs on a node whose STOMP acceptor is as ``artemis create`` writes it (no
``anycastPrefix``/``multicastPrefix``: a destination sent without a routing-type header is a
new multicast address of that very name, where rows written before anyone subscribed are
dropped while the write succeeds) and on one with the ``/queue/`` and ``/topic/`` prefixes
of the etc/ samples. What the sink writes, the source reads back: counts match, never zero.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from artemis_py.client import open_stomp_connection
from integration.conftest import BrokerProcess, unique

from .test_source import bodies, run_available

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module", params=[False, True], ids=["artemis-acceptor", "prefixed-acceptor"])
def node(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path_factory.mktemp("spark-routing"),
        name="spark-routing",
        persistence=True,
        prefixes=request.param,
    )
    broker.start()
    yield broker
    broker.close()


def url_of(node: BrokerProcess) -> str:
    return f"tcp://127.0.0.1:{node.port}"


def write(spark: Any, node: BrokerProcess, destination: str, texts: list[str]) -> None:
    frame = spark.createDataFrame([(text,) for text in texts], "body STRING").repartition(2)
    (
        frame.write.format("artemis")
        .options(url=url_of(node), destination=destination)
        .mode("append")
        .save()
    )


def test_what_the_sink_writes_to_a_queue_the_source_reads_and_a_client_consumes(
    spark: Any, node: BrokerProcess
) -> None:
    queue = unique("orders")
    sent = [f"order {n}" for n in range(6)]
    write(spark, node, f"queue://{queue}", sent)  # nobody listens: the queue keeps them

    rows = spark.read.format("artemis").options(url=url_of(node), queue=queue).load().collect()
    assert bodies(rows) == sorted(sent)

    async def consume() -> list[str]:  # the same queue through the client's queue://
        async with open_stomp_connection("127.0.0.1", node.port) as conn:
            sub = await conn.subscribe(f"queue://{queue}", ack="client-individual")
            with trio.fail_after(10):
                taken = []
                for _ in sent:
                    message = await sub.receive()
                    taken.append(message.text)
                    await conn.ack(message, receipt=True)
            return taken

    assert sorted(trio.run(consume)) == sorted(sent)


def test_a_topic_the_sink_writes_reaches_each_source_subscription(
    spark: Any, node: BrokerProcess, tmp_path: Path
) -> None:
    topic = unique("prices")
    queries = {
        name: ({"url": url_of(node), "topic": topic, "subscription": name}, tmp_path / name)
        for name in ("risk", "audit")
    }
    # A first run of each query makes its durable subscription (nothing to read yet) ...
    for options, where in queries.values():
        run_available(spark, options, "parquet", where / "checkpoint", path=str(where / "out"))
    sent = [f"price {n}" for n in range(5)]
    write(spark, node, f"topic://{topic}", sent)
    # ... the second reads what was published since: every row, in each subscription.
    for name, (options, where) in queries.items():
        run_available(spark, options, "parquet", where / "checkpoint", path=str(where / "out"))
        rows = spark.read.parquet(str(where / "out")).collect()
        assert bodies(rows) == sorted(sent), name
        assert {row.queue for row in rows} == {f"spark-{topic}.{name}"}
