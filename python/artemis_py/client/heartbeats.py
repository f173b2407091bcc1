"""Heart-beats of a client connection (STOMP 1.1+): sending ours, watching the server's.

Both are background tasks started after CONNECTED with the negotiated intervals. Any frame
we write counts as a beat of ours, any byte we read as one of the server's.
"""

from __future__ import annotations

from typing import Final

import trio

from artemis_py.client.errors import ClientError, ConnectionLostError
from artemis_py.client.reader import FrameReceiver
from artemis_py.client.state import ConnectionState
from artemis_py.client.writer import FrameWriter

__all__ = ["HEARTBEAT_TOLERANCE", "send_heartbeats", "watch_heartbeats"]

HEARTBEAT_TOLERANCE: Final = 2.0
"""The server is declared dead after this many heart-beat intervals without any byte from it.
STOMP 1.2 "Heart-beating" leaves the margin to the implementation; Artemis uses 2 for its
connection TTL (``heartBeatToConnectionTtlModifier``)."""


async def send_heartbeats(writer: FrameWriter, state: ConnectionState, interval: float) -> None:
    """Write a heart-beat whenever nothing was written for ``interval`` seconds."""
    while True:
        await trio.sleep_until(writer.last_sent + interval)
        if not state.is_open:
            return
        if trio.current_time() - writer.last_sent < interval:
            continue  # a frame went out meanwhile; it counts as a heart-beat
        try:
            await writer.write(writer.heartbeat())
        except ClientError:
            return


async def watch_heartbeats(
    receiver: FrameReceiver, state: ConnectionState, interval: float
) -> None:
    """Fail the connection once nothing arrived for ``HEARTBEAT_TOLERANCE`` intervals."""
    tolerance = interval * HEARTBEAT_TOLERANCE
    while state.failure is None and not state.closed:
        deadline = receiver.last_received + tolerance
        if trio.current_time() >= deadline:
            state.fail(
                ConnectionLostError(
                    f"nothing received from the server for {tolerance:g} s "
                    f"(heart-beat interval {interval:g} s)"
                )
            )
            return
        await trio.sleep_until(deadline)
