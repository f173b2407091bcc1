"""Reading a queue by offset over STOMP: browse subscriptions, and the management
operations that acknowledge what such a reader has finished with.

A browse is a SUBSCRIBE with ``browser:true`` (the header ActiveMQ Classic's STOMP uses for
queue browsers) on an existing queue. It copies messages, it does not take them: each
ready message of the range comes as a MESSAGE frame with its ``offset``, then one MESSAGE
with ``browser:end`` tells where to continue. The subscription ends with that frame. The
session does not read: it returns a :class:`~.actions.Browse` that the shell reads through
the broker in the frame's turn, and :func:`answer` sends what was found.
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
from typing import TYPE_CHECKING

from artemis_py.broker.pending import Pending
from artemis_py.protocol.stomp import Frame
from artemis_py.sessions.stomp.actions import Browse
from artemis_py.sessions.stomp.errors import StompError
from artemis_py.sessions.stomp.subscription import send_message

if TYPE_CHECKING:
    from artemis_py.broker.offset_reading import BrowseResult, StreamInfo
    from artemis_py.broker.queue import Queue
    from artemis_py.sessions.stomp.session import StompSession, Target

log = logging.getLogger("artemis_py.stomp")

RESOURCE_HEADER = "_AMQ_ResourceName"
OPERATION_HEADER = "_AMQ_OperationName"
_QUEUE_RESOURCE = "queue."


def browse(session: StompSession, frame: Frame, target: Target, sub_id: str) -> Browse:
    """The :class:`Browse` a browse SUBSCRIBE asks for (see the module doc); the shell
    reads it in the frame's turn and calls :func:`answer`."""
    destination = frame.get("destination") or ""
    queue = _queue(session, target)
    if _flag(frame, "browser-streams"):
        return Browse(sub_id, destination, queue, listing=True)
    if queue is None:
        broker = session.broker
        raise StompError(
            f"queue {target.queue or target.address} does not exist on node {broker.node_id}"
        )
    return Browse(
        sub_id,
        destination,
        queue,
        stream=frame.get("browser-stream") or session.broker.offsets.stream,
        start=_number(frame, "browser-from", 0),
        end=_optional_number(frame, "browser-to"),
        limit=_number(frame, "browser-max", -1, negative=True),
        count_only=_flag(frame, "browser-count-only"),
    )


def answer(
    session: StompSession, browse: Browse, found: BrowseResult | list[StreamInfo] | None
) -> None:
    """Send what ``browse`` read: for a range, its messages (unless ``count_only``) and the
    end frame; for a listing, the end frame with ``found``, the queue's streams (None: the
    queue does not exist)."""
    broker = session.broker
    end_headers = [
        ("subscription", browse.sub_id),
        ("message-id", f"{browse.sub_id}:end"),
        ("destination", browse.destination),
        ("browser", "end"),
        ("node-id", broker.node_id),
    ]
    if browse.listing:
        assert found is None or isinstance(found, list)
        queue = browse.queue
        end_headers.append(("queue-exists", "false" if queue is None else "true"))
        if queue is not None and found is not None:
            streams = ",".join(f"{s.stream}:{s.low}:{s.end}:{s.state}:{s.count}" for s in found)
            end_headers += [("streams", streams), ("consumers", str(queue.consumer_count))]
        end_headers.append(("cluster-members", ",".join(broker.cluster_members())))
        # Where acknowledgeUpTo goes: <management-address> is configurable.
        end_headers.append(("management-address", broker.config.management_address))
        _send_end(session, end_headers)
        return
    assert found is not None
    assert not isinstance(found, list)
    stream = browse.stream
    # A queue on a wildcard address names the address each message was sent to, as its
    # subscriptions' deliveries do.
    queue = browse.queue
    by_message = queue is not None and broker.post_office.wildcards.is_wildcard(queue.address)
    if not browse.count_only:
        for ref in found.refs:
            headers = [
                ("subscription", browse.sub_id),
                ("message-id", str(ref.message.message_id)),
                ("destination", ref.message.address if by_message else browse.destination),
                ("offset", str(ref.offset)),
                ("offset-stream", stream),
            ]
            if ref.delivery_count > 0:
                headers.append(("redelivered", "true"))
            send_message(session, ref.message, headers)
    end_headers += [
        ("offset-stream", stream),
        ("offset-next", str(found.next)),
        ("offset-end", str(found.end)),
        ("offset-low", "" if found.low is None else str(found.low)),
        ("offset-mark", str(found.mark)),
        ("stream-state", found.state),
        ("message-count", str(len(found.refs))),
    ]
    _send_end(session, end_headers)


def unreadable(browse: Browse, exc: Exception) -> StompError:
    """The refusal of ``browse`` whose read failed (a page file could not be read): the
    shell answers it as it answers a refused frame (an ERROR frame, then the close), and
    the node logs it."""
    name = browse.queue.name if browse.queue is not None else browse.destination
    message = f"cannot read the paged messages of queue {name}: {exc}"
    log.error("%s", message)
    return StompError(message, kind="storage")


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
