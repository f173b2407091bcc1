"""Last-value queues (Artemis's "Last-Value Queues"): a queue that keeps, of the messages
that share a value of its last-value key, only the latest one not yet delivered.

Theory of operation
-------------------
A queue with a ``last-value-key`` (``last-value="true"`` means the key ``_AMQ_LVQ_NAME``)
remembers, per value of that property, its *current* reference: the latest one that arrived.
When another with the same value arrives, the older one, if it still waits in the queue, is
taken out and acknowledged as replaced (it never reaches a consumer); the new one joins the
tail. A reference on its way to a consumer is not replaced: the consumer gets it, and the new
one after it. A delivery that comes back unacknowledged is dropped if a newer value arrived
meanwhile, else it is current again. Messages without the property pass as on any queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from artemis_py.broker.message import MessageReference


class LastValues:
    """The current reference per last value of one queue."""

    __slots__ = ("current", "key")

    def __init__(self, key: str) -> None:
        self.key = key
        self.current: dict[str, MessageReference] = {}

    def arrived(self, ref: MessageReference) -> MessageReference | None:
        """``ref`` joins the queue: the waiting reference it replaces, if any."""
        value = ref.message.property(self.key)
        if value is None:
            return None
        older = self.current.get(value)
        self.current[value] = ref
        return older

    def returned(self, ref: MessageReference) -> bool:
        """A delivery of ``ref`` came back: False when a newer value replaced it meanwhile."""
        value = ref.message.property(self.key)
        if value is None:
            return True
        newer = self.current.get(value)
        if newer is not None and newer is not ref:
            return False
        self.current[value] = ref
        return True

    def left(self, ref: MessageReference) -> None:
        """``ref`` left the waiting references (delivered, expired, moved or removed)."""
        value = ref.message.property(self.key)
        if value is not None and self.current.get(value) is ref:
            del self.current[value]
