"""``artemis-py data print|summary`` on data directories written by the broker's own
persistence code: what it prints and counts, that it never modifies the directory, that it
refuses a running node, and page stores read through a stand-in ``read_page_file``."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from artemis_py import _native
from artemis_py.broker import records as p
from artemis_py.broker.message import Message, encode_message
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.queue import Queue
from artemis_py.broker.records import (
    OFFSET_MARK,
    SEALED_STREAM,
    PageAck,
    PageComplete,
    QueueSpec,
    encode_client_id,
    encode_offset_mark,
)
from artemis_py.broker.routing.post_office import Address
from artemis_py.broker.store import JournalStore
from artemis_py.cli import data, data_view, main
from artemis_py.config import RoutingType
from artemis_py.storage import Op, open_storage

ORDERS, AUDIT = 101, 102  # queue ids


def queue(queue_id: int, name: str, address: str) -> Queue:
    return Queue(queue_id, name, address, RoutingType.MULTICAST)


def message(message_id: int, body: bytes, **props: str) -> Message:
    return Message(
        message_id,
        "orders",
        body=body,
        properties=tuple(props.items()),
        routing_type=RoutingType.MULTICAST,
        durable=True,
    )


async def _write(root: Path) -> None:
    async with open_storage(root / "journal", root / "bindings") as storage:
        persistence = Persistence(JournalStore(storage), storage.node_id)
        persistence.next_id()  # reserves an id block
        await persistence.wait(
            persistence.store_address(Address(100, "orders", {RoutingType.MULTICAST}))
        )
        for queue_id, name in ((ORDERS, "orders-eu"), (AUDIT, "audit")):
            spec = QueueSpec(queue_id, name, "orders", RoutingType.MULTICAST, filter="x > 1")
            await persistence.wait(persistence.store_queue(spec))
        both = [queue(ORDERS, "orders-eu", "orders"), queue(AUDIT, "audit", "orders")]
        first = message(1, b"first", color="red")
        await persistence.wait(persistence.store_message(first, both, 3))
        await persistence.wait(persistence.store_message(message(2, b"second"), both, 4))
        # message 1 acknowledged by audit, message 2 redelivered twice to orders-eu
        await persistence.wait(persistence.acknowledge([(1, AUDIT, False)]))
        persistence.update_delivery_counts([(2, ORDERS, 2)])
        persistence.update_scheduled_times([(2, ORDERS, 1767225600000)])  # (a redelivery delay)
        journal = storage.messages
        await journal.append(
            [
                Op.add(10, p.PAGE_ACK, p.encode_page_ack(PageAck(ORDERS, 1, 0, "orders"))),
                Op.add(
                    11, p.PAGE_COMPLETE, p.encode_page_complete(PageComplete(AUDIT, 1, "orders"))
                ),
                Op.add(12, p.PAGE_TX, p.encode_page_tx(77)),
                Op.add(13, 14, b"dup-1"),  # the duplicate-id cache's record
                Op.add(14, 19, encode_client_id("orders", "order-7")),  # a client's _AMQ_DUPL_ID
                Op.add(15, OFFSET_MARK, encode_offset_mark(ORDERS, "node-a", 40)),
                Op.add(16, SEALED_STREAM, encode_offset_mark(ORDERS, "node-b", 90)),
            ],
            True,
        )
        await journal.add_tx(50, 20, p.MESSAGE_RECORD, encode_message(message(20, b"in doubt")))
        await journal.prepare(50, b"xid-1")


@pytest.fixture(name="root")
def root_fixture(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    trio.run(_write, root)
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["data", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_print_bindings_shows_addresses_queues_and_id_blocks(root, capsys) -> None:
    status, out, err = run(capsys, "print", "--bindings", str(root))
    assert status == 0, err
    assert "100 ADDRESS name=orders routing=MULTICAST" in out
    assert f'{ORDERS} QUEUE name=orders-eu address=orders routing=MULTICAST filter="x > 1"' in out
    assert " ID_BLOCK ids-below=" in out
    assert "MESSAGE" not in out


def test_print_journal_shows_messages_references_and_cursors(root, capsys) -> None:
    status, out, err = run(capsys, "print", "--journal", str(root))
    assert status == 0, err
    lines = out.splitlines()
    assert (
        "1 MESSAGE address=orders routing=MULTICAST durable=yes priority=4 body-size=5 "
        'properties=[color=red] body="first"'
    ) in lines
    assert f"1   ADD_REF queue={ORDERS}(orders-eu) offset=3" in lines
    assert f"1   ACK_REF queue={AUDIT}(audit)" in lines
    assert f"2   DELIVERY_COUNT queue={ORDERS}(orders-eu) count=2" in lines
    assert (
        f"2   SCHEDULED_DELIVERY_TIME queue={ORDERS}(orders-eu) "
        "time=1767225600000 (2026-01-01T00:00:00.000Z)"
    ) in lines
    assert f"10 PAGE_ACK queue={ORDERS}(orders-eu) address=orders page=1 offset=0" in lines
    assert f"11 PAGE_COMPLETE queue={AUDIT}(audit) address=orders page=1" in lines
    assert "12 PAGE_TX tx=77" in lines
    assert "13 DUPLICATE_ID duplicate-id=dup-1" in lines
    assert "14 CLIENT_DUPLICATE_ID address=orders duplicate-id=order-7" in lines
    assert f"15 OFFSET_MARK queue={ORDERS}(orders-eu) stream=node-a mark=40" in lines
    assert f"16 SEALED_STREAM queue={ORDERS}(orders-eu) stream=node-b sealed-end=90" in lines
    assert f"prepared tx=50 xid={b'xid-1'.hex()} ops=1" in lines
    assert any(
        line.startswith("prepared tx=50   add_tx 20 MESSAGE address=orders") for line in lines
    )
    assert "ADDRESS" not in out


def test_summary_counts_live_references_per_queue(root, capsys) -> None:
    status, out, err = run(capsys, "summary", str(root))
    assert status == 0, err
    assert "queue orders-eu id=101 address=orders journal=2 paged=0 total=2" in out
    assert "queue audit id=102 address=orders journal=1 paged=0 total=1" in out
    assert "journal messages " in out


def tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_nothing_under_the_directory_changes(root, capsys) -> None:
    # A half-created file is what recovery removes when it opens a journal: it must stay.
    (root / "journal" / "activemq-data-9.amq.tmp").write_bytes(b"half made")
    before = tree(root)
    status, _, err = run(capsys, "print", str(root))
    assert status == 0, err
    status, _, err = run(capsys, "summary", "--json", str(root))
    assert status == 0, err
    assert tree(root) == before


def test_a_running_node_is_refused(root, capsys) -> None:
    node = _native.NodeManager.open(root / "journal")  # what a running node holds
    try:
        status, out, err = run(capsys, "print", str(root))
    finally:
        node.close()
    assert status == 1
    assert out == ""
    assert f"node is running (pid {os.getpid()})" in err
    assert "stop it first" in err
    assert "Traceback" not in err


def test_missing_directories_are_one_line_errors(tmp_path, capsys) -> None:
    status, _, err = run(capsys, "summary", str(tmp_path / "nowhere"))
    assert (status, err.count("\n")) == (1, 1)
    assert "is not a directory" in err
    status, _, err = run(capsys, "summary", str(tmp_path))
    assert status == 1
    assert f"no journal directory {tmp_path / 'journal'}" in err


def test_config_names_the_directories(root, tmp_path, capsys) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "broker.xml").write_text(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        "<journal-directory>data/journal</journal-directory>"
        "<bindings-directory>data/bindings</bindings-directory>"
        "<paging-directory>data/paging</paging-directory>"
        "</core></configuration>"
    )
    status, out, err = run(capsys, "summary", "--config", str(etc / "broker.xml"))
    assert status == 0, err
    assert "queue orders-eu id=101" in out


# -- page stores, through a stand-in for the page store's read_page_file ----------------------


@dataclass(frozen=True, slots=True)
class PagedRecord:  # the fields of artemis_py.storage.paging.PagedRecord
    page: int
    offset: int
    message_id: int
    tx_id: int
    queue_ids: tuple[int, ...]
    message: bytes
    queue_offset: int


def paged(page: int, offset: int, message_id: int, tx_id: int = 0) -> PagedRecord:
    body = encode_message(message(message_id, b"paged %d" % message_id))
    return PagedRecord(page, offset, message_id, tx_id, (ORDERS, AUDIT), body, 1000 + message_id)


PAGES = {
    1: [paged(1, 0, 30), paged(1, 100, 31)],
    2: [paged(2, 0, 32, tx_id=77), paged(2, 100, 33, tx_id=78)],
}


@pytest.fixture(name="pages")
def pages_fixture(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    store = root / "paging" / "0123abcd"
    store.mkdir(parents=True)
    (store / "address.txt").write_text("orders")
    for number in PAGES:
        (store / f"{number:09d}.page").write_bytes(b"p" * 10)

    def read_page_file(path: Path):
        number = int(path.stem)
        return number, PAGES[number], (200, "bad length") if number == 2 else None

    monkeypatch.setattr(data, "read_page_file", read_page_file)
    return store


def test_print_paging_shows_pages_records_and_cursors(pages, capsys) -> None:
    status, out, err = run(capsys, "print", "--paging", str(pages.parent.parent))
    assert status == 0, err
    lines = out.splitlines()
    assert "address orders store=0123abcd pages=2 bytes=20" in lines
    assert "page orders 1 records=2 bytes=10" in lines
    assert any(
        line.startswith(f"paged orders 1:100 message=31 tx=0 queues={ORDERS}(orders-eu),")
        and " queue-offset=1031 " in line
        and 'body="paged 31"' in line
        for line in lines
    )
    assert "page orders 2 bad record at offset 200: bad length" in lines
    assert f"cursor orders queue={ORDERS}(orders-eu) completed-pages=[] acked=[1:0]" in lines
    assert f"cursor orders queue={AUDIT}(audit) completed-pages=[1] acked=[]" in lines


def test_summary_counts_paged_messages_minus_acks_completions_and_open_transactions(
    pages, capsys
) -> None:
    status, out, err = run(capsys, "summary", str(pages.parent.parent))
    assert status == 0, err
    # orders-eu: 31 (30 acked) + 32 (tx 77 committed); 33's tx 78 has no PAGE_TX
    assert "queue orders-eu id=101 address=orders journal=2 paged=2 total=4" in out
    # audit completed page 1: only 32
    assert "queue audit id=102 address=orders journal=1 paged=1 total=2" in out
    assert "address orders store=0123abcd pages=2 bytes=20 records=4 uncommitted=1" in out


def test_the_node_files_beside_the_journal_are_not_counted_as_its_files(tmp_path: Path) -> None:
    # server.lock, and shared-store HA's server.state and server.backup.lock.
    for name in ("server.lock", "server.state", "server.backup.lock", "activemq-data-1.amq"):
        (tmp_path / name).write_bytes(b"x" * 10)
    assert data_view._journal_files(tmp_path)["files"] == 1
