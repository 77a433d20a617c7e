"""A full build of the Delta snapshot table without passing its rows through the driver.

The executors write the table's Parquet data files straight into the table directory (pyarrow in
``mapInArrow``, streaming batch by batch, one file per Spark partition under a unique
``part-<n>-<uuid>-c000.snappy.parquet`` name) and send back only one small row per file: its
name, size, modification time and Delta statistics. The driver then commits all of them in ONE
Delta commit through delta-rs's transaction API: the table's creation for a first build, else an
overwrite that removes every file of the previous version. Until that commit the new files are
referenced by no version (a run killed before it leaves the table as it was; ``VACUUM`` removes
the orphans).
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

__all__ = ["commit_files", "write_files"]

#: what each written file reports to the driver (one row per file)
_FILE_SCHEMA = "path string, size long, modification_time long, stats string"
#: integer columns whose min/max go into the file's Delta statistics (the MERGE predicates use them)
_STATS_COLUMNS = ("partition", "offset")


def _write_partition(table_dir: str, schema: Any, batches: Iterator[Any]) -> Iterator[Any]:
    """Runs on an executor: writes the live rows of one Spark partition as one Parquet file."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415
    from pyspark import TaskContext  # noqa: PLC0415

    context = TaskContext.get()
    task = 0 if context is None else context.partitionId()
    name = f"part-{task % 100000:05d}-{uuid.uuid4()}-c000.snappy.parquet"
    path = os.path.join(table_dir, name)
    writer = None
    rows = 0
    nulls = dict.fromkeys(schema.names, 0)
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    try:
        for batch in batches:
            table = pa.Table.from_batches([batch]).select(schema.names).cast(schema)
            table = table.filter(pc.is_valid(table.column("value")))  # tombstones are not rows
            if table.num_rows == 0:
                continue
            if writer is None:
                writer = pq.ParquetWriter(path, schema, compression="snappy")
            writer.write_table(table)
            rows += table.num_rows
            for column in schema.names:
                nulls[column] += table.column(column).null_count
            for column in _STATS_COLUMNS:
                bounds = pc.min_max(table.column(column)).as_py()
                if bounds["min"] is not None:
                    low[column] = min(low.get(column, bounds["min"]), bounds["min"])
                    high[column] = max(high.get(column, bounds["max"]), bounds["max"])
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        return
    stats = {"numRecords": rows, "minValues": low, "maxValues": high, "nullCount": nulls}
    stat = os.stat(path)
    yield pa.RecordBatch.from_pylist(
        [
            {
                "path": name,
                "size": stat.st_size,
                "modification_time": int(stat.st_mtime * 1000),
                "stats": json.dumps(stats, sort_keys=True),
            }
        ]
    )


def write_files(rows: Any, table_dir: str, schema: Any) -> list[Any]:
    """Writes the DataFrame ``rows`` (tombstones are left out) into ``table_dir`` from the
    executors; returns the ``AddAction`` of every file written. Only those come to the driver."""
    from deltalake.transaction import AddAction  # noqa: PLC0415

    os.makedirs(table_dir, exist_ok=True)
    written = rows.mapInArrow(
        functools.partial(_write_partition, table_dir, schema), _FILE_SCHEMA
    ).collect()
    return [
        AddAction(
            path=r.path,
            size=r.size,
            partition_values={},
            modification_time=r.modification_time,
            data_change=True,
            stats=r.stats,
        )
        for r in written
    ]


def commit_files(table_dir: str, schema: Any, adds: list[Any], commit: Any, exists: bool) -> None:
    """One Delta commit: the table made of exactly ``adds`` (created, or overwritten)."""
    from deltalake import DeltaTable, Schema, transaction  # noqa: PLC0415

    if not exists:
        transaction.create_table_with_add_actions(
            table_dir, Schema.from_arrow(schema), adds, mode="error", commit_properties=commit
        )
    else:
        DeltaTable(table_dir).create_write_transaction(
            adds, mode="overwrite", schema=schema, commit_properties=commit
        )
