"""The ``compactlog`` Spark data source's batch read: a data directory's logs as a DataFrame
(the format itself, and :func:`register`, are in :mod:`compactlog.spark.datasource`).

    register(spark)
    df = (spark.read.format("compactlog")
          .option("subscribe", "orders,payments")       # default: every topic
          .option("startingOffsets", "earliest")         # or JSON: {"orders": {"0": 42}}
          .option("endingOffsets", "latest")
          .load("data-dir"))

Schema (Spark's own Kafka source's): ``key`` binary, ``value`` binary, ``topic`` string,
``partition`` int, ``offset`` long, ``timestamp`` timestamp, ``timestampType`` int, and
``headers`` array<struct<key string, value binary>> with ``includeHeaders=true``.

Options, named as Spark's Kafka source names them (any other name is refused, naming the
closest known one: see :mod:`compactlog.spark._options`):

* ``subscribe`` (comma-separated topics), ``subscribePattern`` (a Java-style regex, matched
  whole) or ``assign`` (JSON ``{"topicA": [0, 1]}``: those partitions; one the directory lacks is
  an error); none of them: every topic of the directory. At most one of the three.
* ``startingOffsets``: ``earliest`` (default) or JSON ``{"topic": {"0": offset}}`` with -2 for
  earliest (partitions left out start at earliest); ``latest``, or -1, is refused for a batch
  read, as Spark refuses it.
* ``endingOffsets``: ``latest`` (default) or JSON with -1 for latest; ``earliest``, or -2, is
  refused.
* ``startingTimestamp`` / ``endingTimestamp`` (milliseconds since the epoch, every partition) and
  ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (JSON ``{"topic": {"0": ms}}``,
  naming every partition read, as Spark requires): per partition, the earliest offset whose
  record's timestamp is at or after the time (Kafka's ListOffsets by timestamp). Spark's
  preference holds: ``...Timestamp``, then ``...OffsetsByTimestamp``, then ``...Offsets``. Where
  no record is that late, an end is the log end, and a start follows
  ``startingOffsetsByTimestampStrategy``: ``error`` (default) fails the read, ``latest`` starts
  at the log end.
* ``failOnDataLoss`` (``true``): a JSON starting offset below a partition's log start offset
  (deleted by retention or DeleteRecords) fails the read; ``false`` starts at the log start.
* ``includeHeaders`` (``false``).
* ``maxBytesPerSplit`` (compactlog's own, 128 MiB like Spark's ``maxPartitionBytes``): the
  largest byte range of a task.
* ``minPartitions`` (none): cut smaller ranges, if need be, so that the read has at least about
  this many tasks (a range is never cut inside a record batch), as Spark's Kafka source does.
* ``maxRecordsPerPartition`` (none): no task reads more than this many records. Spark's Kafka
  source counts offsets; this counts records (a compacted range holds fewer), and a batch with
  more records than that is shared by several tasks, each reading its own offsets of it.

``spark.readStream.format("compactlog")`` takes the same options, except that
``startingOffsets`` may be ``latest`` (the starting options apply only to a query without a
checkpoint; topics and partitions that appear later start at earliest), the ending options,
``minPartitions`` and ``maxRecordsPerPartition`` are refused, and ``maxOffsetsPerTrigger`` caps
the records of a micro-batch. The checkpoint holds ``{"topic": {"0": 42}}``, per partition the
next offset to read. See :mod:`compactlog.spark.stream`.

A read is a snapshot of the files as planning finds them: the end of each partition is its log
end offset then (records appended later are not read). Control batches (transaction markers) are
never returned, as a Kafka consumer never returns them; offsets keep their gaps (a compacted log
has them: no reader may assume ``offset + 1``).

How it splits: one task per byte range of a segment, cut at record-batch boundaries (found by
hopping over the 12-byte batch headers) into pieces of about equal size, at most about
``maxBytesPerSplit`` each, so that one large partition spreads over several tasks. A task costs
Spark about a tenth of a second besides its data (measured: 4 M records of 100 bytes took 4.2 s
in 8 MiB ranges and 2.0 s in 128 MiB ones on local[2]), so ranges are large, and a task reads
its range in chunks of about 8 MiB to keep its memory bounded. Each chunk is decoded with the
store's bulk decoder into Arrow record batches built from buffers, without a Python object per
record.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from pyspark.sql.datasource import DataSourceReader, InputPartition

from compactlog.errors import ConfigError, CorruptRecordError, SparkSourceError
from compactlog.records import (
    CONTROL_FLAG_MASK,
    TIMESTAMP_TYPE_MASK,
)
from compactlog.spark._options import (
    BATCH_READ,
    check_options,
    plain_error_generator,
    plain_errors,
)
from compactlog.spark.remote_fs import configure, filesystem
from compactlog.storage.checkpoint import LOG_START_OFFSET_CHECKPOINT, parse_checkpoint
from compactlog.storage.file_records import FileBatch, WalkEnd, iter_file_batches
from compactlog.storage.fs import FileHandle
from compactlog.storage.topic_names import parse_partition_dir_name

NAME = "compactlog"
BASE_SCHEMA = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
HEADERS_FIELD = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
#: Spark's own file sources cut at ``spark.sql.files.maxPartitionBytes``, 128 MiB by default.
DEFAULT_SPLIT_BYTES = 128 << 20
#: A task reads, decodes and hands over its range in chunks of about this many bytes, so its
#: memory stays bounded and Spark converts one chunk while the next is decoded.
CHUNK_BYTES = 8 << 20
#: Rows per Arrow batch handed to Spark (slices of one decoded chunk; no copies).
ARROW_BATCH_ROWS = 65_536
EARLIEST = -2
LATEST = -1
STRATEGIES = ("error", "latest")

TopicPartition = tuple[str, int]


def log_reader(spark: Any) -> Any:
    """``spark.read.format("compactlog")`` with ``minPartitions`` at the session's default
    parallelism: Spark's own file sources shrink their ranges so that a small input still
    keeps every core busy, and a Python planner cannot see the cluster to do the same."""
    parallelism = spark.sparkContext.defaultParallelism
    return spark.read.format(NAME).option("minPartitions", str(parallelism))


def options_of(options: Any) -> dict[str, str]:
    """Spark's options as a plain dict with lower-case names (Spark matches option names
    case-insensitively; its own dict already lower-cases them). Look names up lower-cased."""
    return {str(k).lower(): str(v) for k, v in options.items()}


@dataclass(frozen=True)
class SegmentSplit(InputPartition):
    """One task's work: bytes ``[start, end)`` of a segment, records in ``[first, stop)`` of
    their partition. ``cuts`` are batch positions inside the range where the task starts a new
    chunk: it reads and decodes one chunk at a time."""

    path: str
    topic: str
    partition: int
    start: int
    end: int
    first: int
    stop: int
    cuts: tuple[int, ...]


@dataclass(frozen=True)
class PartitionRange:
    """The offsets to read of one partition: ``[start, stop)``."""

    topic: str
    partition: int
    directory: str
    start: int
    stop: int


class LogReader(DataSourceReader):
    def __init__(self, options: dict[str, str], headers: bool) -> None:
        check_options(options, BATCH_READ, "a batch read")
        self.options = options
        self.headers = headers
        self.path = _required_path(options)
        self.split_bytes = _int_option(options, "maxBytesPerSplit", DEFAULT_SPLIT_BYTES, 1)
        self.min_partitions = _int_option(options, "minPartitions", 0, 1)
        self.max_records = _int_option(options, "maxRecordsPerPartition", 0, 1)

    @plain_errors
    def partitions(self) -> Sequence[InputPartition]:
        ranges = plan_ranges(self.path, self.options)
        found = [
            (part, path, batches) for part in ranges for path, batches in segment_batches(part)
        ]
        split_bytes: float = self.split_bytes
        if self.min_partitions:  # smaller ranges, so that there are at least this many
            total = sum(batches[-1] - batches[0] for _, _, batches in found)
            split_bytes = max(1.0, min(split_bytes, total / self.min_partitions))
        if self.max_records:
            return [
                split
                for part in ranges
                for split in record_splits(part, split_bytes, self.max_records)
            ]
        return [
            split
            for part, path, batches in found
            for split in _splits(part, path, batches, split_bytes)
        ]

    @plain_error_generator
    def read(self, partition: InputPartition) -> Iterator[Any]:
        configure(self.path, self.options)  # in the executor: its own filesystem, from options
        if isinstance(partition, SegmentSplit):
            yield from read_split(partition, self.headers)
        # Otherwise nothing was planned (every range empty): Spark still runs one task, with
        # its default InputPartition(None), and it reads nothing.


# --- planning --------------------------------------------------------------------------------


def _required_path(options: dict[str, str]) -> str:
    path = options.get("path")
    if not path:
        raise SparkSourceError("no data directory: use .load(data_dir)")
    configure(path, options)
    if not filesystem(path).is_dir(path):
        raise SparkSourceError(f"data directory {path!r} does not exist")
    return path


def _flag(options: Any, name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    if str(raw).lower() in ("true", "false"):
        return str(raw).lower() == "true"
    raise ConfigError(f"option {name} must be true or false, not {raw!r}")


def _int_option(options: dict[str, str], name: str, default: int, minimum: int) -> int:
    raw = options.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"option {name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"option {name} must be at least {minimum}, not {value}")
    return value


def _partition_dirs(path: str) -> dict[tuple[str, int], str]:
    found: dict[tuple[str, int], str] = {}
    fs = filesystem(path)
    for name in fs.listdir(path):
        parsed = parse_partition_dir_name(name)
        full = os.path.join(path, name)
        if parsed is not None and fs.is_dir(full):
            found[parsed] = full
    return found


_STRATEGY_OPTIONS = ("assign", "subscribe", "subscribePattern")


def _selected_topics(topics: set[str], options: dict[str, str]) -> set[str]:
    """The topics of ``topics`` that ``subscribe``/``subscribePattern``/``assign`` select (for
    ``assign``, the topics it names; :func:`select_partitions` keeps only its partitions)."""
    given = [name for name in _STRATEGY_OPTIONS if name.lower() in options]
    if len(given) > 1:
        raise ConfigError(
            f"give only one of the options {' and '.join(given)} (assign, subscribe and "
            "subscribePattern exclude each other)"
        )
    subscribe, pattern = options.get("subscribe"), options.get("subscribepattern")
    if subscribe is not None:
        wanted = {t.strip() for t in subscribe.split(",") if t.strip()}
        if not wanted:
            raise ConfigError("option subscribe names no topic")
        return topics & wanted
    if pattern is not None:
        if not pattern.strip():
            raise ConfigError("option subscribePattern is empty")
        try:
            regex = re.compile(pattern.strip())
        except re.error as exc:
            raise ConfigError(
                f"option subscribePattern {pattern!r} is not a regex: {exc}"
            ) from None
        return {t for t in topics if regex.fullmatch(t)}
    assigned = assigned_partitions(options)
    if assigned is not None:
        return topics & {t for t, _ in assigned}
    return topics


def assigned_partitions(options: Mapping[str, str]) -> set[TopicPartition] | None:
    """The partitions of option ``assign`` (Spark's JSON: ``{"topicA": [0, 1]}``), if given."""
    raw = options.get("assign")
    if raw is None:
        return None
    example = 'JSON like {"topicA": [0, 1], "topicB": [2]}'
    try:
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            raise TypeError(raw)
        assigned: set[TopicPartition] = set()
        for topic, partitions in parsed.items():
            if not isinstance(partitions, list):
                raise TypeError(partitions)
            for partition in partitions:
                if type(partition) is not int or partition < 0:
                    raise TypeError(partition)
                assigned.add((str(topic), partition))
    except (ValueError, TypeError):
        raise ConfigError(f"option assign must be {example}, not {raw!r}") from None
    if not assigned:
        raise ConfigError(f"option assign names no partition: {raw!r}")
    return assigned


def select_partitions(
    dirs: Mapping[TopicPartition, str], options: dict[str, str], *, check_assigned: bool = False
) -> dict[TopicPartition, str]:
    """The partitions of ``dirs`` the options select; with ``check_assigned``, a partition
    that ``assign`` names and the directory lacks is an error."""
    topics = _selected_topics({t for t, _ in dirs}, options)
    assigned = assigned_partitions(options)
    if assigned is None:
        return {tp: d for tp, d in dirs.items() if tp[0] in topics}
    missing = sorted(assigned - set(dirs))
    if check_assigned and missing:
        names = ", ".join(f"{t}-{p}" for t, p in missing)
        raise SparkSourceError(f"option assign names {names}, which the data directory lacks")
    return {tp: d for tp, d in dirs.items() if tp in assigned}


def _offsets_json(options: dict[str, str], name: str) -> dict[tuple[str, int], int] | str:
    raw = options.get(name.lower())
    if raw is None:
        return "earliest" if name == "startingOffsets" else "latest"
    if raw.strip().lower() in ("earliest", "latest"):
        return raw.strip().lower()
    try:
        parsed = json.loads(raw)
        return {
            (str(topic), int(partition)): int(offset)
            for topic, partitions in parsed.items()
            for partition, offset in partitions.items()
        }
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(
            f'option {name} must be "earliest", "latest" or JSON like '
            f'{{"topic": {{"0": 23}}}}, not {raw!r}'
        ) from None


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, as the options say: ``kind`` is ``earliest``, ``latest``,
    ``offsets`` (``per_partition`` holds offsets, -2 earliest, -1 latest) or ``timestamp``
    (``timestamp`` for every partition, or ``per_partition`` holds one per partition)."""

    option: str
    kind: str
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None


def offset_spec(options: dict[str, str], which: str) -> OffsetSpec:
    """``which`` (``starting`` or ``ending``) from the options, in Spark's order of preference:
    ``<which>Timestamp``, then ``<which>OffsetsByTimestamp``, then ``<which>Offsets``."""
    one, by = f"{which}Timestamp", f"{which}OffsetsByTimestamp"
    if one.lower() in options:
        return OffsetSpec(one, "timestamp", timestamp=_timestamp(one, options[one.lower()]))
    if by.lower() in options:
        raw = options[by.lower()]
        try:
            parsed = json.loads(raw)
            stamps = {
                (str(topic), int(partition)): _timestamp(by, str(stamp))
                for topic, partitions in parsed.items()
                for partition, stamp in partitions.items()
            }
        except (ValueError, AttributeError, TypeError):
            raise ConfigError(
                f'option {by} must be JSON like {{"topicA": {{"0": 1700000000000, "1": '
                f"1700000000000}}}} (milliseconds since the epoch), not {raw!r}"
            ) from None
        return OffsetSpec(by, "timestamp", per_partition=stamps)
    name = f"{which}Offsets"
    found = _offsets_json(options, name)
    if isinstance(found, str):
        return OffsetSpec(name, found)
    return OffsetSpec(name, "offsets", per_partition=found)


def _timestamp(option: str, raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(
            f"option {option} must be milliseconds since the epoch (a long), not {raw!r}"
        ) from None
    if value < 0:
        raise ConfigError(f"option {option} must be a timestamp >= 0, not {value}")
    return value


def timestamp_strategy(options: dict[str, str]) -> str:
    """``startingOffsetsByTimestampStrategy``: ``error`` (default) or ``latest``."""
    raw = options.get("startingoffsetsbytimestampstrategy", "error")
    if raw.strip().lower() not in STRATEGIES:
        raise ConfigError(
            f'option startingOffsetsByTimestampStrategy must be "error" or "latest", not {raw!r}'
        )
    return raw.strip().lower()


class LogBounds(NamedTuple):
    """A partition's directory and its log start and log end offsets, as the files show."""

    directory: str
    log_start: int
    log_end: int


def timestamp_offsets(
    spec: OffsetSpec, bounds: Mapping[TopicPartition, LogBounds], *, strategy: str | None
) -> dict[TopicPartition, int]:
    """Per partition, the earliest offset whose timestamp is at or after the spec's timestamp,
    as Kafka's ListOffsets answers. Where no record qualifies: with ``strategy`` (a start)
    ``error`` fails and ``latest`` gives the log end; without (an end), the log end."""
    if spec.timestamp is None:
        named, selected = set(spec.per_partition), set(bounds)
        if named != selected:
            missing = ", ".join(f"{t}-{p}" for t, p in sorted(selected - named)) or "none"
            extra = ", ".join(f"{t}-{p}" for t, p in sorted(named - selected)) or "none"
            raise ConfigError(
                f"option {spec.option} must name every partition read, and only those, as "
                f"Spark's Kafka source requires (missing: {missing}; not read: {extra})"
            )
    found = {}
    for (topic, partition), b in bounds.items():
        stamp = spec.per_partition[(topic, partition)] if spec.timestamp is None else spec.timestamp
        offset = offset_for_timestamp(b.directory, stamp, b.log_start, b.log_end)
        if offset is None:
            if strategy == "error":
                raise SparkSourceError(
                    f"no record of {topic}-{partition} has a timestamp at or after {stamp} "
                    f"({spec.option}); set startingOffsetsByTimestampStrategy=latest to start "
                    "such partitions at their end"
                )
            offset = b.log_end
        found[(topic, partition)] = offset
    return found


def offset_for_timestamp(
    directory: str, timestamp: int, log_start: int, log_end: int
) -> int | None:
    """The first offset in ``[log_start, log_end)`` of a record whose timestamp is at least
    ``timestamp``, found as Kafka finds it: the first batch whose max timestamp is at least
    ``timestamp``, then its first record that is (``None``: no such record)."""
    from compactlog.records import decode_columns  # noqa: PLC0415

    segments = _segment_files(directory)
    for i, (base, path) in enumerate(segments):
        next_base = segments[i + 1][0] if i + 1 < len(segments) else None
        if next_base is not None and next_base <= log_start:
            continue
        if base >= log_end:
            break
        for batch in _file_batches(path, sealed=next_base is not None):
            header = batch.header
            if header.base_offset >= log_end:
                return None
            if header.last_offset < log_start or header.max_timestamp < timestamp:
                continue
            columns = decode_columns(bytes(batch.data), verify_crc=True)
            offsets = columns.offsets
            hits = np.flatnonzero(
                (offsets >= log_start) & (offsets < log_end) & (columns.timestamps >= timestamp)
            )
            if len(hits):
                return int(offsets[hits[0]])
    return None


def _log_start_offsets(path: str) -> dict[tuple[str, int], int]:
    """The store's log-start-offset checkpoint (topic-partition -> offset), if any."""
    fs = filesystem(path)
    name = os.path.join(path, LOG_START_OFFSET_CHECKPOINT)
    if not fs.exists(name):
        return {}
    data = fs.read_file(name)
    return parse_checkpoint(data, LOG_START_OFFSET_CHECKPOINT)


def _segment_files(directory: str) -> list[tuple[int, str]]:
    """``(base offset, path)`` of the partition's segments, by base offset."""
    segments = []
    for name in filesystem(directory).listdir(directory):
        stem, dot, ext = name.partition(".")
        if ext == "log" and dot and stem.isdigit() and len(stem) == 20:
            segments.append((int(stem), os.path.join(directory, name)))
    return sorted(segments)


def _log_end_offset(segments: list[tuple[int, str]]) -> int:
    """One past the last offset of the last complete batch (the log end offset on disk)."""
    for i, (base, path) in enumerate(reversed(segments)):
        last = -1
        for _, _, batch_last in _walk_batches(path, sealed=i > 0):
            last = batch_last
        if last >= 0:
            return last + 1
        if filesystem(path).file_size(path) == 0 and base > 0:
            return base  # an empty active segment: the log ends where it starts
    return 0


def plan_ranges(path: str, options: dict[str, str]) -> list[PartitionRange]:
    """The offset range to read of every selected partition (empty ranges left out)."""
    dirs = select_partitions(_partition_dirs(path), options, check_assigned=True)
    starting = offset_spec(options, "starting")
    ending = offset_spec(options, "ending")
    strategy = timestamp_strategy(options)
    if starting.kind == "latest":
        raise ConfigError('startingOffsets "latest" is not valid for a batch read')
    if ending.kind == "earliest":
        raise ConfigError('endingOffsets "earliest" is not valid for a batch read')
    for spec, refused, word in ((starting, LATEST, "latest"), (ending, EARLIEST, "earliest")):
        if spec.kind == "offsets":
            for (topic, partition), offset in sorted(spec.per_partition.items()):
                if offset == refused:
                    raise ConfigError(
                        f"{spec.option} for {topic}-{partition} cannot be {word} ({offset}) "
                        "for a batch read"
                    )
    fail_on_data_loss = _flag(options, "failOnDataLoss", True)
    log_starts = _log_start_offsets(path)
    bounds = {}
    for (topic, partition), directory in dirs.items():
        segments = _segment_files(directory)
        first_base = segments[0][0] if segments else 0
        log_start = max(first_base, log_starts.get((topic, partition), 0))
        log_end = max(_log_end_offset(segments), log_start)
        bounds[(topic, partition)] = LogBounds(directory, log_start, log_end)
    starts = ends = None
    if starting.kind == "timestamp":
        starts = timestamp_offsets(starting, bounds, strategy=strategy)
    if ending.kind == "timestamp":
        ends = timestamp_offsets(ending, bounds, strategy=None)
    ranges = []
    for (topic, partition), (directory, log_start, log_end) in bounds.items():
        start = log_start
        if starts is not None:
            start = starts[(topic, partition)]
        elif starting.kind == "offsets":
            wanted = starting.per_partition.get((topic, partition), EARLIEST)
            if wanted != EARLIEST:
                if wanted < log_start and fail_on_data_loss:
                    raise SparkSourceError(
                        f"startingOffsets asks for offset {wanted} of {topic}-{partition}, but "
                        f"its log starts at {log_start} (the records before were deleted); "
                        "set failOnDataLoss=false to start at the log start instead"
                    )
                start = min(max(wanted, log_start), log_end)
        stop = log_end
        if ends is not None:
            stop = max(ends[(topic, partition)], start)
        elif ending.kind == "offsets":
            wanted = ending.per_partition.get((topic, partition), LATEST)
            if wanted != LATEST:
                stop = min(max(wanted, start), log_end)
        if start < stop:
            ranges.append(PartitionRange(topic, partition, directory, start, stop))
    return ranges


def _walk_batches(
    path: str, start: int = 0, *, sealed: bool = True
) -> Iterator[tuple[int, int, int]]:
    """``(position, size, last offset)`` of each complete batch from ``start`` (see
    :func:`_file_batches`)."""
    for batch in _file_batches(path, start, sealed=sealed):
        yield batch.position, len(batch.data), batch.header.last_offset


def _file_batches(path: str, start: int = 0, *, sealed: bool = True) -> Iterator[FileBatch]:
    """Each complete batch from ``start``, framed by the storage layer's one walk.

    In the last segment (``sealed=False``) the walk ends quietly at a torn batch or at zeros
    (a writer mid-append, a pre-allocated file); anywhere else bytes that do not frame are
    damage and raise, naming the file and the position, rather than hide the records after
    them.
    """
    handle = filesystem(path).open(path)
    try:
        walk = WalkEnd()
        yield from iter_file_batches(handle, start, stop=walk)
        if walk.problem is not None and (sealed or not _quiet_end(handle, walk)):
            raise SparkSourceError(
                f"{path}: position {walk.position}: damaged bytes: {walk.problem} (see "
                "`compactlog salvage` and `compactlog quarantine`)"
            )
    finally:
        handle.close()


def _quiet_end(handle: FileHandle, walk: WalkEnd) -> bool:
    """A stop a live writer or pre-allocation explains: a torn tail, or zeros to the end."""
    if walk.torn:
        return True
    rest = handle.read_at(walk.position, min(handle.size() - walk.position, 1 << 20))
    return not rest.strip(b"\0")


def segment_splits(part: PartitionRange, split_bytes: int) -> list[SegmentSplit]:
    """Byte ranges of ``part``'s segments, cut at batch boundaries into as few ranges of at
    most about ``split_bytes`` as will do, of about equal size (no small remainder task), each
    with its chunk cuts; segments wholly outside the offset range are skipped."""
    return [
        split
        for path, batches in segment_batches(part)
        for split in _splits(part, path, batches, split_bytes)
    ]


def segment_batches(part: PartitionRange) -> list[tuple[str, list[int]]]:
    """Per segment holding offsets of ``part``: its path, and the positions of the batches that
    hold them followed by the end of the last one."""
    segments = _segment_files(part.directory)
    found = []
    for i, (base, path) in enumerate(segments):
        next_base = segments[i + 1][0] if i + 1 < len(segments) else None
        if base >= part.stop or (next_base is not None and next_base <= part.start):
            continue
        batches = []
        for pos, size, last in _walk_batches(path, sealed=next_base is not None):
            if last < part.start:
                continue
            batches.append(pos)
            end = pos + size
            if last >= part.stop - 1:
                break
        if batches:
            found.append((path, [*batches, end]))
    return found


def _splits(
    part: PartitionRange, path: str, batches: list[int], split_bytes: float
) -> list[SegmentSplit]:
    pieces = math.ceil((batches[-1] - batches[0]) / split_bytes)
    target = (batches[-1] - batches[0]) / pieces
    return [
        SegmentSplit(
            path,
            part.topic,
            part.partition,
            piece[0],
            piece[-1],
            part.start,
            part.stop,
            tuple(piece[1:-1]),
        )
        for piece in _cut(batches, target, CHUNK_BYTES)
    ]


def _cut(positions: list[int], target: float, chunk: int) -> list[list[int]]:
    """``positions`` (batch starts, then the end) grouped into pieces of about ``target`` bytes,
    each given as its start, its chunk cuts about ``chunk`` bytes apart, and its end."""
    pieces: list[list[int]] = []
    piece = [positions[0]]
    for pos in positions[1:-1]:
        if pos - piece[0] >= target:
            piece.append(pos)
            pieces.append(piece)
            piece = [pos]
        elif pos - piece[-1] >= chunk:
            piece.append(pos)
    piece.append(positions[-1])
    pieces.append(piece)
    return pieces


@dataclass
class _Group:
    """A split being built by :func:`record_splits`."""

    path: str
    start: int
    end: int
    first: int
    records: int
    cuts: list[int]


def record_splits(part: PartitionRange, split_bytes: float, max_records: int) -> list[SegmentSplit]:
    """``part`` cut into splits of at most ``max_records`` records (``maxRecordsPerPartition``)
    and, where a batch boundary allows, about ``split_bytes`` bytes, filling each split before
    starting the next. Records are counted, not offsets (a compacted range holds fewer records
    than offsets); a batch whose records do not fit the split being filled is shared with the
    next split, each reading its own offsets of it (only such batches, and those cut by the
    range's ends, are decoded here)."""
    from compactlog.records import decode_columns  # noqa: PLC0415

    groups: list[_Group] = []
    for path, batches in segment_batches(part):
        for batch in _file_batches(path, batches[0], sealed=False):  # walked once already
            if batch.position >= batches[-1]:
                break
            header, position = batch.header, batch.position
            end = position + len(batch.data)
            offsets = None
            if header.attributes & CONTROL_FLAG_MASK:
                count = 0
            elif header.base_offset >= part.start and header.last_offset < part.stop:
                count = header.records_count
            else:
                offsets = decode_columns(bytes(batch.data), verify_crc=True).offsets
                offsets = offsets[(offsets >= part.start) & (offsets < part.stop)]
                count = len(offsets)
            taken = 0
            while True:
                group = groups[-1] if groups else None
                if (
                    group is None
                    or group.path != path
                    or group.records >= max_records
                    or (taken == 0 and group.records and end - group.start > split_bytes)
                ):
                    if taken and offsets is None:
                        offsets = decode_columns(bytes(batch.data), verify_crc=True).offsets
                    first = int(offsets[taken]) if taken and offsets is not None else 0
                    first = max(first if taken else header.base_offset, part.start)
                    group = _Group(path, position, end, first, 0, [])
                    groups.append(group)
                elif position - (group.cuts[-1] if group.cuts else group.start) >= CHUNK_BYTES:
                    group.cuts.append(position)
                take = min(count - taken, max_records - group.records)
                group.records += take
                group.end = end
                taken += take
                if taken >= count:
                    break
    firsts = [part.start, *(g.first for g in groups[1:])]
    stops = [*firsts[1:], part.stop]
    return [
        SegmentSplit(g.path, part.topic, part.partition, g.start, g.end, first, stop, tuple(g.cuts))
        for g, first, stop in zip(groups, firsts, stops, strict=True)
    ]


# --- reading ---------------------------------------------------------------------------------


def read_split(split: SegmentSplit, headers: bool) -> Iterator[Any]:
    """Arrow record batches of the records of ``split`` in its offset range, a chunk at a time."""
    bounds = [split.start, *split.cuts, split.end]
    handle = filesystem(split.path).open(split.path)
    try:
        for lo, hi in itertools.pairwise(bounds):
            data = handle.read_at(lo, hi - lo)
            if len(data) != hi - lo:
                raise SparkSourceError(
                    f"{split.path} is shorter than planned ({lo + len(data)} bytes, not "
                    f"{split.end}): was the log cleaned or truncated during the read?"
                )
            try:
                yield from _arrow_batches(data, split, headers)
            except CorruptRecordError as exc:
                raise type(exc)(
                    f"{split.path}: the batches at bytes {lo}..{hi} are damaged: {exc} (see "
                    "`compactlog salvage` and `compactlog quarantine`)"
                ) from exc
    finally:
        handle.close()


def _arrow_batches(data: bytes, split: SegmentSplit, headers: bool) -> Iterator[Any]:
    """Arrow record batches of the records of whole batches ``data`` in ``split``'s range."""
    import pyarrow as pa  # noqa: PLC0415

    from compactlog.records import decode_columns  # noqa: PLC0415
    from compactlog.spark._arrow import binary_array, constant_string_array  # noqa: PLC0415

    columns = decode_columns(data, verify_crc=True)
    control = (columns.batch_attributes & CONTROL_FLAG_MASK) != 0
    log_append = (columns.batch_attributes & TIMESTAMP_TYPE_MASK) != 0
    index = columns.batch_index
    keep = ~control[index] & (columns.offsets >= split.first) & (columns.offsets < split.stop)
    rows = np.flatnonzero(keep)
    n = len(rows)
    if n == 0:
        return
    fields: list[Any] = [
        binary_array(columns.data, columns.key_pos[rows], columns.key_len[rows]),
        binary_array(columns.data, columns.value_pos[rows], columns.value_len[rows]),
        constant_string_array(split.topic, n),
        pa.array(np.full(n, split.partition, np.int32)),
        pa.array(columns.offsets[rows]),
        pa.array(columns.timestamps[rows] * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(log_append[index[rows]].astype(np.int32)),
    ]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if headers:
        from compactlog.spark._headers import headers_array  # noqa: PLC0415

        fields.append(headers_array(columns, rows))
        names.append("headers")
    table = pa.RecordBatch.from_arrays(fields, names=names)
    for lo in range(0, n, ARROW_BATCH_ROWS):
        yield table.slice(lo, ARROW_BATCH_ROWS)
