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
cancelled caller may return a little late, never early. A caller that waits for the frame's
RECEIPT next does not wait for the batch at all (``wait_sent=False``): the receipt comes
after the bytes went out, or fails with the connection if they could not.
"""

from __future__ import annotations

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

    __slots__ = ("_batch", "_codec", "_state", "_stream", "_writing", "last_sent")

    def __init__(self, stream: trio.abc.Stream, codec: Connection, state: ConnectionState) -> None:
        self._stream = stream
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
