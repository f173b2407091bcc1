"""What the management API's operations do to the broker (Artemis's QueueControl and
ActiveMQServerControl operations users reach for).

Theory of operation
-------------------
Every operation runs on the node's loop, between other work, so each is cut into steps that
never hold the loop for long, and each step is durable before the next starts:

* *create* a queue or an address: the broker's own ``create_queue``, or the address and its
  bindings-journal record (as an auto-created one is made, but not auto-created); the
  answer waits until the bindings journal has made the records durable, so a queue the API
  said it created is there after a crash;
* *delete* a queue: the broker's ``delete_queue`` (its references are acknowledged and its
  record deleted), awaited, so a deleted durable queue stays deleted after a restart;
* *purge*: the queue's ready references, then those held until a delivery time, are
  acknowledged in batches of :data:`BATCH`, each batch awaited (Artemis's
  ``removeAllMessages``: messages being delivered stay). Paged messages come into memory
  as the purged ones leave it, and are purged in turn;
* *move*: each batch is one journal transaction that stores a copy of every message, under a
  new id and the target queue's address, for the target queue, and acknowledges the
  originals (the move redistribution and scale-down make): after a crash each message is in
  exactly one of the two queues, never lost and never twice. A held message's copy is held
  until the same time in the target queue (Artemis moves scheduled messages with their
  schedule).

Purge and move stop after :data:`DEADLINE` seconds (a huge paged queue) and say how many
messages are left; calling again carries on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.broker import BrokerError, Transaction
from artemis_py.broker.filter import Filter, FilterSyntaxError
from artemis_py.broker.message import MessageReference
from artemis_py.broker.pending import Pending, durable
from artemis_py.broker.queue import Queue
from artemis_py.broker.routing import Address, is_internal
from artemis_py.broker.scheduling import carry_hold
from artemis_py.config import RoutingType
from artemis_py.exceptions import StorageError

if TYPE_CHECKING:
    from artemis_py.node import Node

log = logging.getLogger("artemis_py.management")

BATCH = 500  # references per journal batch or transaction
DEADLINE = 30.0  # seconds a purge or move may take before it answers with what is left
DEPAGE_WAIT = 5.0  # seconds to wait for paged messages to come into memory


class OperationError(Exception):
    """An operation refused: ``status`` is the HTTP status, the text is for the caller."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def not_found(what: str, name: str) -> OperationError:
    return OperationError(404, f"{what} '{name}' does not exist")


def find_queue(node: Node, name: str) -> Queue:
    queue = node.broker.queue(name)
    if queue is None:
        raise not_found("queue", name)
    return queue


def find_address(node: Node, name: str) -> Address:
    address = node.broker.post_office.address(name)
    if address is None:
        raise not_found("address", name)
    return address


@dataclass(frozen=True, slots=True)
class QueueRequest:
    """The fields of ``POST /api/queues`` (validated by the API)."""

    name: str
    address: str
    routing_type: RoutingType
    durable: bool = True
    filter: str | None = None
    max_consumers: int = -1


def _internal(name: str) -> None:
    if is_internal(name):
        raise OperationError(400, f"'{name}' is the node's own (internal): it cannot be managed")


async def create_queue(node: Node, request: QueueRequest) -> Queue:
    _internal(request.name)
    _internal(request.address)
    broker = node.broker
    if broker.queue(request.name) is not None:
        raise OperationError(409, f"queue '{request.name}' already exists")
    if request.filter:
        try:
            Filter.parse(request.filter)
        except FilterSyntaxError as exc:
            raise OperationError(400, f"filter: {exc}") from None
    address = broker.post_office.address(request.address)
    if address is None:
        _add_address(node, request.address, {request.routing_type})
    elif request.routing_type not in address.routing_types:
        raise OperationError(
            409,
            f"address '{request.address}' does not support routing type "
            f"{request.routing_type.name}",
        )
    try:
        queue = broker.create_queue(
            request.name,
            request.address,
            request.routing_type,
            filter_text=request.filter,
            durable=request.durable,
            max_consumers=request.max_consumers,
        )
    except BrokerError as exc:
        raise OperationError(409, str(exc)) from None
    await _recorded(node, f"queue '{request.name}'")
    return queue


async def create_address(node: Node, name: str, routing_types: set[RoutingType]) -> Address:
    """A new address (not auto-created: it stays when its last queue goes), recorded in the
    bindings journal as the broker records one."""
    address = _add_address(node, name, routing_types)
    await _recorded(node, f"address '{name}'")
    return address


async def _recorded(node: Node, what: str) -> None:
    """Wait until every bindings-journal record made so far is durable: the broker's
    ``create_queue`` keeps no ticket of its record, and the bindings journal completes its
    tickets in order, so the latest one covers the records just made."""
    try:
        await durable(node.broker.persistence.bindings_written())
    except StorageError as exc:
        raise OperationError(500, f"{what} may not survive a restart: {exc}") from None


def _add_address(node: Node, name: str, routing_types: set[RoutingType]) -> Address:
    _internal(name)
    broker = node.broker
    if broker.post_office.address(name) is not None:
        raise OperationError(409, f"address '{name}' already exists")
    address = Address(broker.next_id(), name, set(routing_types))
    broker.post_office.add_address(address)
    broker.persistence.store_address(address)
    return address


async def delete_address(node: Node, name: str, force: bool) -> None:
    _internal(name)
    broker = node.broker
    address = find_address(node, name)
    if address.queues and not force:
        names = ", ".join(q.name for q in address.queues)
        raise OperationError(409, f"address '{name}' has queues ({names}): use ?force=true")
    for queue in list(address.queues):
        await delete_queue(node, queue.name, force=True)
    if broker.post_office.address(name) is address:
        broker.post_office.remove_address(name)
        await Pending(tickets=broker.persistence.delete_address(address.id)).settled()


async def delete_queue(node: Node, name: str, force: bool) -> None:
    _internal(name)
    queue = find_queue(node, name)
    if queue.consumers and not force:
        raise OperationError(
            409, f"queue '{name}' has {len(queue.consumers)} consumer(s): use ?force=true"
        )
    # Consumers of a force-deleted queue keep their subscription object; what they hold
    # unacknowledged is acknowledged when it comes back (the queue is gone).
    await node.broker.delete_queue(queue).settled()


@dataclass(slots=True)
class Outcome:
    """How many messages an operation handled, and how many it left (deadline reached)."""

    done: int = 0
    remaining: int = 0


async def purge(node: Node, name: str) -> Outcome:
    _internal(name)
    queue = find_queue(node, name)

    async def remove(refs: list[MessageReference]) -> None:
        # Counted as killed, not acknowledged: Artemis's purge (deleteMatchingReferences)
        # acknowledges with the reason KILLED.
        queue.remove(refs)
        queue.messages_killed += len(refs)
        await Pending(tickets=node.broker.acks.acknowledge_refs(refs)).settled()

    return await _in_batches(queue, remove)


async def move(node: Node, name: str, to: str) -> Outcome:
    _internal(name)
    _internal(to)
    queue = find_queue(node, name)
    target = find_queue(node, to)
    if target is queue:
        raise OperationError(400, "a queue's messages cannot move to the same queue")
    broker = node.broker

    async def transfer(refs: list[MessageReference]) -> None:
        if broker.queue(target.name) is not target:
            raise OperationError(409, f"queue '{target.name}' was deleted during the move")
        sends = []
        for ref in refs:
            copy = ref.message.with_address(broker.next_id(), target.address)
            copy.expiration = ref.message.expiration
            carry_hold(ref, copy)
            copy.set_properties({"_AMQ_ORIG_ADDRESS": ref.message.address, "_AMQ_ORIG_QUEUE": name})
            sends.append((copy, [target]))
        queue.remove(refs)
        queue.delivering += len(refs)  # acknowledged by the commit
        try:
            pending = broker.commit(Transaction(sends=sends, acks=refs))
        except (BrokerError, StorageError):
            queue.cancel(refs)  # (counts them out of delivering again)
            raise
        await pending.settled()

    return await _in_batches(queue, transfer)


async def _in_batches(
    queue: Queue, step: Callable[[list[MessageReference]], Awaitable[None]]
) -> Outcome:
    """Run ``step`` on the queue's ready references, :data:`BATCH` at a time, paged ones
    included as they come into memory, then on its held ones, until none are left or
    :data:`DEADLINE` passes."""
    outcome = Outcome()
    with trio.move_on_after(DEADLINE):
        while True:
            refs = list(islice(queue.messages, BATCH)) or queue.held()[:BATCH]
            if refs:
                # Shielded: a batch's records are submitted at once, and its effects (the
                # moved copies reaching their queue) must follow when they are durable.
                with trio.CancelScope(shield=True):
                    await step(refs)
                outcome.done += len(refs)
                continue
            if queue.paged <= 0:
                break
            with trio.move_on_after(DEPAGE_WAIT):
                while not queue.messages and queue.paged > 0:  # noqa: ASYNC110 - depaging
                    await trio.sleep(0.01)
            if not queue.messages:
                break  # nothing came into memory (memory full): report what is left
    outcome.remaining = len(queue.messages) + queue.paged + len(queue.scheduled)
    return outcome
