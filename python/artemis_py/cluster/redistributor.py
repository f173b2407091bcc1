"""Message redistribution: messages follow consumers to other nodes (clusters §7).

Initial distribution decides where a message goes when it arrives. Consumers can come and go
afterwards, which leaves messages in a queue that no local consumer will ever take while
consumers elsewhere wait. Redistribution solves this. A queue becomes *eligible* when:

- its last local consumer goes away while it holds messages;
- a consumer appears on another node for a queue of the same name that has a backlog here;
- a message arrives that no local consumer's selector matches.

``redistribution-delay`` milliseconds after that, the queue is *active*. While it is active,
every ready message that no local consumer's selector matches moves. It goes to a node
whose consumer does match it, round robin among those nodes. A local consumer that arrives
within the delay cancels the move. A queue stays active until a local consumer arrives, so
later messages follow too.

Moving a message is a journal transaction: a copy under a new id enters the target
neighbour's store-and-forward queue, and the original reference is acknowledged (see
:meth:`Broker.redistribute`). The bridge and the target's duplicate-id cache then make the
hop exactly-once. This only happens under ``ON_DEMAND`` and ``OFF_WITH_REDISTRIBUTION``, and
with a delay of 0 or more (the default, -1, never redistributes). Messages of a group
(``JMSXGroupID``) stay where they are, so that the group keeps its order.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from artemis_py.config import MessageLoadBalancing
from artemis_py.exceptions import StorageError

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker
    from artemis_py.broker.message import MessageReference
    from artemis_py.broker.pending import Pending
    from artemis_py.broker.queue import Queue
    from artemis_py.broker.routing import Destination, RemoteQueueBinding

log = logging.getLogger("artemis_py.cluster")

BATCH = 512  # references moved per journal transaction


class Redistributor:
    """Watches local queues and moves their messages where consumers are."""

    def __init__(
        self,
        broker: Broker,
        policy: MessageLoadBalancing,
        nursery: trio.Nursery,
    ) -> None:
        self.broker = broker
        self.enabled = policy in (
            MessageLoadBalancing.ON_DEMAND,
            MessageLoadBalancing.OFF_WITH_REDISTRIBUTION,
        )
        self.nursery = nursery
        self.moved = 0
        # Messages moved, by the store-and-forward queue they went to (the metrics').
        self.moved_to: dict[str, int] = {}
        self.in_progress = 0  # moves waiting for the journal (their messages are in limbo)
        self._waiting: dict[str, trio.CancelScope] = {}  # queue name -> pending delay
        self._active: set[str] = set()
        self._pass_scheduled: set[str] = set()
        self._next: dict[str, int] = {}  # round-robin position per queue

    # -- triggers ----------------------------------------------------------------------

    def consumers_changed(self, queue: Queue) -> None:
        """A local consumer came or went."""
        if queue.consumers and self._local_takes_everything(queue):
            self._deactivate(queue)
            return
        self.check(queue)

    def watch(self, queue: Queue) -> None:
        """Hear of messages that arrive in ``queue`` or come back to it undelivered."""
        if self.enabled:
            queue.on_undelivered = self.check

    def check(self, queue: Queue) -> None:
        """Something changed that may let ``queue``'s messages move."""
        # A queue with offset marks belongs to a reader by offset: moving its messages
        # would give them other offsets. A non-destructive queue's messages stay for every
        # consumer, here or to come: none is moved.
        if (
            not self.enabled
            or queue.temporary
            or not queue.messages
            or queue.marks
            or queue.non_destructive
        ):
            return
        delay = self.broker.address_settings(queue.address).redistribution_delay
        if delay < 0:
            return
        if queue.name in self._active:
            self._schedule_pass(queue)
        elif queue.name not in self._waiting and self._candidates(queue):
            # Registered now, not when the task starts: a burst of arrivals in one tick
            # starts one delay, and a local consumer that comes within it cancels it.
            scope = self._waiting[queue.name] = trio.CancelScope()
            self.nursery.start_soon(self._activate_after, queue, delay / 1000, scope)

    def remote_consumers_changed(self, binding: RemoteQueueBinding) -> None:
        queue = self.broker.queue(binding.queue_name)
        if queue is not None and queue.address == binding.address:
            self.check(queue)

    def forget(self, queue: Queue) -> None:
        self._deactivate(queue)
        self._next.pop(queue.name, None)

    # -- state -------------------------------------------------------------------------

    def _deactivate(self, queue: Queue) -> None:
        scope = self._waiting.pop(queue.name, None)
        if scope is not None:
            scope.cancel()
        self._active.discard(queue.name)

    async def _activate_after(self, queue: Queue, delay: float, scope: trio.CancelScope) -> None:
        with scope:
            try:
                await trio.sleep(delay)
            finally:
                if self._waiting.get(queue.name) is scope:
                    del self._waiting[queue.name]
        if scope.cancelled_caught or self.broker.queue(queue.name) is not queue:
            return
        self._active.add(queue.name)
        self._run_pass(queue)

    def _schedule_pass(self, queue: Queue) -> None:
        if queue.name not in self._pass_scheduled:
            self._pass_scheduled.add(queue.name)
            self.nursery.start_soon(self._deferred_pass, queue)

    async def _deferred_pass(self, queue: Queue) -> None:
        # Let a burst of arrivals settle into one transaction.
        await trio.lowlevel.checkpoint()
        self._pass_scheduled.discard(queue.name)
        if queue.name in self._active and self.broker.queue(queue.name) is queue:
            self._run_pass(queue)

    # -- choosing and moving -----------------------------------------------------------

    def _candidates(self, queue: Queue) -> list[RemoteQueueBinding]:
        return [
            b
            for b in self.broker.remote_bindings(queue.address)
            if b.queue_name == queue.name and b.connected and b.consumers
        ]

    def _local_takes_everything(self, queue: Queue) -> bool:
        return any(c.selector is None for c in queue.consumers)

    def _target(
        self,
        queue: Queue,
        ref: MessageReference,
        candidates: list[RemoteQueueBinding],
        *,
        advance: bool,
    ) -> RemoteQueueBinding | None:
        lookup = ref.message.filter_value
        if ref.message.group_id is not None:
            return None
        if any(c.selector is None or c.selector.matches(lookup) for c in queue.consumers):
            return None  # a local consumer will take it
        start = self._next.get(queue.name, 0)
        count = len(candidates)
        for step in range(count):
            binding = candidates[(start + step) % count]
            if binding.accepts(lookup) and binding.has_matching_consumer(lookup):
                if advance:
                    self._next[queue.name] = (start + step + 1) % count
                return binding
        return None

    def _run_pass(self, queue: Queue) -> None:
        if not self.enabled:
            return  # switched off meanwhile (the node is scaling down)
        candidates = self._candidates(queue)
        if not candidates:
            return
        moves: list[tuple[MessageReference, list[Destination] | None]] = []
        for ref in list(queue.messages):
            binding = self._target(queue, ref, candidates, advance=True)
            if binding is None:
                continue
            moves.append((ref, [(binding.route.sf_queue, [binding.name_on_neighbour])]))
            if len(moves) >= BATCH:
                self._move(queue, moves)
                moves = []
        if moves:
            self._move(queue, moves)

    def _move(
        self, queue: Queue, moves: list[tuple[MessageReference, list[Destination] | None]]
    ) -> None:
        try:
            pending = self.broker.redistribute(moves)
        except StorageError as exc:
            log.error("redistribution from queue %s failed: %s", queue.name, exc)
            return
        self.moved += len(moves)
        moved_to = self.moved_to
        for _, destinations in moves:
            if destinations:
                name = destinations[0][0].name
                moved_to[name] = moved_to.get(name, 0) + 1
        log.debug("redistributing %d message(s) from queue %s", len(moves), queue.name)
        self.in_progress += 1
        self.nursery.start_soon(self._complete, pending)

    async def _complete(self, pending: Pending) -> None:
        try:
            await pending.settled()
        finally:
            self.in_progress -= 1
