"""Where one queue is in its address's page files (Artemis's PageSubscription).

A cursor reads its address's pages in order, lazily: it brings paged messages for its queue
into memory only while the queue holds fewer depaged messages than ``max-read-page-messages``
/ ``max-read-page-bytes`` allow, so memory stays bounded whatever the backlog. Each depaged
reference remembers its position (page, offset); acknowledging it writes a small PAGE_ACK
record to the messages journal. When the cursor has read past a page and every reference it
took from that page is acknowledged, the page is *complete* for this queue: one
PAGE_COMPLETE record replaces the page's PAGE_ACK records. A page every cursor has completed
is deleted (see :mod:`.address`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from artemis_py.broker.queue import Queue

#: (page, offset) of a record in an address's page files; offset 0: the start of the page.
Position = tuple[int, int]


@dataclass(slots=True)
class PageCursor:
    """One queue's reading position and acknowledgements in its address's pages."""

    queue: Queue
    position: Position
    # Pages before this one never held a record for the queue (it did not exist yet).
    first_page: int
    # Depaged references not yet acknowledged, per page.
    outstanding: Counter[int] = field(default_factory=Counter)
    # Journal record ids of the PAGE_ACK records per page (replaced at completion).
    ack_records: dict[int, list[int]] = field(default_factory=dict)
    # Offsets acknowledged before a restart, per page: skipped when read again.
    acked: dict[int, set[int]] = field(default_factory=dict)
    # Pages completed, with the PAGE_COMPLETE record id (kept until the page is deleted).
    completed: dict[int, int] = field(default_factory=dict)
    # Depaged references in memory (ready or delivering): what max-read-page-* bound.
    in_memory: int = 0
    in_memory_bytes: int = 0
    reading: bool = False
    # (position, lowest offset of the queue's paged messages) when last looked up: valid
    # while the position stays (records after it only ever get higher offsets).
    low: tuple[Position, int] | None = None

    def done_with(self, page: int) -> bool:
        """Whether ``page`` no longer matters to this queue."""
        return page < self.first_page or page in self.completed

    def may_complete(self, page: int) -> bool:
        """Read past ``page`` with every reference from it acknowledged, not yet recorded."""
        return (
            page < self.position[0]
            and page >= self.first_page
            and page not in self.completed
            and not self.outstanding.get(page)
        )

    def wants_more(self, max_messages: int, max_bytes: int) -> bool:
        """Whether the queue may take more depaged messages into memory."""
        if self.queue.paged <= 0:
            return False
        if 0 <= max_messages <= self.in_memory:
            return False
        return not (0 <= max_bytes <= self.in_memory_bytes)
