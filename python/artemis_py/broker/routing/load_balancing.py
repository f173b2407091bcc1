"""Server-side load balancing: which local queues and remote bindings get a message.

The rules, as the Artemis clustering chapter (§4) and its BindingsImpl behave:

* The bindings of an address form *groups* by routing name. Anycast bindings form one group
  per address (one copy goes to one anycast queue, cluster-wide); each multicast queue name
  forms its own group (every subscription name gets one copy, wherever it lives).
* Each group that has a binding whose filter accepts the message gets exactly one copy,
  chosen round robin over the group's bindings, local and remote alike.
* A binding is *preferred* when it is connected and, under ``ON_DEMAND``, has a consumer
  whose selector matches (``STRICT`` prefers every connected binding). The round robin
  takes the next preferred binding; when none is preferred the message goes to the local
  queue if the group has one (it "keeps" the message), else to the first binding that
  accepts it. A group of a single binding always gets the message.
* ``OFF`` and ``OFF_WITH_REDISTRIBUTION`` never forward: an anycast group uses only local
  queues, and a multicast group uses remote bindings only when no local queue shares the
  name (a subscription that exists only elsewhere still gets its copy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from artemis_py.broker.queue import Queue
from artemis_py.config import MessageLoadBalancing, RoutingType

if TYPE_CHECKING:
    from artemis_py.broker.routing.remote_binding import RemoteQueueBinding

    Binding = Queue | RemoteQueueBinding

Lookup = Callable[[str], object]
GroupKey = tuple[str, str]  # ("A", address) or ("M", queue name)


class RoundRobin:
    """The next position of every group, kept between messages."""

    def __init__(self) -> None:
        self._positions: dict[tuple[str, GroupKey], int] = {}

    def choose(
        self,
        address: str,
        key: GroupKey,
        group: Sequence[Binding],
        lookup: Lookup,
        policy: MessageLoadBalancing,
    ) -> Binding | None:
        """One binding of ``group`` for the message, advancing the group's position."""
        count = len(group)
        if count == 1:
            only = group[0]
            return only if only.accepts(lookup) else None
        slot = (address, key)
        start = self._positions.get(slot, 0) % count
        fallback: int | None = None
        for step in range(count):
            index = (start + step) % count
            binding = group[index]
            if not binding.accepts(lookup):
                continue
            is_local = isinstance(binding, Queue)
            if (isinstance(binding, Queue) or binding.connected) and (
                policy is MessageLoadBalancing.STRICT or binding.has_matching_consumer(lookup)
            ):
                self._positions[slot] = index + 1
                return binding
            # Not preferred: the local queue keeps the message if nothing is preferred.
            if fallback is None or (is_local and not isinstance(group[fallback], Queue)):
                fallback = index
        if fallback is None:
            return None
        self._positions[slot] = fallback + 1
        return group[fallback]


def groups_of(
    address: str,
    routing_type: RoutingType | None,
    local: Sequence[Queue],
    remote: Sequence[RemoteQueueBinding],
    policy: MessageLoadBalancing,
) -> dict[GroupKey, list[Binding]]:
    """The bindings a message sent to ``address`` may go to, by routing name (each group
    gets one copy)."""
    forwarding = policy in (MessageLoadBalancing.ON_DEMAND, MessageLoadBalancing.STRICT)
    groups: dict[GroupKey, list[Binding]] = {}
    if routing_type is not RoutingType.MULTICAST:
        anycast: list[Binding] = [q for q in local if q.routing_type is RoutingType.ANYCAST]
        if forwarding:
            anycast += [b for b in remote if b.routing_type is RoutingType.ANYCAST]
        if anycast:
            groups[("A", address)] = anycast
    if routing_type is not RoutingType.ANYCAST:
        for queue in local:
            if queue.routing_type is RoutingType.MULTICAST:
                groups.setdefault(("M", queue.name), []).append(queue)
        for binding in remote:
            if binding.routing_type is not RoutingType.MULTICAST:
                continue
            key = ("M", binding.queue_name)
            group = groups.get(key)
            if group is None:
                groups[key] = [binding]
            elif forwarding or not any(isinstance(b, Queue) for b in group):
                group.append(binding)
    return groups


def route(
    address: str,
    routing_type: RoutingType | None,
    local: Sequence[Queue],
    remote: Sequence[RemoteQueueBinding],
    lookup: Lookup,
    policy: MessageLoadBalancing,
    round_robin: RoundRobin,
) -> tuple[list[Queue], list[RemoteQueueBinding]]:
    """The local queues and remote bindings a message sent to ``address`` goes to."""
    groups = groups_of(address, routing_type, local, remote, policy)
    queues: list[Queue] = []
    bindings: list[RemoteQueueBinding] = []
    for key, group in groups.items():
        chosen = round_robin.choose(address, key, group, lookup, policy)
        if chosen is None:
            continue
        if isinstance(chosen, Queue):
            queues.append(chosen)
        else:
            bindings.append(chosen)
    return queues, bindings
