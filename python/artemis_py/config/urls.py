"""Transport URLs of ``<acceptor>`` and ``<connector>``: ``tcp://host:port?key=value;key2=value2``.

Artemis separates query parameters with ``;`` or ``&`` (both may appear in one URL) and
percent-decodes keys and values. Keys are case-sensitive and kept as written. A missing host
means ``localhost`` and a missing port 61616 (Artemis ``TransportConstants``). An acceptor may
name several hosts separated by commas to listen on each; IPv6 hosts are written in brackets
(``tcp://[::1]:61616``).

Only the ``tcp`` scheme is supported (Artemis also knows ``vm`` for in-VM connections, which have
no meaning for a Python broker).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from .defaults import TCP_HOST, TCP_PORT

__all__ = ["TransportURL", "parse_transport_url"]

_URL = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^?/]*)/?(?:\?(?P<query>.*))?", re.DOTALL
)
_HOST_PORT = re.compile(r"(?P<host>\[[^\]]*\]|[^:\[\]]*)(?::(?P<port>[^:]*))?")


@dataclass(frozen=True, slots=True)
class TransportURL:
    scheme: str
    hosts: tuple[str, ...]
    port: int
    params: tuple[tuple[str, str], ...]


def parse_transport_url(url: str) -> TransportURL:
    """Split a transport URL; raise :class:`ValueError` naming what is wrong."""
    match = _URL.fullmatch(url)
    if match is None:
        raise ValueError(f"expected a URL like tcp://host:61616?key=value, got '{url}'")
    scheme = match.group("scheme").lower()
    if scheme != "tcp":
        raise ValueError(f"only tcp:// URLs are supported, got '{scheme}://'")
    hosts: list[str] = []
    port: int | None = None
    authority = match.group("authority")
    for part in authority.split(",") if authority else [""]:
        hp = _HOST_PORT.fullmatch(part.strip())
        if hp is None:
            raise ValueError(
                f"cannot read host and port from '{part}' (IPv6 hosts go in [brackets])"
            )
        host = hp.group("host") or TCP_HOST
        if host.startswith("["):
            host = host[1:-1]
        hosts.append(host)
        port_text = hp.group("port")
        if port_text is not None:
            if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
                raise ValueError(f"port must be a number from 0 to 65535, got '{port_text}'")
            if port is not None and port != int(port_text):
                raise ValueError("all hosts of one URL must use the same port")
            port = int(port_text)
    params: dict[str, str] = {}
    query = match.group("query") or ""
    for item in re.split(r"[;&]", query):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = unquote(key.strip())
        if not sep or not key:
            raise ValueError(f"URL parameter '{item}' is not of the form key=value")
        if key in params:
            raise ValueError(f"URL parameter '{key}' is given twice")
        params[key] = unquote(value.strip())
    return TransportURL(
        scheme=scheme,
        hosts=tuple(hosts),
        port=TCP_PORT if port is None else port,
        params=tuple(params.items()),
    )
