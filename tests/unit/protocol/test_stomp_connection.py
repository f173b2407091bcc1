"""STOMP connection states, version and heart-beat negotiation."""

from __future__ import annotations

import pytest

from artemis_py.protocol.stomp import (
    CLIENT,
    NEED_DATA,
    PAUSED,
    SERVER,
    Connection,
    ConnectionClosed,
    ConnectionState,
    Frame,
    HeartbeatPlan,
    HeartbeatSettings,
    LocalProtocolError,
    RemoteProtocolError,
    VersionNegotiationError,
    artemis_heartbeat,
    error_frame,
    negotiate_heartbeat,
    negotiate_version,
    parse_heartbeat,
)

CONNECT_12 = b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:h\n\n\x00"


def connected_server(version: str = "1.2") -> Connection:
    server = Connection(SERVER)
    server.receive_data(CONNECT_12)
    assert isinstance(server.next_event(), Frame)
    server.accept_connect(version)
    server.send(Frame("CONNECTED", (("version", version),)))
    return server


def connected_client(version: str = "1.2") -> Connection:
    client = Connection(CLIENT)
    client.send(Frame("STOMP", (("accept-version", "1.0,1.1,1.2"), ("host", "h"))))
    client.receive_data(f"CONNECTED\nversion:{version}\n\n\x00".encode())
    assert isinstance(client.next_event(), Frame)
    return client


# --- server side -------------------------------------------------------------------------


def test_server_handshake_states() -> None:
    server = Connection(SERVER)
    assert (server.version, server.our_state, server.their_state) == (
        None,
        ConnectionState.CONNECTING,
        ConnectionState.CONNECTING,
    )
    assert server.next_event() is NEED_DATA
    server.receive_data(CONNECT_12 + b"SEND\nk:a\\rb\n\n\x00")
    connect = server.next_event()
    assert isinstance(connect, Frame)
    assert connect.command == "CONNECT"
    assert server.their_state is ConnectionState.CONNECTED
    # The pipelined SEND waits: how it decodes depends on the version.
    assert server.next_event() is PAUSED
    assert server.next_event() is PAUSED
    server.accept_connect(negotiate_version(connect.get("accept-version")))
    assert server.version == "1.2"
    assert server.next_event() == Frame("SEND", (("k", "a\rb"),))
    data = server.send(Frame("CONNECTED", (("version", "1.2"), ("heart-beat", "0,0"))))
    assert data == b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00"
    assert server.our_state is ConnectionState.CONNECTED


def test_pipelined_frames_decode_with_the_accepted_version() -> None:
    # The same bytes are an error in 1.1 (\r undefined) and a literal in 1.0.
    for version, outcome in (("1.0", "a\\rb"), ("1.1", None), ("1.2", "a\rb")):
        server = Connection(SERVER)
        server.receive_data(CONNECT_12 + b"SEND\nk:a\\rb\n\n\x00")
        server.next_event()
        server.accept_connect(version)
        if outcome is None:
            with pytest.raises(RemoteProtocolError, match="undefined escape"):
                server.next_event()
        else:
            assert server.next_event() == Frame("SEND", (("k", outcome),))


def test_sending_connected_accepts_implicitly() -> None:
    server = Connection(SERVER)
    server.receive_data(CONNECT_12)
    server.next_event()
    server.send(Frame("CONNECTED", (("version", "1.1"),)))
    assert server.version == "1.1"
    assert server.next_event() is NEED_DATA  # no longer paused
    # Without a version header CONNECTED means 1.0.
    server = Connection(SERVER)
    server.receive_data(b"CONNECT\n\n\x00")
    server.next_event()
    server.send(Frame("CONNECTED", (("session", "1"),)))
    assert server.version == "1.0"


@pytest.mark.parametrize(
    ("connected", "complaint"),
    [
        (Frame("CONNECTED", (("version", "1.1"),)), "but 1.2 was accepted"),
        (Frame("CONNECTED"), "but 1.2 was accepted"),
    ],
)
def test_connected_must_match_accepted_version(connected: Frame, complaint: str) -> None:
    server = Connection(SERVER)
    server.receive_data(CONNECT_12)
    server.next_event()
    server.accept_connect("1.2")
    with pytest.raises(LocalProtocolError, match=complaint):
        server.send(connected)


def test_connected_version_must_have_been_offered() -> None:
    server = Connection(SERVER)
    server.receive_data(b"CONNECT\naccept-version:1.1\n\n\x00")
    server.next_event()
    with pytest.raises(LocalProtocolError, match="did not offer"):
        server.send(Frame("CONNECTED", (("version", "1.2"),)))


def test_accept_connect_misuse() -> None:
    with pytest.raises(LocalProtocolError, match="only the server"):
        Connection(CLIENT).accept_connect("1.2")
    server = Connection(SERVER)
    with pytest.raises(LocalProtocolError, match="before a CONNECT"):
        server.accept_connect("1.2")
    server.receive_data(b"CONNECT\naccept-version:1.1,1.2\n\n\x00")
    server.next_event()
    with pytest.raises(LocalProtocolError, match="unsupported"):
        server.accept_connect("2.0")
    with pytest.raises(LocalProtocolError, match=r"did not offer STOMP 1\.0"):
        server.accept_connect("1.0")
    server.accept_connect("1.1")
    with pytest.raises(LocalProtocolError, match="already negotiated"):
        server.accept_connect("1.2")


def test_first_frame_must_be_connect() -> None:
    server = Connection(SERVER)
    server.receive_data(b"SEND\ndestination:/q\n\nhi\x00")
    with pytest.raises(RemoteProtocolError, match="first frame must be CONNECT or STOMP, not SEND"):
        server.next_event()
    assert server.their_state is ConnectionState.ERROR
    with pytest.raises(RemoteProtocolError, match="already failed: the first frame"):
        server.next_event()
    # The server can still say so.
    assert server.send(error_frame("bad first frame")) == b"ERROR\nmessage:bad first frame\n\n\x00"


def test_second_connect_is_refused() -> None:
    server = connected_server()
    server.receive_data(b"STOMP\naccept-version:1.2\n\n\x00")
    with pytest.raises(RemoteProtocolError, match="STOMP received on an established connection"):
        server.next_event()


def test_nothing_but_heartbeats_after_disconnect() -> None:
    server = connected_server()
    server.receive_data(b"DISCONNECT\nreceipt:1\n\n\x00\n")
    assert server.next_event() == Frame("DISCONNECT", (("receipt", "1"),))
    assert server.their_state is ConnectionState.CLOSED
    assert server.next_event().__class__.__name__ == "Heartbeat"
    # The server answers the DISCONNECT.
    assert server.send(Frame("RECEIPT", (("receipt-id", "1"),))).startswith(b"RECEIPT\n")
    server.receive_data(b"SEND\n\n\x00")
    with pytest.raises(RemoteProtocolError, match="SEND frame received after DISCONNECT"):
        server.next_event()


def test_server_send_rules() -> None:
    server = Connection(SERVER)
    with pytest.raises(LocalProtocolError, match="before receiving CONNECT"):
        server.send(Frame("CONNECTED", (("version", "1.2"),)))
    server = Connection(SERVER)
    server.receive_data(CONNECT_12)
    server.next_event()
    server.accept_connect("1.2")
    with pytest.raises(LocalProtocolError, match="cannot send MESSAGE before CONNECTED"):
        server.send(Frame("MESSAGE"))
    server = connected_server()
    with pytest.raises(LocalProtocolError, match="a server cannot send 'SEND'"):
        server.send(Frame("SEND"))
    server = connected_server()
    with pytest.raises(LocalProtocolError, match="already sent"):
        server.send(Frame("CONNECTED", (("version", "1.2"),)))
    server = connected_server()
    server.send(error_frame("bye"))
    assert server.our_state is ConnectionState.CLOSED
    with pytest.raises(LocalProtocolError, match="cannot send MESSAGE after ERROR"):
        server.send(Frame("MESSAGE"))


# --- client side -------------------------------------------------------------------------


def test_client_handshake() -> None:
    client = Connection(CLIENT)
    data = client.send(Frame("STOMP", (("accept-version", "1.1,1.2"), ("host", "h"))))
    assert data == b"STOMP\naccept-version:1.1,1.2\nhost:h\n\n\x00"
    assert client.version is None
    assert client.our_state is ConnectionState.CONNECTED
    with pytest.raises(LocalProtocolError, match="before CONNECTED arrives"):
        client.send(Frame("SEND", (("destination", "/q"),)))
    client = Connection(CLIENT)
    client.send(Frame("STOMP", (("accept-version", "1.1,1.2"), ("host", "h"))))
    client.receive_data(b"CONNECTED\nversion:1.1\nheart-beat:0,0\n\n\x00MESSAGE\nk:a\\cb\n\n\x00")
    assert client.next_event() == Frame("CONNECTED", (("version", "1.1"), ("heart-beat", "0,0")))
    assert client.version == "1.1"
    assert client.their_state is ConnectionState.CONNECTED
    assert client.next_event() == Frame("MESSAGE", (("k", "a:b"),))  # decoded as 1.1
    assert client.send(Frame("DISCONNECT")) == b"DISCONNECT\n\n\x00"
    assert client.our_state is ConnectionState.CLOSED
    with pytest.raises(LocalProtocolError, match="cannot send SEND after DISCONNECT"):
        client.send(Frame("SEND"))


def test_client_connected_without_version_is_10() -> None:
    client = Connection(CLIENT)
    client.send(Frame("CONNECT", (("login", "u"),)))
    client.receive_data(b"CONNECTED\nsession: 7\n\n\x00")
    assert client.next_event() == Frame("CONNECTED", (("session", "7"),))  # 1.0 trims
    assert client.version == "1.0"


@pytest.mark.parametrize(
    ("offered", "connected", "complaint"),
    [
        ("1.2", b"CONNECTED\nversion:1.1\n\n\x00", "did not offer"),
        (None, b"CONNECTED\nversion:1.2\n\n\x00", "did not offer"),
        ("1.2", b"CONNECTED\n\n\x00", "did not offer"),
        ("1.2", b"CONNECTED\nversion:3.0\n\n\x00", "unknown STOMP version"),
    ],
)
def test_client_checks_chosen_version(
    offered: str | None, connected: bytes, complaint: str
) -> None:
    client = Connection(CLIENT)
    headers = () if offered is None else (("accept-version", offered),)
    client.send(Frame("CONNECT", headers))
    client.receive_data(connected)
    with pytest.raises(RemoteProtocolError, match=complaint):
        client.next_event()


def test_client_receive_rules() -> None:
    client = Connection(CLIENT)
    client.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
    with pytest.raises(RemoteProtocolError, match="before we sent CONNECT"):
        client.next_event()
    client = Connection(CLIENT)
    client.send(Frame("CONNECT", (("accept-version", "1.2"),)))
    client.receive_data(b"MESSAGE\n\n\x00")
    with pytest.raises(RemoteProtocolError, match="MESSAGE received before CONNECTED"):
        client.next_event()
    client = connected_client()
    client.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
    with pytest.raises(RemoteProtocolError, match="CONNECTED received twice"):
        client.next_event()
    client = connected_client()
    client.receive_data(b"SEND\n\n\x00")
    with pytest.raises(RemoteProtocolError, match="SEND frames may not be sent to this side"):
        client.next_event()


def test_client_nothing_after_error() -> None:
    client = connected_client()
    client.receive_data(b"ERROR\nmessage:bye\n\n\x00\nRECEIPT\nreceipt-id:1\n\n\x00")
    assert client.next_event() == Frame("ERROR", (("message", "bye"),))
    assert client.their_state is ConnectionState.CLOSED
    assert client.next_event().__class__.__name__ == "Heartbeat"
    with pytest.raises(RemoteProtocolError, match="RECEIPT frame received after ERROR"):
        client.next_event()


def test_client_send_rules() -> None:
    client = Connection(CLIENT)
    with pytest.raises(LocalProtocolError, match="first frame must be CONNECT or STOMP, not SEND"):
        client.send(Frame("SEND"))
    client = connected_client()
    with pytest.raises(LocalProtocolError, match="CONNECT was already sent"):
        client.send(Frame("CONNECT"))


def test_closed_connection_keeps_answering() -> None:
    client = connected_client()
    client.receive_data(b"")
    assert client.next_event() == ConnectionClosed()
    assert client.next_event() == ConnectionClosed()


# --- heart-beats -------------------------------------------------------------------------


def test_send_heartbeat() -> None:
    assert connected_client("1.2").send_heartbeat() == b"\n"
    assert connected_server("1.1").send_heartbeat() == b"\n"
    with pytest.raises(LocalProtocolError, match=r"STOMP 1\.0 has no heart-beats"):
        connected_server("1.0").send_heartbeat()
    with pytest.raises(LocalProtocolError, match="our_state=CONNECTING"):
        Connection(CLIENT).send_heartbeat()
    client = Connection(CLIENT)
    client.send(Frame("STOMP", (("accept-version", "1.2"),)))
    with pytest.raises(LocalProtocolError, match="before CONNECTED"):
        client.send_heartbeat()  # CONNECTED has not arrived: heart-beats not negotiated
    # A timer racing the close: an EOL after the last frame is allowed by the grammar.
    client = connected_client()
    client.send(Frame("DISCONNECT"))
    assert client.send_heartbeat() == b"\n"
    server = connected_server()
    server.send(error_frame("bye"))
    assert server.send_heartbeat() == b"\n"
    with pytest.raises(LocalProtocolError):
        server.send(Frame("MESSAGE"))
    with pytest.raises(LocalProtocolError, match="our_state=ERROR"):
        server.send_heartbeat()


@pytest.mark.parametrize(
    ("header", "expected"),
    [(None, (0, 0)), ("0,0", (0, 0)), ("10000,5000", (10000, 5000)), (" 10 , 20 ", (10, 20))],
)
def test_parse_heartbeat(header: str | None, expected: tuple[int, int]) -> None:
    assert parse_heartbeat(header) == expected


@pytest.mark.parametrize("header", ["", "1", "1,2,3", "-1,0", "a,b", "1.5,2", "1;2", "٣,1"])
def test_parse_heartbeat_rejects(header: str) -> None:
    with pytest.raises(RemoteProtocolError, match="invalid heart-beat header"):
        parse_heartbeat(header)


def test_negotiate_heartbeat() -> None:
    # Spec: client-to-server every max(cx, sy) unless either is 0; the other way max(sx, cy).
    assert negotiate_heartbeat((1000, 2000), (3000, 500)) == (3000, 1000)
    assert negotiate_heartbeat((1000, 2000), (3000, 500), our_role=CLIENT) == (1000, 3000)
    assert negotiate_heartbeat((0, 2000), (3000, 500)) == (3000, 0)
    assert negotiate_heartbeat((1000, 0), (3000, 500)) == (0, 1000)
    assert negotiate_heartbeat((1000, 2000), (0, 0)) == (0, 0)


@pytest.mark.parametrize(
    ("header", "version", "settings", "plan"),
    [
        (None, "1.2", HeartbeatSettings(), HeartbeatPlan(None, 0, 60_000)),
        ("1000,1000", "1.0", HeartbeatSettings(), HeartbeatPlan(None, 0, 60_000)),
        # Artemis docs: "1000,0" -> TTL 2000 (modifier 2.0).
        ("1000,0", "1.2", HeartbeatSettings(), HeartbeatPlan("0,1000", 0, 2000)),
        # Artemis docs: "20000,0" with connectionTtlMax 30000 -> TTL 30000, answer "0,15000".
        (
            "20000,0",
            "1.2",
            HeartbeatSettings(connection_ttl_max=30_000),
            HeartbeatPlan("0,15000", 0, 30_000),
        ),
        # Below connectionTtlMin (1000): TTL 1000, ask for a beat every 500 ms.
        ("100,0", "1.1", HeartbeatSettings(), HeartbeatPlan("0,500", 0, 1000)),
        # No client beats: connectionTtl applies and Artemis asks for ttl/modifier.
        (
            "0,0",
            "1.2",
            HeartbeatSettings(connection_ttl=20_000),
            HeartbeatPlan("0,10000", 0, 20_000),
        ),
        # The server never beats more often than every 500 ms.
        ("0,100", "1.2", HeartbeatSettings(), HeartbeatPlan("500,30000", 500, 60_000)),
        ("4000,4000", "1.2", HeartbeatSettings(), HeartbeatPlan("4000,4000", 4000, 8000)),
        (
            "4000,4000",
            "1.2",
            HeartbeatSettings(heart_beat_to_connection_ttl_modifier=1.5),
            HeartbeatPlan("4000,4000", 4000, 6000),
        ),
    ],
)
def test_artemis_heartbeat(
    header: str | None, version: str, settings: HeartbeatSettings, plan: HeartbeatPlan
) -> None:
    assert artemis_heartbeat(header, version, settings) == plan


# --- version negotiation -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (None, "1.0"),
        ("1.0", "1.0"),
        ("1.1", "1.1"),
        ("1.0,1.1,1.2", "1.2"),
        ("1.2,1.0", "1.2"),
        ("1.0, 1.1", "1.1"),
        ("1.1,2.0", "1.1"),
    ],
)
def test_negotiate_version(accept: str | None, version: str) -> None:
    assert negotiate_version(accept) == version


def test_negotiate_version_fails_with_the_supported_list() -> None:
    with pytest.raises(VersionNegotiationError) as info:
        negotiate_version("2.0,2.1")
    exc = info.value
    assert isinstance(exc, RemoteProtocolError)
    assert exc.error_headers == (("version", "1.0,1.1,1.2"),)
    assert "supported protocol versions are 1.0 1.1 1.2" in exc.message
    frame = error_frame(exc.message, headers=exc.error_headers)
    assert frame.get("version") == "1.0,1.1,1.2"
    with pytest.raises(VersionNegotiationError, match=r"supported protocol versions are 1\.2$"):
        negotiate_version(None, supported=("1.2",))
    assert negotiate_version("1.0,1.1,1.2", supported=("1.0", "1.1")) == "1.1"
    with pytest.raises(ValueError, match=r"unsupported STOMP versions \['1\.3'\]"):
        negotiate_version("1.2", supported=("1.3",))
