"""A move that the store refuses (a redistribution's or scale-down's transaction raising
StorageError) leaves the queue as it was: the references back at the head, none counted as
delivering."""

from __future__ import annotations

import pytest

from artemis_py.broker.broker import Broker
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.sending import Transaction
from artemis_py.broker.store import MemoryStore
from artemis_py.config import RoutingType, parse_config
from artemis_py.exceptions import StorageError

CONFIG = """<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
<persistence-enabled>true</persistence-enabled><security-enabled>false</security-enabled>
</core></configuration>"""


async def test_a_refused_redistribution_gives_the_references_back_once() -> None:
    broker = Broker(parse_config(CONFIG, "broker.xml", environ={}), Persistence(MemoryStore(), "n"))
    broker.recover()
    queue = broker.create_queue("q", "q", RoutingType.ANYCAST)
    for n in range(3):
        message = broker.new_message("q", body=b"%d" % n, routing_type=RoutingType.ANYCAST)
        await broker.send(message, broker.route(message)).settled()
    refs = list(queue.messages)

    def refuse(tx: Transaction, **_: object) -> None:
        raise StorageError("the journal is closed")

    broker.sending.commit = refuse  # type: ignore[method-assign]
    with pytest.raises(StorageError):
        broker.redistribute([(ref, None) for ref in refs])
    assert (queue.delivering, list(queue.messages), queue.message_count) == (0, refs, 3)
