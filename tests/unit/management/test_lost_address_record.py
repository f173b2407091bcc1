"""A queue whose address record is gone from the bindings journal (a damaged or hand-edited
journal) comes back with its address made again and its messages: the node starts, says
so once, and the next start finds the address stored."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_management_operations import BROKER_XML

from artemis_py.broker.message import Message
from artemis_py.config import RoutingType, parse_config
from artemis_py.node import open_broker
from artemis_py.storage import Op


async def test_a_queue_without_its_address_record_is_recovered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = parse_config(BROKER_XML)
    async with open_broker(config, instance_dir=tmp_path) as node:
        broker = node.broker
        queue = broker.create_queue("orders", "orders", RoutingType.ANYCAST)
        message = Message(message_id=broker.next_id(), address="orders", body=b"kept", durable=True)
        await broker.send(message, [queue]).settled()
        address = broker.post_office.address("orders")
        assert address is not None
        storage = broker.persistence.storage
        assert storage is not None
        await storage.bindings.append([Op.delete(address.id)])
        node.stop()
    with caplog.at_level(logging.WARNING):
        async with open_broker(config, instance_dir=tmp_path) as node:
            recovered = node.broker.queue("orders")
            assert recovered is not None
            assert len(recovered.messages) == 1
            assert RoutingType.ANYCAST in node.broker.post_office.addresses["orders"].routing_types
            node.stop()
    assert "has no record in the bindings journal" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        async with open_broker(config, instance_dir=tmp_path) as node:
            assert node.broker.queue("orders") is not None
            node.stop()
    assert "has no record" not in caplog.text  # stored the first time
