"""Receipts a client connection asked for and has not received yet, and the pipelining
window they make up.

A request with ``receipt=True`` registers its receipt id *before* its bytes are written, so
a fast RECEIPT cannot overtake its registration. ``send(..., wait=False)`` only waits until
fewer than ``max_pending`` receipts are outstanding (:meth:`ReceiptTable.wait_for_window`),
then writes and returns: a producer keeps up to ``max_pending`` receipts in flight, and
:meth:`ReceiptTable.wait_all` waits for the rest.
"""

from __future__ import annotations

import copy
import itertools
import logging

import trio

from artemis_py.client.errors import ClientError
from artemis_py.client.state import ConnectionState
from artemis_py.protocol.stomp import Frame

__all__ = ["Receipt", "ReceiptTable"]

log = logging.getLogger("artemis_py.client")


class Receipt:
    """One requested receipt: resolved by its RECEIPT frame (kept in ``frame``: a server may
    say more in its headers, e.g. ``duplicate:true``), or failed with the connection."""

    __slots__ = ("error", "event", "frame", "id")

    def __init__(self, receipt_id: str) -> None:
        self.id = receipt_id
        self.event = trio.Event()
        self.error: ClientError | None = None
        self.frame: Frame | None = None

    def resolve(self, error: ClientError | None = None, frame: Frame | None = None) -> None:
        if not self.event.is_set():
            self.error = error
            self.frame = frame
            self.event.set()


class ReceiptTable:
    """The outstanding receipts of one connection, by id (see the module doc)."""

    __slots__ = ("_ids", "_pending", "_state", "_window_changed", "max_pending")

    def __init__(self, state: ConnectionState, max_pending: int, ids: itertools.count[int]) -> None:
        self._state = state
        self._ids = ids  # shared with subscription and transaction ids: r-1, sub-2, ...
        self._pending: dict[str, Receipt] = {}
        self._window_changed: trio.Event | None = None  # made when a task waits for it
        self.max_pending = max_pending
        state.on_shutdown(self._fail_all)

    def __len__(self) -> int:
        return len(self._pending)

    def new(self) -> Receipt:
        """A receipt with a fresh id (not registered yet)."""
        return Receipt(f"r-{next(self._ids)}")

    def register(self, receipt: Receipt) -> None:
        """Expect ``receipt``'s RECEIPT; call before its frame's bytes exist."""
        self._pending[receipt.id] = receipt

    def forget(self, receipt: Receipt) -> None:
        """Stop expecting ``receipt`` (its frame was never written)."""
        if self._pending.get(receipt.id) is receipt:
            del self._pending[receipt.id]
            self._wake_window()

    def resolve(self, receipt_id: str, frame: Frame | None = None) -> bool:
        """A RECEIPT (``frame``) arrived: wake its waiter. False if nobody asked for it."""
        receipt = self._pending.pop(receipt_id, None)
        if receipt is None:
            log.debug("ignoring a RECEIPT nobody asked for: %r", receipt_id)
            return False
        receipt.resolve(frame=frame)
        self._wake_window()
        return True

    async def wait(self, receipt: Receipt) -> None:
        """Wait for ``receipt``'s RECEIPT; raises what failed the connection instead."""
        await receipt.event.wait()
        if receipt.error is not None:
            if receipt.error is self._state.failure:
                self._state.raise_error()
            raise copy.copy(receipt.error)

    async def wait_all(self) -> None:
        """Wait for every receipt registered so far."""
        for receipt in list(self._pending.values()):
            await self.wait(receipt)

    async def wait_for_window(self) -> None:
        """Wait until fewer than ``max_pending`` receipts are outstanding."""
        while len(self._pending) >= self.max_pending:
            self._state.check_open()
            if self._window_changed is None:
                self._window_changed = trio.Event()
            await self._window_changed.wait()
        self._state.check_open()

    def _wake_window(self) -> None:
        if self._window_changed is not None:
            self._window_changed.set()
            self._window_changed = None

    def _fail_all(self, error: ClientError) -> None:
        receipts = list(self._pending.values())
        self._pending.clear()
        for receipt in receipts:
            receipt.resolve(error)
        self._wake_window()
