"""Expiry in the broker core (no sockets; the in-memory store): the expiration routing gives
a message by its address's expiry delays, the expiry and dead-letter queues auto-created per
original address, and send-to-dla-on-no-route."""

from __future__ import annotations

import pytest

from artemis_py.broker.broker import Broker
from artemis_py.broker.expiry import apply_expiry_delays, expiry_delays_configured
from artemis_py.broker.message import Message, MessageReference, now_ms
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.config import AddressSettings, BrokerConfig, RoutingType, parse_config
from artemis_py.config.parse import default_config

NODE = "0123456789abcdef"
ANY, MULTI = RoutingType.ANYCAST, RoutingType.MULTICAST
NOW = 1_000_000
HOUR = 3_600_000


def config(settings: str, addresses: str = "") -> BrokerConfig:
    return parse_config(
        f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
        <persistence-enabled>true</persistence-enabled><security-enabled>false</security-enabled>
        <address-settings>{settings}</address-settings>
        <addresses>{addresses}</addresses></core></configuration>""",
        "broker.xml",
        environ={},
    )


def started(cfg: BrokerConfig) -> Broker:
    from artemis_py.broker.store import MemoryStore

    broker = Broker(cfg, Persistence(MemoryStore(messages=True), NODE))
    broker.recover()
    return broker


async def send(
    broker: Broker, address: str, routing: RoutingType = ANY, **fields: object
) -> Message:
    message = broker.new_message(
        address, body=b"body", routing_type=routing, durable=True, **fields
    )
    await broker.send(message, broker.route(message)).settled()
    return message


def queue_of(broker: Broker, name: str) -> Queue:
    queue = broker.queue(name)
    assert queue is not None, name
    return queue


# --- expiry delays ----------------------------------------------------------------------------


def expiring(expiration: int, **settings: object) -> int:
    message = Message(1, "orders", expiration=expiration)
    apply_expiry_delays(message, AddressSettings(**settings), NOW)  # type: ignore[arg-type]
    return message.expiration


@pytest.mark.parametrize(
    ("expiration", "settings", "expected"),
    [
        # expiry-delay: only for a message sent without an expiration; min/max then unused.
        (0, {"expiry_delay": 500}, NOW + 500),
        (NOW + HOUR, {"expiry_delay": 500}, NOW + HOUR),
        (NOW + HOUR, {"expiry_delay": 500, "max_expiry_delay": 10}, NOW + HOUR),
        (0, {"expiry_delay": 0}, NOW),
        # Without an expiration: max if set, else min.
        (0, {"max_expiry_delay": 900, "min_expiry_delay": 100}, NOW + 900),
        (0, {"min_expiry_delay": 100}, NOW + 100),
        # With one: brought down to max, up to min, else kept.
        (NOW + HOUR, {"max_expiry_delay": 900, "min_expiry_delay": 100}, NOW + 900),
        (NOW + 50, {"max_expiry_delay": 900, "min_expiry_delay": 100}, NOW + 100),
        (NOW + 500, {"max_expiry_delay": 900, "min_expiry_delay": 100}, NOW + 500),
        # no-expiry wins over everything.
        (NOW + 5, {"no_expiry": True, "expiry_delay": 500}, 0),
        (0, {"no_expiry": True, "max_expiry_delay": 500}, 0),
        # Nothing set: the message's own.
        (0, {}, 0),
        (NOW + 5, {}, NOW + 5),
    ],
)
def test_expiry_delays_as_artemis_applies_them(
    expiration: int, settings: dict[str, object], expected: int
) -> None:
    assert expiring(expiration, **settings) == expected


def test_routing_looks_only_when_some_setting_sets_a_delay() -> None:
    assert not expiry_delays_configured(default_config())
    assert not started(default_config()).sending.expiry_delays
    cfg = config(
        "<address-setting match='x'><min-expiry-delay>5</min-expiry-delay></address-setting>"
    )
    assert expiry_delays_configured(cfg)


async def test_a_send_gets_its_address_expiry_delay() -> None:
    broker = started(
        config(
            "<address-setting match='timed.#'><expiry-delay>60000</expiry-delay></address-setting>"
            "<address-setting match='capped'><max-expiry-delay>1000</max-expiry-delay>"
            "</address-setting>"
        )
    )
    before = now_ms()
    timed = await send(broker, "timed.a")
    assert before + 60000 <= timed.expiration <= now_ms() + 60000
    assert (await send(broker, "plain")).expiration == 0
    capped = await send(broker, "capped", expiration=now_ms() + HOUR)
    assert capped.expiration <= now_ms() + 1000
    # What the queue holds is the message as routed.
    assert queue_of(broker, "timed.a").messages[0].message.expiration == timed.expiration


# --- expiry and dead-letter resources ---------------------------------------------------------

RESOURCES = """
<address-setting match="#">
  <expiry-address>EXP</expiry-address>
  <auto-create-expiry-resources>true</auto-create-expiry-resources>
  <dead-letter-address>DLA</dead-letter-address>
  <auto-create-dead-letter-resources>true</auto-create-dead-letter-resources>
  <dead-letter-queue-suffix>.dead</dead-letter-queue-suffix>
  <max-delivery-attempts>2</max-delivery-attempts>
</address-setting>
"""


def expire_in_delivery(broker: Broker, name: str) -> None:
    """Let a delivery find ``name``'s expired messages (a consumer with credit)."""

    class Taker:
        selector = None

        def has_credit(self) -> bool:
            return True

        def deliver(self, ref: MessageReference) -> None:
            raise AssertionError(f"an expired message was delivered: {ref}")

    queue = queue_of(broker, name)
    taker = Taker()
    queue.add_consumer(taker)
    queue.remove_consumer(taker)


async def test_an_expired_message_makes_its_address_queue_on_the_expiry_address() -> None:
    broker = started(config(RESOURCES))
    for address in ("orders", "invoices", "orders"):
        await send(broker, address, expiration=1)
    expire_in_delivery(broker, "orders")
    expire_in_delivery(broker, "invoices")
    await send(broker, "orders", expiration=now_ms() + HOUR)
    resource = queue_of(broker, "EXP.orders")
    assert (resource.address, resource.routing_type, resource.durable) == ("EXP", MULTI, True)
    assert resource.auto_created
    assert resource.filter is not None
    assert resource.filter.text == "_AMQ_ORIG_ADDRESS = 'orders'"
    copies = [ref.message for ref in resource.messages]
    assert len(copies) == 2
    assert all(m.address == "EXP" and m.expiration == 0 for m in copies)
    assert {m.property("_AMQ_ORIG_ADDRESS") for m in copies} == {"orders"}
    assert {m.property("_AMQ_ORIG_QUEUE") for m in copies} == {"orders"}
    assert all(int(m.property("_AMQ_ACTUAL_EXPIRY") or 0) > 1 for m in copies)
    assert len(queue_of(broker, "EXP.invoices").messages) == 1
    orders = queue_of(broker, "orders")
    assert (orders.messages_expired, orders.message_count) == (2, 1)


async def test_a_dead_letter_makes_its_address_queue_on_the_dead_letter_address() -> None:
    broker = started(config(RESOURCES))
    await send(broker, "orders")
    orders = queue_of(broker, "orders")
    for _ in range(2):
        ref = orders.messages.popleft()
        orders.delivering += 1
        ref.delivery_count += 1
        broker.cancel([ref])
    resource = queue_of(broker, "DLQ.orders.dead")
    assert resource.address == "DLA"
    assert resource.filter is not None
    assert resource.filter.text == "_AMQ_ORIG_ADDRESS = 'orders'"
    [copy] = [ref.message for ref in resource.messages]
    assert copy.property("_AMQ_ORIG_ADDRESS") == "orders"
    assert copy.property("_AMQ_ACTUAL_EXPIRY") is None
    assert (orders.messages_killed, orders.message_count) == (1, 0)


async def test_resources_go_beside_the_configured_queue_and_an_existing_one_is_kept() -> None:
    dla = "<address name='DLA'><anycast><queue name='DLA'/></anycast></address>"
    broker = started(config(RESOURCES, dla))
    await send(broker, "orders", expiration=1)
    await send(broker, "orders")
    orders = queue_of(broker, "orders")
    ref = orders.messages.pop()
    orders.delivering += 1
    ref.delivery_count = 2
    broker.cancel([ref])
    # The anycast DLA queue takes a copy and so does the (multicast) auto-created one.
    assert len(queue_of(broker, "DLA").messages) == 1
    assert len(queue_of(broker, "DLQ.orders.dead").messages) == 1
    dla_address = broker.post_office.address("DLA")
    assert dla_address is not None
    assert dla_address.routing_types == {ANY, MULTI}


async def test_without_auto_creation_an_address_without_queues_drops_the_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = started(
        config("<address-setting match='#'><expiry-address>EXP</expiry-address></address-setting>")
    )
    for _ in range(3):
        await send(broker, "orders", expiration=1)
    expire_in_delivery(broker, "orders")
    orders = queue_of(broker, "orders")
    assert (orders.messages_expired, orders.message_count) == (3, 0)
    assert broker.post_office.address("EXP") is None  # nothing made for a drop
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 1, "one warning per queue, not one per message"


async def test_the_expiry_address_own_expiry_is_not_a_resource() -> None:
    broker = started(config(RESOURCES))
    await send(broker, "EXP", MULTI)  # makes the address; nothing takes it
    assert broker.queue("EXP.EXP") is None


# --- send-to-dla-on-no-route ------------------------------------------------------------------

NO_ROUTE = """
<address-setting match="#">
  <dead-letter-address>DLA</dead-letter-address>
  <send-to-dla-on-no-route>true</send-to-dla-on-no-route>
  <auto-create-queues>false</auto-create-queues>
</address-setting>
<address-setting match="DLA"><expiry-delay>5000</expiry-delay></address-setting>
"""


async def test_a_message_no_queue_takes_goes_to_the_dead_letter_address() -> None:
    dla = "<address name='DLA'><anycast><queue name='DLA'/></anycast></address>"
    broker = started(config(NO_ROUTE, dla))
    sent = await send(broker, "nowhere", MULTI, expiration=now_ms() + HOUR)
    [ref] = queue_of(broker, "DLA").messages
    assert ref.message is sent
    assert (sent.address, sent.routing_type) == ("DLA", None)
    assert sent.property("_AMQ_ORIG_ADDRESS") == "nowhere"
    assert sent.property("_AMQ_ORIG_MESSAGE_ID") == str(sent.message_id)
    # Its expiration reset, then the dead-letter address's expiry delay applied.
    assert now_ms() < sent.expiration <= now_ms() + 5000


async def test_without_the_setting_or_a_dla_an_unrouted_message_goes_nowhere() -> None:
    dla = "<address name='DLA'><anycast><queue name='DLA'/></anycast></address>"
    broker = started(
        config(NO_ROUTE.replace("DLA</dead-letter-address>", "</dead-letter-address>"), dla)
    )
    await send(broker, "nowhere", MULTI)
    assert not queue_of(broker, "DLA").messages
    assert not started(config("", dla)).sending.dead_letters_unrouted


async def test_an_unrouted_message_does_not_make_the_dead_letter_address() -> None:
    broker = started(config(NO_ROUTE))
    await send(broker, "nowhere", MULTI)
    assert broker.post_office.address("DLA") is None
