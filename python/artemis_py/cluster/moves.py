"""Moving messages between queues in journal transactions: what a scale-down
(:mod:`.scale_down`) and a take-over (:mod:`.take_over`) share.

Each batch of moves is one journal transaction (the move redistribution makes), so after a
crash every message is in exactly one of the two places.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import trio

from artemis_py.broker.routing import targets_of
from artemis_py.exceptions import StorageError

if TYPE_CHECKING:
    from artemis_py.broker.broker import Broker
    from artemis_py.broker.message import MessageReference
    from artemis_py.broker.queue import Queue
    from artemis_py.broker.routing import Destination, NeighbourRoute

DEFAULT_BATCH = 512  # messages per transaction when commit-interval is -1
STALL_TIMEOUT = 30.0  # seconds without progress before a hand-over is given up
LINK_GRACE = 5.0  # seconds to wait for a link (dial, queue creation, neighbours closing)


async def until(condition: Callable[[], bool], within: float) -> bool:
    """Wait until ``condition()`` holds (True) or ``within`` seconds pass (False).

    Polls: the conditions span links, bridges and queues, and this runs only while a node
    stops, so a short sleep is simpler than wiring events through all of them.
    """
    with trio.move_on_after(within):
        while not condition():  # noqa: ASYNC110
            await trio.sleep(0.02)
        return True
    return False


class ScaleDownError(Exception):
    """Scale-down cannot finish (the message says why)."""


async def more_depaged(queues: list[Queue]) -> bool:
    """After a pass over the messages in memory: whether to go round again. Paged messages
    come into memory as the moved ones leave it (the last of them may have come during the
    pass, after its snapshot); wait until some of them have."""
    if any(q.messages for q in queues):
        return True
    paged = [q for q in queues if q.paged > 0]
    if not paged:
        return False
    if not await until(partial(_depaged, paged), STALL_TIMEOUT):
        raise ScaleDownError("paged messages did not come back into memory")
    return True


def _depaged(queues: list[Queue]) -> bool:
    """Some paged messages came into memory (or none are left)."""
    return any(q.messages or q.paged <= 0 for q in queues)


def route_names(ref: MessageReference, route: NeighbourRoute) -> list[str]:
    """The bindings on the neighbour that a message in its store-and-forward queue is for."""
    return list(targets_of(ref.message, route.sf_queue.name))


class Mover:
    """Moves references in journal transactions of ``batch`` messages."""

    def __init__(self, broker: Broker, batch: int) -> None:
        self.broker = broker
        self.batch = batch
        self.moves: list[tuple[MessageReference, list[Destination] | None]] = []
        self.labels: list[str] = []
        self.moved: Counter[str] = Counter()

    async def add(
        self, ref: MessageReference, destinations: list[Destination] | None, what: str
    ) -> None:
        self.moves.append((ref, destinations))
        self.labels.append(what)
        if len(self.moves) >= self.batch:
            await self.flush()

    async def flush(self) -> None:
        moves, labels = self.moves, self.labels
        self.moves, self.labels = [], []
        if not moves:
            return
        try:
            await self.broker.redistribute(moves).settled()
        except StorageError as exc:
            raise ScaleDownError(f"the journal refused the move: {exc}") from exc
        self.moved.update(labels)
