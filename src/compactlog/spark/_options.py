"""What a Spark user meets first: the option names the ``compactlog`` source and sink take, the
check that refuses any other name, and the shape errors take on their way back to the user.

Spark lower-cases option names before a Python data source sees them (``subscrbe`` arrives as
``subscrbe``, ``startingOffsets`` as ``startingoffsets``), so names are compared lower-cased and
messages give the canonical spelling.

Options of Spark's Kafka source that make no sense for files (``kafka.*``, consumer groups,
polling) or that compactlog does not implement are refused with the reason, rather than
silently ignored: a read that quietly ignores ``subscrbe`` reads every topic.
"""

from __future__ import annotations

import difflib
import functools
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from compactlog.errors import CompactlogError, ConfigError
from compactlog.spark.remote_fs import fs_options

_COMMON_READ = (
    "path",
    "assign",
    "subscribe",
    "subscribePattern",
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "includeHeaders",
    "maxBytesPerSplit",
)
#: ``spark.read.format("compactlog")``
BATCH_READ = (
    *_COMMON_READ,
    "endingOffsets",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "minPartitions",
    "maxRecordsPerPartition",
)
#: ``spark.readStream.format("compactlog")``
STREAM_READ = (*_COMMON_READ, "maxOffsetsPerTrigger")
#: ``df.write.format("compactlog")``
BATCH_WRITE = ("path", "topic", "compression")
#: ``df.writeStream.format("compactlog")`` (Spark passes ``checkpointLocation`` on)
STREAM_WRITE = (*BATCH_WRITE, "sinkId", "checkpointLocation")
#: Every name any of them takes: what ``DataSource.schema`` can check before it knows the use.
ANY_USE = tuple(dict.fromkeys((*BATCH_READ, *STREAM_READ, *STREAM_WRITE)))

#: The uses that take the storage options (``fs.*``: :mod:`compactlog.spark.remote_fs`).
_STORAGE_USES = ("a batch read", "a streaming read", 'the "compactlog" format')

_NO_END = "a stream has no end"
#: Names valid elsewhere (or in Spark's Kafka source) with the reason they are refused here.
_REFUSED: dict[str, dict[str, str]] = {
    "a streaming read": {
        "endingOffsets": _NO_END,
        "endingTimestamp": _NO_END,
        "endingOffsetsByTimestamp": _NO_END,
        "minPartitions": "a micro-batch is split by maxBytesPerSplit only",
        "maxRecordsPerPartition": "a micro-batch is split by maxBytesPerSplit only",
    },
    "a batch read": {
        "maxOffsetsPerTrigger": "it limits the micro-batches of a streaming read",
    },
}
_SPARK_KAFKA_ONLY = {
    "groupIdPrefix": "no consumer group reads the files",
    "kafkaConsumer.pollTimeoutMs": "nothing is polled from a broker",
    "fetchOffset.numRetries": "offsets come from the files, not from a broker",
    "fetchOffset.retryIntervalMs": "offsets come from the files, not from a broker",
    "minOffsetsPerTrigger": "not implemented by compactlog",
    "maxTriggerDelay": "not implemented by compactlog",
}


def check_options(options: Mapping[str, Any], known: Iterable[str], use: str) -> None:
    """Refuse the first option of ``options`` that is not one of ``known`` for ``use`` ("a
    batch read", ...), naming it and the closest known name."""
    canonical = {name.lower(): name for name in known}
    refused = {k.lower(): (k, why) for k, why in _REFUSED.get(use, {}).items()}
    spark_only = {k.lower(): (k, why) for k, why in _SPARK_KAFKA_ONLY.items()}
    for key in sorted(options):
        name = str(key).lower()
        if name in canonical:
            continue
        if name.startswith("fs.") and use in _STORAGE_USES:
            fs_options({key: options[key]})  # refuses an unknown fs.* name
            continue
        if name in refused:
            shown, why = refused[name]
            raise ConfigError(f"option {shown} is not valid for {use} ({why})")
        if name in spark_only:
            shown, why = spark_only[name]
            raise ConfigError(
                f"option {shown} of Spark's Kafka source is not supported by compactlog ({why})"
            )
        if name.startswith("kafka."):
            raise ConfigError(
                f"option {key} is refused: compactlog reads and writes a data directory's files, "
                "not a broker, so there is no Kafka client to configure"
            )
        close = difflib.get_close_matches(name, list(canonical), n=1, cutoff=0.6)
        hint = f" (did you mean {canonical[close[0]]}?)" if close else ""
        raise ConfigError(
            f"unknown option {key} for {use}{hint}; the options are: "
            + ", ".join(n for n in canonical.values() if n != "path")
        )


# --- errors on their way to the user ---------------------------------------------------------

F = TypeVar("F", bound=Callable[..., Any])
#: Set to 1 to get compactlog's errors from Spark with their Python traceback.
TRACEBACK_ENV = "COMPACTLOG_SPARK_TRACEBACK"


def plain_errors(func: F) -> F:
    """Let a :class:`CompactlogError` raised inside a Spark Python worker reach the user as its
    one line (``compactlog.errors.SinkError: ...``) instead of a traceback through compactlog's
    and PySpark's frames.

    PySpark formats a worker's error with ``traceback.format_exception_only`` when
    ``SPARK_HIDE_TRACEBACK`` is set (the conf ``spark.sql.execution.pyspark.udf.hideTraceback
    .enabled``); a worker exits after reporting an error, so setting it there, for this error,
    changes nothing else. Outside a Spark worker (a test calling a reader directly) nothing is
    changed. ``COMPACTLOG_SPARK_TRACEBACK=1`` keeps the traceback.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except CompactlogError:
            _hide_traceback()
            raise

    return wrapper  # type: ignore[return-value]


def plain_error_generator(func: F) -> F:
    """:func:`plain_errors` for a generator function (``read``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            yield from func(*args, **kwargs)
        except CompactlogError:
            _hide_traceback()
            raise

    return wrapper  # type: ignore[return-value]


def _hide_traceback() -> None:
    if os.environ.get(TRACEBACK_ENV) or not in_spark_worker():
        return
    os.environ["SPARK_HIDE_TRACEBACK"] = "1"


def in_spark_worker() -> bool:
    """Whether this process is one of Spark's Python workers (forked by ``pyspark.daemon`` or
    started as ``python -m pyspark.worker``/``pyspark.sql.worker.*``)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return str(getattr(spec, "name", "")).startswith("pyspark.")
