"""Clustered grouping: a message group's messages all go to one binding of the cluster.

On one node, a queue hands a group's messages to one consumer (:mod:`..message_groups`).
In a cluster the load balancer would spread them over the nodes; with a
``<grouping-handler>`` (Artemis's "Clustered Grouping") every message of a group goes to
the binding chosen for the group's first message instead, on whatever node it is sent.

Theory of operation
-------------------
A grouped message is routed like any other (:func:`.load_balancing.groups_of`: one copy per
routing name), except that the binding of each routing name is *decided once per group*:

* the decision is known by the group's *full id*, the group id, a dot and the routing name
  (the address for anycast, the queue name for multicast), as Artemis's BindingsImpl names
  it; a binding is named by its *cluster name*, ``queue@node``, the same on every node
  (a remote binding's name here is its cluster name);
* a known decision routes the message to that binding, local queue or remote binding;
* an unknown one is proposed: the binding load balancing would pick is proposed to the
  :class:`GroupingHandler`, whose answer is the decision (an earlier decision of another
  node wins). The handler lives in the cluster package (:mod:`artemis_py.cluster.grouping`):
  the LOCAL one decides at once and keeps its decisions in the bindings journal
  (GROUP_BINDING records); a REMOTE one asks it over the cluster and the answer comes later;
* a decision whose binding is gone here is removed and the group proposed again
  (Artemis's ``forceRemove``), except in the first ``timeout`` after the handler started:
  the bindings of other nodes may not have arrived yet, so the send waits for them.

Routing is synchronous; when a decision must be waited for, :meth:`GroupRouter.route`
raises :class:`GroupUndecided` with the wait, and a client's send waits and routes again
(:mod:`artemis_py.broker.grouped_sending`). Only a client's send waits (``may_wait``): the
node's own moves (dead letters, expiry, forwarded messages whose binding went) cannot, so
for them an undecided group goes where it was proposed to go.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol

from artemis_py.broker.queue import Queue
from artemis_py.broker.routing.load_balancing import groups_of
from artemis_py.exceptions import BrokerError

if TYPE_CHECKING:
    from artemis_py.broker.routing.load_balancing import Binding, GroupKey, Lookup, RoundRobin
    from artemis_py.broker.routing.remote_binding import RemoteQueueBinding
    from artemis_py.config import MessageLoadBalancing, RoutingType

__all__ = ["GroupRouter", "GroupUndecided", "GroupingHandler", "cluster_name"]


class GroupingHandler(Protocol):
    """What decides where groups go (a LOCAL or REMOTE handler: :mod:`artemis_py.cluster.grouping`)."""

    def chosen(self, group_id: str) -> str | None:
        """The cluster name decided for ``group_id`` (its use noted), or None."""
        ...

    def propose(self, group_id: str, cluster_name: str) -> str | None:
        """Propose ``cluster_name`` for a group without a decision: the decision, or None
        while it is asked for (:meth:`decided` waits for it)."""
        ...

    def force_remove(self, group_id: str, cluster_name: str) -> None:
        """The decided binding is gone here: forget the decision (everywhere)."""
        ...

    def warming_up(self) -> bool:
        """Whether other nodes' bindings may still be on their way (just started)."""
        ...

    async def decided(self, group_ids: Sequence[str]) -> None:
        """Wait for the decisions of ``group_ids``; BrokerError after the timeout."""
        ...

    async def bindings_arrive(self) -> None:
        """Wait until a binding is added, or the warm-up ends."""
        ...

    def binding_added(self) -> None: ...

    def binding_removed(self, cluster_name: str) -> None: ...


class GroupUndecided(BrokerError):
    """A grouped message's route needs a decision that is not here yet: ``wait`` for it,
    then route again."""

    def __init__(self, wait: Callable[[], Awaitable[None]]) -> None:
        super().__init__("a message group's binding is being decided")
        self.wait = wait


def cluster_name(binding: Binding, node_id: str) -> str:
    """A binding's name in the whole cluster: ``queue@node`` (a remote binding's own name)."""
    return f"{binding.name}@{node_id}" if isinstance(binding, Queue) else binding.name


_WAIT = object()  # a proposal is under way: the message waits for its answer


class GroupRouter:
    """Routes grouped messages by the decisions of ``handler`` (see the module doc)."""

    def __init__(self, handler: GroupingHandler, node_id: str) -> None:
        self.handler = handler
        self.node_id = node_id
        self.may_wait = False  # set while a client's send routes (grouped_sending)

    def route(
        self,
        address: str,
        routing_type: RoutingType | None,
        local: Sequence[Queue],
        remote: Sequence[RemoteQueueBinding],
        lookup: Lookup,
        policy: MessageLoadBalancing,
        round_robin: RoundRobin,
        group_id: str,
    ) -> tuple[list[Queue], list[RemoteQueueBinding]]:
        """Where a message of group ``group_id`` sent to ``address`` goes (raises
        :class:`GroupUndecided` when it must wait for a decision)."""
        queues: list[Queue] = []
        bindings: list[RemoteQueueBinding] = []
        waiting: list[str] = []
        missing = False
        for key, group in groups_of(address, routing_type, local, remote, policy).items():
            full_id = f"{group_id}.{key[1]}"
            chosen = self._decided(full_id, group)
            if chosen is _WAIT:
                missing = True
                continue
            if chosen is None:
                chosen = self._proposed(address, key, group, lookup, policy, round_robin, full_id)
                if chosen is _WAIT:
                    waiting.append(full_id)
                    continue
            if isinstance(chosen, Queue):
                queues.append(chosen)
            elif chosen is not None:
                bindings.append(chosen)  # type: ignore[arg-type]
        if waiting or missing:
            raise GroupUndecided(partial(self._wait, waiting))
        return queues, bindings

    def _decided(self, full_id: str, group: Sequence[Binding]) -> Binding | object | None:
        """The binding decided for ``full_id``; None: none (any more); _WAIT: its binding
        has not arrived yet."""
        handler = self.handler
        name = handler.chosen(full_id)
        if name is None:
            return None
        binding = self._locate(group, name)
        if binding is not None:
            return binding
        if handler.warming_up():
            return _WAIT if self.may_wait else None
        handler.force_remove(full_id, name)  # its queue or node went: propose again
        return None

    def _proposed(
        self,
        address: str,
        key: GroupKey,
        group: Sequence[Binding],
        lookup: Lookup,
        policy: MessageLoadBalancing,
        round_robin: RoundRobin,
        full_id: str,
    ) -> Binding | object | None:
        """Propose the binding load balancing picks; the decided one, or _WAIT."""
        proposed = round_robin.choose(address, key, group, lookup, policy)
        if proposed is None:
            return None
        if self.handler.warming_up() and not self.may_wait:
            return proposed  # (an internal move while decisions may be unknown: no proposal)
        answer = self.handler.propose(full_id, cluster_name(proposed, self.node_id))
        if answer is None:
            return _WAIT if self.may_wait else proposed
        chosen = self._locate(group, answer)
        if chosen is None:
            if self.handler.warming_up() and self.may_wait:
                return _WAIT
            self.handler.force_remove(full_id, answer)
            return proposed
        return chosen

    def _locate(self, group: Sequence[Binding], name: str) -> Binding | None:
        node_id = self.node_id
        for binding in group:
            if cluster_name(binding, node_id) == name:
                return binding
        return None

    async def _wait(self, waiting: list[str]) -> None:
        if waiting:
            await self.handler.decided(waiting)
        else:
            await self.handler.bindings_arrive()
