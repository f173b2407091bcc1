"""Property tests: arbitrary frames survive encode -> arbitrary chunking -> decode."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from artemis_py.protocol.stomp import (
    BODY_COMMANDS,
    CLIENT,
    CLIENT_COMMANDS,
    NEED_DATA,
    PAUSED,
    SERVER,
    SERVER_COMMANDS,
    Command,
    Connection,
    ConnectionClosed,
    Frame,
    Heartbeat,
    RemoteProtocolError,
    negotiate_version,
)

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text mixing the characters escaping is about with arbitrary (non-surrogate) text.
tricky = st.text(alphabet=":\\\n\r \t\x00cnré☃", max_size=6)
text = st.tuples(tricky, st.text(st.characters(codec="utf-8"), max_size=6), tricky).map("".join)
names = text.filter(lambda s: s != "" and s != "content-length")


def handshake(version: str) -> tuple[Connection, Connection]:
    client, server = Connection(CLIENT), Connection(SERVER)
    server.receive_data(client.send(Frame("STOMP", (("accept-version", version),))))
    assert isinstance(server.next_event(), Frame)
    server.accept_connect(version)
    client.receive_data(server.send(Frame("CONNECTED", (("version", version),))))
    assert isinstance(client.next_event(), Frame)
    return client, server


def header_ok(version: str, name: str, value: str) -> bool:
    """What a version can carry (see artemis_py.protocol.stomp.headers)."""
    if "\x00" in name or "\x00" in value:
        return False  # no version carries a NUL
    if version == "1.2":
        return True
    if version == "1.1":
        return not value.endswith("\r")
    return (
        ":" not in name
        and "\n" not in name
        and "\n" not in value
        and not value.endswith("\r")
        and not value.startswith((" ", "\t"))  # 1.0 decoding trims these
    )


@st.composite
def frames(draw: st.DrawFn, commands: Sequence[str], version: str) -> Frame:
    command = draw(st.sampled_from(commands))
    headers = draw(
        st.lists(
            st.tuples(names, text).filter(lambda h: header_ok(version, *h)),
            max_size=6,
        )
    )
    body = draw(st.binary(max_size=300)) if command in BODY_COMMANDS else b""
    if b"\x00" in body or draw(st.booleans()):
        position = draw(st.integers(0, len(headers)))
        headers.insert(position, ("content-length", str(len(body))))
    return Frame(command, tuple(headers), body)


def chunked(data: st.DataObject, wire: bytes) -> list[bytes]:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=12)))
    bounds = [0, *cuts, len(wire)]
    return [wire[a:b] for a, b in itertools.pairwise(bounds) if b > a]  # b"" is EOF


def receive_all(conn: Connection, pieces: list[bytes]) -> list[object]:
    """Every event up to NEED_DATA after each piece, stopping at PAUSED or ConnectionClosed."""
    events: list[object] = []
    for piece in pieces:
        conn.receive_data(piece)
        while (event := conn.next_event()) is not NEED_DATA:
            events.append(event)
            if event is PAUSED or isinstance(event, ConnectionClosed):
                return events
    return events


CLIENT_ORDINARY = sorted(CLIENT_COMMANDS - {Command.CONNECT, Command.STOMP, Command.DISCONNECT})
SERVER_ORDINARY = sorted(SERVER_COMMANDS - {Command.CONNECTED, Command.ERROR})


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
@SETTINGS
@given(data=st.data())
def test_client_to_server(version: str, data: st.DataObject) -> None:
    client, server = handshake(version)
    sent = data.draw(st.lists(frames(CLIENT_ORDINARY, version), max_size=5))
    if data.draw(st.booleans()):
        sent.append(data.draw(frames([Command.DISCONNECT], version)))
    expected: list[object] = []
    wire = b""
    for frame in sent:
        wire += client.send(frame)
        expected.append(frame)
        if version != "1.0" and frame.command != "DISCONNECT" and data.draw(st.booleans()):
            wire += client.send_heartbeat()
            expected.append(Heartbeat())
    assert receive_all(server, chunked(data, wire)) == expected


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
@SETTINGS
@given(data=st.data())
def test_server_to_client(version: str, data: st.DataObject) -> None:
    client, server = handshake(version)
    sent = data.draw(st.lists(frames(SERVER_ORDINARY, version), max_size=5))
    if data.draw(st.booleans()):
        sent.append(data.draw(frames([Command.ERROR], version)))
    wire = b"".join(server.send(frame) for frame in sent)
    assert receive_all(client, [*chunked(data, wire), b""]) == [*sent, ConnectionClosed()]


@SETTINGS
@given(data=st.data())
def test_connect_round_trip(data: st.DataObject) -> None:
    # CONNECT/STOMP are never escaped: what 1.0 can carry, minus its value trimming when the
    # frame has accept-version (then it is not a 1.0 frame and nothing is trimmed).
    frame = data.draw(frames([Command.CONNECT, Command.STOMP], "1.0"))
    frame = Frame(frame.command, (("accept-version", "1.2"), *frame.headers))
    client, server = Connection(CLIENT), Connection(SERVER)
    events = receive_all(server, chunked(data, client.send(frame)))
    assert events == [frame, PAUSED]


TOKENS = st.sampled_from(
    [b"SEND", b"CONNECT", b"STOMP", b"\n", b"\r", b"\r\n", b":", b"\\", b"\\c", b"\x00",
     b"content-length:", b"accept-version:1.2", b"3", b"-1", b"k", b"\xff", b"\xc3\xa9", b" "]
)  # fmt: skip


@settings(SETTINGS, max_examples=500)
@given(st.one_of(st.binary(max_size=300), st.lists(TOKENS, max_size=60).map(b"".join)))
def test_garbage_raises_only_remote_protocol_error(stream: bytes) -> None:
    for prefix in (b"", b"CONNECT\naccept-version:1.0,1.1,1.2\n\n\x00"):
        conn = Connection(SERVER)
        try:
            receive_all_accepting(conn, [prefix + stream, b""])
        except RemoteProtocolError as exc:
            assert exc.message
            assert "\n" not in exc.message


def receive_all_accepting(conn: Connection, pieces: list[bytes]) -> None:
    """Decode everything, accepting CONNECTs as a server would (negotiation may fail too)."""
    last: object = None
    for piece in pieces:
        conn.receive_data(piece)
        while (event := conn.next_event()) is not NEED_DATA:
            if event is PAUSED:
                assert isinstance(last, Frame)
                conn.accept_connect(negotiate_version(last.get("accept-version")))
            elif isinstance(event, ConnectionClosed):
                return
            last = event
