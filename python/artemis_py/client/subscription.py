"""A client subscription: a Trio receive channel of the messages of one SUBSCRIBE.

The connection's reader task puts each MESSAGE into the subscription's unbounded memory
channel; ``receive()`` and ``async for`` take them out in order. When the subscription ends
(``unsubscribe()``, ``disconnect()``) the messages already buffered are still received, then
the channel reports its end (``async for`` stops; ``receive()`` raises
:class:`trio.EndOfChannel`). When the *connection fails*, the buffered messages come first
and then the failure is raised (:class:`~artemis_py.client.StompServerError`,
:class:`~artemis_py.client.ConnectionLostError`, ...), so no delivered message is lost from
view, and no failure is mistaken for a normal end.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

import trio

from artemis_py.client.message import Message

if TYPE_CHECKING:
    from artemis_py.client.connection import ClientConnection

__all__ = ["ACK_MODES", "Subscription"]

ACK_MODES: Final = ("auto", "client", "client-individual")


class Subscription(trio.abc.ReceiveChannel[Message]):
    """The messages of one SUBSCRIBE; made by :meth:`ClientConnection.subscribe`.

    ``aclose()`` (or leaving ``async with subscription:``) unsubscribes if the connection is
    still open, then closes the channel; ``receive()`` afterwards raises
    :class:`trio.ClosedResourceError`, as for any closed Trio channel.
    """

    def __init__(
        self, connection: ClientConnection, sub_id: str, destination: str, ack_mode: str
    ) -> None:
        self.connection = connection
        self.id = sub_id
        self.destination = destination
        self.ack_mode = ack_mode
        self._in, self._out = trio.open_memory_channel[Message](math.inf)

    def __repr__(self) -> str:
        return f"<Subscription {self.id} {self.destination} ack={self.ack_mode}>"

    @property
    def buffered(self) -> int:
        """Messages received from the server and not yet taken out."""
        return self._out.statistics().current_buffer_used

    async def receive(self) -> Message:
        """The next message; see the module doc for how the end and failures show."""
        try:
            return await self._out.receive()
        except trio.EndOfChannel:
            self.connection._raise_if_failed()
            raise

    def receive_nowait(self) -> Message:
        """The next buffered message, or :class:`trio.WouldBlock`."""
        try:
            return self._out.receive_nowait()
        except trio.EndOfChannel:
            self.connection._raise_if_failed()
            raise

    async def unsubscribe(self, *, receipt: bool = True) -> None:
        """Send UNSUBSCRIBE (and wait for its receipt); the channel then ends."""
        await self.connection._unsubscribe(self, receipt=receipt)

    async def aclose(self) -> None:
        try:
            if self.connection.is_open:
                await self.unsubscribe()
        finally:
            self._end()
            await self._out.aclose()

    # Called by the connection's reader task.

    def _deliver(self, message: Message) -> None:
        try:
            self._in.send_nowait(message)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # unsubscribing or closed locally: nobody will read it

    def _end(self) -> None:
        self._in.close()
