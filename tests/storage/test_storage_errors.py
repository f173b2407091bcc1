"""How native errors reach Python: the classes of artemis_py.exceptions and built-in OSError."""

from __future__ import annotations

import errno
import re
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import trio

from artemis_py import _native
from artemis_py.exceptions import (
    DataDirectoryLockedError,
    DuplicateRecordError,
    JournalCorruptedError,
    JournalFailedError,
    RecordNotFoundError,
    RecordTooLargeError,
    ServerLockCorruptedError,
    StorageError,
    TransactionError,
)
from artemis_py.storage import JournalSettings, Op, open_journal, open_node_manager, open_storage

SMALL = JournalSettings(file_size=64 * 1024)


def first_data_file(directory: Path) -> Path:
    return sorted(directory.glob("activemq-data-*.amq"))[0]


async def test_record_not_found(tmp_path: Path) -> None:
    async with open_journal(tmp_path) as journal:
        with pytest.raises(RecordNotFoundError, match="42"):
            await journal.update(42, 1, b"x")
        with pytest.raises(RecordNotFoundError):
            await journal.delete(42)
        with pytest.raises(RecordNotFoundError):
            journal.submit([Op.delete(42)])


async def test_duplicate_record(tmp_path: Path) -> None:
    async with open_journal(tmp_path) as journal:
        await journal.add(1, 1, b"x")
        with pytest.raises(DuplicateRecordError, match="1"):
            await journal.add(1, 1, b"again")


async def test_validation_is_all_or_nothing(tmp_path: Path) -> None:
    async with open_journal(tmp_path) as journal:
        await journal.add(1, 1, b"x")
        with pytest.raises(DuplicateRecordError):
            await journal.append([Op.add(2, 1, b"new"), Op.add(1, 1, b"dup")])
        await journal.add(2, 1, b"id 2 is still free")
    async with open_journal(tmp_path) as journal:
        assert [(r.id, r.payload) for r in journal.loaded.records] == [
            (1, b"x"),
            (2, b"id 2 is still free"),
        ]


async def test_transaction_errors(tmp_path: Path) -> None:
    async with open_journal(tmp_path) as journal:
        await journal.add_tx(5, 1, 1, b"x")
        await journal.prepare(5, b"xid")
        with pytest.raises(TransactionError, match="5"):
            await journal.add_tx(5, 2, 1, b"after prepare")
        await journal.commit(5)
        with pytest.raises(TransactionError):
            await journal.commit(5)


async def test_record_too_large(tmp_path: Path) -> None:
    async with open_journal(tmp_path, SMALL) as journal:
        with pytest.raises(RecordTooLargeError):
            await journal.add(1, 1, b"x" * (64 * 1024))
        await journal.add(1, 1, b"x" * (32 * 1024))  # a record that fits still does


async def test_journal_directory_that_is_a_file_is_an_os_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "plain-file"
    not_a_dir.write_bytes(b"")
    with pytest.raises(NotADirectoryError) as info:
        async with open_journal(not_a_dir / "journal"):
            pass
    assert info.value.errno == errno.ENOTDIR
    assert info.value.filename is not None
    assert str(not_a_dir) in info.value.filename
    with pytest.raises(OSError, match=re.escape(str(not_a_dir))) as info2:
        async with open_journal(not_a_dir):
            pass
    assert info2.value.errno in (errno.EEXIST, errno.ENOTDIR)
    assert not isinstance(info2.value, StorageError)


async def test_foreign_file_is_journal_corruption(tmp_path: Path) -> None:
    async with open_journal(tmp_path, SMALL):
        pass
    data_file = first_data_file(tmp_path)
    data_file.write_bytes(b"definitely not a journal file".ljust(64 * 1024, b"\0"))
    with pytest.raises(JournalCorruptedError) as info:
        async with open_journal(tmp_path, SMALL):
            pass
    assert info.value.file == str(data_file)
    assert isinstance(info.value, StorageError)


async def test_wrong_file_size_is_journal_corruption(tmp_path: Path) -> None:
    async with open_journal(tmp_path, SMALL):
        pass
    with pytest.raises(JournalCorruptedError) as info:
        async with open_journal(tmp_path, JournalSettings(file_size=128 * 1024)):
            pass
    assert info.value.file is not None
    assert info.value.file.endswith(".amq")


async def test_damaged_record_reports_file_and_offset(tmp_path: Path) -> None:
    async with open_journal(tmp_path, SMALL) as journal:
        for i in range(1, 4):
            await journal.add(i, 1, b"r" * 1000)
    data_file = first_data_file(tmp_path)
    raw = bytearray(data_file.read_bytes())
    # Damage the first batch; two good batches follow, so this is not a torn tail.
    start = next(i for i in range(len(raw)) if raw[i : i + 1000] == b"r" * 1000)
    raw[start + 10] ^= 0xFF
    data_file.write_bytes(bytes(raw))
    with pytest.raises(JournalCorruptedError) as info:
        async with open_journal(tmp_path, SMALL):
            pass
    assert info.value.file == str(data_file)
    assert info.value.offset is not None
    assert 0 < info.value.offset < start


async def test_writer_failure_reaches_every_waiter_with_its_cause(tmp_path: Path) -> None:
    # Remove the directory under a running journal: the next file it needs cannot be
    # created, the journal fails, and every pending and later write says so.
    settings = JournalSettings(file_size=64 * 1024, min_files=1, pool_files=0)
    directory = tmp_path / "journal"
    errors: list[BaseException] = []
    with pytest.raises(JournalFailedError):
        async with open_journal(directory, settings) as journal:
            # The journal's housekeeper may be renaming a pre-allocated file meanwhile.
            while directory.exists():
                shutil.rmtree(directory, ignore_errors=True)

            async def writer(first: int) -> None:
                try:
                    for i in range(first, first + 1000):
                        await journal.add(i, 1, b"f" * 4000)
                except JournalFailedError as exc:
                    errors.append(exc)

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    for t in range(4):
                        nursery.start_soon(writer, t * 10_000)
            assert journal._native.progress()[1]
            with pytest.raises(JournalFailedError):
                await journal.add(10**9, 1, b"after the failure")
    assert len(errors) == 4
    for exc in errors:
        assert isinstance(exc.__cause__, FileNotFoundError)
        assert exc.__cause__.errno == errno.ENOENT


LOCK_HOLDER = """
import sys
from artemis_py import _native
nm = _native.NodeManager.open(sys.argv[1])
print(nm.node_id, flush=True)
sys.stdin.readline()
"""


async def test_data_directory_locked_by_another_process(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        proc: trio.Process = await nursery.start(
            partial(
                trio.run_process,
                [sys.executable, "-c", LOCK_HOLDER, str(tmp_path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        )
        assert proc.stdout is not None
        assert proc.stdin is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                line += await proc.stdout.receive_some(100)
        child_id = line.decode().strip()

        with pytest.raises(DataDirectoryLockedError) as info:
            async with open_node_manager(tmp_path):
                pass
        assert info.value.directory == str(tmp_path)
        assert str(info.value) == (
            f"data directory {tmp_path} is in use by another artemis-py process "
            "(server.lock is locked)"
        )
        with pytest.raises(DataDirectoryLockedError):
            async with open_storage(tmp_path, tmp_path / "bindings"):
                pass
        await proc.stdin.send_all(b"\n")  # the child exits, releasing the lock

    async with open_node_manager(tmp_path) as nm:
        assert nm.node_id == child_id


async def test_we_lock_out_another_process(tmp_path: Path) -> None:
    async with open_node_manager(tmp_path):
        result = await trio.run_process(
            [sys.executable, "-c", LOCK_HOLDER, str(tmp_path)],
            stdin=b"\n",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode != 0
    assert b"DataDirectoryLockedError" in result.stderr
    assert b"is in use by another artemis-py process" in result.stderr


async def test_corrupt_server_lock(tmp_path: Path) -> None:
    (tmp_path / "server.lock").write_bytes(b"garbage")
    with pytest.raises(ServerLockCorruptedError) as info:
        async with open_node_manager(tmp_path):
            pass
    assert info.value.file == str(tmp_path / "server.lock")
    assert (tmp_path / "server.lock").read_bytes() == b"garbage"  # never replaced


def test_native_errors_carry_errno_and_filename(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"")
    with pytest.raises(NotADirectoryError) as info:
        _native.NodeManager.open(str(target / "sub"))
    assert info.value.errno == errno.ENOTDIR
    assert info.value.filename == str(target / "sub")
    assert info.value.strerror is not None
    assert "Not a directory" in info.value.strerror
