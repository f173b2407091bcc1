"""STOMP over WebSocket without I/O (protocol/websocket.py): the upgrade and its refusals,
incoming messages as STOMP bytes in every cut, the per-frame payload limit, pings and
closes, and outgoing frames as one message each (binary fragments, or text that never cuts
a character), checked with wsproto as the client."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Message,
    Ping,
    Pong,
    RejectConnection,
    Request,
    TextMessage,
)

from artemis_py.protocol.websocket import (
    NEED_DATA,
    Closed,
    Refused,
    StompBytes,
    StompSplitter,
    Upgraded,
    WebSocketServer,
    http_request_start,
)

CONNECTED = b"CONNECTED\nversion:1.2\n\n\x00"
BINARY_MESSAGE = b"MESSAGE\ncontent-length:5\ndestination:q\n\n\x00\xff\x00\n\x00\x00"


def events(server: WebSocketServer) -> list[object]:
    found = []
    while (event := server.next_event()) is not NEED_DATA:
        found.append(event)
    return found


def connect(
    subprotocols: list[str] | None = None, **options: object
) -> tuple[WebSocketServer, WSConnection, list[object]]:
    """A server and a wsproto client after the upgrade, and the server's events."""
    server = WebSocketServer(**options)  # type: ignore[arg-type]
    client = WSConnection(ConnectionType.CLIENT)
    server.receive_data(
        client.send(Request(host="localhost", target="/", subprotocols=subprotocols or []))
    )
    client.receive_data(server.data_to_send())
    client.answers = list(client.events())  # type: ignore[attr-defined]
    return server, client, events(server)


def to_client(server: WebSocketServer, client: WSConnection) -> list[Event]:
    client.receive_data(server.data_to_send())
    return list(client.events())


def test_http_request_start_needs_only_the_method():
    assert http_request_start(b"GET / HTTP/1.1") is True
    assert http_request_start(b"GE") is None
    assert http_request_start(b"") is None
    assert http_request_start(b"CONNECT\n") is False
    assert http_request_start(b"DISCONNECT") is False
    assert http_request_start(b"\n") is False
    assert http_request_start(b"POST /x") is True


def test_the_first_stomp_subprotocol_the_client_offers_is_chosen():
    server, client, found = connect(["chat", "v11.stomp", "v12.stomp"])
    assert found == [Upgraded("v11.stomp")]
    accepted = client.answers  # type: ignore[attr-defined]
    assert isinstance(accepted[0], AcceptConnection)
    assert accepted[0].subprotocol == "v11.stomp"
    assert server.open


def test_no_subprotocol_offered_is_served_stomp():
    _, _, found = connect()
    assert found == [Upgraded(None)]


def test_only_other_subprotocols_are_refused():
    server, client, found = connect(["mqtt"])
    assert len(found) == 1
    refused = found[0]
    assert isinstance(refused, Refused)
    assert refused.status == 400
    assert "mqtt" in refused.reason
    rejected = client.answers[0]  # type: ignore[attr-defined]
    assert isinstance(rejected, RejectConnection)
    assert rejected.status_code == 400
    assert not server.open


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 426),
        (b"POST / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n", 403),
        (b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n", 400),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"
            b"Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
            426,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\n\r\n",
            400,
        ),
        (b"GET / HTTP/1.1\r\nbad header line\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 20000, 431),
    ],
)
def test_refusals_are_http_answers(request_bytes, status):
    server = WebSocketServer()
    server.receive_data(request_bytes)
    found = events(server)
    assert len(found) == 1
    assert isinstance(found[0], Refused)
    assert found[0].status == status
    answer = server.data_to_send()
    assert answer.startswith(f"HTTP/1.1 {status} ".encode())
    assert answer.endswith((found[0].reason + "\n").encode())
    server.receive_data(b"more")  # ignored once refused
    assert events(server) == []


def test_a_request_in_pieces_and_frames_right_behind_it():
    client = WSConnection(ConnectionType.CLIENT)
    request = client.send(Request(host="h", target="/", subprotocols=["v12.stomp"]))
    server = WebSocketServer()
    for byte in request[:-1]:
        server.receive_data(bytes([byte]))
        assert events(server) == []
    # The client's first frame in the same packet as the end of its request (a client
    # that does not wait for the 101 answer): it is not lost.
    frame = b"\x81\x82abcd" + bytes(b ^ k for b, k in zip(b"\n\n", b"ab", strict=True))
    server.receive_data(request[-1:] + frame)
    assert events(server) == [Upgraded("v12.stomp"), StompBytes(b"\n\n")]


def test_end_of_stream_during_the_upgrade():
    server = WebSocketServer()
    server.receive_data(b"GET / HT")
    server.receive_data(b"")
    found = events(server)
    assert isinstance(found[0], Closed)
    assert found[0].code == 1006


@given(st.lists(st.integers(1, 40), min_size=1, max_size=8), st.booleans())
def test_incoming_messages_are_stomp_bytes_in_any_cut(cuts, text):
    server, client, _ = connect(["v12.stomp"])
    stomp = "CONNECT\naccept-version:1.2\n\n\x00SEND\ndestination:é\n\nbody\x00\n"
    wire = b""
    start = 0
    for size in cuts:  # a STOMP stream cut into messages anywhere
        piece = stomp[start : start + size]
        start += size
        if piece:
            wire += client.send(TextMessage(piece) if text else BytesMessage(piece.encode()))
    if start < len(stomp):
        rest = stomp[start:]
        wire += client.send(TextMessage(rest) if text else BytesMessage(rest.encode()))
    got = b""
    for byte in range(len(wire)):  # and the wire fed a byte at a time
        server.receive_data(wire[byte : byte + 1])
        for event in events(server):
            assert isinstance(event, StompBytes)
            got += event.data
    assert got == stomp.encode()


def test_a_frame_over_the_payload_limit_closes_with_1009():
    server, client, _ = connect(max_frame_payload=100)
    server.receive_data(client.send(BytesMessage(b"x" * 100)))
    assert events(server) == [StompBytes(b"x" * 100)]
    server.receive_data(client.send(BytesMessage(b"y" * 101)))
    found = events(server)
    assert isinstance(found[-1], Closed)
    assert found[-1].code == 1009
    assert not found[-1].by_client
    assert "webSocketMaxFramePayloadLength" in found[-1].reason
    close = to_client(server, client)[0]
    assert isinstance(close, CloseConnection)
    assert close.code == 1009


def test_the_limit_is_per_frame_not_per_message():
    server, client, _ = connect(max_frame_payload=100)
    wire = b"".join(
        client.send(BytesMessage(b"z" * 100, message_finished=last))
        for last in (False, False, True)
    )
    server.receive_data(wire)
    found = events(server)
    assert b"".join(e.data for e in found if isinstance(e, StompBytes)) == b"z" * 300
    assert not any(isinstance(e, Closed) for e in found)


def test_ping_is_answered_with_pong_and_is_no_stomp_data():
    server, client, _ = connect()
    server.receive_data(client.send(Ping(b"hi")))
    assert events(server) == []
    assert to_client(server, client) == [Pong(b"hi")]


def test_a_client_close_is_answered_and_ends_the_stream():
    server, client, _ = connect()
    server.receive_data(client.send(CloseConnection(code=1001, reason="bye")))
    assert events(server) == [Closed(1001, "bye", by_client=True)]
    answer = to_client(server, client)
    assert isinstance(answer[0], CloseConnection)
    assert not server.open
    server.send_stomp(CONNECTED)  # dropped: the WebSocket is closing
    assert server.data_to_send() == b""


def test_a_protocol_violation_closes_with_its_code():
    server, _, _ = connect()
    server.receive_data(b"\x81\x05hello")  # unmasked: clients must mask
    found = events(server)
    assert isinstance(found[0], Closed)
    assert found[0].code == 1002
    assert not found[0].by_client
    assert server.data_to_send().startswith(b"\x88")  # our close frame


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (b"\x81\x82abcd" + bytes(b ^ k for b, k in zip(b"\xc3\x28", b"ab", strict=True)), 1007),
        (b"\x89\xfe\x00\x7eabcd" + b"\x00" * 126, 1002),  # a ping over 125 bytes
        (b"\xc2\x80abcd", 1002),  # a reserved bit no extension was agreed for
    ],
)
def test_other_violations_close_with_their_codes(frame, code):
    server, _, _ = connect()
    server.receive_data(frame)
    found = events(server)
    assert isinstance(found[0], Closed)
    assert found[0].code == code


def test_the_end_of_the_stream_is_a_close():
    server, _, _ = connect()
    server.receive_data(b"")
    assert events(server) == [Closed(1006, "", by_client=True)]


def test_the_node_closes_with_a_close_frame():
    server, client, _ = connect()
    server.close()
    close = to_client(server, client)[0]
    assert isinstance(close, CloseConnection)
    assert close.code == 1000
    assert not server.open


def messages(received: list[Event]) -> list[tuple[type, bytes]]:
    """Whole messages (fragments joined) with their type."""
    whole: list[tuple[type, bytes]] = []
    part = b""
    for event in received:
        if isinstance(event, Message):
            part += event.data.encode() if isinstance(event, TextMessage) else event.data
            if event.message_finished:
                whole.append((type(event), part))
                part = b""
    return whole


def test_each_frame_and_heart_beat_is_a_binary_message_of_its_own():
    server, client, _ = connect()
    server.send_stomp(CONNECTED + b"\n" + BINARY_MESSAGE + b"\r\nERROR\nmessage:x\n\nbad\x00")
    assert messages(to_client(server, client)) == [
        (BytesMessage, CONNECTED),
        (BytesMessage, b"\n"),
        (BytesMessage, BINARY_MESSAGE),
        (BytesMessage, b"\r\n"),
        (BytesMessage, b"ERROR\nmessage:x\n\nbad\x00"),
    ]


def test_a_frame_written_in_pieces_is_streamed_as_fragments_of_one_message():
    server, client, _ = connect(max_frame_payload=8)
    frame = b"MESSAGE\ncontent-length:20\n\n" + bytes(range(20)) + b"\x00"
    received: list[Event] = []
    for start in range(0, len(frame), 7):
        server.send_stomp(frame[start : start + 7])
        received += to_client(server, client)
    assert messages(received) == [(BytesMessage, frame)]
    sizes = [len(e.data) for e in received if isinstance(e, Message)]
    assert max(sizes) <= 8


def test_text_encoder_sends_text_in_fragments_that_keep_characters_whole():
    server, client, _ = connect(max_frame_payload=5, encoder="text")
    frame = "MESSAGE\ncontent-length:12\n\nüüüüüü\x00".encode()
    server.send_stomp(frame + b"\n" + BINARY_MESSAGE)
    received = to_client(server, client)
    assert messages(received) == [
        (TextMessage, frame),
        (TextMessage, b"\n"),
        (BytesMessage, BINARY_MESSAGE),  # not UTF-8: a binary message
    ]
    for event in received:
        if isinstance(event, TextMessage):
            assert len(event.data.encode()) <= 5


def test_an_unknown_encoder_type_is_refused():
    with pytest.raises(ValueError, match="binary or text"):
        WebSocketServer(encoder="Binary")


@given(st.lists(st.integers(1, 30), max_size=12))
def test_the_splitter_finds_frame_ends_in_any_cut(cuts):
    stream = (
        b"\n"
        + CONNECTED
        + BINARY_MESSAGE
        + b"\r\n\n"
        + b"RECEIPT\nreceipt-id:1\n\n\x00"
        + b"MESSAGE\r\ncontent-length:0\r\n\r\n\x00"
    )
    expected = [
        b"\n",
        CONNECTED,
        BINARY_MESSAGE,
        b"\r\n",
        b"\n",
        b"RECEIPT\nreceipt-id:1\n\n\x00",
        b"MESSAGE\r\ncontent-length:0\r\n\r\n\x00",
    ]
    splitter = StompSplitter()
    frames, current, start = [], b"", 0
    for size in [*cuts, len(stream)]:
        for piece, ends in splitter.split(stream[start : start + size]):
            current += piece
            if ends:
                frames.append(current)
                current = b""
        start += size
    assert frames == expected
    assert current == b""


frames_strategy = st.lists(
    st.one_of(
        st.sampled_from([b"\n", b"\r\n"]),  # heart-beats
        st.builds(
            lambda body, counted, eol: (
                b"MESSAGE" + eol + b"a:b" + eol
                + (b"content-length:%d" % len(body) + eol if counted else b"")
                + eol + body + b"\x00"
            ),
            st.binary(max_size=40),
            st.booleans(),
            st.sampled_from([b"\n", b"\r\n"]),
        ).filter(lambda frame: b"content-length" in frame or frame.count(b"\x00") == 1),
    ),
    max_size=6,
)  # fmt: skip


@given(frames_strategy, st.lists(st.integers(1, 50), max_size=10))
def test_the_splitter_cuts_random_streams_at_their_frames(frames, cuts):
    stream = b"".join(frames)
    splitter = StompSplitter()
    found, current, start = [], b"", 0
    for size in [*cuts, len(stream)]:
        for piece, ends in splitter.split(stream[start : start + size]):
            current += piece
            if ends:
                found.append(current)
                current = b""
        start += size
    assert found == frames
