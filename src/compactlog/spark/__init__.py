"""compactlog on Apache Spark (the ``compactlog[spark]`` extra): Kafka-format logs as
DataFrames through a Python data source named ``compactlog``.

    from compactlog.spark import local_session, register
    spark = local_session()                     # or any SparkSession
    register(spark)
    df = spark.read.format("compactlog").load("data-dir")

See :mod:`compactlog.spark.source` for the schema and the options.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
    raise ImportError("compactlog.spark needs PySpark and pyarrow: pip install 'compactlog[spark]'")

from compactlog.spark.datasource import CompactlogDataSource, register
from compactlog.spark.session import local_session

__all__ = ["CompactlogDataSource", "local_session", "register"]
