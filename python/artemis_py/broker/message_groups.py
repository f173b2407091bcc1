"""Which consumer a message must go to: message groups and exclusive queues (Artemis's
"Message Grouping" and "Exclusive Queues").

Theory of operation
-------------------
A message with a group id (``_AMQ_GROUP_ID``; STOMP clients send ``JMSXGroupID``, which the
node stores under that name as Artemis does) belongs to a group. The first message of a group
goes to the next consumer round robin, which then *owns* the group: every later message of it
goes to that consumer, in order, so one consumer sees a group whole. A message whose owner has
no credit waits in place; messages of other groups and without one pass it. The group ends
when its owner leaves (its unacknowledged messages come back and the next consumer takes the
group over, whole) or when a message with ``JMSXGroupSeq`` -1 is delivered (it closes it).

Settings (queue attributes, defaulted from address settings):

* ``group-buckets``: -1 one owner per group id; N > 0 group ids hashed into N buckets, each
  with one owner (a bounded map for unbounded ids); 0 turns grouping off;
* ``group-rebalance``: a consumer that arrives clears every owner, so groups spread over the
  consumers again; with ``group-rebalance-pause-dispatch`` nothing is dispatched until every
  delivery in flight is settled, so no group is delivered by two consumers at once;
* ``group-first-key``: the first message of a group a consumer receives carries this property
  with the value ``true``.

An *exclusive* queue delivers everything to one consumer (the first to receive one) while it
stays; then the next takes over. Groups mean nothing on it, as in Artemis.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from artemis_py.broker.message import MessageReference
    from artemis_py.broker.queue import Consumer

GROUP_SEQUENCE = "JMSXGroupSeq"
CLIENT_GROUP_ID = "JMSXGroupID"  # (what a STOMP or JMS client names it)


class DispatchRules:
    """One queue's group owners or exclusive consumer."""

    __slots__ = (
        "buckets",
        "exclusive",
        "first_key",
        "owners",
        "pause_to_rebalance",
        "rebalance",
        "sole",
    )

    def __init__(
        self,
        *,
        exclusive: bool = False,
        buckets: int = -1,
        rebalance: bool = False,
        pause_to_rebalance: bool = False,
        first_key: str | None = None,
    ) -> None:
        self.exclusive = exclusive
        self.buckets = buckets
        self.rebalance = rebalance
        self.pause_to_rebalance = pause_to_rebalance
        self.first_key = first_key
        self.owners: dict[str | int, Consumer] = {}  # group (or bucket) -> its consumer
        self.sole: Consumer | None = None  # an exclusive queue's consumer

    @property
    def groups_on(self) -> bool:
        return not self.exclusive and self.buckets != 0

    def _key(self, group_id: str) -> str | int:
        if self.buckets < 0:
            return group_id
        return zlib.crc32(group_id.encode()) % self.buckets

    def owner(self, ref: MessageReference) -> Consumer | None:
        """The consumer ``ref`` must go to (None: any, round robin)."""
        if self.exclusive:
            return self.sole
        group_id = ref.message.group_id
        if group_id is None or self.buckets == 0:
            return None
        return self.owners.get(self._key(group_id))

    def delivered(self, ref: MessageReference, consumer: Consumer, owner: Consumer | None) -> None:
        """``ref`` went to ``consumer`` (its owner before, if it had one): the group's owner
        from now on, or the group's end."""
        ref.first_in_group = False
        if self.exclusive:
            if owner is None:
                self.sole = consumer
                ref.first_in_group = self.first_key is not None
            return
        group_id = ref.message.group_id
        if group_id is None or self.buckets == 0:
            return
        if ref.message.property(GROUP_SEQUENCE) == "-1":
            self.owners.pop(self._key(group_id), None)
        elif owner is None:
            self.owners[self._key(group_id)] = consumer
            ref.first_in_group = self.first_key is not None

    def consumer_added(self) -> bool:
        """A consumer arrived; True when dispatch must pause until deliveries settle."""
        if self.rebalance and not self.exclusive:
            self.owners.clear()
            return self.pause_to_rebalance
        return False

    def consumer_removed(self, consumer: Consumer) -> None:
        if self.sole is consumer:
            self.sole = None
        if consumer in self.owners.values():
            self.owners = {g: c for g, c in self.owners.items() if c is not consumer}

    def group_count(self) -> int:
        return 1 if self.sole is not None else len(self.owners)
