"""The management server's same-origin guard (artemis_py.management.origin): cross-site
changes and rebound host names are refused before any route runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from artemis_py.management.bootstrap import WebConfig
from artemis_py.management.origin import SameOrigin, host_name


@pytest.mark.parametrize(
    ("header", "name"),
    [("localhost:8161", "localhost"), ("[::1]:8161", "::1"), ("example.com", "example.com")],
)
def test_host_name(header: str, name: str) -> None:
    assert host_name(header) == name


async def status(web: WebConfig, method: str, host: str, origin: str | None = None) -> int:
    reached: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)
        await send({"type": "http.response.start", "status": 200, "headers": []})

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    scope = {"type": "http", "method": method, "path": "/api/queues", "headers": headers}
    await SameOrigin(app, web)(scope, None, send)  # type: ignore[arg-type]
    code: int = sent[0]["status"]
    assert reached == ([True] if code == 200 else [])
    if code != 200:
        assert json.loads(sent[1]["body"])["error"]
    return code


async def test_loopback_server() -> None:
    web = WebConfig(uri="http://localhost:8161", host="localhost", port=8161)
    assert await status(web, "GET", "localhost:8161") == 200
    assert await status(web, "GET", "127.0.0.1:8161") == 200
    assert await status(web, "GET", "[::1]:8161") == 200
    assert await status(web, "GET", "rebound.example:8161") == 403
    own = "http://localhost:8161"
    assert await status(web, "POST", "localhost:8161", origin=own) == 200
    assert await status(web, "POST", "localhost:8161") == 200  # not a browser
    assert await status(web, "DELETE", "localhost:8161", origin="http://evil.example") == 403
    assert await status(web, "POST", "localhost:8161", origin="null") == 403
    assert await status(web, "GET", "localhost:8161", origin="http://evil.example") == 200


async def test_server_on_every_address_checks_origin_only() -> None:
    web = WebConfig(uri="http://0.0.0.0:8443", host="0.0.0.0", port=8443)
    assert await status(web, "GET", "broker.example.com:8443") == 200
    assert (
        await status(web, "POST", "broker.example.com:8443", "http://broker.example.com:8443")
        == 200
    )
    assert await status(web, "POST", "broker.example.com:8443", "http://other.example") == 403
