"""Journal replication over the cluster link: purpose "replication", its frames, who sends
them, on which links, and hostile bodies."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_cluster_protocol import (
    SETTINGS,
    chunked,
    make_client,
    make_server,
    message,
    pump,
    raw,
    transfer,
)

from artemis_py.protocol.cluster import (
    BindingInfo,
    Bindings,
    ClientConnection,
    Confirm,
    ConnectionState,
    Established,
    Frame,
    FrameType,
    Hello,
    LocalProtocolError,
    Ping,
    Records,
    RemoteProtocolError,
    Replicated,
    ServerConnection,
    SyncDone,
    Synced,
    SyncFile,
    Topology,
    decode_frame,
    encode_frame,
)
from artemis_py.protocol.cluster import Error as ErrorFrame


def replication_pair() -> tuple[ClientConnection, ServerConnection]:
    """A backup (client) and its primary (server) after a real handshake."""
    client, server = make_client(purpose="replication"), make_server()
    client.start()
    assert transfer(client, server) == []
    assert transfer(server, client) == []
    [server_event] = transfer(client, server)
    [client_event] = transfer(server, client)
    assert isinstance(server_event, Established)
    assert isinstance(client_event, Established)
    assert server_event.purpose == client_event.purpose == "replication"
    return client, server


def test_the_hello_carries_purpose_replication() -> None:
    client = make_client(purpose="replication")
    client.start()
    data = client.data_to_send()
    hello = decode_frame(data[8:])
    assert isinstance(hello, Hello)
    assert hello.purpose == "replication"


def test_a_replication_hello_names_a_cluster_connection_of_the_primary() -> None:
    client, server = make_client(purpose="replication", cluster_name="other"), make_server()
    client.start()
    server.receive_data(client.data_to_send())
    with pytest.raises(RemoteProtocolError, match="cluster name mismatch"):
        pump(server)


# --- round trips through real connections ------------------------------------------------

PRIMARY_FRAMES: list[Frame] = [
    SyncFile(0, "activemq-data-1.amq", 10, 0, b"0123"),
    SyncFile(0, "activemq-data-1.amq", 10, 4, b"456789"),
    SyncFile(1, "activemq-bindings-2.bindings", 0, 0, b""),
    SyncFile(1, "ü" * 127, 2**64 - 1, 2**64 - 1, b""),  # 254 UTF-8 bytes
    Ping(),
    SyncDone(3),
    Records(0, b"\x00\x01opaque journal frames"),
    Records(1, b""),
    Records(1, bytes(range(256)) * 10),
]
BACKUP_FRAMES: list[Frame] = [
    Ping(),
    Synced(),
    Replicated(0, 0),
    Replicated(1, 5),
    Replicated(0, 0),  # the same ticket again is no step back
    Replicated(0, 2**64 - 1),
    Replicated(1, 9),
]


def test_every_replication_frame_through_connections() -> None:
    client, server = replication_pair()
    for frame in PRIMARY_FRAMES:
        server.send(frame)
    assert transfer(server, client) == PRIMARY_FRAMES
    for frame in BACKUP_FRAMES:
        client.send(frame)
    assert transfer(client, server) == BACKUP_FRAMES


@pytest.mark.parametrize("frame", PRIMARY_FRAMES + BACKUP_FRAMES, ids=lambda f: type(f).__name__)
def test_every_replication_frame_round_trips(frame: Frame) -> None:
    data = encode_frame(frame)
    assert data[4] == frame.TYPE
    assert struct.unpack(">I", data[:4])[0] == len(data) - 4
    assert decode_frame(data) == frame


def test_binary_layouts() -> None:
    assert encode_frame(Replicated(1, 258)) == raw(0x24, b"\x01" + (258).to_bytes(8, "big"))
    assert encode_frame(Records(0, b"xy")) == raw(0x23, b"\x00xy")
    assert encode_frame(SyncFile(1, "f", 9, 2, b"ab")) == raw(
        0x22, b"\x01" + (9).to_bytes(8, "big") + (2).to_bytes(8, "big") + b"\x01fab"
    )
    assert encode_frame(SyncDone(2)) == raw(18, b'{"files":2}')
    assert encode_frame(Synced()) == raw(19, b"{}")


def test_the_data_is_its_own_piece_of_the_output() -> None:
    """As a Message's payload: appended, not re-packed into the header."""
    client, server = replication_pair()
    data = b"d" * 1000
    server.send(Records(0, data))
    server.send(SyncFile(0, "f", 1000, 0, data))
    assert server._out[1] is data
    assert server._out[3] is data
    assert transfer(server, client) == [Records(0, data), SyncFile(0, "f", 1000, 0, data)]


def test_long_data_is_abbreviated_in_repr() -> None:
    assert "(1000 bytes)" in repr(Records(0, b"x" * 1000))
    assert "(1000 bytes)" in repr(SyncFile(0, "f", 1000, 0, b"x" * 1000))
    assert repr(Records(1, b"ab")) == "Records(journal=1, data=b'ab')"


journals = st.sampled_from([0, 1])
names = st.text(
    st.characters(blacklist_characters="/\\\x00", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=20,
).filter(lambda n: n not in (".", ".."))


@st.composite
def sync_files(draw: st.DrawFn) -> SyncFile:
    data = draw(st.binary(max_size=300))
    offset = draw(st.integers(0, 2**20))
    size = offset + len(data) + draw(st.integers(0, 2**20))
    return SyncFile(draw(journals), draw(names), size, offset, data)


primary_frames = st.one_of(
    sync_files(),
    st.builds(SyncDone, st.integers(0, 2**31 - 1)),
    st.builds(Records, journals, st.binary(max_size=300)),
    st.just(Ping()),
)


@SETTINGS
@given(
    st.lists(primary_frames, max_size=8),
    st.lists(st.integers(0, 2**64 - 1), max_size=6),
    st.data(),
)
def test_replication_frames_survive_arbitrary_chunking(
    sent: list[Frame], tickets: list[int], data: st.DataObject
) -> None:
    client, server = replication_pair()
    for frame in sent:
        server.send(frame)
    received: list[Any] = []
    for chunk in chunked(data, server.data_to_send()):
        client.receive_data(chunk)
        received += pump(client)
    assert received == sent
    answers: list[Frame] = [Synced()]
    answers += [Replicated(n % 2, ticket) for n, ticket in enumerate(sorted(tickets))]
    for frame in answers:
        client.send(frame)
    received = []
    for chunk in chunked(data, client.data_to_send()):
        server.receive_data(chunk)
        received += pump(server)
    assert received == answers


# --- who sends what, on which link --------------------------------------------------------


@pytest.mark.parametrize("frame", [SyncFile(0, "f", 1, 0, b"x"), SyncDone(1), Records(0, b"")])
def test_a_backup_may_not_send_the_primarys_frames(frame: Frame) -> None:
    client, server = replication_pair()
    with pytest.raises(LocalProtocolError, match="a cluster client may not send"):
        client.send(frame)
    # And a primary refuses them from its backup, from the header alone.
    client, server = replication_pair()
    server.receive_data(encode_frame(frame)[:5])
    with pytest.raises(RemoteProtocolError, match="a cluster client may not send"):
        pump(server)


@pytest.mark.parametrize("frame", [Synced(), Replicated(0, 1)])
def test_a_primary_may_not_send_the_backups_frames(frame: Frame) -> None:
    client, server = replication_pair()
    with pytest.raises(LocalProtocolError, match="a cluster server may not send"):
        server.send(frame)
    client, server = replication_pair()
    client.receive_data(encode_frame(frame)[:5])
    with pytest.raises(RemoteProtocolError, match="a cluster server may not send"):
        pump(client)


LINK_FRAMES_OF_THE_CLIENT: list[Frame] = [message(1), Topology(())]
LINK_FRAMES_OF_THE_SERVER: list[Frame] = [
    Bindings(True, (BindingInfo("b", "q", "a", "ANYCAST", None, 0, "n", ()),), ()),
    Topology(()),
]


@pytest.mark.parametrize("frame", LINK_FRAMES_OF_THE_CLIENT, ids=lambda f: type(f).__name__)
def test_a_replication_link_carries_no_link_frames_from_the_backup(frame: Frame) -> None:
    client, server = replication_pair()
    name = frame.TYPE.name
    with pytest.raises(LocalProtocolError, match=f"a replication link carries no {name} frames"):
        client.send(frame)
    assert client.state is ConnectionState.ERROR
    client, server = replication_pair()
    server.receive_data(encode_frame(frame))
    with pytest.raises(RemoteProtocolError, match=f"a replication link carries no {name} frames"):
        pump(server)


@pytest.mark.parametrize("frame", LINK_FRAMES_OF_THE_SERVER, ids=lambda f: type(f).__name__)
def test_a_replication_link_carries_no_link_frames_from_the_primary(frame: Frame) -> None:
    client, server = replication_pair()
    name = frame.TYPE.name
    with pytest.raises(LocalProtocolError, match=f"a replication link carries no {name} frames"):
        server.send(frame)
    client, server = replication_pair()
    client.receive_data(encode_frame(frame))
    with pytest.raises(RemoteProtocolError, match=f"a replication link carries no {name} frames"):
        pump(client)


def test_a_replication_link_refuses_a_confirm_from_its_header() -> None:
    client, _server = replication_pair()
    client.receive_data(encode_frame(Confirm(1))[:5])
    with pytest.raises(RemoteProtocolError, match="a replication link carries no CONFIRM"):
        pump(client)


@pytest.mark.parametrize("purpose", ["link", "bridge", "status"])
def test_other_links_carry_no_replication_frames(purpose: Any) -> None:
    def pair() -> tuple[ClientConnection, ServerConnection]:
        client, server = make_client(purpose=purpose), make_server()
        client.start()
        for _ in range(2):
            transfer(client, server)
            transfer(server, client)
        assert client.state is server.state is ConnectionState.ESTABLISHED
        return client, server

    complaint = f"only a replication link carries {{}} frames \\(this one is a {purpose} link\\)"
    for frame in (SyncFile(0, "f", 1, 0, b"x"), SyncDone(1), Records(0, b"r")):
        client, server = pair()
        with pytest.raises(LocalProtocolError, match=complaint.format(frame.TYPE.name)):
            server.send(frame)
        client, server = pair()
        client.receive_data(encode_frame(frame))
        with pytest.raises(RemoteProtocolError, match=complaint.format(frame.TYPE.name)):
            pump(client)
    for frame in (Synced(), Replicated(1, 2)):
        client, server = pair()
        with pytest.raises(LocalProtocolError, match=complaint.format(frame.TYPE.name)):
            client.send(frame)
        client, server = pair()
        server.receive_data(encode_frame(frame))
        with pytest.raises(RemoteProtocolError, match=complaint.format(frame.TYPE.name)):
            pump(server)


def test_no_replication_frames_before_the_handshake_completes() -> None:
    client = make_client(purpose="replication")
    client.start()
    with pytest.raises(LocalProtocolError, match="before the handshake completed"):
        client.send(Synced())


def test_an_error_ends_a_replication_link() -> None:
    client, server = replication_pair()
    server.send(ErrorFrame("disk full"))
    assert transfer(server, client) == [ErrorFrame("disk full")]
    assert client.state is server.state is ConnectionState.CLOSED


# --- Replicated tickets -------------------------------------------------------------------


def test_replicated_tickets_never_decrease_per_journal_when_sent() -> None:
    client, _server = replication_pair()
    client.send(Replicated(0, 10))
    client.send(Replicated(1, 3))  # the other journal has its own tickets
    client.send(Replicated(0, 10))
    with pytest.raises(
        LocalProtocolError, match="Replicated ticket 9 of journal 0 after ticket 10"
    ):
        client.send(Replicated(0, 9))
    assert client.state is ConnectionState.ERROR


def test_replicated_tickets_never_decrease_per_journal_when_received() -> None:
    _client, server = replication_pair()
    server.receive_data(
        encode_frame(Replicated(1, 7))
        + encode_frame(Replicated(0, 1))
        + encode_frame(Replicated(1, 6))
    )
    with pytest.raises(
        RemoteProtocolError, match="Replicated ticket 6 of journal 1 after ticket 7"
    ):
        pump(server)


# --- malformed frames ---------------------------------------------------------------------


def sync_file_body(journal: int = 0, size: int = 10, offset: int = 0, name: bytes = b"f") -> bytes:
    return struct.pack(">BQQB", journal, size, offset, len(name)) + name


@pytest.mark.parametrize(
    ("frame_type", "body", "complaint"),
    [
        (FrameType.REPLICATED, b"\x02" + bytes(8), "REPLICATED frame: journal must be 0"),
        (FrameType.REPLICATED, b"\x00" + bytes(7), "body of 8 bytes, expected 9"),
        (FrameType.REPLICATED, b"", "body of 0 bytes, expected 9"),
        (FrameType.REPLICATED, bytes(10), "body of 10 bytes, expected 9"),
        (FrameType.RECORDS, b"", "RECORDS frame: no journal byte"),
        (FrameType.RECORDS, b"\xff data", "RECORDS frame: journal must be 0"),
        (FrameType.SYNC_FILE, sync_file_body()[:17], "SYNC_FILE frame: 17 bytes is too short"),
        (FrameType.SYNC_FILE, sync_file_body(journal=3), "journal must be 0"),
        (FrameType.SYNC_FILE, sync_file_body()[:-1], "name length 1 overruns the frame"),
        (FrameType.SYNC_FILE, sync_file_body(name=b""), "must have 1..255 UTF-8 bytes, got 0"),
        (FrameType.SYNC_FILE, sync_file_body(name=b"\xff"), "the name is not valid UTF-8"),
        (FrameType.SYNC_FILE, sync_file_body(name=b"a/b"), "'a/b' is not a plain file name"),
        (FrameType.SYNC_FILE, sync_file_body(name=b"a\\b"), "is not a plain file name"),
        (FrameType.SYNC_FILE, sync_file_body(name=b"a\x00"), "is not a plain file name"),
        (FrameType.SYNC_FILE, sync_file_body(name=b"."), "'.' is not a plain file name"),
        (FrameType.SYNC_FILE, sync_file_body(name=b".."), "'..' is not a plain file name"),
        (
            FrameType.SYNC_FILE,
            sync_file_body(size=10, offset=8) + b"abc",
            "chunk of 3 bytes at offset 8 overruns the file's 10",
        ),
        (
            FrameType.SYNC_FILE,
            sync_file_body(size=2**64 - 1, offset=2**64 - 1) + b"a",
            "overruns the file's",
        ),
        (FrameType.SYNC_DONE, b'{"files": -1}', "files must be in 0.."),
        (FrameType.SYNC_DONE, b"{}", "lacks the field 'files'"),
    ],
)
def test_malformed_frames_from_the_primary(frame_type: int, body: bytes, complaint: str) -> None:
    client, server = replication_pair()
    if frame_type == FrameType.REPLICATED:
        server.receive_data(raw(frame_type, body))
        conn: ClientConnection | ServerConnection = server
    else:
        client.receive_data(raw(frame_type, body))
        conn = client
    with pytest.raises(RemoteProtocolError, match=complaint):
        pump(conn)
    assert conn.state is ConnectionState.ERROR


@pytest.mark.parametrize("length", range(1, 8))
def test_truncated_sync_file_frames(length: int) -> None:
    body = sync_file_body(name=b"a-name") + b"data"
    client, _server = replication_pair()
    client.receive_data(raw(FrameType.SYNC_FILE, body[:length]))
    with pytest.raises(RemoteProtocolError, match="too short"):
        pump(client)


@pytest.mark.parametrize(
    ("frame", "complaint"),
    [
        (SyncFile(3, "f", 1, 0, b""), "SyncFile.journal must be 0 .messages., 1 .bindings. or 2"),
        (SyncFile(-1, "f", 1, 0, b""), "SyncFile.journal"),
        (SyncFile(0, "", 1, 0, b""), "1..255 UTF-8 bytes, got 0"),
        (SyncFile(0, "x" * 256, 1, 0, b""), "1..255 UTF-8 bytes, got 256"),
        (SyncFile(0, "é" * 128, 1, 0, b""), "1..255 UTF-8 bytes, got 256"),
        (SyncFile(0, "a/b", 1, 0, b""), "not a plain file name"),
        (SyncFile(0, "..", 1, 0, b""), "not a plain file name"),
        (SyncFile(0, "\ud800", 1, 0, b""), "not valid Unicode"),
        (SyncFile(0, "f", 4, 2, b"abc"), "chunk of 3 bytes at offset 2 overruns the file's 4"),
        (SyncFile(0, "f", 2**64, 0, b""), "SyncFile.size must be a u64"),
        (SyncFile(0, "f", 1, -1, b""), "SyncFile.offset must be a u64"),
        (SyncFile(0, "f", 3, 0, "abc"), "SyncFile.data must be bytes"),  # type: ignore[arg-type]
        (Records(3, b""), "Records.journal must be 0"),
        (Records(True, b""), "Records.journal must be 0"),
        (SyncDone(-1), "files must be in"),
    ],
)
def test_invalid_primary_frames_are_refused_when_sent(frame: Frame, complaint: str) -> None:
    _client, server = replication_pair()
    with pytest.raises(LocalProtocolError, match=complaint):
        server.send(frame)
    assert server.data_to_send() == b""


@pytest.mark.parametrize(
    ("frame", "complaint"),
    [
        (Replicated(2, 1), "Replicated.journal must be 0"),
        (Replicated(0, -1), "Replicated.ticket must be a u64"),
        (Replicated(0, 2**64), "Replicated.ticket must be a u64"),
    ],
)
def test_invalid_backup_frames_are_refused_when_sent(frame: Frame, complaint: str) -> None:
    client, _server = replication_pair()
    with pytest.raises(LocalProtocolError, match=complaint):
        client.send(frame)


@SETTINGS
@given(st.sampled_from([0x22, 0x23, 0x24]), st.binary(max_size=64))
def test_random_replication_bodies_only_raise_remote_protocol_error(
    frame_type: int, body: bytes
) -> None:
    client, server = replication_pair()
    conn: ClientConnection | ServerConnection = server if frame_type == 0x24 else client
    conn.receive_data(raw(frame_type, body))
    try:
        events = pump(conn)
    except RemoteProtocolError:
        return
    [frame] = events
    assert encode_frame(frame) == raw(frame_type, body)  # what decodes, encodes the same


def test_drip_feed_a_replication_conversation() -> None:
    client, server = replication_pair()
    for frame in PRIMARY_FRAMES:
        server.send(frame)
    wire = server.data_to_send()
    for size in itertools.chain(range(1, 12), (97, len(wire))):
        client, _ = replication_pair()
        received: list[Any] = []
        for start in range(0, len(wire), size):
            client.receive_data(wire[start : start + size])
            received += pump(client)
        assert received == PRIMARY_FRAMES
