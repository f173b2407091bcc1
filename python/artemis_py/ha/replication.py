"""Replication HA (shared nothing): a backup keeps a copy of its primary's journals.

# Theory of operation

* **Finding the primary.** The backup dials the static connectors of its cluster connection
  (``cluster-name``, else the first), one after another every ``retry-replication-wait``, and
  opens a *replication link*: the cluster link's handshake and credentials, purpose
  ``replication``. It opens no acceptor meanwhile: it is not live.
* **Initial sync** (primary, :class:`ReplicationPrimary`). Each journal starts its tap
  (Rust, ``Journal.replication_start``): every later submit is also encoded as a
  checksummed replication frame, and the writer rolls over to a fresh file, so the files
  written until then are complete and unchanged (reclaim and compaction wait) once the
  tap's first ticket is. Those files, and ``server.lock`` with the node ID, go to the
  backup in SyncFile chunks while the primary keeps serving; SyncDone ends them.
* **Backup's old data** is moved into ``oldreplica.N`` beside its journal directories when a
  sync starts (``max-saved-replicated-journals-size`` of them are kept), never before: a
  backup that finds no primary keeps what it has.
* **Streaming.** At the end of every loop pass the primary takes what its journals' taps
  encoded and sends it as Records; the backup submits each frame as the primary did and,
  once its journal has it, answers Replicated with the primary's ticket.
* **In sync.** The backup says Synced once its journals are open; the primary then gates
  its journals: a ticket completes only when it is durable here *and* the backup has it, so
  a receipt means both nodes have the message (Artemis's default).
* **Losing the backup** (the link ends: TTL, reset, error): the gate opens and the tap
  stops; the primary goes on alone (AMQ222092) and waits for the next backup.
* **Losing the primary.** A backup in sync becomes live when the link ends: it closes its
  copy of the journals and the node starts on them, with the primary's node ID, as a
  restart would, once the other primaries of the cluster agree that its primary is gone
  (:mod:`.quorum`; a lone pair fails over at once, AMQ221083). A backup not yet in sync,
  or outvoted, keeps looking for its primary. A graceful stop of the primary hands over the same
  way, once the backup has every record (:meth:`ReplicationPrimary.hand_over`).
* **Failback** (``check-for-active-server``): a restarted primary whose node ID is live on
  another node syncs from it as a replica announcing that ID (:mod:`.replica`); the live
  backup, with ``allow-failback``, stops once that replica is in sync, which makes the
  primary live, and syncs from it again as its backup (``restart-backup``).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import trio

from artemis_py import _native
from artemis_py.broker.store import JournalStore
from artemis_py.config import BrokerConfig, ClusterConnectionConfig, ReplicationConfig
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster.replication import (
    BINDINGS_JOURNAL,
    LARGE_MESSAGES,
    MESSAGES_JOURNAL,
)
from artemis_py.storage.journal import Journal
from artemis_py.storage.large_message_files import LargeMessageStore, file_name
from artemis_py.storage.node_manager import NodeManager
from artemis_py.transport.link import Link
from artemis_py.transport.log_backoff import LogBackoff, unlogged

log = logging.getLogger("artemis_py.ha")

SYNC_CHUNK = 1024 * 1024  # bytes of a file per SyncFile frame
NODE_ID_FILE = "server.lock"
MESSAGES, BINDINGS = MESSAGES_JOURNAL, BINDINGS_JOURNAL


@dataclass(frozen=True, slots=True)
class JournalLag:
    """How far the backup is behind on one journal (management's ``lag``)."""

    journal: str  # "messages" or "bindings"
    tickets: int  # submitted here, not yet acknowledged by the backup
    pending_bytes: int  # frames encoded, not yet handed to the link


class ReplicationPrimary:
    """A live node's side: serves one backup at a time over a replication link."""

    def __init__(
        self,
        settings: ReplicationConfig,
        rejoin: Callable[[], Awaitable[NodeManager | None]] | None = None,
    ) -> None:
        self.settings = settings
        # check-for-active-server: sync from the node live with this node's ID, if any.
        self._rejoin = rejoin
        # A live backup's: called when its restarted primary is in sync with it (failback).
        self.on_returning: Callable[[], None] | None = None
        self._refusals = LogBackoff()  # backups refused, from every retry of theirs
        self.store: JournalStore | None = None  # set once the node's journals are open
        self.backup: str | None = None  # the backup's address while one is attached
        self.in_sync = False
        self._synced = trio.Event()

    policy = "replication"
    role = "primary"
    node_manager: NodeManager | None = None  # the node opens its own, unless it rejoined
    failed_back = False

    @property
    def status(self) -> str:
        return "live"

    @property
    def node_id(self) -> str | None:
        return self.store.storage.node_id if self.store is not None else None

    def replication_server(self) -> ReplicationPrimary | None:
        return self

    async def acquire(self) -> NodeManager | None:
        """Live at once, or with check-for-active-server, once the node serving this node's
        ID elsewhere (its live backup) handed the role back."""
        await trio.lowlevel.checkpoint()
        if self.settings.check_for_active_server and self._rejoin is not None:
            self.node_manager = await self._rejoin()
        return self.node_manager

    async def activated(self) -> None:
        await trio.lowlevel.checkpoint()
        log.info("AMQ221007: server is now active (replicating primary; backups may sync)")

    async def watch_for_failback(self, step_down: Callable[[], None]) -> None:
        await trio.lowlevel.checkpoint()

    async def release(self) -> None:
        await trio.lowlevel.checkpoint()
        self.store = None

    @property
    def replication(self) -> str:
        """``no backup``, ``synchronizing`` or ``in sync``."""
        if self.backup is None:
            return "no backup"
        return "in sync" if self.in_sync else "synchronizing"

    def lag(self) -> tuple[JournalLag, ...]:
        """Each journal's lag behind the backup; 0 when nothing is replicated. Tickets up to
        the tap's start are in the files the sync sends, so they count as the backup's
        (an idle journal then shows 0, not every ticket of its past)."""
        store = self.store
        if store is None:
            return (JournalLag("messages", 0, 0), JournalLag("bindings", 0, 0))
        lags = []
        storage = store.storage
        for name, journal in (("messages", storage.messages), ("bindings", storage.bindings)):
            state = journal.replication_state()
            behind = journal.last_ticket - max(state.replicated_through, state.through)
            active = state.active and self.backup is not None
            lags.append(JournalLag(name, max(behind, 0) if active else 0, state.pending_bytes))
        return tuple(lags)

    async def serve(self, link: Link, established: wire.Established, peer: str) -> None:
        """Serve one backup's replication link until it ends."""
        store = self.store
        why = None
        if established.peer_group_name != self.settings.group_name:
            why = (
                f"its group-name is {established.peer_group_name!r}, this primary's "
                f"{self.settings.group_name!r}"
            )
        elif store is None or self.backup is not None:
            why = "it is not live yet" if store is None else f"{self.backup} replicates it"
        if why is not None or store is None:
            quiet = self._refusals.occurred((peer.rpartition(":")[0], why), trio.current_time())
            if quiet is not None:
                log.warning("replication link from %s refused: %s%s", peer, why, unlogged(quiet))
            await link.goodbye(wire.Error(f"this node takes no backup now: {why}"))
            return
        storage = store.storage
        journals = (storage.messages, storage.bindings)
        self.backup = peer
        self._synced = trio.Event()
        forward = _Forwarder(link, journals, store.large_files)
        try:
            forward.attach()  # before the taps: no large file submitted after them is missed
            starts = [await journal.start_replication() for journal in journals]
            for journal in journals:
                # From the tap's first record a receipt waits for the backup too: a backup
                # in sync then has every receipted message, whenever the primary dies.
                journal.gate(True)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._sync, link, journals, starts, forward)
                nursery.start_soon(self._sync_deadline, link, peer)
                reason = await link.serve(lambda event: self._handle(event, journals, link))
                nursery.cancel_scope.cancel()
            log.warning(
                "AMQ222092: the connection to the backup %s failed (%s): replication stops; "
                "this node goes on alone",
                peer,
                reason,
            )
        finally:
            forward.detach()
            for journal in journals:
                journal.stop_replication()
            self.backup, self.in_sync = None, False

    async def hand_over(self) -> None:
        """A graceful stop, its clients gone: return once an in-sync backup has every record
        written here (the gate makes a ticket complete only then), so that it takes over
        with all of them, acknowledgements included. A backup that stops answering ends
        its link at connection-ttl, which opens the gate."""
        if not self.in_sync or self.store is None:
            return
        storage = self.store.storage
        for journal in (storage.messages, storage.bindings):
            if journal.last_ticket:
                await journal.wait(journal.last_ticket)
        log.info("the backup %s has every record: it takes over as this node stops", self.backup)

    async def _sync_deadline(self, link: Link, peer: str) -> None:
        """initial-replication-sync-timeout: receipts wait for the backup meanwhile, so a
        backup that takes longer is dropped (the primary goes on alone)."""
        timeout = self.settings.initial_replication_sync_timeout / 1000
        with trio.move_on_after(timeout):
            await self._synced.wait()
            return
        log.warning(
            "replication: the backup %s did not complete its initial sync within %d ms "
            "(initial-replication-sync-timeout): it is dropped",
            peer,
            self.settings.initial_replication_sync_timeout,
        )
        await link.goodbye(wire.Error("initial-replication-sync-timeout passed"))

    async def _sync(
        self,
        link: Link,
        journals: tuple[Journal, ...],
        starts: list[_native.ReplicationStart],
        forward: _Forwarder,
    ) -> None:
        """The initial sync: the files the taps started after, the node ID, the large
        messages; then what was tapped meanwhile, and everything after as it comes."""
        sent = 0
        for number, (journal, start) in enumerate(zip(journals, starts, strict=True)):
            if start.through:
                await journal.wait(start.through)
            files = [Path(name) for name in start.files]
            if number == MESSAGES:
                files.append(journal.directory / NODE_ID_FILE)
            for path in files:
                sent += await _send_file(link, number, path, path.name)
        large_files = forward.large_files
        if large_files is not None:
            names = await trio.to_thread.run_sync(sorted, large_files.directory.glob("*.msg"))
            for path in names:
                sent += await _send_file(link, LARGE_MESSAGES, path, path.name)
        link.send(wire.SyncDone(files=sent))
        await forward.run()

    def _handle(self, event: object, journals: tuple[Journal, ...], link: Link) -> None:
        if isinstance(event, wire.Replicated):
            journals[event.journal].replicated(event.ticket)
        elif isinstance(event, wire.Synced):
            self.in_sync = True
            self._synced.set()
            log.info("backup %s is in sync: receipts now wait for it too", link.peer)
            if self.on_returning is not None and link.peer_node_id == self.node_id:
                self.on_returning()  # this node's own primary, back: fail back to it


# What the forwarder sends, in the order it happened: a journal's tapped records
# (number, frames), or a large message's file (LARGE_MESSAGES, (ticket, message id, body)).
_Item = tuple[int, "bytes | tuple[int, int, bytes | int]"]


class _Forwarder:
    """Sends the backup what the primary writes, in order: the journals' tapped records
    (taken at the end of each loop pass) and large-message files (as they are submitted,
    so that a file reaches the backup before the record that names it).

    The pass end runs in a Trio instrument, before the loop waits for I/O; waking the
    sending task from there would leave it asleep until that wait ends, so the pass end
    wakes it through the loop's token, which ends the wait at once.
    """

    def __init__(
        self, link: Link, journals: tuple[Journal, ...], large_files: LargeMessageStore | None
    ) -> None:
        self.link = link
        self.journals = journals
        self.large_files = large_files
        self.token = trio.lowlevel.current_trio_token()
        self.items: deque[_Item] = deque()
        self.ready = trio.Event()
        self.kicked = False

    def attach(self) -> None:
        for journal in self.journals:
            journal.at_pass_end(self.take)
        if self.large_files is not None:
            self.large_files.replica = self.large_file

    def detach(self) -> None:
        for journal in self.journals:
            journal.remove_pass_end_hook(self.take)
        if self.large_files is not None and self.large_files.replica == self.large_file:
            self.large_files.replica = None

    def take(self) -> None:
        for number, journal in enumerate(self.journals):
            data = journal.take_replicated()
            if data:
                self.items.append((number, data))
        if self.items and not self.kicked:
            self.kicked = True
            self.token.run_sync_soon(self._kick)

    def large_file(self, ticket: int, message_id: int, body: bytes | int) -> None:
        self.items.append((LARGE_MESSAGES, (ticket, message_id, body)))

    def _kick(self) -> None:
        self.kicked = False
        self.ready.set()

    async def run(self) -> None:
        """Send what was held during the initial sync, then everything as it comes."""
        link = self.link
        while True:
            while self.items:
                number, item = self.items.popleft()
                if isinstance(item, bytes):
                    link.send(wire.Records(journal=number, data=item))
                else:
                    await self._send_large_file(*item)
                await _writable(link)
            await self.ready.wait()
            self.ready = trio.Event()

    async def _send_large_file(self, ticket: int, message_id: int, body: bytes | int) -> None:
        store = self.large_files
        assert store is not None
        name = file_name(message_id)
        if isinstance(body, bytes):
            self.link.send(
                wire.SyncFile(
                    journal=LARGE_MESSAGES, name=name, size=len(body), offset=0, data=body
                )
            )
            return
        # A link to another message's file: send the new file once it exists. Gone
        # already? Its message was consumed: the journal's delete follows.
        await store.wait(ticket)
        await _send_file(self.link, LARGE_MESSAGES, store.path(message_id), name)


async def _send_file(link: Link, number: int, path: Path, name: str) -> int:
    """Send the file at ``path`` as ``name`` of directory ``number``: 1, or 0 if it is gone."""
    try:
        file = await trio.to_thread.run_sync(open, path, "rb")
    except FileNotFoundError:
        return 0
    with file:
        size = (await trio.to_thread.run_sync(os.fstat, file.fileno())).st_size
        log.info("AMQ221025: Replication: sending %s (size=%d) to the backup", path, size)
        offset = 0
        while True:
            data = await trio.to_thread.run_sync(file.read, SYNC_CHUNK)
            data = data[: size - offset]  # a file still growing is sent as it was at stat
            link.send(wire.SyncFile(journal=number, name=name, size=size, offset=offset, data=data))
            offset += len(data)
            await _writable(link)
            if offset >= size:
                return 1


async def _writable(link: Link) -> None:
    """Wait until the link has room to buffer more (its writer task drains it)."""
    while not link.writable and not link.closing:
        ready = trio.Event()
        link.on_writable = ready.set
        with trio.move_on_after(1):
            await ready.wait()
    link.on_writable = None


def warn_unimplemented(config: BrokerConfig, settings: ReplicationConfig) -> None:
    """One warning at start naming what this replication does not do yet, so that nothing
    Artemis's does is silently missing (docs/high-availability.md)."""
    missing = [
        "page files are not replicated: a message paged on the primary is missing on the "
        "backup after a failover",
    ]
    if not settings.backup and settings.vote_on_replication_failure:
        missing.append(
            "vote-on-replication-failure: a primary that loses its backup goes on serving"
        )
    cluster = cluster_of(config, settings)
    if settings.backup and cluster is not None and not cluster.static_connectors:
        missing.append(
            f"a backup finds its primary only through the static connectors of cluster "
            f"connection {cluster.name}, which lists none: it waits for ever"
        )
    log.warning("ha-policy <replication> does not do yet: %s", "; ".join(missing))


def cluster_of(config: BrokerConfig, settings: ReplicationConfig) -> ClusterConnectionConfig | None:
    clusters = config.cluster_connections
    if settings.cluster_name is not None:
        return next(c for c in clusters if c.name == settings.cluster_name)
    return clusters[0] if clusters else None


def static_targets(config: BrokerConfig, settings: ReplicationConfig) -> list[tuple[str, int]]:
    cluster = cluster_of(config, settings)
    if cluster is None:
        return []
    return [(config.connector(n).host, config.connector(n).port) for n in cluster.static_connectors]
