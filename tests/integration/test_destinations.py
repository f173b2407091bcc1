"""Routing: anycast and multicast, selectors, configured queue filters, FQQN, subscriptions."""

from __future__ import annotations

import pytest

from .conftest import DEFAULT_ADDRESS_SETTINGS, BrokerProcess, unique

LOCKED_SETTINGS = """
      <address-setting match="locked.#">
        <auto-create-addresses>false</auto-create-addresses>
        <auto-create-queues>false</auto-create-queues>
      </address-setting>
"""

ADDRESSES = """
      <address name="DLQ">
        <anycast><queue name="DLQ"/></anycast>
      </address>
      <address name="orders">
        <multicast>
          <queue name="red-orders"><filter string="color = 'red'"/></queue>
          <queue name="all-orders"/>
        </multicast>
      </address>
      <address name="jobs">
        <anycast>
          <queue name="jobs"><filter string="urgent = 'yes'"/></queue>
        </anycast>
      </address>
      <address name="locked.existing">
        <anycast><queue name="locked.existing"/></anycast>
      </address>
      <address name="solo">
        <anycast><queue name="solo" max-consumers="1"/></anycast>
      </address>
      <address name="fanout">
        <multicast>
          <queue name="fanout-a"/>
          <queue name="fanout-b"/>
        </multicast>
      </address>
"""


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory):
    """This module's shared node also has the configured addresses above."""
    node = BrokerProcess(
        tmp_path_factory.mktemp("dest"),
        name="dest",
        addresses=ADDRESSES,
        address_settings=DEFAULT_ADDRESS_SETTINGS + LOCKED_SETTINGS,
    )
    node.start()
    yield node
    node.close()


def received(client) -> list[str]:
    client.sync()
    return [m.body for m in client.messages]


# --- anycast / multicast ------------------------------------------------------------------------


def test_anycast_consumers_compete_round_robin(broker, clients):
    q = unique("/queue/rr")
    consumers = [clients(broker) for _ in range(3)]
    for c in consumers:
        c.subscribe(q)
    producer = clients(broker)
    bodies = [f"m{i}" for i in range(9)]
    for body in bodies:
        producer.send(q, body)
    per_consumer = [received(c) for c in consumers]
    assert sorted(b for got in per_consumer for b in got) == sorted(bodies)  # each once
    assert [len(got) for got in per_consumer] == [3, 3, 3], per_consumer
    for got in per_consumer:  # each consumer sees its share in send order
        assert got == sorted(got, key=lambda b: int(b[1:]))


def test_multicast_every_subscription_gets_a_copy(broker, clients):
    t = unique("/topic/fan")
    subscribers = [clients(broker) for _ in range(3)]
    for s in subscribers:
        s.subscribe(t)
    # Two subscriptions on one connection are two subscriptions.
    second_sub = subscribers[0].subscribe(t)
    producer = clients(broker)
    for i in range(5):
        producer.send(t, f"n{i}")
    expected = [f"n{i}" for i in range(5)]
    for s in subscribers[1:]:
        assert received(s) == expected
    got = [(m.headers["subscription"], m.body) for m in subscribers[0].messages]
    assert [b for sid, b in got if sid == second_sub] == expected
    assert [b for sid, b in got if sid != second_sub] == expected


def test_multicast_without_subscribers_drops_the_message(broker, clients):
    t = unique("/topic/nobody")
    producer = clients(broker)
    producer.send(t, "lost")
    s = clients(broker)
    s.subscribe(t)
    producer.send(t, "seen")
    assert received(s) == ["seen"]


def test_same_name_anycast_and_multicast_are_separate(broker, clients):
    name = unique("both")
    queue_consumer = clients(broker)
    queue_consumer.subscribe(f"/queue/{name}")
    topic_consumer = clients(broker)
    topic_consumer.subscribe(f"/topic/{name}")
    producer = clients(broker)
    producer.send(f"/queue/{name}", "to-queue")
    producer.send(f"/topic/{name}", "to-topic")
    assert received(queue_consumer) == ["to-queue"]
    assert received(topic_consumer) == ["to-topic"]


def test_destination_type_headers_without_prefixes(broker, clients):
    address = unique("plain")
    subs = [clients(broker) for _ in range(2)]
    for s in subs:
        s.subscribe(address, **{"subscription-type": "MULTICAST"})
    producer = clients(broker)
    producer.send(address, "copy", **{"destination-type": "MULTICAST"})
    assert [received(s) for s in subs] == [["copy"], ["copy"]]

    other = unique("plainq")
    workers = [clients(broker) for _ in range(2)]
    for w in workers:
        w.subscribe(other, **{"subscription-type": "ANYCAST"})
    for i in range(4):
        producer.send(other, f"w{i}", **{"destination-type": "ANYCAST"})
    assert sorted(len(received(w)) for w in workers) == [2, 2]


# --- selectors ----------------------------------------------------------------------------------


def test_queue_selectors_pick_matching_messages(broker, clients):
    q = unique("/queue/sel")
    red = clients(broker)
    red.subscribe(q, selector="color = 'red'")
    big_blue = clients(broker)
    big_blue.subscribe(q, selector="color = 'blue' AND size IN ('L', 'XL')")
    producer = clients(broker)
    sent = [
        ("red", "S"),
        ("blue", "L"),
        ("blue", "S"),
        ("red", "XL"),
        ("blue", "XL"),
        ("green", "L"),
    ]
    for color, size in sent:
        producer.send(q, f"{color}-{size}", color=color, size=size)
    assert received(red) == ["red-S", "red-XL"]
    assert received(big_blue) == ["blue-L", "blue-XL"]
    # What no selector matched stayed in the queue, in order, for a consumer without one.
    rest = clients(broker)
    rest.subscribe(q)
    rest.wait_messages(2)
    assert received(rest) == ["blue-S", "green-L"]


def test_topic_subscription_selector(broker, clients):
    t = unique("/topic/sel")
    like = clients(broker)
    like.subscribe(t, selector="region LIKE 'eu-%'")
    everything = clients(broker)
    everything.subscribe(t)
    producer = clients(broker)
    for region in ("eu-west", "us-east", "eu-north", "ap"):
        producer.send(t, region, region=region)
    assert received(like) == ["eu-west", "eu-north"]
    assert received(everything) == ["eu-west", "us-east", "eu-north", "ap"]


# --- configured queues and filters; FQQN --------------------------------------------------------


def test_configured_multicast_queue_filters(broker, clients):
    producer = clients(broker)
    tag = unique("o")
    for color in ("red", "blue", "red"):
        producer.send("/topic/orders", f"{tag}-{color}", color=color)
    red = clients(broker)
    red.subscribe("orders::red-orders")
    everything = clients(broker)
    everything.subscribe("orders::all-orders")
    red.wait_messages(2)
    everything.wait_messages(3)
    assert received(red) == [f"{tag}-red", f"{tag}-red"]
    assert received(everything) == [f"{tag}-red", f"{tag}-blue", f"{tag}-red"]


def test_configured_anycast_queue_filter_rejects_non_matching(broker, clients):
    producer = clients(broker)
    tag = unique("j")
    producer.send("/queue/jobs", f"{tag}-urgent", urgent="yes")
    producer.send("/queue/jobs", f"{tag}-whenever", urgent="no")
    worker = clients(broker)
    worker.subscribe("/queue/jobs")
    worker.wait_messages(1)
    assert received(worker) == [f"{tag}-urgent"]


def test_fqqn_send_reaches_only_that_queue(broker, clients):
    producer = clients(broker)
    tag = unique("f")
    producer.send("fanout::fanout-a", f"{tag}-only-a")
    producer.send("/topic/fanout", f"{tag}-both")
    a = clients(broker)
    a.subscribe("fanout::fanout-a")
    b = clients(broker)
    b.subscribe("fanout::fanout-b")
    a.wait_messages(2)
    b.wait_messages(1)
    assert received(a) == [f"{tag}-only-a", f"{tag}-both"]
    assert received(b) == [f"{tag}-both"]


def test_fqqn_subscriptions_share_a_multicast_queue(broker, clients):
    # Two consumers of one FQQN queue compete (they are consumers of one queue, not two
    # subscriptions), unlike two /topic/ subscriptions.
    tag = unique("s")
    consumers = [clients(broker) for _ in range(2)]
    for c in consumers:
        c.subscribe("orders::all-orders")
    producer = clients(broker)
    for i in range(4):
        producer.send("/topic/orders", f"{tag}-{i}", color="blue")
    got = [received(c) for c in consumers]
    assert sorted(len(g) for g in got) == [2, 2], got


def test_fqqn_subscribe_to_a_queue_on_another_address_is_an_error(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send("SUBSCRIBE", {"destination": "orders::jobs", "id": "s", "receipt": "r"})
    frames = raw.wait_closed()
    assert [f.command for f in frames] == ["ERROR"], frames


# --- auto-create off, max-consumers ------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "headers"),
    [
        ("SEND", {"destination": "/queue/locked.nope"}),
        ("SEND", {"destination": "/topic/locked.nope"}),
        ("SUBSCRIBE", {"destination": "/queue/locked.nope", "id": "s"}),
        ("SUBSCRIBE", {"destination": "locked.existing::other", "id": "s"}),
    ],
    ids=["send-anycast", "send-multicast", "subscribe", "subscribe-fqqn"],
)
def test_unknown_destination_with_auto_create_off_is_an_error(
    broker, raw_clients, command, headers
):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send(command, {**headers, "receipt": "r-locked"})
    frames = raw.wait_closed()
    assert [f.command for f in frames] == ["ERROR"], frames
    assert frames[0].get("receipt-id") == "r-locked"


def test_existing_destination_works_with_auto_create_off(broker, clients):
    c = clients(broker)
    c.subscribe("/queue/locked.existing")
    tag = unique("l")
    c.send("/queue/locked.existing", tag)
    c.wait_messages(1)
    assert received(c) == [tag]


def test_max_consumers_refuses_the_extra_consumer(broker, clients, raw_clients):
    first = clients(broker)
    first.subscribe("/queue/solo")
    extra = raw_clients(broker)
    extra.connect("1.2")
    extra.send("SUBSCRIBE", {"destination": "/queue/solo", "id": "s", "receipt": "r-solo"})
    frames = extra.wait_closed()
    assert [f.command for f in frames] == ["ERROR"], frames
    tag = unique("solo")
    first.send("/queue/solo", tag)
    first.wait_messages(1)
    assert received(first) == [tag]
    # Once the first consumer leaves, another may take its place.
    first.disconnect()
    replacement = clients(broker)
    replacement.subscribe("/queue/solo")


# --- durable and non-durable subscriptions -----------------------------------------------------


def test_durable_subscription_receives_while_offline(broker, clients):
    t = unique("/topic/news")
    client_id = unique("cid")
    durable = {"durable-subscription-name": "daily"}
    reader = clients(broker, client_id=client_id)
    reader.subscribe(t, **durable)
    producer = clients(broker)
    producer.send(t, "while-online")
    reader.wait_messages(1)
    reader.disconnect()

    for i in range(3):
        producer.send(t, f"offline-{i}")

    back = clients(broker, client_id=client_id)
    back.subscribe(t, **durable)
    back.wait_messages(3)
    assert received(back) == ["offline-0", "offline-1", "offline-2"]
    # The subscription is a queue named clientid.subscriptionname on the address.
    address = t.removeprefix("/topic/")
    back.unsubscribe(back.messages[0].headers["subscription"])  # offline again, kept
    producer.send(t, "via-fqqn")
    peek = clients(broker)
    peek.subscribe(f"{address}::{client_id}.daily")
    peek.wait_messages(1)
    assert received(peek) == ["via-fqqn"]


def test_unsubscribe_with_durable_name_deletes_the_subscription(broker, clients):
    t = unique("/topic/gone")
    client_id = unique("cid")
    durable = {"durable-subscription-name": "s1"}
    reader = clients(broker, client_id=client_id)
    sub = reader.subscribe(t, **durable)
    reader.unsubscribe(sub, **durable)
    producer = clients(broker)
    producer.send(t, "after-delete")
    reader.subscribe(t, **durable)  # a new, empty subscription
    assert received(reader) == []
    producer.send(t, "new")
    reader.wait_messages(1)
    assert received(reader) == ["new"]


def test_durable_subscription_needs_a_client_id(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send(
        "SUBSCRIBE",
        {
            "destination": unique("/topic/d"),
            "id": "s",
            "durable-subscription-name": "x",
            "receipt": "r",
        },
    )
    frames = raw.wait_closed()
    assert [f.command for f in frames] == ["ERROR"], frames
    assert frames[0].get("receipt-id") == "r"


def test_durable_subscription_with_a_new_selector_is_replaced(broker, clients):
    t = unique("/topic/resel")
    client_id = unique("cid")
    durable = {"durable-subscription-name": "s"}
    reader = clients(broker, client_id=client_id)
    sub = reader.subscribe(t, selector="kind = 'a'", **durable)
    reader.unsubscribe(sub)  # offline, subscription kept
    producer = clients(broker)
    producer.send(t, "a-while-offline", kind="a")
    reader.subscribe(t, selector="kind = 'b'", **durable)
    producer.send(t, "b-now", kind="b")
    producer.send(t, "a-now", kind="a")
    reader.wait_messages(1)
    assert received(reader) == ["b-now"]


@pytest.mark.parametrize("how", ["disconnect", "drop", "unsubscribe"])
def test_non_durable_subscription_is_gone_after_it_ends(broker, clients, how):
    t = unique("/topic/temp")
    reader = clients(broker)
    sub = reader.subscribe(t)
    producer = clients(broker)
    producer.send(t, "before")
    reader.wait_messages(1)
    if how == "disconnect":
        reader.disconnect()
        reader = clients(broker)
    elif how == "drop":
        reader.drop()
        reader = clients(broker)
    else:
        reader.unsubscribe(sub)
        reader.clear()
    producer.send(t, "while-away")
    reader.subscribe(t)
    producer.send(t, "after")
    reader.wait_messages(1)
    assert received(reader) == ["after"]
