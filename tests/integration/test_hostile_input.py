"""Hostile STOMP input against a real node: each item of the list is refused with a clear
ERROR (or a close), stores nothing, and does not slow a well-behaved client down.

The hostile bytes go over raw sockets (:class:`RawStomp`); the bystander is a stomp.py
client whose round trip (SEND with a receipt, then its MESSAGE back) is measured without
and with the hostile connections open, in the same test, and compared with a generous bound
relative to that baseline. The limits are the acceptor parameters in docs/stomp.md
"Limits and hostile input" (set small here so the tests are quick).
"""

from __future__ import annotations

import contextlib
import fcntl
import socket
import ssl
import statistics
import struct
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from artemis_py.config import load_config
from artemis_py.transport.certificates import create_tls_files
from artemis_py.transport.sockets import LINGER

from .conftest import BrokerProcess, Client, RawStomp, encode_frame, unique, wait_for
from .test_stomp_frames import assert_error_then_closed
from .test_tls import HOSTS, PASSWORD, acceptor_tls

LIMITS = (
    ";handshake-timeout=2;stompMaxHeaders=50;stompMaxHeaderLength=4KiB"
    ";stompMaxHeadersSize=32KiB;stompMaxBodySize=64KiB"
)
CAPPED = 3  # connectionsAllowed of the second acceptor


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(
        tmp_path_factory.mktemp("hostile"),
        name="hostile",
        acceptor_params=LIMITS,
        extra_acceptors={"capped": f";connectionsAllowed={CAPPED}"},
    )
    broker.start()
    yield broker
    broker.close()


@pytest.fixture
def bystander(node: BrokerProcess) -> Iterator[tuple[Client, str]]:
    client = Client(node.port)
    queue = unique("/queue/bystander")
    client.subscribe(queue)
    yield client, queue
    client.close()


def round_trip(bystander: tuple[Client, str], count: int = 15) -> float:
    """The bystander's median round trip in seconds: SEND with receipt, its MESSAGE back."""
    client, queue = bystander
    times = []
    for _ in range(count):
        before = len(client.messages)
        start = time.perf_counter()
        client.send(queue, "ping")
        client.wait_messages(before + 1)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def assert_not_slowed(baseline: float, loaded: float) -> None:
    # Generous: a shared CI machine is noisy; a connection that blocked the node's event
    # loop would add whole seconds (the timeouts the hostile connections wait on).
    assert loaded <= 10 * baseline + 0.05, f"round trip {loaded:.4f}s under load, {baseline:.4f}s"


def assert_nothing_stored(node: BrokerProcess, queue: str) -> None:
    consumer = Client(node.port)
    try:
        consumer.subscribe(queue)
        consumer.sync()
        assert consumer.messages == [], consumer.messages
    finally:
        consumer.close()


def connected(node: BrokerProcess, version: str = "1.2") -> RawStomp:
    raw = RawStomp(node.port)
    assert raw.connect(version).command == "CONNECTED"
    return raw


# --- frames -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("-1", "non-negative integer"),
        ("+5", "non-negative integer"),
        ("1e3", "non-negative integer"),
        ("99999999999999999999999999", "exceeds the maximum frame body size"),
        (str(64 * 1024 + 1), "exceeds the maximum frame body size"),
    ],
)
def test_bad_content_length(node: BrokerProcess, value: str, complaint: str) -> None:
    queue = unique("/queue/cl")
    with connected(node) as raw:
        raw.send_bytes(f"SEND\ndestination:{queue}\ncontent-length:{value}\n\nbody\x00".encode())
        assert_error_then_closed(raw, contains=complaint)
    assert_nothing_stored(node, queue)


def test_body_without_content_length_over_the_limit(node: BrokerProcess) -> None:
    queue = unique("/queue/body")
    with connected(node) as raw:
        raw.send_bytes(f"SEND\ndestination:{queue}\n\n".encode() + b"x" * (64 * 1024 + 10))
        assert_error_then_closed(raw, contains="frame body larger than 65536 bytes")
    assert_nothing_stored(node, queue)


@pytest.mark.parametrize(
    ("headers", "complaint"),
    [
        ([f"h{n}:v" for n in range(51)], "more than 50 headers"),
        ([f"h{n}:{'v' * 1000}" for n in range(40)], "frame headers larger than 32768 bytes"),
        (["h:" + "v" * 5000], "header line longer than 4096 bytes"),
    ],
    ids=["count", "total-size", "line-length"],
)
def test_header_floods(node: BrokerProcess, headers: list[str], complaint: str) -> None:
    queue = unique("/queue/flood")
    with connected(node) as raw:
        head = "\n".join([f"SEND\ndestination:{queue}", *headers])
        raw.send_bytes(f"{head}\n\nbody\x00".encode())
        assert_error_then_closed(raw, contains=complaint)
    assert_nothing_stored(node, queue)


def test_endless_header_line_is_cut_off_at_the_limit(node: BrokerProcess) -> None:
    """A header line that never ends: the node answers once the line passes the limit,
    without waiting for (or buffering) the rest."""
    with connected(node) as raw:
        raw.send_bytes(b"SEND\ndestination:/queue/x\nh:" + b"v" * 8192)  # no LF, ever
        assert_error_then_closed(raw, contains="header line longer than 4096 bytes")


def test_nul_in_a_header(node: BrokerProcess) -> None:
    queue = unique("/queue/nul")
    with connected(node) as raw:
        injected = "x:a\x00MESSAGE\ndestination:/queue/other\n\nforged"
        raw.send_bytes(f"SEND\ndestination:{queue}\n{injected}\n\nbody\x00".encode())
        assert_error_then_closed(raw, contains="NUL in a header")
    assert_nothing_stored(node, queue)


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_header_injection_never_reaches_another_client(node: BrokerProcess, version: str) -> None:
    """A 1.2 producer's values with LF, CR and ':' (escaped, as 1.2 allows) reach a consumer
    of each version as one MESSAGE whose headers are exactly the producer's (escaped the
    consumer's way) or left out where the version cannot carry them; never as an extra
    header or frame, and the consumer's connection goes on."""
    queue = unique("/queue/inject")
    properties = [
        ("lf", "a\nevil:1"),
        ("cr-inside", "b\rc"),
        ("cr-end", "d\r"),
        ("colon:name", "v"),
        ("frame", "x\n\nMESSAGE\ndestination:/queue/forged\n\nforged"),
    ]
    with connected(node, version) as consumer, connected(node) as producer:
        assert consumer.receipt("SUBSCRIBE", {"destination": queue, "id": "s"}).command == (
            "RECEIPT"
        )
        reply = producer.receipt("SEND", [("destination", queue), *properties], b"payload")
        assert reply.command == "RECEIPT"
        message = consumer.read_until("MESSAGE")
        assert message.body == b"payload"
        names = [name for name, _ in message.headers]
        assert "evil" not in names
        assert "destination" in names
        assert names.count("destination") == 1
        carried = {
            "1.2": dict(properties),
            "1.1": {k: v for k, v in properties if k != "cr-end"},
            "1.0": {"cr-inside": None, "lf": None, "cr-end": None, "frame": None},
        }[version]
        for name, value in carried.items():
            if value is not None:
                assert message.get(name) == value, (name, message)
        if version == "1.0":
            assert not {"lf", "cr-inside", "cr-end", "frame", "colon:name"} & set(names)
        # The consumer's connection is intact: nothing forged follows, a receipt does.
        assert consumer.receipt("UNSUBSCRIBE", {"id": "s"}).command == "RECEIPT"
    assert_nothing_stored(node, "/queue/forged")


# --- connections ------------------------------------------------------------------------


def test_slow_loris_before_connect_is_closed_by_handshake_timeout(
    node: BrokerProcess, bystander: tuple[Client, str]
) -> None:
    """Connections that never send CONNECT (silent, or trickling a CONNECT that never
    ends) are closed with an ERROR after handshake-timeout (2 s here); meanwhile the
    bystander is served as before."""
    baseline = round_trip(bystander)
    hostile = [RawStomp(node.port) for _ in range(20)]
    try:
        opened = time.monotonic()
        for n, raw in enumerate(hostile):
            if n % 2:
                raw.send_bytes(b"CONNECT\naccept-version:1.2\nhost:")
        loaded = round_trip(bystander)
        for raw in hostile[1::2]:
            raw.send_bytes(b"x")  # still trickling
        for raw in hostile:
            assert_error_then_closed(raw, contains="handshake-timeout")
        assert time.monotonic() - opened >= 1.5, "closed before handshake-timeout"
    finally:
        for raw in hostile:
            raw.close()
    assert_not_slowed(baseline, loaded)


def test_slow_loris_mid_frame_does_not_slow_others(
    node: BrokerProcess, bystander: tuple[Client, str]
) -> None:
    """Connected clients that trickle a frame they never finish hold at most their frame's
    limits in memory and cost the others nothing."""
    queue = unique("/queue/loris")
    baseline = round_trip(bystander)
    hostile = [connected(node) for _ in range(20)]
    try:
        for raw in hostile:
            raw.send_bytes(f"SEND\ndestination:{queue}\ncontent-length:60000\n\n".encode())
        loaded = []
        for _ in range(3):
            for raw in hostile:
                raw.send_bytes(b"x" * 100)
            loaded.append(round_trip(bystander, count=5))
        for raw in hostile:
            assert raw.poll(), "a slow but live client must not be closed"
    finally:
        for raw in hostile:
            raw.close()
    assert_not_slowed(baseline, statistics.median(loaded))
    assert_nothing_stored(node, queue)


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Path]]:
    """A node like ``node`` on a TLS acceptor, and its CA certificate."""
    files = create_tls_files(tmp_path_factory.mktemp("hostile-pem"), ["node"], HOSTS, PASSWORD)
    broker = BrokerProcess(
        tmp_path_factory.mktemp("hostile-tls"),
        name="hostile-tls",
        acceptor_params=LIMITS + acceptor_tls(files),
    )
    broker.start()
    yield broker, files.ca
    broker.close()


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_an_error_reaches_a_client_that_is_still_sending(
    request: pytest.FixtureRequest, tls: bool
) -> None:
    """A malformed frame with more bytes behind it that the node never reads, while the
    node still has deliveries on their way: the client reads everything, ERROR last, then
    the end of the stream (closing a socket with unread input makes the kernel reset the
    connection and drop what it had not sent yet, the ERROR first: the node shuts its
    sending side and reads the rest before it closes; over TLS the TCP connection beneath)."""
    context: ssl.SSLContext | None = None
    ca: Path | None = None
    if tls:
        node, ca = request.getfixturevalue("tls_node")
        context = ssl.create_default_context(cafile=str(ca))
    else:
        node = request.getfixturevalue("node")
    queue = unique("/queue/unread")
    producer = Client(node.port, ssl=None if ca is None else {"ca_certs": str(ca)})
    body = "m" * 60_000
    for _ in range(40):  # 2.4 MB: more than the socket buffers of both ends hold
        producer.send(queue, body, receipt=False, persistent="false")
    producer.sync()
    producer.close()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", node.port))
    if context is not None:
        sock = context.wrap_socket(sock, server_hostname="localhost")
    sock.sendall(encode_frame("CONNECT", {"accept-version": "1.2", "host": "localhost"}))
    connected = b""
    while b"\x00" not in connected:
        connected += sock.recv(1)
    assert connected.startswith(b"CONNECTED\n"), connected
    sock.sendall(encode_frame("SUBSCRIBE", {"destination": queue, "id": "s"}))
    wait_for(lambda: _readable(sock) >= 8 * 1024, message="deliveries on their way")
    sock.setblocking(False)
    unread = b"BOGUS\n\n\x00" + b"z" * (1 << 20)
    tail, received = b"", 0
    try:
        with contextlib.suppress(BlockingIOError, ssl.SSLWantWriteError):
            while unread:
                unread = unread[sock.send(unread) :]
        sock.settimeout(10)
        while data := sock.recv(4096):
            received += len(data)
            tail = (tail + data)[-4096:]
            time.sleep(0.0005)  # a reader slower than the node: its bytes wait in its kernel
    except (ConnectionResetError, BrokenPipeError) as exc:
        pytest.fail(f"{exc} after {received} bytes; the last ones: {tail[-300:]!r}")
    finally:
        sock.close()
    assert received > 1 << 20, received
    frame = tail.rstrip(b"\n")
    assert frame.endswith(b"\x00"), tail[-300:]
    last = frame[:-1].rpartition(b"\x00")[2].lstrip(b"\n")
    assert last.startswith(b"ERROR\n"), tail[-300:]


def test_a_client_that_never_stops_sending_is_closed_after_the_linger(
    node: BrokerProcess,
) -> None:
    """The lingering close is bounded: a client that keeps sending after the ERROR (and
    never closes) finds the connection closed within LINGER (2 s) of the end of the
    stream it was sent."""
    raw = connected(node)
    raw.send_bytes(b"BOGUS\n\n\x00")
    assert_error_then_closed(raw)
    ended = time.monotonic()
    with pytest.raises((BrokenPipeError, ConnectionResetError)):
        while time.monotonic() - ended < 10:
            raw.sock.sendall(b"z" * 1024)
            time.sleep(0.01)  # slowly: the time bound ends it, not the byte bound
    elapsed = time.monotonic() - ended
    raw.close()
    assert LINGER / 2 <= elapsed <= LINGER + 1.5, (
        f"closed {elapsed:.2f}s after the end of the stream"
    )


def _readable(sock: socket.socket) -> int:
    """Bytes waiting in ``sock``'s receive buffer."""
    return struct.unpack("i", fcntl.ioctl(sock, termios.FIONREAD, b"\0\0\0\0"))[0]


def test_connect_flood(node: BrokerProcess, bystander: tuple[Client, str]) -> None:
    baseline = round_trip(bystander)
    flood = []
    try:
        for _ in range(150):
            raw = RawStomp(node.port)
            flood.append(raw)
            raw.send("CONNECT", [("accept-version", "1.2"), ("host", "h")])
        loaded = round_trip(bystander)
        for raw in flood:
            assert raw.read_frame() is not None  # each got its CONNECTED
    finally:
        for raw in flood:
            raw.close()
    assert_not_slowed(baseline, loaded)


def _refused(port: int) -> bool:
    """Whether a new connection to ``port`` is closed by the node at once."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:h\n\n\x00")
        try:
            return sock.recv(4096) == b""
        except ConnectionResetError:
            return True


def test_connections_allowed(node: BrokerProcess, bystander: tuple[Client, str]) -> None:
    port = node.extra_ports["capped"]
    held = [RawStomp(port) for _ in range(CAPPED)]
    try:
        for raw in held:
            assert raw.connect("1.2").command == "CONNECTED"
        assert _refused(port), "one connection over connectionsAllowed must be closed"
        round_trip(bystander, count=1)  # the other acceptor is not affected
        held.pop().close()
        wait_for(lambda: not _refused(port), message="a freed slot to be usable again")
    finally:
        for raw in held:
            raw.close()


def test_settings_are_read(tmp_path: Path) -> None:
    """handshake-timeout and connectionsAllowed are read from the acceptor URL (and a bad
    value is an error naming it)."""
    xml = tmp_path / "broker.xml"
    params = ";handshake-timeout=0;connectionsAllowed=7"
    BrokerProcess(tmp_path, acceptor_params=params).write_config()
    acceptor = load_config(xml).acceptors[0]
    assert (acceptor.handshake_timeout, acceptor.connections_allowed) == (0, 7)
