"""artemis-py's PEP 517 build backend: maturin's, with the web console built first.

pyproject.toml names it (``build-backend = "artemis_build"``, ``backend-path``), so
``pip install .``, ``pip install -e .``, ``pip wheel .`` and ``python -m build`` all build the
console (:mod:`artemis_build.console`: ``npm ci`` and esbuild into
``python/artemis_py/management/console_dist/``) and then hand over to maturin, which builds
the Rust extension and the wheel. ``[tool.maturin] include`` puts console_dist into wheels
(it is git-ignored, and maturin leaves git-ignored files out otherwise) and the console's
sources and this backend into sdists, so a wheel built from an sdist has the console too.

A wheel that should hold the console but does not is a build error, as is a console that
does not build; ``ARTEMIS_PY_BUILD_CONSOLE=0`` builds without it, with a warning.
"""

from __future__ import annotations

import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import maturin

from artemis_build import console

# Metadata and sdists need no console: maturin's hooks as they are.
build_sdist = maturin.build_sdist
get_requires_for_build_sdist = maturin.get_requires_for_build_sdist
prepare_metadata_for_build_wheel = maturin.prepare_metadata_for_build_wheel
prepare_metadata_for_build_editable = maturin.prepare_metadata_for_build_editable

# Where the console's index page stands inside a wheel.
WHEEL_INDEX = "artemis_py/management/console_dist/index.html"

Settings = Mapping[str, Any] | None


def get_requires_for_build_wheel(config_settings: Settings = None) -> list[str]:
    return [*maturin.get_requires_for_build_wheel(config_settings), *console.build_requirements()]


def get_requires_for_build_editable(config_settings: Settings = None) -> list[str]:
    return [
        *maturin.get_requires_for_build_editable(config_settings),
        *console.build_requirements(),
    ]


def _build_console() -> bool:
    """Builds the console for this build; False when the build is told to leave it out."""
    if not console.wanted():
        earlier = (console.DIST / "index.html").is_file()
        what = (
            f"the build carries the console built earlier in {console.DIST}, as it is"
            if earlier
            else "/console will answer 503 on a node installed from this build"
        )
        banner = "!" * 78
        print(
            f"{banner}\nWARNING: {console.SKIP_VARIABLE}=0: the web console is not built;\n"
            f"{what}.\n{banner}",
            file=sys.stderr,
            flush=True,
        )
        return False
    try:
        console.build()
    except console.ConsoleBuildError as error:
        print(f"error: artemis-py's web console did not build: {error}", file=sys.stderr)
        raise SystemExit(1) from error
    return True


def build_wheel(
    wheel_directory: str, config_settings: Settings = None, metadata_directory: str | None = None
) -> str:
    with_console = _build_console()
    name: str = maturin.build_wheel(wheel_directory, config_settings, metadata_directory)
    if with_console:
        with zipfile.ZipFile(Path(wheel_directory) / name) as wheel:
            if WHEEL_INDEX not in wheel.namelist():
                print(
                    f"error: {name} was built without {WHEEL_INDEX}: check [tool.maturin]"
                    " include in pyproject.toml",
                    file=sys.stderr,
                )
                raise SystemExit(1)
    return name


def build_editable(
    wheel_directory: str, config_settings: Settings = None, metadata_directory: str | None = None
) -> str:
    # An editable install serves console_dist from the source tree (python/ is on sys.path).
    _build_console()
    name: str = maturin.build_editable(wheel_directory, config_settings, metadata_directory)
    return name
