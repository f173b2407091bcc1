"""A TCP stream with the cost of trio's SocketStream taken off the hot path.

``trio.SocketStream`` makes every ``send_all`` and every ``receive_some`` a full checkpoint:
a cancellation check and a trip through the run queue, plus a context manager or two around
the system call, even when the call did not block. For a broker that is one or two extra
task steps per frame and about a tenth of a node's CPU (py-spy, benchmark scenario 1).

:class:`FastSocketStream` wraps a SocketStream and calls ``send``/``recv`` on its file
descriptor directly, waiting for the socket only when the kernel says it would block. It
keeps the loop fair with a cheaper rule: a ``receive_some`` that returned without waiting
makes the next one start with a checkpoint, so a connection that is always readable still
yields every other read. Sending never yields on its own; the writers that use it wait for
work between sends (a checkpoint each time). One task sends and one receives at a time.

Errors are trio's: a reset or broken connection raises ``BrokenResourceError``, a closed
stream ``ClosedResourceError``.

:func:`close_lingering` closes a connection so that its last bytes (an ERROR frame) reach a
peer that is still sending: closing a socket with unread input makes the kernel answer with
a reset, and a reset throws away what the kernel had not sent yet. So, as web servers do,
the node shuts its sending side (the peer reads to the end and sees it), reads and drops
what still comes, and closes when the peer closes too, after ``LINGER`` seconds or
``LINGER_BYTES`` bytes at most. TLS has no half-close: the TCP connection beneath it is
shut the same way, so the peer gets every record, then the end of the stream without a
``close_notify`` (as before: a forced close never sent one).
"""

from __future__ import annotations

import os

import trio

DEFAULT_RECEIVE_SIZE = 65536
LINGER = 2.0  # seconds a closing connection waits for the peer's end, at most
LINGER_BYTES = 4 << 20  # bytes it reads and drops meanwhile, at most


class FastSocketStream(trio.abc.HalfCloseableStream):
    """``stream`` with lean ``send_all`` and ``receive_some``; everything else delegates."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self.socket = stream.socket
        self._read_without_yield = False

    def _fileno(self) -> int:
        # Looked up per call, not cached: a closed socket reports -1 (an error here), where
        # a cached number could by then belong to another socket.
        fd = self.socket.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("the connection was closed")
        return fd

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        with memoryview(data) as view:
            while view:
                try:
                    sent = os.write(self._fileno(), view)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(self.socket)
                    continue
                except OSError as exc:
                    raise trio.BrokenResourceError(f"send failed: {exc}") from exc
                view = view[sent:]

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._read_without_yield:
            await trio.lowlevel.checkpoint()
        yielded = self._read_without_yield
        while True:
            try:
                data = os.read(self._fileno(), max_bytes or DEFAULT_RECEIVE_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.socket)
                yielded = True
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"receive failed: {exc}") from exc
            self._read_without_yield = not yielded
            return data

    def receive_ready(self, max_bytes: int | None = None) -> bytes | None:
        """What can be read without waiting: None when nothing is there, ``b""`` at the
        end of the stream (a reset too: what arrived before it was read first)."""
        try:
            return os.read(self._fileno(), max_bytes or DEFAULT_RECEIVE_SIZE)
        except BlockingIOError:
            return None
        except (OSError, trio.ClosedResourceError):
            return b""

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()


async def close_lingering(stream: trio.abc.Stream) -> None:
    """Close ``stream`` (a :class:`FastSocketStream`, or TLS over one) after a lingering
    close (see the module doc); other streams are closed at once (a WebSocket lingers in
    its own ``aclose``). Shielded, bounded by ``LINGER``."""
    transport = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    if isinstance(transport, FastSocketStream):
        with trio.CancelScope(shield=True), trio.move_on_after(LINGER):
            try:
                await transport.send_eof()
                budget = LINGER_BYTES
                while budget > 0 and (data := await transport.receive_some(DEFAULT_RECEIVE_SIZE)):
                    budget -= len(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass  # reset or closed: it is over either way
    await trio.aclose_forcefully(stream)
