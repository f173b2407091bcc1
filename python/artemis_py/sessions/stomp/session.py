"""A STOMP session: what a client's frames do to the broker, without I/O.

Theory of operation
-------------------
:class:`StompSession` is fed one decoded frame at a time (:meth:`StompSession.handle`)
and answers through a ``send`` callback (CONNECTED, MESSAGE; the shell encodes them with
:attr:`StompSession.codec`). It never blocks and never awaits: a verb does its synchronous
part on the spot (validate, route, queue journal records, take effect in memory) and
returns the :class:`~artemis_py.broker.pending.Pending` that must settle before the
frame's RECEIPT may go out. The Trio shell (:mod:`artemis_py.transport.stomp`) settles the
pendings in frame order and sends the receipts. What needs I/O besides waiting for the
journal the session names as an action for the shell (:mod:`.actions`): a browse that reads
page files, a body streamed from its large-message file.

A frame the broker refuses raises :class:`StompError` (whatever the reason: a bad header, a
broker refusal, a full queue, a failed journal); the shell answers it with the ERROR frame
:meth:`StompSession.error_frame` builds and closes the connection, as STOMP requires.

Subscriptions are the broker's consumers: a queue pushes messages to a
:class:`~artemis_py.sessions.stomp.subscription.Subscription`, which sends them as MESSAGE
frames while the connection is writable and its ack window has room. :meth:`StompSession.close` rolls back open
transactions and returns every unacknowledged delivery to its queue.

Differences from Artemis are deliberate and documented in docs/stomp.md (a NACK
redelivers instead of discarding).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from artemis_py import __version__
from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.authorization import UNCHECKED, Authorizer, Permission, send_creates
from artemis_py.broker.broker import Broker, BrokerError, Transaction
from artemis_py.broker.duplicate_cache import DUPLICATE_ID_HEADER, Claim, duplicate_id
from artemis_py.broker.filter import Filter, FilterSyntaxError
from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.offset_reading import OffsetReadError
from artemis_py.broker.pending import Pending
from artemis_py.broker.queue import MaxConsumersReachedError
from artemis_py.broker.routing import split_fqqn
from artemis_py.config import AcceptorConfig, RoutingType
from artemis_py.exceptions import StorageError
from artemis_py.protocol.stomp import Connection as StompCodec
from artemis_py.protocol.stomp import (
    Frame,
    FrameLimits,
    HeartbeatSettings,
    ProtocolError,
    artemis_heartbeat,
    negotiate_version,
)
from artemis_py.protocol.stomp import Role as StompRole
from artemis_py.sessions.stomp import browsing
from artemis_py.sessions.stomp.actions import Browse, StreamBody
from artemis_py.sessions.stomp.errors import StompError, refusal_kind
from artemis_py.sessions.stomp.sent_message import sent_message
from artemis_py.sessions.stomp.subscribing import subscription_queue
from artemis_py.sessions.stomp.subscription import Subscription
from artemis_py.sessions.stomp.topology_feed import TopologyFeed, wants_topology

log = logging.getLogger("artemis_py.stomp")

_ROUTING_HEADER_VALUES = {"ANYCAST": RoutingType.ANYCAST, "MULTICAST": RoutingType.MULTICAST}
_ACK_MODES = ("auto", "client", "client-individual")
_DESTINATION_CACHE = 256  # entries per session; cleared when full
_session_ids = itertools.count(1)


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


# What a verb may raise that refuses the frame (StorageError: e.g. a journal or the
# large-message store that failed).
_REFUSALS = (
    BrokerError,
    FilterSyntaxError,
    MaxConsumersReachedError,
    StorageError,
    OffsetReadError,
)
_BROWSES_REMEMBERED = 1024  # ids of finished browses an UNSUBSCRIBE may still name


class VersionedCodec(Protocol):
    """What the session asks of its codec: decode what follows the CONNECT with the version
    it chose (the data plane's connections: a command to their codec in Rust)."""

    def accept_connect(self, version: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Target:
    """A ``destination`` header taken apart: address, queue (FQQN) and routing type."""

    address: str
    queue: str | None
    routing_type: RoutingType | None
    management: bool = False  # the management address: a SEND there is an operation


class StompSession:
    """One client's STOMP 1.0, 1.1 or 1.2 session with the broker (see the module doc).

    ``send`` takes every frame the session sends; ``writable`` says whether the connection
    takes more (consumers pause while it does not); ``stream_body`` takes a MESSAGE whose
    body is streamed from its large-message file (:class:`~.actions.StreamBody`);
    ``send_delivery``, if given, takes a MESSAGE as the delivery's own headers and the
    message, whose standard headers, properties and body it encodes itself (the data
    plane, in Rust: see :func:`.subscription.send_message`).
    ``codec`` decodes the client's frames and encodes the session's (by default one of its
    own, for a shell that moves bytes; the data plane's connections pass a stand-in whose
    ``accept_connect`` reaches their codec in Rust).
    """

    def __init__(
        self,
        broker: Broker,
        acceptor: AcceptorConfig,
        authenticator: Authenticator,
        *,
        send: Callable[[Frame], None],
        writable: Callable[[], bool],
        stream_body: Callable[[StreamBody], None] | None = None,
        send_delivery: Callable[[list[tuple[str, str]], Message], None] | None = None,
        authorizer: Authorizer | None = None,
        codec: VersionedCodec | None = None,
    ) -> None:
        self.broker = broker
        self.acceptor = acceptor
        self.authenticator = authenticator
        self.authorizer = authorizer  # None: nothing is checked (security-enabled false)
        self.subject = UNCHECKED  # who logged in, and what it may do (set by CONNECT)
        self.send = send
        self.writable = writable
        self.stream_body = stream_body
        self.send_delivery = send_delivery
        self.id = f"{broker.node_id[:8]}-{next(_session_ids)}"
        self.codec = codec or StompCodec(StompRole.SERVER, limits=frame_limits(acceptor))
        self.version = "1.0"
        self.connected = False
        self.disconnecting = False  # DISCONNECT received: nothing more is read
        self.unawaited_acks = False  # an ACK without receipt: written later, not waited for
        self.client_id: str | None = None
        self.topology_feed: TopologyFeed | None = None  # CONNECT asked for topology:true
        # Heart-beating: seconds between the heart-beats we send (0: none), and the
        # connection TTL (no data from the client for that long closes the connection).
        self.heartbeat_interval = 0.0
        self.ttl = acceptor.connection_ttl / 1000 if acceptor.connection_ttl > 0 else math.inf
        self.subscriptions: dict[str, Subscription] = {}
        # Ids of finished browse subscriptions (a dict as an ordered set: an empty set would
        # cost every idle connection 150 bytes more).
        self.browsed: dict[str, None] = {}
        self.transactions: dict[str, Transaction] = {}
        # SEND's (destination, destination-type) -> where it goes: the same few each time.
        self._targets: dict[tuple[str | None, str | None], Target] = {}

    # -- the shell's side --------------------------------------------------------------

    def handle(self, frame: Frame) -> Pending | Browse | None:
        """Do what ``frame`` asks; the Pending (if any) must settle before its RECEIPT, a
        :class:`~.actions.Browse` be carried out (see :mod:`.actions`).

        Raises :class:`StompError` when the frame is refused.
        """
        if not self.connected and frame.command not in ("CONNECT", "STOMP"):
            raise StompError(f"{frame.command} before CONNECT", kind="protocol")
        verb = _VERBS.get(frame.command)
        if verb is None:
            raise StompError(f"unknown command {frame.command}", kind="protocol")
        try:
            return verb(self, frame)
        except _REFUSALS as exc:
            raise StompError(str(exc), kind=refusal_kind(exc)) from exc

    def error_frame(
        self, message: str, receipt: str | None, extra_headers: tuple[tuple[str, str], ...] = ()
    ) -> Frame:
        """The ERROR frame that refuses a frame (with its receipt id) or the connection."""
        body = message.encode()
        headers = [("message", message), *extra_headers]
        if receipt is not None:
            headers.append(("receipt-id", receipt))
        headers += [("content-type", "text/plain"), ("content-length", str(len(body)))]
        return Frame("ERROR", tuple(headers), body)

    def receipt_frame(self, receipt: str, pending: Pending | None = None) -> Frame:
        """The RECEIPT of a frame; ``duplicate:true`` when it was a send or commit the
        node had already accepted (its duplicate id; an extension header)."""
        if pending is not None and pending.duplicate:
            return Frame("RECEIPT", (("receipt-id", receipt), ("duplicate", "true")), b"")
        return Frame("RECEIPT", (("receipt-id", receipt),), b"")

    def resume(self) -> None:
        """The connection became writable again: consumers may go on."""
        for sub in list(self.subscriptions.values()):
            if sub.queue.messages:
                sub.queue.deliver()

    def close(self) -> None:
        """The connection is gone: open transactions roll back, deliveries go back, and
        duplicate ids of sends that never reached the journal are free again."""
        if self.topology_feed is not None:
            self.topology_feed.close()
        for tx in self.transactions.values():
            if tx.acks:
                self.broker.cancel(tx.acks)
        self.transactions.clear()
        self.broker.client_duplicates.release_owner(self)
        for sub in list(self.subscriptions.values()):
            self._close_subscription(sub)
        self.subscriptions.clear()

    def _close_subscription(self, sub: Subscription) -> None:
        sub.queue.remove_consumer(sub)
        refs = sub.take_all()
        if refs:
            self.broker.cancel(refs)
        self.broker.queue_lost_consumer(sub.queue)

    # -- connecting --------------------------------------------------------------------

    def _on_connect(self, frame: Frame) -> None:
        if self.connected:
            raise StompError("already connected", kind="protocol")
        try:
            self.version = negotiate_version(frame.get("accept-version"))
        except ProtocolError as exc:
            raise StompError(str(exc), exc.error_headers, kind="protocol") from exc
        self.codec.accept_connect(self.version)
        login = frame.get("login")
        if not self.authenticator.authenticate(login, frame.get("passcode")):
            who = f"for user {login!r}" if login is not None else "(no login header)"
            raise StompError(f"Security Error: authentication failed {who}", kind="security")
        if self.authorizer is not None:
            self.subject = self.authorizer.subject(login)
        self.client_id = frame.get("client-id")
        try:
            plan = artemis_heartbeat(
                frame.get("heart-beat"), self.version, heartbeat_settings(self.acceptor)
            )
        except ProtocolError as exc:
            raise StompError(str(exc)) from exc
        self.heartbeat_interval = plan.send_every_ms / 1000
        self.ttl = plan.connection_ttl_ms / 1000 if plan.connection_ttl_ms > 0 else math.inf
        self.connected = True
        headers = [
            ("version", self.version),
            ("session", self.id),
            ("server", f"artemis-py/{__version__}"),
        ]
        if plan.connected_header is not None:
            headers.append(("heart-beat", plan.connected_header))
        if wants_topology(frame):
            self.topology_feed = TopologyFeed(self.broker, self.send)
            headers.append(self.topology_feed.start())
        self.send(Frame("CONNECTED", tuple(headers), b""))
        log.debug("session %s: STOMP %s", self.id, self.version)

    def _on_disconnect(self, frame: Frame) -> None:
        # Nothing more is read; the RECEIPT goes out after everything before it settled.
        self.disconnecting = True

    # -- destinations ------------------------------------------------------------------

    def _target(self, name: str | None, type_header: str | None) -> Target:
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
        if type_header is not None:  # as in Artemis: the header wins over a prefix
            routing = _ROUTING_HEADER_VALUES.get(type_header)  # case-sensitive
            if routing is None:
                raise StompError(f"unknown routing type {type_header!r} (ANYCAST or MULTICAST)")
        address, queue = split_fqqn(name)
        if not address:
            raise StompError(f"invalid destination {name!r}")
        management = address == self.broker.config.management_address
        return Target(address, queue, routing, management)

    # -- sending -----------------------------------------------------------------------

    def _on_send(self, frame: Frame) -> Pending | None:
        headers = frame.headers
        # One dict instead of a scan per header looked up; reversed: the first one wins.
        first = dict(reversed(headers))
        key = (first.get("destination"), first.get("destination-type"))
        target = self._targets.get(key)
        if target is None:
            target = self._target(*key)
            # Permissions are fixed for a session: checked once per cached destination.
            permission = Permission.MANAGE if target.management else Permission.SEND
            self.subject.check(permission, target.address, target.queue)
            if len(self._targets) >= _DESTINATION_CACHE:
                self._targets.clear()
            self._targets[key] = target
        if target.management:  # decided once per cached destination
            return browsing.manage(self, frame)
        if self.subject.checked and target.queue is None:  # what routing would auto-create
            for needed in send_creates(self.broker, target.address, target.routing_type):
                self.subject.check(*needed)
        message = sent_message(self.broker.next_id(), target, frame.headers, first, frame.body)
        # Artemis's stompMinLargeMessageSize: stored as a file of its own when persisted.
        message.large = message.size >= self.acceptor.stomp_min_large_message_size
        tx_name = first.get("transaction")
        if tx_name is not None:  # its duplicate id, if any, is checked at COMMIT
            queues = self.broker.route(message, target.queue)
            self._transaction(tx_name).sends.append((message, queues))
            return None
        claim: Claim | None = None
        dup_id = first.get(DUPLICATE_ID_HEADER)
        if dup_id is not None and self.broker.client_duplicates.enabled(message.address):
            # Checked before routing: a duplicate is neither stored nor routed.
            claim = self.broker.client_duplicates.claim([(message.address, dup_id, message)], self)
            if claim is None:
                log.debug("session %s: duplicate send %r to %s", self.id, dup_id, message.address)
                return Pending(duplicate=True)
        try:
            return self.broker.send(message, self.broker.route(message, target.queue), claim=claim)
        except BaseException:
            if claim is not None:
                claim.release()  # nothing of it reached the journal
            raise

    # -- subscribing -------------------------------------------------------------------

    def _on_subscribe(self, frame: Frame) -> Browse | None:
        destination = frame.get("destination")
        target = self._target(destination, frame.get("subscription-type"))
        sub_id = frame.get("id") or (destination if self.version == "1.0" else None)
        if sub_id is None:
            raise StompError("SUBSCRIBE without an id header")
        if sub_id in self.subscriptions:
            raise StompError(f"subscription {sub_id} already exists")
        if (frame.get("browser") or "").lower() == "true":
            self.subject.check(Permission.BROWSE, target.address, target.queue or target.address)
            action = browsing.browse(self, frame, target, sub_id)
            if len(self.browsed) >= _BROWSES_REMEMBERED:
                self.browsed.clear()
            self.browsed[sub_id] = None
            return action
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
        queue = subscription_queue(self, target, selector_text, durable_name)
        sub = Subscription(
            self, sub_id, destination or "", queue, ack_mode, window, selector, durable_name
        )
        if queue.routing_type is RoutingType.MULTICAST:
            sub.selector = None  # the subscription queue's filter already applies it
        queue.add_consumer(sub)
        self.subscriptions[sub_id] = sub
        return None

    def _on_unsubscribe(self, frame: Frame) -> Pending | None:
        sub_id = frame.get("id") or (frame.get("destination") if self.version == "1.0" else None)
        sub = self.subscriptions.get(sub_id or "")
        durable_name = frame.get("durable-subscription-name") or frame.get(
            "durable-subscriber-name"
        )
        if sub is None:
            if sub_id in self.browsed:  # a browse ends by itself: nothing to do
                del self.browsed[sub_id]
                return None
            raise StompError(f"no subscription {sub_id!r} on this connection")
        queue = sub.queue  # Artemis: unsubscribing deletes a temporary or durable one
        if (durable_name and queue.durable) or queue.temporary:
            drop = (
                Permission.DELETE_DURABLE_QUEUE
                if queue.durable
                else Permission.DELETE_NON_DURABLE_QUEUE
            )
            self.subject.check(drop, queue.address, queue.name)  # refused: still subscribed
        del self.subscriptions[sub.id]
        self._close_subscription(sub)
        if durable_name and sub.queue.durable and not sub.queue.consumers:
            return self.broker.delete_queue(sub.queue)
        return None

    # -- acknowledging -----------------------------------------------------------------

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
        sub.acknowledged += len(refs)
        tx_name = frame.get("transaction")
        if tx_name is not None:
            tx = self._transaction(tx_name)
            # On a non-destructive queue an ACK changes nothing durable, and rolling it back
            # would not deliver the message again (Artemis): it only ends the deliveries.
            if not sub.queue.non_destructive:
                tx.acks.extend(refs)
                return None
        awaited = frame.get("receipt") is not None
        self.unawaited_acks |= not awaited
        pending = self.broker.acknowledge(refs, awaited=awaited)
        sub.queue.deliver()
        return pending

    def _on_nack(self, frame: Frame) -> None:
        # Unlike Artemis (which discards on NACK), a NACK is a failed delivery: the message
        # is redelivered, and dead-lettered after max-delivery-attempts.
        sub, key = self._locate(frame)
        refs = sub.take(key)
        self.broker.cancel(refs)
        sub.queue.deliver()

    # -- transactions ------------------------------------------------------------------

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
        entries = [
            (message.address, dup_id, message)
            for message, _ in tx.sends
            if (dup_id := duplicate_id(message)) is not None
        ]
        claim = self.broker.client_duplicates.claim(entries, self) if entries else None
        if entries and claim is None:
            # Artemis: a duplicate id in a transaction ignores the entire transaction. It
            # fails the commit; a STOMP ERROR would close the connection, so the receipt
            # says so instead (docs/duplicate-detection.md). Its acks did not happen.
            log.debug("session %s: transaction %s has a duplicate id: ignored", self.id, name)
            if tx.acks:
                self.broker.cancel(tx.acks)
            return Pending(duplicate=True)
        tx.claim = claim if claim and claim.entries else None
        try:
            pending = self.broker.commit(tx, from_client=True)
        except BaseException as exc:
            if claim is not None:
                claim.release()
            if isinstance(exc, StorageError) and tx.acks:
                self.broker.cancel(tx.acks)
            raise
        if pending.gate is not None and tx.acks:
            pending.gate = _cancelling_if_refused(pending.gate, tx.acks, self.broker.cancel)
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


def _cancelling_if_refused(
    gate: Callable[[], Awaitable[None]],
    acks: list[MessageReference],
    cancel: Callable[[list[MessageReference]], None],
) -> Callable[[], Awaitable[None]]:
    """The gate of a COMMIT held back (room on a full disk or address, a group's
    decision): if it is refused once it could go on, or the connection closes meanwhile,
    its acknowledgements did not happen and the messages are delivered again (their
    duplicate ids are freed when the connection closes)."""

    async def gate_or_cancel() -> None:
        try:
            await gate()
        except BaseException:
            cancel(acks)
            raise

    return gate_or_cancel


# What each command does: one table for every session (a dict of bound methods in each
# session cost an idle connection about 1.3 KiB).
_VERBS: dict[str, Callable[[StompSession, Frame], Pending | Browse | None]] = {
    "CONNECT": StompSession._on_connect,
    "STOMP": StompSession._on_connect,
    "DISCONNECT": StompSession._on_disconnect,
    "SEND": StompSession._on_send,
    "SUBSCRIBE": StompSession._on_subscribe,
    "UNSUBSCRIBE": StompSession._on_unsubscribe,
    "ACK": StompSession._on_ack,
    "NACK": StompSession._on_nack,
    "BEGIN": StompSession._on_begin,
    "COMMIT": StompSession._on_commit,
    "ABORT": StompSession._on_abort,
}
