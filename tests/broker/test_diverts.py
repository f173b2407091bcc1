"""Diverts in the broker core (no sockets; the in-memory store): what takes a copy, what
the copy is, and that a diverted send is stored, committed and recovered with its copies."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from artemis_py.broker.broker import Broker
from artemis_py.broker.diverting import Diverted, DivertingSending, compile_diverts
from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.sending import Sending, Transaction
from artemis_py.broker.store import MemoryStore
from artemis_py.config import BrokerConfig, ConfigFileError, RoutingType, parse_config
from artemis_py.config.parse import default_config

NODE = "0123456789abcdef"
ANY, MULTI = RoutingType.ANYCAST, RoutingType.MULTICAST

ADDRESSES = """
<addresses>
  <address name="orders"><anycast><queue name="orders"/></anycast></address>
  <address name="audit"><anycast><queue name="audit"/></anycast></address>
  <address name="both">
    <anycast><queue name="both-any"/></anycast>
    <multicast><queue name="both-multi"/></multicast>
  </address>
  <address name="a1"><anycast><queue name="a1"/></anycast></address>
  <address name="a2"><anycast><queue name="a2"/></anycast></address>
  <address name="a3"><anycast><queue name="a3"/></anycast></address>
</addresses>
"""


def config(diverts: str, addresses: str = ADDRESSES) -> BrokerConfig:
    return parse_config(
        f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
        <persistence-enabled>true</persistence-enabled><security-enabled>false</security-enabled>
        {addresses}<diverts>{diverts}</diverts></core></configuration>""",
        "broker.xml",
    )


def divert(name: str, address: str, to: str, extra: str = "") -> str:
    return (
        f'<divert name="{name}"><address>{address}</address>'
        f"<forwarding-address>{to}</forwarding-address>{extra}</divert>"
    )


def started(cfg: BrokerConfig, store: MemoryStore | None = None) -> Broker:
    broker = Broker(cfg, Persistence(store or MemoryStore(messages=True), NODE))
    broker.recover()
    return broker


async def send(
    broker: Broker,
    address: str,
    routing: RoutingType | None = None,
    *,
    durable: bool = True,
    **props: str,
) -> Message:
    message = Message(
        broker.next_id(),
        address,
        body=b"body",
        properties=tuple(props.items()),
        routing_type=routing,
        durable=durable,
    )
    await broker.send(message, broker.route(message)).settled()
    return message


def held(broker: Broker, name: str) -> list[Message]:
    queue = broker.queue(name)
    assert queue is not None, name
    return [ref.message for ref in queue.messages]


def counts(broker: Broker, *names: str) -> list[int]:
    return [len(held(broker, name)) for name in names]


def test_a_node_without_diverts_sends_as_before() -> None:
    broker = started(default_config())
    assert type(broker.sending) is Sending


async def test_a_non_exclusive_divert_copies_and_the_original_stays() -> None:
    broker = started(config(divert("spy", "orders", "audit")))
    assert isinstance(broker.sending, DivertingSending)
    original = await send(broker, "orders", ANY, color="red")
    assert counts(broker, "orders", "audit") == [1, 1]
    copy = held(broker, "audit")[0]
    assert copy.message_id != original.message_id
    assert copy.address == "audit"
    assert copy.body == b"body"
    assert copy.property("color") == "red"
    assert copy.property("_AMQ_ORIG_ADDRESS") == "orders"
    assert copy.property("_AMQ_ORIG_QUEUE") == "spy"
    assert copy.property("_AMQ_ORIG_MESSAGE_ID") == str(original.message_id)
    assert copy.property("_AMQ_ORIG_ROUTING_TYPE") == "1"  # Artemis's code for ANYCAST
    assert held(broker, "orders")[0] is original


async def test_an_exclusive_divert_takes_the_message_and_its_filter_decides() -> None:
    extra = "<exclusive>true</exclusive><filter string=\"office = 'NY'\"/>"
    broker = started(config(divert("ny", "orders", "audit", extra)))
    await send(broker, "orders", ANY, office="NY")
    await send(broker, "orders", ANY, office="LA")
    await send(broker, "orders", ANY)
    assert counts(broker, "orders", "audit") == [2, 1]
    assert held(broker, "audit")[0].property("office") == "NY"


async def test_exclusive_diverts_go_first_and_stop_the_non_exclusive_ones() -> None:
    diverts = (
        divert("x1", "orders", "a1", "<exclusive>true</exclusive><filter string=\"k = 'x'\"/>")
        + divert("x2", "orders", "a2", "<exclusive>true</exclusive>")
        + divert("copy", "orders", "a3")
    )
    broker = started(config(diverts))
    await send(broker, "orders", k="x")  # both exclusive ones take it
    assert counts(broker, "orders", "a1", "a2", "a3") == [0, 1, 1, 0]


async def test_diverts_sharing_a_routing_name_take_turns() -> None:
    name = "<routing-name>shared</routing-name>"
    diverts = divert("d1", "orders", "a1", name) + divert("d2", "orders", "a2", name)
    diverts += divert("d3", "orders", "a3")  # a group of its own
    broker = started(config(diverts))
    for _ in range(4):
        await send(broker, "orders")
    assert counts(broker, "orders", "a1", "a2", "a3") == [4, 2, 2, 4]


@pytest.mark.parametrize(
    ("routing_type", "sent", "expected"),
    [
        ("STRIP", MULTI, [1, 1]),  # no routing type: both kinds of queue
        ("ANYCAST", MULTI, [1, 0]),
        ("MULTICAST", ANY, [0, 1]),
        ("PASS", MULTI, [0, 1]),
        ("PASS", ANY, [1, 0]),
    ],
)
async def test_routing_type(routing_type: str, sent: RoutingType, expected: list[int]) -> None:
    extra = f"<routing-type>{routing_type}</routing-type>"
    broker = started(config(divert("d", "orders", "both", extra)))
    await send(broker, "orders", sent)
    assert counts(broker, "both-any", "both-multi") == expected
    copies = held(broker, "both-any") + held(broker, "both-multi")
    kept = {"STRIP": None, "ANYCAST": ANY, "MULTICAST": MULTI, "PASS": sent}[routing_type]
    assert {c.routing_type for c in copies} == {kept}


async def test_a_composite_divert_a_chain_a_queue_and_a_pattern() -> None:
    diverts = (
        divert("fan", "orders", "a1, a2::a2")  # composite; the second names its queue
        + divert("chain", "a1", "a3")
        + divert("all", "news.#", "audit")
    )
    broker = started(config(diverts))
    await send(broker, "orders")
    assert counts(broker, "orders", "a1", "a2", "a3") == [1, 1, 1, 1]
    chained = held(broker, "a3")[0]
    assert chained.property("_AMQ_ORIG_ADDRESS") == "a1"  # the last divert's, as Artemis
    assert chained.property("_AMQ_ORIG_QUEUE") == "chain"
    await send(broker, "news.eu.sport", MULTI)  # auto-created; no queue of its own
    assert counts(broker, "audit") == [1]


async def test_an_exclusively_diverted_send_stores_its_copy_and_recovers_it() -> None:
    store = MemoryStore(messages=True)
    cfg = config(divert("all", "orders", "a1, a2", "<exclusive>true</exclusive>"))
    broker = started(cfg, store)
    await send(broker, "orders")
    await send(broker, "orders", durable=False)
    assert counts(broker, "orders", "a1", "a2") == [0, 2, 2]
    again = started(cfg, store)
    assert counts(again, "orders", "a1", "a2") == [0, 1, 1]
    assert held(again, "a1")[0].property("_AMQ_ORIG_ADDRESS") == "orders"


async def test_a_transaction_commits_the_copies_with_the_original() -> None:
    broker = started(config(divert("spy", "orders", "a1, a2")))
    message = Message(broker.next_id(), "orders", body=b"tx", durable=True)
    queues = broker.route(message)
    assert isinstance(queues, Diverted)
    assert counts(broker, "orders", "a1", "a2") == [0, 0, 0]  # nothing before COMMIT
    await broker.commit(Transaction(sends=[(message, queues)])).settled()
    assert counts(broker, "orders", "a1", "a2") == [1, 1, 1]


async def test_a_bad_filter_names_the_divert_and_its_line() -> None:
    cfg = config(divert("bad", "orders", "a1", '<filter string="color = = 1"/>'))
    with pytest.raises(ConfigFileError) as caught:
        compile_diverts(cfg)
    (problem,) = caught.value.problems
    assert problem.file == "broker.xml"
    assert problem.line == cfg.diverts[0].line > 1
    assert "divert 'bad': invalid filter" in problem.message


async def test_an_expired_message_s_move_goes_through_the_diverts_of_its_address() -> None:
    settings = (
        '<address-settings><address-setting match="orders">'
        "<expiry-address>expired</expiry-address></address-setting></address-settings>"
    )
    addresses = ADDRESSES.replace(
        "</addresses>",
        '<address name="expired"><anycast><queue name="expired"/></anycast></address></addresses>',
    )
    exclusive = "<exclusive>true</exclusive>"
    broker = started(config(divert("lost", "expired", "audit", exclusive), settings + addresses))
    await send(broker, "orders", ANY)
    queue = broker.queue("orders")
    assert queue is not None
    delivered: list[MessageReference] = []
    queue.add_consumer(
        SimpleNamespace(selector=None, has_credit=lambda: True, deliver=delivered.append)
    )
    broker.acks.expire(delivered[0])
    assert counts(broker, "orders", "expired", "audit") == [0, 0, 1]
    moved = held(broker, "audit")[0]
    assert moved.property("_AMQ_ORIG_ADDRESS") == "expired"


async def test_a_copy_without_a_routing_type_creates_no_address_one_with_one_does() -> None:
    diverts = divert("strip", "orders", "nowhere") + divert(
        "made", "audit", "made", "<routing-type>ANYCAST</routing-type>"
    )
    broker = started(config(diverts))
    await send(broker, "orders", ANY)  # as Artemis: the copy reaches nothing, the send is fine
    assert counts(broker, "orders") == [1]
    assert broker.post_office.address("nowhere") is None
    await send(broker, "audit", ANY)  # an anycast copy auto-creates address and queue
    assert counts(broker, "audit", "made") == [1, 1]
