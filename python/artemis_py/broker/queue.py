"""Queues: ordered message references and the consumers that compete for them.

Theory of operation
-------------------
A queue holds *ready* references in arrival order (redelivered ones go back to the head,
in their original order), higher message priorities first (:mod:`.priority_refs`).
Delivery is push-based and synchronous: whenever a message could move (it arrives, a
consumer comes or gets credit back), :meth:`Queue.deliver` hands ready references to
consumers until no consumer can take more. Consumers compete round robin: each delivery
starts looking at the consumer after the one that took the previous message, so consumers
with credit share the load evenly (Artemis's QueueImpl does the same).

A consumer may carry a selector; a reference that no consumer's selector matches stays in
the queue, in place, and does not block the ones behind it. Message groups and exclusive
queues (:mod:`.message_groups`) name the one consumer a reference must go to; one whose
consumer is busy waits in place the same way. A last-value queue (:mod:`.last_values`)
keeps only the latest waiting message per value of its key.

Delivered references belong to their consumer until it acknowledges them (the broker then
deletes them) or goes away (they are cancelled back to the head of the queue with their
delivery count kept, so the next delivery is marked redelivered).

Every reference has an offset (:mod:`.offset_reading`); a queue that readers browse by
offset keeps its ready references in an :class:`~.offset_index.OffsetIndex` as well.

A reference with a delivery time ahead (scheduled delivery, a redelivery delay) is *held*
in :attr:`Queue.scheduled` until the node's scheduler gives it back, at the head
(:mod:`.scheduling`); it counts as the queue's message meanwhile.

A *paused* queue (the management API's pause, as Artemis's ``QueueControl.pause()``)
takes messages and delivers none until resumed, while the node runs.

A non-destructive queue (:mod:`.non_destructive`) is a subclass: its consumers each read
every message from their own position, and acknowledgements remove nothing.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from artemis_py.broker.last_values import LastValues
from artemis_py.broker.message import DEFAULT_PRIORITY, now_ms
from artemis_py.broker.message_groups import DispatchRules
from artemis_py.broker.offset_index import OffsetIndex
from artemis_py.broker.priority_refs import PriorityRefs
from artemis_py.config import RoutingType
from artemis_py.exceptions import ArtemisError

if TYPE_CHECKING:
    from artemis_py.broker.filter import Filter
    from artemis_py.broker.message import MessageReference


log = logging.getLogger(__name__)


class MaxConsumersReachedError(ArtemisError):
    """The queue already has its ``max-consumers`` consumers."""


class Consumer(Protocol):
    """What a queue needs from a consumer (a STOMP subscription, later a cluster bridge)."""

    selector: Filter | None

    def has_credit(self) -> bool: ...

    def deliver(self, ref: MessageReference) -> None: ...


class Queue:
    """A named queue bound to an address."""

    #: Consuming removes nothing (:class:`~artemis_py.broker.non_destructive.NonDestructiveQueue`).
    non_destructive = False
    #: The log said that this purge-on-no-consumers queue drops messages (said once).
    _told_dropping = False

    def __init__(
        self,
        queue_id: int,
        name: str,
        address: str,
        routing_type: RoutingType,
        *,
        filter: Filter | None = None,
        durable: bool = True,
        temporary: bool = False,
        max_consumers: int = -1,
        purge_on_no_consumers: bool = False,
        auto_created: bool = False,
        on_expired: Callable[[MessageReference], None] | None = None,
        clock_ms: Callable[[], int] | None = None,
        rules: DispatchRules | None = None,
        last_value_key: str | None = None,
        on_replaced: Callable[[MessageReference], None] | None = None,
        on_hold: Callable[[MessageReference | Callable[[], None], int], None] | None = None,
        ring_size: int = -1,
        consumers_before_dispatch: int = 0,
        delay_before_dispatch: int = -1,
    ) -> None:
        self.id = queue_id
        self.name = name
        self.address = address
        self.routing_type = routing_type
        self.filter = filter
        self.durable = durable
        self.temporary = temporary
        self.max_consumers = max_consumers
        self.purge_on_no_consumers = purge_on_no_consumers
        self.auto_created = auto_created
        # Ready references: a deque while all have the default priority, else by priority.
        self.messages: deque[MessageReference] | PriorityRefs = deque()
        self.consumers: list[Consumer] = []
        self._selective = 0  # consumers with a selector (a consumer's is fixed once added)
        # Groups and exclusivity (None: neither configured; made on a first grouped message).
        self.rules = rules
        self._grouped = rules is not None and rules.exclusive  # a rule may name a consumer
        self._rebalancing = False  # dispatch paused until deliveries settle (group-rebalance)
        self.last_values = LastValues(last_value_key) if last_value_key else None
        self._on_replaced = on_replaced
        self.messages_replaced = 0  # by a later message of the same last value
        # Held references and their time (epoch ms), when ``on_hold`` (a scheduler) gives them back.
        self.scheduled: dict[MessageReference, int] = {}
        self._on_hold = on_hold
        self.ring_size = ring_size  # at most this many waiting: the oldest go (replaced)
        # Dispatch waits for this many consumers, or this long after the first came (ms),
        # until _dispatch_at (epoch ms) when a delay-before-dispatch lets it start.
        self.consumers_before_dispatch = consumers_before_dispatch
        self.delay_before_dispatch = delay_before_dispatch
        self._gated = consumers_before_dispatch > 0
        self._dispatching, self._dispatch_at = not self._gated, -1
        self.delivering = 0  # references delivered and not yet acknowledged or cancelled
        self.messages_added = 0
        self.messages_acknowledged = 0
        self.messages_expired = 0  # went to the expiry path
        self.messages_killed = 0  # dead-lettered (max-delivery-attempts reached)
        self.paused = False  # delivers nothing while paused (management)
        self.paged = 0  # messages for this queue still in page files (its cursor reads them)
        # Offsets of messages routed here whose send has not settled yet: auto-delete
        # waits for them, and readers by offset never plan past the lowest.
        self.arriving: set[int] = set()
        # Ready references by offset, once someone browses the queue by offset.
        self.index: OffsetIndex | None = None
        # Offset marks by stream: how far readers by offset acknowledged (a queue with a
        # mark is owned by such a reader).
        self.marks: dict[str, int] = {}
        # Final ends of streams adopted from nodes that scaled down here (.streams).
        self.sealed: dict[str, int] = {}
        self._next_consumer = 0
        self._owner: Consumer | None = None  # what the rules named for the reference at hand
        self._in_deliver = self._redeliver = False
        self._on_expired = on_expired
        self._clock_ms = clock_ms
        # Told when consumers come and go (the post office passes it on to the cluster).
        self.on_consumers_changed: Callable[[Queue], None] | None = None
        # Told when messages arrive or come back and no consumer took them (redistribution).
        self.on_undelivered: Callable[[Queue], None] | None = None

    # -- state -------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        """Messages in the queue, including those delivered and not yet acknowledged and
        those still in page files."""
        return len(self.messages) + self.delivering + self.paged + len(self.scheduled)

    @property
    def consumer_count(self) -> int:
        return len(self.consumers)

    def accepts(self, lookup: Callable[[str], object]) -> bool:
        """Whether the queue's filter lets a message in; a purge-on-no-consumers queue
        takes nothing while it has no consumer (Artemis's queue drops it at routing)."""
        if self.purge_on_no_consumers and not self.consumers:
            if not self._told_dropping:
                self._told_dropping = True
                log.info("AMQ224149: queue %s is purge-on-no-consumers: drops messages", self.name)
            return False
        return self.filter is None or self.filter.matches(lookup)

    def stable_end(self, next_id: int) -> int:
        """The lowest offset that may still appear here (see :mod:`.offsets`); ``next_id``
        is the id generator's next value."""
        return min(self.arriving, default=next_id)

    def offset_index(self) -> OffsetIndex:
        """The ready references by offset, kept from now on."""
        if self.index is None:
            self.index = OffsetIndex(self.messages)
        return self.index

    def has_matching_consumer(self, lookup: Callable[[str], object]) -> bool:
        """Whether some consumer's selector (or lack of one) takes the message."""
        return any(c.selector is None or c.selector.matches(lookup) for c in self.consumers)

    # -- messages ----------------------------------------------------------------------

    def _prioritise(self, refs: Iterable[MessageReference]) -> None:
        """Keep the ready references by priority, and follow groups, if ``refs`` need it."""
        if type(self.messages) is deque and any(
            r.message.priority != DEFAULT_PRIORITY for r in refs
        ):
            self.messages = PriorityRefs(self.messages)
        if not self._grouped and any(r.message.group_id is not None for r in refs):
            self._group_seen()

    def _fresh(self) -> deque[MessageReference] | PriorityRefs:
        """An empty ready list of the kind the queue uses now."""
        return deque() if type(self.messages) is deque else PriorityRefs()

    def _group_seen(self) -> None:
        """A message of a group arrived: delivery asks the rules from now on."""
        if self.rules is None:
            self.rules = DispatchRules()
        self._grouped = self.rules.groups_on or self.rules.exclusive

    def _held(self, ref: MessageReference, due_ms: int) -> bool:
        """Whether ``ref`` waits until ``due_ms`` (not yet due, and a scheduler holds it)."""
        if self._on_hold is None or due_ms <= now_ms():
            return False
        self.scheduled[ref] = due_ms
        self._on_hold(ref, due_ms)
        return True

    def _not_held(
        self, refs: Iterable[MessageReference], held_until: Mapping[int, int] | None = None
    ) -> list[MessageReference]:
        """``refs`` but those held until their delivery time or, for a message id in
        ``held_until``, the later of that and the time given there."""
        if held_until:
            refs, due = list(refs), held_until.get
            times = [max(r.message.scheduled, due(r.message.message_id, 0)) for r in refs]
            return [r for r, t in zip(refs, times, strict=True) if not self._held(r, t)]
        return [r for r in refs if not (r.message.scheduled and self._held(r, r.message.scheduled))]

    def add(self, ref: MessageReference) -> None:
        message = ref.message
        if message.scheduled and self._held(ref, message.scheduled):
            self.messages_added += 1
            return
        if message.priority != DEFAULT_PRIORITY and type(self.messages) is deque:
            self.messages = PriorityRefs(self.messages)
        if message.group_id is not None and not self._grouped:
            self._group_seen()
        if self.last_values is not None:
            self._replace(self.last_values.arrived(ref))
        self.messages.append(ref)
        if self.ring_size >= 0:
            self._enforce_ring()
        self.messages_added += 1
        if self.index is not None:
            self.index.add(ref)
        self.deliver()
        if self.messages and self.on_undelivered is not None:
            self.on_undelivered(self)

    def add_many(
        self, refs: Iterable[MessageReference], held_until: Mapping[int, int] | None = None
    ) -> None:
        """Add references in order (recovery), delivering once at the end; ``held_until``:
        message id -> the time a recovered redelivery delay holds its reference until."""
        held_before = len(self.scheduled)
        refs = self._not_held(refs, held_until)
        self.messages_added += len(self.scheduled) - held_before
        self._prioritise(refs)
        for ref in refs:
            if self.last_values is not None:
                self._replace(self.last_values.arrived(ref))
            self.messages.append(ref)
            self.messages_added += 1
            if self.index is not None:
                self.index.add(ref)
        if self.ring_size >= 0:
            self._enforce_ring()
        self.deliver()

    def add_paged(self, refs: list[MessageReference]) -> None:
        """Depaged references, at the tail in page order (counted as added when paged)."""
        refs = self._not_held(refs)
        self._prioritise(refs)
        if self.last_values is None:
            self.messages.extend(refs)
        else:
            for ref in refs:
                self._replace(self.last_values.arrived(ref))
                self.messages.append(ref)
        self._offer(refs)

    def cancel(self, refs: list[MessageReference]) -> None:
        """Return delivered, unacknowledged references to the head, in their order."""
        if self.last_values is not None:
            kept = []
            for ref in refs:
                if self.last_values.returned(ref):
                    kept.append(ref)
                else:
                    self._replace(ref, waiting=False)
            refs = kept
        if self.ring_size >= 0:
            room = self.ring_size - self._waiting_count()
            for ref in refs[max(room, 0) :]:  # (no room left in the ring: replaced)
                self._replace(ref, waiting=False)
            refs = refs[: max(room, 0)]
        self.delivering -= len(refs)
        self._prioritise(refs)
        self.messages.extendleft(reversed(refs))
        if self._rebalancing and self.delivering <= 0:
            self._rebalancing = False
        self._offer(refs)

    def add_due(self, refs: list[MessageReference]) -> None:
        """Held references whose time came (the scheduler): back at the head, in order."""
        refs = [r for r in refs if r in self.scheduled]
        if not refs:
            return
        for ref in refs:
            del self.scheduled[ref]
        self._prioritise(refs)
        if self.last_values is not None:
            for ref in refs:
                self._replace(self.last_values.arrived(ref))
        self.messages.extendleft(reversed(refs))
        self._offer(refs)

    def redeliver_later(
        self, refs: list[MessageReference], due_ms: list[int]
    ) -> list[MessageReference]:
        """Delivered references that came back, each held until its time (a redelivery
        delay); returned at once if nothing can hold them. The ones held."""
        now: list[MessageReference] = []
        held: list[MessageReference] = []
        for ref, due in zip(refs, due_ms, strict=True):
            (held if self._held(ref, due) else now).append(ref)
        self.delivering -= len(held)
        if now:
            self.cancel(now)
        return held

    def acknowledged(self, count: int = 1) -> None:
        """Delivered references were acknowledged (the broker has persisted that)."""
        self.delivering -= count
        self.messages_acknowledged += count
        if self._rebalancing and self.delivering <= 0:
            self._rebalancing = False
            self.deliver()

    def held(self) -> list[MessageReference]:
        """The held references, earliest first."""
        return sorted(self.scheduled, key=self.scheduled.__getitem__)

    def remove_all(self) -> list[MessageReference]:
        """Take every ready and held reference out (purge, queue deletion)."""
        refs = list(self.messages) + self.held()
        self.scheduled = {}
        self.messages = deque()
        if self.index is not None:
            self.index.clear()
        if self.last_values is not None:
            self.last_values.current.clear()
        return refs

    def remove(self, refs: list[MessageReference]) -> None:
        """Take some ready or held references out (they move elsewhere: redistribution,
        scale-down)."""
        messages = self.messages
        if self.index is not None:
            for ref in refs:
                self.index.discard(ref)
        if self.last_values is not None:
            for ref in refs:
                self.last_values.left(ref)
        if self.scheduled and (held := self.scheduled.keys() & refs):
            for ref in held:
                del self.scheduled[ref]
            refs = [r for r in refs if r not in held]
        if len(refs) <= len(messages) and all(a is b for a, b in zip(refs, messages, strict=False)):
            for _ in refs:  # the usual case: the oldest ones
                messages.popleft()
            return
        taken = {id(r) for r in refs}
        kept = self._fresh()
        kept.extend(r for r in messages if id(r) not in taken)
        self.messages = kept

    # -- consumers ---------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        if 0 <= self.max_consumers <= len(self.consumers):
            raise MaxConsumersReachedError(
                f"queue {self.name} already has its maximum of {self.max_consumers} consumer(s)"
            )
        self.consumers.append(consumer)
        if consumer.selector is not None:
            self._selective += 1
        if self._gated and self.delay_before_dispatch >= 0 and self._dispatch_at < 0:
            self._dispatch_at = now_ms() + self.delay_before_dispatch
            if self._on_hold is not None:
                self._on_hold(self.deliver, self._dispatch_at + 1)
        if self.rules is not None and self.rules.consumer_added() and self.delivering > 0:
            self._rebalancing = True
        if self.on_consumers_changed is not None:
            self.on_consumers_changed(self)
        self.deliver()

    def remove_consumer(self, consumer: Consumer) -> None:
        try:
            index = self.consumers.index(consumer)
        except ValueError:
            return
        del self.consumers[index]
        if consumer.selector is not None:
            self._selective -= 1
        if self.rules is not None:
            self.rules.consumer_removed(consumer)
        if self._gated and not self.consumers:  # the next consumers wait again
            self._dispatching, self._dispatch_at = False, -1
        if index < self._next_consumer:
            self._next_consumer -= 1
        if self._next_consumer >= len(self.consumers):
            self._next_consumer = 0
        if self.on_consumers_changed is not None:
            self.on_consumers_changed(self)

    # -- delivery ----------------------------------------------------------------------

    def pause(self) -> None:
        """Deliver nothing from now on (messages still arrive); :meth:`resume` undoes it."""
        self.paused = True

    def resume(self) -> None:
        """Deliver again what arrived while paused."""
        if self.paused:
            self.paused = False
            self._offer(())

    def _offer(self, refs: Iterable[MessageReference]) -> None:
        """``refs`` joined the ready ones (in the offset index too): deliver, and tell
        redistribution about what no consumer took."""
        if self.index is not None:
            for ref in refs:
                self.index.add(ref)
        self.deliver()
        if self.messages and self.on_undelivered is not None:
            self.on_undelivered(self)

    def deliver(self) -> None:
        """Hand ready references to consumers with credit until none can take more."""
        if self.paused or self._rebalancing or not (self._dispatching or self._may_dispatch()):
            return
        if self._in_deliver:
            # A consumer's deliver() got credit back and re-entered: loop once more.
            self._redeliver = True
            return
        self._in_deliver = True
        try:
            while True:
                self._redeliver = False
                if self._selective or self._grouped or self.last_values is not None:
                    self._deliver_with_selectors()
                else:
                    self._deliver_in_order()
                if not self._redeliver:
                    break
        finally:
            self._in_deliver = False
        if not self.messages and type(self.messages) is not deque:
            self.messages = deque()  # (back to the cheaper kind)

    def _deliver_in_order(self) -> None:
        messages = self.messages
        while messages and self.consumers:
            consumer = self._take_consumer(None)
            if consumer is None:
                return
            ref = messages.popleft()
            if self.index is not None:
                self.index.discard(ref)
            if ref.message.expiration and self._expired(ref):
                continue
            self.delivering += 1
            ref.delivery_count += 1
            consumer.deliver(ref)

    def _deliver_with_selectors(self) -> None:
        kept = self._fresh()
        messages = self.messages
        while messages and self.consumers:
            ref = messages.popleft()
            if self._expired(ref):
                if self.index is not None:
                    self.index.discard(ref)
                if self.last_values is not None:
                    self.last_values.left(ref)
                continue
            consumer = self._take_consumer(ref)
            if consumer is None:
                kept.append(ref)
                if not any(c.has_credit() for c in self.consumers):
                    break
                continue
            if self.index is not None:
                self.index.discard(ref)
            self.delivering += 1
            ref.delivery_count += 1
            if self._grouped:
                assert self.rules is not None
                self.rules.delivered(ref, consumer, self._owner)
            if self.last_values is not None:
                self.last_values.left(ref)
            consumer.deliver(ref)
        kept.extend(messages)
        self.messages = kept

    def _take_consumer(self, ref: MessageReference | None) -> Consumer | None:
        """The next consumer, round robin, that has credit and whose selector matches (the
        consumer the dispatch rules name for ``ref``, if any)."""
        if self._grouped and ref is not None:
            assert self.rules is not None
            owner = self._owner = self.rules.owner(ref)
            if owner is not None:
                if not owner.has_credit() or (
                    owner.selector is not None
                    and not owner.selector.matches(ref.message.filter_value)
                ):
                    return None
                return owner
        consumers = self.consumers
        count = len(consumers)
        start = self._next_consumer % count
        for step in range(count):
            index = (start + step) % count
            consumer = consumers[index]
            if not consumer.has_credit():
                continue
            if (
                ref is not None
                and consumer.selector is not None
                and not consumer.selector.matches(ref.message.filter_value)
            ):
                continue
            self._next_consumer = (index + 1) % count
            return consumer
        return None

    def _may_dispatch(self) -> bool:
        """Whether dispatch starts now (``consumers-before-dispatch`` consumers came, or
        ``delay-before-dispatch`` passed since the first did); never while deliveries are
        in flight, so messages keep their order."""
        if self.delivering:
            return False
        if len(self.consumers) >= self.consumers_before_dispatch or (
            0 <= self._dispatch_at < now_ms()
        ):
            self._dispatching = True
        return self._dispatching

    def _waiting_count(self) -> int:
        return len(self.messages) + len(self.scheduled) + self.paged

    def _enforce_ring(self) -> None:
        """Keep at most ``ring_size`` waiting messages: the oldest ready ones go, replaced."""
        while self._waiting_count() > self.ring_size and self.messages:
            self._replace(next(iter(self.messages)))

    def _replace(self, older: MessageReference | None, *, waiting: bool = True) -> None:
        """``older`` was replaced, by a later message of its last value or by a newer one
        in a full ring: out of the queue (``waiting``; else a delivery that came back) and
        acknowledged: it never reaches a consumer again."""
        if older is None:
            return
        if waiting:
            self.messages.remove(older)
            if self.index is not None:
                self.index.discard(older)
            if self.last_values is not None:
                self.last_values.left(older)
            self.delivering += 1  # handed to the acknowledgement, which counts it down
        self.messages_replaced += 1
        if self._on_replaced is not None:
            self._on_replaced(older)

    def _expired(self, ref: MessageReference) -> bool:
        expiration = ref.message.expiration
        if not expiration or self._clock_ms is None or self._clock_ms() < expiration:
            return False
        self.delivering += 1  # handed to the expiry path, which acknowledges it
        if self._on_expired is not None:
            self._on_expired(ref)
        return True

    def __repr__(self) -> str:
        return (
            f"Queue({self.name!r}, address={self.address!r}, {self.routing_type.name}, "
            f"messages={self.message_count}, consumers={len(self.consumers)})"
        )
