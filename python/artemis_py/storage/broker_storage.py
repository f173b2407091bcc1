"""The broker's storage: the node manager plus the messages and bindings journals."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from artemis_py.storage.journal import Journal, open_journal
from artemis_py.storage.node_manager import NodeManager, open_node_manager
from artemis_py.storage.settings import JournalSettings, MiB

# Artemis (JournalStorageManager.init) opens the bindings journal with fixed 1 MiB files and
# min-files 2 ("activemq-bindings-N.bindings"); the other settings are the configured ones.
BINDINGS_FILE_SIZE = 1 * MiB
BINDINGS_MIN_FILES = 2


@dataclass(frozen=True, slots=True)
class Storage:
    """What a running broker persists to."""

    node_id: str
    messages: Journal  # journal-directory: messages and their references
    bindings: Journal  # bindings-directory: addresses, queues, id blocks


def bindings_settings(settings: JournalSettings) -> JournalSettings:
    return dataclasses.replace(settings, file_size=BINDINGS_FILE_SIZE, min_files=BINDINGS_MIN_FILES)


@asynccontextmanager
async def open_storage(
    journal_directory: str | os.PathLike[str],
    bindings_directory: str | os.PathLike[str],
    settings: JournalSettings | None = None,
    *,
    node_manager: NodeManager | None = None,
) -> AsyncIterator[Storage]:
    """Lock the journal directory (``server.lock``), then open and recover both journals.

    On exit the journals are closed first and the lock is released last. A ``node_manager``
    already holding the lock (a shared-store node's, :mod:`artemis_py.ha.shared_store`) is
    used instead, and left to its owner to release.
    """
    settings = settings if settings is not None else JournalSettings()
    async with AsyncExitStack() as stack:
        node = node_manager
        if node is None:
            node = await stack.enter_async_context(open_node_manager(journal_directory))
        messages = await stack.enter_async_context(open_journal(journal_directory, settings))
        bindings = await stack.enter_async_context(
            open_journal(
                bindings_directory,
                bindings_settings(settings),
                file_prefix="activemq-bindings",
                file_extension="bindings",
            )
        )
        yield Storage(node.node_id, messages, bindings)
