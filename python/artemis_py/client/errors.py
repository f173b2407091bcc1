"""Errors of the STOMP client, rooted in :class:`~artemis_py.exceptions.ArtemisError`.

* :class:`StompServerError` -- the server sent an ERROR frame (refused a login, a destination,
  a frame). STOMP servers close the connection after an ERROR, so the connection is over.
* :class:`ConnectionLostError` -- the transport broke: the server closed the socket without
  a DISCONNECT receipt, a read or write failed, or heart-beats stopped arriving. It is also a
  :class:`trio.BrokenResourceError`, the Trio convention for "the peer went away".
* :class:`ConnectionClosedError` -- *we* closed the connection (``disconnect()``/``aclose()``)
  and then tried to use it; also a :class:`trio.ClosedResourceError`.

Protocol violations by the server surface as a :class:`ClientError` whose ``__cause__`` is the
codec's :class:`~artemis_py.protocol.RemoteProtocolError`. Failing to open the TCP connection
raises the :class:`OSError` that Trio raised (``ConnectionRefusedError`` and friends).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from typing import Final

import trio

from artemis_py.exceptions import ArtemisError, leaves
from artemis_py.protocol.stomp import Frame

__all__ = [
    "TRANSPORT_ERRORS",
    "ClientError",
    "ConnectionClosedError",
    "ConnectionLostError",
    "StompServerError",
    "connect_failure",
    "describe",
]

_DETAIL_CHARS = 500


class ClientError(ArtemisError):
    """Base class of the errors the STOMP client raises on purpose."""


class StompServerError(ClientError):
    """The server answered with an ERROR frame.

    ``message`` is the frame's ``message`` header, ``details`` its body as text (Artemis puts
    the exception text there), ``receipt_id`` the receipt of the frame that caused it, if the
    server named one, and ``frame`` the whole ERROR frame when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        details: str = "",
        receipt_id: str | None = None,
        headers: Iterable[tuple[str, str]] = (),
        frame: Frame | None = None,
    ) -> None:
        self.message = message
        self.details = details
        self.receipt_id = receipt_id
        self.headers: tuple[tuple[str, str], ...] = tuple(headers)
        self.frame = frame
        text = message or "ERROR frame without a message"
        # One line: the CLI prints str(exc), and the body often repeats the header, or
        # repeats it and says more: each part is said once.
        detail = " ".join(details.split())
        if len(detail) > _DETAIL_CHARS:
            detail = detail[:_DETAIL_CHARS] + "..."
        if detail and detail not in message:
            text = detail if message and detail.startswith(message) else f"{text}: {detail}"
        super().__init__(text)

    @classmethod
    def from_frame(cls, frame: Frame) -> StompServerError:
        """The error an ERROR frame reports."""
        return cls(
            frame.get("message", ""),
            details=frame.body.decode("utf-8", "replace").strip(),
            receipt_id=frame.get("receipt-id"),
            headers=frame.headers,
            frame=frame,
        )

    def __reduce__(self) -> tuple[object, ...]:
        # Keeps copy.copy() (used to raise a fresh error per caller) and pickling exact.
        return (
            _rebuild_server_error,
            (self.message, self.details, self.receipt_id, self.headers, self.frame),
        )


def _rebuild_server_error(
    message: str,
    details: str,
    receipt_id: str | None,
    headers: tuple[tuple[str, str], ...],
    frame: Frame | None,
) -> StompServerError:
    return StompServerError(
        message, details=details, receipt_id=receipt_id, headers=headers, frame=frame
    )


class ConnectionLostError(ClientError, trio.BrokenResourceError):
    """The connection to the server broke (see the module doc)."""


class ConnectionClosedError(ClientError, trio.ClosedResourceError):
    """The connection was closed by this side and cannot be used any more."""


TRANSPORT_ERRORS: Final = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
"""What a Trio stream raises when the transport under it breaks."""


def describe(exc: BaseException) -> str:
    """``TypeName: text`` (just the type name when the text is empty), for error messages."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, socket.gaierror) and exc.strerror:
        return exc.strerror  # "Name or service not known"
    if isinstance(exc, OSError) and exc.errno and exc.errno > 0:
        return os.strerror(exc.errno)  # "Connection refused", without trio's address prefix
    return str(exc) or type(exc).__name__


def connect_failure(exc: OSError) -> str:
    """Why a TCP connection could not be opened, e.g. ``Connection refused``.

    :func:`trio.open_tcp_stream` raises "all attempts to connect to HOST:PORT failed" with
    each attempt's error in ``__cause__``; their distinct reasons are joined with ``; ``.
    """
    causes = leaves(exc.__cause__) if exc.__cause__ is not None else [exc]
    reasons: list[str] = []
    for cause in causes:
        reason = _os_reason(cause)
        if reason not in reasons:
            reasons.append(reason)
    return "; ".join(reasons) or type(exc).__name__
