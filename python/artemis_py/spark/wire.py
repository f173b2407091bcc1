"""Talking to the nodes from Spark's Python workers, which are synchronous.

Each call of the connector that needs the network is one :func:`call`: one Trio event loop
(``trio.run``) around :mod:`artemis_py.client`, so nothing outlives it (no thread, no
socket between calls, nothing to pickle). Inside, :func:`open_node` opens a STOMP connection
and retries a node that is down, restarting or briefly unreachable until a :class:`Deadline`
(the ``nodeTimeoutMs`` option), then raises :class:`NodeUnreachableError` naming the node. A
node that refuses the login is not retried: wrong credentials do not heal. Connections ask
for heart-beats (:func:`heartbeat_ms`), so a node that hangs counts as lost, not as slow.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TypeVar

import trio

from artemis_py.client import (
    BrokerUrl,
    ClientConnection,
    ClientError,
    StompServerError,
    open_stomp_connection,
)
from artemis_py.client.errors import connect_failure, describe
from artemis_py.spark.errors import ConnectorError

__all__ = ["Deadline", "Login", "NodeRefusedError", "NodeUnreachableError", "call", "open_node"]

T = TypeVar("T")

_FIRST_RETRY = 0.1  # seconds; doubled after each failed attempt
_LONGEST_RETRY = 2.0
_CONNECT_TIMEOUT = 10.0  # per attempt, for TCP and again for CONNECTED
_SHORTEST_BEAT_MS = 500
_LONGEST_BEAT_MS = 10_000


def heartbeat_ms(timeout_ms: int) -> int:
    """The heart-beat interval asked of a node, both ways: a node that hangs (stopped,
    swapping, a half-open TCP connection) is declared lost after two silent intervals, at
    most half of ``nodeTimeoutMs``, so a call never waits on it for ever."""
    return min(max(timeout_ms // 4, _SHORTEST_BEAT_MS), _LONGEST_BEAT_MS)


class NodeUnreachableError(ConnectorError):
    """A node could not be reached within ``nodeTimeoutMs``."""

    def __init__(self, message: str, url: BrokerUrl) -> None:
        super().__init__(message)
        self.url = url

    def __reduce__(self) -> tuple[object, ...]:
        # Spark pickles errors raised in its workers back to the driver.
        return (type(self), (str(self), self.url))


class NodeRefusedError(ConnectorError):
    """A node refused the connection (wrong ``login``/``passcode``, an unknown user)."""


@dataclass(frozen=True, slots=True)
class Login:
    """The credentials (and client id) every connection of a query presents."""

    login: str | None = None
    passcode: str | None = None
    client_id: str | None = None


@dataclass(frozen=True, slots=True)
class Deadline:
    """Until when a node that does not answer is tried again, on Trio's clock."""

    at: float
    timeout_ms: int

    @classmethod
    def after(cls, timeout_ms: int) -> Deadline:
        """``timeout_ms`` from now; call it inside :func:`call`."""
        return cls(trio.current_time() + timeout_ms / 1000, timeout_ms)

    @property
    def expired(self) -> bool:
        return trio.current_time() >= self.at

    async def pause(self, attempt: int) -> bool:
        """Sleep before retry number ``attempt`` (0-based); False when the deadline would
        pass first (do not retry)."""
        delay = min(_FIRST_RETRY * 2**attempt, _LONGEST_RETRY)
        if trio.current_time() + delay >= self.at:
            return False
        await trio.sleep(delay)
        return True


def call(work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work()`` in a fresh Trio event loop and return its result."""
    return trio.run(work)


async def open_node(
    stack: AsyncExitStack, url: BrokerUrl, login: Login, deadline: Deadline
) -> ClientConnection:
    """A connection to the node at ``url``, closed with ``stack``; retried until
    ``deadline`` (then :class:`NodeUnreachableError`)."""
    attempt = 0
    beat = heartbeat_ms(deadline.timeout_ms)
    while True:
        connect_timeout = min(_CONNECT_TIMEOUT, max(deadline.at - trio.current_time(), 0.1))
        try:
            return await stack.enter_async_context(
                open_stomp_connection(
                    url.host,
                    url.port,
                    login=login.login,
                    passcode=login.passcode,
                    client_id=login.client_id,
                    connect_timeout=connect_timeout,
                    heartbeat=(beat, beat),
                )
            )
        except StompServerError as exc:
            raise NodeRefusedError(f"node {url} refused the connection: {exc}") from None
        except (OSError, ClientError, trio.BrokenResourceError) as exc:
            reason = connect_failure(exc) if isinstance(exc, OSError) else describe(exc)
        if not await deadline.pause(attempt):
            waited = math.ceil(deadline.timeout_ms / 1000)
            raise NodeUnreachableError(
                f"node {url} is not reachable (tried for {waited} s, nodeTimeoutMs="
                f"{deadline.timeout_ms}): {reason}",
                url,
            )
        attempt += 1
