"""The durable part of a broker operation, and the one place that waits for it.

A broker operation that changes durable state is split in two (see :mod:`.broker`): it
queues its journal records at once and returns a :class:`Pending`, whose effect (a sent
message reaching its queues, a moved message leaving its old place) becomes visible only
once those records are durable. Whoever started the operation settles it, in the order the
operations were made:

* ``await pending.settled()`` for one;
* ``await settle_in_order(pendings)`` for a run of them: one wait for the latest ticket of
  each journal (a journal completes its tickets in order), then every effect in order.

Paging and large messages plug in here: whatever a send must wait for besides the journal
becomes part of settling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from artemis_py.broker.persistence import Ticket


@dataclass(slots=True)
class Pending:
    """Journal ``tickets`` to wait for, then the ``on_durable`` effects to run."""

    tickets: list[Ticket] = field(default_factory=list)
    on_durable: list[Callable[[], None]] = field(default_factory=list)

    @property
    def immediate(self) -> bool:
        """Whether there is nothing to wait for: ``complete`` may run at once."""
        return not self.tickets

    def complete(self) -> None:
        """Make the effects visible; only once the tickets are done (or there are none)."""
        for action in self.on_durable:
            action()

    async def settled(self) -> None:
        """Wait until the records are durable, then make the effects visible.

        Raises the journal's StorageError if it failed; the effects then never happen.
        """
        if self.tickets:
            await durable(self.tickets)
        self.complete()


async def durable(tickets: Iterable[Ticket]) -> None:
    """Wait until the journal records behind ``tickets`` are durable (raises the journal's
    StorageError if it failed)."""
    for ticket in tickets:
        await ticket.journal.wait(ticket.number)


def latest(ticket_lists: Iterable[Sequence[Ticket]]) -> list[Ticket]:
    """The highest ticket of each journal in ``ticket_lists``: a journal completes its
    tickets in order, so once these are done, all of them are."""
    highest: dict[int, Ticket] = {}
    for tickets in ticket_lists:
        for ticket in tickets:
            known = highest.get(id(ticket.journal))
            if known is None or ticket.number > known.number:
                highest[id(ticket.journal)] = ticket
    return list(highest.values())


async def settle_in_order(pendings: Sequence[Pending]) -> None:
    """Settle a run of pendings made in this order, with one wait per journal."""
    await durable(latest(p.tickets for p in pendings))
    for pending in pendings:
        pending.complete()
