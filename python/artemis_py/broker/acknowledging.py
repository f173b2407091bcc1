"""What happens to references that leave their queue other than by a move: acknowledged
for good, cancelled back to their queue (or dead-lettered after too many deliveries), or
expired.

Theory of operation
-------------------
An acknowledgement on a non-destructive queue (:mod:`.non_destructive`) only ends its
delivery: nothing is written. Any other takes effect in memory at once (the queue's counts,
the reference's share of its address's memory) and is durable when its journal records are:
for a message in the journal, an ACK_REF update, or its delete with the last reference; for
a depaged message, a PAGE_ACK record (:mod:`artemis_py.broker.paging`), and for a large
message paged by reference, the delete of its LARGE_PAGE_REF record with its last queue. A
cancelled reference goes back to its queue with its delivery count kept in the journal, or
is held for its ``redelivery-delay`` with the time it is due kept there too (on a
non-destructive queue, neither: the delivery only ends); once the count reaches
``max-delivery-attempts`` a copy goes to the dead-letter address instead, stored before the
original's acknowledgement, so a crash can duplicate it but never lose it. Expiry moves a
message the same way, to the expiry address. Before either move, the original address's
queue on the target is auto-created when the settings ask for it (:mod:`.expiry`); a target
without any binding takes nothing: the message is dropped, as Artemis drops it (logged once
per queue).

:class:`~artemis_py.broker.broker.Broker` owns one :class:`Acknowledgements`, made from the
parts it works on (the store, the paging manager, the post office) and the broker's route and
send for the moves; the functions here are what transactions
(:mod:`artemis_py.broker.sending`) share with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Never

from artemis_py.broker.expiry import ACTUAL_EXPIRY, resource_queue
from artemis_py.broker.message import MessageReference, now_ms
from artemis_py.broker.pending import Pending, Ticket
from artemis_py.broker.persistence import Persistence
from artemis_py.broker.routing.diverts import original_properties
from artemis_py.broker.scheduling import redelivery_delay
from artemis_py.storage import Op

if TYPE_CHECKING:
    from artemis_py.broker.message import Message
    from artemis_py.broker.paging import PagingManager
    from artemis_py.broker.queue import Queue
    from artemis_py.broker.routing import PostOffice
    from artemis_py.config import AddressSettings

log = logging.getLogger("artemis_py.broker")


class Acknowledgements:
    """Acknowledging, cancelling and expiring the references of one broker's queues."""

    def __init__(
        self,
        persistence: Persistence,
        paging: PagingManager,
        post_office: PostOffice,
        address_settings: Callable[[str], AddressSettings],
    ) -> None:
        self.persistence = persistence
        self.paging = paging
        self.post_office = post_office
        self.address_settings = address_settings
        # Where a dead letter's or expired message's copy goes: the broker's route and
        # (internal) send, given once they exist (:meth:`send_moves_with`).
        self.route: Callable[[Message], list[Queue]] = _not_yet
        self.send: Callable[..., Pending] = _not_yet
        # Makes an auto-created expiry or dead-letter queue: (name, address, filter).
        self.create_resource_queue: Callable[[str, str, str], None] = _not_yet
        self._warned: set[tuple[str, str]] = set()  # (queue, why): drops logged once
        # Past this many deliveries a message's count and redelivery time stay in memory
        # (Artemis's max-redelivery-records: a message redelivered for ever must not grow
        # its journal records for ever; -1: always journaled).
        self.max_redelivery_records = -1

    def send_moves_with(
        self,
        route: Callable[[Message], list[Queue]],
        send: Callable[..., Pending],
        create_resource_queue: Callable[[str, str, str], None],
    ) -> None:
        """Route and send dead letters' and expired messages' copies with these, and make
        their auto-created queues with ``create_resource_queue``."""
        self.route = route
        self.send = send
        self.create_resource_queue = create_resource_queue

    def acknowledge(self, refs: list[MessageReference], *, awaited: bool = True) -> Pending:
        """Consumers acknowledged delivered references: they are gone for good.

        ``awaited=False`` when nobody waits for the acknowledgement (auto-ack, a bridge's
        confirmed messages, an ACK without a receipt): its records are written at once but
        not fdatasynced on their own, as Artemis appends message deletes without sync. A
        process crash cannot undo them; the next synced batch makes them durable, and only
        a machine crash before it can bring such a message back (redelivered, never lost).
        """
        deleted: list[MessageReference] | None = refs
        for ref in refs:
            ref.queue.acknowledged()
            if ref.queue.non_destructive:
                deleted = None
        if deleted is None:  # (an acknowledgement on a non-destructive queue deletes nothing)
            deleted = [ref for ref in refs if not ref.queue.non_destructive]
        if awaited:
            return Pending(tickets=self.acknowledge_refs(deleted))
        self.acknowledge_refs(deleted, awaited=False)
        return Pending()

    def acknowledge_delivered(self, ref: MessageReference) -> None:
        """``acknowledge([ref], awaited=False)`` for one delivery of an ``auto``
        subscription, the most frequent acknowledgement: without a pending to return."""
        queue = ref.queue
        queue.acknowledged()
        if not queue.non_destructive:
            self.acknowledge_refs([ref], awaited=False)

    def acknowledge_refs(self, refs: list[MessageReference], awaited: bool = True) -> list[Ticket]:
        """Release ``refs`` and queue their acknowledgement records (the queues' counts
        are the caller's)."""
        records = []
        paged = []
        for ref in refs:
            if ref.paged is not None:
                op = self.paging.ack_op(ref)
                if op is not None:
                    paged.append(op)
                paged += page_ref_acked(self.persistence, ref, None)
                # Released once its cursor has counted the ack: releasing the last depaged
                # message is what ends paging (AddressPaging.drained asks the cursors).
                release(ref)
                continue
            release(ref)
            ref.message.ref_count -= 1
            record = ack_record(ref)
            if record is not None:
                records.append(record)
        return self.persistence.acknowledge(records, awaited, paged)

    def discard(self, refs: list[MessageReference]) -> Pending:
        """Take ready references out of their queues and acknowledge them: gone for good."""
        for queue, queue_refs in by_queue(refs):
            queue.remove(queue_refs)
            queue.delivering += len(queue_refs)
            queue.acknowledged(len(queue_refs))
        # (deleted from a non-destructive queue too: this is no consumer's acknowledgement)
        return Pending(tickets=self.acknowledge_refs(refs))

    def cancel(self, refs: list[MessageReference]) -> None:
        """Delivered references come back unacknowledged (consumer closed, NACK)."""
        by_queue: dict[int, list[MessageReference]] = {}
        counts = []
        for ref in refs:
            by_queue.setdefault(id(ref.queue), []).append(ref)
            queue = ref.queue
            # (a non-destructive queue's deliveries are not counted in the journal)
            durable = ref.message.durable and queue.durable and not queue.non_destructive
            if durable and ref.paged is None and self._journals(ref):
                counts.append((ref.message.message_id, queue.id, ref.delivery_count))
        self.persistence.update_delivery_counts(counts)
        for queue_refs in by_queue.values():
            queue = queue_refs[0].queue
            if queue.non_destructive:  # the message never left: only the deliveries end
                queue.cancel(queue_refs)
                continue
            settings = self.address_settings(queue.address)
            max_attempts = settings.max_delivery_attempts
            keep = []
            for ref in queue_refs:
                if 0 < max_attempts <= ref.delivery_count:
                    self._dead_letter(ref)
                else:
                    keep.append(ref)
            if not keep:
                continue
            if self.post_office.queue(queue.name) is not queue:  # deleted meanwhile
                self.acknowledge_refs(keep)
            elif settings.redelivery_delay > 0:  # each waits its delay; later ones flow
                self._redeliver_later(queue, keep, settings)
            else:
                queue.cancel(keep)

    def _redeliver_later(
        self, queue: Queue, refs: list[MessageReference], settings: AddressSettings
    ) -> None:
        """Hold ``refs`` in ``queue`` for their redelivery delay, and journal when each
        durable one is due (a SCHEDULED_DELIVERY_TIME update), so that the hold survives a
        restart (Artemis's updateScheduledDeliveryTime in QueueImpl's redelivery check).

        A depaged reference's hold is not journaled, as Artemis skips paged references:
        its message is in the page files, with no journal record to update, so after a
        restart it is delivered without waiting.
        """
        now = now_ms()
        due = [now + redelivery_delay(settings, ref.delivery_count) for ref in refs]
        held = set(queue.redeliver_later(refs, due))
        if not (held and queue.durable):
            return
        times = [
            (ref.message.message_id, queue.id, at)
            for ref, at in zip(refs, due, strict=True)
            if ref in held
            and ref.paged is None
            and ref.message.durable
            and ref.message.stored
            and self._journals(ref)
        ]
        self.persistence.update_scheduled_times(times)

    def _journals(self, ref: MessageReference) -> bool:
        """Whether ``ref``'s redelivery is journaled (within ``max-redelivery-records``)."""
        limit = self.max_redelivery_records
        return limit < 0 or ref.delivery_count <= limit

    def _dead_letter(self, ref: MessageReference) -> None:
        queue = ref.queue
        queue.messages_killed += 1
        settings = self.address_settings(queue.address)
        target = settings.dead_letter_address
        wanted = resource_queue(
            queue.address,
            target,
            settings.auto_create_dead_letter_resources,
            settings.dead_letter_queue_prefix,
            settings.dead_letter_queue_suffix,
        )
        self._move(ref, target, "dead letter", wanted)

    def replaced(self, ref: MessageReference) -> None:
        """A last-value queue's reference that a later one of its value replaced: gone
        (counted as replaced by its queue, not as acknowledged)."""
        ref.queue.delivering -= 1
        self.acknowledge_refs([ref], awaited=False)

    def expire(self, ref: MessageReference) -> None:
        """``ref`` expired (found by a delivery or the expiry reaper), handed over as a
        delivery: it moves to the expiry address of its message's address (Artemis uses
        the message's address settings, which differ from the queue's for a wildcard
        subscription)."""
        ref.queue.messages_expired += 1
        address = ref.message.address
        settings = self.address_settings(address)
        target = settings.expiry_address
        wanted = resource_queue(
            address,
            target,
            settings.auto_create_expiry_resources,
            settings.expiry_queue_prefix,
            settings.expiry_queue_suffix,
        )
        self._move(ref, target, "expiry", wanted)

    def _move(
        self,
        ref: MessageReference,
        target: str | None,
        why: str,
        resource: tuple[str, str] | None,
    ) -> None:
        """Acknowledge ``ref`` and, when ``target`` has bindings, send a copy there (after
        making the ``resource`` queue, (name, filter), if one is wanted)."""
        # Counted as expired or killed by the caller, not as acknowledged (Artemis's
        # QueueImpl keeps the three apart).
        ref.queue.delivering -= 1
        if target and resource is not None:
            self.create_resource_queue(resource[0], target, resource[1])
        address = self.post_office.address(target) if target else None
        if address is not None and (address.queues or self.post_office.remote.get(target or "")):
            copy = ref.message.with_address(self.persistence.next_id(), target or "")
            original = original_properties(ref.message, ref.queue.name)
            if why == "expiry":
                original[ACTUAL_EXPIRY] = str(now_ms())
            copy.set_properties(original)
            queues = self.route(copy)
            if queues:
                # Stored before the original's acknowledgement in the same journal, so a
                # crash can duplicate the message but never lose it. Internal moves do not
                # wait for the sync before the copy becomes visible.
                self.paging.settle_soon(self.send(copy, queues, internal=True))
            else:
                self._dropped(ref, f"no queue on {why} address {target} takes it")
        elif target:
            self._dropped(ref, f"{why} address {target} has no queue")
        else:
            self._dropped(ref, f"no {why} address is configured")
        self.acknowledge_refs([ref])

    def _dropped(self, ref: MessageReference, why: str) -> None:
        """Log a dropped message: a warning the first time per queue and reason (an
        expiry scan may drop thousands), then at debug level (Artemis warns once too)."""
        key = (ref.queue.name, why)
        if len(self._warned) >= 10_000:  # (temporary queues come and go: stay bounded)
            self._warned.clear()
        if key in self._warned:
            log.debug("message %d dropped from queue %s: %s", ref.message.message_id, *key)
            return
        self._warned.add(key)
        log.warning(
            "message %d dropped from queue %s: %s (further ones from this queue are "
            "dropped without a warning)",
            ref.message.message_id,
            *key,
        )


def _not_yet(*args: object, **kwargs: object) -> Never:
    raise RuntimeError("Acknowledgements.send_moves_with was not called")


def page_ref_acked(persistence: Persistence, ref: MessageReference, tx_id: int | None) -> list[Op]:
    """A depaged large message by reference: its LARGE_PAGE_REF record's delete once
    the last of its queues acknowledged it."""
    if ref.message.body_ref is None or ref.paged is None:
        return []
    return persistence.large.page_acked(ref.queue.address, ref.paged, ref.queue.id, tx_id)


def release(ref: MessageReference) -> None:
    """``ref`` leaves memory for good: its share of the address's memory goes back."""
    if ref.held is not None:
        ref.held.release_one()
        ref.held = None


def ack_record(ref: MessageReference) -> tuple[int, int, bool] | None:
    """(message id, queue id, last reference) when the journal must hear of this ack.

    Call after decrementing the message's reference count. The last reference deletes
    a stored message whatever queue it was in; an earlier one is recorded only for a
    durable queue (non-durable queues' references were never written).
    """
    message = ref.message
    if not message.stored:
        return None
    last = message.ref_count <= 0
    if not (last or ref.queue.durable):
        return None
    return (message.message_id, ref.queue.id, last)


def by_queue(refs: Iterable[MessageReference]) -> list[tuple[Queue, list[MessageReference]]]:
    """``refs`` grouped by their queue, in order."""
    groups: dict[int, tuple[Queue, list[MessageReference]]] = {}
    for ref in refs:
        groups.setdefault(id(ref.queue), (ref.queue, []))[1].append(ref)
    return list(groups.values())
