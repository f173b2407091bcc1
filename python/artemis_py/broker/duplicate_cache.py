"""Duplicate ids: the cluster bridges' cache and the per-address caches of client sends.

Bridges
-------
A cluster bridge marks every message it forwards with a duplicate id (the sending node's
id and the message's id there). If the link breaks after the target stored a message but
before the sender heard so, the sender forwards it again after reconnecting; the target
finds the id in :class:`DuplicateIDCache` and confirms without storing it twice (Artemis's
DuplicateIDCache). The ids are journaled (DUPLICATE_ID_RECORD) in the same journal batch as
the message they came with (one submit, which the journal writes all or nothing), so after
a crash a message and its id are either both present or both absent.

Client sends (:class:`ClientDuplicates`)
----------------------------------------
A client that cannot tell whether a send reached the node (the connection broke before the
receipt) sends it again with the same ``_AMQ_DUPL_ID`` header; the node drops the second
copy (Artemis's duplicate detection, docs/duplicate-detection.md). Theory of operation:

* One cache per address (the address the message is sent to), holding its last
  ``id-cache-size`` accepted ids (the address setting; 0 turns detection off there).
  Oldest first; the oldest goes when the cache is full.
* An id is *reserved* when a send (or a transaction's commit) asks for it, by a
  :class:`Claim`. A second send of a reserved or accepted id is a duplicate. The claim
  *accepts* its ids when the journal records of its messages are submitted: each id then
  enters its cache, journaled (CLIENT_DUPLICATE_ID_RECORD: address and id) in the same
  journal transaction as its message when the message itself is journaled and
  ``persist-id-cache`` is on (in memory only otherwise). A claim whose records are never
  submitted (refused, abandoned, its connection gone) is released: its ids are free again.
* Recovery loads the journaled ids per address, oldest first (record ids grow), keeping
  each address's size; the records of the others are deleted.
* Scale-down hands the accepted ids to the target (:meth:`ClientDuplicates.snapshot`,
  :meth:`ClientDuplicates.adopt`), which journals them as its own.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING

from artemis_py.broker.records import (
    CLIENT_DUPLICATE_ID_RECORD,
    decode_client_id,
    duplicate_id_op,
    encode_client_id,
)
from artemis_py.storage import Op

if TYPE_CHECKING:
    from artemis_py.broker.message import Message
    from artemis_py.broker.paging import Placement
    from artemis_py.broker.pending import Ticket
    from artemis_py.broker.persistence import Persistence
    from artemis_py.config import BrokerConfig

#: The header (a message property) whose value a client's send is recognised by.
DUPLICATE_ID_HEADER = "_AMQ_DUPL_ID"


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

    def remember(self, dup_id: bytes, record_id: int) -> list[int]:
        """Keep ``dup_id`` (journaled as ``record_id``, 0: not); the record ids of the
        journaled ids this evicts, oldest first."""
        self._ids[dup_id] = record_id
        evicted = []
        while len(self._ids) > self.size:
            _, old_record = self._ids.popitem(last=False)
            if old_record:
                evicted.append(old_record)
        return evicted

    def add(self, dup_id: bytes, record_id: int | None) -> list[Op]:
        """Remember ``dup_id``; the journal operations that record it (and evict the oldest).

        ``record_id`` None (a non-durable message, or persistence off): the id is kept in
        memory only, and only evictions of journaled ids are returned.
        """
        ops: list[Op] = []
        store = self.persist and record_id is not None
        if store:
            assert record_id is not None
            ops.append(duplicate_id_op(record_id, dup_id))
        evicted = self.remember(dup_id, record_id if store and record_id is not None else 0)
        return ops + [Op.delete(old) for old in evicted]

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


# -- client sends -----------------------------------------------------------------------


def duplicate_id(message: Message) -> str | None:
    """The client's duplicate id of ``message`` (its first ``_AMQ_DUPL_ID`` property)."""
    for key, value in message.properties:
        if key == DUPLICATE_ID_HEADER:
            return value
    return None


#: (address, duplicate id, message) of one id a send asks for.
Entry = tuple[str, str, "Message"]

_RESERVED, _ACCEPTED, _RELEASED = "reserved", "accepted", "released"


class Claim:
    """The duplicate ids of one send or one transaction: reserved, then accepted together
    with the journal records of their messages, or released (see the module docstring)."""

    __slots__ = ("_owner", "_registry", "entries", "state")

    def __init__(
        self, registry: ClientDuplicates, entries: dict[tuple[str, str], list[int]], owner: object
    ) -> None:
        self._registry = registry
        self._owner = owner
        self.entries = entries  # (address, id) -> the ids of the messages that carry it
        self.state = _RESERVED

    @property
    def owner(self) -> object:
        return self._owner

    def accept(self, tx_id: int, journaled: set[int]) -> list[Op]:
        """The ids enter their caches; the journal ops (part of transaction ``tx_id``) that
        record those whose message is journaled (message ids in ``journaled``) and delete
        the evicted ones."""
        if self.state != _RESERVED:
            return []
        self.state = _ACCEPTED
        return self._registry.accept(self, tx_id, journaled)

    def release(self) -> None:
        """The send did not happen after all: its ids are free again (idempotent)."""
        if self.state == _RESERVED:
            self._registry.unreserve(self)
        elif self.state == _ACCEPTED:
            self._registry.forget(self)
        self.state = _RELEASED

    def joining(
        self,
        submit: Callable[[list[Op]], list[Ticket]],
        abandon: Callable[[], None],
        tx_id: int,
        sends: Sequence[tuple[Message, object]],
        placements: Sequence[Placement],
    ) -> tuple[partial[list[Ticket]], partial[None]]:
        """A transaction's commit ``submit`` (of its ops) and its ``abandon`` (the journal
        records will never be submitted), with this claim's part: the ids are accepted in
        the same submit as the messages, journaled for the messages the commit journals;
        released when the journal refuses the submit or the commit is abandoned."""
        journaled = {
            message.message_id
            for (message, _), placement in zip(sends, placements, strict=True)
            if message.durable and (placement.paged or any(q.durable for q in placement.memory))
        }
        return partial(self._store, submit, tx_id, journaled), partial(self._abandoned, abandon)

    def _store(
        self,
        submit: Callable[[list[Op]], list[Ticket]],
        tx_id: int,
        journaled: set[int],
        ops: list[Op],
    ) -> list[Ticket]:
        try:
            return submit(ops + self.accept(tx_id, journaled))
        except BaseException:
            self.release()
            raise

    def _abandoned(self, abandon: Callable[[], None]) -> None:
        try:
            abandon()
        finally:
            self.release()


class ClientDuplicates:
    """The per-address duplicate-id caches of client sends (see the module docstring).

    ``size_for(address)`` is the address's ``id-cache-size``; ``next_id`` hands out journal
    record ids; ``persist`` is ``persist-id-cache`` (and persistence being on).
    """

    def __init__(
        self, size_for: Callable[[str], int], next_id: Callable[[], int], *, persist: bool
    ) -> None:
        self.size_for = size_for
        self.next_id = next_id
        self.persist = persist
        self.caches: dict[str, DuplicateIDCache] = {}
        self._reserved: dict[tuple[str, str], Claim] = {}

    @classmethod
    def of(cls, config: BrokerConfig, persistence: Persistence) -> ClientDuplicates:
        """A node's caches: sizes from its address settings, journaled when
        ``persist-id-cache`` (and persistence) is on."""

        def size_for(address: str) -> int:
            settings = config.address_settings_for(address)
            return settings.id_cache_size

        persist = config.persist_id_cache and persistence.stores_messages
        return cls(size_for, persistence.next_id, persist=persist)

    def enabled(self, address: str) -> bool:
        """Whether sends to ``address`` are checked (its ``id-cache-size`` is not 0)."""
        return self.size_for(address) > 0

    def known(self, address: str, dup_id: str) -> bool:
        """Whether ``dup_id`` was accepted on ``address`` or is reserved by a send under way."""
        cache = self.caches.get(address)
        return (cache is not None and dup_id.encode() in cache) or (
            address,
            dup_id,
        ) in self._reserved

    def claim(self, entries: Iterable[Entry], owner: object) -> Claim | None:
        """Reserve the ids of ``entries`` (those of addresses with detection on) for
        ``owner``; None when any is a duplicate (accepted or reserved): then nothing is
        reserved. An empty claim when no entry is checked.

        An id on several messages of ``entries`` to one address (a transaction) is one
        entry: Artemis adds a transaction's ids to the cache at commit, so its own messages
        never see each other's; a producer may mark every message of a transaction with
        the transaction's id (design 16, the Spark sink).
        """
        wanted: dict[tuple[str, str], list[int]] = {}
        for address, dup_id, message in entries:
            if not self.enabled(address):
                continue
            key = (address, dup_id)
            if key not in wanted:
                if self.known(address, dup_id):
                    return None
                wanted[key] = []
            wanted[key].append(message.message_id)
        claim = Claim(self, wanted, owner)
        for key in wanted:
            self._reserved[key] = claim
        return claim

    def release_owner(self, owner: object) -> None:
        """``owner`` is gone (a closed connection): its claims still reserved are released
        (their records were never submitted)."""
        for claim in {c for c in self._reserved.values() if c.owner is owner}:
            claim.release()

    # -- what a claim does ---------------------------------------------------------------

    def _cache(self, address: str) -> DuplicateIDCache:
        cache = self.caches.get(address)
        if cache is None:
            cache = self.caches[address] = DuplicateIDCache(self.size_for(address))
        return cache

    def unreserve(self, claim: Claim) -> None:
        for key in claim.entries:
            if self._reserved.get(key) is claim:
                del self._reserved[key]

    def forget(self, claim: Claim) -> None:
        for address, dup_id in claim.entries:
            cache = self.caches.get(address)
            if cache is not None:
                cache.discard(dup_id.encode())

    def accept(self, claim: Claim, tx_id: int, journaled: set[int]) -> list[Op]:
        self.unreserve(claim)
        added: dict[int, Op] = {}
        evicted: list[int] = []
        for (address, dup_id), message_ids in claim.entries.items():
            record_id = 0
            if self.persist and not journaled.isdisjoint(message_ids):
                record_id = self.next_id()
                payload = encode_client_id(address, dup_id)
                added[record_id] = Op.add_tx(tx_id, record_id, CLIENT_DUPLICATE_ID_RECORD, payload)
            evicted += self._cache(address).remember(dup_id.encode(), record_id)
        # An id this claim added and at once evicted (a cache smaller than the claim) is
        # neither added nor deleted.
        deletes = [Op.delete_tx(tx_id, r) for r in evicted if added.pop(r, None) is None]
        return list(added.values()) + deletes

    # -- recovery and scale-down ---------------------------------------------------------

    def recover(self, records: Sequence[tuple[int, bytes]]) -> list[Op]:
        """Load the journaled ids (record id, payload), oldest first; the deletes of the
        records beyond each address's size (or of an address whose detection is off)."""
        deletes: list[Op] = []
        for record_id, payload in sorted(records):
            address, dup_id = decode_client_id(payload)
            if not self.enabled(address):
                deletes.append(Op.delete(record_id))
                continue
            evicted = self._cache(address).remember(dup_id.encode(), record_id)
            deletes += [Op.delete(r) for r in evicted]
        return deletes

    def snapshot(self) -> list[tuple[str, tuple[str, ...]]]:
        """Every address's accepted ids, oldest first (what a node scaling down hands over)."""
        return [
            (address, tuple(dup_id.decode() for dup_id in cache))
            for address, cache in self.caches.items()
            if len(cache)
        ]

    def adopt(self, address: str, ids: Iterable[str]) -> tuple[int, list[Op]]:
        """Accept ``ids`` of ``address`` that a node scaling down to this one had accepted;
        how many were new here, and the journal ops that record them (when persisted) and
        delete evicted ones."""
        if not self.enabled(address):
            return 0, []
        cache = self._cache(address)
        ops: list[Op] = []
        added = 0
        # The newest ``size`` only: the others would be evicted at once.
        for dup_id in list(ids)[-cache.size :]:
            key = dup_id.encode()
            if key in cache:
                continue
            added += 1
            record_id = self.next_id() if self.persist else 0
            if record_id:
                payload = encode_client_id(address, dup_id)
                ops.append(Op.add(record_id, CLIENT_DUPLICATE_ID_RECORD, payload))
            ops += [Op.delete(r) for r in cache.remember(key, record_id)]
        return added, ops
