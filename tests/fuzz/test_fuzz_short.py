"""The fuzz targets in CI: replay every committed input, then a short coverage-guided run.

* Replay: every file under ``fuzz/corpus/<target>/`` (seeds and what longer runs kept) and
  ``fuzz/regressions/<target>/`` (inputs that once failed a target, now fixed) goes through
  its target in-process: a regression comes back as a plain test failure.
* Short run: each target under atheris for a few seconds in a subprocess (libFuzzer exits
  the process when it ends), from the committed corpus; a crash fails the test and the
  failing input is named in the output.

The longer runs, and the Rust targets, are in docs/fuzzing.md (the Rust corpus and
regressions are replayed by ``cargo test`` in rust/fuzzing).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
MAIN = Path(__file__).resolve().parent / "main.py"
SECONDS = 4  # per target: 6 targets, about 30 s of CI time with start-up


def _inputs(target: str) -> list[Path]:
    return sorted(
        path
        for kind in ("corpus", "regressions")
        for path in (ROOT / "fuzz" / kind / target).glob("*")
        if path.is_file()
    )


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_replay_corpus_and_regressions(target: str) -> None:
    inputs = _inputs(target)
    assert inputs, f"no committed inputs for {target}"
    for path in inputs:
        try:
            TARGETS[target](path.read_bytes())
        except BaseException as exc:
            raise AssertionError(f"{path.relative_to(ROOT)} fails {target}: {exc!r}") from exc


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_short_fuzz_run(target: str, tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    scratch = tmp_path / "corpus"
    scratch.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            str(MAIN),
            target,
            str(scratch),
            str(ROOT / "fuzz" / "corpus" / target),
            f"-max_total_time={SECONDS}",
            f"-artifact_prefix={tmp_path}/",
            "-rss_limit_mb=1024",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    crashes = [p.name for p in tmp_path.iterdir() if p.name != "corpus"]
    found = (
        f"{target}: fuzzing found a failing input ({crashes}); add it to "
        f"fuzz/regressions/{target}/ and fix it:\n{result.stderr[-4000:]}"
    )
    assert result.returncode == 0, found
    assert not crashes, found
