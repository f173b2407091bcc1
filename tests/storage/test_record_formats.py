"""Every journal record type's bytes, pinned: journals written before stay readable.

The expected bytes were taken from the encoders as they were before the record types moved
into one registry (:mod:`artemis_py.broker.records`); each is decoded back as well.
"""

from __future__ import annotations

import importlib.util
from collections import Counter

import pytest

from artemis_py.broker import records as r
from artemis_py.broker.message import Message
from artemis_py.config import RoutingType
from artemis_py.storage import Op

ANYCAST, MULTICAST = RoutingType.ANYCAST, RoutingType.MULTICAST
ORDERS_HEX = b"orders.eu".hex()


def _message() -> Message:
    return Message(
        42,
        "orders.eu",
        body="hello \u2713".encode(),
        properties=(("k", "v"), ("_AMQ_DUPL_ID", "x1")),
        routing_type=ANYCAST,
        durable=True,
        priority=7,
        timestamp=1700000000000,
        expiration=1700000060000,
    )


MESSAGE_HEX = (
    "010101070068e5cf8b0100006052e6cf8b01000009006f72646572732e6575020001006b01000000760c00"
    "5f414d515f4455504c5f4944020000007831"
)


def test_numbers_are_unique_per_journal_and_named_once() -> None:
    for journal in ("bindings", "messages"):
        numbers = Counter(t.number for t in r.RECORD_TYPES if t.journal == journal)
        assert [n for n, times in numbers.items() if times > 1] == []
    assert len({t.name for t in r.RECORD_TYPES}) == len(r.RECORD_TYPES)
    assert r.BINDINGS_RECORD_NAMES == {1: "ADDRESS", 2: "QUEUE", 3: "ID_BLOCK", 4: "GROUP_BINDING"}
    assert r.MESSAGES_RECORD_NAMES == {
        10: "MESSAGE",
        11: "ADD_REF",
        12: "ACK_REF",
        13: "DELIVERY_COUNT",
        14: "DUPLICATE_ID",
        15: "PAGE_ACK",
        16: "PAGE_COMPLETE",
        17: "PAGE_TX",
        18: "OFFSET_MARK",
        19: "CLIENT_DUPLICATE_ID",
        20: "SEALED_STREAM",
        21: "ROUTE_TO",
        22: "SCHEDULED_DELIVERY_TIME",
        30: "LARGE_MESSAGE",
        31: "LARGE_PAGE_REF",
    }
    for record_type in r.RECORD_TYPES:
        assert importlib.util.find_spec(f"artemis_py.broker.{record_type.home}") is not None
        if record_type.update_of is not None:
            assert r.MESSAGES_RECORD_NAMES[record_type.update_of] == "MESSAGE"
    assert r.record_name("messages", 99) == "type-99"
    assert r.record_name("bindings", 10) == "type-10"


def test_address() -> None:
    record = r.AddressRecord(7, "orders.eu", frozenset({MULTICAST, ANYCAST}), auto_created=True)
    payload = r.encode_address(record)
    assert payload.hex() == ORDERS_HEX + "00414d0031"
    assert r.decode_address(7, payload) == record


def test_group_binding() -> None:
    op = r.group_binding_op(9, "g1.orders", "orders@node-a")
    kind, record_id, record_type, payload = op
    assert (kind, record_id, record_type) == ("add", 9, r.GROUP_BINDING_RECORD)
    assert payload.hex() == b"g1.orders".hex() + "00" + b"orders@node-a".hex()
    assert r.decode_group_binding(payload) == ("g1.orders", "orders@node-a")


def test_queue() -> None:
    spec = r.QueueSpec(
        8, "q1", "orders.eu", ANYCAST, "color='red'", max_consumers=5, purge_on_no_consumers=True
    )
    payload = r.encode_queue(spec)
    # exclusive, rebalance, pause, buckets -1, no first key, no last-value key; then ring
    # size -1, consumers before dispatch 0, delay before dispatch -1, non-destructive 0
    dispatch = "00300030003000" + "2d31" + "0000" + "002d31" + "0030" + "002d31" + "0030"
    assert payload.hex() == (
        "713100" + ORDERS_HEX + "004100636f6c6f723d2772656427003500310030" + dispatch
    )
    assert r.decode_queue(8, payload) == spec
    plain = r.QueueSpec(9, "q2", "a", MULTICAST, auto_created=True)
    assert r.decode_queue(9, r.encode_queue(plain)) == plain  # no filter: an empty field
    grouped = r.QueueSpec(
        10, "q3", "a", ANYCAST, exclusive=True, group_buckets=8, last_value_key="stock", ring_size=3
    )
    assert r.decode_queue(10, r.encode_queue(grouped)) == grouped
    cache = r.QueueSpec(11, "q4", "a", ANYCAST, last_value_key="stock", non_destructive=True)
    assert r.encode_queue(cache).endswith(b"\x001")
    assert r.decode_queue(11, r.encode_queue(cache)) == cache


def test_a_queue_record_from_before_the_dispatch_fields_reads_with_their_defaults() -> None:
    old = bytes.fromhex("713100" + ORDERS_HEX + "004100636f6c6f723d2772656427003500310030")
    spec = r.decode_queue(8, old)
    assert (spec.exclusive, spec.group_buckets, spec.last_value_key) == (False, -1, None)
    assert spec.max_consumers == 5


def test_a_queue_record_from_before_non_destructive_queues_reads_as_destructive() -> None:
    current = r.encode_queue(r.QueueSpec(8, "q1", "a", ANYCAST, ring_size=3))
    old = current.rpartition(b"\x00")[0]  # the sixteen fields it had
    spec = r.decode_queue(8, old)
    assert (spec.non_destructive, spec.ring_size, spec.delay_before_dispatch) == (False, 3, -1)


def test_id_block() -> None:
    op = r.id_block_op(1 << 16)
    assert op == Op.add((1 << 63) | (1 << 16), 3, bytes.fromhex("0000010000000000"))
    assert r.decode_id_block(op[3]) == 1 << 16


def test_message_and_large_message() -> None:
    message = _message()
    payload = r.encode_message_record(message)
    assert payload.hex() == MESSAGE_HEX + "68656c6c6f20e29c93"
    back = r.decode_message_record(42, payload)
    assert (back.address, back.body, back.properties, back.priority) == (
        "orders.eu",
        message.body,
        message.properties,
        7,
    )
    large = r.encode_large_message(message, 123456)
    assert large.hex() == "40e2010000000000" + MESSAGE_HEX
    length, headers = r.decode_large_message(42, large)
    assert (length, headers.body, headers.properties) == (123456, b"", message.properties)


def test_a_message_record_refuses_lengths_its_fields_cannot_hold() -> None:
    too_long = Message(42, "orders.eu", properties=(("k" * 65536, "v"),))
    with pytest.raises(ValueError, match="property name too long: 65536"):
        r.encode_message_record(too_long)
    with pytest.raises(ValueError, match="address too long"):
        r.encode_message_record(Message(42, "a" * 65536))
    with pytest.raises(UnicodeEncodeError):
        r.encode_message_record(Message(42, "orders.eu", properties=(("k", "\udc80"),)))


def test_references() -> None:
    add = bytes.fromhex("08000000000000000300000000000000")
    assert r.add_ref_op(42, 8, 3) == Op.update(42, 11, add)
    assert r.add_ref_op(42, 8, 3, 9) == Op.update_tx(9, 42, 11, add)
    assert r.decode_add_ref(42, add) == (8, 3)
    old = bytes.fromhex("0800000000000000")  # written before offsets: the message id's offset
    assert r.decode_add_ref(42, old) == (8, 42)
    assert r.ack_ref_op(42, 8) == Op.update(42, 12, old)
    assert r.ack_ref_op(42, 8, 9) == Op.update_tx(9, 42, 12, old)
    assert r.decode_ref(add) == r.decode_ref(old) == 8
    count = r.delivery_count_op(42, 8, 3)
    assert count == Op.update(42, 13, bytes.fromhex("080000000000000003000000"))
    assert r.decode_delivery_count(count[3]) == (8, 3)


def test_route_to() -> None:
    payload = bytes.fromhex("0800000000000000") + b"q1@n2\0orders"
    assert r.route_to_op(42, 8, ("q1@n2", "orders")) == Op.update(42, 21, payload)
    assert r.route_to_op(42, 8, ("q1@n2", "orders"), 9) == Op.update_tx(9, 42, 21, payload)
    assert r.decode_route_to(payload) == (8, ("q1@n2", "orders"))
    none = r.route_to_op(42, 8, ())  # no binding named: routed by address over there
    assert r.decode_route_to(none[3]) == (8, ())


def test_scheduled_delivery_time() -> None:
    op = r.scheduled_time_op(42, 8, 1700000005000)
    payload = bytes.fromhex("0800000000000000" + "887be5cf8b010000")  # queue id, epoch ms
    assert op == Op.update(42, 22, payload)
    assert r.decode_scheduled_time(payload) == (8, 1700000005000)


def test_message_with_the_old_routing_property() -> None:
    """A MESSAGE record written before ROUTE_TO: its routing property becomes route_to,
    and the message's properties and encoding are without it."""
    old = _message()
    old.properties += (("_AMQ_ROUTE_TO.$.artemis.internal.sf.c.n2", '["q1", "q2@n3"]'),)
    back = r.decode_message_record(42, r.encode_message_record(old))
    assert back.route_to == {"$.artemis.internal.sf.c.n2": ("q1", "q2@n3")}
    assert back.properties == _message().properties
    assert r.encode_message_record(back).hex() == MESSAGE_HEX + "68656c6c6f20e29c93"
    # A client's header of that name that is no list of names stays a header.
    odd = _message()
    odd.properties += (("_AMQ_ROUTE_TO.x", "not json"), ("_AMQ_ROUTE_TO.y", "[1]"))
    kept = r.decode_message_record(42, r.encode_message_record(odd))
    assert (kept.route_to, kept.properties) == (None, odd.properties)
    # A page record keeps them in that form (a page file has no record beside the message).
    paged = r.decode_message_record(42, r.encode_message(back, routes=True))
    assert paged.route_to == back.route_to
    assert paged.properties == back.properties


def test_duplicate_ids() -> None:
    assert r.duplicate_id_op(50, b"node-a:17") == Op.add(50, 14, b"node-a:17")
    payload = r.encode_client_id("orders.eu", "order-\u00e9")
    assert payload.hex() == "09000000" + ORDERS_HEX + "6f726465722dc3a9"
    assert r.decode_client_id(payload) == ("orders.eu", "order-\u00e9")


def test_paging_cursors() -> None:
    ack = bytes.fromhex("080000000000000002000000000000000500000000000000" + ORDERS_HEX)
    assert r.page_ack_op(51, 8, (2, 5), "orders.eu", None) == Op.add(51, 15, ack)
    assert r.page_ack_op(51, 8, (2, 5), "orders.eu", 9) == Op.add_tx(9, 51, 15, ack)
    assert r.decode_page_ack(ack) == r.PageAck(8, 2, 5, "orders.eu")
    done = bytes.fromhex("08000000000000000200000000000000" + ORDERS_HEX)
    assert r.page_complete_op(52, 8, 2, "orders.eu") == Op.add(52, 16, done)
    assert r.decode_page_complete(done) == r.PageComplete(8, 2, "orders.eu")
    tx = bytes.fromhex("0900000000000000")
    assert r.page_tx_op(9, 53) == Op.add_tx(9, 53, 17, tx)
    assert r.decode_page_tx(tx) == 9


def test_offset_marks_and_sealed_ends() -> None:
    """OFFSET_MARK and SEALED_STREAM share one layout."""
    payload = r.encode_offset_mark(8, "node-a", 40)
    assert payload.hex() == "08000000000000002800000000000000" + b"node-a".hex()
    assert r.decode_offset_mark(payload) == (8, "node-a", 40)


def test_large_page_ref() -> None:
    ref = r.PageRef(42, "orders.eu", 2, 5, 9, {8, 3})
    payload = r.encode_page_ref(ref)
    assert payload.hex() == (
        "2a00000000000000020000000000000005000000000000000900000000000000"
        "0200" + "0300000000000000" + "0800000000000000" + ORDERS_HEX
    )
    assert r.decode_page_ref(payload) == ref
    assert r.page_ref_op(60, ref) == Op.add(60, 31, payload)
