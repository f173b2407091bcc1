"""The limit holds from the first message: a pipelined burst to an address that has never
paged waits for its page store to be created instead of piling up in memory (issue 28)."""

from __future__ import annotations

import httpx
import pytest

from integration.conftest import encode_frame, unique

from .conftest import page_files, paging_settings, take_acking

LIMIT = 20 * 1024  # paging_settings' max-size-bytes
BODY = b"x" * 1000
COUNT = 400  # ~400 KB in one write, twenty times the limit
READ_PAGE_MESSAGES = 10  # paging_settings' max-read-page-messages
TX_SIZE = 4


def send_frame(q: str, seq: int, *headers: tuple[str, str]) -> bytes:
    return encode_frame(
        "SEND",
        [("destination", f"/queue/{q}"), ("persistent", "true"), ("seq", str(seq)), *headers],
        BODY,
    )


def plain(q: str) -> bytes:
    last = [("receipt", "last")]
    return b"".join(send_frame(q, i, *(last if i == COUNT - 1 else [])) for i in range(COUNT))


def transactions(q: str) -> bytes:
    """COUNT messages in transactions of TX_SIZE, the last COMMIT with the receipt."""
    frames = []
    for start in range(0, COUNT, TX_SIZE):
        tx = [("transaction", f"tx{start}")]
        frames.append(encode_frame("BEGIN", tx))
        frames += [send_frame(q, i, *tx) for i in range(start, start + TX_SIZE)]
        last = [("receipt", "last")] if start + TX_SIZE == COUNT else []
        frames.append(encode_frame("COMMIT", [*tx, *last]))
    return b"".join(frames)


@pytest.mark.parametrize(("burst_of", "per_frame"), [(plain, 1), (transactions, TX_SIZE)])
def test_a_pipelined_burst_pages_from_the_first_message_over_the_limit(
    make_broker, raw_clients, clients, burst_of, per_frame
):
    node = make_broker(persistence=True, web=True, address_settings=paging_settings())
    q = unique("paged.burst")
    raw = raw_clients(node)
    assert raw.connect().command == "CONNECTED"
    # Every frame in one write, nothing waited for but the receipt of the last: the node
    # reads them all while the address's page store is being created.
    burst = burst_of(q)
    raw.send_bytes(burst)
    reply = raw.read_until("RECEIPT", timeout=60)
    assert reply.get("receipt-id") == "last"

    view = httpx.get(f"{node.web_url}/api/addresses/{q}", timeout=30).json()
    queue = httpx.get(f"{node.web_url}/api/queues/{q}", timeout=30).json()
    assert queue["messages"] == COUNT, queue
    # Held in memory: the messages up to the frame that crossed the limit (one SEND, or the
    # sends of one COMMIT), and what the queue depaged since (max-read-page-messages, 10
    # here; depaged messages count). A message holds its body and headers, about 1.1 KB
    # here: 2 KB is a generous bound for one.
    in_memory = queue["messages"] - queue["paged"]
    assert in_memory <= LIMIT // len(BODY) + per_frame + READ_PAGE_MESSAGES, (view, queue)
    assert view["size_bytes"] <= LIMIT + (per_frame + READ_PAGE_MESSAGES) * 2048, (view, queue)
    assert view["paging"] is True, view
    assert len(page_files(node)) > 3
    assert "paging starts" in node.log()

    consumer = clients(node)
    consumer.subscribe(f"/queue/{q}", ack="client-individual", **{"consumer-window-size": "-1"})
    assert take_acking(consumer, COUNT) == list(range(COUNT))
