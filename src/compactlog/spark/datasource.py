"""The ``compactlog`` format as Spark sees it: :class:`CompactlogDataSource`, which hands Spark
the batch reader (:mod:`compactlog.spark.source`), the stream reader
(:mod:`compactlog.spark.stream`) and the batch and stream writers (:mod:`compactlog.spark.sink`),
and :func:`register`, which makes the format known to a session.

The schema and the read options are described in :mod:`compactlog.spark.source`. Every option
name is checked (:mod:`compactlog.spark._options`): ``schema()``, which Spark calls at
``load()``, refuses a name no use of the format knows; the reader or writer then refuses one its
own use does not take.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from compactlog.errors import CompactlogError
from compactlog.spark._options import (
    ANY_USE,
    BATCH_WRITE,
    STREAM_WRITE,
    check_options,
    plain_errors,
)
from compactlog.spark.sink import LogStreamWriter, LogWriter
from compactlog.spark.source import BASE_SCHEMA, HEADERS_FIELD, NAME, LogReader, _flag, options_of
from compactlog.spark.stream import LogStreamReader, RefusedStreamReader


def register(spark: Any) -> None:
    """Register the ``compactlog`` format with ``spark``, once per session (registering it
    again makes Spark warn that the data source "replaced a previously registered" one)."""
    if getattr(spark, "_compactlog_registered", False):
        return
    spark.dataSource.register(CompactlogDataSource)
    spark._compactlog_registered = True


class CompactlogDataSource(DataSource):
    """``spark.read.format("compactlog")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return NAME

    @plain_errors
    def schema(self) -> str:
        options = options_of(self.options)
        check_options(options, ANY_USE, 'the "compactlog" format')
        if _flag(options, "includeHeaders", False):
            return f"{BASE_SCHEMA}, {HEADERS_FIELD}"
        return BASE_SCHEMA

    @plain_errors
    def reader(self, schema: StructType) -> DataSourceReader:
        return LogReader(options_of(self.options), "headers" in schema.fieldNames())

    @plain_errors
    def streamReader(self, schema: StructType) -> Any:  # noqa: N802 - Spark's name
        try:
            return LogStreamReader(options_of(self.options), "headers" in schema.fieldNames())
        except CompactlogError as exc:
            # PySpark 4.3's stream runner calls stop() on the reader in a ``finally`` even when
            # creating it failed, and reports the UnboundLocalError that follows along with
            # this error; a reader that raises it from its first call avoids that.
            return RefusedStreamReader(exc)

    @plain_errors
    def writer(self, schema: StructType, overwrite: bool) -> Any:
        options = options_of(self.options)
        check_options(options, BATCH_WRITE, "a batch write")
        return LogWriter(options, schema, overwrite)

    @plain_errors
    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:  # noqa: N802 - Spark's
        options = options_of(self.options)
        check_options(options, STREAM_WRITE, "a streaming write")
        return LogStreamWriter(options, schema, overwrite)
