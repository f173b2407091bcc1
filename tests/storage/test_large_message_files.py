"""The large-message file store: durable writes as tickets, sticky failures, deletes that
wait for their reason, and what opening finds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from artemis_py.broker.message import LargeBody
from artemis_py.storage.large_message_files import (
    CHUNK,
    LargeMessageError,
    open_large_message_store,
    send_body,
)


async def test_written_files_are_found_again(tmp_path: Path) -> None:
    directory = tmp_path / "large"
    async with open_large_message_store(directory) as store:
        first = store.submit(7, b"seven" * 1000)
        second = store.submit(8, b"")
        await store.wait(second)  # tickets complete in order: 7 is durable too
        assert (directory / "7.msg").read_bytes() == b"seven" * 1000
        await store.wait(first)
    (directory / "notes.txt").write_text("not a message file")
    async with open_large_message_store(directory) as store:
        assert store.found == {7: 5000, 8: 0}  # lengths only: no body is read at start


async def test_a_failed_write_fails_its_ticket_and_every_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_large_message_store(tmp_path) as store:

        def failing(batch: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(store, "_write_files", failing)
        ticket = store.submit(1, b"x")
        with pytest.raises(LargeMessageError, match="No space left"):
            await store.wait(ticket)
        with pytest.raises(LargeMessageError):
            store.submit(2, b"y")  # refused at once from now on
        with pytest.raises(LargeMessageError):
            await store.wait(ticket + 1)


async def test_delete_waits_for_its_reason(tmp_path: Path, wait_for: Any) -> None:
    async with open_large_message_store(tmp_path) as store:
        await store.wait(store.submit(5, b"body"))
        durable = trio.Event()
        store.delete_after(durable.wait, [5])
        await trio.testing.wait_all_tasks_blocked()
        assert (tmp_path / "5.msg").exists()  # the journal delete is not durable yet
        durable.set()
        await wait_for(lambda: not (tmp_path / "5.msg").exists(), message="the file to go")


async def test_orphans_are_removed(
    tmp_path: Path, wait_for: Any, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("1.msg", "2.msg"):
        (tmp_path / name).write_bytes(b"left over")
    async with open_large_message_store(tmp_path) as store:
        store.remove_orphans(list(store.found))
        await wait_for(lambda: not list(tmp_path.iterdir()), message="orphans removed")
    assert "removing 2 orphaned large message file(s)" in caplog.text


async def test_a_body_is_streamed_in_bounded_chunks(tmp_path: Path) -> None:
    body = bytes(range(256)) * (CHUNK // 100)  # a few chunks and a partial one
    async with open_large_message_store(tmp_path) as store:
        written: list[int] = []
        await store.wait(store.submit(3, body, lambda: written.append(3)))
        assert written == [3]
        chunks: list[bytes] = []

        async def send(data: bytes) -> None:
            chunks.append(data)

        await send_body(LargeBody(store, 3, len(body)), send)
        assert b"".join(chunks) == body
        assert max(map(len, chunks)) <= CHUNK
        assert len(chunks) > 2
        with pytest.raises(LargeMessageError, match="not"):
            await send_body(LargeBody(store, 3, len(body) + 1), send)  # shorter than recorded
        with pytest.raises(LargeMessageError, match="cannot read"):
            await send_body(LargeBody(store, 4, 1), send)  # no such file


async def test_a_copy_is_a_link_and_outlives_its_source(tmp_path: Path, wait_for: Any) -> None:
    async with open_large_message_store(tmp_path) as store:
        store.submit(1, b"original")
        link = store.submit(2, 1)
        store.delete_after(None, [1])  # waits for the link submitted before it
        await store.wait(link)
        await wait_for(lambda: not (tmp_path / "1.msg").exists(), message="the source to go")
        assert (tmp_path / "2.msg").read_bytes() == b"original"


async def test_a_pinned_file_is_deleted_once_unpinned(tmp_path: Path, wait_for: Any) -> None:
    async with open_large_message_store(tmp_path) as store:
        await store.wait(store.submit(6, b"being sent"))
        store.pin(6)
        store.delete_after(None, [6])
        await trio.testing.wait_all_tasks_blocked()
        assert (tmp_path / "6.msg").exists()
        store.unpin(6)
        await wait_for(lambda: not (tmp_path / "6.msg").exists(), message="the file to go")
