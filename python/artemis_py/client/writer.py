"""The write side of a client connection: frames encoded in call order, written whole, and
written together when they pile up.

Combined writes
---------------
A frame is encoded when it is written, with no checkpoint in between, so the codec's state
follows wire order. The first writer sends; frames written while it is in ``send_all`` wait
in a batch that it sends next, in one system call, and their writers wait for that send.
This is what makes the client a load generator: many producer tasks on one connection cost
one system call per batch, not one per frame. Every wait is shielded from cancellation: a
frame once encoded always goes out whole (hypercorn shields its sends the same way), and a
cancelled caller may return a little late, never early. On a plain TCP stream, a frame
written when nothing is queued goes straight to the socket (``os.write``, no task step and
no cancel scope); only what the socket does not take at once takes the way above. A caller
that waits for the frame's RECEIPT next does not wait for the batch at all
(``wait_sent=False``): the receipt comes after the bytes went out, or fails with the
connection if they could not.

Corked frames
-------------
Such a frame (its caller waits for the RECEIPT) is not even written at once on a plain TCP
stream: it is *corked* until the end of the loop's pass, when a Trio instrument
(``before_io_wait``, once per run) writes each connection's corked frames in one
``os.write``. The receipts of one server batch wake a connection's senders in one pass, so
their next frames cost one system call together instead of one each; nothing waits longer
than the pass. A frame written without corking meanwhile goes after the corked ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import trio

from artemis_py.client.errors import (
    TRANSPORT_ERRORS,
    ClientError,
    ConnectionLostError,
    describe,
)
from artemis_py.client.state import ConnectionState
from artemis_py.protocol.stomp import Connection, Frame, LocalProtocolError

__all__ = ["FrameWriter"]

_ERROR_GRACE = 1.0  # seconds the reader gets, after a failed write, to read an ERROR frame


class _Batch:
    """Encoded frames that go out in one ``send_all``; their writers wait for ``sent``."""

    __slots__ = ("chunks", "failed", "sent")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.sent = trio.Event()
        self.failed = False


class FrameWriter:
    """Encodes with the connection's codec and writes to its stream (see the module doc).

    ``last_sent`` is the :func:`trio.current_time` of the last completed write; the
    heart-beat sender counts any write as a beat.
    """

    __slots__ = (
        "_batch",
        "_codec",
        "_corked",
        "_state",
        "_stream",
        "_write_now",
        "_writing",
        "last_sent",
    )

    def __init__(
        self,
        stream: trio.abc.Stream,
        codec: Connection,
        state: ConnectionState,
        socket: trio.socket.SocketType | None = None,
    ) -> None:
        """``socket``: the TCP socket under ``stream`` when ``stream`` writes straight to it
        (a FastSocketStream), so that frames can be written to it directly."""
        self._stream = stream
        self._write_now = _direct_write(socket) if socket is not None else None
        self._codec = codec
        self._state = state
        self._batch = _Batch()  # frames waiting for the task in send_all
        self._writing = False  # a task is sending (and will send _batch next)
        self._corked: list[bytes] = []  # written at the pass's end (module doc)
        self.last_sent = trio.current_time()

    def encode(self, frame: Frame) -> bytes:
        """The bytes of ``frame``; an unencodable frame ends the connection (and raises)."""
        try:
            return self._codec.send(frame)
        except LocalProtocolError as exc:
            # The codec refuses every later send once one failed (h11's rule), so the
            # connection is done; the caller gets the precise LocalProtocolError.
            self._state.fail(
                ClientError(f"connection unusable after an unencodable {frame.command}: {exc}"),
                exc,
            )
            self._state.failure_seen = True
            raise

    def heartbeat(self) -> bytes:
        """The bytes of one heart-beat (an EOL)."""
        return self._codec.send_heartbeat()

    async def write(self, data: bytes, *, wait_sent: bool = True) -> None:
        """Write ``data`` whole, after everything written before it (see the module doc).

        ``wait_sent=False`` is for a frame whose caller waits for its RECEIPT next: when a
        send is in progress the frame joins the next batch and this returns at once (the
        sending task writes it; a failed write fails the connection, and so the receipt).
        """
        if not self._writing and self._write_now is not None:
            if not wait_sent:
                if not self._corked:
                    _pass_end().writers.append(self)
                self._corked.append(data)
                return
            if self._corked:  # (after the frames corked before it)
                data = b"".join([*self._corked, data])
                self._corked.clear()
            # Nothing is queued: what the socket takes at once needs no task and no shield.
            written = self._write_now(data)
            if written == len(data):
                self.last_sent = trio.current_time()
                return
            data = data[written:]  # the rest (and any error) goes the usual way
        batch = self._batch
        batch.chunks.append(data)
        if self._writing:
            if not wait_sent:
                return
            with trio.CancelScope(shield=True):
                await batch.sent.wait()
        else:
            await self._send_queued()
        if batch.failed:
            self._state.raise_error()

    def uncork(self) -> None:
        """At the pass's end: write the corked frames, in one system call if the socket
        takes them; what it does not take goes the usual way, sent by a task of its own."""
        if not self._corked:
            return  # (written meanwhile, before a frame that was not corked)
        data = b"".join(self._corked)
        self._corked.clear()
        assert self._write_now is not None  # (only a plain TCP stream corks)
        written = self._write_now(data)
        if written == len(data):
            self.last_sent = trio.current_time()
            return
        self._batch.chunks.append(data[written:])
        if not self._writing:  # (else the task sending now sends it next)
            self._writing = True  # (from now: a write meanwhile joins the batch)
            trio.lowlevel.spawn_system_task(self._send_rest)

    async def _send_rest(self) -> None:
        try:
            await self._send_queued()
        except Exception as exc:  # (a system task must not raise: it would end the run)
            self._state.fail(ConnectionLostError(f"connection lost: {describe(exc)}"), exc)

    async def _send_queued(self) -> None:
        """Send the batches as the writing task, shielded (a frame goes out whole)."""
        self._writing = True
        try:
            with trio.CancelScope(shield=True):
                await self._send_batches()
        finally:
            self._writing = False

    async def _send_batches(self) -> None:
        while self._batch.chunks:
            batch, self._batch = self._batch, _Batch()
            try:
                await self._stream.send_all(b"".join(batch.chunks))
            except TRANSPORT_ERRORS as exc:
                # A server that refuses a frame sends ERROR and closes; the rest of our bytes
                # then meet a reset. The ERROR says why: give the reader a moment to read it
                # before the failure is recorded as a lost connection.
                with trio.move_on_after(_ERROR_GRACE):
                    await self._state.finished.wait()
                self._state.fail(
                    ConnectionLostError(f"connection to the server lost: {describe(exc)}"), exc
                )
                batch.failed = self._batch.failed = True
                self._batch.sent.set()  # frames queued behind the failed send fail with it
                self._batch = _Batch()
                return
            finally:
                batch.sent.set()
            self.last_sent = trio.current_time()


def _direct_write(sock: trio.socket.SocketType) -> Callable[[bytes], int]:
    """A function that writes what ``sock`` takes without waiting and returns how much that
    was (0 when it would block or fails: the stream's own ``send_all`` then meets the
    condition and waits or raises as usual)."""

    def write_now(data: bytes) -> int:
        fd = sock.fileno()  # -1 once closed
        if fd < 0:
            return 0
        try:
            return os.write(fd, data)
        except OSError:
            return 0

    return write_now


class _PassEnd(trio.abc.Instrument):
    """Writes the corked frames of every connection of this run before the loop polls."""

    def __init__(self) -> None:
        self.writers: list[FrameWriter] = []

    def before_io_wait(self, timeout: float) -> None:
        if self.writers:
            writers, self.writers = self.writers, []
            for writer in writers:
                writer.uncork()


_PASS_END: trio.lowlevel.RunVar[_PassEnd] = trio.lowlevel.RunVar("artemis_py_client_pass_end")


def _pass_end() -> _PassEnd:
    """This run's instrument, added on first use."""
    try:
        return _PASS_END.get()
    except LookupError:
        instrument = _PassEnd()
        trio.lowlevel.add_instrument(instrument)
        _PASS_END.set(instrument)
        return instrument
