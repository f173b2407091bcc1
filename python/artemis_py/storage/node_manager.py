"""The node manager: ``server.lock`` in the journal directory — node ID and data-directory lock.

As Artemis's FileLockNodeManager: the file holds the node's UUID, created on the first start
and kept forever, and it is locked (``flock``) while the node runs, so a second broker on the
same directory fails with :class:`~artemis_py.exceptions.DataDirectoryLockedError` instead of
corrupting the journal. The lock dies with the process, even on ``kill -9``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from artemis_py import _native


class NodeManager:
    """The lock on a data directory, held until the ``open_node_manager`` block ends."""

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
