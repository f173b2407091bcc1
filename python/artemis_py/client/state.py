"""The life-cycle state of a client connection, shared by its parts: open, disconnecting,
closed, or failed for good.

Sticky failure
--------------
The first ERROR frame, lost transport, protocol violation or missing heart-beat is recorded
once (:meth:`ConnectionState.fail`). Every waiter is then woken with it: the parts that
hold waiters (receipts, subscriptions) registered a shutdown callback, and ``finished`` is
set so the stream gets closed. Every later call raises a fresh copy of the failure
(:meth:`ConnectionState.error`), with one traceback per caller and the same attributes.
Background tasks never raise: an error reaches the caller at the call that observes it.
``failure_seen`` records whether some caller did, so an error nobody observed can be raised
when the ``async with`` block ends.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import NoReturn

import trio

from artemis_py.client.errors import ClientError, ConnectionClosedError

__all__ = ["ConnectionState"]

log = logging.getLogger("artemis_py.client")


class ConnectionState:
    """Whether requests can be made, and if not, what to raise (see the module doc)."""

    __slots__ = (
        "_on_shutdown",
        "closed",
        "disconnect_receipt",
        "disconnecting",
        "failure",
        "failure_seen",
        "finished",
    )

    def __init__(self) -> None:
        self.failure: ClientError | None = None
        self.failure_seen = False
        self.closed = False
        self.disconnecting = False
        self.disconnect_receipt: str | None = None
        """The receipt id of our DISCONNECT: its RECEIPT means the server will close."""
        self.finished = trio.Event()
        """Set once the connection failed or was closed: the stream can go."""
        self._on_shutdown: list[Callable[[ClientError], None]] = []

    @property
    def is_open(self) -> bool:
        """Not failed, not closed, not disconnecting: requests can be made."""
        return self.failure is None and not self.closed and not self.disconnecting

    def on_shutdown(self, callback: Callable[[ClientError], None]) -> None:
        """Call ``callback(error)`` once, when the connection fails or is closed."""
        self._on_shutdown.append(callback)

    def error(self, *, disconnecting_ok: bool = False) -> ClientError | None:
        """The error a request must raise now, or None if the connection is usable."""
        if self.failure is not None:
            self.failure_seen = True
            fresh = copy.copy(self.failure)  # one traceback per caller, same attributes
            fresh.__cause__ = self.failure.__cause__
            return fresh
        if self.closed:
            return ConnectionClosedError("the connection is closed")
        if self.disconnecting and not disconnecting_ok:
            return ConnectionClosedError("the connection is being disconnected")
        return None

    def check_open(self, *, disconnecting_ok: bool = False) -> None:
        """Raise :meth:`error`, if there is one."""
        error = self.error(disconnecting_ok=disconnecting_ok)
        if error is not None:
            raise error

    def raise_error(self) -> NoReturn:
        """Raise why the connection is unusable (the caller knows that it is)."""
        error = self.error(disconnecting_ok=True)
        assert error is not None
        raise error

    def raise_if_failed(self) -> None:
        """Raise the failure, if any (a subscription's channel ended: was it an error?)."""
        if self.failure is not None:
            self.check_open()

    def fail(self, error: ClientError, cause: BaseException | None = None) -> None:
        """Record the first failure and wake everybody with it."""
        if self.failure is not None or self.closed:
            return
        if cause is not None:
            error.__cause__ = cause
        log.debug("STOMP connection failed: %s", error)
        self.failure = error
        self._shut_down(error)

    def close(self) -> None:
        """We closed the connection: wake every waiter with :class:`ConnectionClosedError`."""
        self.closed = True
        if not self.finished.is_set():
            self._shut_down(ConnectionClosedError("the connection was closed"))

    def _shut_down(self, error: ClientError) -> None:
        for callback in self._on_shutdown:
            callback(error)
        self.finished.set()
