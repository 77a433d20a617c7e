"""The ``compactlog`` format as Spark sees it: :class:`CompactlogDataSource`, which hands Spark
the batch reader (:mod:`compactlog.spark.source`), the stream reader
(:mod:`compactlog.spark.stream`) and the batch and stream writers (:mod:`compactlog.spark.sink`),
and :func:`register`, which makes the format known to a session.

The schema and the read options are described in :mod:`compactlog.spark.source`.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from compactlog.spark.sink import LogStreamWriter, LogWriter
from compactlog.spark.source import BASE_SCHEMA, HEADERS_FIELD, NAME, LogReader, _flag, options_of
from compactlog.spark.stream import LogStreamReader


def register(spark: Any) -> None:
    """Register the ``compactlog`` format with ``spark`` (once per session is enough)."""
    spark.dataSource.register(CompactlogDataSource)


class CompactlogDataSource(DataSource):
    """``spark.read.format("compactlog")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        if _flag(options_of(self.options), "includeHeaders", False):
            return f"{BASE_SCHEMA}, {HEADERS_FIELD}"
        return BASE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return LogReader(options_of(self.options), "headers" in schema.fieldNames())

    def streamReader(self, schema: StructType) -> Any:  # noqa: N802 - Spark's name
        return LogStreamReader(options_of(self.options), "headers" in schema.fieldNames())

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        return LogWriter(options_of(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:  # noqa: N802 - Spark's
        return LogStreamWriter(options_of(self.options), schema, overwrite)
