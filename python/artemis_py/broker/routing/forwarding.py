"""Destinations of a message bound for other nodes.

A message routed to remote bindings does not travel to each of them: it goes once into the
store-and-forward queue of every neighbour on the way, carrying, per neighbour, the names
of the bindings over there that it is for (a ``_AMQ_ROUTE_TO`` property named after the
store-and-forward queue). The neighbour's bridge reads them when it forwards the message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from artemis_py.broker.message import ROUTE_TO_PREFIX, Message

if TYPE_CHECKING:
    from artemis_py.broker.queue import Queue
    from artemis_py.broker.routing.remote_binding import RemoteQueueBinding

#: A queue a message goes to and, for a neighbour's store-and-forward queue, the names of the
#: bindings over there that it is for (None for a local queue).
Destination = tuple["Queue", "list[str] | None"]


def forwarding(bindings: Iterable[RemoteQueueBinding]) -> list[Destination]:
    """One destination per neighbour: its store-and-forward queue and the bindings' names."""
    by_neighbour: dict[str, tuple[Queue, list[str]]] = {}
    for binding in bindings:
        sf_queue = binding.route.sf_queue
        by_neighbour.setdefault(sf_queue.name, (sf_queue, []))[1].append(binding.name_on_neighbour)
    return list(by_neighbour.values())


def tag(message: Message, destinations: list[Destination]) -> list[Queue]:
    """Name, on ``message``, the bindings it is for over each link; returns the queues."""
    route_to = {
        ROUTE_TO_PREFIX + queue.name: json.dumps(names)
        for queue, names in destinations
        if names is not None
    }
    if route_to:
        message.set_properties(route_to)
    return [queue for queue, _ in destinations]
