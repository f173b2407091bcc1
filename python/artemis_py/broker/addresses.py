"""Addresses and their queues as clients, the configuration and recovery make and remove them.

Theory of operation
-------------------
An address exists because the configuration names it, a client sent to or subscribed on it
and its settings allow auto-creation, or the bindings journal recorded it. A queue is made
from a :class:`~artemis_py.broker.records.QueueSpec` (what the bindings journal records about
it) and bound to its address in the post office (:mod:`artemis_py.broker.routing`); a
durable one is recorded, and its records are written before any message that names it
(:mod:`artemis_py.broker.persistence`).

Removing a queue acknowledges what it holds and removes its paging cursor and offset marks;
an auto-created address goes with its last queue when its settings say so and their
``auto-delete-addresses-delay`` is 0 (as Artemis's session and management deletions), else
the reaper takes it later. A temporary queue goes with its last consumer; a
purge-on-no-consumers queue loses its messages then, those in page files too
(:meth:`.PagingManager.purge_soon`). Auto-created queues and addresses that fall out of use
are deleted by the periodic scan of :mod:`artemis_py.broker.address_queue_reaper`, which
reads the times kept in :attr:`Addresses.lifetimes`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from artemis_py.broker.address_queue_reaper import Lifetimes
from artemis_py.broker.filter import Filter
from artemis_py.broker.message import now_ms
from artemis_py.broker.message_groups import DispatchRules
from artemis_py.broker.non_destructive import NonDestructiveQueue
from artemis_py.broker.pending import Pending
from artemis_py.broker.queue import Queue
from artemis_py.broker.records import QueueSpec
from artemis_py.broker.routing import Address, is_internal
from artemis_py.config import (
    LAST_VALUE_PROPERTY,
    AddressSettings,
    BrokerConfig,
    QueueKind,
    RoutingType,
)
from artemis_py.exceptions import BrokerError

if TYPE_CHECKING:
    from artemis_py.broker.acknowledging import Acknowledgements
    from artemis_py.broker.offset_reading import OffsetReading
    from artemis_py.broker.paging import PagingManager
    from artemis_py.broker.persistence import Persistence
    from artemis_py.broker.routing import PostOffice
    from artemis_py.broker.scheduling import Scheduler


T = TypeVar("T")


class Addresses:
    """Making, finding and removing one node's addresses and queues."""

    def __init__(
        self,
        config: BrokerConfig,
        persistence: Persistence,
        post_office: PostOffice,
        paging: PagingManager,
        acks: Acknowledgements,
        offsets: OffsetReading,
        scheduler: Scheduler,
    ) -> None:
        self.config = config
        self.persistence = persistence
        self.post_office = post_office
        self.paging = paging
        self.acks = acks
        self.offsets = offsets
        self.scheduler = scheduler
        # When queues and addresses were created and emptied (the reaper's business).
        self.lifetimes = Lifetimes()
        # Queues broker.xml declares: never auto-deleted (Artemis's configuration-managed).
        self._configured = {q.name for a in config.addresses for q in a.queues}
        self._diverted = {d.address for d in config.diverts}

    def address_settings(self, address: str) -> AddressSettings:
        return self.config.address_settings_for(address)

    def deploy_configured(self) -> None:
        """Make the configuration's addresses and queues that do not exist yet."""
        for address_config in self.config.addresses:
            address = self.post_office.address(address_config.name)
            routing_types = set(address_config.routing_types)
            if address is None:
                self._create_address(address_config.name, routing_types, auto_created=False)
            elif not routing_types <= address.routing_types:
                address.routing_types |= routing_types
                self.persistence.store_address(address)
            for qc in address_config.queues:
                if self.post_office.queue(qc.name) is None:
                    self.create_queue(
                        qc.name,
                        address_config.name,
                        qc.routing_type,
                        filter_text=qc.filter,
                        durable=qc.durable,
                        max_consumers=qc.max_consumers,
                        purge_on_no_consumers=qc.purge_on_no_consumers,
                        kind=qc.kind,
                    )

    def resolve_address(
        self, name: str, routing_type: RoutingType | None, *, for_send: bool
    ) -> Address:
        """The address called ``name``, auto-created when its settings allow.

        A wildcard address is for subscriptions: sending to one is refused, as Artemis
        refuses it (what would match is the addresses it stands for, not the pattern)."""
        wildcards = self.post_office.wildcards
        address = self.post_office.address(name)
        # (a pattern that exists is one of the wildcards' matchers: a dict test per send)
        if for_send and (
            name in wildcards.matchers or (address is None and wildcards.is_wildcard(name))
        ):
            raise BrokerError(
                f"cannot send to {name}: it is a wildcard address; messages are sent to an "
                "address it matches and reach the queues bound to it from there"
            )
        settings = self.address_settings(name)
        if address is None:
            problem = wildcards.problem(name)
            if problem is not None:
                raise BrokerError(f"malformed wildcard address: {problem}")
            if not settings.auto_create_addresses:
                raise BrokerError(f"address {name} does not exist and auto-create is disabled")
            if routing_type is None:
                routing_type = (
                    settings.default_address_routing_type
                    if for_send
                    else settings.default_queue_routing_type
                )
            return self._create_address(name, {routing_type}, auto_created=True)
        if routing_type is not None and routing_type not in address.routing_types:
            if not settings.auto_create_addresses:
                raise BrokerError(
                    f"address {name} does not support routing type {routing_type.name}"
                )
            address.routing_types.add(routing_type)
            self.persistence.store_address(address)
        return address

    def _create_address(
        self, name: str, routing_types: set[RoutingType], *, auto_created: bool
    ) -> Address:
        address = Address(
            self.persistence.next_id(), name, set(routing_types), auto_created=auto_created
        )
        self.post_office.add_address(address)
        self.persistence.store_address(address)
        self.lifetimes.of_address(address)
        return address

    def create_queue(
        self,
        name: str,
        address_name: str,
        routing_type: RoutingType,
        *,
        filter_text: str | None = None,
        durable: bool = True,
        temporary: bool = False,
        max_consumers: int | None = None,
        purge_on_no_consumers: bool | None = None,
        auto_created: bool = False,
        kind: QueueKind | None = None,
    ) -> Queue:
        if self.post_office.queue(name) is not None:
            raise BrokerError(f"queue {name} already exists")
        settings = self.address_settings(address_name)
        if self.post_office.address(address_name) is None:
            self.resolve_address(address_name, routing_type, for_send=False)
        spec = QueueSpec(
            queue_id=self.persistence.next_id(),
            name=name,
            address=address_name,
            routing_type=routing_type,
            filter=filter_text or None,
            durable=durable and not temporary,
            temporary=temporary,
            max_consumers=(
                settings.default_max_consumers if max_consumers is None else max_consumers
            ),
            purge_on_no_consumers=(
                settings.default_purge_on_no_consumers
                if purge_on_no_consumers is None
                else purge_on_no_consumers
            ),
            auto_created=auto_created,
        )
        spec = _with_dispatch(spec, kind or QueueKind(), settings)
        queue = self.new_queue(spec)
        self.post_office.add_queue(queue)
        self.lifetimes.of_queue(queue)
        if queue.durable:
            self.persistence.store_queue(spec)
        return queue

    def create_resource_queue(self, name: str, address_name: str, filter_text: str) -> None:
        """An auto-created expiry or dead-letter queue (:mod:`.expiry`), unless a queue of
        that name exists. As Artemis makes these resources: durable, of the address's
        default queue routing type, and the address is made (or given that routing type)
        whatever its auto-create-addresses says."""
        if self.post_office.queue(name) is not None:
            return
        routing_type = self.address_settings(address_name).default_queue_routing_type
        address = self.post_office.address(address_name)
        if address is None:
            self._create_address(address_name, {routing_type}, auto_created=True)
        elif routing_type not in address.routing_types:
            address.routing_types.add(routing_type)
            self.persistence.store_address(address)
        self.create_queue(
            name, address_name, routing_type, filter_text=filter_text, auto_created=True
        )

    def new_queue(self, spec: QueueSpec) -> Queue:
        """The queue ``spec`` describes (not bound yet)."""
        kind = NonDestructiveQueue if spec.non_destructive else Queue
        return kind(
            spec.queue_id,
            spec.name,
            spec.address,
            spec.routing_type,
            filter=Filter.parse(spec.filter) if spec.filter else None,
            durable=spec.durable,
            temporary=spec.temporary,
            max_consumers=spec.max_consumers,
            purge_on_no_consumers=spec.purge_on_no_consumers,
            auto_created=spec.auto_created,
            on_expired=self.acks.expire,
            clock_ms=now_ms,
            rules=dispatch_rules(spec),
            last_value_key=spec.last_value_key,
            on_replaced=self.acks.replaced,
            # (a store-and-forward queue passes a scheduled message on: held over there)
            on_hold=None if is_internal(spec.name) else self.scheduler.hold,
            ring_size=spec.ring_size,
            consumers_before_dispatch=spec.consumers_before_dispatch,
            delay_before_dispatch=spec.delay_before_dispatch,
        )

    def delete_queue(self, queue: Queue, *, with_address: bool = True) -> Pending:
        """Remove a queue and every message reference it holds; its auto-created address
        too when nothing else is bound to it and its settings delete it at once
        (``with_address``)."""
        pending = Pending()
        self.post_office.remove_queue(queue)
        self.lifetimes.queues.pop(queue.id, None)
        refs = queue.remove_all()
        if refs:
            queue.delivering += len(refs)
            pending.tickets += self.acks.acknowledge_refs(refs)
        paging_records = self.paging.queue_removed(queue) + self.offsets.queue_removed(queue)
        if paging_records:
            pending.tickets += self.persistence.submit(paging_records)
        if queue.durable:
            pending.tickets += self.persistence.delete_queue(queue.id)
        address = self.post_office.address(queue.address)
        if address is None:
            return pending
        self.lifetimes.binding_removed(address)
        settings = self.address_settings(address.name)
        if (
            with_address
            and address.auto_created
            and settings.auto_delete_addresses
            and settings.auto_delete_addresses_delay == 0
            and not self.bound(address)
        ):
            pending.tickets += self.delete_address(address).tickets
        return pending

    def reap_queue(self, queue: Queue) -> Pending:
        """Delete ``queue`` for the reaper: its address stays for a later scan (Artemis's
        ``QueueManagerImpl.performAutoDeleteQueue`` leaves it to the next sweeps)."""
        return self.delete_queue(queue, with_address=False)

    def delete_address(self, address: Address) -> Pending:
        """Remove an address (its queues are gone)."""
        self.post_office.remove_address(address.name)
        self.lifetimes.addresses.pop(address.id, None)
        return Pending(tickets=self.persistence.delete_address(address.id))

    def bound(self, address: Address) -> bool:
        """Whether a queue, here or on another node, or a divert is bound to ``address``
        (Artemis's ``isAddressBound``)."""
        return bool(
            address.queues
            or self.post_office.remote.get(address.name)
            or address.name in self._diverted
        )

    def auto_delete(self, queue: Queue, settings: AddressSettings) -> bool:
        """Whether ``queue`` is one its settings delete once unused: not declared in
        broker.xml, and auto-created (``auto-delete-queues``) or created on purpose
        (``auto-delete-created-queues``). Temporary queues go with their consumer."""
        if queue.temporary or queue.name in self._configured:
            return False
        if queue.auto_created:
            return settings.auto_delete_queues
        return settings.auto_delete_created_queues

    def queue_lost_consumer(self, queue: Queue) -> Pending | None:
        """A consumer left ``queue``: with none left, a temporary queue goes and a
        purge-on-no-consumers one is purged (Artemis's ``QueueManagerImpl``); the
        reaper deletes auto-delete queues later (:mod:`.address_queue_reaper`)."""
        if queue.consumers or self.post_office.queue(queue.name) is not queue:
            return None
        self.lifetimes.consumer_removed(queue)
        if queue.temporary:
            return self.delete_queue(queue)
        if queue.purge_on_no_consumers:
            return self._purge(queue)
        return None

    def _purge(self, queue: Queue) -> Pending:
        """Purge-on-no-consumers: every message of ``queue`` is acknowledged and counted
        as killed (Artemis purges with the reason KILLED); those still in page files below
        the queue's stable end (every send settled so far) are acknowledged in the pages by
        a task (:meth:`.PagingManager.purge_soon`)."""
        refs = queue.remove_all()
        queue.messages_killed += len(refs)
        pending = Pending(tickets=self.acks.acknowledge_refs(refs))
        if queue.paged > 0:
            self.paging.purge_soon(queue, self.offsets.stable_end(queue), self._purge_below)
        return pending

    def _purge_below(self, queue: Queue, offset: int) -> int:
        """Purge the ready references of ``queue`` below ``offset`` that came into memory
        from its pages meanwhile; how many."""
        refs = [ref for ref in queue.messages if ref.offset < offset]
        if refs:
            queue.remove(refs)
            queue.messages_killed += len(refs)
            self.acks.acknowledge_refs(refs, awaited=False)
        return len(refs)


def _with_dispatch(spec: QueueSpec, kind: QueueKind, settings: AddressSettings) -> QueueSpec:
    """``spec`` with a new queue's dispatch fields: its declared ones, else its address
    settings' defaults."""
    last_value_key = kind.last_value_key or settings.default_last_value_key
    if last_value_key is None and settings.default_last_value_queue:
        last_value_key = LAST_VALUE_PROPERTY
    return replace(
        spec,
        exclusive=_chosen(kind.exclusive, settings.default_exclusive_queue),
        group_rebalance=_chosen(kind.group_rebalance, settings.default_group_rebalance),
        group_rebalance_pause_dispatch=_chosen(
            kind.group_rebalance_pause_dispatch,
            settings.default_group_rebalance_pause_dispatch,
        ),
        group_buckets=_chosen(kind.group_buckets, settings.default_group_buckets),
        group_first_key=kind.group_first_key or settings.default_group_first_key,
        last_value_key=last_value_key,
        non_destructive=_chosen(kind.non_destructive, settings.default_non_destructive),
        ring_size=_chosen(kind.ring_size, settings.default_ring_size),
        consumers_before_dispatch=_chosen(
            kind.consumers_before_dispatch, settings.default_consumers_before_dispatch
        ),
        delay_before_dispatch=_chosen(
            kind.delay_before_dispatch, settings.default_delay_before_dispatch
        ),
    )


def _chosen(value: T | None, default: T) -> T:
    return default if value is None else value


def dispatch_rules(spec: QueueSpec) -> DispatchRules | None:
    """The rules a queue made from ``spec`` dispatches by (None: none configured, until a
    message of a group arrives)."""
    if not (
        spec.exclusive
        or spec.group_rebalance
        or spec.group_buckets != -1
        or spec.group_first_key is not None
    ):
        return None
    return DispatchRules(
        exclusive=spec.exclusive,
        buckets=spec.group_buckets,
        rebalance=spec.group_rebalance,
        pause_to_rebalance=spec.group_rebalance_pause_dispatch,
        first_key=spec.group_first_key,
    )
