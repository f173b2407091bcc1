"""Requests a browser sends on behalf of another site's page: refused.

*Cross-site requests (CSRF).* A browser attaches the HTTP Basic credentials it has cached for
the node to any request a page of another site makes it send: a hidden form POSTed to
``/api/queues/orders/purge`` would purge. So a request that changes something (any method but
GET, HEAD and OPTIONS) is refused when its ``Origin`` header names another origin than the
server's own. The CLI, curl and scripts send no ``Origin`` and are not affected; the console
is served from the same origin as the API.

*DNS rebinding.* A page can reach a server on a loopback address through a host name of its
own that it points at 127.0.0.1; then its ``Origin`` and ``Host`` agree. So a server bound to
a loopback address answers only requests whose ``Host`` is a loopback name or address.

Artemis's console guards the same way (Jolokia's ``jolokia-access.xml``: strict origin
checking).
"""

from __future__ import annotations

import ipaddress
import json
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from artemis_py.management.bootstrap import WebConfig

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def host_name(host_header: str) -> str:
    """The name or address of a ``Host`` header, without its port or IPv6 brackets."""
    if host_header.startswith("["):
        return host_header[1:].partition("]")[0]
    return host_header.rpartition(":")[0] if ":" in host_header else host_header


def is_loopback_name(name: str) -> bool:
    if name.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class SameOrigin:
    """ASGI middleware: refuses cross-origin changes and, on loopback, foreign Host names."""

    def __init__(self, app: ASGIApp, web: WebConfig) -> None:
        self.app = app
        self.scheme = web.scheme
        self.loopback = web.loopback
        self.bound_host = web.host.lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name: value.decode("latin-1") for name, value in scope.get("headers", ())}
        host = headers.get(b"host", "")
        refusal = None
        name = host_name(host).lower()
        if self.loopback and not (is_loopback_name(name) or name == self.bound_host):
            refusal = f"Host '{host}' is not this server (a loopback server answers loopback names)"
        elif scope.get("method", "GET") not in SAFE_METHODS:
            origin = headers.get(b"origin")
            if origin is not None and origin != f"{self.scheme}://{host}":
                refusal = f"cross-origin request from '{origin}' refused"
        if refusal is None:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": refusal}).encode()
        length = str(len(body)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", length)],
            }
        )
        await send({"type": "http.response.body", "body": body})
