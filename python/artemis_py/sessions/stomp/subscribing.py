"""The queue a STOMP SUBSCRIBE consumes from, created when it must be.

* ``address::queue`` (a fully qualified queue name): that queue, auto-created when missing;
* an anycast destination: the queue named like the address (auto-created when missing);
* a multicast destination: a new temporary subscription queue, or with a
  ``durable-subscription-name`` the durable queue ``<client-id>.<name>`` (re-created when its
  address or selector changed, as in Artemis).

Every permission the subscription needs is checked before anything is created (Artemis's
STOMP subscribe: createAddress, createDurableQueue or createNonDurableQueue, then consume on
the queue, with its FQQN), so a refused SUBSCRIBE leaves no address or queue behind
(:mod:`artemis_py.broker.authorization`).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from artemis_py.broker.authorization import Permission
from artemis_py.config import RoutingType
from artemis_py.sessions.stomp.errors import StompError

if TYPE_CHECKING:
    from artemis_py.broker.queue import Queue
    from artemis_py.sessions.stomp.session import StompSession, Target


def subscription_queue(
    session: StompSession, target: Target, selector: str | None, durable_name: str | None
) -> Queue:
    broker, subject = session.broker, session.subject
    _check_address(session, target.address)
    if target.queue is not None:  # fully qualified: address::queue
        queue = broker.queue(target.queue)
        if queue is not None and queue.address != target.address:
            raise StompError(f"queue {target.queue} is not bound to address {target.address}")
        if queue is None:
            _check_auto_create_queue(session, target.queue, target.address)
        subject.check(Permission.CONSUME, target.address, target.queue)
        if queue is None:
            routing = (
                target.routing_type
                or broker.address_settings(target.address).default_queue_routing_type
            )
            queue = broker.create_queue(target.queue, target.address, routing, auto_created=True)
        return queue
    routing = _routing(session, target)
    if routing is RoutingType.ANYCAST:
        queue = broker.queue(target.address)
        if queue is None:
            _check_auto_create_queue(session, target.address, target.address)
        subject.check(Permission.CONSUME, target.address, target.address)
        broker.resolve_address(target.address, target.routing_type, for_send=False)
        if queue is None:
            queue = broker.create_queue(target.address, target.address, routing, auto_created=True)
        return queue
    if durable_name:
        return _durable_subscription_queue(session, target, selector, durable_name)
    name = str(uuid.uuid4())
    subject.check(Permission.CREATE_NON_DURABLE_QUEUE, target.address, name)
    subject.check(Permission.CONSUME, target.address, name)
    broker.resolve_address(target.address, target.routing_type, for_send=False)
    return broker.create_queue(
        name,
        target.address,
        RoutingType.MULTICAST,
        filter_text=selector,
        durable=False,
        temporary=True,
    )


def _routing(session: StompSession, target: Target) -> RoutingType:
    """The subscription's routing type: the destination's, else its address's only one,
    else the address-settings' default (the address is created with it when missing)."""
    if target.routing_type is not None:
        return target.routing_type
    address = session.broker.post_office.address(target.address)
    if address is not None and len(address.routing_types) == 1:
        return next(iter(address.routing_types))
    return session.broker.address_settings(target.address).default_queue_routing_type


def _check_address(session: StompSession, address: str) -> None:
    """A missing address is auto-created if its settings allow and the user may."""
    broker = session.broker
    if broker.post_office.address(address) is not None:
        return
    if not broker.address_settings(address).auto_create_addresses:
        raise StompError(f"address {address} does not exist and auto-create is disabled")
    session.subject.check(Permission.CREATE_ADDRESS, address)


def _check_auto_create_queue(session: StompSession, name: str, address: str) -> None:
    if not session.broker.address_settings(address).auto_create_queues:
        raise StompError(f"queue {name} does not exist and auto-create is disabled")
    # Auto-created queues are durable (Artemis's STOMP auto-create).
    session.subject.check(Permission.CREATE_DURABLE_QUEUE, address, name)


def _durable_subscription_queue(
    session: StompSession, target: Target, selector: str | None, durable_name: str
) -> Queue:
    if not session.client_id:
        raise StompError("a durable subscription needs a client-id on CONNECT")
    broker, subject, address = session.broker, session.subject, target.address
    name = f"{session.client_id}.{durable_name}"
    queue = broker.queue(name)
    # Artemis: a durable subscription re-created with another address or selector replaces
    # the old one.
    replaced = queue is not None and (
        queue.address != address or ((queue.filter.text if queue.filter else None) != selector)
    )
    if queue is not None and replaced:
        subject.check(Permission.DELETE_DURABLE_QUEUE, queue.address, name)
    if queue is None or replaced:
        subject.check(Permission.CREATE_DURABLE_QUEUE, address, name)
    subject.check(Permission.CONSUME, address, name)
    broker.resolve_address(address, target.routing_type, for_send=False)
    if queue is not None and replaced:
        broker.delete_queue(queue)
        queue = None
    if queue is None:
        queue = broker.create_queue(
            name, address, RoutingType.MULTICAST, filter_text=selector, durable=True
        )
    return queue
