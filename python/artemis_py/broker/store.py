"""Where :class:`~artemis_py.broker.persistence.Persistence` writes the broker's records.

A :class:`Store` has the two journals' ways in (bindings, messages) and what they loaded at
start. Two implementations, as nats-server has a fileStore and a memStore (and Artemis a
JournalStorageManager and a NullStorageManager):

* :class:`JournalStore`: the node's journals on disk (:mod:`artemis_py.storage`). A submit
  returns a :class:`Ticket` to wait for before the records are durable.
* :class:`MemoryStore`: journals in memory, with the journal's rules (an update or delete
  of a record that is not live is refused, a submit applies all or nothing). A node with
  ``persistence-enabled`` false uses it, keeping its addresses, queues and ids there, and
  no messages: they live in their queues only, as on Artemis. Tests give it
  ``messages=True`` to keep the messages journal too, so a broker can be made again from
  the same store in the same process (a restart without disk). Its writes are done at
  once: it hands out no tickets (:class:`~artemis_py.broker.pending.Ticket`).

``stores_messages`` says whether durable messages are written to a store at all: the
broker encodes a message for the journal only where it is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from artemis_py.broker.pending import Ticket
from artemis_py.exceptions import DuplicateRecordError, RecordNotFoundError, TransactionError

if TYPE_CHECKING:
    from artemis_py.storage import Op, Storage
    from artemis_py.storage.large_message_files import LargeMessageStore


class LoadedUpdate(Protocol):
    @property
    def record_type(self) -> int: ...
    @property
    def payload(self) -> bytes: ...


class LoadedRecord(Protocol):
    """A live record as a journal loaded it: its add, then its updates in order."""

    @property
    def id(self) -> int: ...
    @property
    def record_type(self) -> int: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def updates(self) -> Sequence[LoadedUpdate]: ...


class Store(Protocol):
    """The two journals of :class:`~artemis_py.broker.persistence.Persistence`."""

    @property
    def stores_messages(self) -> bool:
        """Whether durable messages are written here (their records are kept)."""
        ...

    @property
    def record_limit(self) -> int:
        """The largest message record: a bigger message is stored as a file."""
        ...

    @property
    def large_files(self) -> LargeMessageStore | None:
        """Where large messages' bodies go (None: not as files)."""
        ...

    @property
    def sync_transactional(self) -> bool:
        """``journal-sync-transactional``: whether a commit's batch is synced."""
        ...

    @property
    def storage(self) -> Storage | None:
        """The journals on disk (their directory and statistics), if any."""
        ...

    def submit_bindings(self, ops: list[Op]) -> list[Ticket]:
        """Append ``ops`` to the bindings journal (synced)."""
        ...

    def submit_messages(self, ops: list[Op], sync: bool | None, flush: bool) -> list[Ticket]:
        """Append ``ops`` to the messages journal (``sync`` None: the journal's setting)."""
        ...

    def messages_written(self) -> list[Ticket]:
        """Done once every messages-journal record submitted so far is written."""
        ...

    def take_loaded(self) -> tuple[Sequence[LoadedRecord], Sequence[LoadedRecord]]:
        """The live records (bindings, messages) found at start; once."""
        ...


class JournalStore:
    """The node's two journals on disk, and its large-message files."""

    stores_messages = True

    def __init__(self, storage: Storage, large_files: LargeMessageStore | None = None) -> None:
        self.storage = storage
        self.large_files = large_files
        # Half a journal file: the record's updates and other records of its batch fit too.
        self.record_limit = storage.messages.settings.file_size // 2
        self.sync_transactional = storage.messages.settings.sync_transactional

    def submit_bindings(self, ops: list[Op]) -> list[Ticket]:
        journal = self.storage.bindings
        return [Ticket(journal, journal.submit(ops, True))]

    def submit_messages(self, ops: list[Op], sync: bool | None, flush: bool) -> list[Ticket]:
        journal = self.storage.messages
        return [Ticket(journal, journal.submit(ops, sync, flush=flush))]

    def messages_written(self) -> list[Ticket]:
        journal = self.storage.messages
        return [Ticket(journal, journal.last_ticket)] if journal.last_ticket else []

    def take_loaded(self) -> tuple[Sequence[LoadedRecord], Sequence[LoadedRecord]]:
        bindings, messages = self.storage.bindings.loaded, self.storage.messages.loaded
        if bindings is None or messages is None:
            raise RuntimeError("recover() runs once, on the reports of freshly opened journals")
        # The model takes what it needs; the reports' copies of a backlog would only use memory.
        self.storage.bindings.loaded = self.storage.messages.loaded = None
        return bindings.records, messages.records


@dataclass(frozen=True, slots=True)
class MemoryUpdate:
    record_type: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    id: int
    record_type: int
    payload: bytes
    updates: tuple[MemoryUpdate, ...] = ()


@dataclass(slots=True)
class _Tx:
    ops: list[Op] = field(default_factory=list)
    added: set[int] = field(default_factory=set)
    prepared: bool = False


class MemoryJournal:
    """One journal's live records in memory, under the journal's submit rules."""

    def __init__(self) -> None:
        self.records: dict[int, MemoryRecord] = {}
        self._txs: dict[int, _Tx] = {}

    def submit(self, ops: list[Op]) -> None:
        """Apply ``ops`` in order, all or none: a refused op undoes the ones before it."""
        undo: list[Callable[[], object]] = []
        try:
            for op in ops:
                self._apply(op, undo)
        except BaseException:
            for step in reversed(undo):
                step()
            raise

    def live(self) -> list[MemoryRecord]:
        """The live records, by id (as a journal loads them)."""
        return [self.records[i] for i in sorted(self.records)]

    def _apply(self, op: Op, undo: list[Callable[[], object]]) -> None:
        kind = op[0]
        if kind in ("add", "update", "delete"):
            self._write(op[1:], kind, undo)
        elif kind in ("add_tx", "update_tx", "delete_tx"):
            tx_id, record_id = op[1], op[2]
            if tx_id not in self._txs:
                self._txs[tx_id] = _Tx()
                undo.append(lambda: self._txs.pop(tx_id))
            tx = self._txs[tx_id]
            if tx.prepared:
                raise TransactionError(f"transaction {tx_id} is prepared")
            if kind == "add_tx":
                self._addable(record_id)
                tx.added.add(record_id)
                undo.append(lambda: tx.added.discard(record_id))
            elif record_id not in self.records and record_id not in tx.added:
                raise RecordNotFoundError(f"record {record_id} is not live")
            tx.ops.append(op)
            undo.append(tx.ops.pop)
        elif kind == "prepare":
            prepared = self._txs.setdefault(op[1], _Tx())
            if prepared.prepared:
                raise TransactionError(f"transaction {op[1]} is already prepared")
            prepared.prepared = True
            undo.append(lambda: setattr(prepared, "prepared", False))
        else:  # commit, rollback
            done = self._txs.pop(op[1], None)
            if done is None:
                raise TransactionError(f"transaction {op[1]} is unknown or finished")
            undo.append(lambda: self._txs.__setitem__(op[1], done))
            if kind == "commit":
                for tx_op in done.ops:
                    self._write(tx_op[2:], tx_op[0].removesuffix("_tx"), undo)

    def _write(self, fields: tuple[Any, ...], kind: str, undo: list[Callable[[], object]]) -> None:
        record_id: int = fields[0]
        old = self.records.get(record_id)
        if kind == "add":
            self._addable(record_id)
            self.records[record_id] = MemoryRecord(record_id, fields[1], bytes(fields[2]))
            undo.append(lambda: self.records.pop(record_id))
            return
        if old is None:
            raise RecordNotFoundError(f"record {record_id} is not live")
        undo.append(lambda: self.records.__setitem__(record_id, old))
        if kind == "delete":
            del self.records[record_id]
        else:
            update = MemoryUpdate(fields[1], bytes(fields[2]))
            self.records[record_id] = MemoryRecord(
                record_id, old.record_type, old.payload, (*old.updates, update)
            )

    def _addable(self, record_id: int) -> None:
        if record_id in self.records or any(record_id in t.added for t in self._txs.values()):
            raise DuplicateRecordError(f"record {record_id} exists")


class MemoryStore:
    """Journals in memory (see the module docstring); ``messages``: keep the messages
    journal too (tests), not only the bindings."""

    record_limit = 0
    large_files = None
    sync_transactional = False
    storage = None

    def __init__(self, *, messages: bool = False) -> None:
        self.stores_messages = messages
        self.bindings = MemoryJournal()
        self.messages = MemoryJournal()

    def submit_bindings(self, ops: list[Op]) -> list[Ticket]:
        self.bindings.submit(ops)
        return []

    def submit_messages(self, ops: list[Op], sync: bool | None, flush: bool) -> list[Ticket]:
        if self.stores_messages:
            self.messages.submit(ops)
        return []

    def messages_written(self) -> list[Ticket]:
        return []

    def take_loaded(self) -> tuple[Sequence[LoadedRecord], Sequence[LoadedRecord]]:
        return self.bindings.live(), self.messages.live()
