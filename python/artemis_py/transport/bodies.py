"""Large bodies on their way out: what a connection sends before its outgoing buffer.

A connection (STOMP or cluster link) keeps one outgoing ``bytearray`` that frames are
encoded into and that its writer task sends; that path is unchanged for ordinary messages.
When a frame's body is in a large-message file, the connection moves what its buffer holds
so far, then the body's reference, into a :class:`BodyQueue` and goes on with a fresh
buffer: the writer sends the queue's parts first, streaming each body from its file in
bounded chunks read in a worker thread (:func:`~artemis_py.broker.storage_views.stream_body`:
the broker's view of the large-message files), then the buffer. So frames stay in order and a body is never in memory whole.

``queued`` counts the bytes still to send from the queue, a body's whole length until it is
sent, so a connection's high-water mark (consumers and bridges pause above it) counts large
bodies. Each queued body's file is pinned until it is sent or the connection ends, so a
delete (an auto-ack acknowledges at delivery) cannot remove it under the writer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

from artemis_py.broker.message import LargeBody
from artemis_py.broker.storage_views import pin, stream_body, unpin


class BodyQueue:
    """Byte strings and bodies in files, in the order they go out."""

    __slots__ = ("parts", "queued")

    def __init__(self) -> None:
        self.parts: deque[bytes | bytearray | LargeBody] = deque()
        self.queued = 0

    def push(self, before: bytearray, body: LargeBody) -> None:
        """Queue ``before`` (the connection's buffer so far, now owned here), then ``body``."""
        pin(body)
        if before:
            self.parts.append(before)
            self.queued += len(before)
        self.parts.append(body)
        self.queued += body.length

    async def send(self, send_all: Callable[[bytes | bytearray], Awaitable[object]]) -> None:
        """Send every queued part (raises what ``send_all`` raises, or
        :class:`~artemis_py.broker.storage_views.BodyReadError`)."""
        parts = self.parts
        while parts:
            part = parts.popleft()
            if not isinstance(part, LargeBody):
                self.queued -= len(part)
                await send_all(part)
                continue
            left = part.length

            def sent(n: int) -> None:
                nonlocal left
                left -= n
                self.queued -= n

            try:
                await stream_body(part, send_all, sent)
            finally:
                self.queued -= left
                unpin(part)

    def close(self) -> None:
        """The connection ended: what was not sent releases its files."""
        while self.parts:
            part = self.parts.popleft()
            if isinstance(part, LargeBody):
                unpin(part)
        self.queued = 0
