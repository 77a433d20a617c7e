"""The snapshot table as a Delta Lake table: one row per live key, refreshed by a MERGE.

    from compactlog.spark import local_session
    from compactlog.spark.delta_snapshot import snapshot_delta
    spark = local_session()
    snapshot_delta(spark, "data", "orders", "tables/orders")   # first run: full build
    snapshot_delta(spark, "data", "orders", "tables/orders")   # later: only new records

    from deltalake import DeltaTable                            # any Delta reader, no Spark
    DeltaTable("tables/orders").to_pyarrow_table()

The rows are those of :mod:`compactlog.spark.snapshot` (the latest record of every
``(partition, key)`` unless it is a tombstone; keyless records left out), with the columns
``key``, ``value``, ``topic``, ``partition``, ``offset``, ``timestamp`` (and ``headers``).

Why delta-rs and not Delta on Spark
-----------------------------------
No Delta Lake release runs on Spark 4.3. The newest, delta-spark 4.4.0 (Maven Central,
``io.delta:delta-spark_2.13``), is compiled against Spark 4.2.0 and there is no
``delta-spark_4.3_2.13`` artifact; on PySpark 4.3.0 it creates a table and appends blindly, but
every operation that loads a table's state (a read, a MERGE) fails with
``java.lang.NoSuchMethodError: 'void org.apache.spark.sql.execution.LogicalRDD.<init>(...)'``
from ``org.apache.spark.sql.delta.util.StateCache``; its Python package (``delta-spark`` 4.4.1
on PyPI) requires ``pyspark<=4.2.0``. So Spark computes what changed and the table is committed
by ``deltalake`` (delta-rs) on the driver. ``tests/spark/test_delta_snapshot.py`` pins the
failure, so the first Delta release that runs here shows up as a failing test.

Theory of operation
-------------------
The table's state lives in its own Delta log, in the commit that wrote it:

* ``commitInfo.userMetadata`` of every commit this module makes holds, as JSON, the topic, its
  topic id, ``headers``, the refresh number and per partition the log start offset and the
  exclusive end offset the table covers: the offsets read so far;
* the same commit carries a Delta ``txn`` action, appId ``compactlog-snapshot/<topic>`` and
  version = the refresh number (1, 2, ...).

A run reads the newest commit carrying such metadata (its refresh number must equal the txn
version, else the log was tampered with), plans exactly as the Parquet snapshot does
(:func:`compactlog.spark._snapshot_plan.plan_refresh`: incremental, pruned after retention
moved the log start within the covered range, per-partition rebuild when retention deleted
records no snapshot read, whole rebuild for ``full``, a recreated topic, lost partitions or a
change of ``headers``), and reads only ``[read_from, end)`` of each partition with the
``compactlog`` source. Spark keeps, per ``(partition, key)``, the record of highest offset in
that batch (``row_number()`` by offset descending: offsets are unique in a partition, so
no ties, and no user field decides), tombstones included; the deduplicated batch, at most one
row per key, so Delta never sees two source rows for one target row. Then one Delta commit:

* a rebuild of the whole topic (first run, ``full``, recreated topic, ...) overwrites the table
  with the batch's live rows without passing them through the driver: the executors write the
  Parquet data files into the table directory (:mod:`compactlog.spark._delta_files`) and return
  only their names, sizes and statistics, and the driver commits them through delta-rs's
  transaction API (the table's creation, or an overwrite that removes every previous file);
* otherwise the batch (small: one row per key that changed) is collected to the driver as
  Arrow and MERGEd on ``(partition, key)``: a matched row is deleted by a tombstone and
  replaced by a value (the batch is newer than every row: it starts where the table ended, or,
  for a rebuilt partition, it is the partition's whole log); an unmatched value is inserted; and
  rows not matched by the batch are deleted where the plan drops them (all rows of a rebuilt
  partition, rows below the new log start of a pruned one).

The data, the new offsets and the txn version are one atomic commit. A run killed before it
leaves the table as it was (plus unreferenced data files that ``VACUUM`` removes), and the
rerun plans from the same offsets, so it writes what one clean run writes; a run killed after
it has nothing left to do. Two refreshes of one table at once: the second is refused by
``.snapshot.lock`` on this host. Across hosts there is no lock: a MERGE commits against the
table version it read, and delta-rs refuses it (``CommitFailedError``, "a concurrent transaction
added new data") when another commit touched the same data meanwhile; the txn version then
tells the two refreshes apart. Nothing new and nothing pruned: no commit at all.

Only local (or mounted) paths are accepted for the table: the lock is a local file, and the
executors write a full build's data files to the same path, so on a cluster it must be a mount
every node shares.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

from compactlog.errors import SnapshotError
from compactlog.spark._snapshot_plan import (
    CURRENT_FILE,
    FORMAT,
    Manifest,
    PartitionState,
    RefreshPlan,
    plan_refresh,
    topic_layout,
)
from compactlog.spark.snapshot import (
    SnapshotResult,
    _check_output_dir,
    _columns,
    _data_schema,
    _locked,
    new_records,
    snapshot_result,
)

__all__ = [
    "APP_ID_PREFIX",
    "DeltaState",
    "read_delta_snapshot",
    "read_delta_state",
    "snapshot_delta",
]

APP_ID_PREFIX = "compactlog-snapshot/"
_DELTA_LOG = "_delta_log"
#: the name delta-rs gives a data file: part-00000-<uuid>-c000.<codec>.parquet
_UNCOMMITTED_DATA_FILE = re.compile(r"part-[0-9]{5}-[0-9a-f-]{36}-c[0-9]{3}(\.[a-z0-9]+)?\.parquet")


class DeltaState:
    """What a table's newest compactlog commit says: the offsets it covers and its refresh."""

    def __init__(self, manifest: Manifest, refresh: int, version: int) -> None:
        self.manifest = manifest
        self.refresh = refresh
        #: the Delta table version of that commit
        self.version = version

    def encode(self) -> str:
        m = self.manifest
        return json.dumps(
            {
                "format": FORMAT,
                "topic": m.topic,
                "topic_id": m.topic_id,
                "headers": m.headers,
                "refresh": self.refresh,
                "partitions": {
                    str(p): {"log_start": s.log_start, "end": s.end}
                    for p, s in sorted(m.partitions.items())
                },
            },
            sort_keys=True,
        )

    @classmethod
    def decode(cls, text: str, version: int, where: str) -> DeltaState:
        try:
            doc = json.loads(text)
            if doc.get("format") != FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, this compactlog reads {FORMAT}")
            topic_id = doc["topic_id"]
            manifest = Manifest(
                str(doc["topic"]),
                None if topic_id is None else str(topic_id),
                bool(doc["headers"]),
                {
                    int(p): PartitionState(int(s["log_start"]), int(s["end"]), 0, ())
                    for p, s in doc["partitions"].items()
                },
            )
            return cls(manifest, int(doc["refresh"]), version)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SnapshotError(
                f"the compactlog metadata of {where} version {version} is unreadable: {exc}"
            ) from exc


def _app_id(topic: str) -> str:
    return APP_ID_PREFIX + topic


def read_delta_state(table_dir: str) -> DeltaState | None:
    """The state of the Delta snapshot table in ``table_dir``; None if there is no table.

    Raises :class:`SnapshotError` for a Delta table that compactlog did not write (it is
    never changed) and for metadata that disagrees with the table's txn version.
    """
    from deltalake import DeltaTable  # noqa: PLC0415 - the extra is optional

    if not DeltaTable.is_deltatable(table_dir):
        return None
    table = DeltaTable(table_dir)
    for commit in table.history():
        text = commit.get("userMetadata")
        if not isinstance(text, str) or '"refresh"' not in text:
            continue
        state = DeltaState.decode(text, int(commit["version"]), table_dir)
        txn = table.transaction_version(_app_id(state.manifest.topic))
        if txn != state.refresh:
            raise SnapshotError(
                f"{table_dir}: its txn version for {_app_id(state.manifest.topic)!r} is {txn}, "
                f"its newest compactlog commit (version {state.version}) says refresh "
                f"{state.refresh}: the table was changed by another writer"
            )
        return state
    raise SnapshotError(
        f"{table_dir} is a Delta table that compactlog did not write (no commit carries "
        "compactlog's metadata): give the snapshot its own directory"
    )


def _check_table_dir(table_dir: str) -> None:
    if os.path.exists(os.path.join(table_dir, CURRENT_FILE)):
        raise SnapshotError(
            f"{table_dir} holds a Parquet snapshot (format parquet): give the Delta table "
            "its own directory"
        )
    if os.path.isdir(table_dir) and not os.path.isdir(os.path.join(table_dir, _DELTA_LOG)):
        # Data files of a first build killed before its commit are no one's: the build redoes them.
        others = [
            n
            for n in os.listdir(table_dir)
            if not n.startswith(".") and not _UNCOMMITTED_DATA_FILE.fullmatch(n)
        ]
        if others:
            raise SnapshotError(
                f"{table_dir} is neither empty nor a Delta table (it holds {sorted(others)[:3]}): "
                "give the Delta table its own directory"
            )


def _arrow_schema(headers: bool) -> Any:
    import pyarrow as pa  # noqa: PLC0415

    fields = [
        pa.field("key", pa.binary(), nullable=True),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string(), nullable=True),
        pa.field("partition", pa.int32(), nullable=True),
        pa.field("offset", pa.int64(), nullable=True),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    ]
    if headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(header)))
    return pa.schema(fields)


def _latest(
    spark: Any, data_dir: str, topic: str, plan: RefreshPlan, headers: bool
) -> tuple[Any, Any]:
    """The latest record of every ``(partition, key)`` among ``[read_from, end)`` of each
    partition, tombstones included, as a Spark DataFrame (None when there is nothing to read);
    with the Observation that counts the records read and the keyless ones."""
    from pyspark.sql import Window  # noqa: PLC0415
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    if not any(p.read_from < p.end for p in plan.partitions):
        return None, None
    records, observation = new_records(
        spark, data_dir, topic, plan, headers, "compactlog-delta-snapshot"
    )
    newest = Window.partitionBy("partition", "key").orderBy(F.col("offset").desc())
    latest = (
        records.where(F.col("key").isNotNull())
        .select(*_columns(headers))
        .withColumn("_rank", F.row_number().over(newest))
        .where(F.col("_rank") == 1)
        .drop("_rank")
    )
    return latest, observation


def _counts(observation: Any) -> tuple[int, int]:
    if observation is None:
        return 0, 0
    metrics = observation.get
    return int(metrics.get("records", 0)), int(metrics.get("keyless", 0))


def _new_batch(latest: Any, headers: bool) -> Any:
    """The deduplicated batch collected to the driver as a pyarrow Table (for the MERGE)."""
    schema = _arrow_schema(headers)
    if latest is None:
        return schema.empty_table()
    return latest.toArrow().select(schema.names).cast(schema)


def _drop_predicate(plan: RefreshPlan) -> str | None:
    """Rows of the table that no longer belong, whatever the batch holds."""
    terms = []
    for p in plan.partitions:
        if not p.keep_previous:
            terms.append(f"t.partition = {p.partition}")
        elif p.pruned:
            terms.append(f"(t.partition = {p.partition} AND t.offset < {p.log_start})")
    return " OR ".join(terms) if terms else None


def snapshot_delta(
    spark: Any,
    data_dir: str | os.PathLike[str],
    topic: str,
    table_dir: str | os.PathLike[str],
    *,
    full: bool = False,
    headers: bool = False,
) -> SnapshotResult:
    """Build or refresh the Delta snapshot table of ``topic`` in ``table_dir`` (module doc).

    Returns the same :class:`SnapshotResult` as the Parquet snapshot; its ``version_path`` is
    the table directory and ``partitions[p].files`` is empty. Raises :class:`SnapshotError`
    (or the store's :class:`UnknownTopicOrPartitionError`) for bad input, before any Spark job.
    """
    from deltalake import CommitProperties, DeltaTable, Transaction  # noqa: PLC0415

    from compactlog.spark._delta_files import commit_files, write_files  # noqa: PLC0415

    started = time.monotonic()
    data = os.path.abspath(data_dir)
    out = os.path.abspath(table_dir)
    log = topic_layout(data, topic)
    _check_output_dir(out, data)
    _check_table_dir(out)
    with _locked(out):
        previous = read_delta_state(out)
        if previous is not None and previous.manifest.topic != topic:
            raise SnapshotError(
                f"{out} holds the snapshot of topic {previous.manifest.topic!r}, not {topic!r}: "
                "give each topic its own table"
            )
        manifest = None if previous is None else previous.manifest
        plan = plan_refresh(log, manifest, full=full, headers=headers)
        if previous is not None and plan.unchanged(manifest):
            return _result(out, topic, plan, (0, 0), started, unchanged=True)
        latest, observation = _latest(spark, data, topic, plan, headers)
        refresh = 1 if previous is None else previous.refresh + 1
        state = DeltaState(
            Manifest(
                topic,
                log.topic_id,
                headers,
                {p.partition: PartitionState(p.log_start, p.end, 0, ()) for p in plan.partitions},
            ),
            refresh,
            -1,
        )
        commit = CommitProperties(
            custom_metadata={"userMetadata": state.encode()},
            app_transactions=[Transaction(_app_id(topic), refresh)],
        )
        if not plan.incremental or previous is None:
            # The executors write the data files; only their names and sizes reach the driver.
            schema = _arrow_schema(headers)
            adds = [] if latest is None else write_files(latest, out, schema)
            commit_files(out, schema, adds, commit, exists=DeltaTable.is_deltatable(out))
        else:
            merger = (
                DeltaTable(out)
                .merge(
                    _new_batch(latest, headers),
                    "t.partition = s.partition AND t.key = s.key",
                    source_alias="s",
                    target_alias="t",
                    commit_properties=commit,
                )
                .when_matched_delete("s.value IS NULL")
                .when_matched_update_all("s.value IS NOT NULL")
                .when_not_matched_insert_all("s.value IS NOT NULL")
            )
            drop = _drop_predicate(plan)
            if drop is not None:
                merger = merger.when_not_matched_by_source_delete(drop)
            merger.execute()
        return _result(out, topic, plan, _counts(observation), started, unchanged=False)


def _rows_per_partition(table_dir: str) -> dict[int, int]:
    from deltalake import DeltaTable  # noqa: PLC0415

    counts = (
        DeltaTable(table_dir)
        .to_pyarrow_table(columns=["partition"])
        .group_by("partition")
        .aggregate([("partition", "count")])
    )
    return dict(
        zip(counts["partition"].to_pylist(), counts["partition_count"].to_pylist(), strict=True)
    )


def _result(
    table_dir: str,
    topic: str,
    plan: RefreshPlan,
    counts: tuple[int, int],
    started: float,
    *,
    unchanged: bool,
) -> SnapshotResult:
    rows = _rows_per_partition(table_dir)
    return snapshot_result(topic, table_dir, plan, rows, {}, counts, started, unchanged=unchanged)


def read_delta_snapshot(spark: Any, table_dir: str | os.PathLike[str]) -> Any:
    """The Delta snapshot table as a Spark DataFrame, read through delta-rs on the driver
    (Delta on Spark cannot read it on Spark 4.3: module doc). For tables that fit the driver;
    elsewhere read the files ``deltalake.DeltaTable(table_dir).file_uris()`` lists."""
    from deltalake import DeltaTable  # noqa: PLC0415

    out = os.path.abspath(table_dir)
    state = read_delta_state(out)
    if state is None:
        raise SnapshotError(f"no Delta snapshot table in {out}: run snapshot first")
    headers = state.manifest.headers
    table = DeltaTable(out).to_pyarrow_table().select(_columns(headers))
    if table.num_rows == 0:
        return spark.createDataFrame([], _data_schema(headers)).select(*_columns(headers))
    return spark.createDataFrame(table)
