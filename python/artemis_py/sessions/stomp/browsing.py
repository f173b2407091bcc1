"""Reading a queue by offset over STOMP: browse subscriptions, and the management
operations that acknowledge what such a reader has finished with.

A browse is a SUBSCRIBE with ``browser:true`` (the header ActiveMQ Classic's STOMP uses for
queue browsers) on an existing queue. It copies messages, it does not take them: each
ready message of the range comes as a MESSAGE frame with its ``offset``, then one MESSAGE
with ``browser:end`` tells where to continue. The subscription ends with that frame.
Extension headers (docs/stomp.md, "Reading by offset"):

* ``browser-stream`` (default: this node's own), ``browser-from`` (inclusive, default 0),
  ``browser-to`` (exclusive, default and at most the stream's stable end),
  ``browser-max`` (a count), ``browser-count-only:true`` (no MESSAGE frames but the end);
* ``browser-streams:true``: only the end frame, listing the queue's streams on this node.

A management operation is a SEND to the management address (Artemis's
``<management-address>``) naming the resource and the operation in Artemis's headers
(``_AMQ_ResourceName:queue.<name>``, ``_AMQ_OperationName``) with the arguments as a JSON
array in the body; its RECEIPT comes once the effect is durable, a refusal is an ERROR.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from artemis_py.broker.pending import Pending
from artemis_py.exceptions import StorageError
from artemis_py.protocol.stomp import Frame
from artemis_py.sessions.stomp.errors import StompError
from artemis_py.sessions.stomp.subscription import send_message

if TYPE_CHECKING:
    from artemis_py.broker.queue import Queue
    from artemis_py.sessions.stomp.session import StompSession, Target

log = logging.getLogger("artemis_py.stomp")
T = TypeVar("T")

RESOURCE_HEADER = "_AMQ_ResourceName"
OPERATION_HEADER = "_AMQ_OperationName"
_QUEUE_RESOURCE = "queue."


def browse(session: StompSession, frame: Frame, target: Target, sub_id: str) -> Pending:
    """Answer a browse SUBSCRIBE (see the module doc). Its frames go out when the returned
    pending settles, in frame order: reading paged messages reads page files (in worker
    threads), so the browse itself runs in the pending's gate."""
    broker = session.broker
    readers = broker.offsets
    destination = frame.get("destination") or ""
    queue = _queue(session, target)
    end_headers = [
        ("subscription", sub_id),
        ("message-id", f"{sub_id}:end"),
        ("destination", destination),
        ("browser", "end"),
        ("node-id", broker.node_id),
    ]
    if _flag(frame, "browser-streams"):

        async def listing() -> None:
            end_headers.append(("queue-exists", "false" if queue is None else "true"))
            if queue is not None:
                streams = await _reading(session, queue, readers.streams(queue))
                if streams is None:
                    return
                end_headers.extend(
                    [
                        (
                            "streams",
                            ",".join(
                                f"{s.stream}:{s.low}:{s.end}:{s.state}:{s.count}" for s in streams
                            ),
                        ),
                        ("consumers", str(queue.consumer_count)),
                    ]
                )
            end_headers.append(("cluster-members", ",".join(broker.cluster_members())))
            # Where acknowledgeUpTo goes: <management-address> is configurable.
            end_headers.append(("management-address", broker.config.management_address))
            _send_end(session, end_headers)

        return Pending(gate=listing)
    if queue is None:
        raise StompError(
            f"queue {target.queue or target.address} does not exist on node {broker.node_id}"
        )
    stream = frame.get("browser-stream") or readers.stream
    start = _number(frame, "browser-from", 0)
    end = _optional_number(frame, "browser-to")
    limit = _number(frame, "browser-max", -1, negative=True)
    count_only = _flag(frame, "browser-count-only")

    async def run() -> None:
        found = await _reading(session, queue, readers.browse(queue, stream, start, end, limit))
        if found is None:
            return
        if not count_only:
            for ref in found.refs:
                headers = [
                    ("subscription", sub_id),
                    ("message-id", str(ref.message.message_id)),
                    ("destination", destination),
                    ("offset", str(ref.offset)),
                    ("offset-stream", stream),
                ]
                if ref.delivery_count > 0:
                    headers.append(("redelivered", "true"))
                send_message(session, ref.message, headers)
        end_headers.extend(
            [
                ("offset-stream", stream),
                ("offset-next", str(found.next)),
                ("offset-end", str(found.end)),
                ("offset-low", "" if found.low is None else str(found.low)),
                ("offset-mark", str(found.mark)),
                ("stream-state", found.state),
                ("message-count", str(len(found.refs))),
            ]
        )
        _send_end(session, end_headers)

    return Pending(gate=run)


async def _reading(session: StompSession, queue: Queue, read: Awaitable[T]) -> T | None:
    """``read``'s result; None when a page file could not be read: the client gets an
    ERROR frame saying so (the node logs it), and the browse ends without its end frame."""
    try:
        return await read
    except (StorageError, OSError, ValueError) as exc:
        message = f"cannot read the paged messages of queue {queue.name}: {exc}"
        log.error("%s", message)
        session.send(session.error_frame(message, None))
        return None


def manage(session: StompSession, frame: Frame) -> Pending:
    """Run the management operation a SEND to the management address names."""
    resource = frame.get(RESOURCE_HEADER) or ""
    operation = frame.get(OPERATION_HEADER) or ""
    if frame.get("transaction") is not None:
        raise StompError("management operations are not transactional")
    if not resource.startswith(_QUEUE_RESOURCE):
        raise StompError(f"unknown management resource {resource!r} (expected queue.<name>)")
    name = resource[len(_QUEUE_RESOURCE) :]
    queue = session.broker.queue(name)
    if queue is None:
        raise StompError(f"queue {name} does not exist on node {session.broker.node_id}")
    try:
        args = json.loads(frame.body or b"[]")
    except ValueError as exc:
        raise StompError(
            f"{operation}: the body must be a JSON array of arguments ({exc})"
        ) from exc
    readers = session.broker.offsets
    if operation == "acknowledgeUpTo":
        if (
            not isinstance(args, list)
            or len(args) != 2
            or not isinstance(args[0], str)
            or not isinstance(args[1], int)
            or args[1] < 0
        ):
            raise StompError('acknowledgeUpTo takes ["<stream>", <offset>], offset >= 0')
        return readers.acknowledge_up_to(queue, args[0], args[1])
    if operation == "removeOffsetMarks":
        return readers.remove_marks(queue)
    raise StompError(
        f"unknown management operation {operation!r} on {resource} "
        "(known: acknowledgeUpTo, removeOffsetMarks)"
    )


def _queue(session: StompSession, target: Target) -> Queue | None:
    name = target.queue or target.address
    queue = session.broker.queue(name)
    if queue is not None and target.queue is not None and queue.address != target.address:
        raise StompError(f"queue {target.queue} is not bound to address {target.address}")
    return queue


def _send_end(session: StompSession, headers: list[tuple[str, str]]) -> None:
    session.send(Frame("MESSAGE", (*headers, ("content-length", "0")), b""))


def _flag(frame: Frame, name: str) -> bool:
    return (frame.get(name) or "false").lower() == "true"


def _number(frame: Frame, name: str, default: int, *, negative: bool = False) -> int:
    value = _optional_number(frame, name, negative=negative)
    return default if value is None else value


def _optional_number(frame: Frame, name: str, *, negative: bool = False) -> int | None:
    text = frame.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise StompError(f"{name} must be an integer, not {text!r}") from None
    if value < 0 and not negative:
        raise StompError(f"{name} must not be negative")
    return value
