"""The project's own clients across a shared-store takeover (real processes): the primary
is SIGKILLed under load and the clients carry on against the backup, losing nothing
receipted (docs/high-availability.md "Clients")."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from integration.conftest import Running

from .conftest import PairNode, unique, wait_for

Pair = Callable[..., tuple[PairNode, PairNode]]


def added(node: PairNode, queue: str) -> int:
    """Messages the queue took on ``node`` (0 before it exists)."""
    response = httpx.get(f"{node.web_url}/api/queues/{queue}", timeout=5)
    return int(response.json()["added"]) if response.status_code == 200 else 0


@pytest.mark.parametrize("form", ["pair-url", "two-urls"])
def test_check_loses_nothing_when_the_primary_is_killed(pair: Pair, form: str) -> None:
    primary, backup = pair(web=True)
    primary.start()
    backup.start_waiting()
    queue = unique("check")
    a, b = f"tcp://127.0.0.1:{primary.port}", f"tcp://127.0.0.1:{backup.port}"
    # One node whose producer and consumer follow the live side, or (as two nodes) one
    # producer and consumer per URL, each reconnecting to its own until it answers.
    urls = [f"({a},{b})"] if form == "pair-url" else [a, b]
    options = ("--duration", "4", "--rate", "100", "--timeout", "5", "--json")
    running = Running("check", "--url", *urls, "--queue", queue, *options)
    before = wait_for(lambda: added(primary, queue) >= 50 and added(primary, queue), 20, 0.05)

    primary.kill()
    backup.wait_live()
    code, lines, errors = running.finish(60)

    report = json.loads("\n".join(lines))
    assert "Traceback" not in errors, errors
    assert code == 0, (report, errors)
    assert (report["lost"], report["unexpected"], report["ok"]) == (0, 0, True)
    assert report["urls"] == urls
    # Sending went on against the backup after the kill.
    assert report["receipted"] >= before + 100, report
    assert report["received"] >= report["receipted"]


# Artemis's form for a primary/backup pair: both addresses, ha=true (here: retry every
# 50-200 ms, as long as it takes, until the backup opens its acceptor).
FAILOVER = "ha=true&retryInterval=50&maxRetryInterval=200&reconnectAttempts=-1"


def test_producer_and_consumer_fail_over_to_the_backup(pair: Pair) -> None:
    primary, backup = pair()
    primary.start()
    backup.start_waiting()
    url = f"(tcp://127.0.0.1:{primary.port},tcp://127.0.0.1:{backup.port})?{FAILOVER}"
    queue, count = unique("cli-pair"), 400
    destination = ("--url", url, "--destination", f"queue://{queue}", "--message-count")
    producer = Running(
        "producer", *destination, str(count), "--persistent", "--sleep", "5", "--verbose"
    )
    consumer = Running(
        "consumer", *destination, str(count), "--ack-mode", "client-individual",
        "--timeout", "20", "--verbose",
    )  # fmt: skip
    wait_for(lambda: producer.count("sent ") >= 100 and consumer.count("received ") >= 20, 30)

    primary.kill()
    backup.wait_live()
    code, _, err = producer.finish(60)
    assert code == 0, err
    assert producer.lines[-1].startswith(f"Produced {count} messages"), producer.lines[-1]
    assert f"failed over from tcp://127.0.0.1:{primary.port} to tcp://127.0.0.1:" in err, err
    code, lines, err = consumer.finish(60)
    assert code == 0, err
    assert "failed over from" in err, err
    assert consumer.count("received ") == count

    # Every message is either consumed or still on the backup: nothing lost. The one in
    # flight at the kill (consumer-window-size 0) may have been counted twice.
    consumed = {line.split(": ", 2)[2] for line in lines if line.startswith("received ")}
    left = backup.client()
    left.subscribe(f"/queue/{queue}")
    left.sync()
    remaining = set(left.bodies())
    left.close()
    assert consumed | remaining == {f"test message: {n}" for n in range(1, count + 1)}
    assert len(remaining) <= 1, remaining
