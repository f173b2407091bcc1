"""``artemis-py data print|summary``: read a stopped node's data directory.

Finding the directories (the data directory, or the broker.xml that names them), refusing a
running node, and reading the journals without touching them: opening a journal recovers it,
and recovery writes (it cuts a torn tail, renames and pre-allocates files), so the journals
are copied to a temporary directory and the copies are opened. Page files are read in place:
``read_page_file`` never writes. What is shown and counted lives in :mod:`.data_view`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import trio

from artemis_py.cli import data_view
from artemis_py.cli.run import instance_dir
from artemis_py.config import load_config
from artemis_py.exceptions import ArtemisError
from artemis_py.node import journal_settings
from artemis_py.storage import JournalSettings, LoadReport, open_journal
from artemis_py.storage.broker_storage import bindings_settings
from artemis_py.storage.paging import read_page_file

SERVER_LOCK = "server.lock"
MESSAGES_FILES = ("activemq-data", "amq")
BINDINGS_FILES = ("activemq-bindings", "bindings")


class DataError(Exception):
    """A one-line reason why the data directory cannot be read."""


@dataclass(frozen=True, slots=True)
class DataDirs:
    journal: Path
    bindings: Path
    paging: Path
    settings: JournalSettings


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "data",
        help="print or count what a stopped node's data directory holds",
        description="Read a stopped node's journals and page files (a running node is "
        "refused). The journals are copied to a temporary directory first, so nothing "
        "under DIR is ever modified.",
    )
    sub = parser.add_subparsers(
        dest="data_command", metavar="COMMAND", required=True, help="print or summary"
    )
    show = sub.add_parser(
        "print",
        help="print the records, one per line",
        description="Print the bindings journal (addresses, queues, id blocks), the messages "
        "journal (messages with their queue references, duplicate ids, page cursors, "
        "prepared transactions) and the page files with their cursors. With no option: all "
        "three.",
    )
    _location_arguments(show)
    show.add_argument("--bindings", action="store_true", help="the bindings journal")
    show.add_argument("--journal", action="store_true", help="the messages journal")
    show.add_argument("--paging", action="store_true", help="the page files and cursors")
    show.set_defaults(func=print_command)
    summary = sub.add_parser(
        "summary",
        help="messages per queue (journal, paged, total), page stores, journal files",
        description="Count, per queue, the messages in the journal and in page files "
        "(minus the paged ones it acknowledged); per address, its pages; per journal, its "
        "files.",
    )
    _location_arguments(summary)
    summary.add_argument("--json", action="store_true", help="print the summary as JSON")
    summary.set_defaults(func=summary_command)


def _location_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        nargs="?",
        type=Path,
        metavar="DIR",
        help="the node's data directory, holding journal/, bindings/ and paging/ (default ./data)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="the node's broker.xml: take the directories (and journal settings) from it "
        "instead of DIR",
    )


def locate(args: argparse.Namespace) -> DataDirs:
    if args.config is not None:
        if args.dir is not None:
            raise DataError("give DIR or --config, not both")
        try:
            config = load_config(args.config)
        except ArtemisError as exc:
            raise DataError(str(exc)) from None
        if not config.persistence_enabled:
            raise DataError(f"{args.config} has persistence disabled: the node stores nothing")
        base = instance_dir(args.config)
        return DataDirs(
            base / config.journal.directory,
            base / config.journal.bindings_directory,
            base / config.paging_directory,
            journal_settings(config),
        )
    root = args.dir if args.dir is not None else Path("data")
    if not root.is_dir():
        raise DataError(f"{root} is not a directory")
    return DataDirs(root / "journal", root / "bindings", root / "paging", JournalSettings())


# -- the lock and the snapshot -----------------------------------------------------------------


def _lock_holder(path: Path) -> str:
    """``pid N`` of the process holding a lock on ``path`` (from /proc/locks), if known."""
    try:
        inode = path.stat().st_ino
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return "pid unknown"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF" (a "->" marks a waiter)
        if len(fields) >= 6 and fields[1] != "->" and fields[5].rsplit(":", 1)[-1] == str(inode):
            return f"pid {fields[4]}"
    return "pid unknown"


@contextlib.contextmanager
def stopped(journal_dir: Path) -> Iterator[None]:
    """Hold a shared lock on ``server.lock`` while reading, so no node starts meanwhile.

    A running node holds an exclusive one: then the directory is refused. A node started
    during the read fails with "data directory in use" and can be started again after.
    """
    path = journal_dir / SERVER_LOCK
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        yield  # no node ever ran on it
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataError(
                f"node is running ({_lock_holder(path)}): {path} is locked; stop it first"
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def _copy_files(source: Path, target: Path) -> None:
    target.mkdir()
    for entry in source.iterdir():
        if entry.name not in data_view.NODE_FILES and entry.is_file():
            shutil.copyfile(entry, target / entry.name)


def _file_size(directory: Path, prefix: str, extension: str, default: int) -> int:
    """The size of the journal's data files: the journal refuses files of another size, and
    a data directory does not say which journal-file-size wrote it."""
    for entry in directory.glob(f"{prefix}-*.{extension}"):
        return entry.stat().st_size
    return default


async def _load(dirs: DataDirs, copy: Path) -> tuple[LoadReport, LoadReport]:
    settings = dataclasses.replace(
        dirs.settings,
        file_size=_file_size(dirs.journal, *MESSAGES_FILES, dirs.settings.file_size),
        compact_min_files=0,  # never compact the copy: it only has to be read
    )
    bindings = bindings_settings(settings)
    bindings = dataclasses.replace(
        bindings, file_size=_file_size(dirs.bindings, *BINDINGS_FILES, bindings.file_size)
    )
    async with open_journal(copy / "journal", settings) as journal:
        messages_report = journal.loaded
    prefix, extension = BINDINGS_FILES
    async with open_journal(
        copy / "bindings", bindings, file_prefix=prefix, file_extension=extension
    ) as journal:
        bindings_report = journal.loaded
    assert messages_report is not None
    assert bindings_report is not None
    return messages_report, bindings_report


@contextlib.contextmanager
def open_data(dirs: DataDirs) -> Iterator[data_view.Inventory]:
    """The node's journals (read from copies) and page stores, while no node runs on them."""
    for what, path in (("journal", dirs.journal), ("bindings", dirs.bindings)):
        if not path.is_dir():
            raise DataError(f"no {what} directory {path}: is this a node's data directory?")
    with stopped(dirs.journal), tempfile.TemporaryDirectory(prefix="artemis-py-data-") as tmp:
        copy = Path(tmp)
        _copy_files(dirs.journal, copy / "journal")
        _copy_files(dirs.bindings, copy / "bindings")
        messages, bindings = trio.run(_load, dirs, copy)
        yield data_view.Inventory.build(
            messages,
            bindings,
            journal_dirs={"messages": dirs.journal, "bindings": dirs.bindings},
            paging_dir=dirs.paging,
            read_page=read_page_file,
        )


# -- the commands ------------------------------------------------------------------------------


def _run(args: argparse.Namespace, body: Callable[[data_view.Inventory], Iterator[str]]) -> int:
    try:
        dirs = locate(args)
        with open_data(dirs) as inventory:
            for line in body(inventory):
                sys.stdout.write(line + "\n")
            sys.stdout.flush()
    except BrokenPipeError:
        # `... | head`: stop quietly; point stdout at /dev/null so the exit flush is silent.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (DataError, ArtemisError, OSError) as exc:
        print(f"artemis-py: {exc}", file=sys.stderr)
        return 1
    return 0


def print_command(args: argparse.Namespace) -> int:
    every = not (args.bindings or args.journal or args.paging)

    def body(inventory: data_view.Inventory) -> Iterator[str]:
        parts: list[Iterator[str]] = []
        if every or args.bindings:
            parts.append(inventory.print_bindings())
        if every or args.journal:
            parts.append(inventory.print_messages())
        if every or args.paging:
            parts.append(inventory.print_paging())
        for i, part in enumerate(parts):
            if i:
                yield ""
            yield from part

    return _run(args, body)


def summary_command(args: argparse.Namespace) -> int:
    def body(inventory: data_view.Inventory) -> Iterator[str]:
        summary = inventory.summary()
        if args.json:
            yield json.dumps(summary, indent=2)
        else:
            yield from data_view.render_summary(summary)

    return _run(args, body)
