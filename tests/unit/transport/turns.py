"""A task that counts its turns, for the transport tests of who gets to run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio


class Turns:
    """How many times another task got to run."""

    count = 0


@asynccontextmanager
async def other_task_turns() -> AsyncIterator[Turns]:
    """A task that counts its turns beside the test's code: a loop that never waits still
    lets it run now and then, or it does not."""
    turns = Turns()

    async def ticker() -> None:
        while True:
            turns.count += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        yield turns
        nursery.cancel_scope.cancel()
