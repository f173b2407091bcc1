"""Journal settings: Artemis's ``journal-*`` parameters with Artemis's defaults."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from artemis_py.storage.ops import TRANSACTION_CONTROL, TRANSACTIONAL_RECORDS, Op

MiB = 1024 * 1024
KiB = 1024


@dataclass(frozen=True, slots=True)
class JournalSettings:
    """One journal's configuration (Artemis configuration-index, ``journal-*``).

    The native journal validates the numbers when it opens (``ValueError`` if wrong).
    """

    file_size: int = 10 * MiB  # journal-file-size
    min_files: int = 2  # journal-min-files: pre-allocated files kept ready
    pool_files: int = -1  # journal-pool-files: -1 = keep every reclaimed file for reuse
    buffer_size: int = 490 * KiB  # journal-buffer-size: max bytes one batch gathers
    buffer_timeout_ns: int = 3_333_333  # journal-buffer-timeout: how long writes wait for company
    datasync: bool = True  # journal-datasync: False = never fdatasync
    sync_transactional: bool = True  # journal-sync-transactional: commit/prepare/rollback
    sync_non_transactional: bool = True  # journal-sync-non-transactional: add/update/delete
    compact_min_files: int = 10  # journal-compact-min-files (0 disables auto compaction)
    compact_percentage: int = 30  # journal-compact-percentage

    def sync_for(self, ops: Iterable[Op]) -> bool:
        """Whether a batch waits for fdatasync when the caller leaves ``sync`` unset.

        As Artemis: a commit, prepare or rollback follows journal-sync-transactional, a plain
        add/update/delete journal-sync-non-transactional, and records inside a transaction
        never wait (their commit does).
        """
        sync = False
        for op in ops:
            kind = op[0]
            if kind in TRANSACTION_CONTROL:
                sync = sync or self.sync_transactional
            elif kind not in TRANSACTIONAL_RECORDS:
                sync = sync or self.sync_non_transactional
        return sync
