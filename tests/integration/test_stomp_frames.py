"""Every STOMP frame type against a real node, over raw sockets and stomp.py.

Raw sockets are used wherever the exact bytes matter (versions, escaping, NULs in bodies,
malformed and over-size frames); their parser lives in conftest.py and shares nothing with
artemis_py's codec.
"""

from __future__ import annotations

import pytest

from .conftest import BrokerProcess, RawStomp, unique, wait_for

VERSIONS = ["1.0", "1.1", "1.2"]


def assert_error_then_closed(
    raw: RawStomp, *, contains: str | None = None, receipt: str | None = None
):
    """The broker answers with one ERROR frame and then closes the connection."""
    frames = raw.wait_closed()
    errors = [f for f in frames if f.command == "ERROR"]
    assert errors, f"expected an ERROR frame before the close, got {frames!r}"
    error = errors[0]
    assert error.get("message"), f"ERROR without a message header: {error!r}"
    if contains is not None:
        text = (error.get("message") or "") + error.body.decode("utf-8", "replace")
        assert contains.lower() in text.lower(), error
    if receipt is not None:
        assert error.get("receipt-id") == receipt, error
    assert raw.eof
    return error


def still_works(broker: BrokerProcess, port: int | None = None) -> None:
    """A fresh connection can send and receive on the node."""
    with broker.raw(port) as raw:
        assert raw.connect("1.2").command == "CONNECTED"
        q = unique("/queue/alive")
        assert raw.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"
        assert raw.receipt("SEND", {"destination": q}, b"ping").command == "RECEIPT"
        msg = raw.read_until("MESSAGE")
        assert msg.body == b"ping"


# --- CONNECT / STOMP / CONNECTED ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "accept_version", "expected"),
    [
        ("CONNECT", None, "1.0"),
        ("CONNECT", "1.0", "1.0"),
        ("CONNECT", "1.1", "1.1"),
        ("CONNECT", "1.2", "1.2"),
        ("CONNECT", "1.0,1.1,1.2", "1.2"),
        ("CONNECT", "1.1,1.0", "1.1"),
        ("STOMP", "1.1", "1.1"),
        ("STOMP", "1.2", "1.2"),
        ("STOMP", "1.0,1.2", "1.2"),
    ],
)
def test_connect_negotiates_version(broker, command, accept_version, expected):
    with broker.raw() as raw:
        frame = raw.connect(accept_version, command=command)
        assert frame.command == "CONNECTED", frame
        if expected == "1.0":
            assert frame.get("version") in (None, "1.0"), frame
        else:
            assert frame.get("version") == expected, frame
        assert frame.get("session"), frame
        # The connection is usable in that version: a round trip through a queue.
        q = unique("/queue/v")
        assert raw.receipt("SUBSCRIBE", {"destination": q, "id": "s1"}).command == "RECEIPT"
        assert raw.receipt("SEND", {"destination": q}, b"hello").command == "RECEIPT"
        msg = raw.read_until("MESSAGE")
        assert msg.body == b"hello"
        assert msg.get("destination") == q
        assert msg.get("message-id")
        assert msg.get("subscription") == "s1"


def test_connect_with_no_common_version_is_refused(broker):
    with broker.raw() as raw:
        frame = raw.connect("2.0,3.1")
        assert frame.command == "ERROR", frame
        # STOMP 1.2 "Protocol Negotiation": the ERROR lists the versions the server speaks.
        assert set((frame.get("version") or "").split(",")) == {"1.0", "1.1", "1.2"}, frame
        raw.wait_closed()
        assert raw.eof
    still_works(broker)


def test_frame_before_connect_is_an_error(broker):
    with broker.raw() as raw:
        raw.send("SEND", {"destination": "/queue/early", "receipt": "r1"}, b"x", escape=False)
        assert_error_then_closed(raw)


def test_second_connect_is_an_error(broker):
    with broker.raw() as raw:
        assert raw.connect("1.2").command == "CONNECTED"
        raw.send("CONNECT", {"accept-version": "1.2", "host": "localhost"}, escape=False)
        assert_error_then_closed(raw)


def test_stomp_py_connects_in_every_version(broker, clients):
    for version in VERSIONS:
        c = clients(broker, version=version)
        q = unique("/queue/py")
        c.subscribe(q)
        c.send(q, f"hi {version}")
        [msg] = c.wait_messages(1)
        assert msg.body == f"hi {version}"


@pytest.fixture
def secure(make_broker):
    return make_broker(security=True, users={"alice": "wonderland", "bob": "builder"})


@pytest.mark.parametrize(
    "credentials",
    [{"login": "alice", "passcode": "nope"}, {"login": "mallory", "passcode": "x"}, {}],
    ids=["wrong-password", "unknown-user", "no-login"],
)
def test_authentication_failure_is_an_error(secure, raw_clients, credentials):
    raw = raw_clients(secure)
    frame = raw.connect("1.2", **credentials)
    assert frame.command == "ERROR", frame
    assert raw.wait_closed() == []
    # A good login on the same node works.
    ok = raw_clients(secure)
    assert ok.connect("1.2", login="bob", passcode="builder").command == "CONNECTED"


def test_authenticated_client_can_send_and_receive(secure, clients):
    c = clients(secure, login="alice", passcode="wonderland")
    q = unique("/queue/secure")
    c.subscribe(q)
    c.send(q, "hi")
    assert c.wait_messages(1)[0].body == "hi"


# --- SEND / SUBSCRIBE / MESSAGE / UNSUBSCRIBE ---------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_send_and_message_headers(broker, raw_clients, version):
    raw = raw_clients(broker)
    raw.connect(version)
    q = unique("/queue/hdr")
    sub = raw.receipt("SUBSCRIBE", {"destination": q, "id": "sub-1", "ack": "client"})
    assert sub.command == "RECEIPT"
    sent = raw.receipt(
        "SEND",
        [
            ("destination", q),
            ("x-color", "red"),
            ("x-count", "3"),
            ("persistent", "true"),
            ("priority", "7"),
        ],
        b"body",
    )
    assert sent.command == "RECEIPT"
    msg = raw.read_until("MESSAGE")
    assert msg.body == b"body"
    assert msg.get("destination") == q
    assert msg.get("subscription") == "sub-1"
    assert msg.get("message-id")
    assert msg.get("x-color") == "red"
    assert msg.get("x-count") == "3"
    assert msg.get("priority") == "7"
    assert msg.get("persistent") == "true"
    assert msg.get("redelivered") in (None, "false")
    if version == "1.2":
        # STOMP 1.2: a MESSAGE of a subscription with client acks carries an ack header.
        assert msg.get("ack"), msg
    # Not a header a client sent and not a broker control header leaks in.
    assert msg.get("receipt") is None


def test_subscribe_without_id_is_an_error_in_1_1_and_later(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send("SUBSCRIBE", [("destination", "/queue/noid"), ("receipt", "r-noid")])
    assert_error_then_closed(raw, receipt="r-noid")
    still_works(broker)


def test_subscribe_with_an_unknown_ack_mode_is_an_error(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send("SUBSCRIBE", [("destination", "/queue/x"), ("id", "1"), ("ack", "sometimes")])
    assert_error_then_closed(raw, contains="sometimes")


def test_duplicate_subscription_id_is_an_error(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2")
    assert raw.receipt("SUBSCRIBE", {"destination": "/queue/d1", "id": "same"}).command == "RECEIPT"
    raw.send("SUBSCRIBE", [("destination", "/queue/d2"), ("id", "same")])
    assert_error_then_closed(raw)


def test_1_0_subscription_without_id_uses_the_destination(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect(None)
    q = unique("/queue/ten")
    assert raw.receipt("SUBSCRIBE", {"destination": q}).command == "RECEIPT"
    assert raw.receipt("SEND", {"destination": q}, b"one").command == "RECEIPT"
    assert raw.read_until("MESSAGE").body == b"one"
    # UNSUBSCRIBE by destination (1.0) stops delivery.
    assert raw.receipt("UNSUBSCRIBE", {"destination": q}).command == "RECEIPT"
    assert raw.receipt("SEND", {"destination": q}, b"two").command == "RECEIPT"
    other = raw_clients(broker)
    other.connect("1.2")
    assert other.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"
    assert other.read_until("MESSAGE").body == b"two"
    assert not [f for f in raw.sync() if f.command == "MESSAGE"]


def test_unsubscribe_stops_delivery(broker, clients):
    c = clients(broker)
    q = unique("/queue/unsub")
    sub = c.subscribe(q)
    c.send(q, "before")
    c.wait_messages(1)
    c.unsubscribe(sub)
    c.send(q, "after")
    c.sync()
    assert [m.body for m in c.messages] == ["before"]
    # The message is not lost: the queue kept it for the next consumer.
    other = clients(broker)
    other.subscribe(q)
    assert [m.body for m in other.wait_messages(1)] == ["after"]


def test_unsubscribe_unknown_id_is_an_error(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send("UNSUBSCRIBE", [("id", "nope"), ("receipt", "r-u")])
    assert_error_then_closed(raw, receipt="r-u")


# --- ACK / NACK ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_ack_in_every_version(broker, raw_clients, version):
    q = unique("/queue/ack")
    raw = raw_clients(broker)
    raw.connect(version)
    assert (
        raw.receipt("SUBSCRIBE", {"destination": q, "id": "s", "ack": "client-individual"}).command
        == "RECEIPT"
    )
    for body in (b"a", b"b"):
        assert raw.receipt("SEND", {"destination": q}, body).command == "RECEIPT"
    first = raw.read_until("MESSAGE")
    second = raw.read_until("MESSAGE")
    assert (first.body, second.body) == (b"a", b"b")
    if version == "1.2":
        ack_headers = {"id": first.get("ack")}
    elif version == "1.1":
        ack_headers = {"message-id": first.get("message-id"), "subscription": "s"}
    else:
        ack_headers = {"message-id": first.get("message-id")}
    assert raw.receipt("ACK", ack_headers).command == "RECEIPT"
    raw.send("DISCONNECT", {"receipt": "bye"})
    raw.read_until("RECEIPT")
    raw.wait_closed()
    # Only the unacknowledged message comes back, marked redelivered.
    again = raw_clients(broker)
    again.connect("1.2")
    assert again.receipt("SUBSCRIBE", {"destination": q, "id": "s2"}).command == "RECEIPT"
    msg = again.read_until("MESSAGE")
    assert msg.body == b"b"
    assert msg.get("redelivered") == "true"
    assert not [f for f in again.sync() if f.command == "MESSAGE"]


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_nack_in_1_1_and_1_2_redelivers(broker, raw_clients, version):
    q = unique("/queue/nack")
    raw = raw_clients(broker)
    raw.connect(version)
    assert (
        raw.receipt("SUBSCRIBE", {"destination": q, "id": "s", "ack": "client-individual"}).command
        == "RECEIPT"
    )
    assert raw.receipt("SEND", {"destination": q}, b"n").command == "RECEIPT"
    first = raw.read_until("MESSAGE")
    if version == "1.2":
        nack = {"id": first.get("ack")}
    else:
        nack = {"message-id": first.get("message-id"), "subscription": "s"}
    raw.send("NACK", nack)
    again = raw.read_until("MESSAGE")
    assert again.body == b"n"
    assert again.get("redelivered") == "true"


def test_ack_of_unknown_message_is_an_error_with_receipt_id(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send("ACK", [("id", "no-such-ack"), ("receipt", "r-ack")])
    error = assert_error_then_closed(raw, receipt="r-ack")
    assert error.body, "ERROR frame should explain itself in the body too"
    still_works(broker)


# --- BEGIN / COMMIT / ABORT ---------------------------------------------------------------------


def test_begin_commit_abort_frames(broker, raw_clients):
    q = unique("/queue/tx")
    raw = raw_clients(broker)
    raw.connect("1.2")
    assert raw.receipt("BEGIN", {"transaction": "t1"}).command == "RECEIPT"
    assert (
        raw.receipt("SEND", {"destination": q, "transaction": "t1"}, b"in-tx").command == "RECEIPT"
    )
    assert raw.receipt("COMMIT", {"transaction": "t1"}).command == "RECEIPT"
    assert raw.receipt("BEGIN", {"transaction": "t2"}).command == "RECEIPT"
    assert (
        raw.receipt("SEND", {"destination": q, "transaction": "t2"}, b"aborted").command
        == "RECEIPT"
    )
    assert raw.receipt("ABORT", {"transaction": "t2"}).command == "RECEIPT"
    assert raw.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"
    assert raw.read_until("MESSAGE").body == b"in-tx"
    assert not [f for f in raw.sync() if f.command == "MESSAGE"]


@pytest.mark.parametrize(
    ("frames", "why"),
    [
        ([("COMMIT", {"transaction": "never-begun"})], "commit of an unknown transaction"),
        ([("ABORT", {"transaction": "never-begun"})], "abort of an unknown transaction"),
        ([("BEGIN", {})], "begin without a transaction header"),
        ([("BEGIN", {"transaction": "t"}), ("BEGIN", {"transaction": "t"})], "begin twice"),
        (
            [("SEND", {"destination": "/queue/x", "transaction": "never-begun"})],
            "send in unknown tx",
        ),
    ],
)
def test_transaction_misuse_is_an_error(broker, raw_clients, frames, why):
    raw = raw_clients(broker)
    raw.connect("1.2")
    for command, headers in frames:
        raw.send(command, headers)
    assert_error_then_closed(raw)


# --- DISCONNECT / RECEIPT -----------------------------------------------------------------------


def test_disconnect_receipt_comes_after_earlier_frames_took_effect(broker, raw_clients):
    q = unique("/queue/disc")
    raw = raw_clients(broker)
    raw.connect("1.2")
    # Frames without receipts, then DISCONNECT with one: the RECEIPT means they all happened.
    for i in range(20):
        raw.send("SEND", {"destination": q}, str(i).encode())
    raw.send("DISCONNECT", {"receipt": "goodbye"})
    receipt = raw.read_frame()
    assert receipt is not None, receipt
    assert receipt.command == "RECEIPT", receipt
    assert receipt.get("receipt-id") == "goodbye"
    assert raw.wait_closed() == []  # and then the broker closes the connection
    consumer = raw_clients(broker)
    consumer.connect("1.2")
    assert consumer.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"
    bodies = [consumer.read_until("MESSAGE").body for _ in range(20)]
    assert bodies == [str(i).encode() for i in range(20)]


def test_stomp_py_disconnect_with_receipt(broker, clients):
    c = clients(broker)
    c.conn.disconnect(receipt="dr-1")  # stomp.py waits for this RECEIPT
    # stomp.py's own waiter may release disconnect() before our listener has recorded it.
    wait_for(lambda: "dr-1" in c.receipts, message="RECEIPT dr-1")
    wait_for(c.listener.disconnected.is_set, message="broker to close after DISCONNECT")


# --- header escaping ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "name", "value"),
    [
        ("1.1", "x-key", "multi\nline"),
        ("1.1", "x:colon", "a:b:c"),
        ("1.1", "x-back", "C:\\temp\\new"),
        ("1.2", "x-cr", "carriage\rreturn"),
        ("1.2", "we:ird\\na\nme", "all:\\of\r\nthem"),
        ("1.2", "x-unicode", "héllo wörld ✓"),
    ],
)
def test_header_escaping_round_trip(broker, raw_clients, version, name, value):
    q = unique("/queue/esc")
    consumer = raw_clients(broker)
    consumer.connect(version)
    assert consumer.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"
    producer = raw_clients(broker)
    producer.connect(version)
    assert producer.receipt("SEND", [("destination", q), (name, value)], b"e").command == "RECEIPT"
    msg = consumer.read_until("MESSAGE")
    assert msg.get(name) == value, msg


def test_1_0_headers_are_not_unescaped(broker, raw_clients):
    q = unique("/queue/esc10")
    consumer = raw_clients(broker)
    consumer.connect(None)
    assert consumer.receipt("SUBSCRIBE", {"destination": q}).command == "RECEIPT"
    producer = raw_clients(broker)
    producer.connect(None)
    # In 1.0 a backslash is just a backslash and a value may contain colons.
    producer.send("SEND", [("destination", q), ("x-path", "C:\\new\\c")], b"p", escape=False)
    msg = consumer.read_until("MESSAGE")
    assert msg.get("x-path") == "C:\\new\\c", msg


def test_undefined_escape_is_an_error(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send_bytes(b"SEND\ndestination:/queue/x\nx-bad:tab\\there\n\nbody\x00")
    assert_error_then_closed(raw)
    still_works(broker)


# --- bodies -------------------------------------------------------------------------------------


def test_binary_body_with_nuls_via_content_length(broker, raw_clients):
    q = unique("/queue/bin")
    body = bytes(range(256)) * 4 + b"\x00\x00end\x00"
    consumer = raw_clients(broker)
    consumer.connect("1.2")
    assert consumer.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"
    producer = raw_clients(broker)
    producer.connect("1.2")
    reply = producer.receipt("SEND", [("destination", q), ("content-length", str(len(body)))], body)
    assert reply.command == "RECEIPT", reply
    msg = consumer.read_until("MESSAGE")
    assert msg.body == body
    assert msg.get("content-length") == str(len(body))


@pytest.mark.parametrize("body", [b"", "grüße ✓".encode(), b"x" * 100_000])
def test_text_bodies_round_trip(broker, raw_clients, body):
    q = unique("/queue/text")
    raw = raw_clients(broker)
    raw.connect("1.2")
    assert raw.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"
    assert raw.receipt("SEND", {"destination": q}, body).command == "RECEIPT"
    assert raw.read_until("MESSAGE").body == body


# --- ERROR and close ----------------------------------------------------------------------------


def test_unknown_command_is_an_error_and_closes(broker, raw_clients):
    bystander = raw_clients(broker)
    bystander.connect("1.2")
    q = unique("/queue/bystander")
    assert bystander.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send("FROBNICATE", {"receipt": "r-frob"})
    assert_error_then_closed(raw)
    assert bystander.receipt("SEND", {"destination": q}, b"still here").command == "RECEIPT"
    assert bystander.read_until("MESSAGE").body == b"still here"


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (b"SEND\ndestination /queue/x\n\nbody\x00", "header line without a colon"),
        (b"SEND\ndestination:/queue/x\ncontent-length:abc\n\nbody\x00", "bad content-length"),
        (b"SEND\ndestination:/queue/x\ncontent-length:2\n\nbody\x00", "content-length too short"),
        (b"SEND\ndestination:/queue/x\nx-bad:\xff\xfe\n\nbody\x00", "header not UTF-8"),
        (b"SEND\ndestination:/queue/x\n\n\xff\xfe\x00", None),  # binary body is fine: control
    ],
)
def test_malformed_frames(broker, raw_clients, frame, why):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send_bytes(frame)
    if why is None:
        assert raw.receipt("BEGIN", {"transaction": "t"}).command == "RECEIPT"
        return
    assert_error_then_closed(raw)
    still_works(broker)


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no destination
        {"destination": ""},
        {"destination": "::queue-only"},
        {"destination": "no-prefix", "destination-type": "BROADCAST"},
        {"destination": "/queue/ok", "priority": "high"},
    ],
    ids=["missing", "empty", "fqqn-without-address", "bad-routing-type", "bad-priority"],
)
def test_bad_send_is_an_error_with_receipt_id(broker, raw_clients, headers):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send("SEND", {**headers, "receipt": "r-bad"}, b"x")
    assert_error_then_closed(raw, receipt="r-bad")
    still_works(broker)


def test_send_to_a_missing_fqqn_queue_is_an_error(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send("SEND", {"destination": "nowhere::nothing", "receipt": "r-fq"}, b"x")
    assert_error_then_closed(raw, receipt="r-fq")


def test_bad_selector_is_an_error(broker, raw_clients):
    raw = raw_clients(broker)
    raw.connect("1.2")
    raw.send(
        "SUBSCRIBE",
        {"destination": "/queue/sel", "id": "s", "selector": "color = = 'red'", "receipt": "r-sel"},
    )
    assert_error_then_closed(raw, receipt="r-sel")


# --- frame limits -------------------------------------------------------------------------------

LIMITS = (
    ";stompMaxBodySize=1024;stompMaxHeaders=10;stompMaxHeaderLength=256;stompMaxHeadersSize=1024"
)


@pytest.fixture
def limited(make_broker):
    """A node whose 'stomp' acceptor has small frame limits and a 'roomy' one with defaults."""
    return make_broker(acceptor_params=LIMITS, extra_acceptors={"roomy": ""})


def _headers(n: int, value_len: int = 10) -> list[tuple[str, str]]:
    return [(f"x-h{i:02d}", "v" * value_len) for i in range(n)]


@pytest.mark.parametrize(
    ("name", "ok", "too_big"),
    [
        # body: 1024 bytes is the limit
        ("body", (b"b" * 1024, []), (b"b" * 1025, [])),
        # header count: destination + receipt + content-length + 7 = 10
        ("count", (b"", _headers(7)), (b"", _headers(8))),
        # header line: "x-long:" (7) + 249 = 256 bytes
        ("line", (b"", [("x-long", "v" * 249)]), (b"", [("x-long", "v" * 250)])),
        # all header lines together: 3 x 206 bytes + the rest is under 1024, 6 x 206 is over
        ("total", (b"", _headers(3, 200)), (b"", _headers(6, 200))),
    ],
)
def test_frame_over_a_limit_is_an_error_and_others_keep_working(
    limited, raw_clients, name, ok, too_big
):
    q = unique("/queue/lim")
    bystander = raw_clients(limited)
    bystander.connect("1.2")
    assert bystander.receipt("SUBSCRIBE", {"destination": q, "id": "s"}).command == "RECEIPT"

    raw = raw_clients(limited)
    raw.connect("1.2")
    body, headers = ok
    reply = raw.receipt(
        "SEND", [("destination", q), *headers, ("content-length", str(len(body)))], body
    )
    assert reply.command == "RECEIPT", f"a frame at the {name} limit must be accepted: {reply!r}"
    assert bystander.read_until("MESSAGE").body == body

    body, headers = too_big
    raw.send(
        "SEND",
        [("destination", q), *headers, ("content-length", str(len(body))), ("receipt", "r-big")],
        body,
    )
    assert_error_then_closed(raw)

    # Other connections on the same acceptor and on another acceptor are undisturbed.
    assert bystander.receipt("SEND", {"destination": q}, b"after").command == "RECEIPT"
    assert bystander.read_until("MESSAGE").body == b"after"
    still_works(limited, limited.extra_ports["roomy"])
    # The roomy acceptor takes what the small one refused.
    roomy = raw_clients(limited.extra_ports["roomy"])
    roomy.connect("1.2")
    body, headers = too_big
    reply = roomy.receipt(
        "SEND", [("destination", q), *headers, ("content-length", str(len(body)))], body
    )
    assert reply.command == "RECEIPT", reply


def test_body_limit_without_content_length(limited, raw_clients):
    raw = raw_clients(limited)
    raw.connect("1.2")
    raw.send("SEND", {"destination": "/queue/nolen"}, b"z" * 5000)
    assert_error_then_closed(raw)
    still_works(limited)
