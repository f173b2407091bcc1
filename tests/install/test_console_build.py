"""The console's part of the package build (tools/build_backend/artemis_build/console.py) and
the 503 page a node shows where the console is missing (artemis_py.management.console).

The build module is loaded from its file: the backend package imports maturin, which only
pip's build environment has. Node.js and npm are stand-in scripts on ``PATH`` here; the real
build is tests/install/test_install.py's (and test_console.py's).
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from artemis_py.management.console import console_app, not_built_page
from integration.conftest import ROOT


def _load_build_module() -> ModuleType:
    path = ROOT / "tools" / "build_backend" / "artemis_build" / "console.py"
    spec = importlib.util.spec_from_file_location("artemis_build_console", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


build = _load_build_module()


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout's console sources and console_dist, which the build module then uses."""
    console = tmp_path / "console"
    (console / "src").mkdir(parents=True)
    for name in ("package.json", "package-lock.json", "build.mjs", "src/main.jsx"):
        (console / name).write_text("{}\n")
    dist = tmp_path / "python" / "artemis_py" / "management" / "console_dist"
    monkeypatch.setattr(build, "CONSOLE", console)
    monkeypatch.setattr(build, "DIST", dist)
    monkeypatch.delenv(build.SKIP_VARIABLE, raising=False)
    return tmp_path


def _age(path: Path, seconds_ago: float) -> None:
    when = path.stat().st_mtime - seconds_ago
    os.utime(path, (when, when))


def _write_index(tree: Path) -> Path:
    dist = build.DIST
    dist.mkdir(parents=True, exist_ok=True)
    index = dist / "index.html"
    index.write_text("<!doctype html>\n")
    return index


def _tools(directory: Path, *, node_version: str, npm_exit: int = 0) -> Path:
    """Stand-ins for ``node`` (which says its version) and ``npm`` on a new PATH."""
    directory.mkdir(parents=True, exist_ok=True)
    scripts = {
        "node": f'#!/bin/sh\n[ "$1" = --version ] && echo {node_version} && exit 0\nexit 0\n',
        "npm": f"#!/bin/sh\nexit {npm_exit}\n",
    }
    for name, text in scripts.items():
        path = directory / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return directory


def test_up_to_date_only_while_the_output_is_newer_than_every_source(tree: Path) -> None:
    assert not build.up_to_date()  # never built
    index = _write_index(tree)
    for source in build.sources():
        _age(source, 60)
    assert build.up_to_date()
    (build.CONSOLE / "src" / "main.jsx").write_text("// changed\n")
    _age(index, 10)
    assert not build.up_to_date()
    index.touch()
    assert build.up_to_date()
    (build.CONSOLE / "src" / "main.jsx").unlink()  # a file gone: src/ has changed
    _age(index, 10)
    assert not build.up_to_date()


def test_nodejs_is_asked_for_only_where_the_machine_has_no_usable_one(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_tools(tree / "old", node_version="v16.20.0")))
    assert build.system_node() is None
    assert build.build_requirements() == [build.NODE_REQUIREMENT]

    monkeypatch.setenv("PATH", str(_tools(tree / "new", node_version="v20.11.1")))
    assert build.system_node() == [str(tree / "new" / "node"), str(tree / "new" / "npm")]
    assert build.build_requirements() == []

    monkeypatch.setenv("PATH", str(tree / "old"))
    _write_index(tree)
    for source in build.sources():
        _age(source, 60)
    assert build.build_requirements() == []  # built already: no Node.js needed


def test_building_without_the_console_needs_no_nodejs(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tree / "nothing"))
    monkeypatch.setenv(build.SKIP_VARIABLE, "0")
    assert not build.wanted()
    assert build.build_requirements() == []


def test_no_nodejs_is_an_error_that_says_what_to_install(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tree / "nothing"))
    monkeypatch.setattr(build, "wheel_node", lambda: None)
    with pytest.raises(build.ConsoleBuildError, match=r"needs Node\.js 18 or newer with npm"):
        build.build()


def test_a_failing_step_is_an_error_naming_it(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(_tools(tree / "bin", node_version="v20.1.0", npm_exit=3)))
    with pytest.raises(build.ConsoleBuildError, match=r"npm ci .* failed with exit status 3"):
        build.build()


def test_a_build_that_writes_no_page_is_an_error(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_tools(tree / "bin", node_version="v20.1.0")))
    with pytest.raises(build.ConsoleBuildError, match=r"wrote no .*index\.html"):
        build.build()


# -- the 503 page --------------------------------------------------------------------------


def test_a_source_checkout_is_told_to_run_console_build(tree: Path) -> None:
    (tree / "console" / "build.mjs").write_text("")
    page = not_built_page(build.DIST)
    assert "console/build</code> in " + str(tree) in page
    assert "pip install" not in page


def test_an_installed_package_is_told_to_install_again(tmp_path: Path) -> None:
    dist = tmp_path / "lib" / "python3.11" / "site-packages" / "artemis_py" / "management"
    page = not_built_page(dist / "console_dist")
    assert "built without its console" in page
    assert "pip install --force-reinstall ." in page
    assert "console/build" not in page


async def test_the_console_is_served_once_built_without_a_restart(tree: Path) -> None:
    transport = httpx.ASGITransport(app=console_app(build.DIST))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        missing = await client.get("/")
        assert missing.status_code == 503
        assert "console/build" in missing.text
        _write_index(tree)
        served = await client.get("/")
        assert served.status_code == 200
        assert served.text == "<!doctype html>\n"
