"""The node manager: ``server.lock`` in the journal directory — node ID and data-directory lock.

As Artemis's FileLockNodeManager: the file holds the node's UUID, created on the first start
and kept forever, and it is locked (``flock``) while the node runs, so a second broker on the
same directory fails with :class:`~artemis_py.exceptions.DataDirectoryLockedError` instead of
corrupting the journal. The lock dies with the process, even on ``kill -9``.

A shared-store HA pair (:mod:`artemis_py.ha.shared_store`) polls the same lock with
:func:`try_lock` and keeps its activation state and a backup lock beside it
(``server.state``, ``server.backup.lock``; the Rust crate ``nodeid::shared_store`` says why
they are files of their own). Every call here does file I/O, so each runs in a worker thread.
"""

from __future__ import annotations

import enum
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from artemis_py import _native


class NodeManager:
    """The lock on a data directory, held until the ``open_node_manager`` block ends (or,
    for one from :func:`try_lock`, until :meth:`close`)."""

    def __init__(self, native: _native.NodeManager) -> None:
        self._native = native

    @property
    def node_id(self) -> str:
        """The node's UUID, lowercase and hyphenated; stable across restarts."""
        return self._native.node_id

    @property
    def directory(self) -> Path:
        return self._native.directory

    @property
    def locked(self) -> bool:
        """True while the lock is held (until the block ends)."""
        return self._native.locked

    def close(self) -> None:
        """Release the lock; idempotent (closing a descriptor does not block)."""
        self._native.close()

    def __repr__(self) -> str:
        return f"NodeManager(directory={str(self.directory)!r}, node_id={self.node_id!r})"


@asynccontextmanager
async def open_node_manager(directory: str | os.PathLike[str]) -> AsyncIterator[NodeManager]:
    """Lock ``directory`` (created if missing) and read or create its node ID."""
    native = await trio.to_thread.run_sync(_native.NodeManager.open, os.fspath(directory))
    try:
        yield NodeManager(native)
    finally:
        native.close()  # closing the descriptor releases the lock; it does not block


async def try_lock(directory: str | os.PathLike[str]) -> NodeManager | None:
    """The lock on ``directory`` (as :func:`open_node_manager`), or None while another
    process holds it. The caller releases it with :meth:`NodeManager.close`."""
    native = await trio.to_thread.run_sync(_native.NodeManager.try_open, os.fspath(directory))
    return None if native is None else NodeManager(native)


class ActivationState(enum.StrEnum):
    """What the last live node of a shared-store pair said about itself (``server.state``)."""

    NOT_STARTED = "not-started"  # no shared-store primary ever started here
    LIVE = "live"  # live, or died live: a waiting backup takes over once it gets the lock
    PAUSED = "paused"  # stopped on purpose: the backup stays passive
    FAILING_BACK = "failing-back"  # the primary is starting and wants its role back


async def read_activation_state(directory: str | os.PathLike[str]) -> ActivationState:
    text = await trio.to_thread.run_sync(_native.read_activation_state, os.fspath(directory))
    return ActivationState(text)


async def write_activation_state(directory: str | os.PathLike[str], state: ActivationState) -> None:
    """Write the state durably (fsync) before returning."""
    await trio.to_thread.run_sync(_native.write_activation_state, os.fspath(directory), state.value)


async def try_backup_lock(directory: str | os.PathLike[str]) -> _native.BackupLock | None:
    """The pair's backup lock, or None while another backup holds it."""
    return await trio.to_thread.run_sync(_native.BackupLock.try_acquire, os.fspath(directory))


async def read_node_id(directory: str | os.PathLike[str]) -> str | None:
    """The node ID ``server.lock`` holds, read without locking; None before the first start."""
    return await trio.to_thread.run_sync(_native.read_node_id, os.fspath(directory))
