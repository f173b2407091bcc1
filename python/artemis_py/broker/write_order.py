"""The order in which the parts of a send become durable: files, pages, then the journal.

Theory of operation
-------------------
A sent message may have up to three kinds of durable parts: its large-message file
(:mod:`artemis_py.broker.large_messages`), its page records (:mod:`artemis_py.broker.paging`)
and its journal records (the message, a transaction's commit, a forwarded message's
duplicate id, a large message's LARGE_PAGE_REF). Journal records refer to the other two, so
they are submitted only once those are durable; then a crash at any moment leaves either
the whole of a send or a leftover nobody refers to (an orphaned file, a page record no
commit counts), never a record whose file or page is missing:

1. :func:`file_first` and :func:`page` queue the files and the page appends at once and put
   their tickets in the operation's :class:`~artemis_py.broker.pending.Pending`; the journal
   records they call for go into a list of *records* (submit functions);
2. :func:`journal_after` submits those records at once when nothing else was queued (the
   common case: a small message in memory keeps its group commit), and otherwise makes them
   the pending's *gate*: run when the pending settles, after the files and pages are
   durable. If that wait fails or is cancelled, nothing of the journal is written and
   ``abandoned`` lets go of the files.

:func:`after` is the other gate: an operation that waits for room (BLOCK) first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

from artemis_py.broker.message import Message, encode_message
from artemis_py.broker.pending import Pending, Ticket, durable
from artemis_py.broker.persistence import Persistence

if TYPE_CHECKING:
    from artemis_py.broker.paging import Placement

#: Journal records to submit later; each returns the tickets to wait for.
Records = list[Callable[[], list[Ticket]]]


def file_first(persistence: Persistence, message: Message, pending: Pending) -> None:
    """Queue a large message's file (or link, for a copy) now; the pending's journal
    records wait for it (:func:`journal_after`)."""
    large = persistence.large
    if large.is_large(message):
        assert large.store is not None
        pending.tickets.append(Ticket(large.store, large.write_file(message).ticket))


def page(
    persistence: Persistence,
    message: Message,
    placement: Placement,
    pending: Pending,
    records: Records,
    tx_id: int = 0,
) -> None:
    """Append ``message`` to the page files of the addresses that page it. A large one is
    paged as a reference to its file: the file goes first, and its LARGE_PAGE_REF journal
    record joins ``records``."""
    encoded = None
    by_reference = bool(placement.paged) and persistence.large.pages_by_reference(message)
    for paging, group in placement.paged:
        if encoded is None:
            if by_reference:
                file_first(persistence, message, pending)
            # (with the bindings it is for as properties: a page file has no record beside)
            encoded = encode_message(message, body_in_file=by_reference, routes=True)
        ticket, settle, position = paging.page(
            message, group, encoded, tx_id, offset=placement.offset
        )
        pending.tickets.append(Ticket(paging.store, ticket))  # type: ignore[arg-type]
        pending.on_durable.append(settle)
        if by_reference:
            records.append(
                partial(persistence.store_page_ref, message, paging.address, position, group, tx_id)
            )


def journal_after(
    pending: Pending, records: Records, abandoned: Callable[[], None] | None = None
) -> None:
    """Submit ``records`` once the files and page records already in ``pending`` are
    durable, at once when there are none. ``abandoned`` runs if that wait fails or is
    cancelled (the records are then never submitted)."""
    if not pending.tickets:
        pending.tickets += _submit_all(records)
        return
    first, pending.tickets = pending.tickets, []

    async def gate() -> None:
        try:
            await durable(first)
        except BaseException:
            if abandoned is not None:
                abandoned()
            raise
        pending.tickets += _submit_all(records)

    pending.gate = gate


def after(wait: Callable[[], Awaitable[object]], again: Callable[[], Pending]) -> Pending:
    """A pending that waits (for room) and then does the operation (``again``)."""
    pending = Pending()

    async def gate() -> None:
        await wait()
        inner = again()
        if inner.gate is not None:
            await inner.gate()
        pending.tickets += inner.tickets
        pending.on_durable += inner.on_durable

    pending.gate = gate
    return pending


def _submit_all(records: Records) -> list[Ticket]:
    return [ticket for submit in records for ticket in submit()]
