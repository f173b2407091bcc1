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
* Wildcard routing (:mod:`.wildcard_links`): the queues (and remote bindings) of every
  wildcard address that matches the message's address join its own, and the rules above
  apply to them all, as if bound to the message's address.

In a cluster the post office also holds the *remote bindings* learned from other nodes, and
an address with remote bindings is routed by the cluster connection's load-balancing policy
(:mod:`.load_balancing`); on a node with a grouping handler, a message of a group follows
the group's decision (:mod:`.grouping`). Listeners hear of every local queue and consumer
change, which is how other nodes learn this node's bindings.

The post office only decides; the broker persists the references and then adds them to
the queues (so a consumer never sees a durable message before it is on disk).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from artemis_py.broker.queue import Queue
from artemis_py.broker.routing.load_balancing import RoundRobin
from artemis_py.broker.routing.load_balancing import route as balance
from artemis_py.broker.routing.wildcard_links import WildcardLinks
from artemis_py.config import MessageLoadBalancing, RoutingType, WildcardSyntax

if TYPE_CHECKING:
    from artemis_py.broker.routing.grouping import GroupRouter
    from artemis_py.broker.routing.remote_binding import RemoteQueueBinding

FQQN_SEPARATOR = "::"
INTERNAL_PREFIX = "$.artemis.internal."


def is_internal(name: str) -> bool:
    """Whether a queue or address is the node's own (the cluster's store-and-forward
    queues): never balanced, published to other nodes or moved by scale-down."""
    return name.startswith(INTERNAL_PREFIX)


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


class BindingListener(Protocol):
    """Told of local queues and their consumers coming and going."""

    def queue_added(self, queue: Queue) -> None: ...

    def queue_removed(self, queue: Queue) -> None: ...

    def consumers_changed(self, queue: Queue) -> None: ...


class PostOffice:
    """Every address and queue of the node, and the routing decision.

    ``wildcards``: the syntax of wildcard addresses when wildcard routing is on (Artemis's
    default), None when ``<routing-enabled>`` is false.
    """

    def __init__(self, wildcards: WildcardSyntax | None = None) -> None:
        self.addresses: dict[str, Address] = {}
        self.wildcards = WildcardLinks(wildcards)
        self.queues: dict[str, Queue] = {}
        # address name -> bindings of queues on other nodes, in the order they were learned
        self.remote: dict[str, list[RemoteQueueBinding]] = {}
        self._remote_by_name: dict[str, RemoteQueueBinding] = {}
        self.listeners: list[BindingListener] = []
        # The load-balancing policy of the cluster connection an address belongs to.
        self.load_balancing: Callable[[str], MessageLoadBalancing | None] = lambda _: None
        self._round_robin = RoundRobin()
        # With a <grouping-handler>: the decisions grouped messages follow (.grouping).
        self.grouping: GroupRouter | None = None

    # -- addresses ---------------------------------------------------------------------

    def address(self, name: str) -> Address | None:
        return self.addresses.get(name)

    def add_address(self, address: Address) -> None:
        if address.name not in self.addresses:
            self.wildcards.hold(address.name)
        self.addresses[address.name] = address

    def remove_address(self, name: str) -> Address | None:
        address = self.addresses.pop(name, None)
        if address is not None:
            self.wildcards.release(name)
            self.wildcards.forget(name)
        return address

    # -- queues ------------------------------------------------------------------------

    def queue(self, name: str) -> Queue | None:
        return self.queues.get(name)

    def add_queue(self, queue: Queue) -> None:
        address = self.addresses[queue.address]
        self.queues[queue.name] = queue
        address.queues.append(queue)
        queue.on_consumers_changed = self._consumers_changed
        for listener in self.listeners:
            listener.queue_added(queue)
        if self.grouping is not None:
            self.grouping.handler.binding_added()

    def remove_queue(self, queue: Queue) -> None:
        if self.queues.get(queue.name) is not queue:
            return
        del self.queues[queue.name]
        address = self.addresses.get(queue.address)
        if address is not None and queue in address.queues:
            address.queues.remove(queue)
        queue.on_consumers_changed = None
        for listener in self.listeners:
            listener.queue_removed(queue)
        if self.grouping is not None:
            self.grouping.handler.binding_removed(f"{queue.name}@{self.grouping.node_id}")

    def _consumers_changed(self, queue: Queue) -> None:
        for listener in self.listeners:
            listener.consumers_changed(queue)

    # -- remote bindings ---------------------------------------------------------------

    def remote_binding(self, name: str) -> RemoteQueueBinding | None:
        return self._remote_by_name.get(name)

    def add_remote_binding(self, binding: RemoteQueueBinding) -> None:
        self.remote.setdefault(binding.address, []).append(binding)
        self._remote_by_name[binding.name] = binding
        self.wildcards.hold(binding.address)
        if self.grouping is not None:
            self.grouping.handler.binding_added()

    def remove_remote_binding(self, binding: RemoteQueueBinding) -> None:
        if self._remote_by_name.get(binding.name) is binding:
            del self._remote_by_name[binding.name]
        bindings = self.remote.get(binding.address)
        if bindings is not None and binding in bindings:
            bindings.remove(binding)
            self.wildcards.release(binding.address)
            if not bindings:
                del self.remote[binding.address]
            if self.grouping is not None:
                self.grouping.handler.binding_removed(binding.name)

    # -- routing -----------------------------------------------------------------------

    def route(
        self,
        address: Address,
        routing_type: RoutingType | None,
        lookup: Callable[[str], object],
    ) -> tuple[list[Queue], list[RemoteQueueBinding]]:
        """The local queues and remote bindings a message sent to ``address`` goes to."""
        if self.wildcards.matchers and not is_internal(address.name):
            linked = self.wildcards.links(address.name)
            if linked:
                return self._route_with(address, linked, routing_type, lookup)
        remote = self.remote.get(address.name)
        if remote:
            policy = self.load_balancing(address.name)
            if policy is not None:
                return balance(
                    address.name,
                    routing_type,
                    address.queues,
                    remote,
                    lookup,
                    policy,
                    self._round_robin,
                )
        queues = address.queues
        if len(queues) == 1 and queues[0].routing_type is routing_type:
            # (the usual case: the one queue of the message's routing type; what follows
            # gives the same, with a list and a generator more)
            if not queues[0].accepts(lookup):
                return [], []
            if routing_type is RoutingType.ANYCAST:
                address.next_anycast += 1
            return [queues[0]], []
        return _route_locally(address, queues, routing_type, lookup), []

    def route_grouped(
        self,
        address: Address,
        routing_type: RoutingType | None,
        lookup: Callable[[str], object],
        group_id: str,
    ) -> tuple[list[Queue], list[RemoteQueueBinding]]:
        """:meth:`route` for a message of group ``group_id`` on a node with a grouping
        handler: every binding of each routing name is decided once per group
        (:mod:`.grouping`); raises :class:`~.grouping.GroupUndecided` to wait for one."""
        grouping = self.grouping
        if grouping is None or is_internal(address.name):
            return self.route(address, routing_type, lookup)
        linked = self.wildcards.links(address.name) if self.wildcards.matchers else ()
        queues, remote, policy = self._bindings_with(address, linked)
        if policy is None:  # in no cluster connection: its queues here, as any one node's
            remote, policy = [], MessageLoadBalancing.STRICT
        return grouping.route(
            address.name,
            routing_type,
            queues,
            remote,
            lookup,
            policy,
            self._round_robin,
            group_id,
        )

    def _route_with(
        self,
        address: Address,
        linked: tuple[str, ...],
        routing_type: RoutingType | None,
        lookup: Callable[[str], object],
    ) -> tuple[list[Queue], list[RemoteQueueBinding]]:
        """Routing to ``address`` and the wildcard addresses ``linked`` that match it."""
        queues, remote, policy = self._bindings_with(address, linked)
        if remote and policy is not None:
            return balance(
                address.name, routing_type, queues, remote, lookup, policy, self._round_robin
            )
        return _route_locally(address, queues, routing_type, lookup), []

    def _bindings_with(
        self, address: Address, linked: tuple[str, ...]
    ) -> tuple[list[Queue], list[RemoteQueueBinding], MessageLoadBalancing | None]:
        """The local queues and remote bindings of ``address`` and of the wildcard addresses
        ``linked`` that match it, whose bindings count as its own (Artemis adds them to it),
        and the load-balancing policy they go by."""
        queues = list(address.queues)
        remote = list(self.remote.get(address.name, ()))
        policy = self.load_balancing(address.name)
        for name in linked:
            pattern = self.addresses.get(name)
            if pattern is not None:
                queues += pattern.queues
            remote += self.remote.get(name, ())
            if policy is None:
                policy = self.load_balancing(name)
        return queues, remote, policy


def _route_locally(
    address: Address,
    queues: list[Queue],
    routing_type: RoutingType | None,
    lookup: Callable[[str], object],
) -> list[Queue]:
    """Of ``queues``: one anycast queue round robin and every multicast queue, as the
    message's routing type asks and their filters accept."""
    targets: list[Queue] = []
    if routing_type is not RoutingType.MULTICAST:
        anycast = [q for q in queues if q.routing_type is RoutingType.ANYCAST and q.accepts(lookup)]
        if anycast:
            chosen = anycast[address.next_anycast % len(anycast)]
            address.next_anycast += 1
            targets.append(chosen)
    if routing_type is not RoutingType.ANYCAST:
        targets.extend(
            q for q in queues if q.routing_type is RoutingType.MULTICAST and q.accepts(lookup)
        )
    return targets
