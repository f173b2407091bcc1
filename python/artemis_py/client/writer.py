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
no cancel scope); only what the socket does not take at once takes the way above. A caller that waits for the frame's
RECEIPT next does not wait for the batch at all (``wait_sent=False``): the receipt comes
after the bytes went out, or fails with the connection if they could not.
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

    __slots__ = ("_batch", "_codec", "_state", "_stream", "_write_now", "_writing", "last_sent")

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
            self._writing = True
            try:
                with trio.CancelScope(shield=True):
                    await self._send_batches()
            finally:
                self._writing = False
        if batch.failed:
            self._state.raise_error()

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
