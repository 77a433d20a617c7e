"""Writing DataFrames into a compactlog data directory: the batch and the streaming sink.

    (df.write.format("compactlog").mode("append")
       .option("topic", "orders")            # unless the DataFrame has a ``topic`` column
       .option("compression", "zstd")        # none (default), gzip, snappy, lz4, zstd
       .save("data-dir"))
    (df.writeStream.format("compactlog")
       .option("checkpointLocation", "ckpt")  # also names the sink (or option ``sinkId``)
       .start("data-dir"))

Input columns, as Spark's Kafka sink reads them: ``value`` (binary or string, required, may be
null: a tombstone), ``key`` (binary or string), ``topic`` (string; overrides the ``topic``
option row by row), ``partition`` (int), ``headers`` (array<struct<key string, value binary or
string>>), ``timestamp`` (timestamp). A known column of the wrong type is an error; other
columns are ignored. Rows without a partition go where Kafka's default partitioner sends them:
keyed rows to ``murmur2(key) % partitions``; keyless rows round-robin over the topic's
partitions, from a random partition per commit (Kafka's sticky partitioner fills one batch per
partition at a time; round-robin spreads as evenly and is reproducible from the journal).

Theory of operation (exactly once)
----------------------------------
Only one process may have a store open, and Spark may run a task twice (retries, speculation),
so tasks never touch the store. Each task attempt writes its rows, normalised, to its own Arrow
IPC file ``<data-dir>/.spark-staging/<write-id>/part-<task>-<attempt-uuid>.arrow`` (fsynced) and
returns the path in a :class:`StagedRows` commit message. Spark hands ``commit`` exactly one
message per task, from the attempt it accepted, so files of failed or duplicate attempts are
never read; they are deleted with the staging directory.

``commit`` runs once, on the driver, after every task succeeded:

1. open the store (its ``.lock`` makes concurrent commits take turns), and finish any commit a
   dead driver left half done (step 4);
2. for a stream, skip the micro-batch if the journal says its id is already committed;
3. plan and validate every row before the first append: topics exist, partitions are in range,
   no null key goes to a compacted topic, every record fits ``max.message.bytes``, timestamps are
   within the topic's bounds. Any failure raises and nothing is appended;
4. write the plan to the journal (:mod:`compactlog.spark._staging`) with fsync, append the rows
   partition by partition as record batches (up to 500 records, 1 MiB and ``segment.bytes``
   each, in row order, task order first), fsync the logs, then record the batch id (stream) or
   drop the journal (batch) and delete the staged files.

Guarantee. Every row of a successful write is appended exactly once, in row order within a Kafka
partition, despite task retries and speculative tasks; a micro-batch that Spark replays after a
driver restart is appended at most once per ``sinkId``/``checkpointLocation``. If the driver (or
the commit) dies during step 4, the log holds a prefix of the write's rows per partition until
the next Spark write (any query, any sink id) commits into the same data directory: it first
appends exactly the missing rest from the journal (the staged files are kept for that); a
replayed micro-batch is then skipped. So a write is atomic *eventually*, not instantly: readers
may see the prefix in between, and a batch job the user re-runs by hand after such a crash
writes its rows a second time (the sink cannot tell a re-run from a new write). Completing a
commit assumes nothing else appended to those partitions meanwhile (the rows already there are
counted, not compared); a log that grew past the plan is refused with an error naming the
journal, but a foreign append smaller than the plan would go unnoticed. Rows of a job that fails
before its commit's first append (a task failed, validation refused a row, the store was locked)
never reach the log: Spark calls ``abort``, which deletes the staged files. A straggling
speculative attempt that finishes after the commit may leave a file under ``.spark-staging``;
nothing reads it, and it may be deleted whenever no write is running.
"""

from __future__ import annotations

import contextlib
import os
import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

from compactlog.errors import (
    CompactlogError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    SinkError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from compactlog.records import RECORD_BATCH_OVERHEAD, Compression, build_batch
from compactlog.spark._options import plain_errors
from compactlog.spark._staging import (
    Journal,
    PendingCommit,
    batch_journal_name,
    read_journal,
    remove_staged,
    remove_staging_dirs,
    sinks_dir,
    staging_dir,
    stream_journal_name,
    write_journal,
)
from compactlog.storage.datadir import LOCK_FILE
from compactlog.storage.fs import refuse_uri
from compactlog.storage.partitioner import partition_for_key
from compactlog.storage.store import Store

#: Records per appended batch: enough to amortise the 61-byte batch header and its CRC, few
#: enough that a consumer's fetch of one batch stays small.
MAX_BATCH_RECORDS = 500
#: Uncompressed bytes per appended batch, the producer's default ``max.request.size``.
MAX_BATCH_BYTES = 1 << 20
#: Upper bound of a record's framing: length, key/value lengths, offset delta and header count
#: as varints (5 bytes each at most), the timestamp delta as a varlong (10), attributes (1).
RECORD_OVERHEAD = 36
#: Upper bound of one header's framing (key length and value length varints).
HEADER_OVERHEAD = 10


# --- the input schema -----------------------------------------------------------------------


def _is_bytes_like(data_type: DataType) -> bool:
    return isinstance(data_type, BinaryType | StringType)


def _is_headers(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and _is_bytes_like(fields["value"])
    )


_COLUMN_RULES: dict[str, tuple[Callable[[DataType], bool], str]] = {
    "key": (_is_bytes_like, "binary or string"),
    "value": (_is_bytes_like, "binary or string"),
    "topic": (lambda t: isinstance(t, StringType), "string"),
    "partition": (lambda t: isinstance(t, IntegerType), "int"),
    "headers": (_is_headers, "array<struct<key: string, value: binary>>"),
    "timestamp": (lambda t: isinstance(t, TimestampType), "timestamp"),
}


def check_sink_schema(schema: StructType) -> None:
    """Refuse a DataFrame the sink cannot write, as Spark's Kafka sink does.

    ``value`` is required; ``key``, ``topic``, ``partition``, ``headers`` and ``timestamp`` are
    optional but must have their types; other columns are ignored.
    """
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise SinkError(
            f"the DataFrame written to compactlog needs a 'value' column (binary or string); "
            f"it has {sorted(fields)}"
        )
    for name, (accepts, expected) in _COLUMN_RULES.items():
        if name in fields and not accepts(fields[name]):
            raise SinkError(
                f"column {name!r} must be {expected}, not {fields[name].simpleString()}"
            )


# --- options --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkOptions:
    """The options a sink needs, parsed once on the driver and pickled to every task."""

    data_dir: str
    topic: str | None
    compression: str
    write_id: str

    @classmethod
    def parse(cls, options: dict[str, str], schema: StructType) -> SinkOptions:
        opts = {k.lower(): v for k, v in options.items()}
        path = opts.get("path")
        if not path:
            raise SinkError("give the data directory: df.write.format('compactlog').save(dir)")
        topic = opts.get("topic") or None
        if topic is None and "topic" not in schema.fieldNames():
            raise SinkError("no topic to write to: set the 'topic' option or add a 'topic' column")
        compression = opts.get("compression", "none")
        try:
            Compression.from_name(compression)
        except CompactlogError as exc:
            raise SinkError(f"option compression: {exc}") from exc
        refuse_uri(path, "writing with the compactlog sink")
        return cls(os.path.abspath(path), topic, compression, uuid.uuid4().hex)


# --- tasks: staging -------------------------------------------------------------------------


@dataclass
class StagedRows(WriterCommitMessage):
    """One task's result: its staged file (None when it had no rows)."""

    write_id: str
    task: int
    path: str | None
    rows: int


def _staged_schema() -> Any:
    import pyarrow as pa  # noqa: PLC0415 - workers import the extra lazily

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("headers", pa.list_(header)),
            ("timestamp", pa.int64()),  # epoch ms, null: the store's clock at commit
        ]
    )


def _normalise(batch: Any, topic: str | None, schema: Any) -> Any:
    """One input Arrow batch as the staged schema: fill, cast, check topics."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    n = batch.num_rows
    names = batch.schema.names

    def column(name: str) -> Any:
        target = schema.field(name).type
        if name not in names:
            return pa.nulls(n, target)
        return batch.column(names.index(name)).cast(target)

    topics = column("topic")
    if topic is not None:
        topics = pc.fill_null(topics, topic)
    if topics.null_count:
        raise SinkError(
            "a row has a null 'topic' and no 'topic' option is set: set the option or fill the "
            "column"
        )
    if "timestamp" in names:
        ts = batch.column(names.index("timestamp"))
        millis = ts.cast(pa.timestamp("ms", tz=ts.type.tz), safe=False).cast(pa.int64())
    else:
        millis = pa.nulls(n, pa.int64())
    return pa.RecordBatch.from_arrays(
        [topics, column("partition"), column("key"), column("value"), column("headers"), millis],
        schema=schema,
    )


def stage_task(options: SinkOptions, batches: Iterator[Any]) -> StagedRows:
    """Write one task attempt's rows to its own staging file (executor side)."""
    import pyarrow as pa  # noqa: PLC0415
    from pyspark import TaskContext  # noqa: PLC0415

    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    schema = _staged_schema()
    directory = staging_dir(options.data_dir, options.write_id)
    path: str | None = None
    rows = 0
    writer: Any = None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            staged = _normalise(batch, options.topic, schema)
            if writer is None:
                os.makedirs(directory, exist_ok=True)
                path = os.path.join(directory, f"part-{task:05d}-{uuid.uuid4().hex}.arrow")
                writer = pa.ipc.new_file(path, schema)
            writer.write_batch(staged)
            rows += staged.num_rows
        if writer is not None:
            writer.close()
            writer = None
            _fsync(path)
            _fsync(directory)
    except BaseException:
        if writer is not None:
            writer.close()
        if path is not None:
            with contextlib.suppress(OSError):
                os.remove(path)
        raise
    return StagedRows(options.write_id, task, path, rows)


def _fsync(path: str | None) -> None:
    if path is None:
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- the driver: planning, validating, appending --------------------------------------------


@dataclass(frozen=True)
class _Row:
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int
    where: str

    def size(self) -> int:
        """An upper bound of the record's encoded size (before compression)."""
        size = RECORD_OVERHEAD + len(self.key or b"") + len(self.value or b"")
        for name, value in self.headers:
            size += HEADER_OVERHEAD + len(name.encode()) + len(value or b"")
        return size


def _rows(
    files: Sequence[str],
    partitions_of: Callable[[str], int],
    round_robin_start: int,
    now_ms: int,
) -> Iterator[_Row]:
    """Every staged row with its partition decided: a pure function of its arguments."""
    import pyarrow as pa  # noqa: PLC0415

    sent: dict[str, int] = {}
    for path in files:
        try:
            reader = pa.ipc.open_file(pa.memory_map(path))
        except (OSError, pa.ArrowInvalid) as exc:
            raise StorageError(f"cannot read the staged rows {path}: {exc}") from exc
        row_index = 0
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            cols = [batch.column(j).to_pylist() for j in range(batch.num_columns)]
            for topic, part, key, value, headers, ts in zip(*cols, strict=True):
                where = f"row {row_index} of {os.path.basename(path)}"
                row_index += 1
                count = partitions_of(topic)
                if part is not None:
                    if not 0 <= part < count:
                        raise UnknownTopicOrPartitionError(
                            f"{where}: topic {topic!r} has no partition {part} (it has {count})"
                        )
                elif key is not None:
                    part = partition_for_key(key, count)
                else:
                    n = sent.get(topic, 0)
                    sent[topic] = n + 1
                    part = (round_robin_start + n) % count
                hdrs = tuple((h["key"], h["value"]) for h in headers or ())
                yield _Row(topic, part, key, value, hdrs, now_ms if ts is None else ts, where)


def _plan(store: Store, files: list[str], compression: str, batch_id: int | None) -> PendingCommit:
    """Decide and validate every row; nothing is appended here."""
    now = store.clock()
    round_robin_start = random.randrange(1 << 30)
    counts: dict[str, int] = {}

    def partitions_of(topic: str) -> int:
        if topic not in counts:
            counts[topic] = store.partitions(topic)
        return counts[topic]

    planned: dict[tuple[str, int], int] = {}
    for row in _rows(files, partitions_of, round_robin_start, now):
        config = store.topic_config(row.topic)
        name = f"{row.topic}-{row.partition}"
        if config.compact and row.key is None:
            # The store's own words (Kafka's), so the error reads the same through Spark.
            raise InvalidRecordError(
                f"Compacted topic cannot accept message without key in topic partition {name}. "
                f"({row.where}); nothing of this write was appended"
            )
        if row.size() + RECORD_BATCH_OVERHEAD > config.max_message_bytes:
            raise MessageTooLargeError(
                f"{row.where}: the record to {name} takes up to {row.size()} bytes, more than "
                f"max.message.bytes={config.max_message_bytes}"
            )
        if row.size() + RECORD_BATCH_OVERHEAD > config.segment_bytes:
            raise MessageTooLargeError(
                f"{row.where}: the record to {name} takes up to {row.size()} bytes, more than "
                f"a segment holds (segment.bytes={config.segment_bytes})"
            )
        if config.message_timestamp_type == "CreateTime" and row.timestamp >= 0:
            late = now - row.timestamp > config.message_timestamp_before_max_ms
            early = row.timestamp - now > config.message_timestamp_after_max_ms
            if late or early:
                raise InvalidTimestampError(
                    f"{row.where}: timestamp {row.timestamp} is outside the bounds "
                    "message.timestamp.before.max.ms/after.max.ms of topic "
                    f"{row.topic!r} around {now}"
                )
        planned[(row.topic, row.partition)] = planned.get((row.topic, row.partition), 0) + 1
    return PendingCommit(
        batch_id=batch_id,
        files=files,
        compression=compression,
        now_ms=now,
        round_robin_start=round_robin_start,
        partition_counts=counts,
        starts=[(t, p, store.log_end_offset(t, p), n) for (t, p), n in sorted(planned.items())],
    )


def _apply(store: Store, pending: PendingCommit, journal_path: str) -> None:
    """Append what of ``pending`` is not in the log yet (all of it, the first time)."""
    codec = Compression.from_name(pending.compression)
    skip: dict[tuple[str, int], int] = {}
    for topic, partition, start, planned in pending.starts:
        done = store.log_end_offset(topic, partition) - start
        if not 0 <= done <= planned:
            raise StorageError(
                f"cannot finish the Spark commit in {journal_path}: {topic}-{partition} grew "
                f"from offset {start} by {done} records, but the commit planned {planned}; "
                "something else appended meanwhile. Inspect the log and remove the journal"
            )
        skip[(topic, partition)] = done
    chunks: dict[tuple[str, int], list[_Row]] = {}
    sizes: dict[tuple[str, int], int] = {}

    def flush(tp: tuple[str, int]) -> None:
        rows = chunks.pop(tp, [])
        sizes.pop(tp, None)
        if rows:
            data = build_batch(
                [(r.key, r.value, r.headers) for r in rows],
                timestamps=[r.timestamp for r in rows],
                compression=codec,
            )
            store.append_batch(tp[0], tp[1], data)

    rows = _rows(
        pending.files,
        pending.partition_counts.__getitem__,
        pending.round_robin_start,
        pending.now_ms,
    )
    for row in rows:
        tp = (row.topic, row.partition)
        if skip.get(tp, 0) > 0:
            skip[tp] -= 1
            continue
        config = store.topic_config(row.topic)
        # A batch must also fit a segment (the store refuses one larger than segment.bytes).
        limit = min(MAX_BATCH_BYTES, config.max_message_bytes, config.segment_bytes)
        size = sizes.get(tp, RECORD_BATCH_OVERHEAD) + row.size()
        if tp in chunks and (len(chunks[tp]) >= MAX_BATCH_RECORDS or size > limit):
            flush(tp)
            size = RECORD_BATCH_OVERHEAD + row.size()
        chunks.setdefault(tp, []).append(row)
        sizes[tp] = size
    for tp in list(chunks):
        flush(tp)
    store.flush()  # the rows are durable before the journal says they are committed


def _complete(store: Store, journal_path: str, journal: Journal) -> None:
    """Mark a journal's pending commit done (fsynced) and delete its staged files."""
    pending = journal.pending
    if pending is None:
        return
    if pending.batch_id is None:  # a batch write's journal lives only while it commits
        store.fs.remove(journal_path)
        store.fs.sync_dir(os.path.dirname(journal_path))
    else:
        journal.committed_batch = pending.batch_id
        journal.pending = None
        write_journal(store.fs, journal_path, journal)
    remove_staged(pending.files)


def _finish_interrupted(store: Store) -> None:
    """Redo every commit a dead driver left half done (we hold the store's lock)."""
    directory = sinks_dir(store.path)
    if not store.fs.exists(directory):
        return
    for name in sorted(store.fs.listdir(directory)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        journal = read_journal(store.fs, path)
        if journal is not None and journal.pending is not None:
            _apply(store, journal.pending, path)
            _complete(store, path, journal)


def open_store(data_dir: str) -> Store:
    """Open the sink's data directory, saying plainly when another process holds it."""
    if not os.path.isdir(data_dir):
        raise SinkError(
            f"no compactlog data directory at {data_dir}: create the store and its topics first"
        )
    try:
        return Store.open(data_dir)
    except StorageError as exc:
        if isinstance(exc.__cause__, BlockingIOError):
            lock = os.path.join(data_dir, LOCK_FILE)
            raise StorageError(
                f"cannot commit the Spark write: the data directory {data_dir} is locked "
                f"({lock} is held by another process that has the store open; only one may). "
                "Close that store and run the write again"
            ) from exc
        raise


def commit_staged(
    data_dir: str,
    messages: Sequence[WriterCommitMessage | None],
    journal_name: str,
    sink_id: str,
    batch_id: int | None,
    compression: str,
) -> None:
    """The driver's commit (see the module doc): validate, journal, append, mark done."""
    staged = sorted((m for m in messages if isinstance(m, StagedRows)), key=lambda m: m.task)
    files = [m.path for m in staged if m.path is not None]
    with open_store(data_dir) as store:
        _finish_interrupted(store)
        journal_path = os.path.join(sinks_dir(store.path), journal_name)
        journal = read_journal(store.fs, journal_path) or Journal(sink_id)
        done = journal.committed_batch
        if batch_id is None or done is None or batch_id > done:
            journal.pending = _plan(store, files, compression, batch_id)
            write_journal(store.fs, journal_path, journal)
            try:
                _apply(store, journal.pending, journal_path)
            except CompactlogError as exc:
                raise StorageError(
                    f"the Spark commit into {data_dir} failed after its first append: {exc}. "
                    f"Its plan stays in {journal_path}; the next write through this sink "
                    "finishes it"
                ) from exc
            _complete(store, journal_path, journal)
    remove_staged(files)
    remove_staging_dirs(data_dir, {m.write_id for m in staged})


def abort_staged(data_dir: str, messages: Sequence[WriterCommitMessage | None]) -> None:
    """Delete the staged files of a failed write, except those a journal still needs."""
    from compactlog.storage.fs import OsFileSystem  # noqa: PLC0415

    fs = OsFileSystem()
    keep: set[str] = set()
    directory = sinks_dir(data_dir)
    if fs.exists(directory):
        for name in fs.listdir(directory):
            if name.endswith(".json"):
                with contextlib.suppress(CompactlogError):
                    journal = read_journal(fs, os.path.join(directory, name))
                    if journal is not None and journal.pending is not None:
                        keep.update(journal.pending.files)
    staged = [m for m in messages if isinstance(m, StagedRows)]
    remove_staged([m.path for m in staged if m.path is not None and m.path not in keep])
    if not keep:
        remove_staging_dirs(data_dir, {m.write_id for m in staged})


# --- Spark's writer classes -----------------------------------------------------------------


class LogWriter(DataSourceArrowWriter):
    """The batch sink: ``df.write.format("compactlog").mode("append").save(dir)``.

    Tasks stage their rows; :meth:`commit` appends them once (see the module doc).
    """

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise SinkError(
                "a Kafka log is append-only: write with mode('append'), not 'overwrite' "
                "(to empty a topic, delete and re-create it)"
            )
        check_sink_schema(schema)
        self.options = SinkOptions.parse(options, schema)

    @plain_errors
    def write(self, iterator: Iterator[Any]) -> StagedRows:
        return stage_task(self.options, iterator)

    @plain_errors
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        opts = self.options
        commit_staged(
            opts.data_dir,
            messages,
            batch_journal_name(opts.write_id),
            f"batch {opts.write_id}",
            None,
            opts.compression,
        )

    @plain_errors
    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_staged(self.options.data_dir, messages)


class LogStreamWriter(DataSourceStreamArrowWriter):
    """The streaming sink: ``df.writeStream.format("compactlog").start(dir)``.

    A micro-batch is committed at most once per sink identity, the ``sinkId`` option or else
    the query's ``checkpointLocation``: its journal records the last committed batch id, so a
    batch Spark replays after a restart is skipped. Without either option the sink refuses to
    start, since it could not recognise a replay.
    """

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise SinkError(
                "a Kafka log is append-only: use outputMode('append') or 'update', not 'complete'"
            )
        check_sink_schema(schema)
        self.options = SinkOptions.parse(options, schema)
        opts = {k.lower(): v for k, v in options.items()}
        sink_id = opts.get("sinkid")
        if not sink_id and opts.get("checkpointlocation"):
            sink_id = "checkpoint " + os.path.abspath(opts["checkpointlocation"])
        if not sink_id:
            raise SinkError(
                "the compactlog stream sink needs option 'checkpointLocation' (or 'sinkId') to "
                "recognise micro-batches Spark replays after a restart"
            )
        self.sink_id = sink_id

    @plain_errors
    def write(self, iterator: Iterator[Any]) -> StagedRows:
        return stage_task(self.options, iterator)

    @plain_errors
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        opts = self.options
        commit_staged(
            opts.data_dir,
            messages,
            stream_journal_name(self.sink_id),
            self.sink_id,
            batchId,
            opts.compression,
        )

    @plain_errors
    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        abort_staged(self.options.data_dir, messages)
