"""The one exception hierarchy of artemis-py.

Everything the package raises on purpose derives from :class:`ArtemisError`. Errors that come
from the operating system are raised as the built-in :class:`OSError` subclasses with their
``errno`` and ``filename`` intact (so ``except FileNotFoundError`` works); the native extension
maps its errors onto exactly these classes (``rust/bindings/src/error.rs``).
"""

from __future__ import annotations


class ArtemisError(Exception):
    """Base class of every error artemis-py raises on purpose."""


class ConfigError(ArtemisError):
    """A configuration file is invalid (the message lists every problem with file and line)."""


class BrokerError(ArtemisError):
    """An operation a client asked for cannot be done (the text is for the client)."""


class StorageError(ArtemisError):
    """Base class of journal and data-directory errors."""


class DataDirectoryLockedError(StorageError):
    """Another process holds the lock on this data directory (``server.lock``)."""

    def __init__(self, message: str, directory: str | None = None) -> None:
        super().__init__(message)
        self.directory = directory


class JournalCorruptedError(StorageError):
    """A journal file holds bytes that are neither a valid record nor a torn tail.

    ``file`` and ``offset`` say where; the journal refuses to open rather than guess.
    """

    def __init__(self, message: str, file: str | None = None, offset: int | None = None) -> None:
        super().__init__(message)
        self.file = file
        self.offset = offset


class JournalFailedError(StorageError):
    """An earlier write or sync failed; the journal refuses further writes.

    What was durable before the failure stays durable; reopen the journal to continue.
    """


class JournalClosedError(StorageError):
    """The journal was closed."""


class RecordNotFoundError(StorageError):
    """An update or delete named a record id that is not live in the journal."""


class DuplicateRecordError(StorageError):
    """An add named a record id that is already live in the journal."""


class TransactionError(StorageError):
    """A transactional operation named an unknown, finished or already prepared transaction."""


class RecordTooLargeError(StorageError):
    """A record does not fit in one journal file (records never span files)."""


class ReplicationError(StorageError):
    """Journal replication failed: started twice, or a replication stream the backup cannot
    apply (a corrupt or truncated frame, or ops its journal refuses). The message names the
    frame and what is wrong with it.
    """


class PageFileCorruptedError(JournalCorruptedError):
    """A page file (or a page store's directory) holds what is neither valid nor a torn tail
    of the last page: another format or version, or a bad record before the end.

    ``file`` names it (the page file, or the store directory) and ``offset`` says where.
    """


class PageStoreFailedError(JournalFailedError):
    """An earlier write or sync of a page store failed; it refuses further writes.

    The message names the file; what was synced before the failure stays.
    """


class PageStoreClosedError(JournalClosedError):
    """The page store was closed."""


class ServerLockCorruptedError(StorageError):
    """``server.lock`` exists but does not hold a valid node ID.

    It is never replaced silently: a new ID would make the cluster see a new node owning the
    old node's messages. ``file`` is the path of the bad file.
    """

    def __init__(self, message: str, file: str | None = None) -> None:
        super().__init__(message)
        self.file = file


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, through nested exception groups (``exc`` itself when
    it is not a group): what to report of a nursery's failure."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
