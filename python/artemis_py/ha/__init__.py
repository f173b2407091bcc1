"""High availability: a node's side of a primary/backup pair (docs/high-availability.md).

* :mod:`.shared_store` -- ``<ha-policy><shared-store>``: two nodes on one data directory; the
  backup waits for the primary's lock and takes over.
* :mod:`.replication` -- ``<ha-policy><replication>``: the backup keeps a copy of the
  primary's journals, streamed record by record, and takes over when the primary is lost.

Each side has the same shape, which the node and ``artemis-py run`` use: ``acquire()`` waits
until the node may be live (and returns the lock on its data directory, if it holds one),
``activated()`` once it serves, ``watch_for_failback(step_down)``, ``release()``; ``policy``,
``role``, ``status`` and ``node_id`` for the management view.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TypeAlias

from artemis_py.config import BrokerConfig
from artemis_py.ha.replica import ReplicationBackup, rejoin_if_live_elsewhere
from artemis_py.ha.replication import ReplicationPrimary, warn_unimplemented
from artemis_py.ha.shared_store import SharedStore, open_shared_store
from artemis_py.storage.settings import JournalSettings

__all__ = [
    "PairSide",
    "ReplicationBackup",
    "ReplicationPrimary",
    "SharedStore",
    "open_pair",
    "replication_server",
]

log = logging.getLogger("artemis_py.ha")

PairSide: TypeAlias = SharedStore | ReplicationPrimary | ReplicationBackup


@asynccontextmanager
async def open_pair(
    config: BrokerConfig, base: Path, journal_settings: JournalSettings
) -> AsyncIterator[PairSide | None]:
    """The node's side of its pair (None: a primary-only node), released when the block
    ends; :meth:`acquire` is the caller's."""
    replication = config.ha_policy.replication
    if replication is not None and not config.persistence_enabled:
        log.warning(
            "ha-policy <replication> needs persistence-enabled true (the pair replicates its "
            "journal): this node runs as primary-only"
        )
    if replication is None or not config.persistence_enabled:
        async with open_shared_store(config, base) as store:
            yield store
        return
    warn_unimplemented(config, replication)
    side: PairSide
    if replication.backup:
        side = ReplicationBackup(config, base, replication, journal_settings)
    else:
        rejoin = partial(rejoin_if_live_elsewhere, config, base, replication, journal_settings)
        side = ReplicationPrimary(replication, rejoin)
    try:
        yield side
    finally:
        await side.release()


def replication_server(side: PairSide | None) -> ReplicationPrimary | None:
    """What serves a replica's link on this node: a replicating primary, or a replication
    backup once live (its restarted primary syncs from it); None for any other node."""
    if isinstance(side, (ReplicationPrimary, ReplicationBackup)):
        return side.replication_server()
    return None
