"""The local SparkSession the tests use, in the test process and in a driver subprocess.

``local[2]`` (two task slots, as on CI's two cores), no UI, the loopback only, two shuffle
partitions (the default 200 makes small tests slow), UTC, Python workers run by this
interpreter (``PYSPARK_PYTHON``, so they import the artemis_py under test), and the
``artemis`` format registered. Starting one costs ~4 s (JVM start).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(name: str) -> Any:
    """A started SparkSession named ``name``; sets ``PYSPARK_PYTHON`` in this process."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from artemis_py.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName(name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
