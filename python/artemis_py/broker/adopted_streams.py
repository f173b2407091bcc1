"""Streams that move between nodes: a scale-down keeps every message's offset.

Theory of operation
-------------------
Offsets (:mod:`.offsets`) are numbered per *stream*: the node that stored a message first.
When a node scales down, the messages of a queue that a reader by offset owns (the queue
has an offset mark) move to the target node; read again there under new offsets, they
would be read twice. So they keep their place:

* *Stamp.* Before the move, each message gets the internal property ``_AMQ_OFFSET_FROM``:
  per queue name, the stream and offset it had (a message already stamped by an earlier
  scale-down keeps its first origin). One property for all queues, so a client SEND is
  checked for it with one lookup (and loses it: clients cannot forge a place).
* *Adopt.* The target puts a stamped message that arrives over a cluster link into its
  queue of that name under the stamped offset, in the origin's stream (``ref.stream``):
  an *adopted* stream, indexed apart from the node's own. Back on its own node, a stamped
  message is native again. The stamp is journaled with the message, so a restart adopts
  it again.
* *Seal.* When everything has moved and the target has confirmed it, the departing node
  sends each such queue's streams with their final stable ends and offset marks
  (:class:`~artemis_py.protocol.cluster.frames.Sealed`). The target journals the end
  (SEALED_STREAM, :mod:`.records`) and marks the stream *sealed*: readers may read it up to
  that end. Until then an adopted stream has no readable part (its end is its lowest offset), since
  moved messages may still arrive below one that already did.

What a reader sees: the listing names each stream with its state (``native``, ``adopted``,
``sealed``); a browse or ``acknowledgeUpTo`` names the stream.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from artemis_py.broker.message import Message, MessageReference
from artemis_py.broker.records import OFFSET_FROM, OFFSET_FROM_BYTES

if TYPE_CHECKING:
    from artemis_py.broker.queue import Queue


def stamp(ref: MessageReference, node_id: str) -> None:
    """Record on ``ref``'s message where it stands in its queue, before a move."""
    message = ref.message
    stamps = _stamps(message)
    name = ref.queue.name
    if name not in stamps:
        stamps[name] = (ref.stream or node_id, ref.offset)
        message.set_properties({OFFSET_FROM: json.dumps(stamps, separators=(",", ":"))})


def adopt(ref: MessageReference, node_id: str) -> None:
    """Give ``ref`` the stream and offset its message's stamp names for its queue, if any
    (the queue then indexes it: adopted streams are always indexed)."""
    found = _stamps(ref.message).get(ref.queue.name)
    if found is None:
        return
    stream, offset = found
    ref.offset = offset
    if stream != node_id:
        ref.stream = stream
        ref.queue.offset_index()


def recovered_ref(
    queue: Queue, message: Message, count: int, offset: int, stamped: bool, node_id: str
) -> MessageReference:
    """A reference read back from the journal; a stamped one is adopted again."""
    ref = MessageReference(message, queue, count, offset)
    if stamped:
        adopt(ref, node_id)
    return ref


def may_be_stamped(encoded: bytes | None, message: Message) -> bool:
    """Whether a message may carry a stamp (its encoding names the property)."""
    if encoded is not None:
        return OFFSET_FROM_BYTES in encoded
    return message.property(OFFSET_FROM) is not None


def _stamps(message: Message) -> dict[str, tuple[str, int]]:
    text = message.property(OFFSET_FROM)
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {
        name: (stream, offset)
        for name, entry in value.items()
        if isinstance(entry, list)
        and len(entry) == 2
        and isinstance(stream := entry[0], str)
        and type(offset := entry[1]) is int
        and offset >= 0
    }
