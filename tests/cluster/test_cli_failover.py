"""``artemis-py producer|consumer|perf`` on cluster URLs against a real three-node cluster:
the producer and the consumer fail over when their node scales down (SIGTERM) and nothing
is lost or counted twice; perf spreads its connections over the members it learns from one
node."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from .conftest import CLUSTER_ADDRESS_SETTINGS, Running, node_command, stays, unique, wait_for

SCALE_DOWN = "<ha-policy><primary-only><scale-down/></primary-only></ha-policy>"
# The messages follow the consumer to whichever node it moves to (the scale-down target is
# the lowest node id, not the next node of the URL).
REDISTRIBUTE = CLUSTER_ADDRESS_SETTINGS.replace(
    "<max-delivery-attempts>3</max-delivery-attempts>",
    "<max-delivery-attempts>3</max-delivery-attempts>\n"
    "        <redistribution-delay>0</redistribution-delay>",
)
assert REDISTRIBUTE != CLUSTER_ADDRESS_SETTINGS
FAILOVER = "ha=true&retryInterval=50&maxRetryInterval=200&reconnectAttempts=100"


def failover_url(nodes: Any, *, topology: bool = True) -> str:
    """The nodes in order, first-element: the first node first, then the next one up."""
    addresses = ",".join(f"tcp://127.0.0.1:{n.port}" for n in nodes)
    return (
        f"({addresses})?{FAILOVER}&connectionLoadBalancingPolicyClassName=first-element"
        f"&useTopologyForLoadBalancing={'true' if topology else 'false'}"
    )


def consume_all(clients: Any, nodes: Any, queue: str, expected: int | None) -> Counter[str]:
    """Every message left in ``queue`` on ``nodes`` (``expected`` of them; None: however
    many, once nothing more arrives), by body."""
    consumers = [clients(node) for node in nodes]
    for consumer in consumers:
        consumer.subscribe(f"/queue/{queue}")

    def bodies() -> list[str]:
        return [m.body for c in consumers for m in c.messages]

    if expected is None:
        for consumer in consumers:
            consumer.sync()
        expected = len(bodies())
    wait_for(lambda: len(bodies()) >= expected, 30, message=lambda: f"{len(bodies())} found")
    stays(lambda: len(bodies()) == expected, 1.0, message=lambda: f"{len(bodies())} found")
    return Counter(bodies())


def test_producer_fails_over_across_a_scale_down(cluster: Any, clients: Any) -> None:
    nodes = cluster(3, node_options={i: {"extra_core": SCALE_DOWN} for i in range(3)})
    queue = unique("cli-produced")
    count = 3000
    producer = Running(
        "producer", "--url", failover_url(nodes), "--destination", f"queue://{queue}",
        "--message-count", str(count), "--verbose",
    )  # fmt: skip
    wait_for(lambda: producer.count("sent ") >= 200, 30, message="the producer's first sends")
    nodes[0].stop()  # scale-down: its messages move to node 1
    code, _, err = producer.finish(60)
    assert code == 0, err
    assert producer.lines[-1].startswith(f"Produced {count} messages to queue://{queue}")
    moves = err.splitlines()
    assert len(moves) == 1, err  # one line, for the one move
    assert moves[0].startswith(
        f"artemis-py producer: failed over from tcp://127.0.0.1:{nodes[0].port} to "
    )
    # Every receipted message once, across the cluster: nothing lost, nothing stored twice.
    stored = consume_all(clients, nodes[1:], queue, count)
    assert set(stored) == {f"test message: {n}" for n in range(1, count + 1)}
    assert max(stored.values()) == 1


def test_consumer_fails_over_across_a_scale_down(cluster: Any, clients: Any) -> None:
    settings = {"extra_core": SCALE_DOWN, "address_settings": REDISTRIBUTE}
    nodes = cluster(3, node_options=dict.fromkeys(range(3), settings))
    queue = unique("cli-consumed")
    count = 400
    filler = clients(nodes[0])
    for number in range(count):
        filler.send(f"/queue/{queue}", f"m{number}", persistent="true")
    filler.close()
    # Without the topology, first-element moves it to node 1.
    consumer = Running(
        "consumer", "--url", failover_url(nodes, topology=False), "--destination",
        f"queue://{queue}", "--message-count", str(count), "--timeout", "20",
        "--ack-mode", "client-individual", "--verbose",
    )  # fmt: skip
    wait_for(lambda: consumer.count("received ") >= 40, 30, message="the consumer's first")
    nodes[0].stop()
    code, _, err = consumer.finish(60)
    assert code == 0, err
    moved = f"from tcp://127.0.0.1:{nodes[0].port} to tcp://127.0.0.1:{nodes[1].port}"
    assert err.startswith(f"artemis-py consumer: failed over {moved} after: "), err
    summary = consumer.lines[-1]
    assert summary.startswith(f"Consumed {count} messages from queue://{queue}"), summary
    assert consumer.count("received ") == count
    # Nothing is lost. The one message in flight at the move (consumer-window-size 0) may
    # come again (moved by the scale-down as a new message: not marked redelivered) and be
    # counted twice, leaving one behind: at most one.
    left = consume_all(clients, nodes[1:], queue, expected=None)
    assert sum(left.values()) <= 1


def test_perf_spreads_over_the_members_it_learns(cluster: Any, tmp_path: Path) -> None:
    nodes = cluster(3)
    report_path = tmp_path / "perf.json"
    command, env = node_command()
    url = f"(tcp://127.0.0.1:{nodes[0].port})?{FAILOVER}"  # one node named: it tells the rest
    result = subprocess.run(
        [
            *command, "perf", "--url", url, "--destination", f"queue://{unique('perf')}",
            "--producers", "3", "--consumers", "3", "--processes", "2", "--max-pending", "4",
            "--message-size", "128", "--duration", "1.5", "--warmup", "0.5",
            "--json", str(report_path),
        ],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    members = {f"tcp://127.0.0.1:{node.port}" for node in nodes}
    # Round robin over the three members: each node got one producer and one consumer.
    assert report["connections"] == dict.fromkeys(sorted(members), 2)
    assert set(report["nodes"]) == members
    assert all(counts["sent"] > 0 for counts in report["nodes"].values())
    totals = report["totals"]
    assert totals["complete"]
    assert totals["sent"] == totals["receipted"] == totals["received"]
    assert report["failover"] == {"failovers": 0, "resends": 0}
    assert "failover: 0 failover(s), 0 send(s) resent" in result.stdout
