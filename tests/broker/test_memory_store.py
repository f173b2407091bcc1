"""The broker's persistence over the in-memory store: no disk, no sockets, no waiting.

A :class:`MemoryStore` keeps the journals' records under the journal's rules, so what
:class:`Persistence` writes can be read back by a second ``Persistence`` over the same store
(a restart in the same process), as the journals on disk are at a node's start.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from artemis_py.broker import records as r
from artemis_py.broker.journal_recovery import RecoveredState
from artemis_py.broker.message import Message
from artemis_py.broker.pending import Ticket
from artemis_py.broker.persistence import ID_BLOCK_SIZE, Persistence
from artemis_py.broker.store import MemoryJournal, MemoryStore
from artemis_py.config import RoutingType
from artemis_py.exceptions import DuplicateRecordError, RecordNotFoundError, TransactionError
from artemis_py.storage import Op

ANYCAST, MULTICAST = RoutingType.ANYCAST, RoutingType.MULTICAST
NODE = "0123456789abcdef"


@dataclass(frozen=True)
class Q:
    """A queue as the records of a message see it."""

    id: int
    durable: bool = True


def message(message_id: int, body: bytes = b"x", *, durable: bool = True) -> Message:
    return Message(message_id, "orders", body=body, routing_type=ANYCAST, durable=durable)


def restart(store: MemoryStore) -> tuple[Persistence, RecoveredState]:
    persistence = Persistence(store, NODE)
    return persistence, persistence.recover()


def bound(persistence: Persistence) -> tuple[Q, Q]:
    """An address with two durable queues, stored."""
    address = r.AddressRecord(persistence.next_id(), "orders", frozenset({ANYCAST}))
    persistence.store_address(address)
    queues = []
    for name in ("eu", "us"):
        spec = r.QueueSpec(persistence.next_id(), name, "orders", ANYCAST)
        persistence.store_queue(spec)
        queues.append(Q(spec.queue_id))
    return queues[0], queues[1]


# -- the store's journal rules ---------------------------------------------------------------


def test_a_memory_journal_refuses_what_the_journal_refuses() -> None:
    journal = MemoryJournal()
    journal.submit([Op.add(1, 10, b"a")])
    with pytest.raises(DuplicateRecordError):
        journal.submit([Op.add(1, 10, b"again")])
    with pytest.raises(RecordNotFoundError):
        journal.submit([Op.update(2, 11, b"u")])
    with pytest.raises(RecordNotFoundError):
        journal.submit([Op.delete(2)])
    with pytest.raises(TransactionError):
        journal.submit([Op.commit(5)])
    assert [(x.id, x.payload, x.updates) for x in journal.live()] == [(1, b"a", ())]


def test_a_submit_applies_all_or_nothing() -> None:
    journal = MemoryJournal()
    journal.submit([Op.add(1, 10, b"a")])
    with pytest.raises(RecordNotFoundError):
        journal.submit([Op.update(1, 11, b"u"), Op.delete(1), Op.add(3, 10, b"c"), Op.delete(9)])
    [record] = journal.live()
    assert (record.id, record.updates) == (1, ())
    journal.submit([Op.add(3, 10, b"c")])  # the refused submit's add is not there either
    assert [x.id for x in journal.live()] == [1, 3]


def test_transactions_count_once_committed() -> None:
    journal = MemoryJournal()
    journal.submit([Op.add(1, 10, b"a")])
    journal.submit([Op.add_tx(7, 2, 10, b"b"), Op.update_tx(7, 2, 11, b"ref"), Op.delete_tx(7, 1)])
    assert [x.id for x in journal.live()] == [1]
    with pytest.raises(DuplicateRecordError):  # added by an open transaction
        journal.submit([Op.add(2, 10, b"other")])
    journal.submit([Op.commit(7)])
    [record] = journal.live()
    assert (record.id, [u.payload for u in record.updates]) == (2, [b"ref"])
    journal.submit([Op.add_tx(8, 3, 10, b"c"), Op.rollback(8)])
    assert [x.id for x in journal.live()] == [2]


# -- persistence over it -------------------------------------------------------------------


def test_a_restart_recovers_addresses_queues_and_live_references() -> None:
    store = MemoryStore(messages=True)
    persistence = Persistence(store, NODE)
    eu, us = bound(persistence)
    first, second = message(persistence.next_id(), b"one"), message(persistence.next_id(), b"two")
    assert persistence.store_message(first, [eu, us], 5) == []  # done at once: no tickets
    persistence.store_message(second, [eu], 6)
    persistence.acknowledge([(first.message_id, us.id, False)])
    persistence.update_delivery_counts([(second.message_id, eu.id, 2)])
    handed_out = persistence.next_id()

    again, state = restart(store)
    assert [(a.name, a.routing_types) for a in state.addresses] == [("orders", {ANYCAST})]
    assert [(q.queue_id, q.name) for q in state.queues] == [(eu.id, "eu"), (us.id, "us")]
    refs = state.messages_by_queue
    assert set(refs) == {eu.id}
    assert [(m.message_id, m.body, count, offset) for m, count, offset, _ in refs[eu.id]] == [
        (first.message_id, b"one", 0, 5),
        (second.message_id, b"two", 2, 6),
    ]
    assert all(m.stored and m.ref_count == 1 for m, *_ in refs[eu.id])
    assert again.next_id() > handed_out  # ids continue above every one handed out


def test_references_to_a_deleted_queue_are_removed_at_start() -> None:
    store = MemoryStore(messages=True)
    persistence = Persistence(store, NODE)
    eu, us = bound(persistence)
    shared, only_us = message(persistence.next_id()), message(persistence.next_id())
    persistence.store_message(shared, [eu, us], 1)
    persistence.store_message(only_us, [us], 2)
    persistence.delete_queue(us.id)

    _, state = restart(store)
    assert [m.message_id for m, *_ in state.messages_by_queue[eu.id]] == [shared.message_id]
    live = {x.id: x for x in store.messages.live()}
    assert only_us.message_id not in live  # its last reference was us's: deleted
    acked = [r.decode_ref(u.payload) for u in live[shared.message_id].updates]
    assert acked == [eu.id, us.id, us.id]  # ADD_REF eu, ADD_REF us, ACK_REF us


def test_a_transaction_counts_once_committed_and_its_acks_with_it() -> None:
    store = MemoryStore(messages=True)
    persistence = Persistence(store, NODE)
    eu, _ = bound(persistence)
    old = message(persistence.next_id())
    persistence.store_message(old, [eu], 1)
    new = message(persistence.next_id())
    tx_id = persistence.next_id()
    persistence.commit([(new, [eu], 2)], [(old.message_id, eu.id, True), None], tx_id, [])

    _, state = restart(store)
    assert [m.message_id for m, *_ in state.messages_by_queue[eu.id]] == [new.message_id]


def test_a_queue_without_its_address_record_gets_it_again() -> None:
    store = MemoryStore(messages=True)
    persistence = Persistence(store, NODE)
    persistence.store_queue(r.QueueSpec(persistence.next_id(), "lost", "gone", MULTICAST))

    _, state = restart(store)
    [address] = state.addresses
    assert (address.name, address.routing_types, address.auto_created) == (
        "gone",
        {MULTICAST},
        True,
    )
    _, again = restart(store)  # stored: the next start finds the record
    assert [(a.id, a.name) for a in again.addresses] == [(address.id, "gone")]


def test_a_store_without_messages_keeps_the_bindings_only() -> None:
    """A node with persistence-enabled false: its messages are never encoded or kept."""
    store = MemoryStore()
    persistence = Persistence(store, NODE)
    assert not persistence.stores_messages
    assert persistence.storage is None
    eu, _ = bound(persistence)
    sent = message(persistence.next_id())
    assert persistence.store_message(sent, [eu], 1) == []
    assert not sent.stored
    assert persistence.commit([(message(persistence.next_id()), [eu], 2)], [], 99, []) == []
    persistence.update_delivery_counts([(sent.message_id, eu.id, 1)])
    assert store.messages.live() == []
    kinds = sorted(x.record_type for x in store.bindings.live())
    assert kinds == [r.ADDRESS_RECORD, r.QUEUE_RECORD, r.QUEUE_RECORD, r.ID_BLOCK_RECORD]
    _, state = restart(store)
    assert [q.name for q in state.queues] == ["eu", "us"]
    assert state.messages_by_queue == {}


def test_ids_reserve_blocks_ahead_and_keep_one_block_record() -> None:
    store = MemoryStore()
    persistence = Persistence(store, NODE)
    ids = [persistence.next_id() for _ in range(ID_BLOCK_SIZE + 10)]
    assert ids == list(range(1, ID_BLOCK_SIZE + 11))
    blocks = [x for x in store.bindings.live() if x.record_type == r.ID_BLOCK_RECORD]
    # the first block ends at 1 + size; the next was reserved half a block before it ran out
    assert [r.decode_id_block(b.payload) for b in blocks] == [2 * ID_BLOCK_SIZE + 1]
    again, _ = restart(store)
    assert again.next_id() == 2 * ID_BLOCK_SIZE + 2


class TicketingStore(MemoryStore):
    """A store in memory whose journals hand out tickets, as the journals on disk do."""

    def __init__(self) -> None:
        super().__init__(messages=True)
        self.numbers = {"bindings": 0, "messages": 0}

    def _ticket(self, journal: str) -> Ticket:
        self.numbers[journal] += 1
        return Ticket(Journal(journal), self.numbers[journal])

    def submit_bindings(self, ops: list[Op]) -> list[Ticket]:
        super().submit_bindings(ops)
        return [self._ticket("bindings")]

    def submit_messages(self, ops: list[Op], sync: bool | None, flush: bool) -> list[Ticket]:
        super().submit_messages(ops, sync, flush)
        return [self._ticket("messages")]


@dataclass(frozen=True)
class Journal:
    name: str

    def done(self, number: int) -> bool:
        return False

    async def wait(self, number: int) -> None:
        raise AssertionError("not waited for here")


def test_a_message_waits_for_the_latest_bindings_record_too() -> None:
    """A message may name a queue made a moment before, in the other journal."""
    persistence = Persistence(TicketingStore(), NODE)
    eu, _ = bound(persistence)  # an id block, an address, two queues: bindings tickets 1-4
    latest = Ticket(Journal("bindings"), 4)
    assert persistence.bindings_written() == [latest]
    sent = message(persistence.next_id())
    tickets = persistence.store_message(sent, [eu], 1)
    assert tickets == [Ticket(Journal("messages"), 1), latest]
    tickets.append(Ticket(Journal("other"), 9))  # callers extend what they get
    persistence.bindings_written().clear()
    made = persistence.store_queue(r.QueueSpec(persistence.next_id(), "ap", "orders", ANYCAST))
    latest = Ticket(Journal("bindings"), 5)
    assert made == [latest]
    made.append(Ticket(Journal("other"), 9))
    assert persistence.bindings_written() == [latest]
    acked = persistence.acknowledge([(sent.message_id, eu.id, True)])
    assert acked == [Ticket(Journal("messages"), 2), latest]
