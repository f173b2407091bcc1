"""Diverts with real nodes and stomp.py (Artemis's "Diverting and Splitting Message Flows"):
exclusive and non-exclusive diverts, a filter, each routing type, a composite divert, a
transaction, persistent copies through a crash, a configuration artemis-py refuses, and a
diverted copy load-balanced to a consumer on another node of a cluster.

The acceptors are as ``artemis create`` writes them (no ``/queue/`` or ``/topic/``
prefixes): destinations are plain addresses, ``address::queue`` names a queue, and the
routing type is a header.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from cluster.conftest import Cluster, cluster, wait_binding  # noqa: F401 - the cluster fixture

from .conftest import BrokerProcess, Client, start_refused, unique

ANYCAST = {"destination-type": "ANYCAST"}
MULTICAST = {"destination-type": "MULTICAST"}


def both(name: str) -> str:
    """An address with an anycast queue ``<name>-any`` and a multicast queue ``<name>-multi``."""
    return (
        f'<address name="{name}"><anycast><queue name="{name}-any"/></anycast>'
        f'<multicast><queue name="{name}-multi"/></multicast></address>'
    )


def anycast(*names: str) -> str:
    return "".join(
        f'<address name="{n}"><anycast><queue name="{n}"/></anycast></address>' for n in names
    )


def divert(name: str, address: str, to: str, extra: str = "") -> str:
    return (
        f'<divert name="{name}"><address>{address}</address>'
        f"<forwarding-address>{to}</forwarding-address>{extra}</divert>"
    )


EXCLUSIVE = "<exclusive>true</exclusive>"
ROUTING_TYPES = ("STRIP", "ANYCAST", "MULTICAST", "PASS")
SHARED_DIVERTS = (
    divert("spy", "orders", "audit")
    + divert("ny", "prices", "ny-prices", EXCLUSIVE + "<filter string=\"office = 'NY'\"/>")
    + divert("fan", "shipping", "dallas, chicago")
    + "".join(
        divert(f"divert-{kind}", f"rt-{kind}", f"to-{kind}", f"<routing-type>{kind}</routing-type>")
        for kind in ROUTING_TYPES
    )
)
SHARED_ADDRESSES = anycast(
    "orders", "audit", "prices", "ny-prices", "shipping", "dallas", "chicago"
) + "".join(both(f"to-{kind}") + anycast(f"rt-{kind}") for kind in ROUTING_TYPES)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path_factory.mktemp("diverts"),
        name="diverts",
        prefixes=False,
        extra_core=f"<diverts>{SHARED_DIVERTS}</diverts>",
        addresses=SHARED_ADDRESSES,
        web=True,
    )
    broker.start()
    yield broker
    broker.close()


def drain(node: BrokerProcess, queue: str, address: str | None = None) -> list[Any]:
    """The messages waiting in ``queue`` (of ``address``, default the queue's name),
    consumed: their frames."""
    client = node.client()
    try:
        client.subscribe(f"{address or queue}::{queue}")
        client.sync()
        return client.messages
    finally:
        client.close()


def bodies_in(node: BrokerProcess, queue: str, address: str | None = None) -> list[str]:
    return sorted(m.body for m in drain(node, queue, address))


def test_a_non_exclusive_divert_sends_a_copy_and_the_original_stays(node: BrokerProcess) -> None:
    producer = node.client()
    body = unique("order")
    producer.send("orders", body, **ANYCAST, color="red")
    (original,) = drain(node, "orders")
    (copy,) = drain(node, "audit")
    assert original.body == copy.body == body
    assert copy.headers["color"] == "red"
    assert copy.headers["_AMQ_ORIG_ADDRESS"] == "orders"
    assert copy.headers["_AMQ_ORIG_QUEUE"] == "spy"  # the divert, as Artemis names it
    assert copy.headers["_AMQ_ORIG_MESSAGE_ID"] == original.headers["message-id"]
    assert copy.headers["message-id"] != original.headers["message-id"]  # a message of its own


def test_an_exclusive_divert_with_a_filter_takes_what_it_accepts(node: BrokerProcess) -> None:
    producer = node.client()
    for office in ("NY", "LA", "NY", "SF"):
        producer.send("prices", f"{office}-price", **ANYCAST, office=office)
    producer.send("prices", "no-office", **ANYCAST)
    assert bodies_in(node, "ny-prices") == ["NY-price", "NY-price"]
    assert bodies_in(node, "prices") == ["LA-price", "SF-price", "no-office"]


def test_a_composite_divert_copies_to_each_address(node: BrokerProcess) -> None:
    node.client().send("shipping", "parcel", **ANYCAST)
    assert [bodies_in(node, q) for q in ("shipping", "dallas", "chicago")] == [["parcel"]] * 3


@pytest.mark.parametrize(
    ("kind", "sent", "expected"),
    [
        # STRIP (the default): the copy has no routing type, so both kinds of queue get it.
        ("STRIP", MULTICAST, (["m"], ["m"])),
        ("ANYCAST", MULTICAST, (["m"], [])),
        ("MULTICAST", ANYCAST, ([], ["m"])),
        ("PASS", ANYCAST, (["m"], [])),  # the original's routing type
        ("PASS", MULTICAST, ([], ["m"])),
    ],
)
def test_routing_type(
    node: BrokerProcess, kind: str, sent: dict[str, str], expected: tuple[list[str], list[str]]
) -> None:
    # A divert ignores the original's routing type (rt-* has an anycast queue only).
    node.client().send(f"rt-{kind}", "m", **sent)
    target = f"to-{kind}"
    got = (bodies_in(node, f"{target}-any", target), bodies_in(node, f"{target}-multi", target))
    assert got == expected
    drain(node, f"rt-{kind}")


def test_a_transaction_sends_the_copies_at_commit_or_not_at_all(node: BrokerProcess) -> None:
    producer, watcher = node.client(), node.client()
    watcher.subscribe("audit::audit")
    tx = unique("tx")
    producer.begin(tx)
    producer.send("orders", "aborted", **ANYCAST, transaction=tx)
    producer.abort(tx)
    tx = unique("tx")
    producer.begin(tx)
    producer.send("orders", "committed-1", **ANYCAST, transaction=tx)
    producer.send("orders", "committed-2", **ANYCAST, transaction=tx)
    watcher.sync()
    assert watcher.messages == []  # nothing before COMMIT
    producer.commit(tx)
    watcher.wait_messages(2)
    watcher.sync()
    assert sorted(watcher.bodies()) == ["committed-1", "committed-2"]
    assert bodies_in(node, "orders") == ["committed-1", "committed-2"]


def test_the_management_api_shows_the_diverts(node: BrokerProcess) -> None:
    diverts = httpx.get(f"{node.web_url}/api/diverts").json()
    assert [d["name"] for d in diverts] == ["spy", "ny", "fan"] + [
        f"divert-{kind}" for kind in ROUTING_TYPES
    ]
    assert diverts[1] == {
        "name": "ny",
        "address": "prices",
        "forwarding_address": "ny-prices",
        "exclusive": True,
        "filter": "office = 'NY'",
        "routing_name": None,
        "routing_type": "STRIP",
    }
    assert diverts[2]["forwarding_address"] == "dallas, chicago"
    assert httpx.get(f"{node.web_url}/api/addresses/orders").json()["diverts"] == ["spy"]


def test_persistent_copies_survive_a_crash_and_the_divert_is_read_again(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    diverts = divert("all", "orders", "a1, a2", EXCLUSIVE) + divert("spy", "a1", "audit")
    node = make_broker(
        prefixes=False,
        persistence=True,
        extra_core=f"<diverts>{diverts}</diverts>",
        addresses=anycast("orders", "a1", "a2", "audit"),
    )
    producer = node.client()
    for n in range(5):
        producer.send("orders", f"p{n}", **ANYCAST, persistent="true")
    producer.send("orders", "not-persistent", **ANYCAST)
    large = "L" * 150_000  # over stompMinLargeMessageSize: a file of its own, per copy
    producer.send("orders", large, **ANYCAST, persistent="true")
    # The original is not stored (the exclusive divert took it): its duplicate id is kept
    # with the copies.
    producer.send("orders", "once", **ANYCAST, persistent="true", _AMQ_DUPL_ID="d-1")
    node.restart(crash=True)
    node.client().send("orders", "again", **ANYCAST, persistent="true", _AMQ_DUPL_ID="d-1")
    persistent = sorted([f"p{n}" for n in range(5)] + [large, "once"])
    assert bodies_in(node, "orders") == []  # the exclusive divert took them all
    assert bodies_in(node, "a1") == persistent
    assert bodies_in(node, "a2") == persistent
    audited = drain(node, "audit")  # a copy of a copy: the chain a1 -> audit
    assert sorted(m.body for m in audited) == persistent
    assert {m.headers["_AMQ_ORIG_ADDRESS"] for m in audited} == {"a1"}
    # After the restart the diverts still divert.
    node.client().send("orders", "after", **ANYCAST, persistent="true")
    assert [bodies_in(node, q) for q in ("a1", "a2", "audit")] == [["after"]] * 3


def test_a_transformer_and_a_bad_filter_are_refused_at_start_with_the_divert_and_its_line(
    make_broker: Callable[..., BrokerProcess],
) -> None:
    transformer = "<transformer-class-name>org.example.Stamp</transformer-class-name>"
    node = make_broker(
        start=False,
        prefixes=False,
        extra_core=f"<diverts>{divert('stamp', 'orders', 'audit', transformer)}</diverts>",
    )
    log = start_refused(node)
    assert "<transformer-class-name>: divert 'stamp': transformers are Java classes" in log
    assert f"{node.config_path}:" in log
    # A filter is compiled by the broker, not the parser: reported the same way.
    odd = divert("odd", "orders", "audit", '<filter string="a = = 1"/>')
    bad_filter = make_broker(start=False, prefixes=False, extra_core=f"<diverts>{odd}</diverts>")
    log = start_refused(bad_filter)
    assert f"{bad_filter.config_path}:" in log
    assert "<divert>: divert 'odd': invalid filter" in log


def test_a_diverted_copy_reaches_a_consumer_on_another_node(
    cluster: Callable[..., Cluster],  # noqa: F811 - the imported fixture
    clients: Callable[..., Client],
) -> None:
    diverts = divert("to-audit", "orders", "audit", EXCLUSIVE)
    nodes = cluster(
        2,
        prefixes=False,
        extra_core=f"<diverts>{diverts}</diverts>",
        addresses=anycast("orders", "audit"),
    )
    consumer = clients(nodes[1])
    consumer.subscribe("audit", **{"subscription-type": "ANYCAST"})
    wait_binding(nodes[0], "audit", on=nodes[1], consumers=1)
    producer = clients(nodes[0])
    sent = [f"o{n}" for n in range(6)]
    for body in sent:
        producer.send("orders", body, **ANYCAST, persistent="true")
    consumer.wait_messages(len(sent))
    consumer.sync()  # and no second copy: node 1 does not divert what node 0 forwarded
    assert sorted(consumer.bodies()) == sent
    assert {m.headers["_AMQ_ORIG_ADDRESS"] for m in consumer.messages} == {"orders"}
    assert bodies_in(nodes[0], "orders") == []
