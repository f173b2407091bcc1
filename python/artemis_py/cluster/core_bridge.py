"""Core bridges: a local queue's messages forwarded to another node (Artemis's core bridges
chapter; docs/bridges.md).

Theory of operation
-------------------
A ``<bridge>`` of broker.xml is the cluster's bridge machine pointed elsewhere. Its consumer,
:class:`ForwardingBridge`, is a :class:`~.bridge.Bridge` (the consumer that drains a
store-and-forward queue) on the user's queue ``queue-name``, with the bridge's filter as its
selector, so a message the filter refuses stays in the queue for its other consumers. Each
message goes out over a link as a cluster link's messages do, with a sequence number and a
duplicate id (this node's id, the bridge's name and the message's id); it names no bindings,
so the target routes it by its address: ``forwarding-address`` if set, else its own, with
the bridge's ``routing-type`` applied (PASS keeps it, STRIP clears it).

:class:`CoreBridge` keeps the link up, one task per bridge. It dials the static connectors in
turn (or the members of the discovery group), with purpose ``"bridge"``: the target needs to
be in no cluster with this node, and checks the bridge's user and password against its own
cluster user and password (:mod:`.bridge_target` serves the link there). A failed attempt is
retried after ``retry-interval`` times ``retry-interval-multiplier`` per failure in a row,
capped at ``max-retry-interval``, and the bridge gives up after ``initial-connect-attempts``
failures before its first link or ``reconnect-attempts`` after one broke (-1: never;
:class:`~.retry.RetryPolicy`). The queue is consumed only while a link is up.

Exactly once: the target stores what it receives durably with the duplicate ids and then
confirms; only then is the message acknowledged here. A link that breaks puts the
unconfirmed messages back at the head of the queue, and after a reconnect (or a restart of
either node) they are sent again and the target's duplicate-id cache drops the ones it has.
A graceful stop waits ``pending-ack-timeout`` for the confirmations of what is in flight.

A connector that answers with this node's own id is this node: the bridge logs an error and
stops (the configuration check catches the usual cases at start, :mod:`artemis_py.config`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.filter import Filter, FilterSyntaxError
from artemis_py.broker.message import Message
from artemis_py.broker.queue import MaxConsumersReachedError
from artemis_py.cluster.bridge import Bridge, wire_payload
from artemis_py.cluster.retry import LogBackoff, RetryPolicy, unlogged
from artemis_py.config import BridgeConfig, ComponentRoutingType, ConfigProblem, RoutingType
from artemis_py.config.problems import raise_problems
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster.link_state import Acknowledge, LinkState
from artemis_py.transport.link import Link, LinkError, LinkRefused, connect
from artemis_py.transport.tls_contexts import TlsSetupError, client_context

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker
    from artemis_py.broker.queue import Queue
    from artemis_py.cluster.discovery.group import DiscoveryGroup
    from artemis_py.config import BrokerConfig, ConnectorConfig

log = logging.getLogger("artemis_py.bridges")

#: Longest wait for a link's connect and handshake (Artemis's call-timeout default; a
#: bridge has no element for it).
CALL_TIMEOUT = 30.0


def bridge_duplicate_id(node_id: str, bridge: str, message_id: int) -> bytes:
    """A forwarded message's duplicate id: unlike a cluster link's, it names the bridge, so
    two bridges (or a bridge and a cluster link) sending one message to one node do not
    take each other's copies for resends."""
    return f"{node_id}:bridge:{bridge}:{message_id}".encode()


def bridged_payload(message: Message, config: BridgeConfig) -> bytes:
    """``message`` as the target stores it: with the forwarding address and the bridge's
    routing type (the bytes kept when neither changes anything)."""
    address = config.forwarding_address or message.address
    routing: RoutingType | None
    if config.routing_type is ComponentRoutingType.PASS:
        routing = message.routing_type
    elif config.routing_type is ComponentRoutingType.STRIP:
        routing = None
    else:
        routing = RoutingType(config.routing_type.value)
    if address == message.address and routing is message.routing_type:
        return wire_payload(message)
    copy = message.copy(message.message_id)  # (a view to encode; never stored here)
    copy.address = address
    copy.routing_type = routing
    return wire_payload(copy)


class ForwardingBridge(Bridge):
    """A core bridge's consumer of its queue (see the module doc)."""

    def __init__(
        self,
        broker: Broker,
        queue: Queue,
        link: Link,
        config: BridgeConfig,
        selector: Filter | None,
    ) -> None:
        super().__init__(
            broker, queue, link.send, lambda: link.writable, config.producer_window_size
        )
        self.config = config
        self.selector = selector

    def frame_for(self, message: Message, seq: int) -> wire.Message:
        return wire.Message(
            seq=seq,
            dup_id=bridge_duplicate_id(self.broker.node_id, self.config.name, message.message_id),
            targets=(),
            message_id=message.message_id,
            payload=bridged_payload(message, self.config),
            body_file=message.body_ref if not message.body else None,
        )


def compile_filters(
    bridges: Sequence[BridgeConfig], node_config: BrokerConfig
) -> dict[str, Filter | None]:
    """Each bridge's filter, compiled; one that does not parse stops the node, reported
    as the parser reports problems (file, line, bridge)."""
    filters: dict[str, Filter | None] = {}
    problems = []
    for spec in bridges:
        try:
            filters[spec.name] = Filter.parse(spec.filter) if spec.filter else None
        except FilterSyntaxError as exc:
            where = node_config.source or "broker.xml"
            message = f"bridge '{spec.name}': invalid filter: {exc}"
            problems.append(ConfigProblem(where, spec.line or None, "bridge", message))
    if problems:
        raise_problems(problems)
    return filters


class CoreBridge:
    """One ``<bridge>`` of this node, running (see the module doc)."""

    def __init__(
        self,
        broker: Broker,
        config: BridgeConfig,
        selector: Filter | None,
        *,
        instance_id: str,
        discovery: DiscoveryGroup | None = None,
    ) -> None:
        node = broker.config
        self.broker = broker
        self.config = config
        self.name = config.name
        self.selector = selector
        self.instance_id = instance_id
        self.discovery = discovery
        connectors = {c.name: c for c in node.connectors}
        self.connectors: list[ConnectorConfig] = [connectors[n] for n in config.static_connectors]
        self.user = config.user if config.user is not None else node.cluster_user
        self.password = config.password if config.password is not None else node.cluster_password
        self.retry = RetryPolicy(config)
        self.consumer: ForwardingBridge | None = None  # while a link is up
        self.forwarded = 0  # messages the target confirmed, over every link
        self.state = "starting"
        self._paused = False
        self._drained = trio.Event()

    # -- running -----------------------------------------------------------------------

    async def run(self) -> None:
        """Keep a link to the target up and forward over it, until given up or cancelled."""
        queue = self.broker.queue(self.config.queue_name)
        if queue is None:
            # Artemis: the queue must exist when the bridge is deployed, or it is not.
            self.state = "not started: no such queue"
            log.error(
                "bridge %s not started: queue %s does not exist (declare it under "
                "<addresses>, or create it and restart the node)",
                self.name,
                self.config.queue_name,
            )
            return
        failures = 0
        connected_before = False
        attempt = 0
        refusals = LogBackoff()
        while not self._paused:
            if not self.retry.may_try(failures, connected_before=connected_before):
                self.state = f"gave up after {failures} failed attempt(s)"
                log.error("bridge %s: %s; it forwards nothing more", self.name, self.state)
                return
            if failures:
                await trio.sleep(self.retry.delay(failures))
            target = self._target(attempt)
            attempt += 1
            if target is None:
                failures += 1
                self.state = "connecting: the discovery group found no node yet"
                continue
            try:
                link = await self._connect(target)
            except LinkRefused as exc:
                failures += 1
                self.state = f"refused by {_url(target)}: {exc}"
                quiet = refusals.occurred(str(exc), trio.current_time())
                if quiet is not None:
                    log.error("bridge %s: %s%s", self.name, self.state, unlogged(quiet))
                continue
            except (OSError, LinkError, trio.TooSlowError) as exc:
                failures += 1
                self.state = f"connecting: cannot reach {_url(target)}"
                log.log(
                    logging.INFO if failures == 1 else logging.DEBUG,
                    "bridge %s: cannot reach %s (%s); retrying",
                    self.name,
                    _url(target),
                    str(exc) or "timed out",
                )
                continue
            if self._paused:  # the node is stopping: forward nothing more
                await link.goodbye(wire.Ping())
                return
            if link.peer_node_id == self.broker.node_id:
                await link.goodbye(wire.Error(reason="a bridge cannot forward to its own node"))
                self.state = f"stopped: {_url(target)} is this node itself"
                log.error("bridge %s %s; a bridge forwards to another node", self.name, self.state)
                return
            failures, connected_before, refusals = 0, True, LogBackoff()
            reason = await self._forward(queue, link)
            if not self._paused:
                log.warning(
                    "bridge %s: link to %s lost: %s; reconnecting", self.name, link.peer, reason
                )
            failures = 1

    def _target(self, attempt: int) -> tuple[str, int, ConnectorConfig | None] | None:
        """Where attempt number ``attempt`` dials: the static connectors in turn, or the
        discovery group's members in turn (None: it knows none yet)."""
        if self.discovery is None:
            connector = self.connectors[attempt % len(self.connectors)]
            return connector.host, connector.port, connector
        found = self.discovery.membership.connectors()
        if not found:
            return None
        host, port = found[attempt % len(found)]
        return host, port, None

    async def _connect(self, target: tuple[str, int, ConnectorConfig | None]) -> Link:
        host, port, connector = target
        context = None
        if connector is not None and connector.tls.enabled:
            try:
                context = await trio.to_thread.run_sync(client_context, connector.tls)
            except TlsSetupError as exc:
                raise LinkRefused(f"TLS setup: {exc}") from None
        codec = wire.ClientConnection(
            node_id=self.broker.node_id,
            instance_id=self.instance_id,
            cluster_name=self.name,  # a bridge link names its bridge (purpose "bridge")
            connector=("", 0),  # (nobody dials a bridge back)
            user=self.user,
            password=self.password,
            max_hops=0,
            purpose="bridge",
        )
        return await connect(
            host,
            port,
            codec,
            call_timeout=CALL_TIMEOUT,
            ping_interval=self.config.check_period / 1000,
            ttl=self.config.connection_ttl / 1000,
            ssl_context=context,
        )

    async def _forward(self, queue: Queue, link: Link) -> str:
        """Consume the queue over ``link`` until it ends; returns why it ended."""
        consumer = ForwardingBridge(self.broker, queue, link, self.config, self.selector)
        state = LinkState()
        link.on_writable = lambda: queue.deliver() if queue.messages else None
        self.consumer = consumer
        self.state = f"forwarding to node {link.peer_node_id} at {link.peer}"
        log.info(
            "bridge %s: forwarding queue %s to node %s at %s (%d message(s) waiting)",
            self.name,
            queue.name,
            link.peer_node_id,
            link.peer,
            queue.message_count,
        )

        def handle(event: object) -> None:
            for action in state.receive(event):
                if isinstance(action, Acknowledge):
                    before = consumer.forwarded
                    consumer.confirmed(action.seq)
                    self.forwarded += consumer.forwarded - before
                    if not consumer.in_flight:
                        self._drained.set()

        try:
            consumer.attach()
        except MaxConsumersReachedError as exc:
            await link.goodbye(wire.Ping())
            return f"cannot consume queue {queue.name}: {exc}"
        try:
            return await link.serve(handle)
        finally:
            consumer.detach()
            self.consumer = None
            self.state = "connecting"

    # -- stopping ----------------------------------------------------------------------

    async def drain(self) -> None:
        """A graceful stop: send nothing more, and wait up to ``pending-ack-timeout`` for
        the target to confirm what is in flight (what it does not confirm is sent again,
        and dropped there as a duplicate, when the node runs again)."""
        self._paused = True
        consumer = self.consumer
        if consumer is None:
            return
        consumer.pause()
        with trio.move_on_after(self.config.pending_ack_timeout / 1000):
            while consumer.in_flight:
                self._drained = trio.Event()
                await self._drained.wait()


class CoreBridges:
    """The node's bridges, each run in a task of its own (a node with none runs nothing)."""

    def __init__(
        self,
        broker: Broker,
        filters: Mapping[str, Filter | None],
        groups: Mapping[str, DiscoveryGroup],
    ) -> None:
        instance_id = uuid.uuid4().hex
        self.bridges = [
            CoreBridge(
                broker,
                spec,
                filters[spec.name],
                instance_id=instance_id,
                discovery=groups.get(spec.discovery_group_name or ""),
            )
            for spec in broker.config.bridges
        ]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for bridge in self.bridges:
                nursery.start_soon(bridge.run)
            task_status.started()

    async def drain(self) -> None:
        """Let every bridge's link settle what is in flight (a graceful stop)."""
        async with trio.open_nursery() as nursery:
            for bridge in self.bridges:
                nursery.start_soon(bridge.drain)


def _url(target: tuple[str, int, object]) -> str:
    return f"tcp://{target[0]}:{target[1]}"
