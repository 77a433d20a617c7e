"""The snapshot table: the latest value of every key of a topic, as Parquet, refreshed
incrementally.

    from compactlog.spark import local_session
    from compactlog.spark.snapshot import read_snapshot, snapshot
    spark = local_session()
    result = snapshot(spark, "data", "orders", "tables/orders")   # first run: full build
    result = snapshot(spark, "data", "orders", "tables/orders")   # later: only new records
    read_snapshot(spark, "tables/orders").where("partition = 0").show()

The table holds one row per ``(partition, key)``: the record with the highest offset of that key
in that partition, unless that record is a tombstone (null value), in which case the key is
absent. It is exactly what a consumer reading the partition from its log start offset up to the
snapshot's end offset would keep as a key-value table. Records without a key have no place in
it and are left out (counted in :attr:`SnapshotResult.keyless_records`). Keys are per
partition: a key produced to two partitions (a topic whose partitions were added, or a custom
partitioner) has a row in each.

On disk::

    <output>/
      _current                          {"format": 1, "version": "version-00000003"}
      .snapshot.lock                    held while a snapshot runs
      version-00000003/
        _snapshot.json                  the manifest: per partition log start, end offset, rows
        topic=orders/partition=0/part-00000.parquet   key, value, offset, timestamp[, headers]
        topic=orders/partition=1/...

The Parquet files are sorted by key, partitioned Hive-style by ``topic`` and ``partition``, and
their bytes depend only on their rows (see :mod:`compactlog.spark._snapshot_files`): a rerun over
the same offsets, incremental or full, writes byte-identical files.

Theory of operation
-------------------
A run plans on the driver from the files alone (no store lock; a running broker may keep
appending): for each partition its log start offset and its log end offset now. The end offset
becomes the run's exclusive ``endingOffsets``, so the manifest says exactly what was read.

With a previous snapshot (``_current`` names its version, whose manifest records per partition
the log start offset ``s0`` and end offset ``e0`` it covered), partition by partition:

* **incremental**, the usual case: read records ``[e0, end)`` and merge them with the previous
  rows of the partition. This is correct after compaction: the cleaner only removes a record
  when a later record of the same key exists (or a tombstone whose delete horizon passed, whose
  key is absent either way), so the latest record of every key survives where it was;
* **pruned**: the log start moved to ``s > s0`` (retention, DeleteRecords) but not past ``e0``.
  A full rebuild would not see records below ``s``, so previous rows with ``offset < s`` are
  dropped: a key whose latest record lies below ``s`` has no record at or above it, so a full
  rebuild would not have it either;
* **rebuilt** from the log start, without the previous rows, when the previous rows cannot be
  trusted: the log start moved past ``e0`` (records ``[e0, s)`` were deleted before any snapshot
  saw them), the log end is below ``e0`` (truncated), or the partition is new.

The whole topic is rebuilt when ``full=True``, when there is no previous snapshot, when it is
unreadable or of another format, when the topic was deleted and recreated (its topic id in the
store's ``compactlog-topics.json`` changed), when partitions disappeared, or when ``headers`` is
not what the previous snapshot stored. The result says which happened and why. Nothing new and
nothing pruned: the current version stays and no Spark job runs.

The merge is one Spark job: the new records (Spark's Kafka-source options ``startingOffsets``
and ``endingOffsets``), unioned with the previous rows read back from Parquet, repartitioned by
``(topic, partition)``, then ``row_number()`` over ``(topic, partition, key)`` by offset
descending keeps the newest row of a key (offsets are unique in a partition: no ties), and
tombstones are dropped. Spark's sort for the window already orders each task by key, so the
task that holds a Kafka partition writes that partition's files in key order with pyarrow.
A refresh reads only the new log records but rewrites the whole table (copy on write), so its
cost grows with the table as well as with what is new.

Publishing a version, so that a crash at any point leaves the previous snapshot readable:

1. write the files into a new ``version-N`` (N above every version directory present); tasks
   write each file under a hidden temporary name, fsync it and rename it;
2. fsync the directories, then write the manifest ``_snapshot.json`` (temporary file, fsync,
   rename, fsync the directory);
3. switch ``_current`` to ``version-N`` the same way: this rename is the commit point;
4. delete every other version directory (older ones, and the debris of crashed runs).

A crash before step 3 leaves ``_current`` on the previous version, and the half-written
``version-N`` is deleted by the next successful run; a crash after it leaves only garbage.
Readers of a version that step 4 deletes fail: :func:`read_snapshot` returns a lazy DataFrame,
so finish using it before the next refresh. A second run on the same output directory while
one runs is refused (``.snapshot.lock``).

The store may be open elsewhere (appends go on; the run reads up to the end it planned). A run
that meets retention deleting its start offset after planning fails with the source's data-loss
error, and one that meets a segment swapped by the cleaner mid-read fails as a batch read does;
either leaves the previous snapshot current, and a rerun plans afresh.

The writer tasks write to ``output_dir`` directly, so it must be a path every executor sees
(local mode, or a shared mount), as the data directory must be for the source. Parallelism is
per Kafka partition: one task deduplicates and writes one partition.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from compactlog.errors import SnapshotError, StorageError
from compactlog.spark._snapshot_files import (
    WRITTEN_SCHEMA,
    FileLayout,
    PartitionFilesWriter,
    partition_dir,
    sync_dir,
)
from compactlog.spark._snapshot_plan import (
    CURRENT_FILE,
    FORMAT,
    MANIFEST_FILE,
    VERSION_NAME,
    VERSION_PREFIX,
    Manifest,
    PartitionState,
    RefreshPlan,
    current_version,
    plan_refresh,
    topic_layout,
)
from compactlog.spark.remote_fs import configure, fs_options, is_uri
from compactlog.storage.fs import OsFileSystem, refuse_uri, write_file_atomically
from compactlog.storage.topic_catalog import TOPICS_FILE

__all__ = [
    "FileLayout",
    "PartitionResult",
    "SnapshotError",
    "SnapshotResult",
    "read_snapshot",
    "snapshot",
]

LOCK_FILE = ".snapshot.lock"
HEADERS_SCHEMA = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"


# --- the result ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionResult:
    partition: int
    log_start: int
    #: the exclusive end offset the snapshot covers (the log end offset when planned)
    end: int
    #: the offsets this run read: ``[read_from, end)``
    read_from: int
    rows: int
    files: tuple[str, ...]
    #: why this partition's previous rows were not used; None when they were (or none existed)
    rebuilt: str | None


@dataclass(frozen=True)
class SnapshotResult:
    topic: str
    #: the version directory now named by ``_current``
    version_path: str
    #: rows of the previous snapshot were carried over; False: built from the log alone
    incremental: bool
    #: why the topic was rebuilt in full; None for an incremental run
    reason: str | None
    #: nothing changed since the previous snapshot: no job ran, ``version_path`` is the old one
    unchanged: bool
    rows: int
    #: log records this run read (keyless ones included)
    records_read: int
    #: records without a key among them, left out of the table
    keyless_records: int
    partitions: dict[int, PartitionResult] = field(default_factory=dict)
    elapsed_secs: float = 0.0

    @property
    def end_offsets(self) -> dict[int, int]:
        return {p: r.end for p, r in self.partitions.items()}


# --- running ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(output_dir: str) -> Iterator[None]:
    path = os.path.join(output_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SnapshotError(
                f"another snapshot is being written to {output_dir} (lock {path})"
            ) from None
        yield
    finally:
        os.close(fd)


def _check_output_dir(output_dir: str, data_dir: str | None) -> None:
    """``data_dir`` None: the data is not local (a URI), so the output cannot lie inside it."""
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise SnapshotError(f"output directory {output_dir} exists and is not a directory")
    out = os.path.realpath(output_dir)
    data = out + os.sep + "-" if data_dir is None else os.path.realpath(data_dir)
    if os.path.commonpath([out, data]) == data or os.path.exists(
        os.path.join(output_dir, TOPICS_FILE)
    ):
        raise SnapshotError(
            f"output directory {output_dir} is a data directory or lies inside {data_dir}"
        )
    try:
        os.makedirs(output_dir, exist_ok=True)
    except OSError as exc:
        raise SnapshotError(f"cannot create {output_dir}: {exc.strerror or exc}") from exc


def _versions(output_dir: str) -> dict[int, str]:
    found = {}
    for name in os.listdir(output_dir):
        match = VERSION_NAME.fullmatch(name)
        if match and os.path.isdir(os.path.join(output_dir, name)):
            found[int(match.group(1))] = name
    return found


def snapshot(
    spark: Any,
    data_dir: str | os.PathLike[str],
    topic: str,
    output_dir: str | os.PathLike[str],
    *,
    full: bool = False,
    headers: bool = False,
    layout: FileLayout | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> SnapshotResult:
    """Build or refresh the snapshot table of ``topic`` in ``output_dir`` (module doc).

    ``full`` rebuilds from the log even when the previous snapshot could be refreshed;
    ``headers`` stores the records' headers too; ``layout`` sets row-group and file sizes.
    Raises :class:`SnapshotError` (or the store's :class:`UnknownTopicOrPartitionError`) for
    bad input, before any Spark job. ``data_dir`` may be an ``s3://``, ``hdfs://`` or
    ``file://`` URI, read with the ``fs.*`` ``storage_options``
    (:mod:`compactlog.spark.remote_fs`); ``output_dir`` is local or mounted.
    """
    refuse_uri(output_dir, "the snapshot job's output", "it publishes by rename under a lock")
    started = time.monotonic()
    data = os.fspath(data_dir)
    if is_uri(data):  # read through pyarrow.fs, on the driver and in every task
        configure(data, fs_options(storage_options or {}))
    else:
        data = os.path.abspath(data)
    out = os.path.abspath(output_dir)
    log = topic_layout(data, topic)
    _check_output_dir(out, None if is_uri(data) else data)
    with _locked(out):
        previous: tuple[str, Manifest] | None = None
        why = ""
        try:
            previous = current_version(out)
        except SnapshotError as exc:
            why = f"the previous snapshot is unreadable ({exc})"
        if previous is not None and previous[1].topic != topic:
            raise SnapshotError(
                f"{out} holds the snapshot of topic {previous[1].topic!r}, not {topic!r}: "
                "give each topic its own output directory"
            )
        manifest = None if previous is None else previous[1]
        plan = plan_refresh(log, manifest, full=full, headers=headers, why=why)
        if previous is not None and plan.unchanged(previous[1]):
            return _result(topic, previous[0], plan, previous[1], (0, 0), started, unchanged=True)
        versions = _versions(out)
        version_dir = os.path.join(out, f"{VERSION_PREFIX}{max(versions, default=0) + 1:08d}")
        os.makedirs(version_dir)
        written, counts = _run_job(
            spark, data, topic, plan, previous, version_dir, headers, layout, storage_options
        )
        new = Manifest(
            topic,
            log.topic_id,
            headers,
            {
                p.partition: PartitionState(
                    p.log_start,
                    p.end,
                    sum(rows for _, rows in written.get(p.partition, [])),
                    tuple(name for name, _ in written.get(p.partition, [])),
                )
                for p in plan.partitions
            },
        )
        _publish(out, version_dir, new)
        return _result(topic, version_dir, plan, new, counts, started, unchanged=False)


def new_records(
    spark: Any,
    data_dir: str,
    topic: str,
    plan: RefreshPlan,
    headers: bool,
    name: str,
    storage_options: Mapping[str, str] | None = None,
) -> tuple[Any, Any]:
    """The records a refresh reads (each partition's ``[read_from, end)``, tombstones and
    keyless records included), and the Observation named ``name`` that counts them and the
    keyless ones."""
    from pyspark.sql import Observation  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    from compactlog.spark.source import log_reader  # noqa: PLC0415 - needs pyspark

    # Every partition is named in both: one left out would be read from its log start.
    starting = {topic: {str(p.partition): p.read_from for p in plan.partitions}}
    ending = {topic: {str(p.partition): p.end for p in plan.partitions}}
    observation = Observation(name)
    records = (
        log_reader(spark)
        .options(**dict(storage_options or {}))
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("includeHeaders", "true" if headers else "false")
        .load(data_dir)
        .observe(
            observation,
            F.count(F.lit(1)).alias("records"),
            F.count_if(F.col("key").isNull()).alias("keyless"),
        )
    )
    return records, observation


def _result(
    topic: str,
    version_dir: str,
    plan: RefreshPlan,
    manifest: Manifest,
    counts: tuple[int, int],
    started: float,
    *,
    unchanged: bool,
) -> SnapshotResult:
    rows = {p: m.rows for p, m in manifest.partitions.items()}
    files = {p: m.files for p, m in manifest.partitions.items()}
    return snapshot_result(
        topic, version_dir, plan, rows, files, counts, started, unchanged=unchanged
    )


def snapshot_result(
    topic: str,
    path: str,
    plan: RefreshPlan,
    rows: dict[int, int],
    files: dict[int, tuple[str, ...]],
    counts: tuple[int, int],
    started: float,
    *,
    unchanged: bool,
) -> SnapshotResult:
    """What a snapshot run did, whatever its format: ``rows`` and ``files`` per partition as
    the table now holds them, ``counts`` the records read and the keyless ones among them."""
    incremental = plan.incremental
    reason = plan.reason
    if not incremental and reason is None:
        reason = "; ".join(f"partition {p.partition}: {p.rebuilt}" for p in plan.partitions)
    return SnapshotResult(
        topic=topic,
        version_path=path,
        incremental=incremental,
        reason=None if incremental else reason,
        unchanged=unchanged,
        rows=sum(rows.values()),
        records_read=counts[0],
        keyless_records=counts[1],
        partitions={
            p.partition: PartitionResult(
                p.partition,
                p.log_start,
                p.end,
                p.end if unchanged else p.read_from,
                rows.get(p.partition, 0),
                files.get(p.partition, ()),
                p.rebuilt,
            )
            for p in plan.partitions
        },
        elapsed_secs=time.monotonic() - started,
    )


def _data_schema(headers: bool) -> str:
    schema = "key BINARY, value BINARY, offset BIGINT, timestamp TIMESTAMP"
    if headers:
        schema += f", {HEADERS_SCHEMA}"
    return f"{schema}, topic STRING, partition INT"


def _columns(headers: bool) -> list[str]:
    return ["key", "value", "topic", "partition", "offset", "timestamp"] + (
        ["headers"] if headers else []
    )


def _run_job(
    spark: Any,
    data_dir: str,
    topic: str,
    plan: RefreshPlan,
    previous: tuple[str, Manifest] | None,
    version_dir: str,
    headers: bool,
    layout: FileLayout | None,
    storage_options: Mapping[str, str] | None = None,
) -> tuple[dict[int, list[tuple[str, int]]], tuple[int, int]]:
    """The Spark job (module doc); returns the files written per partition and
    ``(records read, keyless records)``."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    columns = _columns(headers)
    frames = []
    observation = None
    if any(p.read_from < p.end for p in plan.partitions):
        new, observation = new_records(
            spark, data_dir, topic, plan, headers, "compactlog-snapshot", storage_options
        )
        frames.append(new.where(F.col("key").isNotNull()).select(*columns))
    if previous is not None:
        old_dir, old = previous
        kept = [p for p in plan.partitions if p.keep_previous and old.partitions[p.partition].rows]
        if kept:
            rows = (
                spark.read.schema(_data_schema(headers))
                .option("basePath", old_dir)
                .parquet(*[partition_dir(old_dir, topic, p.partition) for p in kept])
            )
            for p in kept:
                if p.pruned:
                    rows = rows.where(
                        (F.col("partition") != p.partition) | (F.col("offset") >= p.log_start)
                    )
            frames.append(rows.select(*columns))
    written: dict[int, list[tuple[str, int]]] = {}
    if frames:
        merged = frames[0]
        for frame in frames[1:]:
            merged = merged.unionByName(frame)
        newest = Window.partitionBy("topic", "partition", "key").orderBy(F.col("offset").desc())
        latest = (
            merged.repartition(len(plan.partitions), "topic", "partition")
            .withColumn("_rank", F.row_number().over(newest))
            .where((F.col("_rank") == 1) & F.col("value").isNotNull())
            .drop("_rank")
            .sortWithinPartitions("topic", "partition", "key")  # the window's order: no sort
        )
        writer = PartitionFilesWriter(version_dir, topic, headers, layout or FileLayout())
        for row in latest.mapInArrow(writer, WRITTEN_SCHEMA).collect():
            written.setdefault(int(row.partition), []).append((str(row.file), int(row.rows)))
    for partition, files in written.items():
        names = [name for name, _ in files]
        if len(set(names)) != len(names):
            raise SnapshotError(
                f"partition {partition} was written by two tasks ({names}): the job's "
                "partitioning is broken; nothing was published"
            )
        files.sort()
    counts = (0, 0)
    if observation is not None:
        metrics = observation.get
        counts = (int(metrics.get("records", 0)), int(metrics.get("keyless", 0)))
    return written, counts


def _publish(output_dir: str, version_dir: str, manifest: Manifest) -> None:
    """Steps 2-4 of the module doc: make the version durable, switch ``_current``, delete the
    other versions."""
    fs = OsFileSystem()
    try:
        for partition in manifest.partitions:
            directory = partition_dir(version_dir, manifest.topic, partition)
            if os.path.isdir(directory):
                for name in os.listdir(directory):
                    if name.startswith("."):  # a temporary file of a failed task attempt
                        os.remove(os.path.join(directory, name))
                sync_dir(directory)
        topic_dir = os.path.dirname(partition_dir(version_dir, manifest.topic, 0))
        if os.path.isdir(topic_dir):
            sync_dir(topic_dir)
        sync_dir(version_dir)
        write_file_atomically(fs, os.path.join(version_dir, MANIFEST_FILE), manifest.encode())
        pointer = {"format": FORMAT, "version": os.path.basename(version_dir)}
        switch_current(fs, output_dir, json.dumps(pointer).encode() + b"\n")
    except OSError as exc:
        raise StorageError(f"cannot publish snapshot {version_dir}: {exc}") from exc
    for name in _versions(output_dir).values():
        if name != os.path.basename(version_dir):
            shutil.rmtree(os.path.join(output_dir, name), ignore_errors=True)


def switch_current(fs: OsFileSystem, output_dir: str, pointer: bytes) -> None:
    """Step 3, the commit point (a separate function so tests can crash right before it)."""
    write_file_atomically(fs, os.path.join(output_dir, CURRENT_FILE), pointer)


def read_snapshot(spark: Any, output_dir: str | os.PathLike[str]) -> Any:
    """The current snapshot of ``output_dir`` as a DataFrame: ``key``, ``value``, ``topic``,
    ``partition``, ``offset``, ``timestamp`` (and ``headers`` if stored)."""
    out = os.path.abspath(output_dir)
    if not os.path.isdir(out):
        raise SnapshotError(f"no snapshot in {out}: it is not a directory")
    current = current_version(out)
    if current is None:
        raise SnapshotError(f"no snapshot in {out} (no {CURRENT_FILE} file): run snapshot first")
    version_dir, manifest = current
    schema = _data_schema(manifest.headers)
    columns = _columns(manifest.headers)
    if manifest.rows == 0:
        return spark.createDataFrame([], schema).select(*columns)
    return spark.read.schema(schema).parquet(version_dir).select(*columns)
