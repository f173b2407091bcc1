"""The grouping handlers of clustered grouping: the LOCAL arbiter and the REMOTE cache.

Theory of operation
-------------------
Routing asks a handler where each message group goes (:mod:`artemis_py.broker.routing.grouping`:
a group's *full id* is its group id, a dot and the routing name; a binding is named
``queue@node`` everywhere). One node of the cluster has a LOCAL handler, the others REMOTE
ones (Artemis's "Clustered Grouping"):

* :class:`LocalGrouping` decides: the first proposal for a group wins, is written to the
  bindings journal (a GROUP_BINDING record, so decisions survive a restart) and is the
  answer to every later proposal. A proposal from another node is answered, once the
  record is durable, with a ProposalResponse sent to every neighbour, so every REMOTE node
  learns it. Its reaper forgets groups unused for ``group-timeout``; a decision whose
  binding goes (its queue deleted, its node scaled down) is forgotten too. Each forgotten
  decision is announced (Unproposal), so the next message of the group is proposed again.
* :class:`RemoteGrouping` asks: it sends a Proposal to every neighbour (the LOCAL node
  answers) and remembers the answers it hears, its own or not. A send waits for its
  answer up to ``timeout``, then fails. A group it uses is proposed again once per its own
  ``group-timeout``, which keeps the arbiter's record of it from expiring.

Proposals and answers go one hop: the LOCAL node must be linked to every other node, as in
a symmetric cluster. The frames travel on either link between two nodes; one link per
neighbour carries them.

For a short while after a start (``timeout``), a decision may name a binding that has not
arrived from its node yet; routing then waits for bindings rather than proposing again.
Two LOCAL handlers in one cluster cannot be seen in a node's file: a LOCAL node that hears
another node's answer, or a REMOTE node that hears answers from two nodes, logs an error.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.pending import durable
from artemis_py.config import GroupingHandlerType
from artemis_py.exceptions import BrokerError, StorageError
from artemis_py.protocol import cluster as wire

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker
    from artemis_py.cluster.state import ClusterState
    from artemis_py.config import GroupingHandlerConfig
    from artemis_py.transport.link import Link

log = logging.getLogger("artemis_py.cluster")

GroupingNews = wire.Proposal | wire.ProposalResponse | wire.Unproposal


@dataclass(slots=True)
class Decision:
    """Where a group goes, when it was last used (trio clock) and its journal record."""

    cluster_name: str
    used: float
    record_id: int = 0


class Grouping:
    """What both handlers do: remember decisions, reach the neighbours, warm up."""

    def __init__(
        self, config: GroupingHandlerConfig, broker: Broker, cluster: ClusterState | None
    ) -> None:
        self.config = config
        self.broker = broker
        self.cluster = cluster
        self.timeout = config.timeout / 1000
        self.group_timeout = config.group_timeout / 1000 if config.group_timeout > 0 else None
        self.decisions: dict[str, Decision] = {}
        self._warm_until = trio.current_time() + self.timeout
        self._bindings_changed = trio.Event()
        self.nursery: trio.Nursery | None = None

    # -- routing's questions (broker.routing.grouping.GroupingHandler) -----------------

    def warming_up(self) -> bool:
        return trio.current_time() < self._warm_until

    def binding_added(self) -> None:
        self._bindings_changed.set()
        self._bindings_changed = trio.Event()

    async def bindings_arrive(self) -> None:
        with trio.move_on_at(self._warm_until):
            await self._bindings_changed.wait()

    def _drop(self, cluster_name: str) -> list[str]:
        """Forget every decision naming ``cluster_name``; the groups forgotten."""
        gone = [g for g, d in self.decisions.items() if d.cluster_name == cluster_name]
        for group_id in gone:
            del self.decisions[group_id]
        return gone

    # -- the neighbours ----------------------------------------------------------------

    def _links(self) -> list[Link]:
        """One link per neighbour (the one this node dialled, if any)."""
        if self.cluster is None:
            return []
        by_peer: dict[str, Link] = {}
        for link in [*self.cluster.incoming, *self.cluster.outgoing.values()]:
            if link.established is not None:
                by_peer[link.peer_node_id] = link
        return list(by_peer.values())

    def broadcast(self, frame: GroupingNews) -> None:
        for link in self._links():
            link.send(frame)

    def link_up(self, link: Link) -> None:
        """A link came up (either direction)."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self._warm_until = trio.current_time() + self.timeout
            task_status.started()
            await trio.sleep_forever()


class LocalGrouping(Grouping):
    """The arbiter (``<type>LOCAL</type>``): decides, persists, answers, reaps."""

    def __init__(
        self,
        config: GroupingHandlerConfig,
        broker: Broker,
        cluster: ClusterState | None,
        recovered: Sequence[tuple[int, str, str]] = (),
    ) -> None:
        super().__init__(config, broker, cluster)
        now = trio.current_time()
        for record_id, group_id, cluster_name in recovered:
            self.decisions[group_id] = Decision(cluster_name, now, record_id)
        self._other_arbiters: set[str] = set()

    def chosen(self, group_id: str) -> str | None:
        decision = self.decisions.get(group_id)
        if decision is None:
            return None
        decision.used = trio.current_time()
        return decision.cluster_name

    def propose(self, group_id: str, cluster_name: str) -> str:
        known = self.chosen(group_id)
        if known is not None:
            return known
        record_id = self.broker.next_id()
        # Messages sent after it wait for the bindings journal, this record included.
        self.broker.persistence.store_group_binding(record_id, group_id, cluster_name)
        self.decisions[group_id] = Decision(cluster_name, trio.current_time(), record_id)
        log.debug("grouping: group %s goes to %s", group_id, cluster_name)
        return cluster_name

    def force_remove(self, group_id: str, cluster_name: str) -> None:
        self._forget([group_id], cluster_name)

    async def decided(self, group_ids: Sequence[str]) -> None:
        return  # (this handler decides at once: nothing is ever asked for)

    def binding_removed(self, cluster_name: str) -> None:
        self._forget([g for g, d in self.decisions.items() if d.cluster_name == cluster_name])

    def _forget(self, group_ids: list[str], cluster_name: str | None = None) -> None:
        """Forget these decisions (those naming ``cluster_name``, when given), delete their
        records and tell the other nodes."""
        records = []
        for group_id in group_ids:
            decision = self.decisions.get(group_id)
            if decision is None or cluster_name not in (None, decision.cluster_name):
                continue
            del self.decisions[group_id]
            records.append(decision.record_id)
            self.broadcast(wire.Unproposal(group_id, decision.cluster_name))
        try:
            self.broker.persistence.delete_group_bindings(records)
        except StorageError as exc:
            log.error("grouping: cannot delete %d group decision(s): %s", len(records), exc)

    def receive(self, news: GroupingNews, link: Link) -> None:
        if isinstance(news, wire.Proposal):
            chosen = self.propose(news.group_id, news.cluster_name)
            alternative = None if chosen == news.cluster_name else chosen
            answer = wire.ProposalResponse(news.group_id, news.cluster_name, alternative)
            if self.nursery is not None:
                self.nursery.start_soon(self._answer, answer)
        elif isinstance(news, wire.Unproposal):
            decision = self.decisions.get(news.group_id)
            if decision is not None and decision.cluster_name == news.cluster_name:
                del self.decisions[news.group_id]
                self.broker.persistence.delete_group_bindings([decision.record_id])
        elif link.peer_node_id not in self._other_arbiters:
            self._other_arbiters.add(link.peer_node_id)
            log.error(
                "grouping-handler %s: node %s answers proposals too, so it has a LOCAL "
                "grouping handler as well; a cluster needs exactly one LOCAL handler (make "
                "the others REMOTE), or groups may be split",
                self.config.name,
                link.peer_node_id,
            )

    async def _answer(self, answer: wire.ProposalResponse) -> None:
        """Tell every neighbour the decision, once its record is durable."""
        try:
            await durable(self.broker.persistence.bindings_written())
        except StorageError as exc:
            log.error("grouping: decision for %s not stored: %s", answer.group_id, exc)
            return
        self.broadcast(answer)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(super().run)
            if self.group_timeout is not None and self.config.reaper_period > 0:
                nursery.start_soon(self._reap)
            task_status.started()

    async def _reap(self) -> None:
        """Every ``reaper-period``: forget the groups unused for ``group-timeout``."""
        assert self.group_timeout is not None
        while True:
            await trio.sleep(self.config.reaper_period / 1000)
            oldest = trio.current_time() - self.group_timeout
            expired = [g for g, d in self.decisions.items() if d.used < oldest]
            if expired:
                log.info("grouping: %d group(s) unused for group-timeout forgotten", len(expired))
                self._forget(expired)


class RemoteGrouping(Grouping):
    """A node that asks the arbiter (``<type>REMOTE</type>``) and remembers answers."""

    def __init__(
        self, config: GroupingHandlerConfig, broker: Broker, cluster: ClusterState | None
    ) -> None:
        super().__init__(config, broker, cluster)
        self._asked: dict[str, tuple[str, trio.Event]] = {}  # group -> (proposed, answered)
        self._arbiter: str | None = None  # the node that answered

    def chosen(self, group_id: str) -> str | None:
        decision = self.decisions.get(group_id)
        if decision is None:
            return None
        now = trio.current_time()
        if self.group_timeout is not None and decision.used + self.group_timeout < now:
            decision.used = now  # proposed again: the arbiter notes the group's use
            self.broadcast(wire.Proposal(group_id, decision.cluster_name))
        return decision.cluster_name

    def propose(self, group_id: str, cluster_name: str) -> None:
        if group_id not in self._asked:
            self._asked[group_id] = (cluster_name, trio.Event())
            self.broadcast(wire.Proposal(group_id, cluster_name))

    def force_remove(self, group_id: str, cluster_name: str) -> None:
        decision = self.decisions.get(group_id)
        if decision is not None and decision.cluster_name == cluster_name:
            del self.decisions[group_id]
        self.broadcast(wire.Unproposal(group_id, cluster_name))

    async def decided(self, group_ids: Sequence[str]) -> None:
        with trio.move_on_after(self.timeout):
            for group_id in group_ids:
                asked = self._asked.get(group_id)
                if asked is not None:
                    await asked[1].wait()
        undecided = [g for g in group_ids if g not in self.decisions]
        if not undecided:
            return
        for group_id in undecided:
            self._asked.pop(group_id, None)  # the next send asks again
        raise BrokerError(
            f"no decision for message group {', '.join(undecided)} (group id.routing name) "
            f"from the LOCAL grouping handler within {self.config.timeout} ms "
            f"(timeout of grouping-handler '{self.config.name}'): is the node with the LOCAL "
            "grouping handler running and linked to this node?"
        )

    def binding_removed(self, cluster_name: str) -> None:
        self._drop(cluster_name)

    def link_up(self, link: Link) -> None:
        for group_id, (cluster_name, _) in self._asked.items():
            link.send(wire.Proposal(group_id, cluster_name))

    def receive(self, news: GroupingNews, link: Link) -> None:
        if isinstance(news, wire.ProposalResponse):
            peer = link.peer_node_id
            if self._arbiter is None:
                self._arbiter = peer
            elif peer != self._arbiter:
                log.error(
                    "grouping-handler %s: nodes %s and %s both answer proposals: a cluster "
                    "needs exactly one LOCAL grouping handler, or groups may be split",
                    self.config.name,
                    self._arbiter,
                    peer,
                )
                self._arbiter = peer
            chosen = news.alternative or news.cluster_name
            self.decisions[news.group_id] = Decision(chosen, trio.current_time())
            asked = self._asked.pop(news.group_id, None)
            if asked is not None:
                asked[1].set()
        elif isinstance(news, wire.Unproposal):
            decision = self.decisions.get(news.group_id)
            if decision is not None and decision.cluster_name == news.cluster_name:
                del self.decisions[news.group_id]
        # (a Proposal is for the LOCAL handler: another REMOTE node's, ignored here)


def grouping_handler(
    broker: Broker, clusters: Sequence[ClusterState]
) -> LocalGrouping | RemoteGrouping | None:
    """The node's grouping handler from broker.xml, routing grouped messages by it and
    listening on the cluster connection that covers its ``address`` (None: no handler)."""
    config = broker.config.grouping_handler
    if config is None:
        return None
    cluster = next((c for c in clusters if c.config.matches_address(config.address)), None)
    handler: LocalGrouping | RemoteGrouping
    if config.type is GroupingHandlerType.LOCAL:
        handler = LocalGrouping(config, broker, cluster, broker.recovered_group_bindings)
    else:
        handler = RemoteGrouping(config, broker, cluster)
        if cluster is None:
            log.error(
                "grouping-handler %s is REMOTE but this node forms no cluster: every new "
                "message group will fail after its timeout",
                config.name,
            )
    broker.group_with(handler)
    if cluster is not None:
        cluster.grouping = handler
    log.info(
        "grouping-handler %s: %s%s, %d group decision(s) known",
        config.name,
        config.type.value,
        f" in cluster {cluster.name}" if cluster is not None else "",
        len(handler.decisions),
    )
    return handler
