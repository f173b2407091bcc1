"""Client subscriptions: Trio receive channels of the messages of one SUBSCRIBE each, and
the table that routes MESSAGE frames to them.

The connection's reader task hands each MESSAGE to :meth:`SubscriptionTable.deliver`, which
puts it into its subscription's unbounded memory channel; ``receive()`` and ``async for``
take them out in order. When the subscription ends (``unsubscribe()``, ``disconnect()``)
the messages already buffered are still received, then the channel reports its end
(``async for`` stops; ``receive()`` raises :class:`trio.EndOfChannel`). When the
*connection fails*, the buffered messages come first and then the failure is raised
(:class:`~artemis_py.client.StompServerError`,
:class:`~artemis_py.client.ConnectionLostError`, ...), so no delivered message is lost from
view, and no failure is mistaken for a normal end.

A subscription asks its connection for exactly three things, the :class:`SubscriptionHost`
protocol: whether it is open, to raise its failure, and to unsubscribe. The table
implements it, so a subscription depends on no private part of the connection.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, Protocol

import trio

from artemis_py.client.errors import ClientError
from artemis_py.client.message import Message
from artemis_py.client.state import ConnectionState
from artemis_py.protocol.stomp import Frame

if TYPE_CHECKING:
    from artemis_py.client.connection import ClientConnection

__all__ = [
    "ACK_MODES",
    "TOPOLOGY_SUBSCRIPTION",
    "Subscription",
    "SubscriptionHost",
    "SubscriptionTable",
]

ACK_MODES: Final = ("auto", "client", "client-individual")
TOPOLOGY_SUBSCRIPTION: Final = "artemis-py.topology"
"""The reserved subscription of topology updates (docs/stomp.md "Topology")."""

log = logging.getLogger("artemis_py.client")


class SubscriptionHost(Protocol):
    """What a :class:`Subscription` needs from its connection."""

    @property
    def is_open(self) -> bool:
        """Whether requests (an UNSUBSCRIBE) can still be made."""
        ...

    def raise_failure(self) -> None:
        """Raise what ended the connection, if it failed (an ERROR frame, a lost socket)."""
        ...

    async def unsubscribe(self, subscription: Subscription, *, receipt: bool) -> None:
        """Send UNSUBSCRIBE for ``subscription`` and end its channel."""
        ...


class Subscription(trio.abc.ReceiveChannel[Message]):
    """The messages of one SUBSCRIBE; made by :meth:`ClientConnection.subscribe`.

    ``aclose()`` (or leaving ``async with subscription:``) unsubscribes if the connection is
    still open, then closes the channel; ``receive()`` afterwards raises
    :class:`trio.ClosedResourceError`, as for any closed Trio channel.
    """

    def __init__(
        self,
        connection: ClientConnection,
        sub_id: str,
        destination: str,
        ack_mode: str,
        *,
        host: SubscriptionHost,
    ) -> None:
        self.connection = connection
        self.id = sub_id
        self.destination = destination
        self.ack_mode = ack_mode
        self._host = host
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
            self._host.raise_failure()
            raise

    def receive_nowait(self) -> Message:
        """The next buffered message, or :class:`trio.WouldBlock`."""
        try:
            return self._out.receive_nowait()
        except trio.EndOfChannel:
            self._host.raise_failure()
            raise

    async def unsubscribe(self, *, receipt: bool = True) -> None:
        """Send UNSUBSCRIBE (and wait for its receipt); the channel then ends."""
        await self._host.unsubscribe(self, receipt=receipt)

    async def aclose(self) -> None:
        try:
            if self._host.is_open:
                await self.unsubscribe()
        finally:
            self._end()
            await self._out.aclose()

    # Called by the table, from the connection's reader task.

    def _deliver(self, message: Message) -> None:
        try:
            self._in.send_nowait(message)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # unsubscribing or closed locally: nobody will read it

    def _end(self) -> None:
        self._in.close()


UnsubscribeRequest = Callable[[Subscription, bool], Awaitable[None]]
"""``await request(subscription, receipt)`` writes the UNSUBSCRIBE frame."""


class SubscriptionTable:
    """The open subscriptions of one connection, by id; the :class:`SubscriptionHost` of
    each. ``send_unsubscribe`` writes an UNSUBSCRIBE frame (the connection's request)."""

    __slots__ = ("_by_id", "_send_unsubscribe", "_state", "topology_hook")

    def __init__(self, state: ConnectionState, send_unsubscribe: UnsubscribeRequest) -> None:
        self._state = state
        self._send_unsubscribe = send_unsubscribe
        self._by_id: dict[str, Subscription] = {}
        # Takes the topology updates of a connection that asked for them (docs/stomp.md).
        self.topology_hook: Callable[[Frame], None] | None = None
        state.on_shutdown(self._end_all)

    def __contains__(self, sub_id: str) -> bool:
        return sub_id in self._by_id

    def get(self, sub_id: str) -> Subscription | None:
        return self._by_id.get(sub_id)

    def add(self, subscription: Subscription) -> None:
        """Route MESSAGE frames to ``subscription`` from now on (even before its RECEIPT)."""
        if subscription.id in self._by_id:
            raise ValueError(f"subscription id {subscription.id!r} is already in use")
        self._by_id[subscription.id] = subscription

    def deliver(self, frame: Frame) -> None:
        """Hand a MESSAGE frame to its subscription (dropped if there is none)."""
        sub_id = frame.get("subscription")
        if sub_id == TOPOLOGY_SUBSCRIPTION and self.topology_hook is not None:
            self.topology_hook(frame)
            return
        subscription = self._by_id.get(sub_id) if sub_id is not None else None
        if subscription is None and sub_id is None and len(self._by_id) == 1:
            # A STOMP 1.0 server may omit the header; with one subscription it is clear.
            subscription = next(iter(self._by_id.values()))
        if subscription is None:
            log.debug("dropping a MESSAGE for unknown subscription %r", sub_id)
            return
        subscription._deliver(Message(frame))

    # -- SubscriptionHost ----------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._state.is_open

    def raise_failure(self) -> None:
        self._state.raise_if_failed()

    async def unsubscribe(self, subscription: Subscription, *, receipt: bool) -> None:
        if self._by_id.get(subscription.id) is not subscription:
            return
        try:
            await self._send_unsubscribe(subscription, receipt)
        finally:
            if self._by_id.get(subscription.id) is subscription:
                del self._by_id[subscription.id]
                subscription._end()

    def _end_all(self, error: ClientError) -> None:
        subscriptions = list(self._by_id.values())
        self._by_id.clear()
        for subscription in subscriptions:
            subscription._end()
