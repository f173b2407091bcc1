"""Run one fuzz target under atheris (coverage-guided, libFuzzer's engine).

    python tests/fuzz/main.py TARGET [libFuzzer arguments and corpus directories]

TARGET is a name from :data:`targets.TARGETS`. Give a scratch directory first (libFuzzer
writes the new inputs it finds there) and the committed seeds after it, e.g.::

    python tests/fuzz/main.py stomp_server /tmp/stomp_server fuzz/corpus/stomp_server \\
        -max_total_time=300 -artifact_prefix=/tmp/

A failing input is written as ``crash-<sha1>`` (under ``-artifact_prefix``); copy it to
``fuzz/regressions/TARGET/`` and ``tests/fuzz/test_fuzz_short.py`` replays it from then on.
See docs/fuzzing.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # tests/: the oracle package

# Coverage feedback comes from the codecs' bytecode, instrumented as they are imported (the
# Rust STOMP codec has none to give: cargo-fuzz covers it, see docs/fuzzing.md).
with atheris.instrument_imports(include=["artemis_py.protocol", "oracle"]):
    import targets


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in targets.TARGETS:
        sys.exit(
            f"usage: {sys.argv[0]} TARGET [libFuzzer args]; TARGET: {', '.join(targets.TARGETS)}"
        )
    target = targets.TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
