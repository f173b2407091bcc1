"""The client sends' duplicate-id caches without sockets or journal: claims (reserve, accept,
release), per-address sizes and eviction, recovery, scale-down hand-over and its frames."""

from __future__ import annotations

import itertools

from artemis_py.broker.duplicate_cache import ClientDuplicates
from artemis_py.broker.message import Message
from artemis_py.broker.records import (
    CLIENT_DUPLICATE_ID_RECORD,
    decode_client_id,
    encode_client_id,
)
from artemis_py.cluster.client_ids import farewells
from artemis_py.protocol import cluster as wire
from artemis_py.protocol.cluster.wire import decode_frame, encode_frame
from artemis_py.storage import Op

_message_ids = itertools.count(1)


def msg(address: str = "orders") -> Message:
    return Message(next(_message_ids), address)


def registry(sizes: dict[str, int] | None = None, *, persist: bool = True) -> ClientDuplicates:
    known = sizes or {}
    record_ids = itertools.count(1000)
    return ClientDuplicates(
        lambda a: known.get(a, 20000), lambda: next(record_ids), persist=persist
    )


def test_an_id_is_reserved_at_once_and_accepted_with_its_record() -> None:
    dups = registry()
    m = msg()
    claim = dups.claim([("orders", "a", m)], owner="c1")
    assert claim is not None
    # Reserved: a concurrent second send is a duplicate before the first is stored.
    assert dups.known("orders", "a")
    assert dups.claim([("orders", "a", msg())], owner="c2") is None
    ops = claim.accept(tx_id=7, journaled={m.message_id})
    assert ops == [Op.add_tx(7, 1000, CLIENT_DUPLICATE_ID_RECORD, encode_client_id("orders", "a"))]
    assert dups.known("orders", "a")
    assert dups.snapshot() == [("orders", ("a",))]


def test_an_id_whose_message_is_not_journaled_is_kept_in_memory_only() -> None:
    dups = registry()
    claim = dups.claim([("orders", "a", msg())], owner="c1")
    assert claim is not None
    assert claim.accept(tx_id=7, journaled=set()) == []  # a non-persistent message
    assert dups.known("orders", "a")
    off = registry(persist=False)  # persist-id-cache false
    m = msg()
    claim = off.claim([("orders", "a", m)], owner="c1")
    assert claim is not None
    assert claim.accept(tx_id=7, journaled={m.message_id}) == []
    assert off.known("orders", "a")


def test_a_released_claim_frees_its_ids_reserved_or_accepted() -> None:
    dups = registry()
    claim = dups.claim([("orders", "a", msg())], owner="c1")
    assert claim is not None
    claim.release()
    assert not dups.known("orders", "a")
    again = dups.claim([("orders", "a", msg())], owner="c1")
    assert again is not None
    again.accept(1, set())
    again.release()  # the journal refused the submit
    assert not dups.known("orders", "a")
    again.release()  # idempotent


def test_a_closed_connection_releases_only_its_reservations() -> None:
    dups = registry()
    mine = dups.claim([("orders", "a", msg())], owner="c1")
    stored = dups.claim([("orders", "b", msg())], owner="c1")
    theirs = dups.claim([("orders", "c", msg())], owner="c2")
    assert mine
    assert stored
    assert theirs
    stored.accept(1, set())
    dups.release_owner("c1")
    assert not dups.known("orders", "a")
    assert dups.known("orders", "b")  # its records were submitted: it stays
    assert dups.known("orders", "c")


def test_addresses_are_independent() -> None:
    dups = registry()
    claim = dups.claim([("orders", "a", msg())], owner="c")
    assert claim is not None
    claim.accept(1, set())
    assert dups.claim([("invoices", "a", msg())], owner="c") is not None


def test_a_full_cache_evicts_its_oldest_journaled_id() -> None:
    dups = registry({"small": 2})
    records = []
    for dup_id in ("a", "b", "c"):
        m = msg("small")
        claim = dups.claim([("small", dup_id, m)], owner="c")
        assert claim is not None
        ops = claim.accept(tx_id=9, journaled={m.message_id})
        records.append(ops)
    assert records[2][1:] == [Op.delete_tx(9, 1000)]  # a's record goes with c's commit
    assert not dups.known("small", "a")
    assert dups.known("small", "b")
    assert dups.known("small", "c")
    assert dups.claim([("small", "a", msg("small"))], owner="c") is not None  # forgotten


def test_size_zero_turns_detection_off_for_that_address() -> None:
    dups = registry({"free": 0})
    assert not dups.enabled("free")
    claim = dups.claim([("free", "a", msg("free"))], owner="c")
    assert claim is not None
    assert not claim.entries
    claim.accept(1, set())
    assert dups.claim([("free", "a", msg("free"))], owner="c") is not None


def test_a_transaction_is_a_duplicate_when_any_of_its_ids_is_known() -> None:
    dups = registry()
    first = dups.claim([("orders", "a", msg())], owner="c")
    assert first is not None
    first.accept(1, set())
    assert dups.claim([("orders", "new", msg()), ("orders", "a", msg())], owner="c") is None
    assert not dups.known("orders", "new")  # nothing of an ignored transaction is reserved


def test_an_id_on_several_messages_of_a_transaction_is_one_entry_per_address() -> None:
    dups = registry()
    durable, volatile = msg(), msg()
    entries = [("orders", "tx-1", volatile), ("orders", "tx-1", durable), ("audit", "tx-1", msg())]
    claim = dups.claim(entries, owner="c")
    assert claim is not None
    ops = claim.accept(3, journaled={durable.message_id})
    assert [decode_client_id(op[4]) for op in ops] == [("orders", "tx-1")]
    assert dups.snapshot() == [("orders", ("tx-1",)), ("audit", ("tx-1",))]
    assert dups.claim([("audit", "tx-1", msg("audit"))], owner="c") is None


def test_recovery_keeps_each_address_newest_ids_within_its_size() -> None:
    dups = registry({"small": 2, "off": 0})
    records = [
        (5, encode_client_id("small", "a")),
        (3, encode_client_id("orders", "x")),
        (6, encode_client_id("small", "b")),
        (8, encode_client_id("small", "c")),
        (9, encode_client_id("off", "z")),
    ]
    deletes = dups.recover(records)
    assert sorted(deletes) == sorted([Op.delete(5), Op.delete(9)])
    assert dups.snapshot() == [("orders", ("x",)), ("small", ("b", "c"))]


def test_adopted_ids_are_journaled_and_already_known_ones_skipped() -> None:
    dups = registry({"small": 2})
    claim = dups.claim([("orders", "a", msg())], owner="c")
    assert claim is not None
    claim.accept(1, set())
    added, ops = dups.adopt("orders", ["a", "b"])
    assert added == 1
    assert ops == [Op.add(1000, CLIENT_DUPLICATE_ID_RECORD, encode_client_id("orders", "b"))]
    # More than the size: only the newest are taken.
    assert dups.adopt("small", ["1", "2", "3"])[0] == 2
    assert dups.snapshot()[-1] == ("small", ("2", "3"))


def test_record_payload_round_trips_any_text() -> None:
    for address, dup_id in (("orders", "a"), ("ü/x", "spark:q:1:2"), ("a", "")):
        assert decode_client_id(encode_client_id(address, dup_id)) == (address, dup_id)


def test_the_leaving_frames_carry_the_ids_in_chunks_that_round_trip() -> None:
    farewell = wire.Leaving(node_id="n1", target="n2", received=("n0:1",))
    ids = [("orders", tuple(f"id-{i}" for i in range(100))), ("audit", ("x",))]
    frames = farewells(farewell, ids, budget=300)
    assert len(frames) > 2
    assert frames[0].received == ("n0:1",)
    assert all(not f.received for f in frames[1:])
    carried: dict[str, list[str]] = {}
    for frame in frames:
        decoded = decode_frame(encode_frame(frame))
        assert decoded == frame
        assert isinstance(decoded, wire.Leaving)
        for entry in decoded.client_ids:
            carried.setdefault(entry.address, []).extend(entry.ids)
    assert {a: tuple(i) for a, i in carried.items()} == dict(ids)
    assert farewells(farewell, []) == [farewell]
