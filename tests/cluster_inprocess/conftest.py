"""The in-process cluster tier: several real nodes in one Trio run, joined by memory streams.

Each node is a real :class:`~artemis_py.broker.broker.Broker` (persistence off) with its
real cluster connection (:class:`~artemis_py.cluster.cluster_connection.ClusterConnection`:
dialler, binding exchange, membership, the one link dispatcher, bridges, redistributor,
scale-down) and a :class:`~artemis_py.node.Node` for the graceful stop. Only the sockets are
replaced: a :class:`Network` hands each dial a :func:`trio.testing.memory_stream_pair`, its
far end served by the dialled node's :class:`~artemis_py.cluster.incoming.LinkAcceptor`,
and the dialling end completes the same handshake over it
(:func:`artemis_py.transport.link.open_link`). The network can be cut between two nodes: what
is sent across a cut is lost and a new dial there times out, as in a real partition, so
links die by ``connection-ttl`` and come back when it heals.

Tests run under ``autojump_clock``: retry intervals, heart-beats, TTLs and
redistribution delays take virtual time, so a scenario of minutes runs in well under a
second. Clients are the broker's own API (routing and sending as a STOMP session does, and
:class:`Collector` consumers); the real-process tier (tests/cluster) stays the top tier,
with STOMP clients and real sockets.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

from artemis_py.broker.broker import Broker
from artemis_py.broker.filter import Filter
from artemis_py.broker.message import MessageReference
from artemis_py.broker.paging import PagingManager
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.cluster.cluster_connection import ClusterConnection
from artemis_py.cluster.incoming import LinkAcceptor
from artemis_py.config import RoutingType
from artemis_py.config.parse import parse_config
from artemis_py.node import Node, cluster_connections
from artemis_py.transport.link import Link, open_link
from cluster.conftest import LINK_TIMING
from conftest import wait_for

ANYCAST = RoutingType.ANYCAST
MULTICAST = RoutingType.MULTICAST
PORT = 61616

__all__ = [
    "ANYCAST",
    "MULTICAST",
    "Collector",
    "InProcessCluster",
    "InProcessNode",
    "open_cluster",
    "wait_consumers",
]


def host(index: int) -> str:
    return f"node{index}.test"


@dataclass(frozen=True)
class Settings:
    """What the nodes' ``broker.xml`` says (the same for every node, but for the
    per-node exceptions at the end)."""

    policy: str = "ON_DEMAND"  # message-load-balancing
    # node index -> indexes of its static connectors (None: node0 names node1, every other
    # node names node0, as tests/cluster does)
    static: dict[int, list[int]] | None = None
    delay: int = -1  # redistribution-delay, ms (Artemis's default: never)
    scale_down: bool = False  # <ha-policy> with <scale-down/>
    extra: str = ""  # more <cluster-connection> XML
    passwords: dict[int, str] = field(default_factory=dict)  # node index -> its own
    node_ids: dict[int, str] = field(default_factory=dict)  # node index -> its own (a copy)

    def static_of(self, index: int) -> list[int]:
        if self.static is None:
            return [1] if index == 0 else [0]
        return self.static.get(index, [])


def broker_xml(index: int, count: int, settings: Settings) -> str:
    policy, delay, extra = settings.policy, settings.delay, settings.extra
    static = settings.static_of(index)
    connectors = "".join(
        f'<connector name="{"self" if i == index else f"node{i}"}">tcp://{host(i)}:{PORT}</connector>'
        for i in range(count)
    )
    refs = "".join(f"<connector-ref>node{i}</connector-ref>" for i in static if i != index)
    static_xml = f"<static-connectors>{refs}</static-connectors>" if refs else ""
    ha = (
        "<ha-policy><primary-only><scale-down/></primary-only></ha-policy>"
        if settings.scale_down
        else ""
    )
    return f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
      <name>node{index}</name>
      <persistence-enabled>false</persistence-enabled>
      <connectors>{connectors}</connectors>
      <cluster-user>cluster</cluster-user>
      <cluster-password>{settings.passwords.get(index, "in-process secret")}</cluster-password>
      <address-settings><address-setting match="#">
        <redistribution-delay>{delay}</redistribution-delay>
        <auto-delete-queues>false</auto-delete-queues>
        <auto-delete-addresses>false</auto-delete-addresses>
      </address-setting></address-settings>
      {ha}
      <cluster-connections><cluster-connection name="test">
        <connector-ref>self</connector-ref>
        {LINK_TIMING}
        <message-load-balancing>{policy}</message-load-balancing>
        <max-hops>1</max-hops>
        {extra}
        {static_xml}
      </cluster-connection></cluster-connections>
    </core></configuration>"""


class Wire(trio.abc.Stream):
    """One end of a memory link that loses what is sent while the network is cut there."""

    def __init__(self, stream: trio.abc.Stream, cut: Callable[[], bool]) -> None:
        self.stream = stream
        self.cut = cut

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.cut():
            await trio.lowlevel.checkpoint()  # lost on the way, as across a partition
            return
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.stream.aclose()


class Network:
    """Memory streams in place of TCP between the nodes, with cuts (partitions)."""

    def __init__(self) -> None:
        # (host, port) -> the node listening there, its acceptor, and its nursery (the
        # links it serves die with it)
        self.acceptors: dict[tuple[str, int], tuple[str, LinkAcceptor, trio.Nursery]] = {}
        self.cuts: set[frozenset[str]] = set()
        self.healed = trio.Event()
        self._ports = itertools.count(40000)

    def listen(
        self, node: str, address: tuple[str, int], acceptor: LinkAcceptor, nursery: trio.Nursery
    ) -> None:
        self.acceptors[address] = (node, acceptor, nursery)

    def unlisten(self, address: tuple[str, int]) -> None:
        self.acceptors.pop(address, None)

    def is_cut(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.cuts

    def cut(self, a: str, b: str) -> None:
        self.cuts.add(frozenset((a, b)))

    def heal(self) -> None:
        self.cuts.clear()
        self.healed.set()
        self.healed = trio.Event()

    def connector(
        self, node: str, cluster: ClusterConnection
    ) -> Callable[[str, int], Awaitable[Link]]:
        """The dialler's connect for ``cluster`` (of node ``node``)."""

        async def connect(dial_host: str, port: int) -> Link:
            with trio.fail_after(cluster.call_timeout):  # a SYN into a cut, or no listener
                while (listening := self.acceptors.get((dial_host, port))) is None or self.is_cut(
                    node, listening[0]
                ):
                    if listening is None:
                        raise ConnectionRefusedError(111, f"nothing listens at {dial_host}:{port}")
                    await self.healed.wait()
            peer, acceptor, nursery = listening
            near, far = trio.testing.memory_stream_pair()
            a = Wire(near, lambda: self.is_cut(node, peer))
            b = Wire(far, lambda: self.is_cut(node, peer))
            nursery.start_soon(acceptor.serve, b, f"{host_of(node)}:{next(self._ports)}", b"")
            return await open_link(
                a,
                cluster.dialler.codec(),
                f"{dial_host}:{port}",
                call_timeout=cluster.call_timeout,
                ping_interval=cluster.ping_interval,
                ttl=cluster.ttl,
            )

        return connect


def host_of(node: str) -> str:
    return f"{node}.test"


class Collector:
    """A consumer that takes and acknowledges everything (a client with auto-ack)."""

    selector = None

    def __init__(self, broker: Broker, queue: Queue, *, selector: str | None = None) -> None:
        self.broker = broker
        self.queue = queue
        self.selector = Filter.parse(selector) if selector else None
        self.bodies: list[bytes] = []
        queue.add_consumer(self)

    def has_credit(self) -> bool:
        return True

    def deliver(self, ref: MessageReference) -> None:
        self.bodies.append(ref.message.body)
        self.broker.acknowledge([ref], awaited=False)

    def close(self) -> None:
        self.queue.remove_consumer(self)

    @property
    def numbers(self) -> list[int]:
        return [int(b.split(b"-")[1]) for b in self.bodies]


@dataclass
class InProcessNode:
    """One node of an in-process cluster."""

    name: str
    node: Node
    scope: trio.CancelScope
    stopped: trio.Event = field(default_factory=trio.Event)

    @property
    def broker(self) -> Broker:
        return self.node.broker

    @property
    def cluster(self) -> ClusterConnection:
        return self.node.cluster_connections[0]

    @property
    def node_id(self) -> str:
        return self.node.node_id

    def queue(
        self, name: str, routing_type: RoutingType = ANYCAST, address: str | None = None
    ) -> Queue:
        existing = self.broker.queue(name)
        if existing is not None:
            return existing
        return self.broker.create_queue(name, address or name, routing_type, durable=True)

    async def send(
        self,
        address: str,
        count: int,
        *,
        start: int = 0,
        routing_type: RoutingType = ANYCAST,
        queue: str | None = None,
        **props: str,
    ) -> None:
        """Send ``count`` messages ``m-<n>`` as a STOMP session does (route, send, and
        wait until the node has them); ``queue``: to that queue only (a FQQN
        ``address::queue``, which initial distribution cannot send elsewhere)."""
        for n in range(start, start + count):
            message = self.broker.new_message(
                address,
                body=b"m-%d" % n,
                routing_type=routing_type,
                durable=True,
                properties=tuple(props.items()),
            )
            await self.broker.send(message, self.broker.route(message, queue)).settled()

    def consume(self, queue: str, *, selector: str | None = None) -> Collector:
        return Collector(self.broker, self.queue(queue), selector=selector)

    def depth(self, queue: str) -> int:
        """The messages in ``queue`` here (-1: no such queue)."""
        found = self.broker.queue(queue)
        return -1 if found is None else found.message_count

    def learned(self, queue: str, on: InProcessNode) -> bool:
        """Whether this node knows ``queue`` of node ``on`` as a remote binding."""
        return self.broker.remote_binding(f"{queue}@{on.node_id}") is not None

    def remote_consumers(self, queue: str, on: InProcessNode) -> int:
        binding = self.broker.remote_binding(f"{queue}@{on.node_id}")
        return -1 if binding is None else len(binding.consumers)

    def linked_to(self, other: InProcessNode) -> bool:
        return other.node_id in self.cluster.outgoing

    def knows(self, other: InProcessNode) -> bool:
        member = self.cluster.topology.members.get(other.node_id)
        return member is not None and member.up

    def in_flight(self) -> int:
        """Messages waiting in or travelling from this node's store-and-forward queues."""
        return sum(r.sf_queue.message_count for r in self.cluster.routes.values())


class InProcessCluster:
    """Nodes ``node0`` .. ``node<count-1>``; start, stop, cut and heal them."""

    def __init__(self, nursery: trio.Nursery, count: int, settings: Settings) -> None:
        self.nursery = nursery
        self.count = count
        self.settings = settings
        self.network = Network()
        self.nodes: dict[int, InProcessNode] = {}

    def __getitem__(self, index: int) -> InProcessNode:
        return self.nodes[index]

    def running(self) -> list[InProcessNode]:
        return list(self.nodes.values())

    async def start(self, *indexes: int) -> None:
        for index in indexes or range(self.count):
            self.nodes[index] = await self.nursery.start(self._run_node, index)

    async def _run_node(self, index: int, *, task_status: trio.TaskStatus[InProcessNode]) -> None:
        xml = broker_xml(index, self.count, self.settings)
        config = parse_config(xml, f"<node{index}>", environ={})
        # Node ids sort by index, unless the settings give a node another (a copied one).
        node_id = self.settings.node_ids.get(index, f"{index:02d}" + "0" * 30)
        persistence = Persistence(None, node_id)
        paging = PagingManager(config, persistence, None)
        broker = Broker(config, persistence, paging)
        broker.recover()
        await broker.recover_paging()
        name = f"node{index}"
        address = (host(index), PORT)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(paging.run)
                node = Node(broker, nursery)
                node.cluster_connections = cluster_connections(broker)
                for connection in node.cluster_connections:
                    connection.dialler.connect = self.network.connector(name, connection)
                    connection.on_stop_request = node.stop
                    await nursery.start(connection.run)
                acceptor = LinkAcceptor(node.cluster_connections)
                self.network.listen(name, address, acceptor, nursery)
                running = InProcessNode(name, node, scope)
                task_status.started(running)
                try:
                    await trio.sleep_forever()
                finally:
                    self.network.unlisten(address)
                    running.stopped.set()

    async def stop(self, index: int) -> None:
        """A graceful stop: scale down if configured, say goodbye, stop."""
        running = self.nodes.pop(index)
        await running.node.shut_down()
        running.scope.cancel()
        await running.stopped.wait()

    def kill(self, index: int) -> None:
        """Stop without a word, as kill -9 does: its links close, nothing is said."""
        running = self.nodes.pop(index)
        running.scope.cancel()

    def formed(self) -> bool:
        nodes = self.running()
        return all(a.linked_to(b) and b.knows(a) for a in nodes for b in nodes if a is not b)


@asynccontextmanager
async def open_cluster(
    count: int, *, start: bool = True, **settings: Any
) -> AsyncIterator[InProcessCluster]:
    """``count`` in-process nodes (see the module doc), started unless ``start`` is False;
    ``settings``: the fields of :class:`Settings`."""
    async with trio.open_nursery() as nursery:
        cluster = InProcessCluster(nursery, count, Settings(**settings))
        if start:
            await cluster.start()
        try:
            yield cluster
        finally:
            for index in list(cluster.nodes):
                cluster.kill(index)
            nursery.cancel_scope.cancel()


async def wait_consumers(
    node: InProcessNode, queue: str, on: list[InProcessNode], consumers: int = 1
) -> None:
    """Wait until ``node`` knows ``queue`` on each node of ``on`` with ``consumers``
    consumers (what load balancing and redistribution go by)."""
    for other in on:

        def known(other: InProcessNode = other) -> bool:
            return node.remote_consumers(queue, on=other) == consumers

        await wait_for(known, 5, message=f"{node.name} to know {queue} on {other.name}")
