"""Ctrl-C during ``artemis-py producer`` / ``consumer``: stop cleanly, or at once.

The first SIGINT asks the run to stop between two messages (:attr:`Interrupt.requested`;
the command says so on stderr): the loop ends after the message in hand, whatever was sent or acknowledged is confirmed
(the DISCONNECT receipt), and the counts so far are printed. Waits for something that may
never come (the next message) are cut short (:meth:`Interrupt.cuts_short`). A second SIGINT
aborts at once (:attr:`Interrupt.aborted`): the connection is closed without DISCONNECT and
the counts say what was not confirmed. Either way the command exits 130, without a
traceback.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager

import trio

__all__ = ["Interrupt", "run_interruptibly"]


class Interrupt:
    """Whether, and how hard, the user interrupted the run (see the module doc)."""

    def __init__(self, on_request: Callable[[], None] | None = None) -> None:
        self.requested = False
        self.aborted = False
        self._on_request = on_request  # says what happens now (e.g. a line on stderr)
        self._waits: set[trio.CancelScope] = set()

    @property
    def happened(self) -> bool:
        return self.requested or self.aborted

    @contextmanager
    def cuts_short(self) -> Iterator[trio.CancelScope]:
        """A block the first Ctrl-C cancels (for waits that lose nothing when cancelled)."""
        with trio.CancelScope() as scope:
            if self.requested:
                scope.cancel()
            self._waits.add(scope)
            try:
                yield scope
            finally:
                self._waits.discard(scope)

    def request(self) -> None:
        """The first Ctrl-C: stop between messages."""
        self.requested = True
        for scope in self._waits:
            scope.cancel()
        if self._on_request is not None:
            self._on_request()


async def _watch(
    signals: AsyncIterator[int], interrupt: Interrupt, abort: trio.CancelScope
) -> None:
    async for _ in signals:
        if interrupt.requested:
            interrupt.aborted = True
            abort.cancel()
            return
        interrupt.request()


async def run_interruptibly(
    main: Callable[[Interrupt], Awaitable[None]], interrupt: Interrupt
) -> None:
    """Run ``main(interrupt)`` with SIGINT handled as the module doc says."""
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch, signals, interrupt, nursery.cancel_scope)
            await main(interrupt)
            nursery.cancel_scope.cancel()
