"""Storage for the broker: the async facade over the native journal and node manager.

Theory of operation (details in :mod:`artemis_py.storage.journal`):

* Each journal has **one Rust writer thread** that turns queued appends into batches: one
  write and one fdatasync per batch (group commit).
* Trio tasks **submit on the event loop**; a submit validates, applies to the journal's
  in-memory state and queues, without I/O, so the loop never blocks and the order of
  submits on the loop is the order in the journal.
* Completion comes back through an **eventfd**: after every batch the writer pokes the
  journal's eventfd; the first waiting task (the leader) waits for it to become readable and
  wakes the tasks whose tickets completed (or hands them the writer's failure), then hands
  the role to a task still waiting.
* Opening (recovery), compaction and close run in worker threads
  (``trio.to_thread.run_sync``, never abandoned), with the GIL released.
* Paged messages live in **page stores**, one per address, with the same writer-thread and
  eventfd shape (:mod:`artemis_py.storage.paging`).
* ``server.lock`` in the journal directory holds the node ID and is locked while the node
  runs (:mod:`artemis_py.storage.node_manager`).

Use :func:`open_storage` in the broker, :func:`open_journal` / :func:`open_node_manager` on
their own in tools and tests.
"""

import collections.abc

from artemis_py._native import (
    CompactionReport,
    JournalStats,
    LoadReport,
    PreparedTransaction,
    Record,
    Records,
    Update,
)
from artemis_py.storage.broker_storage import Storage, open_storage
from artemis_py.storage.journal import Journal, open_journal
from artemis_py.storage.node_manager import NodeManager, open_node_manager
from artemis_py.storage.ops import Op
from artemis_py.storage.paging import (
    PagedRecord,
    PageStore,
    create_page_store,
    open_page_store,
    open_page_stores,
    read_page_file,
)
from artemis_py.storage.settings import JournalSettings

# A native sequence (len, indexing, slicing, iteration), so it passes isinstance checks too.
collections.abc.Sequence.register(Records)

__all__ = [
    "CompactionReport",
    "Journal",
    "JournalSettings",
    "JournalStats",
    "LoadReport",
    "NodeManager",
    "Op",
    "PageStore",
    "PagedRecord",
    "PreparedTransaction",
    "Record",
    "Records",
    "Storage",
    "Update",
    "create_page_store",
    "open_journal",
    "open_node_manager",
    "open_page_store",
    "open_page_stores",
    "open_storage",
    "read_page_file",
]
