"""Destinations of a message bound for other nodes, and how it names the bindings it is for.

A message routed to remote bindings does not travel to each of them: it goes once into the
store-and-forward queue of every neighbour on the way, with, per neighbour, the names of the
bindings over there that it is for. Those names travel *beside* the message, never inside
its encoding, so a message is encoded once per hop.

Theory of operation (one hop, A to B)
-------------------------------------
1. Routing on A (:meth:`~artemis_py.broker.sending.Sending.route`): :func:`forwarding`
   groups the remote bindings by neighbour; :func:`tag` sets
   :attr:`~artemis_py.broker.message.Message.route_to` (store-and-forward queue name ->
   binding names) and returns the queues.
2. Journal on A (:mod:`artemis_py.broker.persistence`): the MESSAGE record is
   :func:`~artemis_py.broker.message.encode_message` of the message (no routing inside),
   kept as ``message.encoded``; the store-and-forward queue's ADD_REF has a ROUTE_TO update
   beside it (:func:`~artemis_py.broker.records.route_to_op`) holding the names. Recovery
   reads them back into ``route_to``. A page file has no record beside the message, so a
   paged message carries them as ``_AMQ_ROUTE_TO<queue>`` properties there (the old form,
   :func:`~artemis_py.broker.write_order.page`), which decoding lifts back into ``route_to``
   -- as it does for a journal written before ROUTE_TO.
3. Bridge on A (:mod:`artemis_py.cluster.bridge`): the cluster link's Message frame
   (:mod:`artemis_py.protocol.cluster.frames`) carries the names as its ``targets`` field
   and the message's bytes as ``payload``: ``message.encoded``, the bytes journaled, as
   they are (encoded only if none were kept: a non-durable or depaged message).
4. Link dispatcher on B (:mod:`artemis_py.cluster.dispatch`): decodes the payload once
   (for routing and filters) and hands the message, its targets and the payload to
   :meth:`~artemis_py.broker.sending.Sending.receive_forwarded`, which resolves the targets
   (local queues, or for a chain the store-and-forward queue further on, tagged again
   beside the message), journals the received bytes as the MESSAGE record (never encoded
   again) and keeps them as ``message.encoded`` for B's own bridge.

Redistribution and scale-down move a message with a copy tagged the same way
(:meth:`~artemis_py.broker.sending.Sending.redistribute`); they read a reference's names
with :func:`targets_of`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from artemis_py.broker.message import Message

if TYPE_CHECKING:
    from artemis_py.broker.queue import Queue
    from artemis_py.broker.routing.remote_binding import RemoteQueueBinding

#: A queue a message goes to and, for a neighbour's store-and-forward queue, the names of the
#: bindings over there that it is for (None for a local queue).
Destination = tuple["Queue", "Sequence[str] | None"]


def forwarding(bindings: Iterable[RemoteQueueBinding]) -> list[Destination]:
    """One destination per neighbour: its store-and-forward queue and the bindings' names."""
    by_neighbour: dict[str, tuple[Queue, list[str]]] = {}
    for binding in bindings:
        sf_queue = binding.route.sf_queue
        by_neighbour.setdefault(sf_queue.name, (sf_queue, []))[1].append(binding.name_on_neighbour)
    return [(queue, tuple(names)) for queue, names in by_neighbour.values()]


def tag(message: Message, destinations: list[Destination]) -> list[Queue]:
    """Name, beside ``message``, the bindings it is for over each link; returns the queues."""
    route_to = {queue.name: tuple(names) for queue, names in destinations if names is not None}
    if route_to:
        if message.route_to:
            message.route_to.update(route_to)
        else:
            message.route_to = route_to
    return [queue for queue, _ in destinations]


def targets_of(message: Message, sf_queue: str) -> tuple[str, ...]:
    """The bindings on the neighbour that ``message``, in store-and-forward queue
    ``sf_queue``, is for (none named: routed by its address over there)."""
    route_to = message.route_to
    if not route_to:
        return ()
    return route_to.get(sf_queue, ())
