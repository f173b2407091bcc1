"""STOMP framing: decoding, encoding, escaping per version, limits, drip-feeding, stomp.py bytes."""

from __future__ import annotations

import time

import pytest

from artemis_py.exceptions import ArtemisError
from artemis_py.protocol.stomp import (
    CLIENT,
    NEED_DATA,
    PAUSED,
    SERVER,
    Command,
    Connection,
    ConnectionClosed,
    ConnectionState,
    Frame,
    FrameLimits,
    Heartbeat,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    error_frame,
    negotiate_version,
)

# --- helpers -----------------------------------------------------------------------------


def drain(conn: Connection, events: list[object]) -> None:
    """Append every available event; a server accepts each CONNECT with the best version."""
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return
        if event is PAUSED:
            connect = next(
                e
                for e in reversed(events)
                if isinstance(e, Frame) and e.command in ("CONNECT", "STOMP")
            )
            assert isinstance(connect, Frame)
            conn.accept_connect(negotiate_version(connect.get("accept-version")))
            continue
        events.append(event)
        if isinstance(event, ConnectionClosed):
            return


def server_events(*chunks: bytes) -> list[object]:
    """What a server connection makes of ``chunks`` (b"" closes)."""
    conn = Connection(SERVER)
    events: list[object] = []
    for chunk in chunks:
        conn.receive_data(chunk)
        drain(conn, events)
    return events


def connect_bytes(version: str | None) -> bytes:
    if version is None:
        return b"CONNECT\nlogin:guest\n\n\x00"
    return f"CONNECT\naccept-version:{version}\nhost:localhost\n\n\x00".encode()


def after_connect(version: str | None, payload: bytes) -> list[object]:
    """Events of ``payload`` sent by a client that negotiated ``version`` (None: 1.0 client)."""
    events = server_events(connect_bytes(version) + payload)
    assert isinstance(events[0], Frame)
    assert events[0].command == "CONNECT"
    return events[1:]


def handshake(version: str) -> tuple[Connection, Connection]:
    """A client and a server connection that negotiated ``version``."""
    client, server = Connection(CLIENT), Connection(SERVER)
    if version == "1.0":
        connect = Frame("CONNECT", (("login", "guest"),))
        connected = Frame("CONNECTED", (("session", "s-1"),))
    else:
        connect = Frame("STOMP", (("accept-version", "1.0,1.1,1.2"), ("host", "localhost")))
        connected = Frame("CONNECTED", (("version", version), ("heart-beat", "0,0")))
    server.receive_data(client.send(connect))
    assert server.next_event() == connect
    assert server.next_event() is PAUSED
    server.accept_connect(version)
    client.receive_data(server.send(connected))
    assert client.next_event() == connected
    assert client.version == server.version == version
    return client, server


def transfer(sender: Connection, receiver: Connection, frame: Frame) -> object:
    receiver.receive_data(sender.send(frame))
    event = receiver.next_event()
    assert receiver.next_event() is NEED_DATA
    return event


VERSIONS = ("1.0", "1.1", "1.2")

CLIENT_FRAMES = [
    Frame("SEND", (("destination", "/queue/a"), ("content-type", "text/plain")), b"hello"),
    Frame("SEND", (("destination", "/queue/a"), ("content-length", "3")), b"\x00\x01\x00"),
    Frame("SEND", (("destination", "/queue/a"),), b""),
    Frame("SUBSCRIBE", (("destination", "/queue/a"), ("id", "0"), ("ack", "client"))),
    Frame("UNSUBSCRIBE", (("id", "0"),)),
    Frame("ACK", (("id", "12345"), ("transaction", "tx1"))),
    Frame("NACK", (("id", "12345"),)),
    Frame("BEGIN", (("transaction", "tx1"),)),
    Frame("COMMIT", (("transaction", "tx1"),)),
    Frame("ABORT", (("transaction", "tx1"),)),
    Frame("DISCONNECT", (("receipt", "77"),)),
]
SERVER_FRAMES = [
    Frame(
        "MESSAGE",
        (("subscription", "0"), ("message-id", "007"), ("destination", "/queue/a")),
        b"hello queue a",
    ),
    Frame("MESSAGE", (("subscription", "0"), ("content-length", "2")), b"\x00\x00"),
    Frame("RECEIPT", (("receipt-id", "77"),)),
    Frame("ERROR", (("message", "malformed frame received"),), b"details"),
]


# --- round trips -------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("frame", CLIENT_FRAMES, ids=lambda f: f.command)
def test_client_frames_round_trip(version: str, frame: Frame) -> None:
    client, server = handshake(version)
    assert transfer(client, server, frame) == frame


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("frame", SERVER_FRAMES, ids=lambda f: f.command)
def test_server_frames_round_trip(version: str, frame: Frame) -> None:
    client, server = handshake(version)
    assert transfer(server, client, frame) == frame


def test_connect_frames_round_trip() -> None:
    for connect in (
        Frame("CONNECT", (("accept-version", "1.2"), ("host", "h"), ("login", "u"))),
        Frame("STOMP", (("accept-version", "1.1,1.2"), ("host", "h"), ("heart-beat", "0,0"))),
        Frame("CONNECT", (("login", "u"), ("passcode", "p"))),
    ):
        client, server = Connection(CLIENT), Connection(SERVER)
        server.receive_data(client.send(connect))
        assert server.next_event() == connect
        assert server.next_event() is PAUSED


def test_encoding_is_exact() -> None:
    client, _ = handshake("1.2")
    frame = Frame("SEND", (("destination", "/q"), ("content-length", "2")), b"hi")
    assert client.send(frame) == b"SEND\ndestination:/q\ncontent-length:2\n\nhi\x00"
    assert client.send(Frame("DISCONNECT")) == b"DISCONNECT\n\n\x00"


# --- escaping ----------------------------------------------------------------------------


def test_escaping_11() -> None:
    client, server = handshake("1.1")
    frame = Frame("SEND", (("a:b\\c\nd", "x:y\\z\nw"), ("cr", "mid\rdle")))
    data = client.send(frame)
    assert data == b"SEND\na\\cb\\\\c\\nd:x\\cy\\\\z\\nw\ncr:mid\rdle\n\n\x00"
    server.receive_data(data)
    assert server.next_event() == frame


def test_escaping_12() -> None:
    client, server = handshake("1.2")
    frame = Frame("SEND", (("k", "a:b\\c\nd\re"), ("\r", "")))
    data = client.send(frame)
    assert data == b"SEND\nk:a\\cb\\\\c\\nd\\re\n\\r:\n\n\x00"
    server.receive_data(data)
    assert server.next_event() == frame


def test_no_escaping_in_10() -> None:
    client, server = handshake("1.0")
    frame = Frame("SEND", (("k", "a:b\\c\\n"),))
    data = client.send(frame)
    assert data == b"SEND\nk:a:b\\c\\n\n\n\x00"
    server.receive_data(data)
    assert server.next_event() == frame  # backslashes stay as they are


@pytest.mark.parametrize(
    ("headers", "complaint"),
    [
        ((("k", "line\nbreak"),), "LF"),
        ((("k:", "v"),), "':'"),
        ((("", "v"),), "non-empty"),
        ((("k", "ends in CR\r"),), "CR"),
    ],
)
def test_10_refuses_what_it_cannot_carry(
    headers: tuple[tuple[str, str], ...], complaint: str
) -> None:
    client, _ = handshake("1.0")
    with pytest.raises(LocalProtocolError, match=complaint):
        client.send(Frame("SEND", headers))
    assert client.our_state is ConnectionState.ERROR


def test_11_refuses_value_ending_in_cr() -> None:
    client, _ = handshake("1.1")
    with pytest.raises(LocalProtocolError, match="CR"):
        client.send(Frame("SEND", (("k", "v\r"),)))


@pytest.mark.parametrize(
    ("version", "line"),
    [
        ("1.1", b"k:a\\rb"),  # \r is only defined from 1.2 on
        ("1.1", b"k:a\\tb"),
        ("1.2", b"k:a\\tb"),
        ("1.2", b"k\\x:v"),
        ("1.2", b"k:trailing\\"),
    ],
)
def test_undefined_escape_is_fatal(version: str, line: bytes) -> None:
    with pytest.raises(RemoteProtocolError, match="undefined escape"):
        after_connect(version, b"SEND\n" + line + b"\n\n\x00")


def test_connect_and_connected_are_never_escaped() -> None:
    client, server = Connection(CLIENT), Connection(SERVER)
    connect = Frame("STOMP", (("accept-version", "1.2"), ("host", "h"), ("passcode", "a:b\\n")))
    data = client.send(connect)
    assert b"\npasscode:a:b\\n\n" in data
    server.receive_data(data)
    assert server.next_event() == connect
    server.accept_connect("1.2")
    connected = Frame("CONNECTED", (("version", "1.2"), ("server", "x:y\\z")))
    data = server.send(connected)
    assert b"\nserver:x:y\\z\n" in data
    client.receive_data(data)
    assert client.next_event() == connected
    # ...so they cannot carry line breaks, whatever the version.
    with pytest.raises(LocalProtocolError, match="LF"):
        Connection(CLIENT).send(Frame("CONNECT", (("accept-version", "1.2"), ("login", "a\nb"))))


def test_10_trims_leading_whitespace_of_values() -> None:
    # Artemis's 1.0 decoder drops spaces and tabs after the colon; 1.1/1.2 keep them.
    payload = b"SEND\ndestination: \t/queue/a \n\n\x00"
    assert after_connect(None, payload) == [Frame("SEND", (("destination", "/queue/a "),))]
    assert after_connect("1.1", payload) == [Frame("SEND", (("destination", " \t/queue/a "),))]
    assert after_connect("1.2", payload) == [Frame("SEND", (("destination", " \t/queue/a "),))]


def test_connect_is_read_by_its_own_version() -> None:
    # A CONNECT without accept-version is a 1.0 frame (trimmed); with it, it is taken as is.
    [connect] = server_events(b"CONNECT\nlogin: guest\n\n\x00")
    assert connect == Frame("CONNECT", (("login", "guest"),))
    [connect] = server_events(b"CONNECT\naccept-version:1.2\nlogin: guest\n\n\x00")
    assert isinstance(connect, Frame)
    assert connect.get("login") == " guest"


# --- bodies ------------------------------------------------------------------------------


def test_content_length_body_may_contain_nul() -> None:
    payload = b"SEND\ndestination:/q\ncontent-length:5\n\na\x00b\x00c\x00"
    assert after_connect("1.2", payload) == [
        Frame("SEND", (("destination", "/q"), ("content-length", "5")), b"a\x00b\x00c")
    ]


def test_content_length_zero() -> None:
    payload = b"SEND\ncontent-length:0\n\n\x00"
    assert after_connect("1.2", payload) == [Frame("SEND", (("content-length", "0"),))]


def test_body_without_content_length_ends_at_first_nul() -> None:
    payload = b"SEND\ndestination:/q\n\nhello\nworld\x00SEND\ndestination:/r\n\n\x00"
    assert after_connect("1.1", payload) == [
        Frame("SEND", (("destination", "/q"),), b"hello\nworld"),
        Frame("SEND", (("destination", "/r"),)),
    ]


def test_content_length_must_be_followed_by_nul() -> None:
    with pytest.raises(RemoteProtocolError, match="not followed by NUL"):
        after_connect("1.2", b"SEND\ncontent-length:2\n\nabc\x00")


@pytest.mark.parametrize("value", [b"-1", b"abc", b"", b"+5", b"0x10", b"1.5", b"\xd9\xa3", b" 5"])
def test_bad_content_length(value: bytes) -> None:
    with pytest.raises(RemoteProtocolError, match="content-length must be a non-negative integer"):
        after_connect("1.2", b"SEND\ncontent-length:" + value + b"\n\n\x00")


def test_first_content_length_wins() -> None:
    payload = b"SEND\ncontent-length:3\ncontent-length:1\n\na\x00b\x00"
    [frame] = after_connect("1.2", payload)
    assert isinstance(frame, Frame)
    assert frame.body == b"a\x00b"
    assert frame.get_all("content-length") == ("3", "1")


# --- line endings, repeated headers, heart-beats -----------------------------------------


@pytest.mark.parametrize("version", [None, "1.1", "1.2"])
def test_crlf_is_accepted_in_every_version(version: str | None) -> None:
    lf = b"SEND\ndestination:/q\nreceipt:1\n\nbody\r\n\x00"
    crlf = b"SEND\r\ndestination:/q\r\nreceipt:1\r\n\r\nbody\r\n\x00"
    assert after_connect(version, crlf) == after_connect(version, lf)
    assert after_connect(version, crlf) == [
        Frame("SEND", (("destination", "/q"), ("receipt", "1")), b"body\r\n")
    ]


def test_crlf_connect() -> None:
    events = server_events(b"STOMP\r\naccept-version:1.2\r\nhost:h\r\n\r\n\x00")
    assert events == [Frame("STOMP", (("accept-version", "1.2"), ("host", "h")))]


def test_repeated_headers_first_wins() -> None:
    payload = b"MESSAGE\nfoo:World\nfoo:I am\n\n\x00"
    client, _ = handshake("1.2")
    client.receive_data(payload)
    frame = client.next_event()
    assert isinstance(frame, Frame)
    assert frame.headers == (("foo", "World"), ("foo", "I am"))
    assert frame.get("foo") == "World"
    assert frame.get_all("foo") == ("World", "I am")
    assert frame.get("bar") is None
    assert frame.get("bar", "default") == "default"


def test_heartbeats_between_frames() -> None:
    payload = b"\n\r\nSEND\n\n\x00\n\r\n\nSEND\n\nx\x00\r\n"
    assert after_connect("1.2", payload) == [
        Heartbeat(),
        Heartbeat(),
        Frame("SEND"),
        Heartbeat(),
        Heartbeat(),
        Heartbeat(),
        Frame("SEND", (), b"x"),
        Heartbeat(),
    ]


def test_heartbeat_before_connect() -> None:
    events = server_events(b"\n" + connect_bytes("1.2"))
    assert isinstance(events[0], Heartbeat)


def test_cr_without_lf_between_frames() -> None:
    with pytest.raises(RemoteProtocolError, match="CR not followed by LF"):
        after_connect("1.2", b"\rSEND\n\n\x00")


# --- malformed input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "complaint"),
    [
        (b"FOO\n\n\x00", "unknown command 'FOO'"),
        (b"send\n\n\x00", "unknown command 'send'"),
        (b"MESSAGE\n\n\x00", "MESSAGE frames may not be sent to this side"),
        (b"SEND \n\n\x00", "unknown command"),
        (b"SEND\ndestination\n\n\x00", "header line without ':'"),
        (b"SEND\n:value\n\n\x00", "empty name"),
        (b"SEND\nk:\xff\xfe\n\n\x00", "not valid UTF-8"),
        (b"SEND\nk:\xc3\n\n\x00", "not valid UTF-8"),
    ],
)
def test_malformed_frames(payload: bytes, complaint: str) -> None:
    with pytest.raises(RemoteProtocolError, match=complaint):
        after_connect("1.2", payload)


def test_utf8_headers() -> None:
    payload = "SEND\nclé:välue ☃\n\n\x00".encode()
    assert after_connect("1.2", payload) == [Frame("SEND", (("clé", "välue ☃"),))]


def test_end_of_stream() -> None:
    conn = Connection(SERVER)
    conn.receive_data(b"")
    assert conn.next_event() == ConnectionClosed()
    assert conn.next_event() == ConnectionClosed()
    assert conn.their_state is ConnectionState.CLOSED
    with pytest.raises(LocalProtocolError):
        conn.receive_data(b"more")
    conn.receive_data(b"")  # repeating the end is harmless


def test_end_of_stream_mid_frame() -> None:
    for partial in (b"SEND\ndestination:/q\n\nhal", b"SEND\n", b"SE", b"\r"):
        with pytest.raises(RemoteProtocolError, match="closed in the middle of a frame"):
            server_events(connect_bytes("1.2") + partial, b"")


# --- limits ------------------------------------------------------------------------------

SMALL = FrameLimits(
    max_command_length=16,
    max_header_line_length=32,
    max_header_count=3,
    max_header_bytes=60,
    max_body_size=100,
)


def feed_until_error(payload: bytes, limits: FrameLimits = SMALL) -> tuple[int, ProtocolError]:
    """Feed a connected server one byte at a time; where (byte count) did it fail, and how."""
    conn = Connection(SERVER, limits)
    conn.receive_data(connect_bytes("1.2"))
    drain(conn, [])
    for index in range(len(payload)):
        conn.receive_data(payload[index : index + 1])
        try:
            drain(conn, [])
        except RemoteProtocolError as exc:
            assert conn.their_state is ConnectionState.ERROR
            # The connection stays failed: it raises again and ignores further bytes.
            with pytest.raises(RemoteProtocolError, match="already failed"):
                conn.next_event()
            conn.receive_data(b"SEND\n\n\x00")
            with pytest.raises(RemoteProtocolError):
                conn.next_event()
            # We can still report it.
            assert conn.send(error_frame(exc.message)).startswith(b"ERROR\nmessage:")
            return index + 1, exc
    raise AssertionError("no error")


def endless(prefix: bytes, filler: bytes = b"x") -> bytes:
    return prefix + filler * 10_000


@pytest.mark.parametrize(
    ("payload", "fails_by", "complaint"),
    [
        (endless(b""), 18, "command line longer than 16 bytes"),
        (endless(b"SEND\nk:"), 5 + 34, "header line longer than 32 bytes"),
        (b"SEND\n" + b"a:1\n" * 4 + b"\n\x00", 5 + 16, "more than 3 headers"),
        (
            b"SEND\n" + b"k:" + b"x" * 28 + b"\n" + endless(b"k:"),
            5 + 31 + 33,
            "frame headers larger than 60 bytes",
        ),
        (endless(b"SEND\n\n", b"y"), 6 + 101, "frame body larger than 100 bytes"),
        (endless(b"SEND\ncontent-length:101\n\n"), 25, "exceeds the maximum frame body size"),
    ],
    ids=["command", "header-line", "header-count", "header-bytes", "body", "content-length"],
)
def test_limits_fail_while_data_arrives(payload: bytes, fails_by: int, complaint: str) -> None:
    where, exc = feed_until_error(payload)
    assert complaint in exc.message
    assert where <= fails_by, "the limit must trip without waiting for the end of the line/body"
    assert "\n" not in exc.message


@pytest.mark.parametrize(
    "payload",
    [
        b"SEND\n" + b"a:1\n" * 4 + b"\n\x00",
        b"SEND\nk:" + b"x" * 31 + b"\n\n\x00",
        b"SEND\nk:" + b"x" * 28 + b"\nl:" + b"y" * 28 + b"\nm:" + b"z" * 5 + b"\n\n\x00",
    ],
    ids=["header-count", "header-line", "header-bytes"],
)
def test_limits_fail_the_same_on_a_whole_frame(payload: bytes) -> None:
    # A complete header block is checked as a whole first (the reader's fast path); over a
    # limit it must fail with the same complaint as when the bytes trickle in.
    _, dripped = feed_until_error(payload)
    conn = Connection(SERVER, SMALL)
    conn.receive_data(connect_bytes("1.2") + payload)
    with pytest.raises(RemoteProtocolError) as whole:
        drain(conn, [])
    assert whole.value.message == dripped.message


@pytest.mark.parametrize(
    "payload",
    [
        b"SEND\ndestination:/queue/a\n\nbody\n\nmore\x00",
        b"SEND\r\ndestination:/queue/a\r\n\r\nbody\n\nmore\x00",
        b"SEND\ndestination:/queue/a\r\nx:y\n\r\nbody\n\n\x00",
        b"SEND\n\nbody\n\n\x00",
        b"SEND\r\n\r\n\n\n\x00",
        b"SEND\ncontent-length:4\n\n\n\n\x00\n\x00",
    ],
    ids=["lf", "crlf", "mixed", "no-headers", "crlf-no-headers", "content-length"],
)
def test_whole_and_dripped_frames_decode_alike(payload: bytes) -> None:
    whole = server_events(connect_bytes("1.2") + payload + payload)
    dripped = server_events(connect_bytes("1.2"), *(bytes([b]) for b in payload + payload))
    assert whole == dripped
    frames = [e for e in whole if isinstance(e, Frame) and e.command == "SEND"]
    assert len(frames) == 2


def test_limits_allow_exactly_the_maximum() -> None:
    payload = (
        b"SEND\n"
        + b"k:"
        + b"x" * 30  # a 32-byte header line
        + b"\r\nl:"
        + b"y" * 24  # 60 header bytes in all
        + b"\nm:\n\n"  # the third header
        + b"z" * 100
        + b"\x00"
    )
    conn = Connection(SERVER, SMALL)
    conn.receive_data(connect_bytes("1.2"))
    drain(conn, [])
    for index in range(len(payload)):  # one byte at a time: the partial checks must not trip
        conn.receive_data(payload[index : index + 1])
        events: list[object] = []
        drain(conn, events)
    assert events == [Frame("SEND", (("k", "x" * 30), ("l", "y" * 24), ("m", "")), b"z" * 100)]


def test_limits_validate() -> None:
    with pytest.raises(ValueError, match="max_body_size"):
        FrameLimits(max_body_size=0)
    assert FrameLimits().max_body_size == 100 * 1024 * 1024


def test_errors_are_artemis_errors() -> None:
    assert issubclass(RemoteProtocolError, ArtemisError)
    assert issubclass(LocalProtocolError, ProtocolError)
    assert RemoteProtocolError("two\nlines\r").message == "two lines "


@pytest.mark.parametrize("where", ["header line", "body"])
def test_slow_senders_cost_linear_time(where: str) -> None:
    # 8 MiB in 256-byte pieces: resuming each search where the last one stopped costs
    # ~32k short searches; re-scanning from the frame start would be ~130 GB of memchr.
    size, piece = 8 * 1024 * 1024, 256
    limits = FrameLimits(max_header_line_length=2 * size, max_header_bytes=2 * size)
    if where == "body":
        head, filler, tail = b"SEND\n\n", b"b", b"\x00"
    else:
        head, filler, tail = b"SEND\nk:", b"h", b"\n\n\x00"
    conn = Connection(SERVER, limits)
    conn.receive_data(connect_bytes("1.2"))
    drain(conn, [])
    conn.receive_data(head)
    chunk = filler * piece
    started = time.perf_counter()
    for _ in range(size // piece):
        conn.receive_data(chunk)
        assert conn.next_event() is NEED_DATA
    conn.receive_data(tail)
    event = conn.next_event()
    elapsed = time.perf_counter() - started
    assert isinstance(event, Frame)
    assert len(event.body) == size or len(event.headers[0][1]) == size
    assert elapsed < 3.0, f"{elapsed:.1f} s: the decoder re-scans buffered bytes"


# --- drip-feeding ------------------------------------------------------------------------

STOMPPY_12 = (
    b"STOMP\naccept-version:1.2\nheart-beat:10000,10000\nhost:localhost\nlogin:guest\n"
    b"passcode:guest\n\n\x00"
    b"SEND\ncontent-length:11\ndestination:/queue/test\nx-note:a\\cb\\\\c\\nd\n\nhello\x00world\x00"
    b"SUBSCRIBE\nack:client-individual\ndestination:/queue/test\nid:sub-1\n\n\x00"
    b"ACK\nid:msg-1\n\n\x00"
    b"DISCONNECT\nreceipt:disc-1\n\n\x00"
)
STOMPPY_11 = (
    b"STOMP\naccept-version:1.1\nheart-beat:10000,10000\nhost:localhost\nlogin:guest\n"
    b"passcode:guest\n\n\x00"
    b"SEND\ncontent-length:11\ndestination:/queue/test\nx-note:a\\cb\\\\c\\nd\n\nhello\x00world\x00"
    b"SUBSCRIBE\nack:client-individual\ndestination:/queue/test\nid:sub-1\n\n\x00"
    b"ACK\nmessage-id:msg-1\nsubscription:sub-1\n\n\x00"
    b"DISCONNECT\nreceipt:disc-1\n\n\x00"
)

STREAMS = {
    "stomp.py-1.2": STOMPPY_12,  # see test_stomppy_capture
    "mixed-1.2": b"\n"
    + connect_bytes("1.2")
    + b"SEND\r\ndestination:/q\r\ncontent-length:4\r\n\r\n\x00\x01\x02\x03\x00\r\n"
    + b"SUBSCRIBE\nid:0\ndestination:/q\nk:a\\cb\\\\c\\nd\\re\n\n\x00\n\n"
    + b"SEND\nfoo:1\nfoo:2\n\nno length\x00"
    + b"DISCONNECT\nreceipt:9\n\n\x00\n",
    "mixed-1.0": b"CONNECT\nlogin: guest\npasscode:secret\n\n\x00"
    + b"SEND\ndestination: /queue/a\n\nhello\x00\n"
    + b"SEND\ncontent-length:3\n\n\x00\x00\x00\x00",
    "mixed-1.1": connect_bytes("1.1")
    + b"BEGIN\ntransaction:t\n\n\x00ACK\nmessage-id:1\nsubscription:0\ntransaction:t\n\n\x00"
    + b"COMMIT\ntransaction:t\n\n\x00NACK\nmessage-id:2\nsubscription:0\n\n\x00",
}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_drip_feed_every_chunk_size(name: str) -> None:
    stream = STREAMS[name]
    whole = server_events(stream, b"")
    assert isinstance(whole[-1], ConnectionClosed)
    assert len([e for e in whole if isinstance(e, Frame)]) >= 3
    for size in range(1, len(stream) + 1):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert server_events(*chunks, b"") == whole, f"chunk size {size}"


SERVER_STREAM = (
    b"CONNECTED\r\nversion:1.2\r\nheart-beat:0,0\r\n\r\n\x00\n"
    b"MESSAGE\nsubscription:0\nmessage-id:1\ndestination:/q\ncontent-length:3\n\na\x00b\x00\n"
    b"MESSAGE\nsubscription:0\nmessage-id:2\nk:x\\cy\\nz\n\ntext\x00"
    b"RECEIPT\nreceipt-id:7\n\n\x00"
    b"ERROR\nmessage:bye\ncontent-length:4\n\nbye!\x00\n"
)


def client_events(*chunks: bytes) -> list[object]:
    conn = Connection(CLIENT)
    conn.send(Frame("STOMP", (("accept-version", "1.1,1.2"), ("host", "h"))))
    events: list[object] = []
    for chunk in chunks:
        conn.receive_data(chunk)
        drain(conn, events)
    return events


def test_drip_feed_client_side() -> None:
    whole = client_events(SERVER_STREAM, b"")
    assert [type(e).__name__ for e in whole] == [
        "Frame", "Heartbeat", "Frame", "Heartbeat", "Frame", "Frame", "Frame", "Heartbeat",
        "ConnectionClosed",
    ]  # fmt: skip
    assert whole[2] == Frame(
        "MESSAGE",
        (
            ("subscription", "0"),
            ("message-id", "1"),
            ("destination", "/q"),
            ("content-length", "3"),
        ),
        b"a\x00b",
    )
    assert isinstance(whole[4], Frame)
    assert whole[4].get("k") == "x:y\nz"
    for size in range(1, len(SERVER_STREAM) + 1):
        chunks = [SERVER_STREAM[i : i + size] for i in range(0, len(SERVER_STREAM), size)]
        assert client_events(*chunks, b"") == whole, f"chunk size {size}"


# --- what stomp.py 9.0 really sends ------------------------------------------------------
# Captured from stomp.py 9.0.0 (Connection12 / Connection11, heartbeats=(10000, 10000),
# vhost="localhost") talking to a socket that answered CONNECTED: connect("guest", "guest"),
# send(body="hello\x00world", headers={"x-note": "a:b\\c\nd"}), subscribe(ack=
# "client-individual"), ack("msg-1"[, "sub-1"]), disconnect(receipt="disc-1").
# stomp.py sorts headers, escapes values (not CONNECT's), and adds content-length.


@pytest.mark.parametrize(("capture", "version"), [(STOMPPY_12, "1.2"), (STOMPPY_11, "1.1")])
def test_stomppy_capture(capture: bytes, version: str) -> None:
    events = server_events(capture, b"")
    connect, send, subscribe, ack, disconnect, closed = events
    assert connect == Frame(
        "STOMP",
        (
            ("accept-version", version),
            ("heart-beat", "10000,10000"),
            ("host", "localhost"),
            ("login", "guest"),
            ("passcode", "guest"),
        ),
    )
    assert send == Frame(
        "SEND",
        (("content-length", "11"), ("destination", "/queue/test"), ("x-note", "a:b\\c\nd")),
        b"hello\x00world",
    )
    assert isinstance(subscribe, Frame)
    assert subscribe.get("ack") == "client-individual"
    assert isinstance(ack, Frame)
    assert ack.command == "ACK"
    assert disconnect == Frame("DISCONNECT", (("receipt", "disc-1"),))
    assert closed == ConnectionClosed()
    # Our client encodes the same frames to the same bytes.
    client = Connection(CLIENT)
    assert isinstance(connect, Frame)
    out = client.send(connect)
    client.receive_data(f"CONNECTED\nversion:{version}\n\n\x00".encode())
    client.next_event()
    for frame in (send, subscribe, ack, disconnect):
        assert isinstance(frame, Frame)
        out += client.send(frame)
    assert out == capture


# --- frames and helpers ------------------------------------------------------------------


def test_frame_conveniences() -> None:
    frame = Frame(Command.SEND, {"destination": "/q", "passcode": "s3cret"}, bytearray(b"x" * 100))
    assert frame == Frame("SEND", (("destination", "/q"), ("passcode", "s3cret")), b"x" * 100)
    assert type(frame.body) is bytes
    assert Frame("ACK", [("id", "1")]).headers == (("id", "1"),)
    text = repr(frame)
    assert "s3cret" not in text
    assert "********" in text
    assert "(100 bytes)" in text


def test_error_frame() -> None:
    frame = error_frame("bad\r\nthing", receipt_id="r1", body=b"detail", headers=[("x", "y")])
    assert frame == Frame(
        "ERROR",
        (
            ("message", "bad  thing"),
            ("receipt-id", "r1"),
            ("x", "y"),
            ("content-type", "text/plain"),
            ("content-length", "6"),
        ),
        b"detail",
    )
    # Sendable before any negotiation (1.0 rules, no escaping)...
    server = Connection(SERVER)
    assert server.send(error_frame("no CONNECT yet")) == b"ERROR\nmessage:no CONNECT yet\n\n\x00"
    assert server.our_state is ConnectionState.CLOSED
    # ...and readable by a client that has not been answered yet.
    client = Connection(CLIENT)
    client.send(Frame("CONNECT", (("accept-version", "1.2"),)))
    client.receive_data(b"ERROR\nmessage:nope\ncontent-length:1\n\n!\x00")
    assert client.next_event() == Frame(
        "ERROR", (("message", "nope"), ("content-length", "1")), b"!"
    )
    assert client.their_state is ConnectionState.CLOSED


@pytest.mark.parametrize(
    ("frame", "complaint"),
    [
        (Frame("SUBSCRIBE", (("id", "1"),), b"body"), "cannot have a body"),
        (Frame("SEND", (("content-length", "3"),), b"ab"), "does not match"),
        (Frame("SEND", (), b"a\x00b"), "needs a content-length"),
        (Frame("FOO"), "cannot send 'FOO'"),
        (Frame("MESSAGE"), "cannot send 'MESSAGE'"),
        (Frame("SEND", (("k", "\udc80"),)), "not encodable as UTF-8"),
    ],
)
def test_encoder_is_strict(frame: Frame, complaint: str) -> None:
    client, _ = handshake("1.2")
    with pytest.raises(LocalProtocolError, match=complaint):
        client.send(frame)
    assert client.our_state is ConnectionState.ERROR
    with pytest.raises(LocalProtocolError, match="earlier send"):
        client.send(Frame("DISCONNECT"))
