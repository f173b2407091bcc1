"""A running node: storage, the broker core and its acceptors, put together.

``open_broker`` is the embedded API (an in-process broker, Classic's "embedded broker"
topology) and what ``artemis-py run`` uses::

    async with artemis_py.open_broker(config) as node:
        print(node.node_id, node.addresses("stomp"))
        await trio.sleep_forever()

Leaving the block stops the node gracefully: with scale-down configured, client
connections close first (their unacknowledged deliveries go back to their queues) and every
message moves to another node of the cluster; the node tells the cluster it is leaving,
acceptors stop, queued journal work completes, then the journals and the data-directory
lock are released.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path

import trio

from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.authorization import Authorizer
from artemis_py.broker.broker import Broker
from artemis_py.broker.paging import PagingManager
from artemis_py.broker.paging.disk import DiskMonitor
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.store import JournalStore, MemoryStore
from artemis_py.cluster.cluster_connection import ClusterConnection, owner
from artemis_py.cluster.core_bridge import CoreBridges, compile_filters
from artemis_py.cluster.discovery.service import Discovery
from artemis_py.cluster.grouping import grouping_handler
from artemis_py.cluster.incoming import LinkAcceptor
from artemis_py.cluster.scale_down import ScaleDownReport, scale_down
from artemis_py.cluster.topology import client_urls, stomp_urls
from artemis_py.config import BrokerConfig, MessageLoadBalancing, default_config
from artemis_py.config.defaults import CLUSTER_PASSWORD
from artemis_py.ha import PairSide, open_pair, replication_server
from artemis_py.management.bootstrap import WebConfig
from artemis_py.management.server import serve_management
from artemis_py.storage import JournalSettings, NodeManager, open_storage
from artemis_py.storage.large_message_files import open_large_message_store
from artemis_py.storage.paging import open_page_stores
from artemis_py.transport.acceptor import Clients, serve_acceptor
from artemis_py.transport.plane import DataPlaneShell

log = logging.getLogger("artemis_py.node")


class Node:
    """A started node. ``broker`` is the core; ``listeners`` maps acceptor names to sockets."""

    def __init__(self, broker: Broker, nursery: trio.Nursery) -> None:
        self.broker = broker
        self.config = broker.config
        self.node_id = broker.node_id
        self.listeners: dict[str, list[tuple[str, int]]] = {}  # acceptor -> (host, port)s
        self.cluster_connections: list[ClusterConnection] = []
        self.bridges: CoreBridges | None = None  # the <bridges> (set by open_broker)
        self.clients = Clients()
        self.scale_down_reports: list[ScaleDownReport] = []  # one per cluster connection
        self.started = time.monotonic()
        self.authenticator = Authenticator(False)  # the node's users (set by open_broker)
        self.authorizer = Authorizer(False)
        self.web_url: str | None = None  # where the management web server listens
        self.ha: PairSide | None = None  # its side of an HA pair (shared-store, replication)
        self._nursery = nursery
        self._left: trio.Event | None = None
        self._shutting_down = False
        self._stop_requested = False

    def addresses(self, acceptor: str) -> list[tuple[str, int]]:
        """(host, port) pairs an acceptor listens on (useful with port 0)."""
        return list(self.listeners.get(acceptor, []))

    def stop(self) -> None:
        """Ask the node to stop (once); the ``open_broker`` block then unwinds."""
        if not self._stop_requested:
            self._stop_requested = True
            self._nursery.start_soon(self._stop)

    async def _stop(self) -> None:
        await self.shut_down()
        self._nursery.cancel_scope.cancel()

    async def shut_down(self) -> None:
        """The graceful part of stopping (once): scale down if configured, then leave.

        Cancelling it (a second signal) abandons the scale-down; the node still says
        goodbye, and whatever was not moved stays in its journal.
        """
        if self._shutting_down:
            return
        self._shutting_down = True
        try:
            if self.bridges is not None:  # what they sent is confirmed, not moved again
                await self.bridges.drain()
            if self.config.ha_policy.scale_down is not None:
                await self._scale_down()
            server = replication_server(self.ha)
            if server is not None and server.in_sync:  # its backup takes over (Artemis's)
                await self.clients.close_all()
                await server.hand_over()
        finally:
            with trio.CancelScope(shield=True):
                await self.leave_cluster()

    async def _scale_down(self) -> None:
        settings = self.config.ha_policy.scale_down
        if settings is None or not settings.enabled:
            return
        if not self.cluster_connections:
            log.warning(
                "scale-down is enabled but this node is in no cluster: its messages stay "
                "in its journal"
            )
            return
        await self.clients.close_all()
        several = len(self.cluster_connections) > 1
        for connection in self.cluster_connections:  # each moves its own addresses
            report = ScaleDownReport(cluster=connection.name if several else None)
            self.scale_down_reports.append(report)
            try:
                await scale_down(connection, report)
            finally:
                (log.info if report.complete else log.error)("%s", report.summary())

    async def leave_cluster(self) -> None:
        """Tell the other nodes this one is leaving (once; a second caller waits)."""
        if self._left is not None:
            await self._left.wait()
            return
        self._left = trio.Event()
        try:
            with trio.move_on_after(2):
                for connection in self.cluster_connections:
                    await connection.leave()
        finally:
            self._left.set()


def cluster_connections(broker: Broker) -> list[ClusterConnection]:
    """The node's cluster connections, unless the cluster password is still the default."""
    config = broker.config
    if not config.cluster_connections:
        return []
    if config.cluster_password == CLUSTER_PASSWORD:
        log.error(
            "this node will not form a cluster: cluster-password is still the default "
            "(%r), which would let anyone who knows it join the cluster. Set the same "
            "secret on every node, e.g. <cluster-password>${ARTEMIS_CLUSTER_PASSWORD}"
            "</cluster-password> in broker.xml and ARTEMIS_CLUSTER_PASSWORD in the "
            "environment. The node runs on its own meanwhile.",
            CLUSTER_PASSWORD,
        )
        return []
    instance_id = uuid.uuid4().hex  # this run of the node, the same in every cluster
    connections = [
        ClusterConnection(broker, cc, config, instance_id=instance_id)
        for cc in config.cluster_connections
    ]
    for connection in connections:
        connection.peers = connections

    def load_balancing(address: str) -> MessageLoadBalancing | None:
        connection = owner(connections, address)
        return None if connection is None else connection.config.message_load_balancing

    broker.balance_with(load_balancing)

    def members() -> list[str]:
        return sorted(
            {
                m.node_id
                for c in connections
                for m in c.topology.others()
                if not c.departed(m.node_id)
            }
        )

    broker.cluster_members = members

    def topology_changed() -> None:
        for listener in list(broker.topology_listeners):
            listener()

    for connection in connections:  # the clients' topology (docs/stomp.md "Topology")
        urls = stomp_urls(config.acceptors, connection.local.host)
        connection.local = connection.topology.announce_clients(urls)
        connection.topology.on_change = topology_changed
    broker.client_topology = lambda: client_urls([c.topology for c in connections])
    return connections


def start_discovery(node: Node) -> Discovery:
    """The node's broadcast groups, and the discovery groups its cluster connections and
    scale-down use (none while the node forms no cluster), handed to those users."""
    config = node.config
    scale_down = config.ha_policy.scale_down
    used = {c.config.discovery_group_name for c in node.cluster_connections}
    used |= {b.discovery_group_name for b in config.bridges}
    if node.cluster_connections and scale_down is not None:
        used.add(scale_down.discovery_group_name)
    clients = tuple(dict.fromkeys(u for c in node.cluster_connections for u in c.local.clients))
    discovery = Discovery(config, node.node_id, {name for name in used if name}, clients)
    for connection in node.cluster_connections:
        groups = discovery.groups
        connection.discovery = groups.get(connection.config.discovery_group_name or "")
        if scale_down is not None and scale_down.discovery_group_name:
            connection.scale_down_discovery = groups.get(scale_down.discovery_group_name)
    return discovery


async def start_acceptors(node: Node, nursery: trio.Nursery) -> None:
    """Start the node's acceptors (listening once this returns)."""
    # Links from other nodes are served by the cluster connection they name (or, for a
    # core bridge, by the node: cluster/bridge_target.py).
    links = LinkAcceptor(node.cluster_connections, broker=node.broker)
    server = replication_server(node.ha)
    if server is not None:
        links.replication = server.serve
    serve_links = links.serve
    plane = None
    if data_plane_enabled() and any(a.accepts("STOMP") for a in node.config.acceptors):
        plane = DataPlaneShell()
        await nursery.start(plane.run)
    for acceptor in node.config.acceptors:
        listeners = await nursery.start(
            partial(serve_acceptor, authorizer=node.authorizer, plane=plane),
            node.broker,
            acceptor,
            node.authenticator,
            serve_links,
            node.clients,
        )
        node.listeners[acceptor.name] = listeners


def data_plane_enabled() -> bool:
    """Whether STOMP clients (plain TCP and TLS) are served by the Rust data plane (the
    default) or, with ``ARTEMIS_PY_DATA_PLANE=0``, by the Trio socket shell on the event
    loop (docs/configuration.md says when each is faster)."""
    return os.environ.get("ARTEMIS_PY_DATA_PLANE", "1") != "0"


def warn_if_open(node: Node) -> None:
    """One warning when security is off and an acceptor listens beyond this machine (the
    samples bind 0.0.0.0 with security off): anyone who reaches it is let in."""
    if node.config.security_enabled:
        return
    exposed = [
        f"{name} on {host}:{port}"
        for name in node.listeners
        for host, port in node.addresses(name)
        if not _loopback(host)
    ]
    if exposed:
        log.warning(
            "security is disabled (<security-enabled>false</security-enabled>) and an "
            "acceptor listens beyond this machine (%s): anyone who can reach it can send and "
            "consume messages without credentials. To require them, set "
            "<security-enabled>true</security-enabled> in broker.xml and add users "
            "with `artemis-py user add` (docs/security.md), or bind the acceptor to 127.0.0.1",
            ", ".join(exposed),
        )


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def journal_settings(config: BrokerConfig) -> JournalSettings:
    journal = config.journal
    return JournalSettings(
        file_size=journal.file_size,
        min_files=journal.min_files,
        pool_files=journal.pool_files,
        buffer_size=journal.buffer_size,
        buffer_timeout_ns=journal.buffer_timeout,
        datasync=journal.datasync,
        sync_transactional=journal.sync_transactional,
        sync_non_transactional=journal.sync_non_transactional,
        compact_min_files=journal.compact_min_files,
        compact_percentage=journal.compact_percentage,
    )


def watched_disk(config: BrokerConfig, base: Path) -> DiskMonitor:
    """The monitor of the disk under the data directories (as Artemis: the journals', the
    paging and the large messages' directories; docs/disk.md)."""
    return DiskMonitor(
        config,
        [
            base / config.journal.directory,
            base / config.journal.bindings_directory,
            base / config.paging_directory,
            base / config.large_messages_directory,
        ],
    )


async def start_cluster(node: Node, nursery: trio.Nursery) -> Discovery:
    """Start the node's cluster parts: its grouping handler, discovery (returned: the core
    bridges use its groups too) and cluster connections."""
    broker = node.broker
    node.cluster_connections = cluster_connections(broker)
    grouping = grouping_handler(broker, node.cluster_connections)
    if grouping is not None:
        await nursery.start(grouping.run)
    discovery = start_discovery(node)
    await nursery.start(discovery.run)
    for connection in node.cluster_connections:
        connection.on_stop_request = node.stop
    for connection in node.cluster_connections:
        await nursery.start(connection.run)
    return discovery


async def open_persistence(
    config: BrokerConfig, base: Path, stack: AsyncExitStack, node_manager: NodeManager | None
) -> tuple[Persistence, PagingManager]:
    """The node's persistence and paging, closed by ``stack``: the journals, large messages
    and page stores under ``base`` (locked by ``node_manager`` when given: a shared-store
    node's), or memory when persistence is disabled."""
    if not config.persistence_enabled:
        persistence = Persistence(MemoryStore(), str(uuid.uuid4()))
        return persistence, PagingManager(config, persistence, None)
    storage = await stack.enter_async_context(
        open_storage(
            base / config.journal.directory,
            base / config.journal.bindings_directory,
            journal_settings(config),
            node_manager=node_manager,
        )
    )
    # Entered after the journals, so it closes first: its deletes wait for them.
    large_messages = await stack.enter_async_context(
        open_large_message_store(base / config.large_messages_directory)
    )
    persistence = Persistence(JournalStore(storage, large_messages), storage.node_id)
    paging_directory = base / config.paging_directory
    stores = await open_page_stores(
        paging_directory,
        page_size_for=lambda a: config.address_settings_for(a).page_size_bytes,
    )
    paging = PagingManager(
        config, persistence, paging_directory, stores, watched_disk(config, base)
    )
    stack.push_async_callback(paging.close)  # before the journals close
    return persistence, paging


@asynccontextmanager
async def open_broker(
    config: BrokerConfig | None = None,
    *,
    instance_dir: Path | None = None,
    config_dir: Path | None = None,
    web: WebConfig | None = None,
    ha: PairSide | None = None,
) -> AsyncIterator[Node]:
    """Start a node from ``config`` (default: the embedded single-node default).

    Relative directories in the configuration are resolved against ``instance_dir``
    (default: the current directory); ``config_dir`` is where ``artemis-users.properties``
    is looked up when security is enabled. ``web``: serve the management API, metrics and
    console there (docs/management.md), in the node's nursery, stopped with the node.

    A node of an HA pair (docs/high-availability.md) first waits until it may be live
    (a backup: until its primary fails); ``ha`` is its side of the pair when the caller made
    it (``artemis-py run`` waits for it under its signal handling), which the caller then
    releases.
    """
    config = config if config is not None else default_config()
    base = instance_dir or Path.cwd()
    async with AsyncExitStack() as stack:
        if ha is None:
            ha = await stack.enter_async_context(open_pair(config, base, journal_settings(config)))
        if ha is not None and ha.node_manager is None:
            await ha.acquire()
        node_manager = ha.node_manager if ha else None
        persistence, paging = await open_persistence(config, base, stack, node_manager)
        server = replication_server(ha)
        if server is not None and isinstance(persistence.store, JournalStore):
            server.store = persistence.store  # a backup may sync from now on
        broker = Broker(config, persistence, paging)
        bridge_filters = compile_filters(config.bridges, config)  # a bad one stops the node
        broker.recover()
        await broker.recover_paging()
        authenticator = Authenticator.from_directory(config.security_enabled, config_dir)
        authorizer = Authorizer.from_config(config, config_dir)
        async with trio.open_nursery() as nursery:
            await nursery.start(paging.run)
            await nursery.start(paging.disk.run)  # scanned once before clients are served
            await nursery.start(broker.scheduler.run)  # held references go back on time
            # Its initial check deletes empty auto-delete queues before clients are served
            # (Artemis's startAddressQueueScanner).
            await nursery.start(broker.address_queue_reaper.run)
            node = Node(broker, nursery)
            node.authenticator, node.authorizer = authenticator, authorizer
            node.ha = ha
            discovery = await start_cluster(node, nursery)
            await start_acceptors(node, nursery)
            node.bridges = CoreBridges(broker, bridge_filters, discovery.groups)
            await nursery.start(node.bridges.run)
            # As Artemis: the reaper starts once the server is up (PostOffice.startExpiryScanner).
            await nursery.start(broker.expiry_reaper.run)
            warn_if_open(node)
            if web is not None:
                await nursery.start(serve_management, node, web)
            if ha is not None:
                await ha.activated()
                nursery.start_soon(ha.watch_for_failback, node.stop)
            log.info(
                "node %s (%s) started: %s",
                config.name or "artemis-py",
                broker.node_id,
                ", ".join(f"{n}={node.addresses(n)}" for n in node.listeners) or "no acceptors",
            )
            try:
                yield node
            finally:
                with trio.CancelScope(shield=True):
                    await node.shut_down()
                nursery.cancel_scope.cancel()
        log.info("node %s stopped", broker.node_id)
