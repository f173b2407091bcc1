"""Shared-store HA: which node of a primary/backup pair on one data directory is live.

# Theory of operation

The flock on ``server.lock`` is the right to be live: a node opens its journals only while
it holds it, so the two nodes never write the journal at once. Beside it (Rust crate
``nodeid::shared_store``) the one-byte ``server.state`` says what the last live node meant
when it let go, and ``server.backup.lock`` keeps a second backup in line.

* **Primary.** Writes ``failing-back`` (its request to be live), then polls the lock. It is
  free on a first start; held while a backup is live, until that backup steps down.
  Once its node serves clients it writes ``live``.
* **Backup.** Takes the backup lock, then polls: it tries the live lock only while the
  state is ``live``, and, having it, reads the state again. ``live`` with the lock free
  means the live node died (or stopped with failover-on-shutdown): it takes over, recovering
  the journal as a restart would, and only then starts its acceptors. ``paused`` (a graceful
  stop) and ``failing-back`` (a starting primary) leave the lock alone.
* **Stopping.** A live node that stops writes ``paused`` before it unlocks, unless
  failover-on-shutdown says its backup should take over. A live backup that allows
  failback watches for ``failing-back`` and then stops without pausing, so its primary
  gets the lock; with restart-backup it waits as backup again (``artemis-py run``).

Every wait is a poll (:data:`POLL_INTERVAL`) through a worker thread with ``LOCK_NB``: the
event loop never blocks, a signal cancels a waiting node at once, and NFS needs no
lock-waiting support of its own. A crash releases the lock at once on a local file
system, and after the NFS lease time on NFSv4.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from artemis_py import __version__, _native
from artemis_py.config import BrokerConfig, SharedStoreConfig
from artemis_py.storage.node_manager import (
    ActivationState,
    NodeManager,
    read_activation_state,
    read_node_id,
    try_backup_lock,
    try_lock,
    write_activation_state,
)

log = logging.getLogger("artemis_py.ha")

# How often a waiting node tries the live lock: the takeover latency it adds, at the cost
# of one open and flock attempt (one NFS round trip) each time.
POLL_INTERVAL = 0.1
# How often a live backup that allows failback looks for its primary's request (Artemis
# checks every second).
FAILBACK_CHECK_INTERVAL = 0.5


class SharedStore:
    """One node's side of a shared-store pair on ``directory`` (the journal directory)."""

    def __init__(self, directory: Path, settings: SharedStoreConfig) -> None:
        self.directory = directory
        self.settings = settings
        self.node_manager: NodeManager | None = None  # the live lock, once acquired
        self.live = False  # serving clients
        self.failed_back = False  # this live backup stepped down for its primary
        self.node_id: str | None = None  # server.lock's, for a waiting node's management view
        self._backup_lock: _native.BackupLock | None = None
        self._state_before: ActivationState | None = None  # what a primary overwrote

    policy = "shared-store"

    @property
    def role(self) -> str:
        return "backup" if self.settings.backup else "primary"

    @property
    def status(self) -> str:
        """``live``, or what the node waits for: ``waiting`` (a backup) or ``starting``."""
        if self.live:
            return "live"
        return "waiting" if self.settings.backup and self.node_manager is None else "starting"

    async def acquire(self) -> NodeManager:
        """Wait (as long as it takes) until this node may be live; the live lock."""
        if self.settings.backup:
            await self._wait_as_backup()
        else:
            await self._wait_as_primary()
        assert self.node_manager is not None
        return self.node_manager

    async def _wait_as_primary(self) -> None:
        log.info("AMQ221006: waiting to obtain the primary lock on %s", self.directory)
        self._state_before = await read_activation_state(self.directory)
        await write_activation_state(self.directory, ActivationState.FAILING_BACK)
        if not await self._try_lock():
            log.info(
                "AMQ221034: waiting indefinitely to obtain the primary lock: the backup is "
                "live and holds it; it gives it back if it allows failback"
            )
            await poll(self._try_lock, POLL_INTERVAL)
        log.info("AMQ221035: the primary obtained the primary lock")

    async def _wait_as_backup(self) -> None:
        log.info("AMQ221032: waiting to become the backup node of %s", self.directory)
        await poll(self._try_backup_lock, POLL_INTERVAL)  # another backup may wait first
        log.info("AMQ221033: got the backup lock")
        node_id = self.node_id = await read_node_id(self.directory)
        log.info(
            "AMQ221109: artemis-py backup server version %s [%s] started; waiting for its "
            "primary to fail before it becomes live (no acceptor is open meanwhile)",
            __version__,
            node_id or "node ID not created yet",
        )
        await poll(self._try_take_over, POLL_INTERVAL)

    async def _try_lock(self) -> bool:
        self.node_manager = await try_lock(self.directory)
        return self.node_manager is not None

    async def _try_backup_lock(self) -> bool:
        self._backup_lock = await try_backup_lock(self.directory)
        return self._backup_lock is not None

    async def _try_take_over(self) -> bool:
        """Hold the live lock if the primary died or failed over; False to wait on."""
        if await read_activation_state(self.directory) is not ActivationState.LIVE:
            return False  # paused, failing back or never started: leave the lock alone
        if self.node_id is None:  # a primary ran here since this backup started
            self.node_id = await read_node_id(self.directory)
        if not await self._try_lock():
            return False  # the live node is alive
        # The state again, under the lock: the live node may have paused and let go
        # between the first read and our lock.
        if await read_activation_state(self.directory) is ActivationState.LIVE:
            return True
        self._unlock()
        return False

    def _unlock(self) -> None:
        if self.node_manager is not None:
            self.node_manager.close()
            self.node_manager = None

    async def activated(self) -> None:
        """The node serves clients now: say so in the state (a primary) and the log."""
        self.live = True
        if not self.settings.backup:
            await write_activation_state(self.directory, ActivationState.LIVE)
            log.info("AMQ221007: server is now active (shared-store primary)")
            return
        log.info("AMQ221010: backup server is now active: it took over its primary's journal")
        if self._backup_lock is not None:  # a new backup may wait for this node now
            self._backup_lock.close()
            self._backup_lock = None

    async def watch_for_failback(self, step_down: Callable[[], None]) -> None:
        """A live backup that allows failback: ``step_down()`` once its primary asks."""
        if not (self.settings.backup and self.settings.allow_failback):
            return
        await poll(self._failback_requested, FAILBACK_CHECK_INTERVAL)
        self.failed_back = True
        log.info(
            "AMQ221008: the primary wants to restart: this live backup stops and hands the "
            "journal back%s",
            "; it then waits as backup again" if self.settings.restart_backup else "",
        )
        step_down()

    async def _failback_requested(self) -> bool:
        return await read_activation_state(self.directory) is ActivationState.FAILING_BACK

    async def release(self) -> None:
        """Let go: pause (unless failing over or back) or undo a primary's request."""
        try:
            with trio.CancelScope(shield=True):
                await self._write_final_state()
        finally:
            self._unlock()
            if self._backup_lock is not None:
                self._backup_lock.close()
                self._backup_lock = None
            self.live = False

    async def _write_final_state(self) -> None:
        if self.live and self.node_manager is not None:
            if not (self.settings.failover_on_shutdown or self.failed_back):
                # Artemis's pause: the backup must not take over a node stopped on purpose.
                await write_activation_state(self.directory, ActivationState.PAUSED)
        elif self._state_before is not None:
            # A primary stopped before it served: withdraw its failback request.
            await write_activation_state(self.directory, self._state_before)


async def poll(check: Callable[[], Awaitable[bool]], interval: float) -> None:
    """Call ``check`` every ``interval`` seconds until it is true. Another process's lock
    and file have no event to wait on; cancelling the caller ends the poll at once."""
    while not await check():  # noqa: ASYNC110 - no event exists across processes
        await trio.sleep(interval)


@asynccontextmanager
async def open_shared_store(config: BrokerConfig, base: Path) -> AsyncIterator[SharedStore | None]:
    """The node's shared-store side (None unless ``config`` is a persistent shared-store
    policy), released when the block ends; :meth:`SharedStore.acquire` is the caller's."""
    settings = config.ha_policy.shared_store
    if settings is None:
        yield None
        return
    if not config.persistence_enabled:
        log.warning(
            "ha-policy <shared-store> needs persistence-enabled true (the pair shares its "
            "journal): this node runs as primary-only"
        )
        yield None
        return
    store = SharedStore(base / config.journal.directory, settings)
    try:
        yield store
    finally:
        await store.release()
