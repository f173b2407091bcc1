"""The address and queue reaper in the broker core (no sockets; the in-memory store, a clock
the test moves): which queues and addresses a scan deletes, after how many scans and how
long, and what purge-on-no-consumers leaves (Artemis's reapAddresses and QueueManagerImpl)."""

from __future__ import annotations

from artemis_py.broker.broker import Broker
from artemis_py.broker.filter import Filter
from artemis_py.broker.message import MessageReference
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.broker.store import MemoryStore
from artemis_py.config import BrokerConfig, RoutingType, parse_config

NODE = "0123456789abcdef"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Consumer:
    selector: Filter | None = None

    def __init__(self) -> None:
        self.got: list[MessageReference] = []

    def has_credit(self) -> bool:
        return True

    def deliver(self, ref: MessageReference) -> None:
        self.got.append(ref)


def config(settings: str = "", extra: str = "") -> BrokerConfig:
    return parse_config(
        f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
        <persistence-enabled>true</persistence-enabled><security-enabled>false</security-enabled>
        {extra}
        <address-settings><address-setting match="#">{settings}</address-setting>
        </address-settings></core></configuration>""",
        "broker.xml",
        environ={},
    )


def started(settings: str = "", extra: str = "") -> tuple[Broker, Clock]:
    broker = Broker(config(settings, extra), Persistence(MemoryStore(messages=True), NODE))
    clock = Clock()
    broker.addresses.lifetimes.clock_ms = clock
    broker.recover()
    return broker, clock


async def send(broker: Broker, address: str, count: int = 1) -> None:
    for n in range(count):
        message = broker.new_message(address, body=b"%d" % n, routing_type=RoutingType.ANYCAST)
        await broker.send(message, broker.route(message)).settled()


def auto_created(broker: Broker, name: str) -> Queue:
    return broker.create_queue(name, name, RoutingType.ANYCAST, auto_created=True)


async def consume_and_leave(broker: Broker, queue: Queue) -> None:
    """A consumer comes, acknowledges what it gets, and leaves."""
    consumer = Consumer()
    queue.add_consumer(consumer)
    queue.deliver()
    if consumer.got:
        await broker.acknowledge(consumer.got).settled()
    queue.remove_consumer(consumer)
    pending = broker.queue_lost_consumer(queue)
    if pending is not None:
        await pending.settled()


def exists(broker: Broker, queue: str | None = None, address: str | None = None) -> bool:
    if queue is not None:
        return broker.queue(queue) is not None
    return broker.post_office.address(address or "") is not None


async def test_a_used_queue_goes_on_the_second_scan_and_its_address_one_scan_later() -> None:
    broker, _ = started()
    reaper = broker.address_queue_reaper
    queue = auto_created(broker, "orders")
    await send(broker, "orders", 2)
    await consume_and_leave(broker, queue)
    assert exists(broker, "orders")  # not at once: Artemis leaves it to the scan
    assert await reaper.scan() == 0  # swept
    assert await reaper.scan() == 1
    assert not exists(broker, "orders")
    assert exists(broker, address="orders")  # swept by that scan, after its queue went
    assert await reaper.scan() == 1
    assert not exists(broker, address="orders")


async def test_a_queue_nobody_used_stays_unless_the_usage_check_is_skipped() -> None:
    broker, clock = started()
    auto_created(broker, "idle")
    for _ in range(3):
        await broker.address_queue_reaper.scan()
    assert exists(broker, "idle")

    broker, clock = started(
        "<auto-delete-queues-skip-usage-check>true</auto-delete-queues-skip-usage-check>"
        "<auto-delete-queues-delay>5000</auto-delete-queues-delay>"
    )
    auto_created(broker, "idle")
    clock.now += 4999
    for _ in range(3):
        await broker.address_queue_reaper.scan()
    assert exists(broker, "idle")  # created under 5 s ago
    clock.now += 1
    await broker.address_queue_reaper.scan()
    await broker.address_queue_reaper.scan()
    assert not exists(broker, "idle")


async def test_the_delay_counts_from_the_last_consumer_leaving() -> None:
    broker, clock = started("<auto-delete-queues-delay>10000</auto-delete-queues-delay>")
    reaper = broker.address_queue_reaper
    queue = auto_created(broker, "slow")
    clock.now += 60_000  # a long life before does not count
    await consume_and_leave(broker, queue)
    clock.now += 9_999
    for _ in range(3):
        assert await reaper.scan() == 0
    clock.now += 1
    assert await reaper.scan() == 0  # swept now
    assert await reaper.scan() == 1
    assert not exists(broker, "slow")


async def test_a_consumer_coming_and_going_between_scans_restarts_the_sweep() -> None:
    broker, _ = started()
    reaper = broker.address_queue_reaper
    queue = auto_created(broker, "busy")
    await consume_and_leave(broker, queue)
    await reaper.scan()  # swept
    await consume_and_leave(broker, queue)
    assert await reaper.scan() == 0  # swept again, not deleted
    assert await reaper.scan() == 1


async def test_the_message_count_decides_whether_a_queue_with_messages_goes() -> None:
    for limit, deleted in (("0", False), ("2", False), ("3", True), ("-1", True)):
        broker, _ = started(
            f"<auto-delete-queues-message-count>{limit}</auto-delete-queues-message-count>"
        )
        queue = auto_created(broker, "q")
        await consume_and_leave(broker, queue)
        await send(broker, "q", 3)
        await broker.address_queue_reaper.scan()
        await broker.address_queue_reaper.scan()
        assert exists(broker, "q") is not deleted, limit


async def test_which_queues_are_auto_delete() -> None:
    settings = "<auto-delete-created-queues>{created}</auto-delete-created-queues>"
    declared = """<addresses><address name="conf"><anycast><queue name="conf"/></anycast>
        </address></addresses>"""
    for created in (False, True):
        broker, _ = started(settings.format(created=str(created).lower()), declared)
        made = broker.create_queue("made", "made", RoutingType.ANYCAST)  # as the API makes it
        for name in ("conf", "made"):
            queue = broker.queue(name)
            assert queue is not None
            await consume_and_leave(broker, queue)
        await consume_and_leave(broker, made)
        for _ in range(2):
            await broker.address_queue_reaper.scan()
        assert exists(broker, "conf")  # broker.xml's queues never go
        assert exists(broker, "made") is not created
    broker, _ = started("<auto-delete-queues>false</auto-delete-queues>")
    await consume_and_leave(broker, auto_created(broker, "kept"))
    for _ in range(3):
        await broker.address_queue_reaper.scan()
    assert exists(broker, "kept")


async def test_an_address_delay_and_its_usage_check() -> None:
    broker, clock = started("<auto-delete-addresses-delay>3000</auto-delete-addresses-delay>")
    reaper = broker.address_queue_reaper
    broker.resolve_address("never", RoutingType.ANYCAST, for_send=True)  # no queue ever
    queue = auto_created(broker, "a")
    await broker.delete_queue(queue).settled()
    assert exists(broker, address="a")  # the delay keeps it past the queue's deletion
    for _ in range(3):
        await reaper.scan()
    assert exists(broker, address="a")
    clock.now += 3000
    await reaper.scan()
    await reaper.scan()
    assert not exists(broker, address="a")
    assert exists(broker, address="never")  # never had a queue: not used

    broker, _ = started()
    queue = auto_created(broker, "b")
    await broker.delete_queue(queue).settled()
    assert not exists(broker, address="b")  # delay 0: goes with its last queue


async def test_the_initial_check_takes_empty_ones_at_once() -> None:
    broker, _ = started()
    auto_created(broker, "empty")
    full = auto_created(broker, "full")
    await send(broker, "full")
    broker.resolve_address("bare", RoutingType.ANYCAST, for_send=True)
    assert await broker.address_queue_reaper.scan(initial=True) == 3  # empty, its address, bare
    assert not exists(broker, "empty")
    assert not exists(broker, address="bare")
    assert exists(broker, "full")
    assert full.message_count == 1


async def test_purge_on_no_consumers_empties_the_queue_and_counts_kills() -> None:
    broker, _ = started("<default-purge-on-no-consumers>true</default-purge-on-no-consumers>")
    queue = auto_created(broker, "p")
    consumer = Consumer()
    queue.add_consumer(consumer)
    await send(broker, "p", 4)
    assert len(consumer.got) == 4
    queue.remove_consumer(consumer)
    broker.cancel(consumer.got)  # back in the queue, as when a session closes
    pending = broker.queue_lost_consumer(queue)
    assert pending is not None
    await pending.settled()
    assert (queue.message_count, queue.messages_killed, queue.delivering) == (0, 4, 0)


async def test_a_purge_on_no_consumers_queue_takes_nothing_without_a_consumer() -> None:
    # Artemis's queue drops such a message at routing (AMQ224149), to no other queue.
    broker, _ = started("<default-purge-on-no-consumers>true</default-purge-on-no-consumers>")
    queue = auto_created(broker, "p")
    await send(broker, "p", 2)
    assert (queue.message_count, queue.messages_added) == (0, 0)
    consumer = Consumer()
    queue.add_consumer(consumer)
    await send(broker, "p", 3)
    assert len(consumer.got) == 3


async def test_a_period_of_minus_one_runs_only_the_initial_check() -> None:
    broker, _ = started(extra="<address-queue-scan-period>-1</address-queue-scan-period>")
    auto_created(broker, "empty")
    await broker.address_queue_reaper.run()  # returns: no periodic scan
    assert broker.address_queue_reaper.scans == 1
    assert not exists(broker, "empty")
