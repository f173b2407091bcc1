"""STOMP protocol version negotiation (STOMP 1.1/1.2 "Protocol Negotiation").

The client lists what it speaks in CONNECT's ``accept-version`` (comma separated); a CONNECT
without it is a 1.0 client. The server picks the highest version both sides speak and names it
in CONNECTED's ``version``. With nothing in common the server must answer with an ERROR frame
carrying a ``version`` header that lists what it supports.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from artemis_py.protocol.errors import RemoteProtocolError
from artemis_py.protocol.stomp.headers import show

__all__ = ["SUPPORTED_VERSIONS", "VersionNegotiationError", "negotiate_version", "parse_versions"]

#: Every version this codec implements, lowest first.
SUPPORTED_VERSIONS: Final = ("1.0", "1.1", "1.2")


class VersionNegotiationError(RemoteProtocolError):
    """Client and server share no version; ``error_headers`` has the ``version`` header to send."""

    def __init__(self, accept_version: str | None, supported: Iterable[str]) -> None:
        self.accept_version = accept_version
        self.supported = tuple(supported)
        if accept_version is None:
            offered = "only 1.0 (no accept-version header)"
        else:
            offered = show(accept_version)
        super().__init__(
            f"no common STOMP version: the client accepts {offered}, "
            f"supported protocol versions are {' '.join(self.supported)}",
            error_headers=(("version", ",".join(self.supported)),),
        )


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def parse_versions(accept_version: str | None) -> tuple[str, ...]:
    """The versions named by an ``accept-version`` value (None, the header absent, is 1.0)."""
    if accept_version is None:
        return ("1.0",)
    return tuple(v for v in (part.strip() for part in accept_version.split(",")) if v)


def negotiate_version(
    accept_version: str | None, supported: Iterable[str] = SUPPORTED_VERSIONS
) -> str:
    """The highest version in both ``accept_version`` (a CONNECT header) and ``supported``.

    Raises :class:`VersionNegotiationError` when there is none; its ``message`` and
    ``error_headers`` make the ERROR frame the spec asks for. ``supported`` lets an acceptor
    restrict the versions it speaks; it must be a subset of :data:`SUPPORTED_VERSIONS`.
    """
    ours = tuple(supported)
    unknown = set(ours) - set(SUPPORTED_VERSIONS)
    if unknown:
        raise ValueError(f"unsupported STOMP versions {sorted(unknown)}")
    common = set(parse_versions(accept_version)) & set(ours)
    if not common:
        raise VersionNegotiationError(accept_version, sorted(ours, key=_version_key))
    return max(common, key=_version_key)
