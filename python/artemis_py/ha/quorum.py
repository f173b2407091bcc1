"""The quorum vote a replication backup holds before it becomes live (Artemis's
``QuorumVoteServerConnect``), so that a backup cut off from its primary by the network, while
the primary still serves, does not become a second live node with the same messages.

* **Voters** are the other primaries of the cluster: the nodes of the backup's static
  connectors, other than its primary, that answer a ``cluster status`` request (a passive
  backup opens no port, so it never counts). While in sync, the backup asks them every
  ``retry-replication-wait`` and remembers the most it has seen: the *cluster size* is them
  plus its primary.
* **A lone pair** (cluster size 1) has nobody to ask: the backup takes over at once
  (``AMQ221083``), as Artemis's does.
* **The vote.** Each voter says yes when it has no link to the primary any more (neither
  its bridge nor the primary's incoming link). Votes needed: ``quorum-size`` when set, else
  Artemis's majority (half of a cluster of one or two, more than half of a larger one).
  Each round waits at most ``quorum-vote-wait`` seconds; a failed round is held again after
  ``vote-retry-wait``, ``vote-retries`` times; then the backup gives up becoming live and
  looks for its primary again (the primary may still serve, behind a partition).
"""

from __future__ import annotations

import logging

import trio

from artemis_py.cluster.status import fetch_status
from artemis_py.config import BrokerConfig, ReplicationConfig
from artemis_py.transport.link import LinkError

log = logging.getLogger("artemis_py.ha")

Voter = tuple[str, int]


def votes_needed(cluster_size: int, quorum_size: int) -> int:
    """Artemis's table: 1 -> 0, 2 -> 1, 3 -> 2, 4 -> 3, 5 -> 3, n -> n/2 + 1 rounded down."""
    if quorum_size > 0:
        return quorum_size
    if cluster_size <= 2:
        return cluster_size // 2
    return cluster_size // 2 + 1


class Quorum:
    """A backup's view of the other primaries, and its vote."""

    def __init__(self, config: BrokerConfig, settings: ReplicationConfig, cluster: str) -> None:
        self.config = config
        self.settings = settings
        self.cluster = cluster
        self.seen: set[str] = set()  # node IDs of the other primaries that answered

    async def watch(self, voters: list[Voter], primary_id: str) -> None:
        """While in sync: learn the cluster's other primaries (until cancelled)."""
        while True:
            async with trio.open_nursery() as nursery:
                for voter in voters:
                    nursery.start_soon(self._learn, voter, primary_id)
            await trio.sleep(self.settings.retry_replication_wait / 1000)

    async def _learn(self, voter: Voter, primary_id: str) -> None:
        status = await self._status(voter)
        node_id = status.get("node_id") if status is not None else None
        if isinstance(node_id, str) and node_id != primary_id:
            self.seen.add(node_id)

    async def primary_is_lost(self, voters: list[Voter], primary_id: str) -> bool:
        """Whether this backup may become live: its primary is gone by the quorum's view."""
        size = 1 + len(self.seen)
        needed = votes_needed(size, self.settings.quorum_size)
        if needed == 0:  # Artemis logs the vote it does not hold, in this order
            log.info("AMQ221066: Initiating quorum vote: PrimaryFailoverQuorumVote")
            log.info("AMQ221083: ignoring quorum vote as max cluster size is %d.", size)
            log.info("AMQ221071: Failing over based on quorum vote results.")
            return True
        wait = self.settings.quorum_vote_wait
        for _ in range(max(self.settings.vote_retries, 0) + 1):
            log.info("AMQ221066: Initiating quorum vote: PrimaryFailoverQuorumVote")
            log.info("AMQ221067: Waiting %d seconds for quorum vote results.", wait)
            yes = 0
            with trio.move_on_after(wait):
                yes = await self._count(voters, primary_id)
            if yes >= needed:
                log.info("AMQ221071: Failing over based on quorum vote results.")
                return True
            log.warning(
                "quorum vote: %d of the %d votes needed (cluster size %d): the primary may "
                "still serve behind a partition; this backup stays passive",
                yes,
                needed,
                size,
            )
            await trio.sleep(self.settings.vote_retry_wait / 1000)
        return False

    async def _count(self, voters: list[Voter], primary_id: str) -> int:
        yes = 0

        async def ask(voter: Voter) -> None:
            nonlocal yes
            status = await self._status(voter)
            if status is not None and not _sees(status, primary_id):
                yes += 1

        async with trio.open_nursery() as nursery:
            for voter in voters:
                nursery.start_soon(ask, voter)
        return yes

    async def _status(self, voter: Voter) -> dict[str, object] | None:
        host, port = voter
        try:
            return await fetch_status(
                host,
                port,
                cluster=self.cluster,
                user=self.config.cluster_user,
                password=self.config.cluster_password,
            )
        except (LinkError, OSError, trio.TooSlowError):
            return None


def _sees(status: dict[str, object], primary_id: str) -> bool:
    """Whether the voter still has a link to the primary, either way."""
    if status.get("node_id") == primary_id:
        return True  # the primary itself answered: it serves
    members = status.get("members")
    bridges = status.get("bridges")
    for member in members if isinstance(members, list) else []:
        if (
            isinstance(member, dict)
            and member.get("node_id") == primary_id
            and member.get("incoming")
        ):
            return True
    for bridge in bridges if isinstance(bridges, list) else []:
        if (
            isinstance(bridge, dict)
            and bridge.get("node_id") == primary_id
            and bridge.get("connected")
        ):
            return True
    return False
