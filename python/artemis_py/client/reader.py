"""The read side of a client connection: one task that owns the receive side.

It feeds bytes to the codec (:class:`artemis_py.protocol.stomp.Connection` in the CLIENT
role) and dispatches each frame: MESSAGE to its subscription's channel, RECEIPT to the
request waiting for it, ERROR to fail the connection. It never waits for a consumer
(subscription channels are unbounded), so receipts and heart-beats keep flowing while
messages pile up in a subscription nobody reads; the server's consumer window bounds that
pile. It never raises either: whatever ends it is recorded as the connection's failure.
"""

from __future__ import annotations

import logging
from typing import Final

import trio

from artemis_py.client.errors import (
    TRANSPORT_ERRORS,
    ClientError,
    ConnectionLostError,
    StompServerError,
    describe,
)
from artemis_py.client.receipts import ReceiptTable
from artemis_py.client.state import ConnectionState
from artemis_py.client.subscription import SubscriptionTable
from artemis_py.protocol.stomp import (
    NEED_DATA,
    Command,
    Connection,
    ConnectionClosed,
    Frame,
    Heartbeat,
    RemoteProtocolError,
    Sentinel,
)

__all__ = ["READ_SIZE", "FrameReceiver"]

log = logging.getLogger("artemis_py.client")

READ_SIZE: Final = 1 << 16


class FrameReceiver:
    """Reads and dispatches the frames of one connection (see the module doc).

    ``last_received`` is the :func:`trio.current_time` of the last read that returned
    bytes; the heart-beat watcher counts any byte as a sign of life.
    """

    __slots__ = ("_codec", "_receipts", "_state", "_stream", "_subscriptions", "last_received")

    def __init__(
        self,
        stream: trio.abc.Stream,
        codec: Connection,
        state: ConnectionState,
        receipts: ReceiptTable,
        subscriptions: SubscriptionTable,
    ) -> None:
        self._stream = stream
        self._codec = codec
        self._state = state
        self._receipts = receipts
        self._subscriptions = subscriptions
        self.last_received = trio.current_time()

    async def receive_event(self) -> Frame | Heartbeat | ConnectionClosed:
        """The next event, reading as needed. Raises what the codec or the stream raise."""
        while True:
            event = self._codec.next_event()
            if event is NEED_DATA:
                data = await self._stream.receive_some(READ_SIZE)
                self.last_received = trio.current_time()
                self._codec.receive_data(data)
                continue
            assert not isinstance(event, Sentinel), "PAUSED is for the server side only"
            return event

    async def run(self) -> None:
        """The reader task; returns when the connection ends.

        Each read is decoded in one call (``next_events``) and its events dispatched in
        order, stopping at the first that ends the connection (an ERROR, a close).
        """
        state = self._state
        codec = self._codec
        stream = self._stream
        try:
            while state.failure is None:
                events = codec.next_events()
                if not events:
                    data = await stream.receive_some(READ_SIZE)
                    self.last_received = trio.current_time()
                    codec.receive_data(data)
                    continue
                for event in events:
                    if type(event) is Frame:
                        self._dispatch(event)
                        if state.failure is not None:
                            return
                    elif isinstance(event, ConnectionClosed):
                        self._closed_by_server()
                        return
        except RemoteProtocolError as exc:
            state.fail(ClientError(f"protocol error from the server: {exc.message}"), exc)
        except TRANSPORT_ERRORS as exc:
            state.fail(ConnectionLostError(f"connection to the server lost: {describe(exc)}"), exc)

    def _closed_by_server(self) -> None:
        state = self._state
        if not state.closed:
            what = "before the DISCONNECT receipt" if state.disconnecting else ""
            state.fail(ConnectionLostError(f"the server closed the connection {what}".strip()))

    def _dispatch(self, frame: Frame) -> None:
        command = frame.command
        if command == Command.MESSAGE:
            self._subscriptions.deliver(frame)
        elif command == Command.RECEIPT:
            receipt_id = frame.get("receipt-id", "")
            if (
                self._receipts.resolve(receipt_id, frame)
                and receipt_id == self._state.disconnect_receipt
            ):
                self._state.closed = True  # before the server's close of the socket is read
        elif command == Command.ERROR:
            self._state.fail(StompServerError.from_frame(frame))
        else:  # the codec rejects a second CONNECTED; nothing else can get here
            log.debug("ignoring an unexpected %s frame", command)
