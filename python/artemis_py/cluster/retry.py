"""Reconnect timing of cluster links and core bridges (Artemis's bridge retry settings,
clusters §4.1 and the core bridges chapter), and how often a failure that repeats at that
rate is logged (:class:`LogBackoff`, which lives in
:mod:`artemis_py.transport.log_backoff` so that acceptors use it too)."""

from __future__ import annotations

from typing import Protocol

from artemis_py.transport.log_backoff import LogBackoff, unlogged

__all__ = ["LogBackoff", "RetryPolicy", "RetrySettings", "unlogged"]


class RetrySettings(Protocol):
    """The retry settings a cluster connection and a core bridge share (milliseconds)."""

    @property
    def retry_interval(self) -> int: ...
    @property
    def retry_interval_multiplier(self) -> float: ...
    @property
    def max_retry_interval(self) -> int: ...
    @property
    def initial_connect_attempts(self) -> int: ...
    @property
    def reconnect_attempts(self) -> int: ...


class RetryPolicy:
    """``retry-interval`` times ``retry-interval-multiplier`` per failure, capped at
    ``max-retry-interval``; at most ``initial-connect-attempts`` tries before the first
    connection and ``reconnect-attempts`` after one broke (-1: forever)."""

    def __init__(self, config: RetrySettings) -> None:
        self.interval = config.retry_interval / 1000
        self.multiplier = config.retry_interval_multiplier
        self.max_interval = config.max_retry_interval / 1000
        self.initial_attempts = config.initial_connect_attempts
        self.reconnect_attempts = config.reconnect_attempts

    def delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failure in a row (1-based)."""
        delay = self.interval * self.multiplier ** max(failures - 1, 0)
        return min(delay, self.max_interval) if self.max_interval > 0 else delay

    def may_try(self, failures: int, *, connected_before: bool) -> bool:
        """Whether another attempt is allowed after ``failures`` failed ones in a row."""
        limit = self.reconnect_attempts if connected_before else self.initial_attempts
        return limit < 0 or failures < limit
