"""Spark sessions for tests, the demo and the benchmark on a small machine: local, or on
a standalone cluster (:mod:`sluice.spark.standalone`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

__all__ = ["build_local_session", "build_session"]

_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.driver.memory": "1g",
    "spark.python.worker.reuse": "true",
}


def build_local_session(app_name: str, cores: int, conf: Mapping[str, Any]) -> SparkSession:
    return build_session(f"local[{cores}]", app_name, cores, conf)


def build_session(
    master: str, app_name: str, shuffle_partitions: int, conf: Mapping[str, Any]
) -> SparkSession:
    """A session on ``master`` (``local[N]``, ``spark://host:port``) with the defaults
    above, ``conf`` applied last."""
    # the Python workers must run this interpreter: it has Sluice installed
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**_DEFAULTS, "spark.sql.shuffle.partitions": str(shuffle_partitions)}
    settings.update({k: str(v) for k, v in conf.items()})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
