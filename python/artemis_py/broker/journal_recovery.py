"""Reading the journals back at start: what the broker's model is made from again.

Recovery is Artemis's: the bindings journal gives the addresses, queues and the id block;
the messages journal gives the live messages minus their acknowledged references (an
ADD_REF update per queue, an ACK_REF per acknowledgement), with their delivery counts,
offsets, the times a redelivery delay holds them until (SCHEDULED_DELIVERY_TIME) and, in
a store-and-forward queue, the bindings on the neighbour a message is for (ROUTE_TO), and
beside them the duplicate ids, the paging cursors (PAGE_ACK, PAGE_COMPLETE, PAGE_TX),
offset marks and sealed streams, and the large messages (whose bodies are files).

A message's references to deleted queues are removed, and a message left without any is
deleted (:attr:`MessagesRead.orphans`); a queue whose address has no record (a damaged or
hand-edited bindings journal) gets its address made again (:func:`lost_addresses`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from artemis_py.broker import records as r
from artemis_py.broker.message import Message
from artemis_py.storage import Op

if TYPE_CHECKING:
    from artemis_py.broker.large_messages import LargeMessages
    from artemis_py.broker.store import LoadedRecord

# Recovery logs under persistence's name, as it did before it had a module of its own.
log = logging.getLogger("artemis_py.broker.persistence")


@dataclass(slots=True)
class RecoveredState:
    addresses: list[r.AddressRecord] = field(default_factory=list)
    queues: list[r.QueueSpec] = field(default_factory=list)
    # queue id -> (message, delivery count, offset, stamped by a scale-down: .streams),
    # in offset order
    messages_by_queue: dict[int, list[tuple[Message, int, int, bool]]] = field(default_factory=dict)
    # queue id -> {message id -> epoch ms}: the references a redelivery delay held, until when
    held_until: dict[int, dict[int, int]] = field(default_factory=dict)
    # (record id, duplicate id) of the duplicate-id cache
    duplicate_ids: list[tuple[int, bytes]] = field(default_factory=list)
    # (record id, payload) of the client sends' duplicate ids (decoded by duplicate_cache)
    client_duplicate_ids: list[tuple[int, bytes]] = field(default_factory=list)
    # paging records: (record id, queue id, page, offset, address), (record id, queue id,
    # page, address), tx id -> record id
    page_acks: list[tuple[int, int, int, int, str]] = field(default_factory=list)
    page_completes: list[tuple[int, int, int, str]] = field(default_factory=list)
    page_txs: dict[int, int] = field(default_factory=dict)
    # offset marks and sealed ends: (record id, record type, queue id, stream, value)
    offset_marks: list[tuple[int, int, int, str, int]] = field(default_factory=list)
    # a LOCAL grouping handler's decisions: (record id, group id, binding's cluster name)
    group_bindings: list[tuple[int, str, str]] = field(default_factory=list)


@dataclass(slots=True)
class BindingsRead:
    """What the bindings journal gave besides the state: the highest id it names, the live
    id-block record and the recorded addresses' ids."""

    highest: int = 0
    block_record: int | None = None
    addresses: set[int] = field(default_factory=set)


@dataclass(slots=True)
class MessagesRead:
    """What the messages journal gave besides the state: the highest id it names, the ops
    removing references to deleted queues (and records of missing files), and the large
    messages' files that go once those are durable."""

    highest: int = 0
    orphans: list[Op] = field(default_factory=list)
    gone_files: list[int] = field(default_factory=list)


def read_bindings(records: Iterable[LoadedRecord], state: RecoveredState) -> BindingsRead:
    """Addresses, queues, the id block and the message groups' decisions."""
    read = BindingsRead()
    for record in records:
        payload = record.payload
        for update in record.updates:
            payload = update.payload
        if record.record_type == r.ID_BLOCK_RECORD:
            read.highest = max(read.highest, r.decode_id_block(payload))
            read.block_record = record.id
            continue
        read.highest = max(read.highest, record.id)
        if record.record_type == r.ADDRESS_RECORD:
            state.addresses.append(r.decode_address(record.id, payload))
            read.addresses.add(record.id)
        elif record.record_type == r.QUEUE_RECORD:
            state.queues.append(r.decode_queue(record.id, payload))
        elif record.record_type == r.GROUP_BINDING_RECORD:
            state.group_bindings.append((record.id, *r.decode_group_binding(payload)))
    return read


def read_messages(
    records: Iterable[LoadedRecord], state: RecoveredState, large: LargeMessages
) -> MessagesRead:
    """Messages with their live references (to the queues in ``state``), and the records
    kept beside them."""
    queue_ids = {spec.queue_id: spec.name for spec in state.queues}
    read = MessagesRead()
    for record in records:
        read.highest = max(read.highest, record.id)
        if _read_other(record, state, large, read):
            continue
        if record.record_type == r.LARGE_MESSAGE_RECORD:
            found = large.recover(record.id, record.payload)
            if found is None:  # its file is missing: logged, and the record goes
                read.orphans.append(Op.delete(record.id))
                continue
            message = found
        elif record.record_type == r.MESSAGE_RECORD:
            message = r.decode_message_record(record.id, record.payload)
        else:
            continue
        _read_references(record, message, queue_ids, state, large, read)
    for queue_refs in state.messages_by_queue.values():
        queue_refs.sort(key=_offset_of)
    return read


def _read_other(
    record: LoadedRecord, state: RecoveredState, large: LargeMessages, read: MessagesRead
) -> bool:
    """A record that is not a message's: kept in ``state``; False for any other."""
    kind = record.record_type
    if kind == r.DUPLICATE_ID_RECORD:
        state.duplicate_ids.append((record.id, bytes(record.payload)))
    elif kind == r.CLIENT_DUPLICATE_ID_RECORD:
        state.client_duplicate_ids.append((record.id, bytes(record.payload)))
    elif kind == r.PAGE_ACK:
        ack = r.decode_page_ack(record.payload)
        state.page_acks.append((record.id, ack.queue_id, ack.page, ack.offset, ack.address))
    elif kind == r.PAGE_COMPLETE:
        done = r.decode_page_complete(record.payload)
        state.page_completes.append((record.id, done.queue_id, done.page, done.address))
    elif kind == r.PAGE_TX:
        state.page_txs[r.decode_page_tx(record.payload)] = record.id
    elif kind in (r.OFFSET_MARK, r.SEALED_STREAM):
        payload = record.updates[-1].payload if record.updates else record.payload
        queue_id, stream, mark = r.decode_offset_mark(payload)
        state.offset_marks.append((record.id, kind, queue_id, stream, mark))
    elif kind == r.LARGE_PAGE_REF:
        if not large.recover_page_ref(record.id, record.payload):
            read.orphans.append(Op.delete(record.id))
    else:
        return False
    return True


def _read_references(
    record: LoadedRecord,
    message: Message,
    queue_ids: dict[int, str],
    state: RecoveredState,
    large: LargeMessages,
    read: MessagesRead,
) -> None:
    """Put ``message`` in the queues it is live in; orphan what refers to deleted queues."""
    message.stored = True
    refs: Counter[int] = Counter()
    counts: dict[int, int] = {}
    offsets: dict[int, int] = {}
    route_to: dict[int, tuple[str, ...]] = {}
    held: dict[int, int] = {}
    for update in record.updates:
        if update.record_type == r.ADD_REF:
            queue_id, offsets[queue_id] = r.decode_add_ref(record.id, update.payload)
            refs[queue_id] += 1
        elif update.record_type == r.ROUTE_TO:
            queue_id, names = r.decode_route_to(update.payload)
            route_to[queue_id] = names
        elif update.record_type == r.ACK_REF:
            refs[r.decode_ref(update.payload)] -= 1
        elif update.record_type == r.DELIVERY_COUNT:
            queue_id, count = r.decode_delivery_count(update.payload)
            counts[queue_id] = count
        elif update.record_type == r.SCHEDULED_DELIVERY_TIME:
            queue_id, held[queue_id] = r.decode_scheduled_time(update.payload)
    live = [qid for qid, n in refs.items() if n > 0 and qid in queue_ids]
    if not live:
        read.orphans.append(Op.delete(record.id))
        read.gone_files += large.forget([record.id])
        return
    message.ref_count = len(live)
    if route_to:  # (a record from before ROUTE_TO has them as properties: decoded so)
        message.route_to = {queue_ids[q]: route_to[q] for q in live if q in route_to}
    stamped = r.OFFSET_FROM_BYTES in record.payload  # moved here by a scale-down
    for qid in live:
        state.messages_by_queue.setdefault(qid, []).append(
            (message, counts.get(qid, 0), offsets[qid], stamped)
        )
        if qid in held:  # (the latest time recorded for the queue wins)
            state.held_until.setdefault(qid, {})[record.id] = held[qid]
    for qid, n in refs.items():
        if n > 0 and qid not in queue_ids:  # its queue is gone
            read.orphans.append(r.ack_ref_op(record.id, qid))


def lost_addresses(state: RecoveredState, next_id: Callable[[], int]) -> list[r.AddressRecord]:
    """Give a queue whose address has no record (or lacks its routing type) its address
    again: the addresses to store (new, or with a routing type added), also put in
    ``state``. The node then starts with the queue and its messages instead of failing."""
    addresses = {address.name: address for address in state.addresses}
    changed: dict[str, r.AddressRecord] = {}
    for spec in state.queues:
        address = addresses.get(spec.address)
        if address is not None and spec.routing_type in address.routing_types:
            continue
        log.warning(
            "queue %s: its address %s (%s) has no record in the bindings journal; "
            "it is created again",
            spec.name,
            spec.address,
            spec.routing_type.value,
        )
        if address is None:
            address = r.AddressRecord(next_id(), spec.address, frozenset(), auto_created=True)
        address = replace(address, routing_types=address.routing_types | {spec.routing_type})
        addresses[spec.address] = changed[spec.address] = address
    state.addresses = list(addresses.values())
    return list(changed.values())


def _offset_of(ref: tuple[Message, int, int, bool]) -> int:
    return ref[2]
