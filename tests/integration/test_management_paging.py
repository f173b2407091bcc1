"""Purge and move through the management API on paged queues: an address over its
max-size-bytes (address-full-policy PAGE) keeps most of its messages in page files, and the
operations take them as they come into memory (management/operations.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from paging.conftest import page_files, paging_settings, take_acking

from .conftest import BrokerProcess, Client, stays, unique, wait_for

COUNT = 100
BODY = "x" * 1024  # 100 KiB in all: the address pages after 20 KiB, 16 KiB a page


@pytest.fixture
def node(make_broker: Callable[..., BrokerProcess]) -> BrokerProcess:
    return make_broker(persistence=True, web=True, address_settings=paging_settings())


def api(node: BrokerProcess, method: str, path: str, status: int = 200, **kwargs: Any) -> Any:
    response = httpx.request(method, f"{node.web_url}{path}", timeout=30, **kwargs)
    assert response.status_code == status, response.text
    return response.json()


def emptied(node: BrokerProcess, queue: str) -> bool:
    """Whether ``queue`` holds no message after a restart: empty, or gone (an empty
    auto-created queue is deleted at start, as Artemis deletes it)."""
    response = httpx.get(f"{node.web_url}/api/queues/{queue}", timeout=30)
    return response.status_code == 404 or response.json()["messages"] == 0


def pages(node: BrokerProcess, address: str) -> list[Path]:
    """The page files of ``address`` (its directory names it in address.txt)."""
    return [p for p in page_files(node) if (p.parent / "address.txt").read_text() == address]


def fill(node: BrokerProcess, client: Client, queue: str) -> None:
    """COUNT persistent messages numbered by ``seq``; most of them are paged."""
    for seq in range(COUNT):
        client.send(f"/queue/{queue}", BODY, persistent="true", seq=str(seq))
    client.sync()
    view = api(node, "GET", f"/api/queues/{queue}")
    assert view["messages"] == COUNT
    assert view["paged"] > COUNT // 2, view
    assert api(node, "GET", f"/api/addresses/{queue}")["paging"] is True
    assert len(pages(node, queue)) > 3


def test_purge_removes_paged_messages_and_frees_their_pages(
    node: BrokerProcess, clients: Callable[..., Client]
) -> None:
    q = unique("paged.purged")
    fill(node, clients(node), q)
    assert api(node, "POST", f"/api/queues/{q}/purge") == {"removed": COUNT, "remaining": 0}
    view = api(node, "GET", f"/api/queues/{q}")
    assert (view["messages"], view["paged"], view["added"]) == (0, 0, COUNT)
    # Every page is deleted but the one being written (as when consumers read them all).
    wait_for(lambda: len(pages(node, q)) <= 1, message=lambda: f"pages deleted: {pages(node, q)}")

    def address() -> tuple[bool, int]:
        view = api(node, "GET", f"/api/addresses/{q}")
        return view["paging"], view["size_bytes"]

    wait_for(lambda: address() == (False, 0), message=lambda: f"paging to stop: {address()}")
    # Nothing comes back after a restart either.
    node.restart(crash=True)
    assert emptied(node, q)
    consumer = clients(node)
    consumer.subscribe(f"/queue/{q}")
    stays(lambda: not consumer.messages, 0.3, message="no purged message delivered")


def test_move_hands_every_paged_message_over_once(
    node: BrokerProcess, clients: Callable[..., Client]
) -> None:
    source, target = unique("paged.from"), unique("paged.to")
    api(node, "POST", "/api/queues", 201, json={"name": target})
    fill(node, clients(node), source)
    assert api(node, "POST", f"/api/queues/{source}/move", json={"to": target}) == {
        "moved": COUNT,
        "remaining": 0,
    }
    assert api(node, "GET", f"/api/queues/{source}")["messages"] == 0
    assert api(node, "GET", f"/api/queues/{target}")["messages"] == COUNT
    wait_for(
        lambda: len(pages(node, source)) <= 1,
        message=lambda: f"the source's pages deleted: {pages(node, source)}",
    )
    assert len(pages(node, target)) > 3  # the copies are paged on the target's address
    # After a crash each message is in exactly one of the two queues.
    node.restart(crash=True)
    assert emptied(node, source)
    consumer = clients(node)
    consumer.subscribe(f"/queue/{target}", ack="client-individual")
    assert take_acking(consumer, COUNT, receipt=False) == list(range(COUNT))
    stays(lambda: len(consumer.messages) == COUNT, 0.3, message="no message twice")
    assert api(node, "GET", f"/api/queues/{target}")["messages"] == 0
