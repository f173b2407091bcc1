"""The duplicate-id cache: the last ``id-cache-size`` duplicate ids this node accepted.

A cluster bridge marks every message it forwards with a duplicate id (the sending node's
id and the message's id there). If the link breaks after the target stored a message but
before the sender heard so, the sender forwards it again after reconnecting; the target
finds the id here and confirms without storing it twice (Artemis's DuplicateIDCache).

The ids are journaled in the same journal batch as the message they came with (one submit,
which the journal writes all or nothing), so after a crash a message and its id are either
both present or both absent.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from artemis_py.storage import Op

DUPLICATE_ID_RECORD = 14


class DuplicateIDCache:
    """Accepted duplicate ids, oldest first, each with its journal record id (0: not stored)."""

    def __init__(self, size: int, *, persist: bool = True) -> None:
        self.size = max(size, 1)
        self.persist = persist
        self._ids: OrderedDict[bytes, int] = OrderedDict()

    def __contains__(self, dup_id: bytes) -> bool:
        return dup_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[bytes]:
        """The ids, oldest first (a node scaling down lists them in its Leaving frame)."""
        return iter(self._ids)

    def add(self, dup_id: bytes, record_id: int | None) -> list[Op]:
        """Remember ``dup_id``; the journal operations that record it (and evict the oldest).

        ``record_id`` None (a non-durable message, or persistence off): the id is kept in
        memory only, and only evictions of journaled ids are returned.
        """
        ops: list[Op] = []
        store = self.persist and record_id is not None
        self._ids[dup_id] = record_id if store and record_id is not None else 0
        if store:
            assert record_id is not None
            ops.append(Op.add(record_id, DUPLICATE_ID_RECORD, dup_id))
        while len(self._ids) > self.size:
            _, old_record = self._ids.popitem(last=False)
            if old_record:
                ops.append(Op.delete(old_record))
        return ops

    def discard(self, dup_id: bytes) -> None:
        """Forget an id whose message could not be stored after all."""
        self._ids.pop(dup_id, None)

    def recover(self, records: list[tuple[int, bytes]]) -> list[Op]:
        """Load journaled ids (record id, dup id); the deletes for any beyond the size."""
        for record_id, dup_id in sorted(records):
            self._ids[dup_id] = record_id
        ops = []
        while len(self._ids) > self.size:
            _, old_record = self._ids.popitem(last=False)
            ops.append(Op.delete(old_record))
        return ops
