"""The management API's create operations wait for their bindings-journal records
(management/operations.py): on an in-process node with a real journal whose waits are held
back, so that "answered before durable" shows, which a kill -9 of a real process cannot
show reliably (the writer thread is faster than an HTTP round trip)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from artemis_py.config import RoutingType, parse_config
from artemis_py.management import operations
from artemis_py.management.operations import QueueRequest
from artemis_py.node import Node, open_broker
from conftest import wait_for

BROKER_XML = """\
<configuration xmlns="urn:activemq">
   <core xmlns="urn:activemq:core">
      <persistence-enabled>true</persistence-enabled>
      <journal-directory>data/journal</journal-directory>
      <bindings-directory>data/bindings</bindings-directory>
      <paging-directory>data/paging</paging-directory>
      <large-messages-directory>data/largemessages</large-messages-directory>
   </core>
</configuration>
"""


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    async with open_broker(parse_config(BROKER_XML), instance_dir=tmp_path) as started:
        yield started
        started.stop()


async def held_back(
    node: Node, monkeypatch: pytest.MonkeyPatch, create: Callable[[], Awaitable[Any]]
) -> None:
    """Run ``create`` while the bindings journal's waits are held: it must be waiting for
    the journal's latest ticket (the records it made), and finish once released."""
    storage = node.broker.persistence.storage
    assert storage is not None
    journal = storage.bindings
    real_wait = journal.wait
    waited: list[int] = []
    release = trio.Event()

    async def wait(ticket: int) -> None:
        waited.append(ticket)
        await release.wait()
        await real_wait(ticket)

    monkeypatch.setattr(journal, "wait", wait)
    done: list[Any] = []

    async def run() -> None:
        done.append(await create())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await wait_for(lambda: waited or done, message="the create to wait or finish")
        assert not done, "answered before its bindings record was durable"
        assert waited == [journal.last_ticket]
        release.set()
    assert done


async def test_creating_a_queue_waits_until_its_record_is_durable(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = QueueRequest(name="orders", address="orders", routing_type=RoutingType.ANYCAST)
    await held_back(node, monkeypatch, lambda: operations.create_queue(node, request))
    assert node.broker.queue("orders") is not None


async def test_creating_an_address_waits_until_its_record_is_durable(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    routing = {RoutingType.MULTICAST}
    await held_back(node, monkeypatch, lambda: operations.create_address(node, "prices", routing))
    assert node.broker.post_office.address("prices") is not None
