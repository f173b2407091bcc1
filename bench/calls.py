"""Python calls per message on the node's event loop, commit by commit (scenario 2's load).

    python bench/calls.py c4d4366 9ce5272 f0922f4 HEAD

A count, not a time: it holds on a busy machine, where paired timings do not, so it can
tell what each commit added to the plain path. For each commit, ``git archive`` puts its
``python/`` and ``etc/`` in a temporary directory, with this tree's native module copied in
(the commits must have HEAD's Rust code: the script checks that their ``rust/`` is HEAD's). A
node runs ``etc/broker.xml`` from there with cProfile switched on from the 4th to the 14th
second of an 18 s ``perf --producers 16 --consumers 4 --max-pending 8``, and the calls
counted are divided by the SENDs the session handled (``_on_send``). Runs of one tree differ
by about ±0.5 calls on a steady machine and up to ±2 between a quiet and a loaded one (the
loop's batches change size): compare commits measured in one go.
"""

from __future__ import annotations

import argparse
import os
import pstats
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORT = 62613  # (not the default 61613: a node or test of the developer's may be there)
PROFILE_FROM, PROFILE_FOR, LOAD_FOR = 4.0, 10.0, 18
# Run inside the node: cProfile on at SIGUSR1, dumped to $CALLS_OUT at SIGUSR2.
SITECUSTOMIZE = """
import cProfile, os, signal
_profile = cProfile.Profile()
signal.signal(signal.SIGUSR1, lambda *_: _profile.enable())
def _dump(*_):
    _profile.disable()
    _profile.dump_stats(os.environ["CALLS_OUT"])
signal.signal(signal.SIGUSR2, _dump)
"""
LOAD = ["--producers", "16", "--consumers", "4", "--max-pending", "8"]
LOAD += ["--duration", str(LOAD_FOR), "--warmup", "1", "--quiet"]
CLI = "import sys; from artemis_py.cli import main; sys.exit(main())"


def checkout(commit: str, into: Path) -> Path:
    """``commit``'s python/ and etc/ under ``into``, with this tree's native module."""
    tree = into / commit
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "python", "etc"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    native = next((ROOT / "python" / "artemis_py").glob("_native*.so"))
    shutil.copy(native, tree / "python" / "artemis_py" / native.name)
    return tree


def wait_listening(port: int, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"no node listening on {port} after {seconds} s")


def calls_per_message(tree: Path, work: Path) -> tuple[float, int]:
    """(calls per SEND, SENDs profiled) for the node of ``tree``."""
    (work / "sitecustomize.py").write_text(SITECUSTOMIZE)
    out = work / f"{tree.name}.prof"
    env = dict(os.environ, STOMP_PORT=str(PORT), CORE_PORT=str(PORT + 3), CALLS_OUT=str(out))
    env["PYTHONPATH"] = f"{work}{os.pathsep}{tree / 'python'}"
    data = work / f"{tree.name}-node"
    data.mkdir()
    shutil.copy(tree / "etc" / "broker.xml", data / "broker.xml")
    node = subprocess.Popen(
        [sys.executable, "-c", CLI, "run", str(data / "broker.xml")],
        cwd=data,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(PORT)
        load = subprocess.Popen(
            [sys.executable, "-c", CLI, "perf", "--url", f"tcp://127.0.0.1:{PORT}", *LOAD],
            env=dict(os.environ, PYTHONPATH=str(tree / "python")),
            stdout=subprocess.DEVNULL,
        )
        time.sleep(PROFILE_FROM)
        node.send_signal(signal.SIGUSR1)
        time.sleep(PROFILE_FOR)
        node.send_signal(signal.SIGUSR2)
        load.wait()
    finally:
        node.terminate()
        node.wait()
    stats = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    calls = sum(v[1] for v in stats.values())
    sends = sum(v[1] for k, v in stats.items() if k[2] == "_on_send")
    return calls / max(sends, 1), sends


def same_rust(commits: list[str]) -> None:
    trees = {
        subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", f"{c}:rust"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        for c in [*commits, "HEAD"]
    }
    if len(trees) > 1:
        raise SystemExit(
            "the commits differ in rust/ from each other or from HEAD: this tree's native "
            "module cannot serve them all"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commits", nargs="+", help="commits to measure, in order")
    args = parser.parse_args()
    same_rust(args.commits)
    print("| commit | calls / msg | SENDs profiled |\n|---|--:|--:|")
    with tempfile.TemporaryDirectory() as tmp:
        for commit in args.commits:
            tree = checkout(commit, Path(tmp))
            calls, sends = calls_per_message(tree, Path(tmp))
            print(f"| `{commit}` | {calls:.1f} | {sends:,} |", flush=True)


if __name__ == "__main__":
    main()
