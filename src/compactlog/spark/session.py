"""A local Spark session set up the way this machine's pitfalls require (see the README).

Python workers must run the driver's interpreter (Spark otherwise starts ``python3`` from
``PATH``, where compactlog and pyarrow may be missing); the driver binds to loopback; the console
progress bar, which rewrites lines with carriage returns, is off.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(
    master: str = "local[*]",
    app_name: str = "compactlog",
    *,
    driver_memory: str = "2g",
    shuffle_partitions: int = 8,
    conf: dict[str, str] | None = None,
) -> Any:
    """A ``SparkSession`` on ``master`` with compactlog's data source registered.

    Settings that must precede the JVM (driver memory, the Python executable) only take effect
    when no session is running yet in this process.
    """
    from pyspark.sql import SparkSession  # noqa: PLC0415 - the extra is optional

    from compactlog.spark.datasource import register  # noqa: PLC0415

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.pyspark.binaryAsBytes", "true")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
