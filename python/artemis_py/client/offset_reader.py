"""Reading a queue by offset: the client side of the node's browse-by-offset extension and
of its ``acknowledgeUpTo`` management operation (docs/stomp.md, "Reading by offset").

::

    listing = await list_streams(conn, "orders")
    for stream in listing.streams:
        messages, end = await browse(conn, "orders", stream=stream.stream, limit=500)
        ...                                    # continue from end.next
    await acknowledge_up_to(conn, "orders", stream.stream, end.next)

Nothing here takes a message from its queue: :func:`browse` copies, and only
:func:`acknowledge_up_to` removes what lies below an offset.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

from artemis_py.client.connection import ClientConnection
from artemis_py.client.errors import ClientError
from artemis_py.client.message import Message

MANAGEMENT_ADDRESS = "activemq.management"  # Artemis's default <management-address>
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """One stream of a queue on a node: id, lowest offset held (its end when it holds
    nothing), exclusive stable end, state and messages held."""

    stream: str
    low: int
    end: int
    state: str
    count: int


@dataclass(frozen=True, slots=True)
class Listing:
    """What a node says about a queue: its id, whether the queue exists there, the
    queue's streams and consumers, the other live members of its cluster, and its
    management address (where :func:`acknowledge_up_to` goes)."""

    node_id: str
    exists: bool
    streams: tuple[StreamInfo, ...]
    consumers: int
    members: tuple[str, ...]
    management_address: str = MANAGEMENT_ADDRESS


@dataclass(frozen=True, slots=True)
class BrowseEnd:
    """How a browse ended: where to continue (``next``), the stream's stable end, lowest
    offset held (None: none), offset mark, state and the number of messages found."""

    stream: str
    next: int
    end: int
    low: int | None
    mark: int
    state: str
    count: int


async def list_streams(conn: ClientConnection, queue: str) -> Listing:
    """The streams of ``queue`` on the node behind ``conn``."""
    end = await _browse_end(conn, queue, [("browser-streams", "true")], [])
    streams = []
    for item in filter(None, (end.get("streams") or "").split(",")):
        stream, low, stop, state, count = item.split(":")
        streams.append(StreamInfo(stream, int(low), int(stop), state, int(count)))
    return Listing(
        node_id=end.get("node-id", ""),
        exists=end.get("queue-exists") == "true",
        streams=tuple(streams),
        consumers=int(end.get("consumers") or 0),
        members=tuple(filter(None, (end.get("cluster-members") or "").split(","))),
        management_address=end.get("management-address") or MANAGEMENT_ADDRESS,
    )


async def browse(
    conn: ClientConnection,
    queue: str,
    *,
    stream: str | None = None,
    start: int = 0,
    end: int | None = None,
    limit: int | None = None,
    count_only: bool = False,
) -> tuple[list[Message], BrowseEnd]:
    """Copies of the messages of ``queue`` with ``start <= offset < end`` (``end``: at
    most the stream's stable end), at most ``limit`` of them, in offset order; with
    ``count_only`` none are sent, only the count and the end."""
    headers = [("browser-from", str(start))]
    if stream is not None:
        headers.append(("browser-stream", stream))
    if end is not None:
        headers.append(("browser-to", str(end)))
    if limit is not None:
        headers.append(("browser-max", str(limit)))
    if count_only:
        headers.append(("browser-count-only", "true"))
    messages: list[Message] = []
    frame = await _browse_end(conn, queue, headers, messages)
    low = frame.get("offset-low")
    return messages, BrowseEnd(
        stream=frame.get("offset-stream", ""),
        next=int(frame.get("offset-next") or start),
        end=int(frame.get("offset-end") or 0),
        low=int(low) if low else None,
        mark=int(frame.get("offset-mark") or 0),
        state=frame.get("stream-state", ""),
        count=int(frame.get("message-count") or 0),
    )


async def acknowledge_up_to(
    conn: ClientConnection,
    queue: str,
    stream: str,
    offset: int,
    *,
    management_address: str = MANAGEMENT_ADDRESS,
) -> None:
    """Acknowledge every message of ``stream`` in ``queue`` below ``offset`` and raise
    the queue's offset mark; returns once durable. Idempotent and cumulative."""
    await conn.send(
        management_address,
        json.dumps([stream, offset]).encode(),
        headers={"_AMQ_ResourceName": f"queue.{queue}", "_AMQ_OperationName": "acknowledgeUpTo"},
    )


async def _browse_end(
    conn: ClientConnection,
    queue: str,
    headers: list[tuple[str, str]],
    messages: list[Message],
) -> Message:
    """Run one browse of ``queue``: collect its messages into ``messages`` and return
    its end frame."""
    sub = await conn.subscribe(
        queue,
        id=f"browse-{next(_ids)}",
        headers=[("browser", "true"), *headers],
        receipt=False,
    )
    try:
        async for message in sub:
            if message.get("browser") == "end":
                return message
            messages.append(message)
        raise ClientError(f"the browse of {queue} ended without its end frame")
    finally:
        await sub.unsubscribe(receipt=False)
