"""Messages a cluster bridge forwarded, stored by the receiving broker: one journal batch per
run, each message with its duplicate id, and duplicates dropped."""

from __future__ import annotations

from pathlib import Path

from artemis_py.broker.broker import Broker
from artemis_py.broker.message import Message, decode_message, encode_message
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.records import MESSAGE_RECORD
from artemis_py.broker.store import JournalStore
from artemis_py.config import RoutingType
from artemis_py.config.parse import default_config
from artemis_py.storage import open_storage


def forwarded(broker: Broker, n: int, dup: bytes) -> tuple[Message, list[str], bytes, bytes]:
    payload = encode_message(
        Message(0, "q", body=b"m%d" % n, routing_type=RoutingType.ANYCAST, durable=True)
    )
    return decode_message(broker.persistence.next_id(), payload), ["q"], dup, payload


async def test_a_run_is_one_batch_and_its_duplicate_ids_survive_a_restart(
    tmp_path: Path,
) -> None:
    config = default_config()
    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        broker = Broker(config, Persistence(JournalStore(storage), storage.node_id))
        broker.recover()
        queue = broker.create_queue("q", "q", RoutingType.ANYCAST)
        before = storage.messages.stats().batches
        run = [forwarded(broker, 1, b"n:1"), forwarded(broker, 2, b"n:2")]
        run.append(forwarded(broker, 3, b"n:1"))  # the same id twice: the second is dropped
        pending = broker.receive_forwarded(run)
        await broker.persistence.wait(pending.tickets)
        assert storage.messages.stats().batches == before + 1
        assert not queue.messages  # not before complete()
        pending.complete()
        assert [r.message.body for r in queue.messages] == [b"m1", b"m2"]
        # Resent after a broken link: already here, nothing stored.
        again = broker.receive_forwarded([forwarded(broker, 2, b"n:2")])
        assert not again.tickets
        assert not again.on_durable
    async with open_storage(tmp_path / "journal", tmp_path / "bindings") as storage:
        assert storage.messages.loaded is not None
        loaded = storage.messages.loaded.records  # recover() releases the report
        broker = Broker(config, Persistence(JournalStore(storage), storage.node_id))
        broker.recover()
        queue = broker.queue("q")
        assert queue is not None
        assert [r.message.body for r in queue.messages] == [b"m1", b"m2"]
        assert b"n:1" in broker.duplicates
        assert b"n:2" in broker.duplicates
        # The journal holds each message as it arrived (no routing property was added).
        assert [r.payload for r in loaded if r.record_type == MESSAGE_RECORD] == [
            run[0][3],
            run[1][3],
        ]
