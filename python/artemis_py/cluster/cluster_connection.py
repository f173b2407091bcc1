"""A cluster connection: this node's membership in one cluster (Artemis's ClusterConnection).

Theory of operation
-------------------
The cluster connection dials every member it knows: first its static connectors, then each
member it learns of through topology announcements (unless ``allow-direct-connections-only``
is set, which gives chains and other explicit shapes). Each successful dial is an
:class:`OutgoingLink`; the dialled node answers with its topology and its bindings, which
become :class:`RemoteQueueBinding` objects in this node's post office, so that routing can
send messages there. Messages chosen for a remote binding go into the durable
store-and-forward queue of the neighbour the binding came through, and a :class:`Bridge`
drains that queue over the outgoing link.

Other nodes dial this node through a CORE acceptor; each of those is an
:class:`IncomingLink`, on which this node publishes its own queues and consumers (distance
0) and the remote bindings it knows that are still within the dialler's ``max-hops``,
keeps them up to date, and stores the messages the dialler's bridge forwards.

A link that breaks is redialled per the retry settings; while a neighbour is unreachable its
bindings stay known but count as disconnected, so routing prefers connected nodes and
whatever was already routed to it waits in its store-and-forward queue.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from artemis_py.broker.filter import Filter, FilterSyntaxError
from artemis_py.broker.message import decode_message
from artemis_py.broker.pending import settle_in_order
from artemis_py.broker.routing import NeighbourRoute, RemoteQueueBinding, is_internal
from artemis_py.cluster.bridge import Bridge
from artemis_py.cluster.link import IncomingLink, Link, LinkError, LinkRefused, OutgoingLink
from artemis_py.cluster.redistributor import Redistributor
from artemis_py.cluster.retry import LogBackoff, RetryPolicy, unlogged
from artemis_py.cluster.scale_down import create_queues, take_over
from artemis_py.cluster.store_and_forward import neighbour_of, sf_queue_name
from artemis_py.cluster.topology import DuplicateNodeIdError, Member, Topology, connector, leaving
from artemis_py.config import ClusterConnectionConfig, RoutingType
from artemis_py.exceptions import StorageError
from artemis_py.protocol import cluster as wire
from artemis_py.transport.sockets import FastSocketStream

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker, Forwarded
    from artemis_py.broker.pending import Pending
    from artemis_py.broker.persistence import Ticket
    from artemis_py.broker.queue import Queue
    from artemis_py.config import BrokerConfig

log = logging.getLogger("artemis_py.cluster")

PIPELINE_DEPTH = 1024
CONFIRM_BATCH = 256
RUN_LIMIT = 64  # forwarded messages stored in one journal submit, at most


class ClusterConnection:
    """One ``<cluster-connection>`` of this node, running."""

    def __init__(
        self,
        broker: Broker,
        config: ClusterConnectionConfig,
        node_config: BrokerConfig,
        *,
        instance_id: str | None = None,
    ) -> None:
        self.broker = broker
        self.config = config
        self.name = config.name
        self.node_id = broker.node_id
        self.instance_id = instance_id or uuid.uuid4().hex
        self.user = node_config.cluster_user
        self._password = node_config.cluster_password
        connectors = {c.name: c for c in node_config.connectors}
        own = connectors[config.connector_name]
        scale_down = node_config.ha_policy.scale_down
        self.scale_down = scale_down if scale_down is not None and scale_down.enabled else None
        self.local = Member(
            self.node_id,
            self.instance_id,
            own.host,
            own.port,
            True,
            time.time_ns() // 1000,
            # announced even with scale-down disabled: this node can still be a target
            scale_down.group_name if scale_down is not None else None,
        )
        self.topology = Topology(self.local)
        self.static_connectors = [
            (connectors[n].host, connectors[n].port) for n in config.static_connectors
        ]
        self.scale_down_connectors = [
            (connectors[n].host, connectors[n].port)
            for n in (self.scale_down.connectors if self.scale_down else ())
        ]
        self.retry = RetryPolicy(config)
        self.ping_interval = max(config.check_period, 50) / 1000
        self.ttl = config.connection_ttl / 1000 if config.connection_ttl > 0 else float("inf")
        self.call_timeout = max(config.call_timeout, 100) / 1000
        self.routes: dict[str, NeighbourRoute] = {}
        self.bridges: dict[str, Bridge] = {}
        self.outgoing: dict[str, OutgoingLink] = {}
        self.incoming: set[IncomingLink] = set()
        # (neighbour node id, the neighbour's name for it) -> binding
        self.bindings: dict[tuple[str, str], RemoteQueueBinding] = {}
        # neighbour node id -> the names of its own queues (all of them, whatever max-hops
        # and the address filter let routing use): what a scale-down target already has
        self.neighbour_queues: dict[str, set[str]] = {}
        self.scaled_down: dict[str, str] = {}  # departed node id -> where its messages went
        # The journal tickets of the latest forwarded messages stored: once they complete,
        # so have all before them, and every id in the duplicate-id cache is durable.
        self.last_forwarded: list[Ticket] = []
        self.given_up: dict[str, str] = {}  # connector -> why the dialler stopped
        self.unreachable: set[tuple[str, int]] = set()  # the last dial failed
        self._dialling: set[tuple[str, int]] = set()
        self._refusals = LogBackoff()  # links from other nodes refused in the handshake
        self._nursery: trio.Nursery | None = None
        self.redistributor: Redistributor | None = None
        self._stopping = False
        self.on_stop_request: Callable[[], None] | None = None  # `cluster stop` (admin)

    # -- running -----------------------------------------------------------------------

    def matches(self, address: str) -> bool:
        """Whether messages to ``address`` are balanced by this cluster connection."""
        return not is_internal(address) and self.config.matches_address(address)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Dial the static connectors and keep the links up until cancelled."""
        for queue in self.broker.queues():
            node_id = neighbour_of(self.name, queue.name)
            if node_id is not None:
                self.routes[node_id] = NeighbourRoute(node_id, queue)
                if queue.message_count:
                    log.info(
                        "cluster %s: %d message(s) wait for node %s",
                        self.name,
                        queue.message_count,
                        node_id,
                    )
        self.broker.add_binding_listener(self)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.redistributor = Redistributor(
                    self.broker,
                    self.config.message_load_balancing,
                    nursery,
                )
                for queue in self.broker.queues():
                    if not is_internal(queue.name):
                        self.redistributor.watch(queue)
                for host, port in self.static_connectors:
                    if (host, port) != (self.local.host, self.local.port):
                        nursery.start_soon(self._dial, host, port, True)
                log.info(
                    "cluster %s: node %s at %s, %s, max-hops %d, static connectors: %s",
                    self.name,
                    self.node_id,
                    connector(self.local),
                    self.config.message_load_balancing.value,
                    self.config.max_hops,
                    ", ".join(f"tcp://{h}:{p}" for h, p in self.static_connectors) or "none",
                )
                task_status.started()
                await trio.sleep_forever()
        finally:
            self.broker.remove_binding_listener(self)

    async def leave(self) -> None:
        """Tell every neighbour this node is going away (a graceful stop)."""
        self._stopping = True
        farewell = wire.Topology(members=(leaving(self.local),))
        links: list[Link] = [*self.outgoing.values(), *self.incoming]
        async with trio.open_nursery() as nursery:
            for link in links:
                nursery.start_soon(link.goodbye, farewell)

    def dial(self, host: str, port: int) -> None:
        """Keep a link to the node at host:port (a scale-down target), like a static one."""
        if self._nursery is not None and (host, port) not in self._dialling:
            self._nursery.start_soon(self._dial, host, port, True)

    # -- dialling ----------------------------------------------------------------------

    async def _dial(self, host: str, port: int, static: bool) -> None:
        """Keep a link to the node at host:port up, per the retry settings."""
        key = (host, port)
        if key in self._dialling:
            return
        self._dialling.add(key)
        target = f"tcp://{host}:{port}"
        failures = 0
        connected_before = False
        peer_node: str | None = None
        refusals = LogBackoff()  # an episode per reason, until a link is up
        try:
            while not self._stopping:
                if not self.retry.may_try(failures, connected_before=connected_before):
                    why = f"gave up after {failures} failed attempt(s)"
                    self.given_up[target] = why
                    log.warning(
                        "cluster %s: %s to %s; the node is considered down until it "
                        "announces itself again",
                        self.name,
                        why,
                        target,
                    )
                    return
                if failures:
                    await trio.sleep(self.retry.delay(failures))
                    if peer_node is not None and not static and self._left(peer_node):
                        return  # it shut down gracefully; it announces itself on restart
                try:
                    link = await self._connect(host, port)
                except LinkRefused as exc:
                    failures += 1
                    quiet = refusals.occurred(str(exc), trio.current_time())
                    if quiet is not None:
                        log.error(
                            "cluster %s: %s refused the link: %s%s",
                            self.name,
                            target,
                            exc,
                            unlogged(quiet),
                        )
                    continue
                except (OSError, LinkError, trio.TooSlowError) as exc:
                    failures += 1
                    self.unreachable.add(key)
                    level = logging.INFO if failures == 1 else logging.DEBUG
                    log.log(
                        level,
                        "cluster %s: cannot reach %s (%s); retrying",
                        self.name,
                        target,
                        str(exc) or "timed out",
                    )
                    continue
                established = link.established
                assert established is not None
                peer_node = established.peer_node_id
                if peer_node == self.node_id:
                    await link.goodbye(wire.Ping())
                    if established.peer_instance_id != self.instance_id:
                        log.error(
                            "cluster %s: %s has this node's node ID %s (this node is %s). "
                            "Each node needs its own data directory; a copied one makes "
                            "nodes indistinguishable. Give one node a fresh data directory.",
                            self.name,
                            target,
                            self.node_id,
                            connector(self.local),
                        )
                    return
                if peer_node in self.outgoing:
                    await link.goodbye(wire.Ping())  # another dialler already has this node
                    return
                self.given_up.pop(target, None)
                self.unreachable.discard(key)
                failures = 0
                refusals = LogBackoff()
                connected_before = True
                reason = await self._run_outgoing(link)
                if self._stopping or peer_node in self.scaled_down:
                    return  # a node that scaled down announces itself if it comes back
                self._link_ended(peer_node, target, reason)
                failures = 1
        finally:
            self._dialling.discard(key)

    def _link_ended(self, peer_node: str, target: str, reason: str) -> None:
        if self._left(peer_node):
            # It announced a graceful stop before closing the link: a known departure,
            # not a loss (it is redialled only if it is a static connector).
            log.info(
                "cluster %s: node %s at %s left the cluster (%s)",
                self.name,
                peer_node,
                target,
                reason,
            )
            return
        log.warning(
            "cluster %s: link to node %s at %s lost: %s; reconnecting",
            self.name,
            peer_node,
            target,
            reason,
        )

    def _left(self, node_id: str) -> bool:
        member = self.topology.members.get(node_id)
        return member is not None and not member.up

    async def _connect(self, host: str, port: int) -> OutgoingLink:
        with trio.fail_after(self.call_timeout):
            stream = FastSocketStream(await trio.open_tcp_stream(host, port))
        codec = wire.ClientConnection(
            node_id=self.node_id,
            instance_id=self.instance_id,
            cluster_name=self.name,
            connector=(self.local.host, self.local.port),
            user=self.user,
            password=self._password,
            max_hops=self.config.max_hops,
            purpose="link",
        )
        link = OutgoingLink(
            stream, codec, f"{host}:{port}", ping_interval=self.ping_interval, ttl=self.ttl
        )
        codec.start()
        try:
            with trio.fail_after(self.call_timeout):
                await link.handshake()
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            raise
        return link

    async def _run_outgoing(self, link: OutgoingLink) -> str:
        peer = link.peer_node_id
        self.outgoing[peer] = link
        route = self.route_to(peer)
        route.connected = True
        link.send(wire.Topology(members=(self.local, *self.topology.others())))
        bridge = Bridge(
            self.broker,
            route.sf_queue,
            link.send,
            lambda: link.writable,
            self.config.producer_window_size,
        )
        link.bridge = bridge
        self.bridges[peer] = bridge
        queue = route.sf_queue
        link.on_writable = lambda: queue.deliver() if queue.messages else None
        log.info(
            "cluster %s: bridge to node %s at %s up (%d message(s) waiting)",
            self.name,
            peer,
            link.peer,
            queue.message_count,
        )
        bridge.attach()
        try:
            return await link.serve(lambda event: self._outgoing_event(link, event))
        finally:
            bridge.detach()
            route.connected = False
            if self.outgoing.get(peer) is link:
                del self.outgoing[peer]

    def _outgoing_event(self, link: OutgoingLink, event: object) -> None:
        if isinstance(event, wire.Confirm):
            assert link.bridge is not None
            link.bridge.confirmed(event.seq)
        elif isinstance(event, wire.Bindings):
            self._apply_bindings(link.peer_node_id, event)
        elif isinstance(event, wire.Consumers):
            self._apply_consumers(link.peer_node_id, event)
        elif isinstance(event, wire.Topology):
            self._apply_topology(event, link)
        elif isinstance(event, wire.Leaving):
            self._neighbour_scaled_down(event, link)
        else:
            log.debug("cluster %s: ignoring %r from %s", self.name, event, link.peer)

    def route_to(self, node_id: str) -> NeighbourRoute:
        route = self.routes.get(node_id)
        if route is None:
            name = sf_queue_name(self.name, node_id)
            queue = self.broker.queue(name)
            if queue is None:
                queue = self.broker.create_queue(name, name, RoutingType.MULTICAST, durable=True)
            route = self.routes[node_id] = NeighbourRoute(node_id, queue)
        return route

    # -- scale-down --------------------------------------------------------------------

    def _neighbour_scaled_down(self, event: wire.Leaving, source: Link) -> None:
        departed, target = event.node_id, event.target
        if departed == self.node_id or departed in self.scaled_down:
            return  # heard already
        self.scaled_down[departed] = target
        # Pass it on, like topology: a node whose link to the departed one was down at the
        # time hears it from the others.
        for link in [*self.outgoing.values(), *self.incoming]:
            if link is not source and link.established is not None:
                if link.peer_node_id != departed:
                    link.send(event)
        log.info(
            "cluster %s: node %s scaled down to %s: its bindings go, and what waits for it "
            "goes there",
            self.name,
            departed,
            "this node" if target == self.node_id else f"node {target}",
        )
        for key, binding in list(self.bindings.items()):
            if departed in (key[0], binding.origin_node_id):
                self._forget(*key)
        self.neighbour_queues.pop(departed, None)
        if self._nursery is not None:
            self._nursery.start_soon(take_over, self, departed, target, event.received)

    # -- topology ----------------------------------------------------------------------

    def _apply_topology(self, frame: wire.Topology, source: Link | None) -> None:
        for member in frame.members:
            try:
                changed = self.topology.update(member)
            except DuplicateNodeIdError as exc:
                log.error("cluster %s: %s", self.name, exc)
                continue
            if not changed:
                continue
            log.info(
                "cluster %s: node %s at %s is %s",
                self.name,
                member.node_id,
                connector(member),
                "up" if member.up else "leaving",
            )
            update = wire.Topology(members=(member,))
            for link in [*self.outgoing.values(), *self.incoming]:
                if link is not source:
                    link.send(update)
            if member.up:
                self.scaled_down.pop(member.node_id, None)  # it runs again
                self._maybe_dial(member)
            else:
                route = self.routes.get(member.node_id)
                if route is not None:
                    route.connected = False

    def _maybe_dial(self, member: Member) -> None:
        # Learned members are dialled unless the connection is explicit: direct connections
        # only, or no static connectors at all (the end of a chain only answers).
        if self.config.allow_direct_connections_only or self._stopping:
            return
        if not self.static_connectors and self.config.discovery_group_name is None:
            return
        if member.node_id in self.outgoing or (member.host, member.port) in self._dialling:
            return
        if self._nursery is not None:
            self._nursery.start_soon(self._dial, member.host, member.port, False)

    # -- remote bindings ---------------------------------------------------------------

    def _apply_bindings(self, via: str, frame: wire.Bindings) -> None:
        own = self.neighbour_queues.setdefault(via, set())
        if frame.snapshot:
            own.clear()
        own.update(info.name for info in frame.added if info.distance == 0)
        own.difference_update(frame.removed)
        seen = set()
        for info in frame.added:
            seen.add(info.name)
            self._learn(via, info)
        for name in frame.removed:
            self._forget(via, name)
        if frame.snapshot:
            for key in [k for k in self.bindings if k[0] == via and k[1] not in seen]:
                self._forget(via, key[1])

    def _learn(self, via: str, info: wire.BindingInfo) -> None:
        if info.origin_node_id == self.node_id or not self.matches(info.address):
            return
        if via in self.scaled_down or info.origin_node_id in self.scaled_down:
            return  # news from before it left
        distance = info.distance + 1
        if distance > self.config.max_hops:
            return
        try:
            filter = Filter.parse(info.filter)
            consumers = tuple(Filter.parse(s) for s in info.consumers)
        except FilterSyntaxError as exc:
            log.warning(
                "cluster %s: binding %s from %s ignored: %s", self.name, info.name, via, exc
            )
            return
        key = (via, info.name)
        binding = self.bindings.get(key)
        if binding is not None:
            binding.consumers = consumers
            binding.consumer_texts = tuple(info.consumers)
            self._publish_consumers(binding)
            self._redistribute_for(binding)
            return
        name = f"{info.queue_name}@{info.origin_node_id}"
        existing = self.broker.remote_binding(name)
        if existing is not None:
            if existing.distance <= distance:
                return  # known by a path at least as short
            self._forget(existing.route.node_id, existing.name_on_neighbour)
        binding = RemoteQueueBinding(
            name=name,
            queue_name=info.queue_name,
            address=info.address,
            routing_type=RoutingType(info.routing_type),
            filter=filter,
            filter_text=info.filter,
            distance=distance,
            origin_node_id=info.origin_node_id,
            name_on_neighbour=info.name,
            route=self.route_to(via),
            consumers=consumers,
            consumer_texts=tuple(info.consumers),
        )
        self.bindings[key] = binding
        self.broker.add_remote_binding(binding)
        log.debug("cluster %s: learned %r", self.name, binding)
        self._redistribute_for(binding)
        for link in list(self.incoming):
            if self._shares(binding, link):
                link.send(
                    wire.Bindings(snapshot=False, added=(self._remote_info(binding),), removed=())
                )

    def _forget(self, via: str, name: str) -> None:
        binding = self.bindings.pop((via, name), None)
        if binding is None:
            return
        self.broker.remove_remote_binding(binding)
        for link in list(self.incoming):
            if self._shares(binding, link):
                link.send(wire.Bindings(snapshot=False, added=(), removed=(binding.name,)))

    def _apply_consumers(self, via: str, frame: wire.Consumers) -> None:
        binding = self.bindings.get((via, frame.name))
        if binding is None:
            return
        try:
            binding.consumers = tuple(Filter.parse(s) for s in frame.consumers)
        except FilterSyntaxError as exc:
            log.warning("cluster %s: consumers of %s ignored: %s", self.name, frame.name, exc)
            return
        binding.consumer_texts = tuple(frame.consumers)
        self._publish_consumers(binding)
        self._redistribute_for(binding)

    def _redistribute_for(self, binding: RemoteQueueBinding) -> None:
        if self.redistributor is not None and binding.consumers:
            self.redistributor.remote_consumers_changed(binding)

    def _publish_consumers(self, binding: RemoteQueueBinding) -> None:
        for link in list(self.incoming):
            if self._shares(binding, link):
                link.send(wire.Consumers(name=binding.name, consumers=binding.consumer_texts))

    @staticmethod
    def _shares(binding: RemoteQueueBinding, link: IncomingLink) -> bool:
        """Whether a remote binding is passed on to the node at the other end of ``link``."""
        if link.established is None:
            return False
        peer = link.peer_node_id
        return (
            binding.distance < link.peer_max_hops
            and binding.origin_node_id != peer
            and binding.route.node_id != peer
        )

    # -- what this node publishes --------------------------------------------------------

    def _local_info(self, queue: Queue) -> wire.BindingInfo:
        return wire.BindingInfo(
            name=queue.name,
            queue_name=queue.name,
            address=queue.address,
            routing_type=queue.routing_type.value,
            filter=queue.filter.text if queue.filter is not None else None,
            distance=0,
            origin_node_id=self.node_id,
            consumers=_selectors(queue),
        )

    def _remote_info(self, binding: RemoteQueueBinding) -> wire.BindingInfo:
        return wire.BindingInfo(
            name=binding.name,
            queue_name=binding.queue_name,
            address=binding.address,
            routing_type=binding.routing_type.value,
            filter=binding.filter_text,
            distance=binding.distance,
            origin_node_id=binding.origin_node_id,
            consumers=binding.consumer_texts,
        )

    def _snapshot(self, link: IncomingLink) -> wire.Bindings:
        infos = [self._local_info(q) for q in self.broker.queues() if not is_internal(q.name)]
        infos += [self._remote_info(b) for b in self.bindings.values() if self._shares(b, link)]
        return wire.Bindings(snapshot=True, added=tuple(infos), removed=())

    # BindingListener: local queues and consumers, published to every dialler.

    def queue_added(self, queue: Queue) -> None:
        if is_internal(queue.name):
            return
        if self.redistributor is not None:
            self.redistributor.watch(queue)
        frame = wire.Bindings(snapshot=False, added=(self._local_info(queue),), removed=())
        for link in list(self.incoming):
            link.send(frame)

    def queue_removed(self, queue: Queue) -> None:
        if is_internal(queue.name):
            return
        if self.redistributor is not None:
            self.redistributor.forget(queue)
        frame = wire.Bindings(snapshot=False, added=(), removed=(queue.name,))
        for link in list(self.incoming):
            link.send(frame)

    def consumers_changed(self, queue: Queue) -> None:
        if is_internal(queue.name):
            return
        if self.redistributor is not None:
            self.redistributor.consumers_changed(queue)
        frame = wire.Consumers(name=queue.name, consumers=_selectors(queue))
        for link in list(self.incoming):
            link.send(frame)

    # -- incoming links ----------------------------------------------------------------

    async def serve_incoming(self, stream: trio.abc.Stream, peer: str, initial: bytes) -> None:
        """Serve a link another node dialled (or a ``cluster status`` request)."""
        codec = wire.ServerConnection(
            node_id=self.node_id,
            instance_id=self.instance_id,
            cluster_name=self.name,
            user=self.user,
            password=self._password,
        )
        link = IncomingLink(stream, codec, peer, ping_interval=self.ping_interval, ttl=self.ttl)
        if initial:
            codec.receive_data(initial)
        try:
            with trio.fail_after(self.call_timeout):
                established = await link.handshake()
        except (LinkError, trio.TooSlowError) as exc:
            why = str(exc) or "handshake timed out (call-timeout)"
            # A dialler refused for its credentials comes back at its retry rate, each time
            # from a new port: one episode per host and reason.
            quiet = self._refusals.occurred((peer.rpartition(":")[0], why), trio.current_time())
            if quiet is not None:
                log.warning(
                    "cluster %s: link from %s refused: %s%s", self.name, peer, why, unlogged(quiet)
                )
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            return
        if established.purpose == "status":
            await link.goodbye(wire.Status(data=self.status()))
            return
        if established.purpose == "stop":
            log.info("cluster %s: %s asked this node to stop", self.name, peer)
            await link.goodbye(wire.Status(data={**self.status(), "stopping": True}))
            if self.on_stop_request is not None:
                self.on_stop_request()
            return
        if established.peer_node_id == self.node_id:
            if established.peer_instance_id != self.instance_id:
                host, port = established.peer_connector or ("?", 0)
                why = (
                    f"the node at tcp://{host}:{port} (connecting from {peer}) has the same "
                    f"node ID {self.node_id} as this node at {connector(self.local)}. Each "
                    "node needs its own data directory: a copied one makes nodes "
                    "indistinguishable. Give one of them a fresh data directory."
                )
                log.error("cluster %s: %s", self.name, why)
                await link.goodbye(wire.Error(reason=why))
            else:
                await link.goodbye(wire.Ping())
            return
        link.peer_max_hops = established.peer_max_hops or 0
        self.incoming.add(link)
        link.send(wire.Topology(members=tuple(self.topology.members.values())))
        link.send(self._snapshot(link))
        send_channel, receive_channel = trio.open_memory_channel[tuple["Pending", int]](
            PIPELINE_DEPTH
        )
        run = ForwardedRun(self.broker, send_channel, self._stored)
        link.before_read = run.flush
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._confirm_in_order, link, receive_channel)
                async with send_channel:
                    reason = await link.serve(lambda event: self._incoming_event(link, event, run))
            log.info(
                "cluster %s: link from node %s at %s closed: %s",
                self.name,
                established.peer_node_id,
                peer,
                reason,
            )
        finally:
            self.incoming.discard(link)

    def _stored(self, tickets: list[Ticket]) -> None:
        if tickets:  # a run of non-durable messages or duplicates only waits for nothing
            self.last_forwarded = tickets

    def _incoming_event(
        self, link: IncomingLink, event: object, run: ForwardedRun
    ) -> Awaitable[None] | None:
        if isinstance(event, wire.Message):
            return run.add(event)
        # Whatever follows a message sees it stored (and a failure to store it first).
        flushed = run.flush()
        if flushed is not None:
            return _then(flushed, lambda: self._incoming_event(link, event, run))
        if isinstance(event, wire.Topology):
            self._apply_topology(event, link)
        elif isinstance(event, wire.CreateQueues):
            create_queues(self, event, link.peer)
        elif isinstance(event, wire.Leaving):
            self._neighbour_scaled_down(event, link)
        else:
            log.debug("cluster %s: ignoring %r from %s", self.name, event, link.peer)
        return None

    async def _confirm_in_order(
        self, link: IncomingLink, pipeline: trio.MemoryReceiveChannel[tuple[Pending, int]]
    ) -> None:
        """Complete forwarded messages in order; confirm each run once it is durable.

        Takes what the reader has queued (runs of messages, see :class:`ForwardedRun`; up
        to CONFIRM_BATCH of them) and waits once for their latest tickets: a journal
        completes its tickets in order, so all are durable when those are. They are then
        completed in order and confirmed with one Confirm when the reader has nothing more
        queued (caught up), or every CONFIRM_BATCH messages during a long burst.
        """
        confirmed = 0  # the last seq confirmed
        while True:
            try:
                run = [await pipeline.receive()]
            except trio.EndOfChannel:
                return
            while len(run) < CONFIRM_BATCH:
                try:
                    run.append(pipeline.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            try:
                await settle_in_order([pending for pending, _ in run])
            except StorageError:
                await self._confirm_durable_part(link, run)
                raise
            seq = run[-1][1]  # one seq per message: the difference counts them
            if seq - confirmed >= CONFIRM_BATCH or pipeline.statistics().current_buffer_used == 0:
                link.send(wire.Confirm(seq=seq))
                confirmed = seq

    async def _confirm_durable_part(
        self, link: IncomingLink, run: list[tuple[Pending, int]]
    ) -> None:
        """The journal failed during ``run``: complete and confirm what became durable
        before the failure, one by one, then close the link (raises the StorageError)."""
        confirmed = None
        try:
            for pending, seq in run:
                await pending.settled()
                confirmed = seq
        except StorageError as exc:
            log.error("cluster %s: cannot store forwarded messages: %s", self.name, exc)
            raise
        finally:
            if confirmed is not None:
                link.send(wire.Confirm(seq=confirmed))
            link.close()

    # -- status ------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What ``artemis-py cluster status`` prints."""
        members = []
        for member in self.topology.members.values():
            members.append(
                {
                    "node_id": member.node_id,
                    "connector": connector(member),
                    "up": member.up,
                    "self": member.node_id == self.node_id,
                    "bridge": member.node_id in self.outgoing,
                    "incoming": any(
                        link.established is not None and link.peer_node_id == member.node_id
                        for link in self.incoming
                    ),
                }
            )
        bridges = []
        for node_id, route in sorted(self.routes.items()):
            bridge = self.bridges.get(node_id)
            bridges.append(
                {
                    "node_id": node_id,
                    "connected": route.connected,
                    "store_and_forward_queue": route.sf_queue.name,
                    "depth": route.sf_queue.message_count,
                    "in_flight": len(bridge.in_flight) if bridge and route.connected else 0,
                    "forwarded": bridge.forwarded if bridge else 0,
                }
            )
        bindings = [
            {
                "name": b.name,
                "address": b.address,
                "queue": b.queue_name,
                "routing_type": b.routing_type.value,
                "filter": b.filter_text,
                "distance": b.distance,
                "via": b.route.node_id,
                "origin": b.origin_node_id,
                "consumers": b.consumer_count,
                "connected": b.connected,
            }
            for b in self.bindings.values()
        ]
        return {
            "cluster": self.name,
            "node_id": self.node_id,
            "connector": connector(self.local),
            "message_load_balancing": self.config.message_load_balancing.value,
            "max_hops": self.config.max_hops,
            "members": members,
            "bridges": bridges,
            "remote_bindings": bindings,
            "given_up": dict(self.given_up),
        }


class ForwardedRun:
    """The messages one read from an incoming link brought, stored together.

    The link reader adds each forwarded message here and flushes when it has handled all
    it read (before waiting for more), before any other frame, and every RUN_LIMIT
    messages: one journal submit and one item for the confirm task per run instead of per
    message. Duplicate ids are checked and remembered at the flush, so a run the link
    never flushed (it broke) leaves no trace and its messages are taken when resent.
    """

    def __init__(
        self,
        broker: Broker,
        pipeline: trio.MemorySendChannel[tuple[Pending, int]],
        stored: Callable[[list[Ticket]], None],
    ) -> None:
        self.broker = broker
        self.pipeline = pipeline
        self.stored = stored  # told the tickets of each run submitted to the journal
        self.messages: list[wire.Message] = []

    def add(self, message: wire.Message) -> Awaitable[None] | None:
        self.messages.append(message)
        if len(self.messages) >= RUN_LIMIT:
            return self.flush()
        return None

    def flush(self) -> Awaitable[None] | None:
        """Store the run; the awaitable, if any, waits for room in the pipeline."""
        messages = self.messages
        if not messages:
            return None
        self.messages = []
        next_id = self.broker.next_id
        forwarded: list[Forwarded] = []
        for m in messages:
            try:
                message = decode_message(next_id(), m.payload)
            except ValueError as exc:
                raise LinkError(f"unreadable forwarded message: {exc}") from exc
            forwarded.append((message, m.targets, m.dup_id, m.payload))
        item = (self.broker.receive_forwarded(forwarded), messages[-1].seq)
        self.stored(item[0].tickets)
        # send_nowait: no task switch while the confirm task keeps up.
        try:
            self.pipeline.send_nowait(item)
        except trio.WouldBlock:
            return self.pipeline.send(item)
        return None


async def _then(first: Awaitable[None], then: Callable[[], Awaitable[None] | None]) -> None:
    await first
    result = then()
    if result is not None:
        await result


def _selectors(queue: Queue) -> tuple[str | None, ...]:
    return tuple(c.selector.text if c.selector is not None else None for c in queue.consumers)
