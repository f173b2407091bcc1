"""Who may use the management web server: HTTP Basic with the broker's users.

With ``security-enabled`` true, every ``/api/`` and ``/console`` request carries HTTP Basic
credentials of a user in ``artemis-users.properties`` (:class:`~artemis_py.broker.authentication.
Authenticator`) whose roles hold the ``manage`` permission on the management address
(Artemis's ``<management-address>``, default ``activemq.management``; the security-settings of
:mod:`artemis_py.broker.authorization`). No or wrong credentials: 401 with a Basic challenge;
a user without ``manage``: 403. ``/metrics`` needs the same, except when the server listens
on a loopback address (a Prometheus on the same host scrapes it without credentials).

With security disabled the server only ever listens on a loopback address
(:func:`~.server.check_security`) and checks nothing.

Password hashes are slow on purpose, so checks run in a worker thread, off the loop.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING

import trio
from starlette.types import ASGIApp, Receive, Scope, Send

from artemis_py.config.permissions import Permission

if TYPE_CHECKING:
    from artemis_py.management.bootstrap import WebConfig
    from artemis_py.management.site import ManagementSite

REALM = "artemis-py"


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic ...`` header (None: absent or malformed)."""
    if not header:
        return None
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


async def _respond(send: Send, status: int, message: str, challenge: bool) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if challenge:
        headers.append((b"www-authenticate", f'Basic realm="{REALM}"'.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BasicAuth:
    """ASGI middleware: refuses a request before it reaches a route unless its user may
    manage the node (see the module doc)."""

    def __init__(self, app: ASGIApp, site: ManagementSite, web: WebConfig) -> None:
        self.app = app
        self.site = site  # its config and users, whether or not a node is live behind it
        self.open_metrics = web.loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.site.config.security_enabled:
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if self.open_metrics and path == "/metrics":
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value.decode("latin-1")
        credentials = basic_credentials(header)
        if credentials is None:
            await _respond(send, 401, "authentication required (HTTP Basic)", True)
            return
        user, password = credentials
        authenticator = self.site.authenticator
        if not await trio.to_thread.run_sync(authenticator.authenticate, user, password):
            await _respond(send, 401, "authentication failed", True)
            return
        address = self.site.config.management_address
        if not self.site.authorizer.subject(user).allowed(Permission.MANAGE, address):
            await _respond(
                send,
                403,
                f"user '{user}' does not have permission 'manage' on address '{address}'",
                False,
            )
            return
        await self.app(scope, receive, send)
