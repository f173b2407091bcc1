"""Core bridges with real nodes and stomp.py (Artemis's "Core Bridges" chapter): two nodes
in no cluster, a bridge from a queue of node A to node B; every message arrives once, a
filter keeps what it refuses on A, a forwarding address and each routing type, the target
killed (SIGKILL) and restarted mid-stream, the source crashed and restarted, and the
configurations a node refuses to start with.

The acceptors are as ``artemis create`` writes them (no ``/queue/`` or ``/topic/``
prefixes): destinations are plain addresses, ``address::queue`` names a queue.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import BrokerProcess, free_port, start_refused, unique, wait_for

PASSWORD = "<cluster-password>bridge-secret</cluster-password>"
ANYCAST = {"destination-type": "ANYCAST"}
DURABLE = {**ANYCAST, "persistent": "true"}  # journaled on both nodes: it survives a kill


class BridgeNode(BrokerProcess):
    """A node with a CORE acceptor for links (on a port chosen before it starts, so that
    the other node's connector can name it) and its management API."""

    def __init__(self, directory: Path, **options: Any) -> None:
        options.setdefault("prefixes", False)
        options.setdefault("persistence", True)
        options.setdefault("web", True)
        super().__init__(directory, **options)
        self.core_port = free_port()

    @property
    def connector(self) -> str:
        return f"tcp://{self.host}:{self.core_port}"

    def broker_xml(self) -> str:
        acceptor = (
            f'<acceptor name="core">tcp://{self.host}:{self.core_port}?protocols=CORE'
            "</acceptor>\n    </acceptors>"
        )
        return super().broker_xml().replace("</acceptors>", acceptor)

    def depth(self, queue: str) -> int:
        """Messages waiting in ``queue`` (the management API)."""
        count: int = httpx.get(f"{self.web_url}/api/queues/{queue}").json()["messages"]
        return count


class Proxy:
    """A TCP relay in front of a node's CORE acceptor that can withhold what the node
    answers (its Confirms) and cut the connections: a link that breaks after the target
    stored messages and before the bridge heard so."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.answering = threading.Event()
        self.answering.set()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self.sockets += [client, server]
            threading.Thread(target=self._relay, args=(client, server, None), daemon=True).start()
            threading.Thread(
                target=self._relay, args=(server, client, self.answering), daemon=True
            ).start()

    @staticmethod
    def _relay(source: socket.socket, sink: socket.socket, gate: threading.Event | None) -> None:
        try:
            while data := source.recv(65536):
                if gate is None or gate.is_set():
                    sink.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # (wakes the relay blocked in recv)
            sock.close()
        self.sockets.clear()

    def close(self) -> None:
        self.cut()
        self.listener.close()


def anycast(*names: str) -> str:
    return "".join(
        f'<address name="{n}"><anycast><queue name="{n}"/></anycast></address>' for n in names
    )


def both(name: str) -> str:
    return (
        f'<address name="{name}"><anycast><queue name="{name}-any"/></anycast>'
        f'<multicast><queue name="{name}-multi"/></multicast></address>'
    )


def bridge(name: str, queue: str, extra: str = "", connector: str = "b") -> str:
    return (
        f'<bridge name="{name}"><queue-name>{queue}</queue-name>{extra}'
        "<retry-interval>100</retry-interval><max-retry-interval>200</max-retry-interval>"
        f"<static-connectors><connector-ref>{connector}</connector-ref></static-connectors>"
        "</bridge>"
    )


def source_core(target: BridgeNode, bridges: str) -> str:
    return (
        f'{PASSWORD}<connectors><connector name="b">{target.connector}</connector></connectors>'
        f"<bridges>{bridges}</bridges>"
    )


def drain(node: BrokerProcess, queue: str, address: str | None = None) -> list[str]:
    """The bodies waiting in ``queue`` (of ``address``, default the queue's name), consumed."""
    client = node.client()
    try:
        client.subscribe(f"{address or queue}::{queue}")
        client.sync()
        return [m.body for m in client.messages]
    finally:
        client.close()


def arrived(node: BridgeNode, queue: str, count: int, timeout: float = 15) -> None:
    wait_for(
        lambda: node.depth(queue) >= count,
        timeout,
        message=lambda: (
            f"{count} message(s) in {queue}, {node.depth(queue)}; log:\n{node.log_tail()}"
        ),
    )


SHARED_BRIDGES = (
    bridge("plain", "outbox")
    + bridge("red-only", "mixed", "<filter string=\"color = 'red'\"/>")
    + bridge(
        "to-multi",
        "multi-src",
        "<forwarding-address>rt</forwarding-address><routing-type>MULTICAST</routing-type>",
    )
    + bridge(
        "to-any",
        "any-src",
        "<forwarding-address>rt</forwarding-address><routing-type>ANYCAST</routing-type>",
    )
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BridgeNode, BridgeNode]]:
    base = tmp_path_factory.mktemp("bridges")
    b = BridgeNode(
        base / "b", name="b", extra_core=PASSWORD, addresses=anycast("outbox", "mixed") + both("rt")
    )
    a = BridgeNode(
        base / "a",
        name="a",
        extra_core=source_core(b, SHARED_BRIDGES),
        addresses=anycast("outbox", "mixed", "multi-src", "any-src"),
    )
    b.start()
    a.start()
    yield a, b
    a.close()
    b.close()


def test_messages_sent_on_a_arrive_on_b_once_in_order(pair: tuple[BridgeNode, BridgeNode]) -> None:
    a, b = pair
    producer = a.client()
    bodies = [unique(f"m{i:02d}") for i in range(20)]
    for body in bodies:
        producer.send("outbox", body, **ANYCAST)
    arrived(b, "outbox", 20)
    assert drain(b, "outbox") == bodies
    wait_for(lambda: a.depth("outbox") == 0, 10, message="A's queue to be acknowledged")
    assert "bridge plain: forwarding queue outbox to node" in a.log()


def test_a_filter_forwards_what_it_accepts_and_leaves_the_rest(
    pair: tuple[BridgeNode, BridgeNode],
) -> None:
    a, b = pair
    producer = a.client()
    for i, color in enumerate(("red", "blue", "red", "green")):
        producer.send("mixed", f"{color}-{i}", **ANYCAST, color=color)
    arrived(b, "mixed", 2)
    assert drain(b, "mixed") == ["red-0", "red-2"]
    assert sorted(drain(a, "mixed")) == ["blue-1", "green-3"]


@pytest.mark.parametrize(("source", "kind"), [("multi-src", "multi"), ("any-src", "any")])
def test_forwarding_address_and_routing_type(
    pair: tuple[BridgeNode, BridgeNode], source: str, kind: str
) -> None:
    a, b = pair
    body = unique(kind)
    a.client().send(source, body, **ANYCAST)  # anycast here; the bridge sets its own type
    arrived(b, f"rt-{kind}", 1)
    assert drain(b, f"rt-{kind}", "rt") == [body]
    other = "any" if kind == "multi" else "multi"
    assert b.depth(f"rt-{other}") == 0


@pytest.fixture
def make_pair(tmp_path: Path) -> Iterator[Callable[..., tuple[BridgeNode, BridgeNode]]]:
    nodes: list[BridgeNode] = []

    def factory(extra: str = "") -> tuple[BridgeNode, BridgeNode]:
        b = BridgeNode(tmp_path / "b", name="b", extra_core=PASSWORD, addresses=anycast("stream"))
        a = BridgeNode(
            tmp_path / "a",
            name="a",
            extra_core=source_core(b, bridge("stream", "stream", extra)),
            addresses=anycast("stream"),
        )
        nodes.extend((a, b))
        b.start()
        a.start()
        return a, b

    yield factory
    for node in nodes:
        node.close()


def test_target_killed_and_restarted_mid_stream_loses_and_duplicates_nothing(
    make_pair: Callable[..., tuple[BridgeNode, BridgeNode]],
) -> None:
    a, b = make_pair()
    producer = a.client()
    bodies = [f"s{i:03d}" for i in range(300)]
    for body in bodies[:150]:
        producer.send("stream", body, receipt=False, **DURABLE)
    arrived(b, "stream", 20)
    b.kill()  # mid-stream: A has messages in flight, unconfirmed
    for body in bodies[150:]:
        producer.send("stream", body, receipt=False, **DURABLE)
    producer.sync()
    b.start()
    arrived(b, "stream", 300, timeout=30)
    received = drain(b, "stream")
    assert sorted(received) == bodies  # each once
    wait_for(lambda: a.depth("stream") == 0, 10, message="A's queue to be acknowledged")
    assert "bridge stream: link to" in a.log(), "the link broke and was redialled"


def test_a_link_lost_before_the_confirms_resends_and_the_target_drops_the_copies(
    tmp_path: Path,
) -> None:
    b = BridgeNode(tmp_path / "b", name="b", extra_core=PASSWORD, addresses=anycast("stream"))
    proxy = Proxy(b.core_port)
    a = BridgeNode(
        tmp_path / "a",
        name="a",
        extra_core=PASSWORD
        + f'<connectors><connector name="b">tcp://127.0.0.1:{proxy.port}</connector></connectors>'
        + f"<bridges>{bridge('stream', 'stream')}</bridges>",
        addresses=anycast("stream"),
    )
    try:
        b.start()
        a.start()
        wait_for(lambda: "bridge stream: forwarding" in a.log(), 10, message="the link")
        proxy.answering.clear()  # B stores what comes, but A hears no Confirm
        producer = a.client()
        bodies = [f"d{i:02d}" for i in range(40)]
        for body in bodies:
            producer.send("stream", body, **DURABLE)
        arrived(b, "stream", 40)
        assert a.depth("stream") == 40, "nothing is acknowledged on A without a Confirm"
        proxy.answering.set()
        proxy.cut()  # A redials and sends all 40 again
        wait_for(lambda: a.depth("stream") == 0, 15, message="A's queue to be acknowledged")
        assert drain(b, "stream") == bodies
    finally:
        if a.process is not None:
            a.kill()  # (a graceful stop would wait pending-ack-timeout for withheld Confirms)
        a.close()
        b.close()
        proxy.close()


def test_source_crash_and_restart_loses_nothing(
    make_pair: Callable[..., tuple[BridgeNode, BridgeNode]],
) -> None:
    a, b = make_pair()
    b.stop()  # messages wait in A's queue while the target is away
    producer = a.client()
    bodies = [f"c{i:02d}" for i in range(30)]
    for body in bodies:
        producer.send("stream", body, **DURABLE)
    producer.close()
    a.restart(crash=True)
    b.start()
    arrived(b, "stream", 30)
    assert drain(b, "stream") == bodies
    wait_for(lambda: a.depth("stream") == 0, 10, message="A's queue to be acknowledged")


def test_configurations_a_node_refuses(make_broker: Callable[..., BrokerProcess]) -> None:
    connectors = (
        '<connectors><connector name="me">tcp://127.0.0.1:{port}</connector>'
        '<connector name="b">tcp://127.0.0.1:1</connector></connectors>'
    )
    node = make_broker(start=False, prefixes=False)
    node.port = free_port()
    node.pick_ports = False
    node.extra_core = connectors.format(port=node.port) + (
        "<bridges>"
        + bridge("to-me", "q", connector="me")
        + bridge("java", "q", "<transformer-class-name>org.Foo</transformer-class-name>")
        + bridge("bad-filter", "q", '<filter string="color = "/>')
        + "</bridges>"
    )
    log = start_refused(node)
    assert "bridge 'to-me' would forward to this node itself" in log, log
    assert "bridge 'java': transformers are Java classes" in log, log
    node.extra_core = connectors.format(port=node.port) + (
        "<bridges>" + bridge("bad-filter", "q", '<filter string="color = "/>') + "</bridges>"
    )
    log = start_refused(node)
    assert "bridge 'bad-filter': invalid filter" in log, log


def test_refusals_at_run_time_are_logged_and_the_node_serves_on(tmp_path: Path) -> None:
    # B keeps Artemis's default cluster password: it takes no bridge (as it forms no cluster).
    b = BridgeNode(tmp_path / "b", name="b", addresses=anycast("stream"))
    a = BridgeNode(
        tmp_path / "a",
        name="a",
        extra_core=source_core(b, bridge("stream", "stream") + bridge("ghost", "no-such-queue")),
        addresses=anycast("stream"),
    )
    try:
        b.start()
        a.start()
        refused = "bridge stream: refused by " + b.connector
        wait_for(lambda: refused in a.log(), 10, message=lambda: a.log_tail())
        assert "this node takes no bridges: its cluster-password is Artemis's default" in a.log()
        assert "bridge ghost not started: queue no-such-queue does not exist" in a.log()
        client = a.client()  # the node serves its clients meanwhile
        client.send("stream", "kept", **ANYCAST)
        assert a.depth("stream") == 1
        client.close()
    finally:
        a.close()
        b.close()
