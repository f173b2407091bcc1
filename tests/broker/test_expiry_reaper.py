"""The expiry reaper in the broker core (no sockets; the in-memory store): what a scan takes
out, what it leaves, that it yields on a big queue and stays right while others change the
queue, and its period."""

from __future__ import annotations

import trio
import trio.testing

from artemis_py.broker.broker import Broker
from artemis_py.broker.expiry_reaper import SCAN_CHUNK, ExpiryReaper
from artemis_py.broker.message import MessageReference, now_ms
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.broker.store import MemoryStore
from artemis_py.config import BrokerConfig, RoutingType, parse_config

NODE = "0123456789abcdef"
HOUR = 3_600_000
SETTINGS = """
<address-setting match="#">
  <expiry-address>EXP</expiry-address>
  <auto-create-expiry-resources>true</auto-create-expiry-resources>
</address-setting>
"""


def config(settings: str = SETTINGS, period: int = 30000) -> BrokerConfig:
    return parse_config(
        f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
        <persistence-enabled>true</persistence-enabled><security-enabled>false</security-enabled>
        <message-expiry-scan-period>{period}</message-expiry-scan-period>
        <address-settings>{settings}</address-settings></core></configuration>""",
        "broker.xml",
        environ={},
    )


def started(cfg: BrokerConfig | None = None) -> Broker:
    broker = Broker(cfg or config(), Persistence(MemoryStore(messages=True), NODE))
    broker.recover()
    return broker


async def fill(broker: Broker, address: str, expirations: list[int]) -> Queue:
    """Send one message per expiration (its body: its index) and return the queue."""
    pendings = []
    for n, expiration in enumerate(expirations):
        message = broker.new_message(
            address, body=b"%d" % n, routing_type=RoutingType.ANYCAST, expiration=expiration
        )
        pendings.append(broker.send(message, broker.route(message)))
    for pending in pendings:
        await pending.settled()
    queue = broker.queue(address)
    assert queue is not None
    return queue


def bodies(queue: Queue) -> list[bytes]:
    return [ref.message.body for ref in queue.messages]


async def test_a_scan_takes_out_what_expired_and_keeps_the_rest_in_order() -> None:
    broker = started()
    later = now_ms() + HOUR
    orders = await fill(broker, "orders", [1, later, 0, 1, later, 1])
    assert await broker.expiry_reaper.scan() == 3
    assert bodies(orders) == [b"1", b"2", b"4"]
    assert (orders.messages_expired, orders.message_count, orders.delivering) == (3, 3, 0)
    moved = broker.queue("EXP.orders")
    assert moved is not None
    assert bodies(moved) == [b"0", b"3", b"5"]
    assert {ref.message.property("_AMQ_ORIG_QUEUE") for ref in moved.messages} == {"orders"}
    assert await broker.expiry_reaper.scan() == 0  # nothing left to expire, nothing moved twice
    assert len(moved.messages) == 3


async def test_references_out_with_a_consumer_are_left_to_it() -> None:
    broker = started()
    orders = await fill(broker, "orders", [1, 1])
    delivered = orders.messages.popleft()  # (as a delivery takes it)
    orders.delivering += 1
    assert await broker.expiry_reaper.scan() == 1
    assert (orders.delivering, orders.message_count) == (1, 1)
    broker.acknowledge([delivered])
    assert orders.message_count == 0


async def test_without_an_expiry_address_expired_messages_are_dropped() -> None:
    broker = started(config(settings=""))
    orders = await fill(broker, "orders", [1] * 4)
    assert await broker.expiry_reaper.scan() == 4
    assert (orders.messages_expired, orders.message_count) == (4, 0)
    assert broker.post_office.address("EXP") is None


async def test_a_queue_on_its_own_expiry_address_is_not_scanned() -> None:
    broker = started(
        config("<address-setting match='#'><expiry-address>EXP</expiry-address></address-setting>")
    )
    exp = await fill(broker, "EXP", [1, 1])
    assert await broker.expiry_reaper.scan() == 0
    assert exp.message_count == 2


async def test_a_big_queue_is_scanned_in_chunks_and_changes_meanwhile_are_respected() -> None:
    broker = started()
    count = 3 * SCAN_CHUNK
    later = now_ms() + HOUR
    orders = await fill(broker, "orders", [1 if n % 2 else later for n in range(count)])
    scanning = trio.Event()

    def clock() -> int:  # read once a scan of the queue starts, before its snapshot
        scanning.set()
        return now_ms()

    reaper = ExpiryReaper(broker.post_office, broker.acks, broker.paging, 30000, clock)
    purged: list[MessageReference] = []
    turns = 0

    async def meanwhile() -> None:
        # Runs at the scan's first yield: purges ten expired references from the tail,
        # which the scan has in its snapshot; then counts the scan's further yields.
        nonlocal turns
        await scanning.wait()
        purged.extend(ref for ref in list(orders.messages)[-20:] if ref.message.expiration == 1)
        await broker.discard(purged).settled()
        while True:
            await trio.lowlevel.checkpoint()
            turns += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(meanwhile)
        await trio.testing.wait_all_tasks_blocked()  # (it waits for the scan)
        expired = await reaper.scan()
        nursery.cancel_scope.cancel()
    assert len(purged) == 10
    assert turns >= 2, "the scan must yield between chunks"
    assert expired == count // 2 - 10
    assert orders.messages_expired == expired
    assert orders.message_count == count // 2
    assert all(ref.message.expiration == later for ref in orders.messages)
    moved = broker.queue("EXP.orders")
    assert moved is not None
    assert len(moved.messages) == expired


async def test_the_reaper_runs_every_period(autojump_clock: trio.testing.MockClock) -> None:
    broker = started(config(period=500))
    orders = await fill(broker, "orders", [1])
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.expiry_reaper.run)
        await trio.sleep(0.4)
        assert orders.message_count == 1, "the first scan is one period after the start"
        await trio.sleep(0.2)
        assert orders.message_count == 0
        await fill(broker, "orders", [1])
        await trio.sleep(0.5)
        assert orders.message_count == 0
        assert broker.expiry_reaper.scans == 2
        nursery.cancel_scope.cancel()


async def test_a_period_of_minus_one_never_scans() -> None:
    broker = started(config(period=-1))
    reaper = broker.expiry_reaper
    assert isinstance(reaper, ExpiryReaper)
    with trio.move_on_after(1):
        await reaper.run()  # returns at once
    assert reaper.scans == 0
