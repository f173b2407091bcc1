"""The cluster's members as this node knows them, and who announced what.

Every node announces itself (node id, a per-process instance id, the connector other nodes
reach it by, and a version: its start time) over each link it opens. A node passes every
announcement it accepts on to all its other links, so a node that knows one member learns
them all (clusters §3.2). A newer version replaces an older one; a graceful shutdown is
announced as the same member going down with a higher version.

Two members with one node id but different connectors are a copied data directory (clusters
§1 warns the cluster then "will not form properly"); this module names both connectors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from artemis_py.config import AcceptorConfig
from artemis_py.protocol.cluster import Member

log = logging.getLogger("artemis_py.cluster")


def _nothing() -> None:
    pass


def connector(member: Member) -> str:
    return f"tcp://{member.host}:{member.port}"


def leaving(member: Member) -> Member:
    """The announcement of ``member`` going away."""
    return replace(member, up=False, version=member.version + 1)


_WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})


def stomp_urls(acceptors: Iterable[AcceptorConfig], connector_host: str) -> tuple[str, ...]:
    """The URLs clients reach this node's STOMP acceptors by: each acceptor that takes
    STOMP, at its host, or at the cluster connector's host when it listens on every
    interface (the host the other nodes reach this one by)."""
    urls: list[str] = []
    for acceptor in acceptors:
        if acceptor.protocols is not None and "STOMP" not in acceptor.protocols:
            continue
        host = acceptor.hosts[0] if acceptor.hosts else ""
        if host in _WILDCARDS:
            host = connector_host
        url = f"tcp://[{host}]:{acceptor.port}" if ":" in host else f"tcp://{host}:{acceptor.port}"
        if url not in urls:
            urls.append(url)
    return tuple(urls)


def client_urls(topologies: Sequence[Topology]) -> list[str]:
    """The STOMP URLs of the live members of ``topologies``, this node's first."""
    urls: list[str] = []
    for topology in topologies:
        others = sorted(topology.others(), key=lambda m: m.node_id)
        for member in (topology.local, *others):
            if member.up:
                urls.extend(u for u in member.clients if u not in urls)
    return urls


class DuplicateNodeIdError(Exception):
    """Two running nodes share a node id."""


class Topology:
    """Members by node id (this node included)."""

    def __init__(self, local: Member) -> None:
        self.local = local
        self.members: dict[str, Member] = {local.node_id: local}
        self._reported: set[tuple[str, str]] = set()
        self.on_change: Callable[[], None] = _nothing  # after a change update() reported

    def announce_clients(self, urls: Sequence[str]) -> Member:
        """This node's member with its client (STOMP) URLs; returns it, to be announced."""
        self.local = replace(self.local, clients=tuple(urls))
        self.members[self.local.node_id] = self.local
        return self.local

    def update(self, member: Member) -> bool:
        """Apply an announcement; True when it changed what this node knows.

        Raises :class:`DuplicateNodeIdError` (once per pair of connectors) when the member
        claims this node's id, or another member's id, from a different connector.
        """
        known = self.members.get(member.node_id)
        if member.node_id == self.local.node_id:
            # An earlier run of this node (same connector) that others still remember is
            # not a duplicate; another connector claiming this node's id is.
            if (
                member.instance_id != self.local.instance_id
                and member.up
                and (member.host, member.port) != (self.local.host, self.local.port)
                and not _pair(self.local, member)
            ):
                self._duplicate(self.local, member)
            return False
        if known is not None:
            if (
                member.up
                and known.up
                and member.instance_id != known.instance_id
                and (member.host, member.port) != (known.host, known.port)
                and not _pair(known, member)
            ):
                self._duplicate(known, member)
            if member.version <= known.version:
                return False
        self.members[member.node_id] = member
        self.on_change()
        return True

    def _duplicate(self, first: Member, second: Member) -> None:
        key = tuple(sorted((connector(first), connector(second))))
        if key in self._reported:
            return
        self._reported.add(key)  # type: ignore[arg-type]
        raise DuplicateNodeIdError(
            f"two nodes have the same node ID {first.node_id}: {connector(first)} and "
            f"{connector(second)}. Each node needs its own data directory (the node ID lives "
            f"in server.lock in the journal directory): a copied data directory makes nodes "
            f"indistinguishable and the cluster cannot form. Stop one of them, delete its "
            f"server.lock (or give it a fresh data directory) and start it again."
        )

    def others(self) -> list[Member]:
        return [m for m in self.members.values() if m.node_id != self.local.node_id]


def _pair(first: Member, second: Member) -> bool:
    """Whether two members with one node ID are the two sides of an HA pair (a takeover or
    a failback moves the ID: the newer announcement wins), not a copied data directory."""
    return first.paired and second.paired
