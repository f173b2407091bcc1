"""Type stubs of the native extension (``rust/bindings``).

Blocking methods release the GIL; call them through ``trio.to_thread.run_sync`` (the
``artemis_py.storage`` facade does). ``submit``, ``progress``, ``error``, ``stats`` and
``fileno`` never do I/O and are meant for the event loop. ``StompConnection`` is the STOMP
codec (``artemis_py.protocol.stomp.Connection``): no I/O at all.
"""

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, final, overload

from artemis_py.broker.message import Message
from artemis_py.protocol.stomp.frames import ConnectionClosed, Frame, Heartbeat, Sentinel
from artemis_py.protocol.stomp.limits import FrameLimits
from artemis_py.protocol.stomp.roles import ConnectionState, Role
from artemis_py.storage.ops import Op

@final
class Update:
    """One update of a record."""

    @property
    def record_type(self) -> int: ...
    @property
    def payload(self) -> bytes: ...

@final
class Record:
    """A live record after a load: its add, then its updates in append order."""

    @property
    def id(self) -> int: ...
    @property
    def record_type(self) -> int: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def updates(self) -> tuple[Update, ...]: ...

@final
class Records(Sequence[Record]):
    """The live records of a load, sorted by id. Kept native: each ``Record`` is made when it
    is looked at (two lookups give distinct objects); a slice gives a tuple."""

    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, index: int) -> Record: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Record, ...]: ...
    def __iter__(self) -> Iterator[Record]: ...

@final
class PreparedTransaction:
    """Prepared (two-phase commit) but not yet committed or rolled back."""

    @property
    def tx_id(self) -> int: ...
    @property
    def xid(self) -> bytes: ...
    @property
    def ops(self) -> tuple[Op, ...]: ...

@final
class LoadReport:
    """What opening a journal recovered."""

    @property
    def records(self) -> Records: ...  # sorted by id
    @property
    def prepared(self) -> tuple[PreparedTransaction, ...]: ...  # made on first access
    @property
    def incomplete_transactions_rolled_back(self) -> int: ...
    @property
    def torn_tail(self) -> tuple[Path, int] | None: ...  # (file, offset) where a torn tail was cut

@final
class JournalStats:
    @property
    def data_files(self) -> int: ...
    @property
    def free_files(self) -> int: ...
    @property
    def live_records(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def syncs(self) -> int: ...
    @property
    def records_written(self) -> int: ...
    @property
    def bytes_written(self) -> int: ...
    @property
    def compactions(self) -> int: ...

@final
class CompactionReport:
    @property
    def files_before(self) -> int: ...
    @property
    def files_after(self) -> int: ...
    @property
    def records_moved(self) -> int: ...

@final
class ReplicationStart:
    """What ``Journal.replication_start()`` returns."""

    @property
    def files(self) -> list[str]: ...  # absolute paths of the data files to copy, by file id
    @property
    def through(self) -> int: ...  # ticket of the last submit before the tap (0 if none)

@final
class ReplicationState:
    """Replication as metrics see it (``Journal.replication_state()``)."""

    @property
    def active(self) -> bool: ...
    @property
    def gate(self) -> bool: ...
    @property
    def through(self) -> int: ...
    @property
    def replicated_through(self) -> int: ...
    @property
    def pending_bytes(self) -> int: ...

class GroupCommitStore:
    """The base of Journal and PageStore: their tickets' completion, as the facade's
    waiters see it (the shared group-commit writer)."""

    def wake_writer(self) -> None:
        """Wake the writer if a deferred submit left it asleep with work due."""
    def wait(self, ticket: int) -> None:
        """Block until the ticket is durable (sync) or written. GIL released."""
    def progress(self) -> tuple[int, bool]:
        """(completed ticket, writer failed)."""
    def error(self) -> None:
        """Raise the store's failed error (cause chained) if the writer failed."""
    def fileno(self) -> int:
        """The eventfd that becomes readable after batches complete or the writer fails."""

@final
class Journal(GroupCommitStore):
    """One open journal with its writer thread and completion eventfd."""

    @staticmethod
    def open(
        directory: str | os.PathLike[str],
        *,
        file_prefix: str | None = None,
        file_extension: str | None = None,
        file_size: int | None = None,
        min_files: int | None = None,
        pool_files: int | None = None,
        buffer_size: int | None = None,
        buffer_timeout_ns: int | None = None,
        datasync: bool | None = None,
        compact_min_files: int | None = None,
        compact_percentage: int | None = None,
    ) -> tuple[Journal, LoadReport]:
        """Create if missing, recover, start the writer. Blocks; GIL released."""
    @property
    def directory(self) -> Path: ...
    def submit(
        self, ops: Iterable[Op], sync: bool, flush: bool = False, defer: bool = False
    ) -> int:
        """Validate and queue one batch; returns its ticket. No I/O. ``flush``: a non-sync
        batch is written without waiting for company, not synced. ``defer``: the writer
        stays asleep until wake_writer() (call it soon)."""
    def append(self, ops: Iterable[Op], sync: bool) -> None:
        """submit + wait. Blocks; GIL released."""
    def compact(self) -> CompactionReport:
        """Blocks; GIL released."""
    def stats(self) -> JournalStats: ...
    def replication_start(self) -> ReplicationStart:
        """Tap every later submit as a frame; write everything before into ``files``, which
        stay untouched (reclaim and compaction pause) until replication_stop(). Wait for
        ``through``, then copy them into the backup's directory. Blocks; GIL released.
        ReplicationError if already started."""
    def replication_take(self) -> bytes:
        """The frames tapped since the last take, concatenated (b"" if none). No I/O."""
    def replication_gate(self, on: bool) -> None:
        """While on, a ticket issued after the switch completes only once replicated."""
    def replicated(self, ticket: int) -> None:
        """The backup has every ticket up to ``ticket`` durably (lower values ignored)."""
    def replication_stop(self) -> None:
        """Tap off (pending frames dropped), gate off, reclaim resumes. Idempotent."""
    def replication_state(self) -> ReplicationState: ...
    def apply_replicated(self, frames: bytes) -> tuple[int, int]:
        """Backup: verify, then submit each frame's ops as the primary did. Returns (primary
        ticket of the last frame, local ticket of its submit), (0, 0) for b"". A corrupt
        frame raises ReplicationError before anything is applied; a refused one after the
        frames before it are applied. No I/O; GIL released."""
    def close(self) -> None:
        """Flush, stop the writer, fsync, release files. Idempotent. Blocks; GIL released."""

@final
class NodeManager:
    """The lock on ``server.lock`` in a journal directory, and the node ID it holds."""

    @staticmethod
    def open(directory: str | os.PathLike[str]) -> NodeManager:
        """Lock (creating the directory and the node ID if needed). Blocks; GIL released."""
    @staticmethod
    def try_open(directory: str | os.PathLike[str]) -> NodeManager | None:
        """As ``open``, but None while another holder has the lock. Blocks; GIL released."""
    @property
    def node_id(self) -> str: ...
    @property
    def directory(self) -> Path: ...
    @property
    def locked(self) -> bool: ...
    def close(self) -> None:
        """Release the lock. Idempotent."""

@final
class BackupLock:
    """A shared-store backup's lock (``server.backup.lock``), held until ``close()``."""

    @staticmethod
    def try_acquire(directory: str | os.PathLike[str]) -> BackupLock | None:
        """The lock, or None while another backup holds it. Blocks briefly; GIL released."""
    def close(self) -> None:
        """Release the lock. Idempotent."""

def read_activation_state(directory: str | os.PathLike[str]) -> str:
    """``server.state``: "not-started", "live", "paused" or "failing-back"."""

def read_node_id(directory: str | os.PathLike[str]) -> str | None:
    """The node ID in ``server.lock``, read without locking; None if there is none yet."""

def write_activation_state(directory: str | os.PathLike[str], state: str) -> None:
    """Write ``server.state`` durably (fsync)."""

@final
class PageStore(GroupCommitStore):
    """One address's page store with its writer thread and completion eventfd."""

    @staticmethod
    def open(
        directory: str | os.PathLike[str], *, page_size: int, address: str | None = None
    ) -> PageStore: ...
    @property
    def directory(self) -> Path: ...
    @property
    def address(self) -> str: ...
    @property
    def page_size(self) -> int: ...
    @property
    def torn(self) -> tuple[int, int] | None: ...
    @property
    def current_page(self) -> int: ...
    def pages(self) -> list[int]: ...
    def page_version(self, page: int) -> int | None: ...
    def end(self) -> tuple[int, int]: ...
    def written(self) -> tuple[int, int]: ...
    def append(
        self,
        records: Sequence[tuple[int, int, Sequence[int], bytes, int]],
        sync: bool,
        defer: bool = False,
    ) -> tuple[int, list[tuple[int, int]]]: ...
    def read(
        self, page: int, offset: int, max_records: int, max_bytes: int
    ) -> tuple[list[tuple[int, int, int, int, tuple[int, ...], bytes, int]], int, bool]: ...
    def count(self, page: int) -> dict[tuple[int, int], int]: ...
    def delete_page(self, page: int) -> None: ...
    def delete(self) -> None: ...
    def close(self) -> None: ...
    def stats(self) -> dict[str, int]: ...

def read_page_file(
    path: str | os.PathLike[str],
) -> tuple[
    int, list[tuple[int, int, int, int, tuple[int, ...], bytes, int]], tuple[int, str] | None
]: ...

@final
class StompConnection:
    """One end of a STOMP connection, without I/O (the ``stomp`` crate)."""

    def __init__(self, our_role: Role, limits: FrameLimits = ...) -> None: ...
    @property
    def version(self) -> str | None: ...
    @property
    def our_state(self) -> ConnectionState: ...
    @property
    def their_state(self) -> ConnectionState: ...
    @property
    def our_role(self) -> Role: ...
    @property
    def their_role(self) -> Role: ...
    @property
    def limits(self) -> FrameLimits: ...
    def receive_data(self, data: bytes | bytearray | memoryview) -> None: ...
    def next_event(self) -> Frame | Heartbeat | ConnectionClosed | Sentinel: ...
    def next_events(self) -> list[Frame | Heartbeat | ConnectionClosed]: ...
    def accept_connect(self, version: str) -> None: ...
    def send(self, frame: Frame, body_length: int | None = None) -> bytes: ...
    def send_heartbeat(self) -> bytes: ...

def encode_message_record(
    flags: int,
    routing: int,
    priority: int,
    timestamp: int,
    expiration: int,
    address: str,
    properties: tuple[tuple[str, str], ...],
    tail: bytes,
) -> bytes: ...
def stomp_decode_headers(block: bytes, rules: str) -> tuple[tuple[str, str], ...]: ...
def stomp_frame_mode(mode: int) -> int: ...
def stomp_encode_frame(frame: Frame, rules: str, body_length: int | None = None) -> bytes: ...
def stomp_encode_message(
    version: str, headers: Sequence[tuple[str, str]], message: Message
) -> bytes: ...
def stomp_encode_receipt(version: str, receipt: str, duplicate: bool = False) -> bytes: ...
def stomp_decode_frame(
    data: bytes, version: str | None
) -> tuple[Frame | Heartbeat | None, int]: ...

@final
class DataPlaneConn:
    """One data plane connection's handle (from its ``OPENED`` event); commands name it."""

    @property
    def id(self) -> int: ...
    @property
    def outgoing(self) -> int: ...
    def writable(self) -> bool: ...

@final
class DataPlaneLease:
    """A handed-off connection's place in its listener's ``connectionsAllowed``."""

    def release(self) -> None: ...

@final
class DataPlaneEvents:
    """What one ``DataPlane.drain()`` took: its events' tuples, each made as it is reached.
    An event that cannot be made raises and is dropped; iterating on goes past it."""

    def __iter__(self) -> DataPlaneEvents: ...
    def __next__(self) -> tuple[Any, ...]: ...
    def __len__(self) -> int: ...

@final
class DataPlane:
    """The Rust I/O threads serving STOMP connections (``rust/dataplane``).

    Events are tuples ``(kind, conn_id, ...)``: ``(OPENED, id, DataPlaneConn, listener_id,
    (host, port))``, ``(FRAME, id, Frame)``, ``(PROTOCOL_ERROR, id, RemoteProtocolError)``,
    ``(COMMAND_FAILED, id, LocalProtocolError)``, ``(WRITABLE, id)``, ``(TTL_EXPIRED, id,
    silent_seconds)``, ``(REST_READ, id)``, ``(INPUT_ENDED, id, unread)``, ``(CLOSED, id,
    cause, detail)`` (cause: "reset", "handshake-timeout", "requested", "flush-timeout",
    "tls" (detail: why the handshake failed), "panic", "shutdown"), ``(HANDED_OFF, id,
    socket.socket, initial_bytes, DataPlaneLease)`` (a TLS listener's: one end of a Unix
    socket pair the plane relays the plaintext through, its lease holding nothing),
    ``(REFUSED, None, listener_id, (host, port))``. Commands are tuples ``(op, conn, ...)``:
    ``(ACCEPT_CONNECT, conn, version)``, ``(SEND, conn, Frame)``, ``(SEND_MESSAGE, conn,
    headers, Message)`` (the MESSAGE ``stomp_encode_message`` encodes), ``(SEND_RECEIPT, conn,
    receipt_id, duplicate)``, ``(SEND_HEAD, conn, Frame, body_length)``, ``(SEND_BYTES, conn,
    bytes)``, ``(SET_HEARTBEAT, conn, send_every |
    None, expect_within | None)`` (seconds), ``(PAUSE_READING, conn)``, ``(RESUME_READING,
    conn)``, ``(READ_REST, conn)``, ``(CLOSE, conn, flush)``. ``drain``/``submit`` never
    block: they are for the event loop.
    """

    ACCEPT_CONNECT: int
    SEND: int
    SEND_MESSAGE: int
    SEND_RECEIPT: int
    SEND_HEAD: int
    SEND_BYTES: int
    SET_HEARTBEAT: int
    PAUSE_READING: int
    RESUME_READING: int
    READ_REST: int
    CLOSE: int
    OPENED: int
    FRAME: int
    PROTOCOL_ERROR: int
    COMMAND_FAILED: int
    WRITABLE: int
    TTL_EXPIRED: int
    REST_READ: int
    INPUT_ENDED: int
    CLOSED: int
    HANDED_OFF: int
    REFUSED: int
    def __init__(
        self,
        threads: int = 0,
        *,
        high_water: int | None = None,
        low_water: int | None = None,
        close_linger: float | None = None,
        max_queued_events: int | None = None,
    ) -> None: ...
    @property
    def threads(self) -> int: ...
    @property
    def wakeups(self) -> int: ...
    def listen(
        self,
        host: str,
        port: int,
        limits: FrameLimits | None = None,
        *,
        connections_allowed: int = -1,
        handshake_timeout: float | None = None,
        handshake_error: str | None = None,
        tcp_send_buffer: int | None = None,
        tcp_receive_buffer: int | None = None,
        handoff_prefixes: Sequence[bytes] = (),
        tls: tuple[list[bytes], bytes, str, list[bytes], list[str], list[str]] | None = None,
    ) -> tuple[int, tuple[str, int]]:
        """``tls``: ``(cert_chain_der, pkcs8_key_der, "none" | "want" | "need",
        trust_anchors_der, protocols, iana_cipher_suites)``; ValueError if rustls cannot
        serve it."""
    def set_tls(
        self,
        listener_id: int,
        tls: tuple[list[bytes], bytes, str, list[bytes], list[str], list[str]],
    ) -> None:
        """New connections of a TLS listener use ``tls`` (open ones keep theirs)."""
    def unlisten(self, listener_id: int) -> None: ...
    def fileno(self) -> int: ...
    def drain(self) -> DataPlaneEvents: ...
    def submit(self, commands: Iterable[tuple[Any, ...]]) -> None: ...
    def shutdown(self) -> None: ...
