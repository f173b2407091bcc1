"""A replication backup: the copy of its primary's journals it keeps, and its takeover
(theory of operation in :mod:`artemis_py.ha.replication`)."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import trio

from artemis_py import __version__
from artemis_py.config import BrokerConfig, ReplicationConfig
from artemis_py.ha.quorum import Quorum
from artemis_py.ha.replication import ReplicationPrimary, cluster_of, static_targets
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster import Purpose
from artemis_py.storage.broker_storage import bindings_settings
from artemis_py.storage.journal import Journal, open_journal
from artemis_py.storage.node_manager import NodeManager, read_node_id, try_lock
from artemis_py.storage.settings import JournalSettings
from artemis_py.transport.link import Link, LinkError, LinkRefused, connect
from artemis_py.transport.log_backoff import LogBackoff, unlogged

log = logging.getLogger("artemis_py.ha")


class ReplicationBackup:
    """A backup's side: keeps a copy of the primary's journals until it must be live."""

    def __init__(
        self,
        config: BrokerConfig,
        base: Path,
        settings: ReplicationConfig,
        journal_settings: JournalSettings,
        *,
        returning: str | None = None,
        targets: list[tuple[str, int]] | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        # A primary that found its node live elsewhere (check-for-active-server) syncs from
        # it as this replica, announcing the node ID: a live backup then fails back.
        self.returning = returning
        # Where its primary may be: the cluster connection's static connectors, or the one
        # node a returning primary found serving its ID.
        self.targets = targets if targets is not None else static_targets(config, settings)
        # Indexed by SyncFile's directory number: the journals', then the large messages'.
        self.directories = (
            base / config.journal.directory,
            base / config.journal.bindings_directory,
            base / config.large_messages_directory,
        )
        self.paging_directory = base / config.paging_directory  # set aside, not synced
        self.journal_settings = journal_settings
        self.node_manager: NodeManager | None = None  # the primary's node ID, once synced
        self.node_id: str | None = None
        self.live = False
        self.primary: str | None = None  # the primary it replicates now
        self.in_sync = False
        self.failed_back = False
        # Once live, it serves a replica as a primary does: its restarted primary's.
        self.server = ReplicationPrimary(settings)
        cluster = cluster_of(config, settings)
        self.quorum = Quorum(config, settings, cluster.name if cluster is not None else "")
        self.voters: list[tuple[str, int]] = []  # the static connectors but its primary
        self._refusals = LogBackoff()  # handshakes refused, logged ever less often
        # Who dials, in its Hello: the same on every retry, so a refusing primary's log
        # backs off too.
        self._dial_id = f"backup-{uuid.uuid4()}"
        self._step_down: Callable[[], None] | None = None

    policy = "replication"
    role = "backup"

    def replication_server(self) -> ReplicationPrimary | None:
        return self.server if self.live else None

    @property
    def status(self) -> str:
        return "live" if self.live else "waiting"

    async def activated(self) -> None:
        await trio.lowlevel.checkpoint()
        # Artemis's replicated backup logs 221007 (its shared-store one 221010).
        log.info("AMQ221007: server is now active (the replication backup took over)")

    async def watch_for_failback(self, step_down: Callable[[], None]) -> None:
        """With allow-failback, a live backup hands back to its restarted primary once that
        primary, syncing from it, is in sync (it announces the node ID both serve)."""
        await trio.lowlevel.checkpoint()
        if self.settings.allow_failback:
            self._step_down = step_down
            self.server.on_returning = self._fail_back

    def _fail_back(self) -> None:
        assert self._step_down is not None
        self.failed_back = True
        log.info(
            "AMQ221008: the primary restarted and is in sync with this live backup: it stops "
            "and hands the role back%s",
            "; it then syncs from it as its backup" if self.settings.restart_backup else "",
        )
        if self.settings.restart_backup:
            log.info("AMQ221039: Restarting as replicating backup server after primary restart")
        self._step_down()

    async def release(self) -> None:
        await trio.lowlevel.checkpoint()
        if self.node_manager is not None:
            self.node_manager.close()
            self.node_manager = None
        self.live = False

    @property
    def replication(self) -> str:
        if self.live:
            return "live"
        if self.primary is None:
            return "looking for its primary"
        return "in sync" if self.in_sync else "synchronizing"

    async def acquire(self) -> NodeManager:
        """Replicate until the primary is lost while in sync; the node ID's lock then."""
        self.node_id = await read_node_id(self.directories[0])
        log.info(
            "AMQ221109: artemis-py backup server version %s [%s] started; waiting for its "
            "primary to fail before it becomes live (no acceptor is open meanwhile)",
            __version__,
            self.node_id or "node ID not synced yet",
        )
        targets = self.targets
        wait = self.settings.retry_replication_wait / 1000
        while True:
            for host, port in targets:
                try:
                    link = await self._dial(host, port)
                except LinkRefused as exc:  # credentials, cluster name: the operator's to fix
                    self._repeated(f"{host}:{port} refused this backup: {exc}")
                    continue
                except (OSError, LinkError, trio.TooSlowError) as exc:
                    log.debug("replication: primary at %s:%d not reached: %s", host, port, exc)
                    continue
                if self.returning is not None and link.peer_node_id != self.returning:
                    # A returning primary syncs only from the node serving its own ID.
                    with trio.CancelScope(shield=True):
                        await trio.aclose_forcefully(link.stream)
                    continue
                self.voters = [t for t in targets if t != (host, port)]
                if await self._replicate(link, f"{host}:{port}") and await self._may_take_over():
                    return self._become_live()
            await trio.sleep(wait)

    def _repeated(self, problem: str) -> None:
        """A problem each retry meets again: logged once, then ever less often."""
        quiet = self._refusals.occurred(problem, trio.current_time())
        if quiet is not None:
            log.warning("replication: %s%s", problem, unlogged(quiet))

    async def _may_take_over(self) -> bool:
        """A returning primary takes its role back when the live node lets go; a backup,
        once the quorum agrees its primary is gone. Else it gives up its copy's lock and
        looks for its primary again."""
        if self.returning is not None:
            return True
        assert self.node_id is not None
        if await self.quorum.primary_is_lost(self.voters, self.node_id):
            return True
        if self.node_manager is not None:
            self.node_manager.close()
            self.node_manager = None
        self.in_sync = False
        return False

    async def find_live(self, node_id: str) -> tuple[str, int] | None:
        """The address of a live node serving ``node_id`` among the static connectors (the
        handshake names the node), or None: check-for-active-server's question."""
        for host, port in self.targets:
            try:
                link = await self._dial(host, port, purpose="status")
            except (OSError, LinkError, trio.TooSlowError):
                continue
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(link.stream)
            if link.peer_node_id == node_id:
                return host, port
        return None

    def _become_live(self) -> NodeManager:
        assert self.node_manager is not None
        if self.returning is not None:
            log.info(
                "the live node %s handed the role back: this primary is live again",
                self.primary,
            )
            self.live = True
            return self.node_manager
        log.info("AMQ221037: backup %s to become 'active' (node %s)", self.primary, self.node_id)
        self.live = True
        return self.node_manager

    async def _dial(self, host: str, port: int, purpose: Purpose = "replication") -> Link:
        cluster = cluster_of(self.config, self.settings)
        codec = wire.ClientConnection(
            node_id=self.returning or self._dial_id,
            instance_id=uuid.uuid4().hex,
            cluster_name=cluster.name if cluster is not None else "",
            connector=("", 0),
            user=self.config.cluster_user,
            password=self.config.cluster_password,
            max_hops=0,
            purpose=purpose,
            group_name=self.settings.group_name,
        )
        assert cluster is not None  # the configuration reader requires one
        return await connect(
            host,
            port,
            codec,
            call_timeout=cluster.call_timeout / 1000,
            ping_interval=cluster.check_period / 1000,
            ttl=cluster.connection_ttl / 1000,
        )

    async def _replicate(self, link: Link, primary: str) -> bool:
        """Copy and follow the primary over ``link``; True if it was lost while in sync."""
        self.primary = primary
        replica = _Replica(self, link)
        try:
            async with trio.open_nursery() as nursery:
                replica.nursery = nursery
                reason = await link.serve(replica.handle)
                nursery.cancel_scope.cancel()
            if self.in_sync:
                log.warning("replication link to the primary %s ended: %s", primary, reason)
            else:  # e.g. a node that is no replicating primary, met on every round
                self._repeated(f"no sync from {primary}: {reason}")
        finally:
            with trio.CancelScope(shield=True):
                self.node_manager = await replica.close(keep_lock=self.in_sync)
        return self.in_sync


class _Replica:
    """One sync and stream from a primary: the files, then the journals they make."""

    def __init__(self, backup: ReplicationBackup, link: Link) -> None:
        self.backup = backup
        self.link = link
        self.nursery: trio.Nursery | None = None
        self.files: dict[tuple[int, str], int] = {}  # open descriptors of synced files
        self.received = 0
        self.stack = AsyncExitStack()
        self.node_manager: NodeManager | None = None
        self.journals: list[Journal] = []
        self.acks: list[trio.MemorySendChannel[tuple[int, int]]] = []

    async def handle(self, event: object) -> None:
        if isinstance(event, wire.SyncFile):
            await self._write(event)
        elif isinstance(event, wire.SyncDone):
            await self._synced(event.files)
        elif isinstance(event, wire.Records):
            if not self.journals:
                raise LinkError("the primary sent Records before SyncDone")
            acked = self.journals[event.journal].apply_replicated(event.data)
            if acked[1]:
                self.acks[event.journal].send_nowait(acked)

    async def _write(self, chunk: wire.SyncFile) -> None:
        if not self.received and not self.journals:
            await trio.to_thread.run_sync(self._set_old_data_aside)
        key = (chunk.journal, chunk.name)
        fd = self.files.get(key)
        if fd is None:
            path = self.backup.directories[chunk.journal] / chunk.name
            fd = self.files[key] = await trio.to_thread.run_sync(_create, path)
            self.received += 0 if self.journals else 1  # counted in the initial sync only
        complete = chunk.offset + len(chunk.data) >= chunk.size
        await trio.to_thread.run_sync(_write_at, fd, chunk.data, chunk.offset, complete)
        if complete:
            del self.files[key]

    def _set_old_data_aside(self) -> None:
        """Artemis's oldreplica.N: what each data directory held (journals, large messages,
        pages) goes into a numbered directory inside it; the oldest beyond
        max-saved-replicated-journals-size are deleted."""
        keep = self.backup.settings.max_saved_replicated_journals_size
        directories = (*self.backup.directories, self.backup.paging_directory)
        for directory in directories:
            directory.mkdir(parents=True, exist_ok=True)
            entries = [
                p
                for p in directory.iterdir()
                if not p.name.startswith("oldreplica.")
                and not any(p == d or p in d.parents for d in directories)
            ]
            if not entries:
                continue
            if keep == 0:
                for entry in entries:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
                log.info("replication: the old data of %s was deleted", directory)
                continue
            target = _next_saved(directory, keep)
            for entry in entries:
                entry.rename(target / entry.name)
            log.info("replication: the old data of %s was moved to %s", directory, target)

    async def _synced(self, files: int) -> None:
        if files != self.received or self.files:
            raise LinkError(
                f"the primary announced {files} files but sent {self.received} "
                f"({len(self.files)} incomplete)"
            )
        await trio.to_thread.run_sync(self._sync_directories)
        backup = self.backup
        messages_dir, bindings_dir = backup.directories[:2]
        stack = self.stack
        manager = self.node_manager = await try_lock(messages_dir)
        if manager is None:
            raise LinkError(f"another process holds the lock on {messages_dir}")
        settings = backup.journal_settings
        self.journals = [
            await stack.enter_async_context(open_journal(messages_dir, settings)),
            await stack.enter_async_context(
                open_journal(
                    bindings_dir,
                    bindings_settings(settings),
                    file_prefix="activemq-bindings",
                    file_extension="bindings",
                )
            ),
        ]
        for journal in self.journals:
            journal.loaded = None  # nothing is rebuilt from it here: the node does, once live
        assert self.nursery is not None
        for number, journal in enumerate(self.journals):
            send, receive = trio.open_memory_channel[tuple[int, int]](float("inf"))
            self.acks.append(send)
            self.nursery.start_soon(self._acknowledge, number, journal, receive)
        self.nursery.start_soon(backup.quorum.watch, backup.voters, manager.node_id)
        backup.node_id = manager.node_id
        backup.in_sync = True
        self.link.send(wire.Synced())
        log.info(
            "AMQ221024: Backup server is synchronized with primary server %s, nodeID=%s.",
            backup.primary,
            manager.node_id,
        )

    async def _acknowledge(
        self, number: int, journal: Journal, acked: trio.MemoryReceiveChannel[tuple[int, int]]
    ) -> None:
        """Answer Replicated once the local journal has what the primary sent, in order."""
        async for primary, local in acked:
            while True:  # skip to the latest already queued: one answer for them all
                try:
                    primary, local = acked.receive_nowait()
                except trio.WouldBlock:
                    break
            await journal.wait(local)
            self.link.send(wire.Replicated(journal=number, ticket=primary))

    def _sync_directories(self) -> None:
        """The synced files' names are durable (each file was fsynced as it completed)."""
        for directory in self.backup.directories:
            fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    async def close(self, *, keep_lock: bool) -> NodeManager | None:
        """Close the journals (flushing what was applied) and any half-synced file; the
        node ID's lock stays held for a backup about to be live."""
        for fd in self.files.values():
            os.close(fd)
        self.files.clear()
        await self.stack.aclose()  # the journals
        manager, self.node_manager = self.node_manager, None
        if manager is not None and not keep_lock:
            manager.close()
            return None
        return manager


def _create(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)


def _write_at(fd: int, data: bytes, offset: int, complete: bool) -> None:
    """Write a chunk; the last one makes the file durable and closes it."""
    os.pwrite(fd, data, offset)
    if complete:
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _next_saved(directory: Path, keep: int) -> Path:
    """A new ``oldreplica.N`` in ``directory``, the oldest deleted so that ``keep`` remain
    with it (-1: all remain)."""
    numbers = sorted(
        int(p.name.partition(".")[2])
        for p in directory.glob("oldreplica.*")
        if p.name.partition(".")[2].isdigit()
    )
    number = (numbers[-1] if numbers else 0) + 1
    while keep > 0 and len(numbers) >= keep:
        shutil.rmtree(directory / f"oldreplica.{numbers.pop(0)}", ignore_errors=True)
    target = directory / f"oldreplica.{number}"
    target.mkdir()
    return target


async def rejoin_if_live_elsewhere(
    config: BrokerConfig, base: Path, settings: ReplicationConfig, journal_settings: JournalSettings
) -> NodeManager | None:
    """check-for-active-server: a primary whose node ID is live on another node (its backup
    took over) syncs from that node as its replica and becomes live once it hands back (a
    backup with allow-failback does as soon as the primary is in sync). None: no such node,
    the primary starts live on its own data. Returns the lock of the synced data."""
    node_id = await read_node_id(base / config.journal.directory)
    if node_id is None:
        return None
    probe = ReplicationBackup(config, base, settings, journal_settings, returning=node_id)
    live = await probe.find_live(node_id)
    if live is None:
        return None
    log.info(
        "check-for-active-server: node %s is live at %s:%d: this primary syncs from it and "
        "waits until it hands the role back",
        node_id,
        *live,
    )
    replica = ReplicationBackup(
        config, base, settings, journal_settings, returning=node_id, targets=[live]
    )
    return await replica.acquire()
