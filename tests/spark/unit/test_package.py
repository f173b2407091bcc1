"""``artemis_py.spark`` imports no pyspark until used, and says what to install."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import artemis_py.spark
from artemis_py.spark import MissingDependencyError, register, require_spark


def test_importing_the_package_imports_neither_pyspark_nor_pyarrow() -> None:
    code = (
        "import sys, artemis_py.spark, artemis_py.spark.options, artemis_py.spark.planning, "
        "artemis_py.spark.schema, artemis_py.spark.sink_rules\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow', 'py4j')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def fake_pyspark(monkeypatch: pytest.MonkeyPatch, *, version: str, datasource: bool) -> None:
    pyspark = types.ModuleType("pyspark")
    pyspark.__version__ = version  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyspark", pyspark)
    monkeypatch.setitem(sys.modules, "pyspark.sql", types.ModuleType("pyspark.sql"))
    module = types.ModuleType("pyspark.sql.datasource") if datasource else None
    monkeypatch.setitem(sys.modules, "pyspark.sql.datasource", module)


def message_of(monkeypatch: pytest.MonkeyPatch) -> str:
    with pytest.raises(MissingDependencyError) as info:
        register(object())
    assert isinstance(info.value, ImportError)
    assert info.value.__suppress_context__  # no chained traceback of the ImportError
    with pytest.raises(MissingDependencyError):
        artemis_py.spark.ArtemisDataSource  # noqa: B018
    return str(info.value)


def test_without_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    assert message_of(monkeypatch) == "pyspark is not installed: install artemis-py[spark]"


def test_pyspark_older_than_4(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_pyspark(monkeypatch, version="3.5.3", datasource=False)
    assert message_of(monkeypatch) == (
        "pyspark 3.5.3 has no Python data sources (4.0 or newer needed): install artemis-py[spark]"
    )


def test_without_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_pyspark(monkeypatch, version="4.3.0", datasource=True)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert message_of(monkeypatch) == "pyarrow is not installed: install artemis-py[spark]"


def test_with_everything_installed_the_check_passes() -> None:
    pytest.importorskip("pyspark.sql.datasource")
    pytest.importorskip("pyarrow")
    require_spark()


def test_unknown_attribute() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        artemis_py.spark.nope  # noqa: B018
