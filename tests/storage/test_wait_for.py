"""The shared ``wait_for`` helper from tests/conftest.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

WaitFor = Callable[..., Awaitable[object]]


async def test_returns_the_first_truthy_value(
    wait_for: WaitFor, autojump_clock: trio.testing.MockClock
) -> None:
    calls = 0

    def predicate() -> int:
        nonlocal calls
        calls += 1
        return calls if calls >= 3 else 0

    assert await wait_for(predicate, 1) == 3


async def test_accepts_async_predicates(
    wait_for: WaitFor, autojump_clock: trio.testing.MockClock
) -> None:
    event = trio.Event()

    async def set_later() -> None:
        await trio.sleep(0.5)
        event.set()

    async def predicate() -> bool:
        await trio.lowlevel.checkpoint()
        return event.is_set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(set_later)
        assert await wait_for(predicate, 2) is True
        assert trio.current_time() >= 0.5


async def test_fails_with_what_it_waited_for(
    wait_for: WaitFor, autojump_clock: trio.testing.MockClock
) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"timed out after 3s waiting for the queue"):
        await wait_for(lambda: [], 3, message="the queue")
    assert 3 <= trio.current_time() < 3.1
