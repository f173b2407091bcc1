"""The binding exchange: what nodes tell each other about their queues (clusters §3, §4).

Theory of operation
-------------------
Each node publishes, on every link other nodes dialled (its *incoming* links), its own
queues and their consumers' selectors (distance 0), and the remote bindings it knows that
are still within the dialler's ``max-hops``. A dialler learns them from its *outgoing* link
as :class:`~artemis_py.broker.routing.RemoteQueueBinding` objects in the broker, which is
how routing and redistribution find queues on other nodes.

* A binding is known by the name its neighbour gives it; here it is named
  ``queue@origin-node``, unique in the cluster, and that is the name passed on (chains).
* The same queue heard by two paths is kept by the shorter one; a binding is never passed
  back to the node it came from or that owns it.
* A snapshot (sent when a link comes up) replaces everything learned from that neighbour;
  later frames add, remove, or change the consumers of one binding.
* News about a node that scaled down is ignored: it left, and its queues went with it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from artemis_py.broker.filter import Filter, FilterSyntaxError
from artemis_py.broker.routing import RemoteQueueBinding, is_internal
from artemis_py.config import RoutingType
from artemis_py.protocol import cluster as wire

if TYPE_CHECKING:
    from artemis_py.broker.queue import Queue
    from artemis_py.cluster.state import ClusterState
    from artemis_py.transport.link import Link

log = logging.getLogger("artemis_py.cluster")


class BindingExchange:
    """Learns remote bindings from neighbours and publishes this node's (a BindingListener)."""

    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.broker = cluster.broker
        # (neighbour node id, the neighbour's name for it) -> binding
        self.learned: dict[tuple[str, str], RemoteQueueBinding] = {}
        # neighbour node id -> its own queues' names and addresses (all of them, whatever
        # max-hops and the address filter let routing use): what a scale-down target has
        self.neighbour_queues: dict[str, dict[str, str]] = {}

    # -- learning ----------------------------------------------------------------------

    def apply_bindings(self, via: str, frame: wire.Bindings) -> None:
        own = self.neighbour_queues.setdefault(via, {})
        if frame.snapshot:
            own.clear()
        own.update((info.name, info.address) for info in frame.added if info.distance == 0)
        for name in frame.removed:
            own.pop(name, None)
        seen = set()
        for info in frame.added:
            seen.add(info.name)
            self._learn(via, info)
        for name in frame.removed:
            self._forget(via, name)
        if frame.snapshot:
            for key in [k for k in self.learned if k[0] == via and k[1] not in seen]:
                self._forget(via, key[1])

    def apply_consumers(self, via: str, frame: wire.Consumers) -> None:
        binding = self.learned.get((via, frame.name))
        if binding is None:
            return
        try:
            binding.consumers = tuple(Filter.parse(s) for s in frame.consumers)
        except FilterSyntaxError as exc:
            log.warning(
                "cluster %s: consumers of %s ignored: %s", self.cluster.name, frame.name, exc
            )
            return
        binding.consumer_texts = tuple(frame.consumers)
        self._publish_consumers(binding)
        self._redistribute_for(binding)

    def forget_node(self, departed: str) -> None:
        """``departed`` left the cluster: the bindings it owned or passed on go."""
        for key, binding in list(self.learned.items()):
            if departed in (key[0], binding.origin_node_id):
                self._forget(*key)
        self.neighbour_queues.pop(departed, None)

    def _learn(self, via: str, info: wire.BindingInfo) -> None:
        cluster = self.cluster
        if info.origin_node_id == cluster.node_id or not cluster.owns(info.address):
            return
        if via in cluster.scaled_down or info.origin_node_id in cluster.scaled_down:
            return  # news from before it left
        distance = info.distance + 1
        if distance > cluster.config.max_hops:
            return
        try:
            filter = Filter.parse(info.filter)
            consumers = tuple(Filter.parse(s) for s in info.consumers)
        except FilterSyntaxError as exc:
            log.warning(
                "cluster %s: binding %s from %s ignored: %s", cluster.name, info.name, via, exc
            )
            return
        binding = self.learned.get((via, info.name))
        if binding is not None:
            binding.consumers = consumers
            binding.consumer_texts = tuple(info.consumers)
            self._publish_consumers(binding)
            self._redistribute_for(binding)
            return
        name = f"{info.queue_name}@{info.origin_node_id}"
        existing = self.broker.remote_binding(name)
        if existing is not None:
            if existing.distance <= distance:
                return  # known by a path at least as short
            self._forget(existing.route.node_id, existing.name_on_neighbour)
        binding = RemoteQueueBinding(
            name=name,
            queue_name=info.queue_name,
            address=info.address,
            routing_type=RoutingType(info.routing_type),
            filter=filter,
            filter_text=info.filter,
            distance=distance,
            origin_node_id=info.origin_node_id,
            name_on_neighbour=info.name,
            route=cluster.route_to(via),
            consumers=consumers,
            consumer_texts=tuple(info.consumers),
        )
        self.learned[(via, info.name)] = binding
        self.broker.add_remote_binding(binding)
        log.debug("cluster %s: learned %r", cluster.name, binding)
        self._redistribute_for(binding)
        added = wire.Bindings(snapshot=False, added=(_remote_info(binding),), removed=())
        self._publish(binding, added)

    def _forget(self, via: str, name: str) -> None:
        binding = self.learned.pop((via, name), None)
        if binding is None:
            return
        self.broker.remove_remote_binding(binding)
        self._publish(binding, wire.Bindings(snapshot=False, added=(), removed=(binding.name,)))

    def _redistribute_for(self, binding: RemoteQueueBinding) -> None:
        redistributor = self.cluster.redistributor
        if redistributor is not None and binding.consumers:
            redistributor.remote_consumers_changed(binding)

    # -- publishing --------------------------------------------------------------------

    def _publish_consumers(self, binding: RemoteQueueBinding) -> None:
        self._publish(binding, wire.Consumers(name=binding.name, consumers=binding.consumer_texts))

    def _publish(self, binding: RemoteQueueBinding, frame: wire.Bindings | wire.Consumers) -> None:
        """Send ``frame`` (news of a remote binding) to the diallers it is passed on to."""
        for link in list(self.cluster.incoming):
            if _shares(binding, link):
                link.send(frame)

    def _to_every_dialler(self, frame: wire.Bindings | wire.Consumers) -> None:
        for link in list(self.cluster.incoming):
            link.send(frame)

    def snapshot(self, link: Link) -> wire.Bindings:
        """Everything the dialler at the other end of ``link`` is told when it comes up."""
        node_id = self.cluster.node_id
        infos = [_local_info(q, node_id) for q in self.broker.queues() if not is_internal(q.name)]
        infos += [_remote_info(b) for b in self.learned.values() if _shares(b, link)]
        return wire.Bindings(snapshot=True, added=tuple(infos), removed=())

    # BindingListener: local queues and consumers, published to every dialler.

    def queue_added(self, queue: Queue) -> None:
        if is_internal(queue.name):
            return
        if self.cluster.redistributor is not None and self.cluster.owns(queue.address):
            self.cluster.redistributor.watch(queue)
        info = _local_info(queue, self.cluster.node_id)
        self._to_every_dialler(wire.Bindings(snapshot=False, added=(info,), removed=()))

    def queue_removed(self, queue: Queue) -> None:
        if is_internal(queue.name):
            return
        if self.cluster.redistributor is not None:
            self.cluster.redistributor.forget(queue)
        self._to_every_dialler(wire.Bindings(snapshot=False, added=(), removed=(queue.name,)))

    def consumers_changed(self, queue: Queue) -> None:
        if is_internal(queue.name):
            return
        if self.cluster.redistributor is not None and self.cluster.owns(queue.address):
            self.cluster.redistributor.consumers_changed(queue)
        self._to_every_dialler(wire.Consumers(name=queue.name, consumers=_selectors(queue)))


def _shares(binding: RemoteQueueBinding, link: Link) -> bool:
    """Whether a remote binding is passed on to the node at the other end of ``link``."""
    established = link.established
    if established is None:
        return False
    peer = established.peer_node_id
    return (
        binding.distance < (established.peer_max_hops or 0)
        and binding.origin_node_id != peer
        and binding.route.node_id != peer
    )


def _local_info(queue: Queue, node_id: str) -> wire.BindingInfo:
    return wire.BindingInfo(
        name=queue.name,
        queue_name=queue.name,
        address=queue.address,
        routing_type=queue.routing_type.value,
        filter=queue.filter.text if queue.filter is not None else None,
        distance=0,
        origin_node_id=node_id,
        consumers=_selectors(queue),
    )


def _remote_info(binding: RemoteQueueBinding) -> wire.BindingInfo:
    return wire.BindingInfo(
        name=binding.name,
        queue_name=binding.queue_name,
        address=binding.address,
        routing_type=binding.routing_type.value,
        filter=binding.filter_text,
        distance=binding.distance,
        origin_node_id=binding.origin_node_id,
        consumers=binding.consumer_texts,
    )


def _selectors(queue: Queue) -> tuple[str | None, ...]:
    return tuple(c.selector.text if c.selector is not None else None for c in queue.consumers)
