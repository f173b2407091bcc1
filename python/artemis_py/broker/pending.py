"""The durable part of a broker operation, and the one place that waits for it.

A broker operation that changes durable state is split in two (see :mod:`.broker`): it
queues its journal records at once and returns a :class:`Pending`, whose effect (a sent
message reaching its queues, a moved message leaving its old place) becomes visible only
once those records are durable. Whoever started the operation settles it, in the order the
operations were made:

* ``await pending.settled()`` for one;
* ``await settle_in_order(pendings)`` for a run of them: one wait for the latest ticket of
  each journal (a journal completes its tickets in order), then every effect in order.

Whatever a send must wait for besides the journal is part of settling: page files are
"journals" here too (a :class:`Ticket` names the store), and a send that must wait before
it can even be prepared (an address full under BLOCK; a transaction whose paged messages
must be durable before its journal commit) carries a ``gate``: settling runs it first, and
it fills in the tickets and effects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol


class Waitable(Protocol):
    """What tickets number: a journal, or the large-message store (tickets done in order)."""

    def done(self, number: int) -> bool:
        """Whether ticket ``number`` is durable already (a look, never a wait)."""
        ...

    async def wait(self, number: int) -> None: ...


class Ticket(NamedTuple):
    """A journal submission (or a large-message file write) to wait for. (A named tuple:
    one or two are made per message, and a frozen dataclass costs twice as much.)"""

    journal: Waitable
    number: int


@dataclass(slots=True)
class Pending:
    """Journal ``tickets`` to wait for, then the ``on_durable`` effects to run; a ``gate``
    runs before both. ``duplicate``: the operation was a send (or a commit) the node had
    already accepted (its duplicate id), and did nothing."""

    tickets: list[Ticket] = field(default_factory=list)
    on_durable: list[Callable[[], None]] = field(default_factory=list)
    gate: Callable[[], Awaitable[None]] | None = None
    duplicate: bool = False

    @property
    def immediate(self) -> bool:
        """Whether there is nothing to wait for: ``complete`` may run at once."""
        return not self.tickets and self.gate is None

    def complete(self) -> None:
        """Make the effects visible; only once the tickets are done (or there are none)."""
        for action in self.on_durable:
            action()

    def durable_now(self) -> bool:
        """Whether there is nothing to wait for any more (no gate, every ticket done):
        ``complete`` may run without a wait, or the task switch of one."""
        if self.gate is not None:
            return False
        for ticket in self.tickets:  # noqa: SIM110 (no generator on the per-message path)
            if not ticket.journal.done(ticket.number):
                return False
        return True

    async def settled(self) -> None:
        """Wait until the records are durable, then make the effects visible.

        Raises the journal's StorageError if it failed; the effects then never happen.
        """
        if self.gate is not None:
            gate, self.gate = self.gate, None
            await gate()
        if self.tickets:
            await durable(self.tickets)
        self.complete()


async def durable(tickets: Iterable[Ticket]) -> None:
    """Wait until the journal records behind ``tickets`` are durable (raises the journal's
    StorageError if it failed). Tickets done already are not waited for: no task switch
    for them (a message's pending names the latest bindings record too, long durable)."""
    for ticket in tickets:
        journal = ticket.journal
        if not journal.done(ticket.number):
            await journal.wait(ticket.number)


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
    """Settle a run of pendings made in this order, with one wait per journal (a gated one
    is settled on its own, in its place)."""
    start = 0
    for end, pending in enumerate(pendings):
        if pending.gate is not None:
            await settle_in_order(pendings[start:end])
            await pending.settled()
            start = end + 1
    run = pendings[start:]
    await durable(latest(p.tickets for p in run))
    for pending in run:
        pending.complete()
