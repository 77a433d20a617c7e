"""The snapshot table's Parquet files, written by pyarrow inside a Spark task.

Why not Spark's own Parquet writer: its file names carry a random job UUID, it cuts row groups by
buffered bytes inside parquet-mr, adds ``_SUCCESS`` and ``.crc`` files and never fsyncs. Here
the bytes of a partition's files are a function of its rows alone:

* rows arrive sorted by key (keys are unique within a Kafka partition after the dedup);
* a row group ends after :attr:`FileLayout.row_group_rows` rows or as soon as it holds
  :attr:`FileLayout.row_group_bytes` of keys and values, counted row by row, so the cut does not
  depend on how Spark happened to slice its Arrow batches;
* a file ends after :attr:`FileLayout.row_groups_per_file` row groups and is named by its number
  within the partition (``part-00000.parquet``, ``part-00001.parquet``, ...);
* every writer setting is spelled out, and every column is cast to one fixed Arrow schema (Spark
  hands timestamps in the session's time zone and names list items ``element``; both would
  otherwise reach the file's embedded schema).

So the same rows give byte-identical files (with the same pyarrow version: the writer's name and
version are in each file's footer). Each file is written under a hidden temporary name, fsynced,
then renamed; a retried or speculative task rewrites the same bytes under the same name, so
whichever rename lands last changes nothing.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from compactlog.errors import ConfigError

#: The columns stored in the files; ``topic`` and ``partition`` live in the directory names.
FILE_COLUMNS = ("key", "value", "offset", "timestamp")
#: What each writer task reports back to the driver, one row per file.
WRITTEN_SCHEMA = "partition INT, file STRING, rows BIGINT, bytes BIGINT"
#: Fixed bytes counted per row on top of its key and value (offset and timestamp).
ROW_FIXED_BYTES = 16
PARQUET_OPTIONS: dict[str, Any] = {
    "version": "2.6",
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    "write_statistics": True,
    "data_page_size": 1 << 20,
    "data_page_version": "1.0",
}


@dataclass(frozen=True)
class FileLayout:
    """How a partition's rows are cut into row groups and files."""

    #: A row group closes once its keys and values reach this many bytes: big enough for
    #: efficient scans, small enough that a writer task buffers little (Parquet's usual range).
    row_group_bytes: int = 64 << 20
    #: ... or after this many rows (pyarrow's own cap on a row group).
    row_group_rows: int = 1 << 20
    #: Row groups per file: about 1 GiB files at the default sizes.
    row_groups_per_file: int = 16

    def __post_init__(self) -> None:
        for name in ("row_group_bytes", "row_group_rows", "row_groups_per_file"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, not {getattr(self, name)}")


def file_schema(headers: bool) -> Any:
    """The Arrow schema of the snapshot's files."""
    import pyarrow as pa  # noqa: PLC0415

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    ]
    if headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(pa.field("element", header))))
    return pa.schema(fields)


def file_name(number: int) -> str:
    return f"part-{number:05d}.parquet"


def partition_dir(version_dir: str, topic: str, partition: int) -> str:
    """Hive-style: ``<version>/topic=<topic>/partition=<n>`` (topic names need no escaping:
    Kafka allows only ``[a-zA-Z0-9._-]``)."""
    return os.path.join(version_dir, f"topic={topic}", f"partition={partition}")


def sync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _row_bytes(batch: Any) -> Any:
    """Bytes each row counts towards its row group (key, value and the fixed columns)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    sizes = np.full(batch.num_rows, ROW_FIXED_BYTES, np.int64)
    for name in ("key", "value"):
        lengths = pc.fill_null(pc.binary_length(batch.column(name)), 0)
        sizes += lengths.to_numpy(zero_copy_only=False).astype(np.int64)
    return sizes


class _PartitionFiles:
    """The files of one Kafka partition, fed its rows in key order."""

    def __init__(self, directory: str, schema: Any, layout: FileLayout) -> None:
        self.directory = directory
        self.schema = schema
        self.layout = layout
        self.pending: list[Any] = []
        self.pending_rows = 0
        self.pending_bytes = 0
        self.writer: Any = None
        self.handle: Any = None
        self.tmp = ""
        self.groups_in_file = 0
        self.file_rows = 0
        self.written: list[tuple[str, int, int]] = []  # (name, rows, bytes)

    def add(self, batch: Any) -> None:
        sizes = _row_bytes(batch)
        start = 0
        while start < batch.num_rows:
            reached = self.pending_bytes + np.cumsum(sizes[start:])
            full = np.flatnonzero(reached >= self.layout.row_group_bytes)
            take = batch.num_rows - start
            take = min(take, self.layout.row_group_rows - self.pending_rows)
            if len(full):
                take = min(take, int(full[0]) + 1)
            self.pending.append(batch.slice(start, take))
            self.pending_rows += take
            self.pending_bytes = int(reached[take - 1])
            start += take
            if (
                self.pending_rows >= self.layout.row_group_rows
                or self.pending_bytes >= self.layout.row_group_bytes
            ):
                self._write_group()

    def _write_group(self) -> None:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        # One contiguous chunk per column: page cuts then depend on the rows, not on the slices.
        table = pa.Table.from_batches(self.pending, self.schema).combine_chunks()
        self.pending, self.pending_rows, self.pending_bytes = [], 0, 0
        if self.writer is None:
            name = file_name(len(self.written))
            self.tmp = os.path.join(self.directory, f".{name}.{uuid.uuid4().hex}.tmp")
            self.handle = open(self.tmp, "wb")  # noqa: SIM115 - closed in _close_file
            self.writer = pq.ParquetWriter(self.handle, self.schema, **PARQUET_OPTIONS)
        self.writer.write_table(table, row_group_size=table.num_rows)
        self.file_rows += table.num_rows
        self.groups_in_file += 1
        if self.groups_in_file >= self.layout.row_groups_per_file:
            self._close_file()

    def _close_file(self) -> None:
        self.writer.close()
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        name = file_name(len(self.written))
        final = os.path.join(self.directory, name)
        os.replace(self.tmp, final)
        self.written.append((name, self.file_rows, os.path.getsize(final)))
        self.writer = self.handle = None
        self.groups_in_file = self.file_rows = 0

    def finish(self) -> list[tuple[str, int, int]]:
        if self.pending:
            self._write_group()
        if self.writer is not None:
            self._close_file()
        sync_dir(self.directory)
        return self.written


class PartitionFilesWriter:
    """The ``mapInArrow`` function that writes a snapshot version's files.

    Its input is partitioned by ``(topic, partition)`` and sorted by ``(topic, partition, key)``
    within each task, so a Kafka partition's rows arrive in one task, contiguous and in key
    order. It yields one :data:`WRITTEN_SCHEMA` row per file written.
    """

    def __init__(self, version_dir: str, topic: str, headers: bool, layout: FileLayout) -> None:
        self.version_dir = version_dir
        self.topic = topic
        self.headers = headers
        self.layout = layout

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa  # noqa: PLC0415

        schema = file_schema(self.headers)
        partition = -1
        files: _PartitionFiles | None = None
        for batch in batches:
            if batch.num_rows == 0:
                continue
            topics = set(batch.column("topic").unique().to_pylist())
            if topics != {self.topic}:
                raise ValueError(f"snapshot rows of topics {sorted(topics)}, not {self.topic!r}")
            column = batch.column("partition").to_numpy(zero_copy_only=False)
            cuts = np.flatnonzero(column[1:] != column[:-1]) + 1
            bounds = [0, *cuts.tolist(), batch.num_rows]
            data = pa.RecordBatch.from_arrays(
                [batch.column(name).cast(schema.field(name).type) for name in schema.names],
                schema=schema,
            )
            for lo, hi in itertools.pairwise(bounds):
                if int(column[lo]) != partition:
                    if files is not None:
                        yield _written(partition, files.finish())
                    partition = int(column[lo])
                    directory = partition_dir(self.version_dir, self.topic, partition)
                    os.makedirs(directory, exist_ok=True)
                    files = _PartitionFiles(directory, schema, self.layout)
                assert files is not None
                files.add(data.slice(lo, hi - lo))
        if files is not None:
            yield _written(partition, files.finish())


def _written(partition: int, files: list[tuple[str, int, int]]) -> Any:
    import pyarrow as pa  # noqa: PLC0415

    return pa.RecordBatch.from_pydict(
        {
            "partition": pa.array([partition] * len(files), pa.int32()),
            "file": pa.array([f[0] for f in files], pa.string()),
            "rows": pa.array([f[1] for f in files], pa.int64()),
            "bytes": pa.array([f[2] for f in files], pa.int64()),
        }
    )
