"""Per-partition compaction report: what the records are, and what Kafka's cleaner would see.

    spark = local_session()
    reports = partition_report(spark, "data-dir", "orders")
    print_report(reports)
    write_chart(reports, "after.png", before=read_json("before.json"))

One row per topic-partition (:class:`PartitionReport`). Record figures come from Spark over the
``compactlog`` source (control batches excluded, as a consumer sees the log):

* ``records``; ``keyless`` records (null key; only a non-compacted topic can hold them);
* ``distinct_keys``: distinct non-null keys, exact (``count(DISTINCT key)``, never an estimate);
* ``superseded``: records that are not the latest of their key, i.e. have a later record with the
  same key. Offsets are unique within a partition, so each key has exactly one latest record and
  ``superseded = keyed records - distinct keys``; ``records = distinct_keys + superseded +
  keyless``;
* ``tombstones``: keyed records with a null value (superseded ones included);
* ``last_gap`` (:class:`OffsetGap`): seed 000's "last compaction", the last place in the
  offsets where a record is missing (the gap before the first record, from the log start
  offset, included), with the timestamp of the record after it and the records after that
  (contiguous). Compaction leaves gaps all through the range it cleaned, so the last gap is a
  lower bound of where the cleaner last reached, seen from outside (a consumer sees the same);
  the cleaner's own answer, from its checkpoint, is ``first_dirty_offset``, shown beside it.

File figures come from the data directory on the driver, without opening a store: its lock may
be held by a broker or the CLI, and opening would recover the logs.
:mod:`compactlog.storage.readonly` loads the logs read-only, and the cleaner manager's
:func:`~compactlog.cleaner.manager.log_to_clean` computes, as for the next cleaning at ``now``:

* ``bytes``: all ``.log`` segment file bytes of the partition;
* ``first_dirty_offset``: the partition's ``cleaner-offset-checkpoint`` entry (the log start
  offset without one, or when it lies outside the log), and the ``first_uncleanable_offset``;
* ``dirty_ratio``: Kafka's ``cleanable / (clean + cleanable)`` bytes, with
  ``clean_bytes``/``cleanable_bytes`` as the manager counts them (the active segment in neither);
* ``dirty_keys``: distinct keys of the cleanable range ``[first dirty, first uncleanable)``;
  ``passes_needed``: the cleanings Kafka's cleaner needs for that range with maps of
  ``keys_per_pass`` keys (:func:`~compactlog.cleaner.explain.keys_per_pass` for
  ``log.cleaner.dedupe.buffer.size``), as ``cleaner-status`` computes them (0 for a topic that
  is not compacted: the cleaner never maps it). ``ceil(dirty_keys / keys_per_pass)`` is only a
  lower bound, since a key that recurs after a pass boundary is mapped again; where it is more
  than 1, :func:`replay_passes` replays the passes, with two more Spark jobs per pass.

Spark work: one job over the ``compactlog`` source, pinned to the log end offsets seen on the
driver (records appended meanwhile count nowhere). A ``mapInArrow`` on the scan passes the
records through and adds, per task, a summary of the run of records it read (:mod:`._gaps`);
one aggregation grouped by topic and partition then counts, counts distinct keys exactly (which
makes Spark shuffle by key, so one large partition still spreads over many tasks) and collects
the run summaries, which the driver joins in offset order into the last gap.

Output: :func:`render_table`/:func:`print_report` (``rich``), :func:`write_chart` (PNG, see
:mod:`._report_chart`), :func:`write_json`/:func:`read_json` (a "before" kept for a later
chart).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from compactlog.cleaner.explain import format_ms, keys_per_pass
from compactlog.cleaner.manager import log_to_clean
from compactlog.errors import (
    ConfigError,
    ReportFileError,
    UnknownTopicOrPartitionError,
)
from compactlog.spark._gaps import (
    PIECE_COLUMNS,
    OffsetGap,
    Piece,
    gaps_by_window,
    join_pieces,
    track_pieces,
)
from compactlog.spark._partition_report import PartitionReport
from compactlog.spark._report_chart import write_chart
from compactlog.spark.datasource import register
from compactlog.spark.remote_fs import configure, filesystem, fs_options, is_uri
from compactlog.spark.source import log_reader
from compactlog.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT
from compactlog.storage.config import BrokerConfig, LogConfig
from compactlog.storage.readonly import read_checkpoint, read_only_log, read_topics
from compactlog.storage.store import system_clock

TopicPartition = tuple[str, int]

#: The version written into report JSON files. Version 1 had ``largest_gap`` (the largest gap,
#: a different figure) where version 2 has ``last_gap``; reading one gives ``last_gap`` None.
JSON_VERSION = 2
_READABLE_VERSIONS = (1, 2)


# --------------------------------------------------------------------------------------------
# The report


def partition_report(
    spark: Any,
    data_dir: str | os.PathLike[str],
    topic: str | None = None,
    *,
    dedupe_buffer_size: int | None = None,
    config: Mapping[str, Any] | None = None,
    now: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> list[PartitionReport]:
    """Every partition of ``topic`` (default: of every topic) in ``data_dir``, by topic and
    partition.

    ``dedupe_buffer_size``: ``log.cleaner.dedupe.buffer.size`` for ``passes_needed`` (default:
    the one in ``config``, else Kafka's 128 MiB). ``config``: broker settings by Kafka's names,
    as for :meth:`Store.open <compactlog.storage.store.Store.open>` (topic defaults such as
    ``log.cleaner.min.cleanable.ratio``, ``log.cleaner.threads``). ``now`` (epoch ms, default
    the wall clock) is the time of the next cleaning (``min.compaction.lag.ms``).
    ``data_dir`` may be an ``s3://``, ``hdfs://`` or ``file://`` URI, read with the ``fs.*``
    ``storage_options`` (see :mod:`compactlog.spark.remote_fs`), on the driver and executors.

    Raises :class:`~compactlog.errors.UnknownTopicOrPartitionError` for a topic the directory
    does not have and :class:`~compactlog.errors.StorageError` for a missing directory.
    """
    path = os.fspath(data_dir)
    storage = fs_options(storage_options or {})
    if is_uri(path):
        configure(path, storage)
    else:
        path = os.path.abspath(path)
    settings = dict(config or {})
    if dedupe_buffer_size is not None:
        settings["log.cleaner.dedupe.buffer.size"] = dedupe_buffer_size
    broker = BrokerConfig.from_dict(settings)
    per_pass = keys_per_pass(broker)
    if per_pass < 1:
        raise ConfigError("the cleaner's dedupe buffer holds no key at this load factor")
    files = _file_figures(path, topic, broker, system_clock() if now is None else now)
    if not files:
        return []
    register(spark)
    records = _read(spark, path, files, storage)
    stats, pieces = _aggregate(spark, records, files)
    log_starts = {(f.topic, f.partition): f.log_start_offset for f in files}
    gaps = join_pieces(pieces, log_starts)
    if gaps is None:  # pieces that cannot be joined (see _gaps): one more job, with a sort
        rows = records.select("topic", "partition", "offset", "timestamp")
        gaps = gaps_by_window(rows, log_starts)
    reports = []
    for f in files:
        tp = (f.topic, f.partition)
        s = stats.get(tp, _RecordStats())
        passes = math.ceil(s.dirty_keys / per_pass)
        if passes > 1:  # a lower bound: keys may recur after a pass boundary
            passes = replay_passes(spark, path, files, f, per_pass, storage)
        reports.append(
            PartitionReport(
                topic=f.topic,
                partition=f.partition,
                cleanup_policy=f.cleanup_policy,
                records=s.records,
                bytes=f.bytes,
                distinct_keys=s.distinct_keys,
                superseded=s.keyed - s.distinct_keys,
                tombstones=s.tombstones,
                keyless=s.records - s.keyed,
                log_start_offset=f.log_start_offset,
                log_end_offset=f.log_end_offset,
                first_dirty_offset=f.first_dirty_offset,
                first_uncleanable_offset=f.first_uncleanable_offset,
                clean_bytes=f.clean_bytes,
                cleanable_bytes=f.cleanable_bytes,
                dirty_ratio=f.dirty_ratio,
                min_cleanable_dirty_ratio=f.min_cleanable_dirty_ratio,
                dirty_keys=s.dirty_keys,
                keys_per_pass=per_pass,
                passes_needed=passes,
                last_gap=gaps.get(tp),
            )
        )
    return reports


def replay_passes(
    spark: Any,
    data_dir: str,
    files: Sequence[_FileFigures],
    f: _FileFigures,
    per_pass: int,
    storage: Mapping[str, str] | None = None,
) -> int:
    """The cleanings Kafka's cleaner needs for ``f``'s dirty range with maps of ``per_pass``
    keys, replayed a pass at a time (spec 5.2). A pass starting at offset ``start`` puts the
    first occurrence at or after ``start`` of each key; it holds ``per_pass`` keys once it has
    put the ``per_pass``-th smallest of those first offsets, and the next keyed record finds it
    full: the next pass starts there. One aggregation and one sort per pass, each over the rest
    of the range only."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark's own idiom

    passes, start = 0, f.first_dirty_offset
    while start < f.first_uncleanable_offset:
        passes += 1
        keyed = _range(spark, data_dir, files, f, start, storage).where(F.col("key").isNotNull())
        firsts = keyed.groupBy("key").agg(F.min("offset").alias("first"))
        full = firsts.orderBy("first").offset(per_pass - 1).limit(1).collect()
        if not full:
            break  # the rest of the range fits this pass's map
        after = keyed.where(F.col("offset") > full[0]["first"]).agg(F.min("offset")).collect()
        if after[0][0] is None:
            break  # nothing keyed after the map filled: nothing for another pass
        start = int(after[0][0])
    return passes


def _range(
    spark: Any,
    data_dir: str,
    files: Sequence[_FileFigures],
    f: _FileFigures,
    start: int,
    storage: Mapping[str, str] | None = None,
) -> Any:
    """The records of ``f``'s partition in ``[start, first uncleanable)``, and nothing of the
    topic's other partitions (empty ranges at their log end)."""
    starting = {str(o.partition): o.log_end_offset for o in files if o.topic == f.topic}
    ending = dict(starting)
    starting[str(f.partition)], ending[str(f.partition)] = start, f.first_uncleanable_offset
    return (
        log_reader(spark)
        .options(**dict(storage or {}))
        .option("subscribe", f.topic)
        .option("startingOffsets", json.dumps({f.topic: starting}))
        .option("endingOffsets", json.dumps({f.topic: ending}))
        .load(data_dir)
    )


# --------------------------------------------------------------------------------------------
# File figures (driver, read-only)


@dataclass(frozen=True)
class _FileFigures:
    topic: str
    partition: int
    cleanup_policy: str
    compacted: bool
    min_cleanable_dirty_ratio: float
    log_start_offset: int
    log_end_offset: int
    bytes: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    dirty_ratio: float


def _policy(config: LogConfig) -> str:
    return ",".join(p for p, on in (("compact", config.compact), ("delete", config.delete)) if on)


def _file_figures(
    data_dir: str, topic: str | None, broker: BrokerConfig, now: int
) -> list[_FileFigures]:
    fs = filesystem(data_dir)
    topics = read_topics(data_dir, broker, fs)
    if topic is not None:
        if topic not in topics:
            known = ", ".join(sorted(topics)) or "none"
            raise UnknownTopicOrPartitionError(
                f"unknown topic {topic!r} in {data_dir} (its topics: {known})"
            )
        topics = {topic: topics[topic]}
    log_starts = read_checkpoint(data_dir, LOG_START_OFFSET_CHECKPOINT, fs)
    cleaner_checkpoints = read_checkpoint(data_dir, CLEANER_OFFSET_CHECKPOINT, fs)
    figures = []
    for name, entry in sorted(topics.items()):
        config = entry.config
        for partition in range(entry.partitions):
            tp = (name, partition)
            opened = read_only_log(data_dir, name, partition, config, log_starts.get(tp), now, fs)
            with opened as log:
                if log is None:  # no segment yet: the store would create an empty one
                    start = end = fdo = fuo = log_starts.get(tp, 0)
                    size = clean = cleanable = 0
                    ratio = 0.0
                else:
                    c = log_to_clean(tp, log, cleaner_checkpoints.get(tp), now)
                    start, end, size = log.log_start_offset, log.log_end_offset, log.size()
                    fdo, fuo = c.first_dirty_offset, c.first_uncleanable_offset
                    clean, cleanable, ratio = c.clean_bytes, c.cleanable_bytes, c.cleanable_ratio
            figures.append(
                _FileFigures(
                    topic=name,
                    partition=partition,
                    cleanup_policy=_policy(config),
                    compacted=config.compact,
                    min_cleanable_dirty_ratio=config.min_cleanable_dirty_ratio,
                    log_start_offset=start,
                    log_end_offset=end,
                    bytes=size,
                    first_dirty_offset=fdo,
                    first_uncleanable_offset=fuo,
                    clean_bytes=clean,
                    cleanable_bytes=cleanable,
                    dirty_ratio=ratio,
                )
            )
    return figures


# --------------------------------------------------------------------------------------------
# Record figures (Spark)


@dataclass(frozen=True)
class _RecordStats:
    records: int = 0
    keyed: int = 0
    distinct_keys: int = 0
    dirty_keys: int = 0
    tombstones: int = 0


def _read(
    spark: Any, data_dir: str, files: Sequence[_FileFigures], storage: Mapping[str, str]
) -> Any:
    """The records of ``files``' partitions up to the log end offsets seen on the driver."""
    ending: dict[str, dict[str, int]] = {}
    for f in files:
        ending.setdefault(f.topic, {})[str(f.partition)] = f.log_end_offset
    return (
        log_reader(spark)
        .options(**storage)
        .option("subscribe", ",".join(sorted(ending)))
        .option("endingOffsets", json.dumps(ending))
        .load(data_dir)
    )


#: What the aggregation reads: the records' columns, then a piece's (null on record rows).
_AGGREGATED = [
    ("topic", "STRING"),
    ("partition", "INT"),
    ("offset", "BIGINT"),
    ("key", "BINARY"),
    ("nv", "BOOLEAN"),
    *PIECE_COLUMNS,
]


def _records_and_pieces(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow``: the records as they come (value reduced to "is null"), then one row per
    :class:`~._gaps.Piece` the task read (record columns null, ``offset`` among them)."""
    import pyarrow as pa  # noqa: PLC0415

    schema = None
    own = len(_AGGREGATED) - len(PIECE_COLUMNS)
    pieces: dict[TopicPartition, Piece] = {}
    for batch in batches:
        if schema is None:
            # Strings and binaries keep the types Spark sends (large ones under
            # spark.sql.execution.arrow.useLargeVarTypes); the rest are fixed.
            fixed = {"INT": pa.int32(), "BIGINT": pa.int64(), "BOOLEAN": pa.bool_()}
            schema = pa.schema(
                [
                    (name, fixed[ddl] if ddl in fixed else batch.schema.field(name).type)
                    for name, ddl in _AGGREGATED
                ]
            )
        track_pieces(pieces, batch)
        columns = [batch.column(name).cast(schema.field(name).type) for name in schema.names[:own]]
        columns += [pa.nulls(batch.num_rows, field.type) for field in list(schema)[own:]]
        yield pa.RecordBatch.from_arrays(columns, schema=schema)
    if pieces:
        names = ("topic", "partition", *dict(PIECE_COLUMNS))
        rows = [{name: getattr(p, name) for name in names} for p in pieces.values()]
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


def _aggregate(
    spark: Any, records: Any, files: Sequence[_FileFigures]
) -> tuple[dict[TopicPartition, _RecordStats], list[Piece]]:
    """The one job: counts, exact distinct keys (all, and of the cleanable range), and the gap
    pieces of every partition."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - the extra is optional

    # The cleaner maps [first dirty, first uncleanable) of compacted logs only.
    ranges = spark.createDataFrame(
        [
            (
                f.topic,
                f.partition,
                f.first_dirty_offset,
                f.first_uncleanable_offset if f.compacted else f.first_dirty_offset,
            )
            for f in files
        ],
        "topic STRING, partition INT, dirty_start BIGINT, dirty_end BIGINT",
    )
    key = F.col("key")
    offset = F.col("offset")  # null on piece rows: they count as no record
    dirty = (offset >= F.col("dirty_start")) & (offset < F.col("dirty_end"))
    piece = F.struct(*(name for name, _ in PIECE_COLUMNS))
    rows = (
        records.select(
            "topic", "partition", "offset", "timestamp", "key", F.col("value").isNull().alias("nv")
        )
        .mapInArrow(_records_and_pieces, ", ".join(f"{n} {t}" for n, t in _AGGREGATED))
        .join(F.broadcast(ranges), ["topic", "partition"])
        .groupBy("topic", "partition")
        .agg(
            F.count(offset).alias("records"),
            F.count(key).alias("keyed"),
            F.count_distinct(key).alias("distinct_keys"),
            F.count_distinct(F.when(dirty, key)).alias("dirty_keys"),
            F.count(F.when(key.isNotNull() & F.col("nv"), True)).alias("tombstones"),
            F.collect_list(F.when(offset.isNull(), piece)).alias("pieces"),
        )
        .collect()
    )
    stats = {}
    pieces = []
    for r in rows:
        tp = (str(r["topic"]), int(r["partition"]))
        stats[tp] = _RecordStats(
            records=int(r["records"]),
            keyed=int(r["keyed"]),
            distinct_keys=int(r["distinct_keys"]),
            dirty_keys=int(r["dirty_keys"]),
            tombstones=int(r["tombstones"]),
        )
        pieces += [Piece(*tp, **p.asDict()) for p in r["pieces"]]
    return stats, pieces


# --------------------------------------------------------------------------------------------
# Output: table, JSON


#: Table columns: header (on two lines where it is wider than its figures), right-justified.
#: Columns a printed report needs (a console narrower than this is widened: no figure folds).
TABLE_WIDTH = 150
_COLUMNS = (
    ("partition", False),
    ("records", True),
    ("bytes", True),
    ("keys", True),
    ("super-\nseded", True),
    ("tomb-\nstones", True),
    ("dirty\nratio", True),
    ("passes", True),
    ("first\ndirty", True),
    ("last\ngap at", True),
    ("offsets\nmissing", True),
    ("records\nafter", True),
    ("time of the\nlast gap", False),
)


def _cells(r: PartitionReport) -> list[str]:
    gap = r.last_gap
    return [
        r.name,
        f"{r.records:,}",
        f"{r.bytes:,}",
        f"{r.distinct_keys:,}",
        f"{r.superseded:,}",
        f"{r.tombstones:,}",
        f"{r.dirty_ratio:.3f}",
        f"{r.passes_needed}",
        f"{r.first_dirty_offset:,}",
        "-" if gap is None else f"{gap.next_offset:,}",
        "-" if gap is None else f"{gap.missing:,}",
        "-" if gap is None else f"{gap.records_after:,}",
        "-" if gap is None else _seconds(gap.timestamp_ms),
    ]


def _seconds(ms: int) -> str:
    """ISO-8601 UTC to the second, as seed 000's script prints the time (it drops the ms)."""
    text = format_ms(ms)
    return text[:19] + "Z" if text.endswith("Z") else text


def render_table(reports: Sequence[PartitionReport], title: str | None = None) -> Any:
    """The reports as a ``rich`` table, one row per partition; no cell folds or is cut short
    (about :data:`TABLE_WIDTH` columns)."""
    from rich import box  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    rows = [_cells(r) for r in reports]
    table = Table(title=title, box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    for i, (header, figure) in enumerate(_COLUMNS):
        # Never folded: as wide as its widest cell or header line.
        width = max(len(text) for text in [*header.split("\n"), *(row[i] for row in rows)])
        table.add_column(
            header, justify="right" if figure else "left", no_wrap=True, min_width=width
        )
    for row in rows:
        table.add_row(*row)
    return table


def print_report(
    reports: Sequence[PartitionReport], *, console: Any = None, title: str | None = None
) -> None:
    """Print :func:`render_table` on ``console`` (default: a new ``rich`` console)."""
    if console is None:
        from rich.console import Console  # noqa: PLC0415

        console = Console()
        console = Console(width=max(console.width, TABLE_WIDTH))  # a pipe gets 80 columns
    console.print(render_table(reports, title))


def write_json(reports: Sequence[PartitionReport], path: str | os.PathLike[str]) -> None:
    """The reports as JSON: ``{"version": 2, "partitions": [{field: value, ...}, ...]}``, one
    object per :class:`PartitionReport` with its field names (``last_gap`` an object or
    null)."""
    doc = {"version": JSON_VERSION, "partitions": [asdict(r) for r in reports]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def read_json(path: str | os.PathLike[str]) -> list[PartitionReport]:
    """Reports written by :func:`write_json` (for example the "before" of a chart)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        version = doc.get("version")
        if version not in _READABLE_VERSIONS:
            raise ValueError(f"version {version!r}, not one of {_READABLE_VERSIONS}")
        reports = []
        for entry in doc["partitions"]:
            gap = entry.pop("last_gap" if version == JSON_VERSION else "largest_gap")
            gap = gap if version == JSON_VERSION else None
            reports.append(
                PartitionReport(**entry, last_gap=None if gap is None else OffsetGap(**gap))
            )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ReportFileError(f"{os.fspath(path)} is not a compactlog report: {exc}") from exc
    return reports


__all__ = [
    "OffsetGap",
    "PartitionReport",
    "ReportFileError",
    "partition_report",
    "print_report",
    "read_json",
    "render_table",
    "write_chart",
    "write_json",
]
