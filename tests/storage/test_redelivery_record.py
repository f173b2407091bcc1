"""A redelivery delay's SCHEDULED_DELIVERY_TIME record in the journal on disk: written at
once without a sync of its own, read back when the journal is opened again, kept by
compaction while its message lives, and gone with its message."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import trio

from artemis_py.broker import records as r
from artemis_py.broker.broker import Broker
from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.broker.store import JournalStore
from artemis_py.config import RoutingType
from artemis_py.config.address_settings import AddressSettingEntry, AddressSettingsRepository
from artemis_py.config.parse import default_config
from artemis_py.storage import JournalSettings, Storage, open_storage

DELAY = 60_000  # ms: nothing is due while a test runs
# Non-sync writes would wait this long for company: the record must not. Small files, no
# automatic compaction: a test compacts when it means to.
SETTINGS = JournalSettings(file_size=64 * 1024, buffer_timeout_ns=30 * 10**9, compact_min_files=0)


class Collector:
    selector = None

    def __init__(self) -> None:
        self.refs: list[MessageReference] = []

    def has_credit(self) -> bool:
        return True

    def deliver(self, ref: MessageReference) -> None:
        self.refs.append(ref)


def started(storage: Storage) -> tuple[Broker, Queue]:
    """A broker on ``storage`` whose addresses have a redelivery delay, with a queue "q"."""
    settings = AddressSettingsRepository([AddressSettingEntry.of("#", redelivery_delay=DELAY)])
    config = replace(default_config(), address_settings=settings)
    broker = Broker(config, Persistence(JournalStore(storage), storage.node_id))
    broker.recover()
    queue = broker.queue("q") or broker.create_queue("q", "q", RoutingType.ANYCAST)
    return broker, queue


async def send(broker: Broker, queue: Queue, body: bytes) -> None:
    message = Message(
        broker.persistence.next_id(),
        "q",
        body=body,
        routing_type=RoutingType.ANYCAST,
        durable=True,
    )
    await broker.send(message, [queue]).settled()


def delivered_once(queue: Queue) -> list[MessageReference]:
    consumer = Collector()
    queue.add_consumer(consumer)
    queue.remove_consumer(consumer)
    return consumer.refs


def open_dirs(tmp_path: Path, settings: JournalSettings = SETTINGS):  # type: ignore[no-untyped-def]
    return open_storage(tmp_path / "journal", tmp_path / "bindings", settings)


async def test_the_hold_is_written_at_once_unsynced_and_read_back(tmp_path: Path) -> None:
    async with open_dirs(tmp_path) as storage:
        broker, queue = started(storage)
        await send(broker, queue, b"nacked")
        [nacked] = delivered_once(queue)
        journal = storage.messages
        before = journal.stats()
        broker.cancel([nacked])
        due = queue.scheduled[nacked]
        with trio.fail_after(5):  # (not after the 30 s buffer timeout)
            # Polls: the writer thread's counters have no event to wait for.
            while journal.stats().records_written < before.records_written + 2:  # noqa: ASYNC110
                await trio.sleep(0.001)
        assert journal.stats().syncs == before.syncs  # (the count's record and the time's)

    async with open_dirs(tmp_path) as storage:
        assert storage.messages.loaded is not None
        [record] = storage.messages.loaded.records
        assert [u.record_type for u in record.updates] == [
            r.ADD_REF,
            r.DELIVERY_COUNT,
            r.SCHEDULED_DELIVERY_TIME,
        ]
        broker, queue = started(storage)
        assert [(ref.message.body, t) for ref, t in queue.scheduled.items()] == [(b"nacked", due)]
        assert not queue.messages


async def test_compaction_keeps_a_live_message_s_hold_and_drops_a_gone_one_s(
    tmp_path: Path,
) -> None:
    async with open_dirs(tmp_path) as storage:
        broker, queue = started(storage)
        await send(broker, queue, b"kept")
        await send(broker, queue, b"purged")
        kept, purged = delivered_once(queue)
        broker.cancel([kept, purged])
        due = queue.scheduled[kept]
        await broker.discard([purged]).settled()
        for _ in range(100):  # fill files with what is gone by the compaction
            await send(broker, queue, b"x" * 2000)
            await broker.discard(list(queue.messages)).settled()
        await send(broker, queue, b"sync point")
        assert storage.messages.stats().data_files > 1
        await storage.messages.compact()
        assert storage.messages.stats().compactions == 1

    async with open_dirs(tmp_path) as storage:
        assert storage.messages.loaded is not None
        times = [
            [u.record_type for u in record.updates].count(r.SCHEDULED_DELIVERY_TIME)
            for record in storage.messages.loaded.records
        ]
        assert times == [1, 0]  # "kept" and the sync point: nothing of "purged" is left
        broker, queue = started(storage)
        assert [(ref.message.body, t) for ref, t in queue.scheduled.items()] == [(b"kept", due)]
        assert [ref.message.body for ref in queue.messages] == [b"sync point"]
