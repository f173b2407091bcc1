"""What the layers above the broker may see of storage, so that none of them imports it.

The broker is the one package that imports :mod:`artemis_py.storage`. The shells and the
management API need two things from there, and get them here:

* **a large message's body, streamed from its file** (the STOMP and cluster-link shells,
  :mod:`artemis_py.transport.bodies`): :func:`pin` the file while the body waits to be sent
  (a delete that comes meanwhile, e.g. an auto-ack at delivery, waits for :func:`unpin`),
  :func:`stream_body` sends it in bounded chunks read in worker threads, and
  :class:`BodyReadError` is what a file that cannot be read raises (half a frame may be on
  the wire then: the connection cannot go on);
* **the journals' counters** (the Prometheus metrics): :func:`journal_reports` gives the
  messages and bindings journals' statistics and fsync latencies, nothing when the node has
  no journal (persistence-enabled false).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from artemis_py.storage.large_message_files import LargeMessageError, send_body

if TYPE_CHECKING:
    from artemis_py.broker.message import LargeBody
    from artemis_py.storage import JournalStats, Storage
    from artemis_py.storage.completion import Latencies

__all__ = [
    "BodyReadError",
    "JournalReport",
    "journal_reports",
    "pin",
    "stream_body",
    "unpin",
]

#: A large message's file could not be read (or is shorter than its body).
BodyReadError = LargeMessageError


def pin(body: LargeBody) -> None:
    """Keep ``body``'s file until :func:`unpin`: it is queued to be sent."""
    assert body.store is not None, "a body in a file is attached to its store"
    body.store.pin(body.file_id)


def unpin(body: LargeBody) -> None:
    """``body`` was sent, or will not be: its file may go when nothing else holds it."""
    if body.store is not None:
        body.store.unpin(body.file_id)


async def stream_body(
    body: LargeBody,
    send: Callable[[bytes], Awaitable[object]],
    sent: Callable[[int], None] | None = None,
) -> None:
    """Send ``body`` (pinned) to ``send`` in bounded chunks read from its file in worker
    threads; ``sent(n)`` after each. Raises :class:`BodyReadError`."""
    await send_body(body, send, sent)


class _Stored(Protocol):
    """The broker's persistence, as far as the reports read it."""

    @property
    def storage(self) -> Storage | None: ...


@dataclass(frozen=True, slots=True)
class JournalReport:
    """One journal's counters at one instant: ``name`` (``messages`` or ``bindings``), its
    statistics and the latencies of its batches (written and fdatasynced)."""

    name: str
    stats: JournalStats
    latencies: Latencies


def journal_reports(persistence: _Stored) -> list[JournalReport]:
    """The messages and bindings journals' reports; none without a journal."""
    storage = persistence.storage
    if storage is None:
        return []
    return [
        JournalReport(name, journal.stats(), journal.latencies)
        for name, journal in (("messages", storage.messages), ("bindings", storage.bindings))
    ]
