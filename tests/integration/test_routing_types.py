"""``queue://`` and ``topic://`` mean anycast and multicast on any acceptor: the client
library, ``producer``, ``consumer``, ``perf`` and ``check`` against a real node (and
``producer --sleep``).

Every test runs on two nodes: one whose STOMP acceptor is as ``artemis create`` writes it (no
``anycastPrefix``/``multicastPrefix``; a destination sent without a routing-type header there
is a new *multicast* address of that very name, so a message sent to ``/queue/orders`` before
anyone subscribed is dropped while the sender gets its receipt) and one with the ``/queue/``
and ``/topic/`` prefixes of the etc/ samples, which must keep working and interoperate with
clients that use the prefixes.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from artemis_py.client import open_stomp_connection
from cluster.conftest import Cluster, cluster  # noqa: F401 - the cluster fixture, for this module

from .conftest import BrokerProcess, Running, artemis_py, unique, wait_for


@pytest.fixture(scope="module", params=[False, True], ids=["artemis-acceptor", "prefixed-acceptor"])
def node(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path_factory.mktemp("routing"), name="routing", prefixes=request.param
    )
    broker.start()
    yield broker
    broker.close()


def url_of(node: BrokerProcess) -> str:
    return f"tcp://127.0.0.1:{node.port}"


def anycast_queue(node: BrokerProcess, queue: str) -> list[str]:
    """The bodies in the anycast queue ``queue`` (consumed and given back), as a client of
    another kind sees it: stomp.py, naming the routing type by header (and on the prefixed
    acceptor also by ``/queue/``: the same queue)."""
    names = [queue] + ([f"/queue/{queue}"] if node.prefixes else [])
    seen: list[list[str]] = []
    for name in names:
        client = node.client()
        try:
            client.subscribe(name, ack="client-individual", **{"subscription-type": "ANYCAST"})
            client.sync()
            seen.append(sorted(client.bodies()))
        finally:
            client.close()
    assert all(bodies == seen[0] for bodies in seen), seen
    return seen[0]


# -- the client library --------------------------------------------------------------------------


def test_the_client_keeps_what_it_sends_to_a_queue_and_fans_a_topic_out(
    node: BrokerProcess,
) -> None:
    queue, topic = unique("orders"), unique("prices")

    async def main() -> tuple[list[bytes], list[list[bytes]]]:
        async with open_stomp_connection("127.0.0.1", node.port) as conn:
            for number in range(5):  # nobody listens yet: the queue keeps them
                await conn.send(f"queue://{queue}", f"q{number}")
            assert sorted(anycast_queue(node, queue)) == [f"q{n}" for n in range(5)]
            subscribers = [await conn.subscribe(f"topic://{topic}") for _ in range(2)]
            for number in range(3):
                await conn.send(f"topic://{topic}", f"t{number}")
            with trio.fail_after(10):
                fanned = [[(await sub.receive()).body for _ in range(3)] for sub in subscribers]
                consumer = await conn.subscribe(f"queue://{queue}", ack="client-individual")
                taken = []
                for _ in range(5):
                    message = await consumer.receive()
                    taken.append(message.body)
                    await conn.ack(message, receipt=True)
            return taken, fanned

    taken, fanned = trio.run(main)
    assert sorted(taken) == [b"q%d" % n for n in range(5)]
    assert fanned == [[b"t0", b"t1", b"t2"]] * 2
    assert anycast_queue(node, queue) == []  # exactly the five, all taken


def test_durable_and_shared_topic_subscriptions_through_the_client(node: BrokerProcess) -> None:
    topic = unique("news")

    async def main() -> tuple[list[bytes], list[bytes], int]:
        async with open_stomp_connection(
            "127.0.0.1", node.port, client_id=unique("client")
        ) as conn:
            durable = [("durable-subscription-name", "keep")]
            await (await conn.subscribe(f"topic://{topic}", headers=durable)).unsubscribe()
            # Two consumers of one shared subscription queue (an FQQN) compete for its copy.
            shared = [await conn.subscribe(f"topic://{topic}::shared") for _ in range(2)]
            for number in range(4):
                await conn.send(f"topic://{topic}", f"n{number}")
            with trio.fail_after(10):
                kept = await conn.subscribe(f"topic://{topic}", headers=durable)
                offline = [(await kept.receive()).body for _ in range(4)]
                split: list[bytes] = []
                while len(split) < 4:
                    for sub in shared:
                        with trio.move_on_after(0.05):
                            split.append((await sub.receive()).body)
            extra = 0
            with trio.move_on_after(0.3):  # nothing more: one copy per subscription
                for sub in [kept, *shared]:
                    await sub.receive()
                    extra += 1
            return offline, split, extra

    offline, split, extra = trio.run(main)
    assert offline == [b"n0", b"n1", b"n2", b"n3"]  # kept while nobody was subscribed
    assert sorted(split) == [b"n0", b"n1", b"n2", b"n3"]
    assert extra == 0


# -- producer and consumer -------------------------------------------------------------------


def test_producer_and_consumer_agree_on_a_queue(node: BrokerProcess) -> None:
    queue = unique("orders")
    where = ("--url", url_of(node), "--destination", f"queue://{queue}")
    produced = artemis_py("producer", *where, "--message-count", "5")
    assert produced.returncode == 0, produced.stderr
    assert produced.stdout.startswith(f"Produced 5 messages to queue://{queue} in ")
    assert len(anycast_queue(node, queue)) == 5  # in the anycast queue of that name
    # No limit: it takes everything there is, until nothing came for a second.
    consumed = artemis_py("consumer", *where, "--message-count", "0", "--timeout", "1")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.startswith(f"Consumed 5 messages from queue://{queue} in ")
    assert anycast_queue(node, queue) == []


def numbered(consumer: Running) -> list[int]:
    """The producer's message numbers a ``--verbose`` consumer printed (warm-ups left out)."""
    return sorted(
        int(found[1])
        for line in consumer.lines
        if (found := re.search(r"test message: (\d+)$", line))
    )


def test_a_topic_reaches_every_consumer(node: BrokerProcess) -> None:
    topic = unique("prices")
    consumers = [
        Running(
            "consumer",
            "--url",
            url_of(node),
            "--destination",
            f"topic://{topic}",
            "--message-count",
            "0",
            "--verbose",
        )
        for _ in range(2)
    ]
    try:

        async def warm_up() -> None:
            async with open_stomp_connection("127.0.0.1", node.port) as conn:
                await conn.send(f"topic://{topic}", "warm-up")

        def subscribed() -> bool:  # a topic keeps nothing: send until both got one
            trio.run(warm_up)
            return all(c.count("received ") for c in consumers)

        wait_for(subscribed, 20, interval=0.2, message="both consumers subscribed")
        produced = artemis_py(
            "producer", "--url", url_of(node), "--destination", f"topic://{topic}",
            "--message-count", "5",
        )  # fmt: skip
        assert produced.returncode == 0, produced.stderr
        for c in consumers:
            wait_for(lambda c=c: len(numbered(c)) >= 5, message=lambda c=c: str(c.lines))
            c.process.send_signal(signal.SIGINT)
        results = [c.finish() for c in consumers]
    finally:
        for c in consumers:
            if c.process.poll() is None:
                c.process.kill()
    for c, (code, _, err) in zip(consumers, results, strict=True):
        assert code == 130, err  # stopped by the Ctrl-C, after taking every message
        assert numbered(c) == [1, 2, 3, 4, 5], c.lines


def test_producer_sleeps_between_messages(node: BrokerProcess) -> None:
    queue = unique("gentle")
    produced = artemis_py(
        "producer", "--url", url_of(node), "--destination", f"queue://{queue}",
        "--message-count", "4", "--sleep", "200",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    found = re.match(rf"Produced 4 messages to queue://{queue} in ([\d.]+) s", produced.stdout)
    assert found, produced.stdout
    assert float(found[1]) >= 0.6  # three sleeps of 200 ms between four messages
    assert len(anycast_queue(node, queue)) == 4


def test_ctrl_c_cuts_the_producer_s_sleep_short(node: BrokerProcess) -> None:
    queue = unique("gentle")
    producer = Running(
        "producer", "--url", url_of(node), "--destination", f"queue://{queue}",
        "--message-count", "3", "--sleep", "600000", "--verbose",
    )  # fmt: skip
    wait_for(lambda: producer.count("sent 1/3"), message="the first message sent")
    producer.process.send_signal(signal.SIGINT)  # during the ten-minute sleep
    code, lines, err = producer.finish(timeout=15)
    assert code == 130, err
    assert re.fullmatch(rf"Produced 1 message to queue://{queue} in .*, interrupted", lines[-1])
    assert len(anycast_queue(node, queue)) == 1


# -- perf and check --------------------------------------------------------------------------------


@pytest.mark.parametrize(("scheme", "copies"), [("queue", 1), ("topic", 2)])
def test_perf_counts_one_delivery_per_queue_message_and_one_per_topic_subscriber(
    node: BrokerProcess, tmp_path: Path, scheme: str, copies: int
) -> None:
    report_path = tmp_path / "perf.json"
    done = artemis_py(
        "perf", "--url", url_of(node), "--destination", f"{scheme}://{unique('perf')}",
        "--producers", "1", "--consumers", "2", "--duration", "1", "--warmup", "0",
        "--drain-timeout", "3", "--json", str(report_path),
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    totals = json.loads(report_path.read_text())["totals"]
    assert totals["sent"] > 0
    # Two consumers of a queue compete; two of a topic get a copy each.
    assert totals["received"] == copies * totals["sent"], totals
    assert totals["complete"]
    assert totals["drained"]


def test_check_uses_the_anycast_queue_of_that_name(node: BrokerProcess) -> None:
    queue = unique("check")

    async def foreign() -> None:  # someone else's message, in the queue before the check
        async with open_stomp_connection("127.0.0.1", node.port) as conn:
            await conn.send(f"queue://{queue}", "not the checker's")

    trio.run(foreign)
    done = artemis_py(
        "check", "--url", url_of(node), "--queue", queue, "--count", "50", "--timeout", "3",
        "--json", timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert (report["sent"], report["receipted"], report["received"]) == (50, 50, 50)
    assert (report["lost"], report["foreign"]) == (0, 1)
    assert anycast_queue(node, queue) == []


def test_check_on_a_three_node_cluster_of_acceptors_without_prefixes(
    cluster: Callable[..., Cluster],  # noqa: F811 - the imported fixture
) -> None:
    nodes = cluster(3, prefixes=False)
    urls = [url_of(n) for n in nodes]
    done = artemis_py(
        "check", "--url", *urls, "--queue", unique("check"), "--count", "150",
        "--timeout", "5", "--json", timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert (report["receipted"], report["received"], report["lost"]) == (150, 150, 0), report
    assert report["unexpected"] == 0
    assert all(n["sent"] > 0 for n in report["nodes"]), report["nodes"]


def test_a_routing_type_in_small_letters_is_refused_as_in_artemis(node: BrokerProcess) -> None:
    client = node.client()
    try:
        client.send(unique("orders"), "x", receipt=False, **{"destination-type": "anycast"})
        error = client.wait_error()
    finally:
        client.close()
    assert error.headers["message"] == "unknown routing type 'anycast' (ANYCAST or MULTICAST)"


def test_a_routing_type_header_wins_over_a_prefix_as_in_artemis(node: BrokerProcess) -> None:
    name = unique("mixed")
    client = node.client()
    try:  # nobody subscribed: as a multicast send, this message would be dropped
        client.send(f"/topic/{name}", "kept", **{"destination-type": "ANYCAST"})
    finally:
        client.close()
    # The prefixed acceptor strips /topic/ (the address is the name); the other keeps it.
    assert anycast_queue(node, name if node.prefixes else f"/topic/{name}") == ["kept"]
