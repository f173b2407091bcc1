"""The bridge: drains a neighbour's store-and-forward queue over the link to it.

It is an ordinary consumer of the durable store-and-forward queue, so messages wait there
(on disk, when durable) while the neighbour is unreachable and survive a restart of either
side. Each message goes out with a sequence number and a duplicate id (this node's id and
the message's id); the neighbour confirms cumulatively once what it received is durable,
and only then is the message acknowledged here. A message whose confirmation was lost is
sent again after a reconnect, and the neighbour's duplicate-id cache drops the second copy.

A message goes out as the bytes this node journaled or received (``message.encoded``),
with the names of the bindings it is for beside it, in the frame's ``targets``
(:mod:`artemis_py.broker.routing.forwarding` follows it from routing to the next node).

A core bridge (:mod:`.core_bridge`) is the same consumer on a queue of the user's: it
overrides what a message is sent as (:meth:`Bridge.frame_for`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from artemis_py.broker.message import Message, MessageReference, encode_message
from artemis_py.broker.routing import targets_of
from artemis_py.protocol import cluster as wire

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker
    from artemis_py.broker.filter import Filter
    from artemis_py.broker.queue import Queue


def duplicate_id(node_id: str, message_id: int) -> bytes:
    return f"{node_id}:{message_id}".encode()


def wire_payload(message: Message) -> bytes:
    """The message as the neighbour stores it: the bytes journaled here or received from
    the node before, when kept (``message.encoded``), else its encoding. For a body in a
    file: everything before the body (the link streams the body after). The bindings it is
    for travel beside it (:mod:`artemis_py.broker.routing.forwarding`)."""
    if message.body_ref is not None:  # a large message here: its flag says so
        return encode_message(message, with_body=bool(message.body))
    encoded = message.encoded
    return encode_message(message) if encoded is None else encoded


class Bridge:
    """A consumer of one store-and-forward queue that sends over one link."""

    selector: Filter | None = None

    def __init__(
        self,
        broker: Broker,
        queue: Queue,
        send: Callable[[wire.Message], None],
        writable: Callable[[], bool],
        window: int,
    ) -> None:
        self.broker = broker
        self.queue = queue
        self._send = send
        self._writable = writable
        self.window = window  # bytes in flight (producer-window-size); -1: unbounded
        self.in_flight: OrderedDict[int, MessageReference] = OrderedDict()
        self.in_flight_bytes = 0
        self.forwarded = 0
        self._next_seq = 1
        self._attached = False
        self._paused = False

    # -- Consumer protocol -------------------------------------------------------------

    def has_credit(self) -> bool:
        if not self._attached or self._paused or not self._writable():
            return False
        return self.window < 0 or self.in_flight_bytes < self.window

    def deliver(self, ref: MessageReference) -> None:
        message = ref.message
        seq = self._next_seq
        self._next_seq += 1
        self._send(self.frame_for(message, seq))
        self.in_flight[seq] = ref
        self.in_flight_bytes += message.size

    def frame_for(self, message: Message, seq: int) -> wire.Message:
        """The frame ``message`` goes out in: the bytes kept, for the bindings named."""
        return wire.Message(
            seq=seq,
            dup_id=duplicate_id(self.broker.node_id, message.message_id),
            targets=targets_of(message, self.queue.name),
            message_id=message.message_id,
            payload=wire_payload(message),
            body_file=message.body_ref if not message.body else None,
        )

    # -- the link ----------------------------------------------------------------------

    def attach(self) -> None:
        self._attached = True
        self.queue.add_consumer(self)

    def pause(self) -> None:
        """Send nothing more (the neighbour is leaving); what is in flight may be confirmed."""
        self._paused = True

    def confirmed(self, seq: int) -> None:
        """The neighbour has everything up to ``seq`` durably: acknowledge it here."""
        refs = []
        while self.in_flight:
            first = next(iter(self.in_flight))
            if first > seq:
                break
            refs.append(self.in_flight.pop(first))
        if refs:
            self.in_flight_bytes -= sum(r.message.size for r in refs)
            for ref in refs:  # the neighbour has its bytes: no need to keep them here
                ref.message.encoded = None
            self.forwarded += len(refs)
            # Not awaited: after a machine crash a message whose delete was not yet synced
            # is forwarded again, and the neighbour's duplicate-id cache drops it.
            self.broker.acknowledge(refs, awaited=False)
            self.queue.deliver()  # window space came back

    def detach(self) -> None:
        """The link is gone: unconfirmed messages go back to the head of the queue."""
        if not self._attached:
            return
        self._attached = False
        self.queue.remove_consumer(self)
        refs = list(self.in_flight.values())
        self.in_flight.clear()
        self.in_flight_bytes = 0
        for ref in refs:
            ref.delivery_count -= 1  # not a redelivery to a client: no DLQ counting
        if refs:
            self.queue.cancel(refs)
