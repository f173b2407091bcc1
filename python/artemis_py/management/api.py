"""The management web application: the JSON API under ``/api/``, ``/metrics`` and
``/console`` (docs/management.md "HTTP API").

Handlers read the node's state through :mod:`.views` and act through :mod:`.operations`.
Bad input never reaches the broker: a body that is not a JSON object, a field of the wrong
type, an unknown name, a browse limit over :data:`MAX_BROWSE` each get a 4xx answer
``{"error": "..."}``; anything unexpected is logged once and answered 500 without details.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from artemis_py.config import RoutingType
from artemis_py.management import operations, views
from artemis_py.management.auth import BasicAuth
from artemis_py.management.console import console_app
from artemis_py.management.metrics import scrape
from artemis_py.management.operations import OperationError, QueueRequest
from artemis_py.management.origin import SameOrigin
from artemis_py.management.site import ManagementSite

if TYPE_CHECKING:
    from artemis_py.management.bootstrap import WebConfig
    from artemis_py.node import Node

log = logging.getLogger("artemis_py.management")

DEFAULT_BROWSE = 20
MAX_BROWSE = 1000
MAX_BODY = 64 * 1024  # bytes of a request body


def _site(request: Request) -> ManagementSite:
    site: ManagementSite = request.app.state.site
    return site


def _node(request: Request) -> Node:
    """The live node; 503 while there is none (a waiting backup: management/site.py)."""
    node = _site(request).node
    if node is None:
        raise OperationError(503, _site(request).not_live_reason())
    return node


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object; OperationError(400) for anything else."""
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY:
            raise OperationError(413, f"the request body is larger than {MAX_BODY} bytes")
    if not data.strip():
        return {}
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OperationError(400, f"malformed JSON: {exc}") from None
    if not isinstance(body, dict):
        raise OperationError(400, "the request body must be a JSON object")
    return body


def _field(body: dict[str, Any], name: str, kind: type, default: Any = ...) -> Any:
    value = body.get(name, default)
    if value is ...:
        raise OperationError(400, f"field '{name}' is required")
    if value is None and default is None:
        return None
    # bool is an int in Python: an int field takes no true/false.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise OperationError(400, f"field '{name}' must be a {kind.__name__}")
    if isinstance(value, str) and not value.strip():
        raise OperationError(400, f"field '{name}' must not be empty")
    return value


def _routing_type(text: Any, field: str) -> RoutingType:
    if not isinstance(text, str) or text.upper() not in RoutingType.__members__:
        raise OperationError(400, f"field '{field}': ANYCAST or MULTICAST expected, got {text!r}")
    return RoutingType[text.upper()]


def _force(request: Request) -> bool:
    value = request.query_params.get("force", "false").lower()
    if value not in ("true", "false"):
        raise OperationError(400, "force must be true or false")
    return value == "true"


# -- reads -------------------------------------------------------------------------------


async def get_node(request: Request) -> Response:
    site = _site(request)
    if site.node is None:  # a waiting backup says who it is and what it waits for
        return JSONResponse(site.node_view())
    return JSONResponse(views.node_view(site.node))


async def list_addresses(request: Request) -> Response:
    node = _node(request)
    addresses = sorted(node.broker.post_office.addresses.values(), key=lambda a: a.name)
    return JSONResponse([views.address_view(node, a) for a in addresses])


async def get_address(request: Request) -> Response:
    node = _node(request)
    address = operations.find_address(node, request.path_params["name"])
    return JSONResponse(views.address_view(node, address))


async def list_diverts(request: Request) -> Response:
    return JSONResponse([views.divert_view(d) for d in _node(request).config.diverts])


async def list_queues(request: Request) -> Response:
    queues = sorted(_node(request).broker.queues(), key=lambda q: q.name)
    return JSONResponse([views.queue_view(q) for q in queues])


async def get_queue(request: Request) -> Response:
    queue = operations.find_queue(_node(request), request.path_params["name"])
    return JSONResponse(views.queue_view(queue))


async def browse(request: Request) -> Response:
    text = request.query_params.get("limit", str(DEFAULT_BROWSE))
    try:
        limit = int(text)
    except ValueError:
        raise OperationError(400, f"limit must be a number, got {text!r}") from None
    if not 0 <= limit <= MAX_BROWSE:
        raise OperationError(400, f"limit must be from 0 to {MAX_BROWSE}, got {limit}")
    queue = operations.find_queue(_node(request), request.path_params["name"])
    return JSONResponse(views.browse(queue, limit))


async def list_consumers(request: Request) -> Response:
    return JSONResponse(views.consumers_view(_node(request)))


async def list_connections(request: Request) -> Response:
    connections = sorted(_node(request).clients.connections, key=lambda c: c.created)
    return JSONResponse([views.connection_view(c) for c in connections])


async def get_cluster(request: Request) -> Response:
    return JSONResponse(views.cluster_view(_node(request)))


async def get_stats(request: Request) -> Response:
    return JSONResponse(views.stats_view(_node(request)))


# -- operations --------------------------------------------------------------------------


async def create_address(request: Request) -> Response:
    body = await _body(request)
    name = _field(body, "name", str)
    kinds = _field(body, "routing_types", list, ["ANYCAST"])
    if not kinds:
        raise OperationError(400, "field 'routing_types' must name ANYCAST and/or MULTICAST")
    routing_types = {_routing_type(k, "routing_types") for k in kinds}
    node = _node(request)
    address = await operations.create_address(node, name, routing_types)
    return JSONResponse(views.address_view(node, address), status_code=201)


async def delete_address(request: Request) -> Response:
    name = request.path_params["name"]
    await operations.delete_address(_node(request), name, _force(request))
    return JSONResponse({"deleted": name})


async def create_queue(request: Request) -> Response:
    body = await _body(request)
    name = _field(body, "name", str)
    queue_request = QueueRequest(
        name=name,
        address=_field(body, "address", str, name),
        routing_type=_routing_type(body.get("routing_type", "ANYCAST"), "routing_type"),
        durable=_field(body, "durable", bool, True),
        filter=_field(body, "filter", str, None),
        max_consumers=_field(body, "max_consumers", int, -1),
    )
    queue = await operations.create_queue(_node(request), queue_request)
    return JSONResponse(views.queue_view(queue), status_code=201)


async def delete_queue(request: Request) -> Response:
    name = request.path_params["name"]
    await operations.delete_queue(_node(request), name, _force(request))
    return JSONResponse({"deleted": name})


async def purge(request: Request) -> Response:
    outcome = await operations.purge(_node(request), request.path_params["name"])
    return JSONResponse({"removed": outcome.done, "remaining": outcome.remaining})


async def move(request: Request) -> Response:
    body = await _body(request)
    to = _field(body, "to", str)
    outcome = await operations.move(_node(request), request.path_params["name"], to)
    return JSONResponse({"moved": outcome.done, "remaining": outcome.remaining})


async def pause(request: Request) -> Response:
    queue = operations.find_queue(_node(request), request.path_params["name"])
    queue.pause()
    log.info("queue %s paused (management API)", queue.name)
    return JSONResponse(views.queue_view(queue))


async def resume(request: Request) -> Response:
    queue = operations.find_queue(_node(request), request.path_params["name"])
    queue.resume()
    log.info("queue %s resumed (management API)", queue.name)
    return JSONResponse(views.queue_view(queue))


async def close_connection(request: Request) -> Response:
    node = _node(request)
    connection_id = request.path_params["id"]
    found = next((c for c in node.clients.connections if c.id == connection_id), None)
    if found is None:
        raise operations.not_found("connection", connection_id)
    # As when the node stops: what it read completes, its deliveries go back to their queues.
    found.stop()
    log.info("connection %s from %s closed (management API)", found.id, found.peer)
    return JSONResponse({"closed": connection_id})


async def scale_down(request: Request) -> Response:
    node = _node(request)
    settings = node.config.ha_policy.scale_down
    if settings is None or not settings.enabled:
        raise OperationError(
            409,
            "scale-down is not configured: <ha-policy><live-only><scale-down> in broker.xml "
            "(docs/scaling.md)",
        )
    if not node.cluster_connections:
        raise OperationError(409, "this node is in no cluster: there is no node to scale down to")
    log.info("scale-down requested (management API): the node moves its messages, then stops")
    node.stop()
    return JSONResponse({"scaling_down": True}, status_code=202)


async def metrics(request: Request) -> Response:
    # The state is read on the loop, the text encoded in a worker thread (metrics.py).
    site = _site(request)
    target = site.node if site.node is not None else site  # a waiting backup: ha_live 0
    body, content_type = await scrape(target, request.headers.get("accept"))
    return Response(body, media_type=content_type)


# -- errors ------------------------------------------------------------------------------


async def _operation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OperationError)
    return _error(exc.status, str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {404: "not found", 405: "method not allowed"}.get(exc.status_code, exc.detail)
    return _error(exc.status_code, message)


class _Unexpected:
    """ASGI middleware: an unexpected error is logged once (with its traceback, for the
    operator) and answered 500 without details (starlette's own handler would re-raise it
    to the server, which logs it again)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started |= message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:  # the one place that turns any failure into a 500
            log.exception("management API: %s %s failed", scope.get("method"), scope.get("path"))
            if started or scope["type"] != "http":
                return
            response = _error(500, "internal error (the node's log has the details)")
            await response(scope, receive, send)


async def _lifespan(receive: Receive, send: Send) -> None:
    """The ASGI lifespan: the application has nothing to start or stop. (Starlette's own
    reports the node's stop, which cancels the server, as a failed shutdown, and hypercorn
    then logs a traceback at every stop.)"""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def index(request: Request) -> Response:
    # ENDPOINTS lists this request too.
    return JSONResponse({"endpoints": [e.view() for e in ENDPOINTS]})


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One request of the API: what ``GET /api/`` lists, and the route that answers it."""

    method: str
    path: str
    handler: Callable[[Request], Awaitable[Response]]
    description: str

    def view(self) -> dict[str, str]:
        return {"method": self.method, "path": self.path, "description": self.description}


ENDPOINTS: Final = (
    Endpoint("GET", "/api/", index, "this list of the API's endpoints"),
    Endpoint("GET", "/api/node", get_node, "the node: name, ID, version, uptime, acceptors"),
    Endpoint("GET", "/api/addresses", list_addresses, "every address with its queues and size"),
    Endpoint("POST", "/api/addresses", create_address, "create an address {name, routing_types}"),
    Endpoint("GET", "/api/addresses/{name}", get_address, "one address"),
    Endpoint(
        "DELETE",
        "/api/addresses/{name}",
        delete_address,
        "delete an address (?force=true: with its queues)",
    ),
    Endpoint("GET", "/api/diverts", list_diverts, "the diverts broker.xml declares"),
    Endpoint("GET", "/api/queues", list_queues, "every queue with its counts"),
    Endpoint(
        "POST",
        "/api/queues",
        create_queue,
        "create a queue {name, address, routing_type, durable, filter, max_consumers}",
    ),
    Endpoint(
        "GET",
        "/api/queues/{name}/messages",
        browse,
        f"browse a queue's first ?limit=N ready messages (default {DEFAULT_BROWSE}, "
        f"at most {MAX_BROWSE}) without consuming them",
    ),
    Endpoint(
        "POST",
        "/api/queues/{name}/purge",
        purge,
        "remove a queue's ready messages (counted as killed, as Artemis counts a purge)",
    ),
    Endpoint("POST", "/api/queues/{name}/move", move, "move a queue's messages {to: queue}"),
    Endpoint("POST", "/api/queues/{name}/pause", pause, "stop deliveries from a queue"),
    Endpoint("POST", "/api/queues/{name}/resume", resume, "resume deliveries from a queue"),
    Endpoint("GET", "/api/queues/{name}", get_queue, "one queue"),
    Endpoint(
        "DELETE",
        "/api/queues/{name}",
        delete_queue,
        "delete a queue (?force=true: even with consumers, which are closed)",
    ),
    Endpoint("GET", "/api/consumers", list_consumers, "every consumer of every connection"),
    Endpoint("GET", "/api/connections", list_connections, "the client connections"),
    Endpoint(
        "DELETE",
        "/api/connections/{id}",
        close_connection,
        "close a client connection (its unacknowledged messages go back)",
    ),
    Endpoint(
        "GET",
        "/api/cluster",
        get_cluster,
        "the cluster as this node sees it: members (this node too) and its bridges",
    ),
    Endpoint(
        "POST",
        "/api/cluster/scale-down",
        scale_down,
        "move this node's messages to another node, then stop it",
    ),
    Endpoint(
        "GET",
        "/api/stats",
        get_stats,
        "a cheap snapshot of the counters the console charts (queues, links)",
    ),
    Endpoint("GET", "/metrics", metrics, "Prometheus metrics (text or OpenMetrics)"),
)
"""Every request the API answers: its routes, and its index at ``GET /api/``."""


def routes() -> list[Route | Mount]:
    # A path parameter {name} may hold slashes (a queue orders/eu); {id} may not.
    return [
        Route(e.path.replace("{name}", "{name:path}"), e.handler, methods=[e.method])
        for e in ENDPOINTS
    ]


def application(site: ManagementSite, web: WebConfig) -> Starlette:
    """The ASGI application of a management web server serving ``site``'s node."""

    async def root(request: Request) -> Response:
        return RedirectResponse(f"/{web.root_redirect}")

    app = Starlette(
        routes=[
            Route("/", root),
            *routes(),
            Mount("/console", app=console_app()),
        ],
        middleware=[
            Middleware(SameOrigin, web=web),
            Middleware(BasicAuth, site=site, web=web),
            Middleware(_Unexpected),
        ],
        exception_handlers={OperationError: _operation_error, HTTPException: _http_error},
    )
    app.state.site = site
    return app
