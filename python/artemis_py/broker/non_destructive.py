"""Non-destructive queues (Artemis's "Non-Destructive Queues"): consuming a message does
not remove it.

Theory of operation
-------------------
A :class:`NonDestructiveQueue` keeps every reference it holds in :attr:`Queue.messages`, in
the order each became ready (arrival, or the end of its hold), whether or not a consumer
has it: each new reference gets the next number of the queue's *sequence* (``ref.seq``),
so the list is always sorted by it. Priorities do not reorder it.

Each consumer has a *position*: the sequence number of the last reference handed to it
(none: it starts at the head). Delivery walks each consumer with credit from its position
forward, skipping what its selector refuses, so every consumer sees every message once, in
order, at its own pace; a consumer that comes later starts at the head and sees what is
still there. Delivering counts the reference's deliveries (one count shared by every
consumer, as Artemis's reference does: a second consumer's copy is marked redelivered).

A delivery stays *delivering* until its consumer acknowledges it or gives it back; either
only ends the delivery. An acknowledgement removes nothing and writes nothing (Artemis:
"acknowledge ... ignored nonDestructive=true"), is not counted as acknowledged, and a
delivery given back (NACK, a closed consumer, a rolled-back transaction) is not delivered
again to that consumer, is not dead-lettered and waits for no redelivery delay: the message
never left, and the consumers that have not passed it yet still get it. References leave
only by expiry, by a later value of their last-value key (the usual use: a "latest value
cache", where a new consumer gets the current value per key), by ``ring-size``, or by the
management API (purge, move, delete).

The message count counts each message once: the references in the queue, held and paged
(Artemis's QueueImpl adds its deliveries again; its LastValueQueue subtracts them).
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections import deque
from typing import TYPE_CHECKING, Any

from artemis_py.broker.queue import Queue

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from artemis_py.broker.message import MessageReference
    from artemis_py.broker.queue import Consumer


class NonDestructiveQueue(Queue):
    """A queue whose consumers each read every message; acknowledgements remove nothing."""

    non_destructive = True
    messages: deque[MessageReference]  # (in sequence order: never by priority)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sequence = itertools.count()
        # Per consumer (by id): the sequence number of the last reference it was given, and
        # that reference's index then (a hint: right while nothing before it left).
        self._positions: dict[int, int] = {}
        self._hints: dict[int, int] = {}

    @property
    def message_count(self) -> int:
        return len(self.messages) + self.paged + len(self.scheduled)

    # -- messages ----------------------------------------------------------------------

    def _append(self, ref: MessageReference) -> None:
        """``ref`` joins the tail, replacing the last value it repeats."""
        if self.last_values is not None:
            self._replace(self.last_values.arrived(ref))
        ref.seq = next(self._sequence)
        self.messages.append(ref)
        if self.index is not None:
            self.index.add(ref)

    def _append_all(self, refs: Iterable[MessageReference]) -> None:
        for ref in refs:
            self._append(ref)
        if self.ring_size >= 0:
            self._enforce_ring()
        self.deliver()

    def add(self, ref: MessageReference) -> None:
        self.messages_added += 1
        message = ref.message
        if not (message.scheduled and self._held(ref, message.scheduled)):
            self._append_all((ref,))

    def add_many(
        self, refs: Iterable[MessageReference], held_until: Mapping[int, int] | None = None
    ) -> None:
        # (``held_until`` is never given here: no redelivery delay holds this queue's
        # deliveries, so none is recorded for it)
        refs = list(refs)
        self.messages_added += len(refs)
        self._append_all(
            r for r in refs if not (r.message.scheduled and self._held(r, r.message.scheduled))
        )

    def add_paged(self, refs: list[MessageReference]) -> None:
        self._append_all(
            r for r in refs if not (r.message.scheduled and self._held(r, r.message.scheduled))
        )

    def add_due(self, refs: list[MessageReference]) -> None:
        """Held references whose time came: at the tail, where every position reaches them."""
        refs = [r for r in refs if r in self.scheduled]
        for ref in refs:
            del self.scheduled[ref]
        self._append_all(refs)

    def cancel(self, refs: list[MessageReference]) -> None:
        """Deliveries given back: they end; the references never left the queue."""
        self._ended(len(refs))

    def redeliver_later(
        self, refs: list[MessageReference], due_ms: list[int]
    ) -> list[MessageReference]:
        self._ended(len(refs))
        return []  # (the message never left: no delay, see the module docstring)

    def acknowledged(self, count: int = 1) -> None:
        """Deliveries acknowledged: they end (not counted as acknowledged, as Artemis)."""
        self._ended(count)

    def _ended(self, count: int) -> None:
        self.delivering -= count
        if self._rebalancing and self.delivering <= 0:  # (group-rebalance waited for them)
            self._rebalancing = False
            self.deliver()

    # -- consumers ---------------------------------------------------------------------

    def remove_consumer(self, consumer: Consumer) -> None:
        super().remove_consumer(consumer)
        self._positions.pop(id(consumer), None)
        self._hints.pop(id(consumer), None)
        self.deliver()  # (an exclusive queue's next consumer takes over)

    # -- delivery ----------------------------------------------------------------------

    def _deliver_in_order(self) -> None:
        # An exclusive queue delivers to its first consumer only; message groups do not
        # restrict who reads what here (every consumer reads every message).
        exclusive = self.rules is not None and self.rules.exclusive
        for consumer in self.consumers[:1] if exclusive else list(self.consumers):
            if consumer in self.consumers:
                self._deliver_to(consumer)

    _deliver_with_selectors = _deliver_in_order

    def _deliver_to(self, consumer: Consumer) -> None:
        """Give ``consumer`` what follows its position, while it has credit."""
        messages = self.messages
        selector = consumer.selector
        position = self._positions.get(id(consumer), -1)
        hint = self._hints.get(id(consumer), -1)
        while consumer.has_credit():
            # The next one follows the last one given, if that is still where it was: a
            # deque's middle is slow to index, and a bisection indexes it ~log2(n) times.
            if 0 <= hint < len(messages) and messages[hint].seq == position:
                at = hint + 1
            else:
                at = bisect_right(messages, position, key=_seq)
            if at >= len(messages):
                return
            ref = messages[at]
            if ref.message.expiration and self._expired_out(ref, at):
                continue
            position = self._positions[id(consumer)] = ref.seq
            hint = self._hints[id(consumer)] = at
            if selector is not None and not selector.matches(ref.message.filter_value):
                continue
            self.delivering += 1
            ref.delivery_count += 1
            consumer.deliver(ref)
            if consumer not in self.consumers:  # (it closed while taking the message)
                return

    def _expired_out(self, ref: MessageReference, at: int) -> bool:
        """Whether ``ref`` (at index ``at``) expired: then it left for the expiry path."""
        if self._clock_ms is None or self._clock_ms() < ref.message.expiration:
            return False
        del self.messages[at]
        if self.index is not None:
            self.index.discard(ref)
        if self.last_values is not None:
            self.last_values.left(ref)
        return self._expired(ref)


def _seq(ref: MessageReference) -> int:
    return ref.seq
