"""The post office: addresses, the queues bound to them, and routing.

Routing (Artemis's address model)
---------------------------------
An address has routing types (ANYCAST, MULTICAST or both) and queues bound to it, each
queue of one routing type and optionally with a filter.

* A message sent ANYCAST goes to exactly one anycast queue of its address whose filter
  accepts it, chosen round robin among those queues.
* A message sent MULTICAST goes to every multicast queue whose filter accepts it (one copy
  per subscription queue).
* A message with no routing type goes to both: one anycast queue and every multicast queue.
* A message sent to a fully qualified queue name (``address::queue``) goes to that queue only.

The post office only decides; the broker persists the references and then adds them to
the queues (so a consumer never sees a durable message before it is on disk).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from artemis_py.broker.queue import Queue
from artemis_py.config import RoutingType

FQQN_SEPARATOR = "::"


def split_fqqn(name: str) -> tuple[str, str | None]:
    """``"orders::eu"`` -> ``("orders", "eu")``; a plain name -> ``(name, None)``."""
    address, sep, queue = name.partition(FQQN_SEPARATOR)
    return (address, queue) if sep else (name, None)


@dataclass(slots=True)
class Address:
    """An address and the routing types it supports."""

    id: int
    name: str
    routing_types: set[RoutingType]
    auto_created: bool = False
    queues: list[Queue] = field(default_factory=list)
    next_anycast: int = 0


class PostOffice:
    """Every address and queue of the node, and the routing decision."""

    def __init__(self) -> None:
        self.addresses: dict[str, Address] = {}
        self.queues: dict[str, Queue] = {}

    # -- addresses ---------------------------------------------------------------------

    def address(self, name: str) -> Address | None:
        return self.addresses.get(name)

    def add_address(self, address: Address) -> None:
        self.addresses[address.name] = address

    def remove_address(self, name: str) -> Address | None:
        return self.addresses.pop(name, None)

    # -- queues ------------------------------------------------------------------------

    def queue(self, name: str) -> Queue | None:
        return self.queues.get(name)

    def add_queue(self, queue: Queue) -> None:
        address = self.addresses[queue.address]
        self.queues[queue.name] = queue
        address.queues.append(queue)

    def remove_queue(self, queue: Queue) -> None:
        self.queues.pop(queue.name, None)
        address = self.addresses.get(queue.address)
        if address is not None and queue in address.queues:
            address.queues.remove(queue)

    # -- routing -----------------------------------------------------------------------

    def route(
        self,
        address: Address,
        routing_type: RoutingType | None,
        lookup: Callable[[str], object],
    ) -> list[Queue]:
        """The queues a message sent to ``address`` goes to (see the module docstring)."""
        targets: list[Queue] = []
        if routing_type is not RoutingType.MULTICAST:
            anycast = [
                q
                for q in address.queues
                if q.routing_type is RoutingType.ANYCAST and q.accepts(lookup)
            ]
            if anycast:
                chosen = anycast[address.next_anycast % len(anycast)]
                address.next_anycast += 1
                targets.append(chosen)
        if routing_type is not RoutingType.ANYCAST:
            targets.extend(
                q
                for q in address.queues
                if q.routing_type is RoutingType.MULTICAST and q.accepts(lookup)
            )
        return targets
