"""Acknowledgements in the journal: the ones a client waits for are synced, the others are
written at once and ride on the next synced batch (as Artemis appends message deletes
without sync). And the records a pass of the loop holds to its end: its unawaited
acknowledgements and, when the writer would be woken only then anyway, its sends."""

from __future__ import annotations

import time
from pathlib import Path

import trio

from artemis_py.broker.broker import Broker
from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.broker.store import JournalStore
from artemis_py.config import RoutingType
from artemis_py.config.parse import default_config
from artemis_py.exceptions import JournalFailedError
from artemis_py.storage import JournalSettings, Storage, open_storage

# Non-sync writes would wait this long for company: acknowledgements must not.
SETTINGS = JournalSettings(buffer_timeout_ns=30 * 10**9)


class Collector:
    selector = None

    def __init__(self) -> None:
        self.refs: list[MessageReference] = []

    def has_credit(self) -> bool:
        return True

    def deliver(self, ref: MessageReference) -> None:
        self.refs.append(ref)


def consumed_queue(storage: Storage) -> tuple[Broker, Queue, Collector]:
    """A broker on ``storage`` with a queue "q" and a consumer on it."""
    broker = Broker(default_config(), Persistence(JournalStore(storage), storage.node_id))
    broker.recover()
    queue = broker.create_queue("q", "q", RoutingType.ANYCAST)
    consumer = Collector()
    queue.add_consumer(consumer)
    return broker, queue, consumer


def durable_message(broker: Broker, n: int) -> Message:
    return Message(
        broker.persistence.next_id(),
        "q",
        body=b"m%d" % n,
        routing_type=RoutingType.ANYCAST,
        durable=True,
    )


def counting(storage: Storage) -> list[list[str]]:
    """The op kinds of each submit to the messages journal from now on."""
    journal = storage.messages
    batches: list[list[str]] = []
    submit = journal.submit

    def counted(ops, sync=None, *, flush=False):  # type: ignore[no-untyped-def]
        batches.append([op[0] for op in ops])
        return submit(ops, sync, flush=flush)

    journal.submit = counted  # type: ignore[method-assign]
    return batches


def written_in_the_pass(storage: Storage, before: int) -> bool:
    """Whether the messages journal wrote something beyond ``before`` records while this
    pass goes on (no checkpoint: waiting here does not end the pass)."""
    journal = storage.messages
    deadline = time.monotonic() + 0.5
    while journal.stats().records_written == before and time.monotonic() < deadline:
        time.sleep(0.001)  # (not trio.sleep: a checkpoint would end the pass)
    return journal.stats().records_written > before


async def test_only_awaited_acknowledgements_are_synced(tmp_path: Path) -> None:
    config = default_config()
    async with open_storage(tmp_path / "journal", tmp_path / "bindings", SETTINGS) as storage:
        broker, queue, consumer = consumed_queue(storage)
        for n in range(2):
            await broker.send(durable_message(broker, n), [queue]).settled()
        journal = storage.messages
        first, second = consumer.refs

        before = journal.stats()
        assert not broker.acknowledge([first], awaited=False).tickets  # nothing to wait for
        with trio.fail_after(5):  # written at once (no buffer timeout), without a sync
            # Polls: the writer thread's counters have no event to wait for.
            while journal.stats().records_written == before.records_written:  # noqa: ASYNC110
                await trio.sleep(0.001)
        assert journal.stats().syncs == before.syncs

        pending = broker.acknowledge([second])
        await broker.persistence.wait(pending.tickets)
        assert journal.stats().syncs == before.syncs + 1
        assert queue.message_count == 0

    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        broker = Broker(config, Persistence(JournalStore(storage), storage.node_id))
        broker.recover()
        queue = broker.queue("q")
        assert queue is not None
        assert not queue.messages  # both deletes are on disk


async def test_a_pass_s_unawaited_acknowledgements_go_in_one_submit_in_order(
    tmp_path: Path,
) -> None:
    async with open_storage(tmp_path / "journal", tmp_path / "bindings", SETTINGS) as storage:
        broker, queue, consumer = consumed_queue(storage)
        for n in range(4):
            await broker.send(durable_message(broker, n), [queue]).settled()
        batches = counting(storage)
        first, second, third, fourth = consumer.refs
        for ref in (first, second, third):  # (one pass: no checkpoint between them)
            broker.acknowledge([ref], awaited=False)
        assert batches == []  # held to the pass's end
        await trio.lowlevel.checkpoint()  # the loop polls: the pass ended
        assert batches == [["delete", "delete", "delete"]]
        journal = storage.messages
        await journal.wait(journal.last_ticket)  # an idle writer: the next send goes at once

        broker.acknowledge([fourth], awaited=False)
        pending = broker.send(
            durable_message(broker, 9), [queue]
        )  # another record: the held one goes first
        assert batches[1:] == [["delete"], ["add", "update"]]
        await pending.settled()
        await trio.lowlevel.checkpoint()
        assert len(batches) == 3  # nothing was left held


async def test_a_pass_s_sends_go_in_one_submit_when_the_writer_waits_for_its_end(
    tmp_path: Path,
) -> None:
    async with open_storage(tmp_path / "journal", tmp_path / "bindings", SETTINGS) as storage:
        broker, queue, consumer = consumed_queue(storage)
        batches = counting(storage)
        # (one pass) The first submit of a sparse pass wakes the writer at once: it goes
        # now; the others wait for the pass's end, when the writer is woken, and go then.
        pendings = [broker.send(durable_message(broker, n), [queue]) for n in range(3)]
        assert batches == [["add", "update"]]
        assert not any(p.durable_now() for p in pendings[1:])
        await trio.lowlevel.checkpoint()
        assert batches[1:] == [["add", "update", "add", "update"]]
        for pending in pendings:
            await pending.settled()
        assert [ref.message.body for ref in consumer.refs] == [b"m0", b"m1", b"m2"]

        # Waiting for a held send submits the pass's records at once, in their order (the
        # last pass was not sparse: all of this one's are held).
        pendings = [broker.send(durable_message(broker, n), [queue]) for n in range(3, 5)]
        broker.acknowledge([consumer.refs[0]], awaited=False)
        del batches[:]
        await pendings[0].settled()
        assert batches == [["add", "update", "add", "update", "delete"]]
        await pendings[1].settled()
        assert [ref.message.body for ref in consumer.refs][3:] == [b"m3", b"m4"]


async def test_a_held_send_the_journal_refuses_fails_its_wait(tmp_path: Path) -> None:
    async with open_storage(tmp_path / "journal", tmp_path / "bindings", SETTINGS) as storage:
        broker, queue, consumer = consumed_queue(storage)
        journal = storage.messages
        first = broker.send(durable_message(broker, 0), [queue])
        held = broker.send(durable_message(broker, 1), [queue])

        def refuse(ops, sync=None, *, flush=False):  # type: ignore[no-untyped-def]
            raise JournalFailedError("the disk is gone")

        journal.submit = refuse  # type: ignore[method-assign]
        await trio.lowlevel.checkpoint()  # the pass's end: its submit fails
        assert not held.durable_now()
        for _ in range(2):  # every waiter learns it
            try:
                await held.settled()
            except JournalFailedError as exc:
                assert "the disk is gone" in str(exc)
            else:
                raise AssertionError("a refused send settled")
        await first.settled()
        assert [ref.message.body for ref in consumer.refs] == [b"m0"]


async def test_the_first_send_of_a_sparse_pass_wakes_the_writer_at_once(tmp_path: Path) -> None:
    async with open_storage(tmp_path / "journal", tmp_path / "bindings", SETTINGS) as storage:
        broker, queue, _ = consumed_queue(storage)
        journal = storage.messages
        await trio.lowlevel.checkpoint()
        before = journal.stats().records_written
        pending = broker.send(durable_message(broker, 0), [queue])
        # A lone producer's record is written while the loop goes on with its pass, not
        # held for the pass's end.
        assert written_in_the_pass(storage, before)
        await pending.settled()
