"""Shared test helpers.

``wait_for`` is the one way tests wait for something to become true (nats ``checkFor``,
Artemis ``Wait.assertEquals``): it polls a predicate until it is truthy or a deadline
passes, and fails with what it last saw. Tests never sleep a guessed amount.
"""

from __future__ import annotations

import inspect
import signal
import tempfile
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import pytest
import pytest_timeout
import trio
from hypothesis import HealthCheck, settings

from artemis_py.broker.paging.disk import human_bytes, measure
from artemis_py.config import defaults

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


# --- the disk the suite writes to ------------------------------------------------------------
# Nodes run with Artemis's default max-disk-usage (90%, of f_blocks as Artemis counts it, not
# df's figure): on a disk past it every node holds its producers and the suite fails in
# scattered timeouts. Say so once, at the start, with the figure.

_DISK_MARGIN = 2  # percent below the limit, for what the run itself writes


def _temp_disk() -> tuple[float, str]:
    usages, problems = measure([Path(tempfile.gettempdir())])
    if not usages:
        return 0.0, "; ".join(problems)
    usage = usages[0]
    return usage.used * 100, (
        f"{human_bytes(usage.usable)} free of {human_bytes(usage.total)} "
        f"({usage.used * 100:.1f}% used as Artemis counts it) under {usage.directory}"
    )


def pytest_report_header() -> str:
    return f"disk: {_temp_disk()[1]}"


def pytest_sessionstart(session: pytest.Session) -> None:
    used, text = _temp_disk()
    if used >= defaults.MAX_DISK_USAGE - _DISK_MARGIN:
        pytest.exit(
            f"the disk is too full for the suite: {text}; nodes hold producers from "
            f"max-disk-usage {defaults.MAX_DISK_USAGE}% (Artemis's default). Free some room.",
            returncode=1,
        )


# --- per-test timeouts (pytest-timeout, [tool.pytest.ini_options] timeout) -------------------
# pytest-timeout's signal method raises its failure from the SIGALRM handler, wherever the main
# thread is. Inside trio.run that can be trio's own bookkeeping: the run is left half torn
# down and every later Trio test of the session fails too. So while a Trio run is active the
# alarm is delivered the way Trio delivers Ctrl-C (its SIGINT handler raises KeyboardInterrupt
# where that is safe, or at the next checkpoint), the run unwinds cleanly, and the test fails
# as a timeout. Outside a Trio run (a sync test, a sync fixture) pytest-timeout's own handler
# fails the test as usual.

_TIMED_OUT = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    if settings.method != "signal":
        return None  # pytest-timeout's thread method: dump the stacks and end the session

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if not trio.lowlevel.in_trio_run():
            pytest_timeout.timeout_sigalrm(item, settings)
            return
        item.stash[_TIMED_OUT] = settings.timeout
        pytest_timeout.dump_stacks(item.config.get_terminal_writer())
        interrupt = signal.getsignal(signal.SIGINT)
        if not callable(interrupt):
            raise KeyboardInterrupt
        interrupt(signal.SIGINT, frame)

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel  # type: ignore[attr-defined]
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    try:
        return (yield)
    except BaseException:
        timeout = item.stash.get(_TIMED_OUT, None)
        if timeout is None:
            raise
        pytest.fail(f"Timeout (>{timeout}s) from pytest-timeout, in a Trio run", pytrace=False)
