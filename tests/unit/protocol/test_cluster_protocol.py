"""The sans-IO cluster-link codec: handshake, framing, round trips, drip-feed, hostile input."""

from __future__ import annotations

import itertools
import json
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from artemis_py.protocol.cluster import (
    CREDENTIALS_REJECTED,
    HANDSHAKE_MAX_FRAME_SIZE,
    MAGIC,
    NEED_DATA,
    Auth,
    BindingInfo,
    Bindings,
    Challenge,
    ClientConnection,
    Confirm,
    ConnectionClosed,
    ConnectionState,
    Consumers,
    CreateQueues,
    Error,
    Established,
    Frame,
    FrameType,
    HandshakeError,
    Hello,
    Leaving,
    LocalProtocolError,
    Member,
    Message,
    NewQueue,
    Ping,
    Proposal,
    ProposalResponse,
    Records,
    Reject,
    RemoteProtocolError,
    Replicated,
    Sealed,
    SealedStream,
    ServerConnection,
    Status,
    SyncDone,
    Synced,
    SyncFile,
    Topology,
    Unproposal,
    Welcome,
    decode_frame,
    encode_frame,
    proof,
    transcript,
)
from artemis_py.protocol.cluster.connection import Connection
from artemis_py.protocol.stomp import Connection as StompConnection
from artemis_py.protocol.stomp import Role as StompRole

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PASSWORD = "s3cret-cluster-pässword"


def nonces(seed: int) -> Callable[[int], bytes]:
    """A deterministic nonce source (distinct per call), so byte streams are reproducible."""
    counter = itertools.count()
    return lambda n: bytes((seed + next(counter) + i) % 256 for i in range(n))


def make_client(**overrides: Any) -> ClientConnection:
    args: dict[str, Any] = dict(
        node_id="node-a",
        instance_id="inst-a",
        cluster_name="my-cluster",
        connector=("10.0.0.1", 61716),
        user="cluster-admin",
        password=PASSWORD,
        max_hops=2,
        nonce_source=nonces(1),
    )
    args.update(overrides)
    return ClientConnection(**args)


def make_server(**overrides: Any) -> ServerConnection:
    args: dict[str, Any] = dict(
        node_id="node-b",
        instance_id="inst-b",
        cluster_names=("my-cluster",),
        user="cluster-admin",
        password=PASSWORD,
        nonce_source=nonces(101),
    )
    args.update(overrides)
    return ServerConnection(**args)


def pump(conn: Connection) -> list[Any]:
    """Every event available now (NEED_DATA ends the list, ConnectionClosed too)."""
    events: list[Any] = []
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return events
        events.append(event)
        if isinstance(event, ConnectionClosed):
            return events


def transfer(source: Connection, sink: Connection) -> list[Any]:
    data = source.data_to_send()
    if data:  # receive_data(b"") would mean end of stream
        sink.receive_data(data)
    return pump(sink)


def raw(frame_type: int, body: bytes) -> bytes:
    return struct.pack(">IB", len(body) + 1, frame_type) + body


def established() -> tuple[ClientConnection, ServerConnection]:
    client, server = make_client(), make_server()
    client.start()
    assert transfer(client, server) == []
    assert transfer(server, client) == []
    [server_event] = transfer(client, server)
    [client_event] = transfer(server, client)
    assert isinstance(server_event, Established)
    assert isinstance(client_event, Established)
    return client, server


def message(seq: int, payload: bytes = b"payload") -> Message:
    return Message(
        seq=seq, dup_id=b"dup-%d" % seq, targets=("q1",), message_id=seq, payload=payload
    )


BINDING = BindingInfo(
    name="b-1",
    queue_name="orders",
    address="orders",
    routing_type="ANYCAST",
    filter="color = 'red'",
    distance=0,
    origin_node_id="node-b",
    consumers=(None, "price > 10"),
)

# --- handshake ----------------------------------------------------------------------------


def test_handshake() -> None:
    client, server = make_client(), make_server()
    assert client.state is ConnectionState.IDLE
    assert server.state is ConnectionState.HANDSHAKING
    client.start()
    hello_bytes = client.data_to_send()
    assert hello_bytes.startswith(MAGIC)
    hello = decode_frame(hello_bytes[len(MAGIC) :])
    assert isinstance(hello, Hello)
    assert hello.versions == (1,)
    assert hello.purpose == "link"
    assert hello.max_hops == 2
    assert (hello.connector_host, hello.connector_port) == ("10.0.0.1", 61716)
    assert len(bytes.fromhex(hello.client_nonce)) == 32

    server.receive_data(hello_bytes)
    assert pump(server) == []
    challenge_bytes = server.data_to_send()
    challenge = decode_frame(challenge_bytes)
    assert isinstance(challenge, Challenge)
    assert (challenge.version, challenge.node_id, challenge.instance_id) == (1, "node-b", "inst-b")

    client.receive_data(challenge_bytes)
    assert pump(client) == []
    assert client.state is ConnectionState.HANDSHAKING
    auth_bytes = client.data_to_send()
    assert isinstance(decode_frame(auth_bytes), Auth)

    server.receive_data(auth_bytes)
    assert pump(server) == [
        Established(
            peer_node_id="node-a",
            peer_instance_id="inst-a",
            peer_cluster_name="my-cluster",
            peer_connector=("10.0.0.1", 61716),
            peer_max_hops=2,
            purpose="link",
            version=1,
        )
    ]
    assert server.state is ConnectionState.ESTABLISHED
    welcome_bytes = server.data_to_send()
    assert isinstance(decode_frame(welcome_bytes), Welcome)

    client.receive_data(welcome_bytes)
    assert pump(client) == [
        Established(
            peer_node_id="node-b",
            peer_instance_id="inst-b",
            peer_cluster_name="my-cluster",
            peer_connector=None,
            peer_max_hops=None,
            purpose="link",
            version=1,
        )
    ]
    assert client.state is ConnectionState.ESTABLISHED
    assert client.next_event() is NEED_DATA
    assert client.established is not None
    assert client.established.peer_node_id == "node-b"
    assert client.data_to_send() == server.data_to_send() == b""
    # The password itself never crosses the wire.
    wire = hello_bytes + challenge_bytes + auth_bytes + welcome_bytes
    assert PASSWORD.encode() not in wire


def test_status_purpose_and_version_choice() -> None:
    client = make_client(purpose="status", versions=(1, 2, 3))
    server = make_server(versions=(2, 1))
    client.start()
    transfer(client, server)
    transfer(server, client)
    [event] = transfer(client, server)
    assert event.purpose == "status"
    assert event.version == 2  # the highest common one
    [event] = transfer(server, client)
    assert event.version == 2
    assert client.version == server.version == 2


def test_proofs_bind_the_role_and_are_unambiguous() -> None:
    fields: dict[str, Any] = dict(
        version=1,
        cluster_name="ab",
        client_node_id="c",
        client_instance_id="i",
        server_node_id="s",
        server_instance_id="j",
        user="u",
        client_nonce="00" * 32,
        server_nonce="11" * 32,
    )
    base = transcript("client", **fields)
    assert transcript("server", **fields) != base
    assert transcript("client", **{**fields, "cluster_name": "a", "client_node_id": "bc"}) != base
    assert proof(b"pw", base) != proof(b"pw2", base)
    assert len(proof(b"pw", base)) == 64


def rejected_handshake(
    client: ClientConnection, server: ServerConnection, *, at_auth: bool
) -> tuple[HandshakeError, Reject]:
    client.start()
    server.receive_data(client.data_to_send())
    if at_auth:
        assert pump(server) == []
        transfer(server, client)
        server.receive_data(client.data_to_send())
    with pytest.raises(HandshakeError) as caught:
        server.next_event()
    assert server.state is ConnectionState.ERROR
    [reject] = transfer(server, client)  # the Reject was queued before the raise
    assert isinstance(reject, Reject)
    assert client.state is ConnectionState.CLOSED
    client.receive_data(b"")
    assert pump(client) == [ConnectionClosed()]
    # Nothing more may be sent by the server, not even an Error.
    with pytest.raises(LocalProtocolError):
        server.send(Error("late"))
    with pytest.raises(RemoteProtocolError, match="already failed"):
        server.next_event()
    return caught.value, reject


def test_wrong_password_is_rejected_by_the_server() -> None:
    exc, reject = rejected_handshake(make_client(password="wrong"), make_server(), at_auth=True)
    assert reject.reason == CREDENTIALS_REJECTED
    assert "cluster-user and cluster-password" in reject.reason
    assert "does not match this node's cluster-password" in exc.message
    assert "'node-a'" in exc.message
    assert "10.0.0.1:61716" in exc.message


def test_wrong_user_gets_the_same_answer_as_a_wrong_password() -> None:
    # The challenge goes on (the server does not reveal that the user was wrong) ...
    exc, reject = rejected_handshake(make_client(user="mallory"), make_server(), at_auth=True)
    # ... and the Reject is the very same as for a wrong password; only the local log knows.
    assert reject.reason == CREDENTIALS_REJECTED
    assert "'mallory' is not 'cluster-admin'" in exc.message


def test_wrong_cluster_name() -> None:
    exc, reject = rejected_handshake(
        make_client(cluster_name="other-cluster"), make_server(), at_auth=False
    )
    assert "'my-cluster'" in reject.reason
    assert "'other-cluster'" in reject.reason
    assert reject.reason in exc.message


@pytest.mark.parametrize("name", ["east", "west"])
def test_a_node_in_several_clusters_accepts_a_link_for_each(name: str) -> None:
    # The Hello names the cluster connection; the node serves it with that connection.
    client = make_client(cluster_name=name)
    server = make_server(cluster_names=("east", "west"))
    client.start()
    transfer(client, server)
    transfer(server, client)
    [server_event] = transfer(client, server)
    [client_event] = transfer(server, client)
    assert isinstance(server_event, Established)
    assert server_event.peer_cluster_name == name
    assert isinstance(client_event, Established)


def test_a_cluster_the_node_is_not_in_is_rejected_naming_its_clusters() -> None:
    _, reject = rejected_handshake(
        make_client(cluster_name="north"),
        make_server(cluster_names=("east", "west")),
        at_auth=False,
    )
    assert reject.reason == (
        "cluster name mismatch: this node is in clusters 'east', 'west', the peer in 'north'"
    )


def test_a_node_in_no_cluster_takes_a_bridge_and_refuses_a_cluster_link() -> None:
    # A core bridge names its bridge, not a cluster, and proves the same credentials.
    client = make_client(cluster_name="to-b", purpose="bridge", max_hops=0)
    server = make_server(cluster_names=())
    client.start()
    transfer(client, server)
    transfer(server, client)
    [server_event] = transfer(client, server)
    [client_event] = transfer(server, client)
    assert isinstance(server_event, Established)
    assert (server_event.purpose, server_event.peer_cluster_name) == ("bridge", "to-b")
    assert isinstance(client_event, Established)
    _, reject = rejected_handshake(make_client(), make_server(cluster_names=()), at_auth=False)
    assert reject.reason == "this node has no running cluster connection"


def test_a_node_that_takes_no_bridges_says_why() -> None:
    why = "this node takes no bridges: its cluster-password is Artemis's default"
    _, reject = rejected_handshake(
        make_client(purpose="bridge"), make_server(bridges_refused=why), at_auth=False
    )
    assert reject.reason == why


def test_a_bridge_with_a_wrong_password_is_rejected() -> None:
    _, reject = rejected_handshake(
        make_client(purpose="bridge", password="wrong"), make_server(), at_auth=True
    )
    assert reject.reason == CREDENTIALS_REJECTED


def test_unsupported_version() -> None:
    exc, reject = rejected_handshake(make_client(versions=(2, 3)), make_server(), at_auth=False)
    assert reject.reason == "unsupported cluster protocol version(s) 2,3; this node speaks 1"
    assert reject.reason in exc.message


class FakeServer:
    """A scripted server that does not know the password (or misbehaves otherwise)."""

    def __init__(self, client: ClientConnection) -> None:
        client.start()
        data = client.data_to_send()
        assert data.startswith(MAGIC)
        hello = decode_frame(data[len(MAGIC) :])
        assert isinstance(hello, Hello)
        self.hello = hello
        self.client = client

    def challenge(self, **overrides: Any) -> Challenge:
        fields: dict[str, Any] = dict(
            version=1,
            cluster_name="my-cluster",
            node_id="impostor",
            instance_id="inst-x",
            server_nonce="ab" * 32,
        )
        fields.update(overrides)
        challenge = Challenge(**fields)
        self.client.receive_data(encode_frame(challenge))
        return challenge

    def server_proof(self, challenge: Challenge, password: str) -> str:
        hello = self.hello
        data = transcript(
            "server",
            version=challenge.version,
            cluster_name=challenge.cluster_name,
            client_node_id=hello.node_id,
            client_instance_id=hello.instance_id,
            server_node_id=challenge.node_id,
            server_instance_id=challenge.instance_id,
            user=hello.user,
            client_nonce=hello.client_nonce,
            server_nonce=challenge.server_nonce,
        )
        return proof(password.encode(), data)


def test_client_rejects_a_server_that_does_not_know_the_password() -> None:
    client = make_client()
    fake = FakeServer(client)
    challenge = fake.challenge()
    assert pump(client) == []
    assert isinstance(decode_frame(client.data_to_send()), Auth)
    # It accepts whatever the client proves, but its own proof uses another password.
    client.receive_data(encode_frame(Welcome(fake.server_proof(challenge, "guess"))))
    with pytest.raises(HandshakeError, match="could not prove the cluster password") as caught:
        client.next_event()
    assert "'impostor'" in caught.value.message
    assert client.state is ConnectionState.ERROR
    assert client.established is None
    # The client may still tell the peer why, once; nothing else.
    with pytest.raises(LocalProtocolError):
        client.send(Ping())
    client.send(Error("you could not prove the cluster password"))
    assert isinstance(decode_frame(client.data_to_send()), Error)
    with pytest.raises(LocalProtocolError):
        client.send(Error("twice"))


def test_client_accepts_a_correct_scripted_server() -> None:
    """The control for the test above: the fake server's proof is right with the password."""
    client = make_client()
    fake = FakeServer(client)
    challenge = fake.challenge()
    pump(client)
    client.receive_data(encode_frame(Welcome(fake.server_proof(challenge, PASSWORD))))
    [event] = pump(client)
    assert isinstance(event, Established)
    assert event.peer_node_id == "impostor"


@pytest.mark.parametrize(
    ("overrides", "complaint"),
    [
        ({"version": 2}, "version 2, which we did not offer"),
        ({"cluster_name": "elsewhere"}, "is in cluster 'elsewhere'"),
    ],
)
def test_client_checks_the_challenge(overrides: dict[str, Any], complaint: str) -> None:
    client = make_client()
    FakeServer(client).challenge(**overrides)
    with pytest.raises(HandshakeError, match=complaint):
        client.next_event()
    assert client.data_to_send() == b""  # no Auth for such a server


# --- every frame round-trips --------------------------------------------------------------

EVERY_FRAME: list[Frame] = [
    Hello((1, 2), "status", "c", "n", "i", "h", 1, "u", "0f" * 32, 3),
    Challenge(1, "c", "n", "i", "f0" * 32),
    Auth("12" * 32),
    Welcome("34" * 32),
    Reject("no"),
    Error("broken ☃"),
    Ping(),
    Topology((Member("n1", "i1", "h1", 5, True, 1), Member("n2", "i2", "h2", 6, False, 1))),
    Topology((Member("n3", "i3", "h3", 7, True, 2**63 - 1, group_name="east"),)),
    Topology((Member("n4", "i4", "h4", 8, True, 3, scaling_down_to="n1"),)),
    Topology((Member("n5", "i5", "h5", 9, True, 4, scaling_down_to=""),)),
    Topology((Member("n6", "i6", "h6", 10, True, 5, name="node6"),)),
    Topology(()),
    Leaving("n1", "n2"),
    Leaving("n1", "n2", ("n3:17", "n4:1")),
    Bindings(True, (BINDING,), ()),
    Bindings(False, (), ("b-1", "b-2")),
    Consumers("b-1", (None, "x = 1", None)),
    Status({"nodes": [{"id": "a", "up": True}], "n": 3, "ratio": 0.5, "none": None}),
    Confirm(2**64 - 1),
    Message(0, b"", (), 0, b""),
    Message(2**64 - 1, b"\x00" * 70, ("a", "b" * 300, "ü"), 2**64 - 1, bytes(range(256))),
    CreateQueues(()),
    CreateQueues(
        (
            NewQueue("orders", "orders", "ANYCAST", None, True),
            NewQueue("c1.sub", "prices", "MULTICAST", "region = 'eu'", False),
        )
    ),
    Sealed(()),
    Sealed((SealedStream("orders", "node-a", 2**63 - 1, 0), SealedStream("q", "b", 7, 5))),
    Proposal("g1.orders", "orders@node-a"),
    ProposalResponse("g1.orders", "orders@node-a"),
    ProposalResponse("g1.orders", "orders@node-b", "orders@node-a"),
    Unproposal("g1.orders", "orders@node-a"),
    SyncFile(0, "activemq-data-1.amq", 2**64 - 1, 2**64 - 4, b"abc"),
    SyncDone(7),
    Records(1, bytes(range(256))),
    Synced(),
    Replicated(1, 2**64 - 1),
]


@pytest.mark.parametrize("frame", EVERY_FRAME, ids=lambda f: type(f).__name__)
def test_every_frame_round_trips(frame: Frame) -> None:
    data = encode_frame(frame)
    assert data[4] == frame.TYPE
    assert struct.unpack(">I", data[:4])[0] == len(data) - 4
    assert decode_frame(data) == frame


def test_frame_types_are_distinct_and_cover_every_frame() -> None:
    assert len(set(FrameType)) == 24
    assert {type(frame).TYPE for frame in EVERY_FRAME} == set(FrameType)


def test_every_frame_through_connections() -> None:
    client, server = established()
    client_frames: list[Frame] = [
        message(1),
        Ping(),
        Topology((Member("n1", "i1", "h1", 5, True, 1),)),
        message(7),
        CreateQueues((NewQueue("q", "a", "ANYCAST", None, True),)),
        Sealed((SealedStream("q", "node-a", 9, 3),)),
        Leaving("node-a", "node-c"),
        Proposal("g.q", "q@node-a"),  # grouping frames go either way
        Unproposal("g.q", "q@node-a"),
    ]
    server_frames: list[Frame] = [
        Bindings(True, (BINDING,), ()),
        Consumers("b-1", ()),
        Status({"k": "v"}),
        Confirm(1),
        Ping(),
        Topology(()),
        Confirm(7),
        Leaving("node-b", "node-c"),
        ProposalResponse("g.q", "q@node-b", "q@node-a"),
        Unproposal("g.q", "q@node-a"),
    ]
    for frame in client_frames:
        client.send(frame)
    assert transfer(client, server) == client_frames
    for frame in server_frames:
        server.send(frame)
    assert transfer(server, client) == server_frames


texts = st.text(max_size=12)
u64 = st.integers(0, 2**64 - 1)
messages = st.builds(
    Message,
    seq=u64,
    dup_id=st.binary(max_size=48),
    targets=st.lists(texts, max_size=5).map(tuple),
    message_id=u64,
    payload=st.binary(max_size=600),
)
consumer_lists = st.lists(st.none() | texts, max_size=4).map(tuple)
binding_infos = st.builds(
    BindingInfo,
    name=texts,
    queue_name=texts,
    address=texts,
    routing_type=st.sampled_from(["ANYCAST", "MULTICAST"]),
    filter=st.none() | texts,
    distance=st.integers(0, 2**31 - 1),
    origin_node_id=texts,
    consumers=consumer_lists,
)
bindings_frames = st.builds(
    Bindings,
    snapshot=st.booleans(),
    added=st.lists(binding_infos, max_size=4).map(tuple),
    removed=st.lists(texts, max_size=4).map(tuple),
)


@SETTINGS
@given(messages)
def test_message_round_trips(frame: Message) -> None:
    assert decode_frame(encode_frame(frame)) == frame


@SETTINGS
@given(bindings_frames)
def test_bindings_round_trip(frame: Bindings) -> None:
    assert decode_frame(encode_frame(frame)) == frame


def chunked(data: st.DataObject, wire: bytes) -> list[bytes]:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=12)))
    bounds = [0, *cuts, len(wire)]
    return [wire[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@SETTINGS
@given(st.lists(messages, min_size=1, max_size=6), st.lists(bindings_frames, max_size=3), st.data())
def test_frames_survive_arbitrary_chunking(
    sent: list[Message], bindings: list[Bindings], data: st.DataObject
) -> None:
    client, server = established()
    seqs = sorted(data.draw(st.sets(u64, min_size=len(sent), max_size=len(sent))))
    sent = [
        Message(seq, m.dup_id, m.targets, m.message_id, m.payload)
        for seq, m in zip(seqs, sent, strict=True)
    ]
    for frame in sent:
        client.send(frame)
    received: list[Any] = []
    for chunk in chunked(data, client.data_to_send()):
        server.receive_data(chunk)
        received += pump(server)
    assert received == sent
    for update in bindings:
        server.send(update)
    received = []
    for chunk in chunked(data, server.data_to_send()):
        client.receive_data(chunk)
        received += pump(client)
    assert received == bindings


# --- drip-feed: every chunk size gives the same events -----------------------------------


def client_script(conn: Connection, event: Any) -> None:
    if isinstance(event, Established):
        for seq in (1, 2, 5):
            conn.send(message(seq, payload=b"p" * seq * 10))
        conn.send(Topology((Member("node-a", "inst-a", "10.0.0.1", 61716, True, 1),)))
        conn.send(Ping())
    elif isinstance(event, Confirm) and event.seq == 5:
        conn.send(Leaving("node-a", "node-c"))


def server_script(conn: Connection, event: Any) -> None:
    if isinstance(event, Established):
        conn.send(Bindings(True, (BINDING,), ()))
        conn.send(Consumers("b-1", ("a > 1",)))
        conn.send(Topology(()))
        conn.send(Status({"uptime": 12}))
    elif isinstance(event, Message) and event.seq != 2:  # confirm 2 together with 5
        conn.send(Confirm(event.seq))


def run(conn: Connection, script: Callable[[Connection, Any], None]) -> list[Any]:
    events = []
    while (event := conn.next_event()) is not NEED_DATA:
        events.append(event)
        if isinstance(event, ConnectionClosed):
            break
        script(conn, event)
    return events


def reference_conversation() -> tuple[bytes, bytes, list[Any], list[Any]]:
    client, server = make_client(), make_server()
    client.start()
    c2s = s2c = b""
    client_events: list[Any] = []
    server_events: list[Any] = []
    for _ in range(10):
        data = client.data_to_send()
        if data:
            c2s += data
            server.receive_data(data)
            server_events += run(server, server_script)
        data = server.data_to_send()
        if data:
            s2c += data
            client.receive_data(data)
            client_events += run(client, client_script)
    client.receive_data(b"")
    server.receive_data(b"")
    client_events += run(client, client_script)
    server_events += run(server, server_script)
    return c2s, s2c, client_events, server_events


def replay(conn: Connection, wire: bytes, size: int, script: Any) -> tuple[list[Any], bytes]:
    events = []
    out = conn.data_to_send()
    for start in range(0, len(wire), size):
        conn.receive_data(wire[start : start + size])
        events += run(conn, script)
        out += conn.data_to_send()
    conn.receive_data(b"")
    events += run(conn, script)
    return events, out + conn.data_to_send()


def test_drip_feed_every_chunk_size() -> None:
    c2s, s2c, client_events, server_events = reference_conversation()
    assert [type(e) for e in server_events] == [
        Established, Message, Message, Message, Topology, Ping, Leaving, ConnectionClosed
    ]  # fmt: skip
    assert [type(e) for e in client_events] == [
        Established, Bindings, Consumers, Topology, Status, Confirm, Confirm, ConnectionClosed
    ]  # fmt: skip
    for size in range(1, max(len(c2s), len(s2c)) + 1):
        server = make_server()
        assert replay(server, c2s, size, server_script) == (server_events, s2c), size
        client = make_client()
        client.start()
        assert replay(client, s2c, size, client_script) == (client_events, c2s), size


def test_many_frames_in_one_buffer_compacts_correctly() -> None:
    client, server = established()
    sent = [message(seq, payload=bytes([seq % 256]) * (seq % 700)) for seq in range(1, 1500)]
    for frame in sent:
        client.send(frame)
    wire = client.data_to_send()
    assert len(wire) > 4 * 64 * 1024
    received: list[Any] = []
    # Irregular chunks straddling frame boundaries, with events drained between some of them.
    for index, start in enumerate(range(0, len(wire), 9973)):
        server.receive_data(wire[start : start + 9973])
        if index % 3 == 2:
            received += pump(server)
    received += pump(server)
    assert received == sent


# --- hostile and broken input -------------------------------------------------------------


def test_the_preamble_is_a_complete_line_for_line_based_servers() -> None:
    # A STOMP acceptor dialled by mistake has a whole (unknown) command line to answer.
    assert MAGIC.endswith(b"\r\n")
    assert b"\n" not in MAGIC[:-1]
    stomp = StompConnection(StompRole.SERVER)
    stomp.receive_data(MAGIC)
    with pytest.raises(RemoteProtocolError, match="unknown command"):
        stomp.next_event()


@pytest.mark.parametrize(
    ("answer", "what"),
    [
        (b"ERROR\nmessage:unknown command 'ARTPYC'\n\n\x00", "a STOMP acceptor answered"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "an HTTP server answered"),
        (b"\x00\x00\x00\x1a\x00\x00\x00\x00\x00\x00\x00\x00\xfe\x01", "does not speak"),
    ],
)
def test_a_client_says_what_answered_instead_of_a_cluster_node(answer: bytes, what: str) -> None:
    client = make_client()
    client.start()
    client.data_to_send()
    client.receive_data(answer)
    with pytest.raises(RemoteProtocolError, match=what):
        client.next_event()


@pytest.mark.parametrize(
    "garbage",
    [
        b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00",
        b"STOMP\n",
        b"\x00\x00\x00\x1a\x00\x00\x00\x00\x00\x00\x00\x00\xfe\x01\x02\x03",  # core-like
        b"GET / HTTP/1.1\r\n",
        b"ARTPYCL\x01",
    ],
)
def test_bad_preamble_is_a_clear_error(garbage: bytes) -> None:
    server = make_server()
    server.receive_data(garbage)
    with pytest.raises(RemoteProtocolError) as caught:
        server.next_event()
    message = caught.value.message
    assert "does not speak the artemis-py cluster protocol" in message
    assert repr(garbage[:16]) in message
    assert server.state is ConnectionState.ERROR
    assert server.data_to_send() == b""  # no frame to a peer that cannot read it


def test_bad_preamble_is_detected_from_the_first_byte() -> None:
    server = make_server()
    server.receive_data(b"ART")
    assert server.next_event() is NEED_DATA  # a correct prefix: wait
    server = make_server()
    server.receive_data(b"C")
    with pytest.raises(RemoteProtocolError, match=r"received b'C'"):
        server.next_event()


def test_oversized_frames() -> None:
    client, server = established()
    client2, server2 = make_client(max_frame_size=1024), make_server(max_frame_size=1024)
    client2.start()
    transfer(client2, server2)
    transfer(server2, client2)
    transfer(client2, server2)
    transfer(server2, client2)
    assert client2.state is server2.state is ConnectionState.ESTABLISHED
    # Sending: the limit counts the type byte and the body.
    big = message(1, payload=b"x" * 1024)
    with pytest.raises(LocalProtocolError, match="exceeds the maximum frame size of 1024"):
        client2.send(big)
    assert client2.state is ConnectionState.ERROR
    assert client2.data_to_send() == b""
    # Receiving: refused from the header alone, before the body arrives.
    server2.receive_data(struct.pack(">IB", 1025, FrameType.MESSAGE))
    with pytest.raises(RemoteProtocolError, match="1025 bytes exceeds the maximum frame size"):
        server2.next_event()
    # The same frame is fine under the default limit.
    client.send(big)
    assert transfer(client, server) == [big]


def test_handshake_frames_are_limited_before_authentication() -> None:
    server = make_server()
    server.receive_data(MAGIC + struct.pack(">I", HANDSHAKE_MAX_FRAME_SIZE + 1))
    with pytest.raises(RemoteProtocolError, match="before authentication"):
        server.next_event()


def test_zero_length_frame() -> None:
    _client, server = established()
    server.receive_data(b"\x00\x00\x00\x00")
    with pytest.raises(RemoteProtocolError, match="length 0"):
        server.next_event()


def valid_message_body() -> bytes:
    return encode_frame(Message(9, b"dup", ("q1", "q2"), 77, b"payload"))[5:]


def test_truncated_message_bodies() -> None:
    body = valid_message_body()
    # Every truncation that cuts into the fixed part or a target is an error (cutting the
    # payload only shortens the payload: it has no length of its own).
    payload_start = len(body) - len(b"payload")
    for cut in range(payload_start):
        _client, server = established()
        server.receive_data(raw(FrameType.MESSAGE, body[:cut]))
        with pytest.raises(RemoteProtocolError, match="malformed MESSAGE frame"):
            server.next_event()


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        (struct.pack(">QQH", 1, 1, 500) + b"x" * 10, "dup_id length 500 overruns"),
        (struct.pack(">QQH", 1, 1, 0) + struct.pack(">H", 900) + b"\x00" * 20, "900 targets"),
        (struct.pack(">QQHHH", 1, 1, 0, 1, 50) + b"abc", "target length 50 overruns"),
        (struct.pack(">QQHHH", 1, 1, 0, 1, 2) + b"\xff\xfe", "not valid UTF-8"),
    ],
)
def test_garbled_message_bodies(body: bytes, complaint: str) -> None:
    _client, server = established()
    server.receive_data(raw(FrameType.MESSAGE, body))
    with pytest.raises(RemoteProtocolError, match=complaint):
        server.next_event()


def only_remote_errors(conn: Connection, frame_type: int, body: bytes) -> None:
    conn.receive_data(raw(frame_type, body))
    try:
        pump(conn)
    except RemoteProtocolError:
        assert conn.state is ConnectionState.ERROR


def valid_message_body_mutations() -> st.SearchStrategy[bytes]:
    body = valid_message_body()

    @st.composite
    def mutate(draw: st.DrawFn) -> bytes:
        data = bytearray(body)
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data[: draw(st.integers(0, len(data)))])

    return mutate()


@SETTINGS
@given(st.binary(max_size=80) | valid_message_body_mutations())
def test_random_message_bodies_only_raise_remote_protocol_error(body: bytes) -> None:
    _client, server = established()
    only_remote_errors(server, FrameType.MESSAGE, body)


@SETTINGS
@given(
    st.sampled_from([FrameType.BINDINGS, FrameType.CONSUMERS, FrameType.STATUS, FrameType.TOPOLOGY])
    | st.integers(0, 255),
    st.binary(max_size=60)
    | st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=8,
    ).map(lambda v: json.dumps(v).encode()),
)
def test_random_frames_to_a_client_only_raise_remote_protocol_error(
    frame_type: int, body: bytes
) -> None:
    client, _server = established()
    client.send(message(1))
    only_remote_errors(client, frame_type, body)


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        (b"[]", "must be a JSON object"),
        (b"{", "malformed BINDINGS frame"),
        (b"\xff{}", "malformed BINDINGS frame"),
        (b'{"snapshot": true, "added": []}', "lacks the field 'removed'"),
        (b'{"snapshot": 1, "added": [], "removed": []}', "true or false"),
        (b'{"snapshot": true, "added": [], "removed": [NaN]}', "NaN is not valid JSON"),
        (b'{"snapshot": true, "added": [], "removed": ["\\ud800"]}', "not valid Unicode"),
        (b'{"snapshot": true, "added": [{}], "removed": []}', "lacks the field 'name'"),
        (b"[" * 100_000, "nested too deeply"),
        (b'{"snapshot": true, "added": [], "removed": [' + b"1" * 5000 + b"]}", "malformed"),
    ],
)
def test_garbled_json_bodies(body: bytes, complaint: str) -> None:
    client, _server = established()
    client.receive_data(raw(FrameType.BINDINGS, body))
    with pytest.raises(RemoteProtocolError, match=complaint):
        client.next_event()


def test_a_leaving_frame_from_a_peer_that_predates_its_received_list() -> None:
    _client, server = established()
    server.receive_data(raw(FrameType.LEAVING, b'{"node_id": "a", "target": "b"}'))
    assert server.next_event() == Leaving("a", "b", ())
    server.receive_data(raw(FrameType.LEAVING, b'{"node_id": "a", "target": "b", "received": 1}'))
    with pytest.raises(RemoteProtocolError, match="must be an array"):
        server.next_event()


def test_a_member_from_a_peer_that_predates_scaling_down_to() -> None:
    _client, server = established()
    member = b'{"node_id": "n", "instance_id": "i", "host": "h", "port": 1, "up": true, '
    server.receive_data(
        raw(FrameType.TOPOLOGY, b'{"members": [' + member + b'"version": 1, "group_name": null}]}')
    )
    assert server.next_event() == Topology((Member("n", "i", "h", 1, True, 1),))
    server.receive_data(
        raw(
            FrameType.TOPOLOGY,
            b'{"members": [' + member + b'"version": 1, "group_name": null, '
            b'"scaling_down_to": 5}]}',
        )
    )
    with pytest.raises(RemoteProtocolError, match="scaling_down_to must be a string"):
        server.next_event()


def test_bad_field_values_in_the_handshake() -> None:
    server = make_server()
    hello = json.dumps(
        {
            "versions": [1],
            "purpose": "link",
            "cluster_name": "my-cluster",
            "node_id": "n",
            "instance_id": "i",
            "connector_host": "h",
            "connector_port": 70000,
            "user": "u",
            "client_nonce": "00" * 32,
            "max_hops": 1,
        }
    ).encode()
    server.receive_data(MAGIC + raw(FrameType.HELLO, hello))
    with pytest.raises(RemoteProtocolError, match=r"connector_port must be in 0\.\.65535"):
        server.next_event()


def test_confirm_body_must_be_eight_bytes() -> None:
    client, _server = established()
    client.send(message(1))
    client.receive_data(raw(FrameType.CONFIRM, b"\x00" * 7))
    with pytest.raises(RemoteProtocolError, match="expected 8"):
        client.next_event()


def test_invalid_frames_are_refused_when_sent() -> None:
    cases: list[tuple[Frame, str]] = [
        (Message(-1, b"", ("q",), 0, b""), "seq must be a u64"),
        (Message(1, b"", ("q",) * 65536, 0, b""), "at most 65535 binding names"),
        (Message(1, b"", ("\ud800",), 0, b""), "not valid Unicode"),
        (Message(1, b"x" * 70000, ("q",), 0, b""), "dup_id"),
        (Bindings(True, (BINDING,), ("ok", 3)), r"Bindings\.removed\[1\] must be a string"),  # type: ignore[arg-type]
        (Status({"x": object()}), "cannot be encoded as JSON"),
        (Topology((Member("n", "i", "h", -1, True, 1),)), r"port must be in"),
    ]
    for frame, complaint in cases:
        client, server = established()
        sender: Connection = server if isinstance(frame, Bindings | Status) else client
        with pytest.raises(LocalProtocolError, match=complaint):
            sender.send(frame)
        assert sender.state is ConnectionState.ERROR
        assert sender.data_to_send() == b""


# --- roles and order ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [Confirm(1), Bindings(True, (), ()), Consumers("b", ()), Status({}), Reject("x")],
    ids=lambda f: type(f).__name__,
)
def test_client_may_not_send_server_frames(frame: Frame) -> None:
    client, server = established()
    with pytest.raises(LocalProtocolError, match="may not send"):
        client.send(frame)
    # ... and a server refuses to receive them.
    client, server = established()
    server.receive_data(encode_frame(frame))
    with pytest.raises(RemoteProtocolError, match="a cluster client may not send"):
        server.next_event()


def test_server_may_not_create_queues() -> None:
    client, server = established()
    with pytest.raises(LocalProtocolError, match="may not send CREATE_QUEUES"):
        server.send(CreateQueues(()))
    client, server = established()
    client.receive_data(encode_frame(CreateQueues(())))
    with pytest.raises(RemoteProtocolError, match="may not send CREATE_QUEUES"):
        client.next_event()


def test_server_may_not_seal_streams() -> None:
    _client, server = established()
    with pytest.raises(LocalProtocolError, match="may not send SEALED"):
        server.send(Sealed(()))


def test_a_sealed_end_beyond_a_signed_64_bit_offset_is_refused() -> None:
    frame = encode_frame(Sealed((SealedStream("q", "n", 1, 0),)))
    body = frame[5:].replace(b'"end":1', b'"end":18446744073709551615')
    with pytest.raises(RemoteProtocolError):
        decode_frame(struct.pack(">IB", len(body) + 1, FrameType.SEALED) + body)


def test_server_may_not_send_messages() -> None:
    client, server = established()
    with pytest.raises(LocalProtocolError, match="a cluster server may not send MESSAGE"):
        server.send(message(1))
    client, server = established()
    client.receive_data(encode_frame(message(1)))
    with pytest.raises(RemoteProtocolError, match="a cluster server may not send MESSAGE"):
        client.next_event()


@pytest.mark.parametrize(
    "frame",
    [EVERY_FRAME[0], EVERY_FRAME[1], Auth("00" * 32), Welcome("00" * 32)],
    ids=lambda f: type(f).__name__,
)
def test_handshake_frames_are_not_sent_by_hand(frame: Frame) -> None:
    client, server = established()
    with pytest.raises(LocalProtocolError):
        client.send(frame)
    with pytest.raises(LocalProtocolError):
        server.send(frame)


def test_no_ordinary_frames_before_the_handshake_completes() -> None:
    client = make_client()
    with pytest.raises(LocalProtocolError, match="before start"):
        client.send(Ping())
    client.start()
    with pytest.raises(LocalProtocolError, match="before the handshake completed"):
        client.send(message(1))
    server = make_server()
    server.receive_data(MAGIC + encode_frame(Ping()))
    with pytest.raises(RemoteProtocolError, match=r"PING frame before the handshake .*Hello"):
        server.next_event()
    # A repeated Hello after the handshake is refused too.
    client, server = established()
    server.receive_data(encode_frame(EVERY_FRAME[0]))
    with pytest.raises(RemoteProtocolError, match="HELLO frame after the handshake"):
        server.next_event()


def test_client_refuses_frames_before_start() -> None:
    client = make_client()
    client.receive_data(encode_frame(Challenge(1, "c", "n", "i", "00" * 32)))
    with pytest.raises(RemoteProtocolError, match=r"start\(\) was not called"):
        client.next_event()


def test_message_seqs_increase_and_confirms_are_cumulative() -> None:
    client, server = established()
    client.send(message(5))
    with pytest.raises(LocalProtocolError, match="seq 5 does not follow the previous seq 5"):
        client.send(message(5))

    client, server = established()
    server.receive_data(encode_frame(message(5)) + encode_frame(message(4)))
    assert server.next_event() == message(5)
    with pytest.raises(RemoteProtocolError, match="seq 4 does not follow"):
        server.next_event()

    client, server = established()
    client.send(message(3))
    transfer(client, server)
    with pytest.raises(LocalProtocolError, match="cannot confirm seq 4"):
        server.send(Confirm(4))

    client, server = established()
    client.send(message(3))
    client.receive_data(encode_frame(Confirm(4)))  # would drop a message never sent
    with pytest.raises(RemoteProtocolError, match="Confirm of seq 4, but the last seq sent is 3"):
        client.next_event()

    client, server = established()
    client.send(message(3))
    client.receive_data(
        encode_frame(Confirm(3)) + encode_frame(Confirm(3)) + encode_frame(Confirm(2))
    )
    assert pump_until_error(client) == [Confirm(3), Confirm(3)]


def pump_until_error(conn: Connection) -> list[Any]:
    events: list[Any] = []
    with pytest.raises(RemoteProtocolError, match="after a Confirm of seq 3"):
        while True:
            events.append(conn.next_event())
    return events


# --- closing ------------------------------------------------------------------------------


def test_eof_between_frames_and_mid_frame() -> None:
    client, server = established()
    client.send(Leaving("node-a", "node-c"))
    server.receive_data(client.data_to_send())
    server.receive_data(b"")
    assert pump(server) == [Leaving("node-a", "node-c"), ConnectionClosed()]
    assert server.state is ConnectionState.CLOSED
    assert server.next_event() == ConnectionClosed()  # keeps answering
    with pytest.raises(LocalProtocolError):
        server.receive_data(b"more")

    wire = encode_frame(message(1))
    for cut in range(1, len(wire)):
        client, server = established()
        server.receive_data(wire[:cut])
        assert server.next_event() is NEED_DATA
        server.receive_data(b"")
        with pytest.raises(RemoteProtocolError, match="peer closed the connection mid-frame"):
            server.next_event()


def test_eof_in_the_preamble() -> None:
    server = make_server()
    server.receive_data(b"")
    assert server.next_event() == ConnectionClosed()
    server = make_server()
    server.receive_data(MAGIC[:5])
    server.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="mid-frame"):
        server.next_event()


def test_error_frames_close_the_connection() -> None:
    client, server = established()
    server.send(Error("shutting down: disk full"))
    assert server.state is ConnectionState.CLOSED
    with pytest.raises(LocalProtocolError):
        server.send(Ping())
    client.receive_data(server.data_to_send() + encode_frame(Ping()))
    assert client.next_event() == Error("shutting down: disk full")
    assert client.state is ConnectionState.CLOSED
    with pytest.raises(RemoteProtocolError, match="PING frame after the peer's Error"):
        client.next_event()


def test_error_frame_during_the_handshake() -> None:
    client = make_client()
    client.start()
    client.receive_data(encode_frame(Error("this node is shutting down")))
    assert pump(client) == [Error("this node is shutting down")]
    assert client.state is ConnectionState.CLOSED


def test_after_a_remote_error_the_connection_stays_failed() -> None:
    client, server = established()
    server.receive_data(raw(FrameType.MESSAGE, b"\x00"))
    with pytest.raises(RemoteProtocolError) as first:
        server.next_event()
    server.receive_data(encode_frame(message(1)))  # ignored now
    with pytest.raises(RemoteProtocolError, match="already failed") as again:
        server.next_event()
    assert first.value.message in again.value.message
    server.send(Error(first.value.message))  # tell the peer, once
    assert client.state is ConnectionState.ESTABLISHED
    assert transfer(server, client) == [Error(first.value.message)]
