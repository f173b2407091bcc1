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
an auto-created address goes with its last queue when its settings say so (Artemis's
auto-delete). A queue that loses its last consumer may go too (temporary, auto-created and
empty), or lose its messages (purge-on-no-consumers).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

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
        if for_send and wildcards.is_wildcard(name):
            raise BrokerError(
                f"cannot send to {name}: it is a wildcard address; messages are sent to an "
                "address it matches and reach the queues bound to it from there"
            )
        address = self.post_office.address(name)
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

    def delete_queue(self, queue: Queue) -> Pending:
        """Remove a queue and every message reference it holds."""
        pending = Pending()
        self.post_office.remove_queue(queue)
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
        if (
            address is not None
            and address.auto_created
            and not address.queues
            and self.address_settings(address.name).auto_delete_addresses
        ):
            self.post_office.remove_address(address.name)
            pending.tickets += self.persistence.delete_address(address.id)
        return pending

    def queue_lost_consumer(self, queue: Queue) -> Pending | None:
        """Artemis's auto-delete and purge-on-no-consumers when a consumer leaves."""
        if queue.consumers or self.post_office.queue(queue.name) is not queue:
            return None
        if queue.temporary:
            return self.delete_queue(queue)
        settings = self.address_settings(queue.address)
        if (
            queue.auto_created
            and settings.auto_delete_queues
            and queue.message_count == 0
            and not queue.arriving  # a send routed here before the consumer left
            and queue.routing_type is RoutingType.ANYCAST
        ):
            return self.delete_queue(queue)
        if queue.purge_on_no_consumers and queue.messages:
            refs = queue.remove_all()
            queue.delivering += len(refs)
            return Pending(tickets=self.acks.acknowledge_refs(refs))
        return None


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
