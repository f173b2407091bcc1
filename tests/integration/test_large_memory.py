"""Large messages by reference (docs/large-messages.md, "Memory"): once its file is durable
a queued large message keeps only a reference, so a backlog of them does not grow the
node's memory; consumers get the bodies streamed from the files. Real nodes, stomp.py."""

from __future__ import annotations

import pytest

from .conftest import BrokerProcess, unique, wait_for
from .test_large_messages import PERSISTENT, body_of, files

MiB = 1 << 20


def rss(node: BrokerProcess) -> int:
    """The node process's resident set size in bytes (Linux /proc)."""
    assert node.process is not None
    with open(f"/proc/{node.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/<pid>/status")


def receive_in_order(consumer, count: int, seed: str, size: int) -> None:
    """Check ``count`` messages arrive byte-identical and in order, in batches (the test
    process does not hold the whole backlog either)."""
    listener = consumer.listener
    checked = 0
    while checked < count:
        want = min(count, checked + 10) - checked
        wait_for(
            lambda n=want: len(listener.messages) >= n, 60, message=f"message {checked + want}"
        )
        with listener.lock:
            batch = listener.messages[:want]
            del listener.messages[:want]
        for message in batch:
            assert message.headers["n"] == str(checked)
            assert message.body == body_of(size, f"{seed}{checked:04d}")
            checked += 1


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_getaffinity"), reason="Linux /proc")
def test_a_backlog_of_large_messages_is_not_held_in_memory(make_broker, clients):
    node = make_broker(persistence=True)
    q = unique("/queue/backlog")
    producer = clients(node)
    # Warm up (allocator pools, code paths) with a few large messages sent and consumed.
    for i in range(3):
        producer.send(q, body_of(MiB, f"w{i:04d}"), **PERSISTENT, n=str(i))
    warm = clients(node)
    warm.subscribe(q)
    receive_in_order(warm, 3, "w", MiB)
    warm.disconnect()
    wait_for(lambda: files(node) == [], message="the warm-up files to go")
    before = rss(node)
    count = 200
    for i in range(count):
        producer.send(q, body_of(MiB, f"b{i:04d}"), **PERSISTENT, n=str(i))
    grown = rss(node) - before
    assert len(files(node)) == count
    # 200 MiB of bodies are on disk, not in memory (measured: a few MiB).
    assert grown < 60 * MiB, f"the node grew by {grown / MiB:.1f} MiB"
    consumer = clients(node)
    consumer.subscribe(q)
    receive_in_order(consumer, count, "b", MiB)
    assert rss(node) - before < 60 * MiB  # streamed in chunks, not read whole
    wait_for(lambda: files(node) == [], message="the files to go after the auto-acks")
