"""Broker URLs as the Artemis CLI writes them: ``tcp://HOST:PORT`` (the STOMP acceptor).

Accepted: ``tcp://host:port``, ``stomp://host:port``, ``host:port``, ``host`` and bracketed
IPv6 literals (``tcp://[::1]:61613``). A missing port is the STOMP default, 61613. A query
string (Artemis connector parameters such as ``?sslEnabled=true``) is refused rather than
silently ignored, because this client does not implement those parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

__all__ = ["DEFAULT_STOMP_PORT", "DEFAULT_URL", "BrokerUrl", "parse_url"]

DEFAULT_STOMP_PORT: Final = 61613
DEFAULT_URL: Final = f"tcp://localhost:{DEFAULT_STOMP_PORT}"
_SCHEMES: Final = frozenset({"tcp", "stomp"})


@dataclass(frozen=True, slots=True)
class BrokerUrl:
    """Where a STOMP acceptor listens."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"


def parse_url(url: str) -> BrokerUrl:
    """Parse ``url`` (see the module doc). Raises :class:`ValueError` with a readable message."""
    text = url.strip()
    if not text:
        raise ValueError("empty broker URL")
    if "://" not in text:
        text = "tcp://" + text
    parts = urlsplit(text)
    if parts.scheme.lower() not in _SCHEMES:
        raise ValueError(
            f"unsupported URL scheme {parts.scheme!r} in {url!r} (use tcp://HOST:PORT)"
        )
    if parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ValueError(f"unsupported broker URL {url!r} (use tcp://HOST:PORT, no parameters)")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"credentials in the URL {url!r}: pass --user/--password instead")
    host = parts.hostname
    if not host:
        raise ValueError(f"no host in broker URL {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"invalid port in broker URL {url!r}") from None
    if port is None:
        port = DEFAULT_STOMP_PORT
    if port == 0:
        raise ValueError(f"invalid port 0 in broker URL {url!r}")
    return BrokerUrl(host, port)
