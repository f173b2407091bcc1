"""The expiry reaper: every ``message-expiry-scan-period`` ms, expired messages leave every
queue, consumed or not (Artemis's ``PostOfficeImpl.ExpiryReaper`` and
``QueueImpl.ExpiryScanner``).

Theory of operation
-------------------
A delivery finds an expired message only when a consumer asks for it
(:meth:`~artemis_py.broker.queue.Queue.deliver`); the reaper finds the others. Once per
period (the first one period after the node starts; -1: never) it visits the queues one
after the other and, for each, takes the *ready* references whose expiration has passed
out of the queue and hands them to :meth:`.Acknowledgements.expire`, the path a delivery's
expiry takes: a copy to the expiry address of the message's address (its auto-created
queue made first, :mod:`.expiry`), or dropped when there is none, and the reference
acknowledged; the queue counts it in ``messages_expired``. References out with a consumer
are not its business (they come back or are acknowledged), as in Artemis; a queue whose
expiry address is its own address is skipped (Artemis: a move to itself is pointless).

The scan must not hold the event loop: it reads a snapshot of the ready references (a list
copy, at C speed) in chunks of :data:`SCAN_CHUNK`, with a checkpoint between two chunks,
and costs one comparison per reference when nothing has expired. Since other tasks may
deliver, purge or move references while it yields, what it found is checked against the
queue again before it is taken (one pass, only when something expired and the scan
yielded); an expired reference is never delivered meanwhile (a delivery expires it
itself). Expired references are moved :data:`MOVE_CHUNK` at a time, checkpointing between.

Paged messages: as in Artemis, the reaper expires what is in memory; acknowledging depaged
references lets the queue's page cursor bring the next ones in (:mod:`.paging`), and, as
Artemis's scanner schedules a depage and scans again, the reaper waits for that read and
scans the queue again while each pass expires something and messages remain in page
files. A backlog of paged messages that have not expired behind a full in-memory part is
left for later scans.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.message import now_ms
from artemis_py.exceptions import ArtemisError

if TYPE_CHECKING:
    from artemis_py.broker.acknowledging import Acknowledgements
    from artemis_py.broker.message import MessageReference
    from artemis_py.broker.paging import PagingManager
    from artemis_py.broker.queue import Queue
    from artemis_py.broker.routing import PostOffice

log = logging.getLogger("artemis_py.broker")

#: References looked at between two checkpoints (about half a millisecond's work).
SCAN_CHUNK = 8192
#: Expired references moved between two checkpoints (each move queues journal records).
MOVE_CHUNK = 256
#: How long (s) a scan waits for a page cursor to read the next messages in.
_DEPAGE_WAIT = 5.0


class ExpiryReaper:
    """Expires what has expired in one node's queues, every ``period_ms`` (-1: never)."""

    def __init__(
        self,
        post_office: PostOffice,
        acks: Acknowledgements,
        paging: PagingManager,
        period_ms: int,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        self.post_office = post_office
        self.acks = acks
        self.paging = paging
        self.period_ms = period_ms
        self.clock_ms = clock_ms
        self.scans = 0  # completed scans (tests and diagnostics)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Scan every period until cancelled (returns at once when the period is -1)."""
        task_status.started()
        if self.period_ms <= 0:
            return
        while True:
            await trio.sleep(self.period_ms / 1000)
            await self.scan()

    async def scan(self) -> int:
        """Visit every queue once; the number of references expired."""
        expired = 0
        for queue in list(self.post_office.queues.values()):
            if self.post_office.queue(queue.name) is not queue:
                continue  # deleted while an earlier queue was reaped
            try:
                expired += await self.reap(queue)
            except ArtemisError as exc:  # (the journal refused: the next scan tries again)
                log.error("expiry scan of queue %s failed: %s", queue.name, exc)
        self.scans += 1
        if expired:
            log.debug("expiry scan: %d message(s) expired", expired)
        return expired

    async def reap(self, queue: Queue) -> int:
        """Expire what has expired in ``queue``; the number of references expired."""
        if self.acks.address_settings(queue.address).expiry_address == queue.address:
            return 0
        total = 0
        while True:
            found = await self._expired_refs(queue)
            total += await self._expire(queue, found)
            if not found or queue.paged <= 0 or not await self._depaged(queue):
                return total

    async def _expired_refs(self, queue: Queue) -> list[MessageReference]:
        """The ready references of ``queue`` that have expired, still ready."""
        if not queue.messages:
            return []
        now = self.clock_ms()
        snapshot = list(queue.messages)
        found: list[MessageReference] = []
        for start in range(0, len(snapshot), SCAN_CHUNK):
            if start:
                await trio.lowlevel.checkpoint()
            chunk = snapshot[start : start + SCAN_CHUNK]
            found += [ref for ref in chunk if 0 < ref.message.expiration <= now]
        if found and len(snapshot) > SCAN_CHUNK:
            # The scan yielded: keep those still waiting, in the queue's order.
            wanted = {id(ref) for ref in found}
            found = [ref for ref in queue.messages if id(ref) in wanted]
        return found

    async def _expire(self, queue: Queue, refs: list[MessageReference]) -> int:
        if not refs:
            return 0
        queue.remove(refs)
        queue.delivering += len(refs)  # handed to the expiry path, which acknowledges them
        for start in range(0, len(refs), MOVE_CHUNK):
            if start:
                await trio.lowlevel.checkpoint()
            for ref in refs[start : start + MOVE_CHUNK]:
                self.acks.expire(ref)
        return len(refs)

    async def _depaged(self, queue: Queue) -> bool:
        """Wait for ``queue``'s page cursor to read what the expiries made room for;
        whether it brought anything in."""
        paging = self.paging.addresses.get(queue.address)
        cursor = paging.cursors.get(queue.id) if paging is not None else None
        if cursor is None:
            return False
        before = queue.paged
        # (The acknowledgements started the read: kick() marks the cursor reading at once.)
        with trio.move_on_after(_DEPAGE_WAIT):
            await self.paging.read_ended(cursor)
        return queue.paged < before
