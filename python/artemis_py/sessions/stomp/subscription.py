"""A STOMP subscription: the broker's consumer that sends a queue's messages as MESSAGE frames.

It takes messages while the connection is writable and its ack window has room (Artemis's
``consumer-window-size``, in bytes; -1 unbounded, 0 one at a time), keeps what it sent
until the client acknowledges it (in ``client`` and ``client-individual`` mode), and gives
it back when the subscription or the connection closes. A body in a large-message file is
handed to the connection as a reference, which streams it (the window counts it whole).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import TYPE_CHECKING

from artemis_py.broker.message import DEFAULT_PRIORITY, Message, MessageReference
from artemis_py.protocol.stomp import Frame
from artemis_py.sessions.stomp.actions import StreamBody

if TYPE_CHECKING:
    from artemis_py.broker.filter import Filter
    from artemis_py.broker.queue import Queue
    from artemis_py.sessions.stomp.session import StompSession


def _carriable_in_10(header: tuple[str, str]) -> bool:
    """STOMP 1.0 has no header escaping: a property with a line break (or a name with a
    colon) that a 1.1/1.2 producer sent cannot be written to a 1.0 consumer, so it is left
    out of that consumer's MESSAGE rather than breaking the frame."""
    name, value = header
    return not any(c in name for c in ":\r\n\x00") and not any(c in value for c in "\r\n\x00")


def _carriable_in_11(header: tuple[str, str]) -> bool:
    """STOMP 1.1 has no ``\\r`` escape: a value a 1.2 producer ended with a CR cannot be
    written (a reader would take the CR for part of the line end), so that property is left
    out, as in 1.0; so is a NUL (no version carries one; the codec refuses them on the way
    in, so only a message from elsewhere could hold one). Without this, the encoder's
    refusal would end the consumer's connection: one producer's header must not do that."""
    name, value = header
    return not value.endswith("\r") and "\x00" not in name and "\x00" not in value


def send_message(session: StompSession, message: Message, headers: list[tuple[str, str]]) -> None:
    """Send ``message`` as a MESSAGE frame that starts with ``headers`` (a body in a
    large-message file is streamed from there). A session with ``send_delivery`` (the data
    plane) gets a message whose body is in memory as those headers and the message: it
    adds the rest as :func:`message_headers` does (``stomp_encode_message``)."""
    body_ref = message.body_ref
    if body_ref is None and session.send_delivery is not None:
        session.send_delivery(headers, message)
    elif body_ref is None or message.body:  # (a body whose file is being written: from memory)
        session.send(Frame("MESSAGE", message_headers(session, message, headers), message.body))
    else:  # the body is in its file: the connection streams it from there
        stream_body = session.stream_body
        assert stream_body is not None, "a connection that delivers large messages"
        frame = Frame("MESSAGE", message_headers(session, message, headers, body_ref.length), b"")
        stream_body(StreamBody(frame, body_ref))


def message_headers(
    session: StompSession,
    message: Message,
    headers: list[tuple[str, str]],
    length: int | None = None,
) -> tuple[tuple[str, str], ...]:
    """A MESSAGE's headers: ``headers``, then the message's standard headers, its
    properties that the session's version can carry, and ``content-length`` (``length``,
    or its body's)."""
    if message.durable:
        headers.append(("persistent", "true"))
    if message.priority != DEFAULT_PRIORITY:
        headers.append(("priority", str(message.priority)))
    if message.expiration:
        headers.append(("expires", str(message.expiration)))
    headers.append(("timestamp", str(message.timestamp)))
    if session.version == "1.0":
        headers.extend(p for p in message.properties if _carriable_in_10(p))
    elif session.version == "1.1":
        headers.extend(p for p in message.properties if _carriable_in_11(p))
    else:
        headers.extend(message.properties)
    headers.append(("content-length", str(len(message.body) if length is None else length)))
    return tuple(headers)


class Subscription:
    """A SUBSCRIBE: a consumer on one queue with an ack mode and a byte window."""

    def __init__(
        self,
        session: StompSession,
        sub_id: str,
        destination: str,
        queue: Queue,
        ack_mode: str,
        window: int,
        selector: Filter | None,
        durable_name: str | None,
    ) -> None:
        self.session = session
        self.id = sub_id
        self.destination = destination
        self.queue = queue
        self.ack_mode = ack_mode
        self.window = window
        self.selector = selector
        self.durable_name = durable_name
        self.in_flight: OrderedDict[str, MessageReference] = OrderedDict()
        self.in_flight_bytes = 0
        self.acknowledged = 0  # references its ACKs covered (the management API shows it)
        self._ack_ids = itertools.count(1)
        self._writable = session.writable
        # The headers every delivery starts with, made once.
        self._subscription_header = ("subscription", sub_id)
        self._destination_header = ("destination", destination)
        # On a wildcard address each delivery names the address its message was sent to
        # (as Artemis's does), after the subscription's own prefix (``/topic/``...).
        self._pattern_prefix: str | None = None
        if session.broker.post_office.wildcards.is_wildcard(queue.address):
            prefix, found, _ = destination.rpartition(queue.address)
            self._pattern_prefix = prefix if found else ""

    # -- Consumer protocol -------------------------------------------------------------

    def has_credit(self) -> bool:
        if not self._writable():
            return False
        if self.ack_mode == "auto" or self.window < 0:
            return True
        if self.window == 0:
            return not self.in_flight
        return self.in_flight_bytes < self.window

    def deliver(self, ref: MessageReference) -> None:
        message = ref.message
        auto = self.ack_mode == "auto"
        headers = [
            self._subscription_header,
            ("message-id", str(message.message_id)),
            self._destination_header
            if self._pattern_prefix is None
            else ("destination", self._pattern_prefix + message.address),
        ]
        ack_id = "" if auto else f"{self.id}:{next(self._ack_ids)}"
        if not auto and self.session.version == "1.2":
            headers.append(("ack", ack_id))
        if ref.delivery_count > 1:
            headers.append(("redelivered", "true"))
        if ref.first_in_group:  # (group-first-key: the queue's rules name the header)
            first_key = ref.queue.rules.first_key if ref.queue.rules is not None else None
            if first_key is not None:
                headers.append((first_key, "true"))
        send_message(self.session, message, headers)
        if auto:
            self.session.broker.acknowledge_delivered(ref)
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
            keys = [*itertools.takewhile(lambda k: k != key, self.in_flight), key]
        refs = [self.in_flight.pop(k) for k in keys]
        self.in_flight_bytes -= sum(r.message.size for r in refs)
        return refs

    def take_all(self) -> list[MessageReference]:
        refs = list(self.in_flight.values())
        self.in_flight.clear()
        self.in_flight_bytes = 0
        return refs
