"""The Spark test harness: one SparkSession for the whole test session.

Tests that need pyspark and a JVM are marked ``spark`` (``pytestmark = pytest.mark.spark``)
and take the ``spark`` fixture; they are skipped when Java is missing, left out of the
collection when pyspark is (they cannot be imported), and ``-m "not spark"`` leaves them
out. ``tests/spark/unit/`` needs neither and always runs.

The session (see :mod:`.session` for its settings) costs ~4 s to start (JVM start), once.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cluster.conftest import cluster  # noqa: F401 - a fixture the end-to-end tests use

from .session import local_session


def _spark_missing() -> str | None:
    """Why the Spark tests cannot run here, or None."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install -e '.[spark]')"
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        return "no Java (pyspark needs Java 17 or newer)"
    return None


# Without pyspark the modules beside this file cannot even be imported (the connector's
# readers and writers subclass pyspark's): leave them out; tests/spark/unit/ still runs.
collect_ignore_glob = ["test_*.py"] if importlib.util.find_spec("pyspark") is None else []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _spark_missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":  # CI must run them: .ci/run installs what they need
        raise pytest.UsageError(f"the Spark tests cannot run: {reason}")
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker("spark") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the test session, with the ``artemis`` format registered."""
    old_python = os.environ.get("PYSPARK_PYTHON")
    started = time.monotonic()
    session = local_session("artemis-py tests")
    # Shown with `pytest -s`: the session start is the harness's fixed cost.
    print(f"\nSparkSession {session.version} started in {time.monotonic() - started:.1f}s")
    try:
        yield session
    finally:
        session.stop()
        if old_python is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = old_python
