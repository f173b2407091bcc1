"""The address and queue reaper: every ``address-queue-scan-period`` ms, queues and addresses
whose address settings say they may go are deleted (Artemis's
``PostOfficeImpl.AddressQueueReaper`` and ``reapAddresses``).

Theory of operation
-------------------
A queue is *auto-delete* when nothing in broker.xml declares it and its address settings
say so: ``auto-delete-queues`` for a queue a client's use created, ``auto-delete-created-
queues`` for one a client or the management API created on purpose (a durable subscription,
``POST /api/queues``). An auto-delete queue is *deletable* when it has no consumer, no send
on its way to it, at most ``auto-delete-queues-message-count`` messages (-1: any number),
and either

* ``auto-delete-queues-skip-usage-check`` is false, the queue was *used* (a consumer left
  it, or it acknowledged, expired or killed a message) and its last consumer left at least
  ``auto-delete-queues-delay`` ms ago; or
* ``auto-delete-queues-skip-usage-check`` is true and it was created at least that long ago.

An auto-created address is deletable when ``auto-delete-addresses`` is true, nothing is bound
to it (no queue here, no queue of another node of the cluster, no divert) and, in the same
way, it lost its last queue at least ``auto-delete-addresses-delay`` ms ago (or, skipping the
usage check, was created that long ago).

As in Artemis, a scan deletes what a previous scan already found deletable and that stayed
so (*swept* twice): with the default delays of 0 a queue goes one to two periods after its
last consumer left, and its address (its last queue gone) one period later. A consumer that
comes and goes between two scans makes the queue wait for two scans again. At the node's
start, before clients are served, one *initial check* deletes at once, whatever the delays
and the usage, the auto-delete queues that are empty (and not paging) and the auto-created
addresses nothing is bound to.

When each queue and address was created and last lost a consumer or a binding is kept in
:class:`Lifetimes` (in memory: after a restart a queue's life starts again, as in Artemis).
Temporary queues are not this module's business: they go with their last consumer
(:meth:`.Addresses.queue_lost_consumer`), as do the messages of a purge-on-no-consumers queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.message import now_ms
from artemis_py.broker.routing import is_internal
from artemis_py.exceptions import ArtemisError

if TYPE_CHECKING:
    from artemis_py.broker.addresses import Addresses
    from artemis_py.broker.pending import Pending
    from artemis_py.broker.queue import Queue
    from artemis_py.broker.routing import Address
    from artemis_py.config import AddressSettings

log = logging.getLogger("artemis_py.broker")


@dataclass(slots=True)
class Lifetime:
    """One queue's or address's times (epoch ms; -1: never)."""

    created_ms: int
    # A queue: when its last consumer left; an address: when its last binding went.
    emptied_ms: int = -1
    # When a scan found it deletable, if it has stayed so since (-1: not swept). A
    # consumer or binding that came and went since clears it (as Artemis's addConsumer).
    swept_ms: int = -1

    def swept(self) -> bool:
        return self.swept_ms != -1


class Lifetimes:
    """The :class:`Lifetime` of every queue (by id) and address (by id) of the node."""

    def __init__(self, clock_ms: Callable[[], int] = now_ms) -> None:
        self.clock_ms = clock_ms
        self.queues: dict[int, Lifetime] = {}
        self.addresses: dict[int, Lifetime] = {}

    def of_queue(self, queue: Queue) -> Lifetime:
        """``queue``'s lifetime (one that starts now for a queue not seen before, such as
        one recovered from the journal)."""
        found = self.queues.get(queue.id)
        if found is None:
            found = self.queues[queue.id] = Lifetime(self.clock_ms())
        return found

    def of_address(self, address: Address) -> Lifetime:
        found = self.addresses.get(address.id)
        if found is None:
            found = self.addresses[address.id] = Lifetime(self.clock_ms())
        return found

    def consumer_removed(self, queue: Queue) -> None:
        lifetime = self.of_queue(queue)
        lifetime.emptied_ms, lifetime.swept_ms = self.clock_ms(), -1

    def binding_removed(self, address: Address) -> None:
        lifetime = self.of_address(address)
        lifetime.emptied_ms, lifetime.swept_ms = self.clock_ms(), -1


class AddressQueueReaper:
    """Deletes the node's deletable queues and addresses every ``period_ms`` (-1: never)."""

    def __init__(self, addresses: Addresses, period_ms: int) -> None:
        self.addresses = addresses
        self.post_office = addresses.post_office
        self.lifetimes = addresses.lifetimes
        self.period_ms = period_ms
        self.scans = 0  # completed scans (tests and diagnostics)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The initial check, then a scan every period until cancelled (Artemis's
        ``startAddressQueueScanner``: the check runs whatever the period)."""
        await self.scan(initial=True)
        task_status.started()
        if self.period_ms <= 0:
            return
        while True:
            await trio.sleep(self.period_ms / 1000)
            await self.scan()

    async def scan(self, *, initial: bool = False) -> int:
        """Visit every queue, then every address; the number of them deleted."""
        deleted = 0
        for queue in list(self.post_office.queues.values()):
            if self.post_office.queue(queue.name) is queue and self._reap_queue(queue, initial):
                deleted += await self._delete(
                    f"queue {queue.name}", self.addresses.reap_queue(queue)
                )
        for address in list(self.post_office.addresses.values()):
            if self.post_office.address(address.name) is address and self._reap_address(
                address, initial
            ):
                deleted += await self._delete(
                    f"address {address.name}", self.addresses.delete_address(address)
                )
        # (An address the management API deleted leaves its lifetime behind.)
        live = {address.id for address in self.post_office.addresses.values()}
        for stale in self.lifetimes.addresses.keys() - live:
            del self.lifetimes.addresses[stale]
        self.scans += 1
        return deleted

    @staticmethod
    async def _delete(what: str, pending: Pending) -> int:
        try:
            await pending.settled()
        except ArtemisError as exc:  # (the journal refused: the next start tries again)
            log.error("cannot delete %s: %s", what, exc)
            return 0
        log.info("%s deleted: auto-delete (its address settings)", what)
        return 1

    def _reap_queue(self, queue: Queue, initial: bool) -> bool:
        """Whether to delete ``queue`` now (sweeping it when it is a first finding)."""
        settings = self.addresses.address_settings(queue.address)
        lifetime = self.lifetimes.of_queue(queue)
        if not self._deletable_queue(queue, settings, initial):
            lifetime.swept_ms = -1
            return False
        if initial:
            # Only an empty queue goes at the start; the others are swept once already.
            paging = self.addresses.paging.addresses.get(queue.address)
            if queue.message_count == 0 and not (paging is not None and paging.paging):
                return True
        elif lifetime.swept():
            return True
        lifetime.swept_ms = self.lifetimes.clock_ms()
        return False

    def _deletable_queue(self, queue: Queue, settings: AddressSettings, initial: bool) -> bool:
        if is_internal(queue.name) or queue.consumers or queue.arriving:
            return False  # (a send routed here before the last consumer left is not lost)
        if not self.addresses.auto_delete(queue, settings):
            return False
        limit = settings.auto_delete_queues_message_count
        if limit != -1 and queue.message_count > limit:
            return False
        if initial:
            return True
        lifetime = self.lifetimes.of_queue(queue)
        if settings.auto_delete_queues_skip_usage_check:
            return self._waited(lifetime.created_ms, settings.auto_delete_queues_delay)
        used = (
            lifetime.emptied_ms != -1
            or queue.messages_acknowledged > 0
            or queue.messages_expired > 0
            or queue.messages_killed > 0
        )
        return used and self._waited(lifetime.emptied_ms, settings.auto_delete_queues_delay)

    def _reap_address(self, address: Address, initial: bool) -> bool:
        lifetime = self.lifetimes.of_address(address)
        if not self._deletable_address(address, initial):
            lifetime.swept_ms = -1
            return False
        if initial or lifetime.swept():
            return True
        lifetime.swept_ms = self.lifetimes.clock_ms()
        return False

    def _deletable_address(self, address: Address, initial: bool) -> bool:
        settings = self.addresses.address_settings(address.name)
        if not (settings.auto_delete_addresses and address.auto_created):
            return False
        if self.addresses.bound(address):
            return False
        if initial:
            return True
        lifetime = self.lifetimes.of_address(address)
        if settings.auto_delete_addresses_skip_usage_check:
            return self._waited(lifetime.created_ms, settings.auto_delete_addresses_delay)
        return lifetime.emptied_ms != -1 and self._waited(
            lifetime.emptied_ms, settings.auto_delete_addresses_delay
        )

    def _waited(self, since_ms: int, delay_ms: int) -> bool:
        return self.lifetimes.clock_ms() - since_ms >= delay_ms
