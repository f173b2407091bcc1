"""``/console``: the web console's built files (docs/management.md "Console").

The console is built from ``console/`` in the repository into :data:`CONSOLE_DIST` (never
committed) as part of building the package (``pip install .`` builds it into the wheel;
``pip install -e .`` and ``console/build`` into the source tree). Its files are served as
they are, ``index.html`` for the directory. Where it is missing, ``/console`` answers 503
with a page saying how to get it for the way the package was installed: from a source
checkout, run ``console/build``; an installed package built without it must be installed
again. The directory is looked up at each request, so a console built while the node runs
is served without a restart.
"""

from __future__ import annotations

import html
from pathlib import Path

from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

CONSOLE_DIST = Path(__file__).parent / "console_dist"

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>artemis-py console</title></head>
<body><h1>The console is not built</h1>
<p>{advice}</p>
<p>The JSON API under <a href="/api/node">/api/</a> and <a href="/metrics">/metrics</a>
work without it.</p></body></html>
"""


def source_checkout(directory: Path) -> Path | None:
    """The repository whose ``python/`` the package runs from (an editable install), or None.

    ``directory`` is ``REPO/python/artemis_py/management/console_dist`` there.
    """
    if len(directory.parents) < 4:
        return None
    root = directory.parents[3]
    return root if (root / "console" / "build.mjs").is_file() else None


def not_built_page(directory: Path) -> str:
    """The 503 page: how to get the console, for the way this package was installed."""
    checkout = source_checkout(directory)
    if checkout is not None:
        repo = html.escape(str(checkout))
        advice = (
            f"This node runs from the source checkout {repo} (an editable install), whose"
            f" console has not been built: run <code>console/build</code> in {repo} (it needs"
            " Node.js 18 or newer with npm), then reload this page."
        )
    else:
        advice = (
            "This installation of artemis-py was built without its console (its build was"
            " told to leave it out with ARTEMIS_PY_BUILD_CONSOLE=0, or was not made by"
            " artemis-py's own build backend). Install the package again from the artemis-py"
            " repository or its source distribution, without ARTEMIS_PY_BUILD_CONSOLE=0:"
            " <code>pip install --force-reinstall .</code> builds the console into it."
        )
    return PAGE.format(advice=advice)


def console_app(directory: Path = CONSOLE_DIST) -> ASGIApp:
    static: StaticFiles | None = None

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal static
        if not (directory / "index.html").is_file():
            page = not_built_page(directory)
            await HTMLResponse(page, status_code=503)(scope, receive, send)
            return
        if static is None:
            static = StaticFiles(directory=directory, html=True)
        await static(scope, receive, send)

    return app
