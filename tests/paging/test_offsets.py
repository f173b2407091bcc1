"""Reading by offset on queues that page: browse, listing and acknowledgeUpTo cover the
messages in page files (page records carry offsets), through depaging, restarts and kill -9.

The ``paged.#`` addresses hold about 19 messages of 1000 bytes in memory; after that
everything goes to 16 KiB pages (about 15 a page) and each queue depages 10 at a time.
"""

from __future__ import annotations

import pytest
import trio

from artemis_py.client.offset_reader import acknowledge_up_to, browse, list_streams
from integration.conftest import unique, wait_for
from integration.test_offsets import offsets, read_all, read_while_producing, with_client

from .conftest import page_files, take_acking
from .test_page_policy import consume, send_numbered


def seqs(messages) -> list[int]:
    return [int(m.get("seq")) for m in messages]


def take_some(clients, node, destination: str, count: int) -> list[int]:
    """A consumer that takes and acknowledges ``count`` messages, one at a time, then leaves
    (what it had in flight goes back)."""
    c = clients(node)
    c.subscribe(destination, ack="client-individual", **{"consumer-window-size": "0"})
    got = take_acking(c, count)
    c.disconnect()
    return got


def test_browse_in_chunks_covers_memory_and_pages_while_depaging(paged_node, clients):
    name = unique("paged.chunks")
    q = f"/queue/{name}"
    send_numbered(clients(paged_node), q, 100)
    assert len(page_files(paged_node)) >= 4
    whole, _ = read_all(paged_node, name)
    assert seqs(whole) == list(range(100))
    assert offsets(whole) == sorted(set(offsets(whole)))

    async def chunks(conn):
        found = []
        position = 0
        taken: list[int] = []
        while True:
            messages, end = await browse(conn, name, start=position, limit=7)
            found += messages
            if end.next >= end.end:
                return found, taken
            position = end.next
            # A consumer takes the oldest three between chunks: the queue depages.
            taken += await trio.to_thread.run_sync(take_some, clients, paged_node, q, 3)

    chunked, taken = with_client(paged_node, chunks)
    assert taken == list(range(len(taken)))
    assert len(taken) > 30
    assert offsets(chunked) == offsets(whole)
    assert seqs(chunked) == list(range(100))
    left, _ = read_all(paged_node, name)
    assert seqs(left) == list(range(len(taken), 100))


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "sigkill"])
def test_paged_messages_keep_their_offsets_through_a_restart(paged_node, clients, crash):
    name = unique("paged.kept")
    q = f"/queue/{name}"
    send_numbered(clients(paged_node), q, 60)
    before, _ = read_all(paged_node, name)
    assert seqs(before) == list(range(60))
    assert page_files(paged_node)
    paged_node.restart(crash=crash)
    after, _ = read_all(paged_node, name, limit=11)
    assert offsets(after) == offsets(before)
    assert seqs(after) == list(range(60))
    # Consumed from memory and pages, with the offsets they were browsed with.
    assert consume(clients, paged_node, q, 60) == list(range(60))


def test_listing_counts_paged_messages_and_their_low(paged_node, clients):
    name = unique("paged.listed")
    q = f"/queue/{name}"
    send_numbered(clients(paged_node), q, 60)
    messages, _ = read_all(paged_node, name)
    by_seq = dict(zip(seqs(messages), offsets(messages), strict=True))

    def listing():
        async def work(conn):
            return (await list_streams(conn, name)).streams[0]

        return with_client(paged_node, work)

    stream = listing()
    assert (stream.count, stream.low) == (60, by_seq[0])
    assert take_some(clients, paged_node, q, 25) == list(range(25))
    stream = listing()
    assert (stream.count, stream.low) == (35, by_seq[25])


def test_acknowledge_up_to_into_the_pages_is_durable_and_frees_them(paged_node, clients):
    name = unique("paged.acked")
    q = f"/queue/{name}"
    send_numbered(clients(paged_node), q, 150)
    messages, _ = read_all(paged_node, name)
    cut = offsets(messages)[120]
    pages_before = len(page_files(paged_node))
    assert pages_before >= 7

    async def ack(conn):
        stream = messages[0].get("offset-stream")
        await acknowledge_up_to(conn, name, stream, cut)
        await acknowledge_up_to(conn, name, stream, cut)  # idempotent
        return (await list_streams(conn, name)).streams[0]

    listed = with_client(paged_node, ack)
    assert (listed.count, listed.low) == (30, cut)
    # No consumer: the pages wholly below the cut complete and go all the same.
    wait_for(
        lambda: len(page_files(paged_node)) <= pages_before - 5,
        10,
        message=lambda: f"pages deleted: {len(page_files(paged_node))} of {pages_before} left",
    )
    paged_node.restart(crash=True)  # the RECEIPT meant durable
    left, _ = read_all(paged_node, name)
    assert seqs(left) == list(range(120, 150))
    assert offsets(left) == offsets(messages)[120:]
    assert consume(clients, paged_node, q, 30) == list(range(120, 150))
    wait_for(lambda: len(page_files(paged_node)) <= 1, 10, message="every page deleted")
    assert " ERROR " not in paged_node.log(since_start=True)


def test_a_transaction_that_pages_gets_its_offsets_at_commit(paged_node, clients):
    name = unique("paged.tx")
    q = f"/queue/{name}"
    producer = clients(paged_node)
    send_numbered(producer, q, 30)  # paging from here on
    producer.begin("t1")
    send_numbered(producer, q, 3, start=100, transaction="t1", receipt=False)
    send_numbered(producer, q, 2, start=30)
    producer.commit("t1")
    messages, _ = read_all(paged_node, name, limit=4)
    assert seqs(messages) == [*range(32), 100, 101, 102]
    assert offsets(messages) == sorted(offsets(messages))
    paged_node.restart(crash=True)
    again, _ = read_all(paged_node, name)
    assert offsets(again) == offsets(messages)


def test_a_reader_misses_no_paged_message_while_connections_pipeline(paged_node, clients):
    """Three producers pipeline sends into the pages while a reader keeps browsing from
    where it ended: it sees every message exactly once (the stable end never passes a
    paged message whose send has not settled)."""
    name = unique("paged.busy")
    per_producer = 400
    # The address pages before the producers start (its page store exists).
    send_numbered(clients(paged_node), f"/queue/{name}", 30)
    wait_for(lambda: page_files(paged_node), 10, message="page files")
    producers = [clients(paged_node) for _ in range(3)]

    def produce(index: int) -> None:
        for i in range(per_producer):
            producers[index].send(
                f"/queue/{name}", "x" * 1000, receipt=False, persistent="true", seq=f"{index}-{i}"
            )
        producers[index].sync()

    seen = read_while_producing(paged_node, name, produce, 3 * per_producer + 30, limit=37)
    assert len(page_files(paged_node)) >= 10
    assert len(seen) == 3 * per_producer + 30
    assert offsets(seen) == sorted(set(offsets(seen)))
    tags = [m.get("seq") for m in seen[30:]]
    assert sorted(tags) == sorted(f"{p}-{i}" for p in range(3) for i in range(per_producer))
