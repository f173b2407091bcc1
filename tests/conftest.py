"""Shared test helpers.

``wait_for`` is the one way tests wait for something to become true (nats ``checkFor``,
Artemis ``Wait.assertEquals``): it polls a predicate until it is truthy or a deadline
passes, and fails with what it last saw. Tests never sleep a guessed amount.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
import trio
from hypothesis import HealthCheck, settings

# Property tests check behaviour, not speed: a per-example deadline only fails them on a
# loaded machine (the tests themselves still bound their sizes).
settings.register_profile("artemis-py", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("artemis-py")

T = TypeVar("T")

Predicate = Callable[[], T | Awaitable[T]]


async def wait_for(
    predicate: Predicate[T],
    # A deadline to fail at, not a cancel scope: the caller gets a test failure that says
    # what was awaited, hence the parameter ASYNC109 would have as trio.fail_after.
    timeout: float = 10.0,  # noqa: ASYNC109
    *,
    interval: float = 0.01,
    message: str = "condition",
) -> T:
    """Poll ``predicate`` (sync or async) until it returns something truthy; return that.

    Fails the test with ``message`` and the last value seen if ``timeout`` seconds pass.
    An exception raised by the predicate propagates at once.
    """
    deadline = trio.current_time() + timeout
    while True:
        result = predicate()
        value: T = await result if inspect.isawaitable(result) else result
        if value:
            return value
        if trio.current_time() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}; last value: {value!r}")
        await trio.sleep(interval)


@pytest.fixture(name="wait_for")
def wait_for_fixture() -> Callable[..., Awaitable[object]]:
    """The :func:`wait_for` helper, as a fixture so any test module can ask for it."""
    return wait_for
