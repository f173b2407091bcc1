"""What a node knows about a queue on another node (Artemis's RemoteQueueBinding).

A remote binding stands for a queue that lives ``distance`` hops away. Messages routed to it
do not go there directly: they go into the durable store-and-forward queue of the neighbour
the binding was learned from (``route``), tagged with the name the neighbour knows the
binding by, and the neighbour's bridge takes them on from there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from artemis_py.config import RoutingType

if TYPE_CHECKING:
    from artemis_py.broker.filter import Filter
    from artemis_py.broker.queue import Queue

Lookup = Callable[[str], object]


@dataclass(slots=True)
class NeighbourRoute:
    """The way to one neighbour: its store-and-forward queue and whether the link is up."""

    node_id: str
    sf_queue: Queue
    connected: bool = False


@dataclass(slots=True, eq=False)
class RemoteQueueBinding:
    """A queue on another node, as learned over a cluster link."""

    name: str  # unique on this node; what we call it when we pass it on (chains)
    queue_name: str  # the queue's own name on its node: the routing name of multicast groups
    address: str
    routing_type: RoutingType
    filter: Filter | None
    filter_text: str | None
    distance: int  # hops from this node: 1 = a neighbour's own queue
    origin_node_id: str
    name_on_neighbour: str  # the name a forwarded message targets on the neighbour
    route: NeighbourRoute
    consumers: tuple[Filter | None, ...] = ()
    consumer_texts: tuple[str | None, ...] = field(default=())

    @property
    def connected(self) -> bool:
        return self.route.connected

    @property
    def consumer_count(self) -> int:
        return len(self.consumers)

    def accepts(self, lookup: Lookup) -> bool:
        """Whether the queue's filter lets the message in."""
        return self.filter is None or self.filter.matches(lookup)

    def has_matching_consumer(self, lookup: Lookup) -> bool:
        """Whether some consumer over there would take the message (ON_DEMAND)."""
        return any(c is None or c.matches(lookup) for c in self.consumers)

    def __repr__(self) -> str:
        return (
            f"RemoteQueueBinding({self.name!r}, address={self.address!r}, "
            f"{self.routing_type.name}, distance={self.distance}, via={self.route.node_id[:8]}, "
            f"consumers={self.consumer_count}, connected={self.connected})"
        )
