"""A SEND frame read into a message, as Artemis's STOMP protocol reads one.

The headers that steer the broker (destination, transaction, receipt, persistence, priority,
expiration, the routing type, a delivery time) become the message's fields; every other
header becomes a property, in order, except that ``JMSXGroupID`` is stored under Artemis's
own name ``_AMQ_GROUP_ID`` (delivered so), and a delivery time asked with
``AMQ_SCHEDULED_DELAY`` or ``AMQ_SCHEDULED_TIME`` is kept as ``_AMQ_SCHED_DELIVERY``. A value
Artemis cannot read is refused (a StompError: the client gets an ERROR frame).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from artemis_py.broker.message import (
    DEFAULT_PRIORITY,
    GROUP_ID_PROPERTY,
    SCHEDULED_PROPERTY,
    Message,
    now_ms,
)
from artemis_py.broker.message_groups import CLIENT_GROUP_ID
from artemis_py.broker.records import OFFSET_FROM
from artemis_py.broker.scheduling import LATEST_SCHEDULE_MS
from artemis_py.sessions.stomp.errors import StompError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from artemis_py.sessions.stomp.session import Target

# Artemis's STOMP extension headers for scheduled delivery (become _AMQ_SCHED_DELIVERY).
SCHEDULED_DELAY = "AMQ_SCHEDULED_DELAY"
SCHEDULED_TIME = "AMQ_SCHEDULED_TIME"
# Headers that steer the broker and are not copied into the message as properties.
CONTROL_HEADERS = frozenset(
    {
        "destination",
        "transaction",
        "receipt",
        "content-length",
        "persistent",
        "priority",
        "expires",
        "destination-type",
        "message-id",
        "subscription",
        "ack",
        "redelivered",
        "timestamp",
        SCHEDULED_DELAY,
        SCHEDULED_TIME,
    }
)
_CONTROL_AND_OFFSET = CONTROL_HEADERS | {OFFSET_FROM}
#: The longest group id a SEND may give (Artemis has no limit; a far longer one is refused
#: rather than kept in every queue's owners and in the grouping handler's journal).
MAX_GROUP_ID = 1024


def sent_message(
    message_id: int,
    target: Target,
    headers: Sequence[tuple[str, str]],
    first: dict[str, str],
    body: bytes,
) -> Message:
    """The message a SEND to ``target`` makes; ``first``: each header's first value."""
    priority_text, expires_text = first.get("priority"), first.get("expires")
    try:
        priority = int(priority_text) if priority_text else DEFAULT_PRIORITY
        expiration = max(0, int(expires_text)) if expires_text else 0
    except ValueError as exc:
        raise StompError(f"invalid priority or expires header: {exc}") from exc
    if not 0 <= priority <= 9:
        raise StompError(f"invalid priority {priority_text}: a priority is 0 to 9")
    scheduled = 0
    if SCHEDULED_DELAY in first or SCHEDULED_TIME in first:
        scheduled = _scheduled_time(first)
    # (only a scale-down may say where a message stood: OFFSET_FROM is no property)
    control = CONTROL_HEADERS if OFFSET_FROM not in first else _CONTROL_AND_OFFSET
    durable = first.get("persistent")
    properties = tuple([h for h in headers if h[0] not in control])
    group_id = None  # ("in" tests: cheaper than two dict.get calls on every send)
    if CLIENT_GROUP_ID in first:  # stored under Artemis's own name, as Artemis does
        group_id = first[CLIENT_GROUP_ID]
        properties = tuple(
            (GROUP_ID_PROPERTY if k == CLIENT_GROUP_ID else k, v) for k, v in properties
        )
    elif GROUP_ID_PROPERTY in first:
        group_id = first[GROUP_ID_PROPERTY]
    if group_id is not None and len(group_id) > MAX_GROUP_ID:
        raise StompError(
            f"{CLIENT_GROUP_ID} is {len(group_id)} characters long: a group id has at most "
            f"{MAX_GROUP_ID} (every queue and the cluster's grouping keep one per group)"
        )
    if scheduled:
        properties += ((SCHEDULED_PROPERTY, str(scheduled)),)
    return Message(
        message_id,
        target.address,
        body=body,
        properties=properties,
        routing_type=target.routing_type,
        durable=durable is not None and durable.lower() == "true",
        priority=priority,
        timestamp=now_ms(),
        expiration=expiration,
        group_id=group_id,
        scheduled=scheduled,
    )


def _scheduled_time(headers: dict[str, str]) -> int:
    """The delivery time (epoch ms; 0: at once) a SEND asks for with Artemis's headers: a
    delay from now, or a time (which wins when both are given, as in Artemis). Zero or less
    means at once; a time past the year 9999 is refused."""
    delay_text, time_text = headers.get(SCHEDULED_DELAY), headers.get(SCHEDULED_TIME)
    try:
        delay = int(delay_text) if delay_text is not None else 0
        at = int(time_text) if time_text is not None else 0
    except ValueError as exc:
        raise StompError(f"invalid {SCHEDULED_DELAY} or {SCHEDULED_TIME} header: {exc}") from exc
    scheduled = at if at > 0 else (now_ms() + delay if delay > 0 else 0)
    if scheduled > LATEST_SCHEDULE_MS:
        raise StompError(
            f"scheduled delivery time {scheduled} is too far away (after the year 9999)"
        )
    return scheduled
