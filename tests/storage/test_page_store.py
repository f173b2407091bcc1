"""The async page store facade: append/wait/read/count/delete_page/close, reopen, shared
syncs, reads that never run ahead of the writer, failures and bad directories."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from artemis_py.broker.pending import Ticket, durable
from artemis_py.exceptions import (
    PageFileCorruptedError,
    PageStoreClosedError,
    PageStoreFailedError,
    StorageError,
)
from artemis_py.storage import (
    PagedRecord,
    PageStore,
    create_page_store,
    open_page_store,
    open_page_stores,
    read_page_file,
)

PAGE = 4096
HEADER = 32


def rec(i: int, size: int = 100) -> tuple[int, int, list[int], bytes, int]:
    return (i, i % 3, [1, 10 + i % 2], bytes([i % 251]) * size, 1000 + i)


async def read_all(store: PageStore) -> list[PagedRecord]:
    out: list[PagedRecord] = []
    for page in store.pages():
        offset = HEADER
        while True:
            records, offset, _done = await store.read(page, offset, max_records=5, max_bytes=10_000)
            out.extend(records)
            if not records:
                break
    return out


async def test_append_wait_read_count_delete_close_reopen(tmp_path: Path) -> None:
    store = await create_page_store(tmp_path, "orders", page_size=PAGE)
    assert (store.address, store.page_size, store.torn) == ("orders", PAGE, None)
    assert store.directory.parent == tmp_path
    assert (store.directory / "address.txt").read_text() == "orders"
    ticket, positions = store.append([rec(i, 1000) for i in range(1, 8)], sync=True)
    # Positions are assigned at once: 3 records of 1050 bytes per 4 KiB page.
    assert [p for p, _ in positions] == [1, 1, 1, 2, 2, 2, 3]
    assert positions[:2] == [(1, HEADER), (1, HEADER + 1050)]
    assert store.end() == (3, HEADER + 1050)
    await store.wait(ticket)
    assert store.written() == store.end()
    got = await read_all(store)
    assert [(r.page, r.offset) for r in got] == positions
    assert got[0] == PagedRecord(1, HEADER, 1, 1, (1, 11), bytes([1]) * 1000, 1001)
    records, next_offset, done = await store.read(1, HEADER, max_records=10, max_bytes=1 << 20)
    assert (len(records), next_offset, done) == (3, HEADER + 3 * 1050, True)
    records, _, done = await store.read(3, HEADER, max_records=10, max_bytes=1 << 20)
    assert (len(records), done) == (1, False)
    assert await store.count(2) == {
        (1, 1): 1,
        (1, 2): 1,
        (1, 0): 1,
        (10, 1): 1,
        (11, 2): 1,
        (10, 0): 1,
    }
    await store.delete_page(1)
    assert store.pages() == [2, 3]
    with pytest.raises(ValueError, match="current page"):
        await store.delete_page(3)
    await store.close()
    await store.close()
    with pytest.raises(PageStoreClosedError):
        store.append([rec(99)], sync=True)

    stores = await open_page_stores(tmp_path, page_size_for=lambda address: PAGE)
    assert list(stores) == ["orders"]
    again = stores["orders"]
    assert [r.message_id for r in await read_all(again)] == [4, 5, 6, 7]
    assert again.current_page == 4  # appends after a reopen start a fresh page
    page, records, bad = read_page_file(again.directory / "000000002.page")
    assert (page, [r.message_id for r in records], bad) == (2, [4, 5, 6], None)
    await again.delete()
    assert os.listdir(tmp_path) == []


async def test_a_page_store_is_a_ticket_source_for_pending_sends(tmp_path: Path) -> None:
    store = await create_page_store(tmp_path, "a", page_size=PAGE)
    ticket, _ = store.append([rec(1)], sync=True)
    await durable([Ticket(journal=store, number=ticket)])  # type: ignore[arg-type]
    assert [r.message_id for r in await read_all(store)] == [1]
    await store.close()


async def test_concurrent_appenders_share_fdatasyncs(tmp_path: Path) -> None:
    store = await create_page_store(tmp_path, "a", page_size=1 << 20)
    tasks, each = 32, 20

    async def appender(n: int) -> None:
        for i in range(each):
            ticket, _ = store.append([rec(n * 1000 + i, 4096)], sync=True)
            await store.wait(ticket)

    async with trio.open_nursery() as nursery:
        for n in range(tasks):
            nursery.start_soon(appender, n)
    stats = store.stats()
    assert stats["records"] == tasks * each
    assert stats["syncs"] < tasks * each / 4, stats
    assert len(await read_all(store)) == tasks * each
    await store.close()


async def test_reads_never_return_unwritten_records(tmp_path: Path) -> None:
    store = await create_page_store(tmp_path, "a", page_size=64 * 1024)
    total = 3000
    seen: list[PagedRecord] = []

    async def reader() -> None:
        page, offset = 1, HEADER
        while len(seen) < total:
            records, offset, done = await store.read(page, offset, max_records=50, max_bytes=20_000)
            written = store.written()
            for r in records:
                assert (r.page, r.offset) < written
            seen.extend(records)
            if done:
                page, offset = page + 1, HEADER
            elif not records:
                await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        for i in range(total):
            store.append([rec(i, 200)], sync=False)
            if i % 100 == 0:
                await trio.lowlevel.checkpoint()
    assert [r.message_id for r in seen] == list(range(total))
    assert all(r.message == bytes([r.message_id % 251]) * 200 for r in seen)
    await store.close()


async def test_a_failed_store_raises_a_clear_storage_error(tmp_path: Path) -> None:
    store = await create_page_store(tmp_path, "a", page_size=PAGE)
    ticket, _ = store.append([rec(1, 1000)], sync=True)
    await store.wait(ticket)
    # The directory vanishes under the store: creating page 2 fails.
    shutil.rmtree(store.directory)
    ticket, _ = store.append([rec(i, 1000) for i in range(2, 6)], sync=True)
    with pytest.raises(PageStoreFailedError, match=r"000000002\.page") as info:
        await store.wait(ticket)
    assert isinstance(info.value, StorageError)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    with pytest.raises(PageStoreFailedError, match=r"000000002\.page"):
        store.append([rec(9)], sync=True)
    with pytest.raises(PageStoreFailedError):
        await store.close()


async def test_a_paging_directory_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    paging_dir = blocker / "paging"
    with pytest.raises(StorageError, match=rf"paging directory {paging_dir} is not usable"):
        await open_page_stores(paging_dir, page_size_for=lambda address: PAGE)
    with pytest.raises(StorageError, match=str(paging_dir)):
        await create_page_store(paging_dir, "a", page_size=PAGE)


async def test_open_page_stores_keys_by_address_and_drops_unfinished_creations(
    tmp_path: Path,
) -> None:
    sizes = {"a": PAGE, "b": 2 * PAGE}
    for address in sizes:
        store = await create_page_store(tmp_path, address, page_size=sizes[address])
        ticket, _ = store.append([rec(1)], sync=True)
        await store.wait(ticket)
        await store.close()
    (tmp_path / "0123abcd").mkdir()  # a creation cut short before address.txt
    stores = await open_page_stores(tmp_path, page_size_for=sizes.__getitem__)
    assert {a: s.page_size for a, s in stores.items()} == sizes
    assert not (tmp_path / "0123abcd").exists()
    for store in stores.values():
        await store.close()


async def test_a_corrupted_page_is_refused_naming_file_and_offset(tmp_path: Path) -> None:
    store = await create_page_store(tmp_path, "a", page_size=PAGE)
    ticket, _ = store.append([rec(i, 1000) for i in range(1, 5)], sync=True)
    await store.wait(ticket)
    await store.close()
    first = store.directory / "000000001.page"
    data = bytearray(first.read_bytes())
    data[HEADER + 1050 + 30] ^= 1
    first.write_bytes(bytes(data))
    with pytest.raises(PageFileCorruptedError) as info:
        await open_page_store(store.directory, page_size=PAGE)
    assert (info.value.file, info.value.offset) == (str(first), HEADER + 1050)
    page, records, bad = read_page_file(first)
    assert (page, len(records)) == (1, 1)
    assert bad is not None
    assert bad[0] == HEADER + 1050
    foreign = tmp_path / "foreign.page"
    foreign.write_bytes(b"AMQPYJNL" + bytes(100))
    with pytest.raises(PageFileCorruptedError, match="not a page file"):
        read_page_file(foreign)


async def test_open_page_store_needs_an_address_for_a_new_store(tmp_path: Path) -> None:
    with pytest.raises(PageFileCorruptedError, match="does not exist"):
        await open_page_store(tmp_path / "missing", page_size=PAGE)
    store = await open_page_store(tmp_path / "new", page_size=PAGE, address="x")
    assert store.address == "x"
    await store.close()
