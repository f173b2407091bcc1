"""A STOMP connection: the Trio shell around the sans-IO codec and the broker.

Theory of operation
-------------------
Each connection runs four tasks:

* the *reader* feeds socket bytes to the codec and handles each frame synchronously
  (validation, routing, queueing journal records); whatever must wait for the disk becomes
  a :class:`~artemis_py.broker.server.Pending` pushed onto the connection's pipeline;
* the *pipeline* awaits each pending's journal tickets in order, then completes it (a sent
  message reaches its queues) and sends its RECEIPT: receipts are therefore in frame order
  and never precede durability, while a producer that pipelines frames gets group commit.
  A pending with nothing to wait for, arriving while the pipeline is empty, is completed by
  the reader at once: the order is the same, and a non-persistent message costs no task
  switch;
* the *writer* owns the socket's send side: frames are appended to one outgoing buffer and
  written in large chunks; consumers stop taking messages while it is above a high-water
  mark, and delivery resumes when it drains (TCP back-pressure reaches the queues);
* the *heart-beat* task sends heart-beats and enforces the connection TTL.

A protocol error or broker refusal is answered with an ERROR frame (with the receipt-id of
the frame that caused it), after which the connection closes, as STOMP requires. Closing
returns every unacknowledged delivery to its queue for redelivery.
"""

from __future__ import annotations

import itertools
import logging
import math
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import trio

from artemis_py import __version__
from artemis_py.broker.filter import Filter, FilterSyntaxError
from artemis_py.broker.message import DEFAULT_PRIORITY, MessageReference
from artemis_py.broker.routing import split_fqqn
from artemis_py.broker.queue import MaxConsumersReachedError, Queue
from artemis_py.broker.broker import Broker, BrokerError, Transaction, now_ms
from artemis_py.broker.pending import Pending
from artemis_py.config import AcceptorConfig, RoutingType
from artemis_py.exceptions import ArtemisError, StorageError
from artemis_py.protocol.stomp import (
    NEED_DATA,
    ConnectionClosed,
    Frame,
    FrameLimits,
    Heartbeat,
    HeartbeatSettings,
    ProtocolError,
    artemis_heartbeat,
    negotiate_version,
)
from artemis_py.protocol.stomp import Connection as StompCodec
from artemis_py.protocol.stomp import Role as StompRole
from artemis_py.broker.security import Authenticator

log = logging.getLogger("artemis_py.stomp")

HIGH_WATER = 1 << 20  # outgoing bytes above which consumers pause
READ_SIZE = 1 << 16
PIPELINE_DEPTH = 4096  # frames awaiting durability before the reader stops reading

# Headers that steer the broker and are not copied into the message as properties.
_CONTROL_HEADERS = frozenset(
    {
        "destination",
        "transaction",
        "receipt",
        "content-length",
        "persistent",
        "priority",
        "expires",
        "destination-type",
        "message-id",
        "subscription",
        "ack",
        "redelivered",
        "timestamp",
    }
)
_ROUTING_HEADER_VALUES = {"ANYCAST": RoutingType.ANYCAST, "MULTICAST": RoutingType.MULTICAST}
_ACK_MODES = ("auto", "client", "client-individual")
_DESTINATION_CACHE = 256  # entries per connection; cleared when full
_connection_ids = itertools.count(1)


def frame_limits(acceptor: AcceptorConfig) -> FrameLimits:
    """The codec's limits from the acceptor's ``stompMax*`` URL parameters."""
    return FrameLimits(
        max_header_line_length=acceptor.stomp_max_header_length,
        max_header_count=acceptor.stomp_max_headers,
        max_header_bytes=acceptor.stomp_max_headers_size,
        max_body_size=acceptor.stomp_max_body_size,
    )


def heartbeat_settings(acceptor: AcceptorConfig) -> HeartbeatSettings:
    ttl_max = acceptor.connection_ttl_max
    return HeartbeatSettings(
        connection_ttl=acceptor.connection_ttl,
        connection_ttl_min=acceptor.connection_ttl_min,
        connection_ttl_max=None if ttl_max >= 2**63 - 1 else ttl_max,
        heart_beat_to_connection_ttl_modifier=acceptor.heart_beat_to_connection_ttl_modifier,
    )


class StompError(ArtemisError):
    """A frame the broker refuses; the text (and any extra headers) go into the ERROR frame."""

    def __init__(self, message: str, error_headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.error_headers = error_headers


@dataclass(frozen=True, slots=True)
class Destination:
    address: str
    queue: str | None
    routing_type: RoutingType | None


def _carriable_in_10(header: tuple[str, str]) -> bool:
    """STOMP 1.0 has no header escaping: a property with a line break (or a name with a
    colon) that a 1.1/1.2 producer sent cannot be written to a 1.0 consumer, so it is left
    out of that consumer's MESSAGE rather than breaking the frame."""
    name, value = header
    return not any(c in name for c in ":\r\n") and "\n" not in value and "\r" not in value


class Subscription:
    """A SUBSCRIBE: a consumer on one queue with an ack mode and a byte window."""

    def __init__(
        self,
        connection: StompConnection,
        sub_id: str,
        destination: str,
        queue: Queue,
        ack_mode: str,
        window: int,
        selector: Filter | None,
        durable_name: str | None,
    ) -> None:
        self.connection = connection
        self.id = sub_id
        self.destination = destination
        self.queue = queue
        self.ack_mode = ack_mode
        self.window = window
        self.selector = selector
        self.durable_name = durable_name
        self.in_flight: OrderedDict[str, MessageReference] = OrderedDict()
        self.in_flight_bytes = 0
        self._ack_ids = itertools.count(1)

    # -- Consumer protocol -------------------------------------------------------------

    def has_credit(self) -> bool:
        if not self.connection.writable:
            return False
        if self.ack_mode == "auto" or self.window < 0:
            return True
        if self.window == 0:
            return not self.in_flight
        return self.in_flight_bytes < self.window

    def deliver(self, ref: MessageReference) -> None:
        message = ref.message
        ack_id = f"{self.id}:{next(self._ack_ids)}"
        headers = [
            ("subscription", self.id),
            ("message-id", str(message.message_id)),
            ("destination", self.destination),
        ]
        if self.ack_mode != "auto" and self.connection.version == "1.2":
            headers.append(("ack", ack_id))
        if ref.delivery_count > 1:
            headers.append(("redelivered", "true"))
        if message.durable:
            headers.append(("persistent", "true"))
        if message.priority != DEFAULT_PRIORITY:
            headers.append(("priority", str(message.priority)))
        if message.expiration:
            headers.append(("expires", str(message.expiration)))
        headers.append(("timestamp", str(message.timestamp)))
        if self.connection.version == "1.0":
            headers.extend(p for p in message.properties if _carriable_in_10(p))
        else:
            headers.extend(message.properties)
        headers.append(("content-length", str(len(message.body))))
        self.connection.send_frame(Frame("MESSAGE", tuple(headers), message.body))
        if self.ack_mode == "auto":
            self.connection.broker.acknowledge([ref], awaited=False)
        else:
            self.in_flight[ack_id] = ref
            self.in_flight_bytes += message.size

    # -- acknowledgement ---------------------------------------------------------------

    def find(self, ack_id: str | None, message_id: str | None) -> str | None:
        """The in-flight key named by an ACK/NACK (1.2: ack id; 1.0/1.1: message-id)."""
        if ack_id is not None and ack_id in self.in_flight:
            return ack_id
        if message_id is not None:
            for key, ref in self.in_flight.items():
                if str(ref.message.message_id) == message_id:
                    return key
        return None

    def take(self, key: str) -> list[MessageReference]:
        """Remove what an ACK/NACK of ``key`` covers (cumulative in ``client`` mode)."""
        if self.ack_mode == "client-individual":
            keys = [key]
        else:
            keys = list(itertools.takewhile(lambda k: k != key, self.in_flight)) + [key]
        refs = [self.in_flight.pop(k) for k in keys]
        self.in_flight_bytes -= sum(r.message.size for r in refs)
        return refs

    def take_all(self) -> list[MessageReference]:
        refs = list(self.in_flight.values())
        self.in_flight.clear()
        self.in_flight_bytes = 0
        return refs


class StompConnection:
    """One client connection speaking STOMP 1.0, 1.1 or 1.2."""

    def __init__(
        self,
        broker: Broker,
        stream: trio.abc.Stream,
        acceptor: AcceptorConfig,
        authenticator: Authenticator,
        peer: str = "?",
        initial: bytes = b"",
    ) -> None:
        self.broker = broker
        self.stream = stream
        self.acceptor = acceptor
        self.authenticator = authenticator
        self.peer = peer
        self.id = f"{broker.node_id[:8]}-{next(_connection_ids)}"
        self.codec = StompCodec(StompRole.SERVER, limits=frame_limits(acceptor))
        self.version = "1.0"
        self.connected = False
        self.client_id: str | None = None
        self.subscriptions: dict[str, Subscription] = {}
        self.transactions: dict[str, Transaction] = {}
        # SEND's (destination, destination-type) -> where it goes: the same few each time.
        self._destinations: dict[tuple[str | None, str | None], Destination] = {}
        self._outgoing = bytearray()
        self._data_ready = trio.Event()
        self._drained = trio.Event()
        self._pipeline_send, self._pipeline_recv = trio.open_memory_channel[
            tuple[Pending | None, Callable[[], None] | None]
        ](PIPELINE_DEPTH)
        self._pipelined = 0  # items sent to the pipeline and not yet completed
        self._closing = False
        self._disconnecting = False
        self._pipeline_done = trio.Event()
        self._send_interval = 0.0  # seconds between our heart-beats, 0 = none
        self._ttl = acceptor.connection_ttl / 1000 if acceptor.connection_ttl > 0 else math.inf
        self._last_received = trio.current_time()
        self._last_sent = self._last_received
        self._cancel_scope: trio.CancelScope | None = None
        self._initial = initial  # bytes read while telling protocols apart
        self._reading = trio.CancelScope()  # cancelled by stop()

    # -- outgoing ----------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return not self._closing and len(self._outgoing) < HIGH_WATER

    def send_frame(self, frame: Frame) -> None:
        if self._closing and frame.command != "ERROR":
            return
        self._outgoing += self.codec.send(frame)
        self._data_ready.set()

    async def _writer(self) -> None:
        while True:
            await self._data_ready.wait()
            # One more scheduler round: frames other tasks produce in it (the receipts of
            # one journal batch, a burst of deliveries) go out in the same send.
            await trio.lowlevel.checkpoint()
            self._data_ready = trio.Event()
            while self._outgoing:
                # Swap buffers instead of copying: frames encoded meanwhile go to a new one.
                chunk, self._outgoing = self._outgoing, bytearray()
                await self.stream.send_all(chunk)
                self._last_sent = trio.current_time()
                # The buffer drained below the high-water mark: consumers may go on.
                self._resume_consumers()
            if self._closing:
                self._drained.set()

    def _resume_consumers(self) -> None:
        for sub in list(self.subscriptions.values()):
            if sub.queue.messages:
                sub.queue.deliver()

    # -- running -----------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until the client leaves, errs or times out."""
        try:
            async with trio.open_nursery() as nursery:
                self._cancel_scope = nursery.cancel_scope
                nursery.start_soon(self._writer)
                nursery.start_soon(self._pipeline)
                nursery.start_soon(self._heartbeats)
                with self._reading:
                    await self._reader()
                await self._finish()
                nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as group:
            log.debug("connection %s from %s lost: %s", self.id, self.peer, group.exceptions[0])
        finally:
            self._closing = True
            self._release_everything()
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self.stream)

    def stop(self) -> None:
        """Close the connection because the node stops: read nothing more, let what was
        read complete (receipts included), then close. Unacknowledged deliveries go back to
        their queues, as when a client disconnects."""
        self._reading.cancel()

    async def _reader(self) -> None:
        while not self._closing:
            data: bytes | bytearray
            if self._initial:
                data, self._initial = self._initial, b""
            else:
                data = await self.stream.receive_some(READ_SIZE)
            self._last_received = trio.current_time()
            self.codec.receive_data(data)
            while not self._closing:
                try:
                    event = self.codec.next_event()
                except ProtocolError as exc:
                    await self._fail(str(exc), None, exc.error_headers)
                    return
                if event is NEED_DATA:
                    break
                if isinstance(event, ConnectionClosed):
                    return
                if isinstance(event, Heartbeat):
                    continue
                assert isinstance(event, Frame)
                await self._handle(event)
                if self._disconnecting:
                    return
            if not data:
                return

    async def _handle(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        try:
            if not self.connected and frame.command not in ("CONNECT", "STOMP"):
                raise StompError(f"{frame.command} before CONNECT")
            handler = getattr(self, "_on_" + frame.command.lower(), None)
            if handler is None:
                raise StompError(f"unknown command {frame.command}")
            pending = handler(frame)
        except (
            StompError,
            BrokerError,
            FilterSyntaxError,
            MaxConsumersReachedError,
            StorageError,
        ) as exc:
            # StorageError: e.g. a persistent message too large for a journal file, or a
            # journal that failed; refused with an ERROR frame, the connection closes.
            await self._fail(str(exc), receipt, getattr(exc, "error_headers", ()))
            return
        if receipt is not None and frame.command not in ("CONNECT", "STOMP"):
            on_done = self._receipt_sender(receipt)
        else:
            on_done = None
        if pending is None and on_done is None:
            return
        if not self._pipelined and (pending is None or not pending.tickets):
            # Nothing ahead of it and nothing to wait for: done now, in frame order.
            if pending is not None:
                pending.complete()
            if on_done is not None:
                on_done()
            return
        self._pipelined += 1
        try:
            # send_nowait: the reader goes on with the frames it has without a task switch.
            self._pipeline_send.send_nowait((pending, on_done))
        except trio.WouldBlock:
            await self._pipeline_send.send((pending, on_done))

    def _receipt_sender(self, receipt: str) -> Callable[[], None]:
        return lambda: self.send_frame(Frame("RECEIPT", (("receipt-id", receipt),), b""))

    async def _pipeline(self) -> None:
        receive = self._pipeline_recv
        wait = self.broker.persistence.wait
        while True:
            # receive_nowait first: a run of queued items is taken without a task switch
            # each (waiting on tickets still lets the other tasks run).
            try:
                pending, on_done = receive.receive_nowait()
            except trio.WouldBlock:
                try:
                    pending, on_done = await receive.receive()
                except trio.EndOfChannel:
                    break
            except trio.EndOfChannel:
                break
            if pending is not None:
                if pending.tickets:
                    await wait(pending.tickets)
                pending.complete()
            if on_done is not None:
                on_done()
            self._pipelined -= 1
        self._pipeline_done.set()

    async def _finish(self) -> None:
        """Let queued work complete and the last frames go out before closing."""
        self._pipeline_send.close()
        await self._pipeline_done.wait()
        self._closing = True
        if self._outgoing:
            self._data_ready.set()
            with trio.move_on_after(5):
                await self._drained.wait()

    async def _fail(
        self,
        message: str,
        receipt: str | None,
        extra_headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        log.info("connection %s from %s: %s", self.id, self.peer, message)
        self._closing = True
        body = message.encode()
        headers = [("message", message), *extra_headers]
        if receipt is not None:
            headers.append(("receipt-id", receipt))
        headers += [("content-type", "text/plain"), ("content-length", str(len(body)))]
        self.send_frame(Frame("ERROR", tuple(headers), body))
        self._data_ready.set()
        with trio.move_on_after(5):
            await self._drained.wait()

    async def _heartbeats(self) -> None:
        while True:
            # Check at half the negotiated interval so no gap exceeds it (before CONNECT
            # there is no interval yet: check often enough to catch it being set).
            interval = self._send_interval
            await trio.sleep(interval / 2 if interval else 0.1)
            now = trio.current_time()
            if now - self._last_received > self._ttl:
                log.info(
                    "connection %s from %s: no data for %.1f s (connection TTL), closing",
                    self.id,
                    self.peer,
                    self._ttl,
                )
                self._closing = True
                if self._cancel_scope is not None:
                    self._cancel_scope.cancel()
                return
            if (
                interval
                and self.connected
                and not self._outgoing
                and now - self._last_sent >= interval / 2
            ):
                self._outgoing += self.codec.send_heartbeat()
                self._data_ready.set()

    def _release_everything(self) -> None:
        """Connection gone: open transactions roll back, deliveries go back to queues."""
        for tx in self.transactions.values():
            if tx.acks:
                self.broker.cancel(tx.acks)
        self.transactions.clear()
        for sub in list(self.subscriptions.values()):
            self._close_subscription(sub)
        self.subscriptions.clear()

    def _close_subscription(self, sub: Subscription) -> None:
        sub.queue.remove_consumer(sub)
        refs = sub.take_all()
        if refs:
            self.broker.cancel(refs)
        self.broker.queue_lost_consumer(sub.queue)

    # -- frames ------------------------------------------------------------------------

    def _on_connect(self, frame: Frame) -> None:
        if self.connected:
            raise StompError("already connected")
        try:
            self.version = negotiate_version(frame.get("accept-version"))
        except ProtocolError as exc:
            raise StompError(str(exc), exc.error_headers) from exc
        self.codec.accept_connect(self.version)
        if not self.authenticator.authenticate(frame.get("login"), frame.get("passcode")):
            raise StompError(
                f"Security Error: authentication failed for user {frame.get('login')!r}"
            )
        self.client_id = frame.get("client-id")
        try:
            plan = artemis_heartbeat(
                frame.get("heart-beat"), self.version, heartbeat_settings(self.acceptor)
            )
        except ProtocolError as exc:
            raise StompError(str(exc)) from exc
        self._send_interval = plan.send_every_ms / 1000
        self._ttl = plan.connection_ttl_ms / 1000 if plan.connection_ttl_ms > 0 else math.inf
        self.connected = True
        headers = [
            ("version", self.version),
            ("session", self.id),
            ("server", f"artemis-py/{__version__}"),
        ]
        if plan.connected_header is not None:
            headers.append(("heart-beat", plan.connected_header))
        self.send_frame(Frame("CONNECTED", tuple(headers), b""))
        log.debug("connection %s from %s: STOMP %s", self.id, self.peer, self.version)

    _on_stomp = _on_connect

    def _on_disconnect(self, frame: Frame) -> None:
        # The reader stops here; its RECEIPT goes out after everything before it completed.
        self._disconnecting = True

    def _destination(self, name: str | None, type_header: str | None) -> Destination:
        if not name:
            raise StompError("missing destination header")
        routing: RoutingType | None = None
        for prefix in self.acceptor.anycast_prefixes:
            if name.startswith(prefix):
                name, routing = name[len(prefix) :], RoutingType.ANYCAST
                break
        else:
            for prefix in self.acceptor.multicast_prefixes:
                if name.startswith(prefix):
                    name, routing = name[len(prefix) :], RoutingType.MULTICAST
                    break
        if routing is None and type_header is not None:
            routing = _ROUTING_HEADER_VALUES.get(type_header.upper())
            if routing is None:
                raise StompError(f"unknown routing type {type_header!r}")
        address, queue = split_fqqn(name)
        if not address:
            raise StompError(f"invalid destination {name!r}")
        return Destination(address, queue, routing)

    def _on_send(self, frame: Frame) -> Pending | None:
        headers = frame.headers
        # One dict instead of a scan per header looked up; reversed: the first one wins.
        first = dict(reversed(headers))
        key = (first.get("destination"), first.get("destination-type"))
        dest = self._destinations.get(key)
        if dest is None:
            dest = self._destination(*key)
            if len(self._destinations) >= _DESTINATION_CACHE:
                self._destinations.clear()
            self._destinations[key] = dest
        try:
            priority = int(first.get("priority") or DEFAULT_PRIORITY)
            expiration = int(first.get("expires") or 0)
        except ValueError as exc:
            raise StompError(f"invalid priority or expires header: {exc}") from exc
        properties = tuple((k, v) for k, v in headers if k not in _CONTROL_HEADERS)
        message = self.broker.new_message(
            dest.address,
            body=frame.body,
            properties=properties,
            routing_type=dest.routing_type,
            durable=first.get("persistent", "false").lower() == "true",
            priority=max(0, min(9, priority)),
            timestamp=now_ms(),
            expiration=max(0, expiration),
        )
        queues = self.broker.route(message, dest.queue)
        tx_name = first.get("transaction")
        if tx_name is not None:
            self._transaction(tx_name).sends.append((message, queues))
            return None
        return self.broker.send(message, queues)

    def _on_subscribe(self, frame: Frame) -> Pending | None:
        destination = frame.get("destination")
        dest = self._destination(destination, frame.get("subscription-type"))
        sub_id = frame.get("id") or (destination if self.version == "1.0" else None)
        if sub_id is None:
            raise StompError("SUBSCRIBE without an id header")
        if sub_id in self.subscriptions:
            raise StompError(f"subscription {sub_id} already exists")
        ack_mode = frame.get("ack", "auto")
        if ack_mode not in _ACK_MODES:
            raise StompError(f"unknown ack mode {ack_mode!r}")
        try:
            window = int(
                frame.get("consumer-window-size", str(self.acceptor.stomp_consumer_window_size))
            )
        except ValueError as exc:
            raise StompError("consumer-window-size must be an integer") from exc
        selector_text = frame.get("selector")
        selector = Filter.parse(selector_text) if selector_text else None
        durable_name = frame.get("durable-subscription-name") or frame.get(
            "durable-subscriber-name"
        )
        queue, pending = self._subscription_queue(dest, selector_text, durable_name)
        sub = Subscription(
            self, sub_id, destination or "", queue, ack_mode, window, selector, durable_name
        )
        if queue.routing_type is RoutingType.MULTICAST:
            sub.selector = None  # the subscription queue's filter already applies it
        queue.add_consumer(sub)
        self.subscriptions[sub_id] = sub
        return pending

    def _subscription_queue(
        self, dest: Destination, selector: str | None, durable_name: str | None
    ) -> tuple[Queue, Pending | None]:
        broker = self.broker
        if dest.queue is not None:  # fully qualified: address::queue
            queue = broker.post_office.queue(dest.queue)
            if queue is None:
                routing = (
                    dest.routing_type
                    or broker.address_settings(dest.address).default_queue_routing_type
                )
                queue = self._auto_create_queue(dest.queue, dest.address, routing, None)
            elif queue.address != dest.address:
                raise StompError(f"queue {dest.queue} is not bound to address {dest.address}")
            return queue, None
        address = broker.resolve_address(dest.address, dest.routing_type, for_send=False)
        if dest.routing_type is not None:
            routing = dest.routing_type
        else:
            if len(address.routing_types) == 1:
                routing = next(iter(address.routing_types))
            else:
                routing = broker.address_settings(dest.address).default_queue_routing_type
        if routing is RoutingType.ANYCAST:
            queue = broker.post_office.queue(dest.address)
            if queue is None:
                queue = self._auto_create_queue(dest.address, dest.address, routing, None)
            return queue, None
        if durable_name:
            if not self.client_id:
                raise StompError("a durable subscription needs a client-id on CONNECT")
            name = f"{self.client_id}.{durable_name}"
            queue = broker.post_office.queue(name)
            if queue is not None and (
                queue.address != dest.address
                or ((queue.filter.text if queue.filter else None) != selector)
            ):
                # Artemis: a durable subscription re-created with another address or
                # selector replaces the old one.
                broker.delete_queue(queue)
                queue = None
            if queue is None:
                queue = broker.create_queue(
                    name, dest.address, RoutingType.MULTICAST, filter_text=selector, durable=True
                )
            return queue, None
        queue = broker.create_queue(
            str(uuid.uuid4()),
            dest.address,
            RoutingType.MULTICAST,
            filter_text=selector,
            durable=False,
            temporary=True,
        )
        return queue, None

    def _auto_create_queue(
        self, name: str, address: str, routing: RoutingType, selector: str | None
    ) -> Queue:
        if not self.broker.address_settings(address).auto_create_queues:
            raise StompError(f"queue {name} does not exist and auto-create is disabled")
        return self.broker.create_queue(
            name, address, routing, filter_text=selector, auto_created=True
        )

    def _on_unsubscribe(self, frame: Frame) -> Pending | None:
        sub_id = frame.get("id") or (frame.get("destination") if self.version == "1.0" else None)
        sub = self.subscriptions.pop(sub_id or "", None)
        durable_name = frame.get("durable-subscription-name") or frame.get(
            "durable-subscriber-name"
        )
        if sub is None:
            raise StompError(f"no subscription {sub_id!r} on this connection")
        self._close_subscription(sub)
        if durable_name and sub.queue.durable and not sub.queue.consumers:
            return self.broker.delete_queue(sub.queue)
        return None

    def _locate(self, frame: Frame) -> tuple[Subscription, str]:
        ack_id = frame.get("id") if self.version == "1.2" else None
        message_id = frame.get("message-id")
        sub_id = frame.get("subscription")
        if ack_id is None and message_id is None:
            raise StompError(f"{frame.command} needs an id (1.2) or message-id header")
        if ack_id is not None:
            sub_id = ack_id.rpartition(":")[0]
        candidates = (
            [self.subscriptions[sub_id]]
            if sub_id in self.subscriptions
            else list(self.subscriptions.values())
        )
        for sub in candidates:
            key = sub.find(ack_id, message_id)
            if key is not None:
                return sub, key
        raise StompError(
            f"{frame.command}: no unacknowledged message {ack_id or message_id} on this connection"
        )

    def _on_ack(self, frame: Frame) -> Pending | None:
        sub, key = self._locate(frame)
        refs = sub.take(key)
        tx_name = frame.get("transaction")
        if tx_name is not None:
            self._transaction(tx_name).acks.extend(refs)
            return None
        pending = self.broker.acknowledge(refs, awaited=frame.get("receipt") is not None)
        sub.queue.deliver()
        return pending

    def _on_nack(self, frame: Frame) -> Pending | None:
        # Unlike Artemis (which discards on NACK), a NACK is a failed delivery: the message
        # is redelivered, and dead-lettered after max-delivery-attempts.
        sub, key = self._locate(frame)
        refs = sub.take(key)
        self.broker.cancel(refs)
        sub.queue.deliver()
        return None

    def _transaction(self, name: str) -> Transaction:
        tx = self.transactions.get(name)
        if tx is None:
            raise StompError(f"transaction {name} was not begun")
        return tx

    def _on_begin(self, frame: Frame) -> None:
        name = frame.get("transaction")
        if not name:
            raise StompError("BEGIN without a transaction header")
        if name in self.transactions:
            raise StompError(f"transaction {name} is already active")
        self.transactions[name] = Transaction()

    def _on_commit(self, frame: Frame) -> Pending:
        name = frame.get("transaction") or ""
        tx = self._transaction(name)
        del self.transactions[name]
        try:
            pending = self.broker.commit(tx)
        except StorageError:
            if tx.acks:
                self.broker.cancel(tx.acks)
            raise
        for sub in self.subscriptions.values():
            sub.queue.deliver()
        return pending

    def _on_abort(self, frame: Frame) -> None:
        name = frame.get("transaction") or ""
        tx = self._transaction(name)
        del self.transactions[name]
        # Acknowledgements of an aborted transaction did not happen: redeliver them.
        if tx.acks:
            self.broker.cancel(tx.acks)
