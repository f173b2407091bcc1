"""Errors shared by the sans-IO protocol codecs (h11's split, rooted in ``ArtemisError``).

* :class:`LocalProtocolError` -- *we* misused the codec (sent a frame the protocol forbids in
  this state, a header the negotiated version cannot carry, ...). A bug on our side.
* :class:`RemoteProtocolError` -- the *peer* broke the protocol (malformed frame, a limit
  exceeded, a frame out of order). The usual reaction is to send an error frame and close.

Every error has a :attr:`ProtocolError.message`: one line, no CR/LF, short enough to go into
an error frame's header as it is (STOMP's ``ERROR`` ``message`` header), plus optional
:attr:`ProtocolError.error_headers` that such an error frame should carry (STOMP's version
negotiation failure lists the supported versions in a ``version`` header).
"""

from __future__ import annotations

from collections.abc import Iterable

from artemis_py.exceptions import ArtemisError

__all__ = ["LocalProtocolError", "ProtocolError", "RemoteProtocolError"]


class ProtocolError(ArtemisError):
    """A protocol rule was broken; see :class:`LocalProtocolError`, :class:`RemoteProtocolError`."""

    def __init__(self, message: str, *, error_headers: Iterable[tuple[str, str]] = ()) -> None:
        message = " ".join(message.split("\n")).replace("\r", " ")
        super().__init__(message)
        self.message = message
        self.error_headers: tuple[tuple[str, str], ...] = tuple(error_headers)


class LocalProtocolError(ProtocolError):
    """We tried to do something the protocol forbids (a bug in the caller, not the peer)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids; answer with an error frame and close."""
