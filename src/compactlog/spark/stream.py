"""The streaming read of the ``compactlog`` source: a data directory's logs as micro-batches.

    query = (spark.readStream.format("compactlog")
             .option("subscribe", "orders")             # or subscribePattern
             .option("startingOffsets", "earliest")     # or "latest", or JSON
             .option("maxOffsetsPerTrigger", "100000")  # optional cap per micro-batch
             .load("data-dir")
             .writeStream.option("checkpointLocation", "ckpt")
             .trigger(availableNow=True)
             .start("out-dir"))

The data directory may be a URI (``s3://``, ``hdfs://``, ``file://``: read-only, see below). The
rows and the options are the batch source's (:mod:`compactlog.spark.source`), with these
differences, as Spark's Kafka source has them:

* ``startingOffsets`` (``earliest``) also takes ``latest``; it applies only when a query starts
  without a checkpoint. Partitions and topics that appear later (``subscribePattern``, or a topic
  created after the start) are read from their earliest offset.
* ``endingOffsets``, ``endingTimestamp`` and ``endingOffsetsByTimestamp`` are refused: a stream
  has no end. So are ``minPartitions`` and ``maxRecordsPerPartition`` (a micro-batch is split
  by ``maxBytesPerSplit``).
* ``maxOffsetsPerTrigger`` (no cap): at most about this many **records** per micro-batch. It is
  shared over the partitions as Spark's Kafka source shares it (``rate_limit``: in proportion
  to each one's backlog of offsets, at least one each), but each partition's share is then
  counted in records (:func:`advance_records`), not offsets. Spark's Kafka source counts offsets,
  so over a compacted backlog (58 records left in 2,000 offsets) it runs one micro-batch per
  ``maxOffsetsPerTrigger`` offsets (100 at 20), nearly all of them empty, each paying Spark's
  planning and checkpoint commit; this source runs 3. On a log without gaps the two agree.
  ``trigger(availableNow=True)`` honours it.
* ``failOnDataLoss`` (``true``) also covers what a stream can lose between micro-batches: offsets
  deleted (by retention or DeleteRecords) before they were read, a partition that disappeared
  (its topic deleted) or went back (deleted and re-created), a new partition whose log no longer
  starts at 0. ``false`` logs a warning and reads what is there.

Offsets, in the checkpoint as Spark's Kafka source writes them: ``{"orders": {"0": 42, "1":
17}}``, per partition the next offset to read. A micro-batch ``[start, end)`` returns the records
with ``start <= offset < end``; no offset arithmetic assumes ``offset + 1`` (compaction leaves
gaps, and an end may fall into one).

Theory of operation
-------------------
Spark keeps one Python process on the driver for the query's stream reader; state kept on
``self`` lives as long as the query does. Tasks get a pickled copy for :meth:`read`.

``latestOffset(start, limit)`` lists the selected partitions and takes each one's log end
offset from the files, as the batch planner does, without the store's lock: a process that has
the store open may be appending meanwhile, and a torn batch at the tail ends the walk. The walk
over the last segment's batch headers resumes where the previous call stopped (segments only
grow), so polling a quiet stream costs directory listings and a ``stat`` per segment. The log
end offsets seen are the latest offsets; the end of the micro-batch is those, capped by the
``availableNow`` target (the log ends when the query started) and by ``maxOffsetsPerTrigger``
(a walk over the batch headers from the start, counting records, for each partition whose
share is smaller than its backlog).

``partitions(start, end)`` turns each partition's ``[start, end)`` into the batch planner's
byte ranges (:func:`~compactlog.spark.source.segment_splits`), each tagged with the segment
file's inode and its own offset sub-range (the sub-ranges of a partition tile ``[start, end)``).
The cleaner replaces segments (``.swap`` renames) and retention deletes them while a stream runs:
a listing taken mid-swap, or one that changed while the byte ranges were computed, is taken
again, so a range can never go missing between a ``.deleted`` and a ``.swap`` rename.

``read(split)`` reads the planned bytes when the file is still the planned inode (before and
after the read); otherwise, the cleaner or retention got there first, it plans the split's offset
sub-range again from the files as they are now. Records compacted away in between are gone for
every reader; offsets deleted by retention are data loss (see ``failOnDataLoss``).

A data directory on ``s3://``, ``hdfs://`` or ``file://`` (a backup that a sync job keeps up to
date; see :mod:`compactlog.spark.remote_fs`, whose ``fs.*`` options a streaming read takes too)
is read the same way, through the read-only adapter (a ``file://`` directory's files are still
followed by inode, as they may be appended to in place). Listings are one request per
directory, and an object's identity is its size and modification time (whole seconds),
since an object is never changed in place, only replaced whole (by a longer one when the active
segment grew, by a cleaned one after compaction). The walk over the last segment starts again
when its object was replaced; a split whose object was replaced after planning is planned
again, as above. A listing that holds swap files (a backup copied mid-swap) is waited on and
then refused as locally. A sync in progress can show a rolled segment before the longer object
of the segment before it: records of that older segment not yet uploaded are then below the
micro-batch's end and are not read by a later one (upload segments in name order, or let the
sync finish before a micro-batch runs: ``trigger(availableNow=True)`` after each sync).

Exactly once: Spark records ``end`` before the micro-batch runs and passes it back as the next
``start``, so consecutive micro-batches tile the offset line; a micro-batch replayed after a
restart is planned again from the same ``start`` and ``end`` and reads the same offsets (less
any records the cleaner dropped meanwhile).
"""

from __future__ import annotations

import logging
import math
import os
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from compactlog.errors import CompactlogError, SparkSourceError
from compactlog.records import CONTROL_FLAG_MASK
from compactlog.spark._options import (
    STREAM_READ,
    check_options,
    plain_error_generator,
    plain_errors,
)
from compactlog.spark.remote_fs import ArrowReadOnlyFileSystem, configure, filesystem, is_uri
from compactlog.spark.source import (
    DEFAULT_SPLIT_BYTES,
    EARLIEST,
    LATEST,
    LogBounds,
    PartitionRange,
    SegmentSplit,
    _file_batches,
    _flag,
    _int_option,
    _log_end_offset,
    _log_start_offsets,
    _partition_dirs,
    _required_path,
    _selected_topics,
    _walk_batches,
    assigned_partitions,
    offset_spec,
    read_split,
    segment_splits,
    select_partitions,
    timestamp_offsets,
    timestamp_strategy,
)
from compactlog.storage.segment import LOG_SUFFIX, SWAP_RANGE_SUFFIX, SWAP_SUFFIX

logger = logging.getLogger("compactlog.spark.stream")

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]
#: What tells a segment file from the one of the same name before it: the inode locally; for
#: a URI (objects are replaced whole, never changed in place) its size and modification time.
FileId = int | tuple[int, int]
#: A cleaner's swap is a handful of renames; waiting this long for one to end means it died
#: mid-swap (opening the store finishes the swap).
SWAP_WAIT_SECONDS = 5.0
SWAP_POLL_SECONDS = 0.02
#: Reads of a split whose segment the cleaner or retention replaced meanwhile, planned again
#: each time; more than a few replacements during one task's read means something is wrong.
READ_ATTEMPTS = 4
_BASE_OFFSET = struct.Struct(">q")


class LogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("compactlog")``: see the module docstring."""

    def __init__(self, options: dict[str, str], headers: bool) -> None:
        check_options(options, STREAM_READ, "a streaming read")
        self.options = options
        self.headers = headers
        self.path = _required_path(options)
        _selected_topics(set(), options)  # assign/subscribe/subscribePattern errors, now
        assigned_partitions(options)
        self.starting = offset_spec(options, "starting")
        self.strategy = timestamp_strategy(options)
        self.fail_on_data_loss = _flag(options, "failOnDataLoss", True)
        self.split_bytes = _int_option(options, "maxBytesPerSplit", DEFAULT_SPLIT_BYTES, 1)
        self.max_offsets: int | None = None
        if "maxoffsetspertrigger" in options:
            self.max_offsets = _int_option(options, "maxOffsetsPerTrigger", 0, 1)
        self._tails: dict[str, _Tail] = {}
        self._cursors: dict[str, RecordCursor] = {}
        self._target: Offsets | None = None
        self._latest: Offsets | None = None

    # --- offsets (the driver) ----------------------------------------------------------------

    @plain_errors
    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's names
        bounds = self._bounds(check_assigned=True)
        if self.starting.kind == "timestamp":
            offsets = timestamp_offsets(self.starting, bounds, strategy=self.strategy)
        elif self.starting.kind != "offsets":
            latest = self.starting.kind == "latest"
            offsets = {tp: b.log_end if latest else b.log_start for tp, b in bounds.items()}
        else:
            offsets = {}
            for (topic, partition), b in bounds.items():
                wanted = self.starting.per_partition.get((topic, partition), EARLIEST)
                if wanted == EARLIEST:
                    wanted = b.log_start
                elif wanted == LATEST:
                    wanted = b.log_end
                elif wanted < b.log_start:
                    self._data_loss(
                        f"startingOffsets asks for offset {wanted} of {topic}-{partition}, but "
                        f"its log starts at {b.log_start} (the records before were deleted)"
                    )
                offsets[(topic, partition)] = min(max(wanted, b.log_start), b.log_end)
        return offsets_to_json(offsets)

    @plain_errors
    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._target = {tp: b.log_end for tp, b in self._bounds().items()}

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        if self.max_offsets is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_offsets)

    @plain_errors
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        begin = offsets_from_json(start)
        bounds = self._bounds()
        self._latest = {tp: b.log_end for tp, b in bounds.items()}
        end = dict(self._latest if self._target is None else self._target)
        if isinstance(limit, ReadMaxRows):
            # A partition new since ``start`` starts at its log start, as partitions() reads it.
            new = {tp: b.log_start for tp, b in bounds.items() if tp not in begin}
            first = {tp: begin.get(tp, new.get(tp, end[tp])) for tp in end}
            shares = rate_limit(limit.max_rows, first, end)
            # Each partition's share, counted in records from its start (a partition whose
            # directory is gone keeps Spark's offset share: partitions() reports the loss).
            end = {
                tp: shares[tp]
                if shares[tp] >= stop or tp not in bounds
                else advance_records(
                    bounds[tp].directory, first[tp], shares[tp] - first[tp], stop, self._cursors
                )
                for tp, stop in end.items()
            }
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802
        return None if self._latest is None else offsets_to_json(self._latest)

    # --- planning (the driver) ---------------------------------------------------------------

    @plain_errors
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        bounds = self._bounds()
        existing = _partition_dirs(self.path)
        for topic, partition in sorted(set(begin) - set(stop)):
            if (topic, partition) not in existing:
                self._data_loss(f"partition {topic}-{partition} is gone (its topic was deleted)")
        splits: list[InputPartition] = []
        for (topic, partition), until in stop.items():
            name = f"{topic}-{partition}"
            b = bounds.get((topic, partition))
            if b is None:
                self._data_loss(f"partition {name} is gone (its topic was deleted)")
                continue
            if (topic, partition) in begin:
                first = begin[(topic, partition)]
            else:
                first = b.log_start
                if first > 0:
                    self._data_loss(f"new partition {name} starts at offset {first}, not 0")
            if until < first:
                self._data_loss(
                    f"the log of {name} went back from offset {first} to {until} (was its "
                    "topic deleted and created again?)"
                )
            elif first < until:
                part = PartitionRange(topic, partition, b.directory, first, until)
                splits.extend(self._plan_readable(part, self.split_bytes))
        return splits

    def _plan_readable(self, part: PartitionRange, split_bytes: int) -> list[StreamSplit]:
        """The splits of ``part`` less its offsets below the log start: those are data loss."""
        name = f"{part.topic}-{part.partition}"
        try:
            splits, disk_start = plan_stream_splits(part, split_bytes)
        except FileNotFoundError:
            self._data_loss(f"partition {name} is gone (its topic was deleted)")
            return []
        # The checkpoint is read after the listing: both only move forwards.
        checkpointed = _log_start_offsets(self.path).get((part.topic, part.partition), 0)
        log_start = max(disk_start, checkpointed)
        if part.start < log_start:
            self._data_loss(
                f"offsets {part.start} to {min(log_start, part.stop) - 1} of {name} were "
                "deleted before the stream read them"
            )
            splits = [replace(s, first=max(s.first, log_start)) for s in splits]
            splits = [s for s in splits if s.first < s.stop]
        return splits

    def _bounds(self, *, check_assigned: bool = False) -> dict[TopicPartition, LogBounds]:
        dirs = select_partitions(
            _partition_dirs(self.path), self.options, check_assigned=check_assigned
        )
        log_starts = _log_start_offsets(self.path)
        bounds = {}
        for (topic, partition), directory in dirs.items():
            try:
                logs = _stable_log_files(directory)
            except FileNotFoundError:
                continue  # its topic was deleted since the listing
            segments = [(int(n[: -len(LOG_SUFFIX)]), os.path.join(directory, n)) for n in logs]
            first_base = segments[0][0] if segments else 0
            log_start = max(first_base, log_starts.get((topic, partition), 0))
            log_end = max(self._log_end(directory, segments), log_start)
            bounds[(topic, partition)] = LogBounds(directory, log_start, log_end)
        return bounds

    def _log_end(self, directory: str, segments: list[tuple[int, str]]) -> int:
        """The log end offset, walking the last segment from where the last call stopped."""
        tail = self._tails.pop(directory, None)
        if not segments:
            return 0
        path = segments[-1][1]
        found = _file_id_and_size(path)
        if found is None:
            return _log_end_offset(segments)
        inode, file_size = found
        if tail is None or (tail.path, tail.inode) != (path, inode):
            tail = _Tail(path, inode, 0, -1)
        if file_size < tail.position:
            tail = _Tail(path, inode, 0, -1)  # truncated (recovery): walk it again
        position, last = tail.position, tail.last
        for batch_position, size, batch_last in _walk_batches(path, position, sealed=False):
            position, last = batch_position + size, batch_last
        self._tails[directory] = _Tail(path, inode, position, last)
        return last + 1 if last >= 0 else _log_end_offset(segments)

    def _data_loss(self, message: str) -> None:
        _data_loss(self.fail_on_data_loss, message)

    # --- reading (the executors) -------------------------------------------------------------

    @plain_error_generator
    def read(self, partition: InputPartition) -> Iterator[Any]:
        split = partition
        assert isinstance(split, StreamSplit)
        configure(self.path, self.options)  # in the executor: its own filesystem, from options
        yield from self._read(split, READ_ATTEMPTS)

    def _read(self, split: StreamSplit, attempts: int) -> list[Any]:
        """The planned bytes if the file is still the planned one, else the split's offsets
        planned again from the files as they are now."""
        batches = _read_if_unchanged(split, self.headers)
        if batches is not None:
            return batches
        if attempts <= 1:
            raise SparkSourceError(f"{split.directory} kept changing while the stream read it")
        part = PartitionRange(
            split.topic, split.partition, split.directory, split.first, split.stop
        )
        return [
            batch
            for again in self._plan_readable(part, 1 << 62)  # one split per segment
            for batch in self._read(again, attempts - 1)
        ]


@dataclass(frozen=True)
class _Tail:
    """Where the last walk over a partition's last segment stopped: the next batch's position
    and the last offset before it (-1: none)."""

    path: str
    inode: FileId
    position: int
    last: int


@dataclass(frozen=True)
class StreamSplit(SegmentSplit):
    """A :class:`SegmentSplit` whose ``[first, stop)`` is its own offset sub-range, with the
    segment's inode at planning and the partition directory to plan it again from."""

    inode: FileId
    directory: str


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """``{"topic": {"partition": offset}}``, topics by name and partitions by number: Spark
    compares offsets as JSON text, so equal offsets must give equal text."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def offsets_from_json(raw: Mapping[str, Any]) -> Offsets:
    """The inverse of :func:`offsets_to_json`; anything else (another source's checkpoint) is
    refused."""
    try:
        return {
            (str(topic), int(partition)): int(offset)
            for topic, partitions in raw.items()
            for partition, offset in partitions.items()
        }
    except (ValueError, AttributeError, TypeError):
        raise SparkSourceError(
            f'offset {raw!r} is not a compactlog offset ({{"topic": {{"0": 42}}}}): does the '
            "checkpoint belong to another source?"
        ) from None


def rate_limit(limit: int, begin: Mapping[TopicPartition, int], end: Offsets) -> Offsets:
    """``end`` capped at about ``limit`` offsets in all, as Spark's Kafka source caps it
    (``KafkaMicroBatchStream.rateLimit``): each partition gets its share of ``limit`` in
    proportion to its backlog, rounded down, or up to one where the share is below one offset so
    that no partition starves."""
    backlog = {tp: stop - begin[tp] for tp, stop in end.items() if stop - begin[tp] > 0}
    total = sum(backlog.values())
    if total < 1:
        return end
    capped = dict(end)
    for tp, size in backlog.items():
        share = limit * (size / total)
        capped[tp] = min(end[tp], begin[tp] + (math.ceil(share) if share < 1 else int(share)))
    return capped


@dataclass(frozen=True)
class RecordCursor:
    """Where :func:`advance_records` last stopped in a partition: the batch at ``position`` of
    segment ``path`` (inode ``inode``), whose base offset is ``base_offset``. A later walk from
    an offset at or after it starts there instead of at the segment's start."""

    path: str
    inode: FileId
    position: int
    base_offset: int


def advance_records(
    directory: str,
    first: int,
    count: int,
    stop: int,
    cursors: dict[str, RecordCursor] | None = None,
) -> int:
    """The end of a micro-batch that starts at ``first`` and holds ``count`` records (not
    offsets) of the partition, or ``stop`` if fewer are left before it: the offset of the
    record after the ``count``-th, so that ``[first, end)`` holds exactly ``count`` records.

    Walks batch headers from the segment holding ``first`` (from ``cursors[directory]`` when
    it is still valid: same file, same inode, at or before ``first``), counting each batch's
    records from its header; only a batch the count ends in, or one cut by ``first`` or
    ``stop``, is decoded for its offsets. Control batches hold no rows. A segment deleted during
    the walk (the cleaner or retention) gives up and returns ``first + count``, Spark's own
    offset count. Where the walk stops is left in ``cursors`` for the next call.
    """
    from compactlog.records import decode_columns  # noqa: PLC0415

    remaining = count
    cursor = (cursors or {}).pop(directory, None)
    try:
        listing = _stable_log_files(directory)
        if cursor is not None and not _cursor_holds(cursor, listing, first):
            cursor = None
        segments = [(int(n[: -len(LOG_SUFFIX)]), os.path.join(directory, n)) for n in listing]
        for i, (base, path) in enumerate(segments):
            next_base = segments[i + 1][0] if i + 1 < len(segments) else None
            if cursor is not None and base < int(os.path.basename(cursor.path)[:20]):
                continue
            if next_base is not None and next_base <= first:
                continue
            if base >= stop:
                break
            start = cursor.position if cursor is not None and cursor.path == path else 0
            for batch in _file_batches(path, start, sealed=next_base is not None):
                header = batch.header
                if header.last_offset < first or header.attributes & CONTROL_FLAG_MASK:
                    continue
                here = RecordCursor(path, listing[os.path.basename(path)], batch.position, 0)
                if header.base_offset >= stop:
                    _remember(cursors, directory, here, header.base_offset)
                    return stop
                inside = header.base_offset >= first and header.last_offset < stop
                if inside and header.records_count <= remaining:
                    remaining -= header.records_count
                    continue
                offsets = decode_columns(bytes(batch.data), verify_crc=True).offsets
                offsets = offsets[(offsets >= first) & (offsets < stop)]
                if len(offsets) > remaining:
                    _remember(cursors, directory, here, header.base_offset)
                    return int(offsets[remaining])
                remaining -= len(offsets)
    except FileNotFoundError:
        return min(stop, first + count)
    return stop


def _cursor_holds(cursor: RecordCursor, listing: dict[str, FileId], first: int) -> bool:
    """Whether ``cursor`` still points at the batch it names: same file and inode, at or
    before ``first``, and the bytes there start with its base offset (an inode number can be
    reused by a later segment of the same name)."""
    if cursor.base_offset > first or listing.get(os.path.basename(cursor.path)) != cursor.inode:
        return False
    data = _read_head(cursor.path, cursor.position, _BASE_OFFSET.size)
    if data is None:
        raise FileNotFoundError(cursor.path)
    return len(data) == _BASE_OFFSET.size and _BASE_OFFSET.unpack(data)[0] == cursor.base_offset


def _remember(
    cursors: dict[str, RecordCursor] | None, directory: str, here: RecordCursor, base: int
) -> None:
    if cursors is not None:
        cursors[directory] = replace(here, base_offset=base)


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream reader whose options were refused: every call raises that error, so that it
    reaches the user alone (see :meth:`CompactlogDataSource.streamReader`)."""

    def __init__(self, error: CompactlogError) -> None:
        self.error = error

    @plain_errors
    def _refuse(self) -> Any:
        raise self.error

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's names
        return self._refuse()  # type: ignore[no-any-return]

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        return self._refuse()  # type: ignore[no-any-return]

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._refuse()

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        return self._refuse()  # type: ignore[no-any-return]

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self._refuse()  # type: ignore[no-any-return]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return self._refuse()  # type: ignore[no-any-return]

    def commit(self, end: dict[str, Any]) -> None:
        self._refuse()

    def stop(self) -> None:
        pass


def plan_stream_splits(part: PartitionRange, split_bytes: int) -> tuple[list[StreamSplit], int]:
    """:func:`segment_splits` of ``part`` with their inodes and offset sub-ranges, from a listing
    that did not change while they were computed; and the base offset of the partition's first
    segment then (``part.stop`` if it had none): offsets below it are no longer on disk."""
    deadline = time.monotonic() + SWAP_WAIT_SECONDS
    while True:
        before = _stable_log_files(part.directory, deadline)
        try:
            splits = segment_splits(part, split_bytes)
            bases = [_base_offset(s) for s in splits[1:]]
        except FileNotFoundError:  # retention deleted a segment: list again
            splits, bases = [], [None]
        if None not in bases and _stable_log_files(part.directory, deadline) == before:
            break
        if time.monotonic() > deadline:
            raise SparkSourceError(
                f"the segments of {part.directory} kept changing while the stream planned them"
            )
    disk_start = int(min(before)[: -len(LOG_SUFFIX)]) if before else part.stop
    if not splits:
        return [], disk_start
    firsts = [part.start, *(max(part.start, b or 0) for b in bases)]
    stops = [*firsts[1:], part.stop]
    return [
        StreamSplit(
            *(s.path, s.topic, s.partition, s.start, s.end, first, stop, s.cuts),
            inode=before[os.path.basename(s.path)],
            directory=part.directory,
        )
        for s, first, stop in zip(splits, firsts, stops, strict=True)
    ], disk_start


def _base_offset(split: SegmentSplit) -> int | None:
    data = _read_head(split.path, split.start, _BASE_OFFSET.size)
    if data is None:
        return None
    return _BASE_OFFSET.unpack(data)[0] if len(data) == _BASE_OFFSET.size else None


def _read_head(path: str, position: int, size: int) -> bytes | None:
    """``size`` bytes of ``path`` at ``position`` (fewer at its end); ``None`` if it is gone."""
    local = _local_path(path)
    if local is not None:
        try:
            with open(local, "rb") as f:
                return os.pread(f.fileno(), size, position)
        except FileNotFoundError:
            return None
    fs = filesystem(path)
    if not fs.exists(path):
        return None
    handle = fs.open(path)
    try:
        return handle.read_at(position, size)
    finally:
        handle.close()


def _listing(directory: str) -> dict[str, FileId | None]:
    """``{name: file id}`` of the entries of ``directory`` (``None``: gone while we looked; a
    URI's listing is one request and has no such entries)."""
    local = _local_path(directory)
    if local is None:
        fs = filesystem(directory)
        assert isinstance(fs, ArrowReadOnlyFileSystem)
        return dict(fs.list_objects(directory))
    found: dict[str, FileId | None] = {}
    for name in os.listdir(local):
        found[name] = _inode_of(os.path.join(local, name)) if _is_segment(name) else -1
    return found


def _local_path(path: str) -> str | None:
    """Where ``path`` is on this machine's filesystem: itself, or a ``file://`` URI's path
    (whose files have inodes, and may be appended to in place by a live writer); ``None`` for
    an object store or HDFS."""
    if not is_uri(path):
        return path
    if path.split("://", 1)[0].lower() == "file":
        return urlsplit(path).path
    return None


def _is_segment(name: str) -> bool:
    stem, dot, ext = name.partition(".")
    return dot + ext == LOG_SUFFIX and stem.isdigit() and len(stem) == 20


def _inode_of(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def _stable_log_files(directory: str, deadline: float | None = None) -> dict[str, FileId]:
    """``{segment file name: file id}`` of the ``.log`` files, from a listing taken while no
    cleaner was swapping segments (a swap renames the old segments ``.deleted`` before the new
    one gets its final name; a listing in between misses offsets). A backup copied to an object
    store mid-swap holds the swap files too: it is refused in the same way, as incomplete."""
    if deadline is None:
        deadline = time.monotonic() + SWAP_WAIT_SECONDS
    while True:
        entries = _listing(directory)
        if not any(n.endswith((SWAP_SUFFIX, SWAP_RANGE_SUFFIX)) for n in entries):
            logs: dict[str, FileId] = {}
            for name, file_id in entries.items():
                if _is_segment(name):
                    if file_id is None:
                        break  # renamed while we looked: list again
                    logs[name] = file_id
            else:
                return dict(sorted(logs.items()))
        if time.monotonic() > deadline:
            raise SparkSourceError(
                f"{directory} has been in the middle of a segment swap for "
                f"{SWAP_WAIT_SECONDS:g} s: a cleaner died mid-swap? (opening the store finishes it)"
            )
        time.sleep(SWAP_POLL_SECONDS)


def _inode(path: str) -> FileId:
    """The file id of ``path`` (see :data:`FileId`), ``-1`` if it is gone."""
    found = _file_id_and_size(path)
    return -1 if found is None else found[0]


def _file_id_and_size(path: str) -> tuple[FileId, int] | None:
    local = _local_path(path)
    if local is None:
        fs = filesystem(path)
        assert isinstance(fs, ArrowReadOnlyFileSystem)
        found = fs.object_id(path)
        return None if found is None else (found, found[0])
    try:
        stat = os.stat(local)
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_size


def _read_if_unchanged(split: StreamSplit, headers: bool) -> list[Any] | None:
    """The split's batches, or ``None`` if its file is not the planned one (before or after)."""
    if _inode(split.path) != split.inode:
        return None
    try:
        batches = list(read_split(split, headers))
    except (OSError, CompactlogError):
        if _inode(split.path) != split.inode:
            return None
        raise
    return batches if _inode(split.path) == split.inode else None


def _data_loss(fail: bool, message: str) -> None:
    if fail:
        raise SparkSourceError(
            f"{message}; set failOnDataLoss=false to read on from what the log holds"
        )
    logger.warning("%s; reading on (failOnDataLoss=false)", message)
