"""The management web server: hypercorn serving the starlette application, in the node's loop.

Why these two: hypercorn is a well-kept ASGI server (the pgjones/Quart family, HTTP/1.1 with
h11, used in production) and, unlike uvicorn, has a native Trio worker
(``hypercorn.trio.serve``), so it runs as one more task in the node's own nursery: no thread,
no second event loop, and it reads the broker's state on the loop where that state changes.
Starlette is the small, well-kept ASGI toolkit (routing, JSON responses, static files,
exception handlers) and runs on anyio, which runs on Trio. Both are what a Python web service
is commonly built from, so nothing here is hand-rolled HTTP.

Stopping the node cancels the nursery, which stops the server with it. Requests are cheap
reads of the node's state; operations that could take long (a purge or move of a large or
paged queue) are bounded (:mod:`.operations`), and password checks run in a worker thread.
"""

from __future__ import annotations

import logging
import ssl
from functools import partial
from typing import TYPE_CHECKING

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from artemis_py.config import BrokerConfig
from artemis_py.exceptions import ArtemisError, leaves
from artemis_py.management.api import application
from artemis_py.management.bootstrap import WebConfig
from artemis_py.management.site import ManagementSite
from artemis_py.transport.tls_contexts import TlsSetupError, server_context

if TYPE_CHECKING:
    from artemis_py.node import Node

log = logging.getLogger("artemis_py.management")


class WebServerError(ArtemisError):
    """The management web server cannot start (the message says why)."""


class _Config(Config):
    """Hypercorn's configuration, with the TLS context built from the binding's key store
    (hypercorn only knows PEM file paths; ours come from PKCS12 or PEM stores, masked
    passwords included, as the acceptors')."""

    context: ssl.SSLContext | None = None

    @property
    def ssl_enabled(self) -> bool:
        return self.context is not None

    def create_ssl_context(self) -> ssl.SSLContext | None:
        return self.context


def check_security(config: BrokerConfig, web: WebConfig) -> None:
    """Refuse a web server that anyone on the network could use without a password."""
    if not config.security_enabled and not web.loopback:
        raise WebServerError(
            f"the management web server would listen on {web.host} (not a loopback address) "
            "with security-enabled false: anyone who reaches it could manage the node. Bind "
            "it to localhost, or enable security with a user that has the manage role "
            "(docs/management.md)"
        )


async def serve_management(
    target: Node | ManagementSite,
    web: WebConfig,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the management API, metrics and console of ``target`` (a live node, or a site
    a node is attached to once live: site.py) on ``web``'s binding until cancelled;
    ``task_status.started`` gets the URL it listens on (the real port when ``web.port`` is 0)."""
    site = target if isinstance(target, ManagementSite) else ManagementSite.of(target)
    check_security(site.config, web)
    config = _Config()
    config.bind = [f"[{web.host}]:{web.port}" if ":" in web.host else f"{web.host}:{web.port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("artemis_py.management.http")
    config.graceful_timeout = 1.0
    config.alpn_protocols = ["http/1.1"]
    if web.tls is not None:
        try:
            config.context = await trio.to_thread.run_sync(server_context, web.tls)
        except TlsSetupError as exc:
            raise WebServerError(f"management web server {web.uri}: {exc}") from None
        config.context.set_alpn_protocols(["http/1.1"])
    app = application(site, web)
    async with trio.open_nursery() as nursery:
        try:
            binds = await nursery.start(partial(serve, app, config, mode="asgi"))  # type: ignore[arg-type]
        except* OSError as group:  # hypercorn binds in nested nurseries
            failure = leaves(group)[0]
            raise WebServerError(
                f"management web server: cannot listen on {web.host}:{web.port}: "
                f"{getattr(failure, 'strerror', None) or failure}"
            ) from None
        url = binds[0] if binds else web.uri
        site.web_url = url
        if site.node is not None:
            site.node.web_url = url
        log.info("management web server listening on %s (console at %s/console)", url, url)
        task_status.started(url)
