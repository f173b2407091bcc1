"""``/console``: the web console's built files (docs/management.md "Console").

The console is built from ``console/`` in the repository by ``console/build`` into
:data:`CONSOLE_DIST` (never committed). Its files are served as they are, ``index.html`` for
the directory; until it is built, ``/console`` answers 503 with a page saying how to build it.
The directory is looked up at each request, so a console built while the node runs is served
without a restart.
"""

from __future__ import annotations

from pathlib import Path

from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

CONSOLE_DIST = Path(__file__).parent / "console_dist"

NOT_BUILT = """<!doctype html>
<html><head><meta charset="utf-8"><title>artemis-py console</title></head>
<body><h1>The console is not built</h1>
<p>the console is not built: run console/build (in the artemis-py repository), then reload
this page. The JSON API under <a href="/api/node">/api/</a> and <a href="/metrics">/metrics</a>
work without it.</p></body></html>
"""


def console_app(directory: Path = CONSOLE_DIST) -> ASGIApp:
    static: StaticFiles | None = None

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal static
        if not (directory / "index.html").is_file():
            await HTMLResponse(NOT_BUILT, status_code=503)(scope, receive, send)
            return
        if static is None:
            static = StaticFiles(directory=directory, html=True)
        await static(scope, receive, send)

    return app
