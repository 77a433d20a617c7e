"""One segment: a ``.log`` file and its offset and time indexes (Kafka's ``LogSegment``).

A segment is named by its base offset, rendered as 20 decimal digits. Only the active (last)
segment of a log receives appends. The indexing rule is Kafka 4.4's ``LogSegment.append``: the
appended bytes are whole batches, and for each batch in turn, its max timestamp updates the
segment's largest timestamp (with the batch's last offset), then, if more than
``index.interval.bytes`` were written since the last index entry, an offset-index entry
``(batch's last offset, batch's position)`` and a time-index entry (the largest timestamp so
far, its offset) are added, then the batch's size is counted. So the first batch of a segment
is never indexed, and a multi-batch append (a cleaned chunk, a producer's request) is indexed
batch by batch. (Kafka 4.0 indexed once per append call, at the append's start; 4.4 is the
reference here.)

Recovery (spec 1.6) is in two steps. :meth:`LogSegment.rebuild_indexes` re-reads the file,
checks every batch (framing, CRC, offset range) and rebuilds both indexes over the valid ones
with the same rule applied per batch, skipping damaged ranges (see :mod:`.salvage`) and changing
no byte of the log. :meth:`LogSegment.cut_damage` then removes damaged ranges the caller has
already quarantined: a tail by truncation, anything else by rewriting the file without them.
Kafka truncates at the first invalid batch instead; compactlog keeps every valid batch after it.

Reads (:meth:`LogSegment.batches`) are strict: the segment's size counts whole batches only, so
a batch that is torn or unframed inside it is damage and raises, naming the file and position;
with ``verify_crc`` every batch's CRC is checked before it is handed out.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from compactlog.errors import CompactlogError, CorruptRecordError, OffsetOverflowError
from compactlog.records import RecordBatch, compute_crc
from compactlog.records.batch_header import CRC_STRUCT
from compactlog.storage.file_records import FileBatch, WalkEnd, iter_file_batches
from compactlog.storage.fs import FileHandle, FileSystem
from compactlog.storage.index import IndexMark, OffsetIndex, TimeIndex
from compactlog.storage.salvage import MAX_RELATIVE_OFFSET, DamagedRange, salvage_walk

#: The header fields an append's bookkeeping reads, in one unpack: baseOffset (at 0),
#: batchLength (8; it counts the bytes after the first 12), lastOffsetDelta (23), maxTimestamp
#: (35).
_BOOKKEEPING = struct.Struct(">qi11xi8xq")
_LOG_OVERHEAD = 12


@dataclass(frozen=True)
class AppendedBatches:
    """The batches of one append, one entry each, in file order: last offset, max timestamp
    (as in the batch header) and size in bytes."""

    last_offsets: np.ndarray
    max_timestamps: np.ndarray
    sizes: np.ndarray

    @classmethod
    def of(cls, data: bytes | bytearray | memoryview) -> AppendedBatches:
        """Read the header fields of every batch of ``data`` (whole, valid batches)."""
        fields = batch_fields(data)
        return cls(
            np.array([f[0] for f in fields], np.int64),
            np.array([f[1] for f in fields], np.int64),
            np.array([f[2] for f in fields], np.int64),
        )


def batch_fields(data: bytes | bytearray | memoryview) -> list[tuple[int, int, int]]:
    """(last offset, max timestamp, size) of every batch of ``data`` (whole, valid batches)."""
    fields = []
    position, end = 0, len(data)
    while position < end:
        base, length, last_delta, max_ts = _BOOKKEEPING.unpack_from(data, position)
        fields.append((base + last_delta, max_ts, length + _LOG_OVERHEAD))
        position += length + _LOG_OVERHEAD
    return fields


#: Below this many batches an append is bookkept batch by batch in Python (numpy's calls cost
#: more than they save on a few batches, and a producer's append is one batch); above, vectorized.
_VECTORIZE_FROM = 32


LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
# compactlog's own, transient: the offset range a swap replaces (see Log.replace_segments).
SWAP_RANGE_SUFFIX = ".swaprange"

# compactlog's own, transient: a segment rewritten without its damaged ranges, before it
# replaces the .log (see LogSegment.cut_damage); a leftover is removed at open.
SALVAGED_SUFFIX = ".salvaged"
_CRC_POSITION = 17


def filename_prefix(offset: int) -> str:
    """Kafka's segment file name: the offset as 20 zero-padded decimal digits."""
    return f"{offset:020d}"


def offset_from_filename(name: str) -> int:
    """The offset a file name starts with (the digits before the first ``.``)."""
    return int(name.split(".", 1)[0])


class SegmentMark(NamedTuple):
    """A segment's state before an append or a roll, which :meth:`LogSegment.rollback` returns
    to: its data size, the ``.log`` file's length (larger when pre-allocated) and how many writes
    were attempted on it, both indexes' marks, and the bookkeeping of the module doc."""

    size: int
    log_length: int
    log_changes: int
    offset_index: IndexMark
    time_index: IndexMark
    max_timestamp: int
    offset_of_max_timestamp: int
    max_timestamp_known: bool
    rolling_based_timestamp: int | None
    rolling_based_timestamp_known: bool
    bytes_since_last_index_entry: int
    next_offset: int | None


@dataclass(frozen=True)
class SegmentSettings:
    """The topic configs a segment itself needs."""

    index_interval_bytes: int
    segment_index_bytes: int
    preallocate: bool
    segment_bytes: int


class LogSegment:
    """A ``.log`` file with its ``.index`` and ``.timeindex``, and the ``.txnindex`` Kafka
    writes beside them after an aborted transaction: compactlog writes none, but one found is
    the segment's, renamed and deleted with it (as Kafka's ``LogSegment`` does)."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        base_offset: int,
        settings: SegmentSettings,
        *,
        now_ms: int,
        roll_jitter_ms: int = 0,
        suffix: str = "",
        create: bool = True,
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        self.settings = settings
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = now_ms
        prefix = os.path.join(directory, filename_prefix(base_offset))
        self.suffix = suffix
        self.log_path = prefix + LOG_SUFFIX + suffix
        existed = fs.exists(self.log_path)
        if not existed and not create:
            raise CompactlogError(f"segment file {self.log_path} does not exist")
        self._log: FileHandle = fs.open(self.log_path, create=True)
        self._size = self._log.size()
        if not existed and settings.preallocate and suffix == "":
            try:
                self._log.truncate(settings.segment_bytes)
            except BaseException:
                self._log.close()  # the caller removes the file it could not set up
                raise
        self.offset_index = OffsetIndex(
            fs, prefix + INDEX_SUFFIX + suffix, base_offset, settings.segment_index_bytes
        )
        self.time_index = TimeIndex(
            fs, prefix + TIME_INDEX_SUFFIX + suffix, base_offset, settings.segment_index_bytes
        )
        self.txn_index_path = prefix + TXN_INDEX_SUFFIX + suffix
        self._max_timestamp = -1
        self._offset_of_max_timestamp = base_offset
        self._max_timestamp_known = not existed
        self._rolling_based_timestamp: int | None = None
        self._rolling_based_timestamp_known = not existed
        self.bytes_since_last_index_entry = 0
        self._next_offset: int | None = base_offset if not existed else None
        self._log_changes = 0  # writes to the .log attempted (see mark/rollback)

    # --- identity and sizes ---------------------------------------------------------------
    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size})"

    @property
    def size(self) -> int:
        """Bytes of data in the ``.log`` file (excluding pre-allocated space)."""
        return self._size

    @property
    def log(self) -> FileHandle:
        return self._log

    def load_indexes(self) -> None:
        self.offset_index.load()
        self.time_index.load()

    # --- timestamps ---------------------------------------------------------------------
    def _load_max_timestamp(self) -> None:
        if not self._max_timestamp_known:
            ts, offset = self.time_index.last_entry()
            self._max_timestamp, self._offset_of_max_timestamp = ts, offset
            self._max_timestamp_known = True

    @property
    def max_timestamp_so_far(self) -> int:
        self._load_max_timestamp()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        self._load_max_timestamp()
        return self._offset_of_max_timestamp

    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's modification time when it has none."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return self.fs.mtime_ms(self.log_path)

    def rolling_based_timestamp(self) -> int | None:
        """The max timestamp of the first batch (what ``segment.ms`` rolling measures from)."""
        if not self._rolling_based_timestamp_known:
            first = next(self.batches(), None)
            self._rolling_based_timestamp = None if first is None else first.header.max_timestamp
            self._rolling_based_timestamp_known = True
        return self._rolling_based_timestamp

    def first_batch_timestamp(self) -> int:
        """Kafka's ``getFirstBatchTimestamp``: the first batch's max timestamp, or Long.MAX."""
        ts = self.rolling_based_timestamp()
        return 2**63 - 1 if ts is None else ts

    # --- appends ------------------------------------------------------------------------
    def check_offset_in_range(self, offset: int) -> None:
        if not 0 <= offset - self.base_offset <= MAX_RELATIVE_OFFSET:
            raise OffsetOverflowError(
                f"offset {offset} cannot be stored in the segment with base offset "
                f"{self.base_offset} (relative offsets are 32-bit)"
            )

    def mark(self) -> SegmentMark:
        """The state :meth:`rollback` returns to, taken before an append or a roll."""
        return SegmentMark(
            self._size,
            self._log.size(),
            self._log_changes,
            self.offset_index.mark(),
            self.time_index.mark(),
            self._max_timestamp,
            self._offset_of_max_timestamp,
            self._max_timestamp_known,
            self._rolling_based_timestamp,
            self._rolling_based_timestamp_known,
            self.bytes_since_last_index_entry,
            self._next_offset,
        )

    def rollback(self, mark: SegmentMark) -> None:
        """Undo a failed append (or the first steps of a failed roll): the bookkeeping returns
        to ``mark`` at once (readers stop at the old size), then the index entries added since
        are removed from the files, and the ``.log`` is cut back to its old size (and extended
        back to its pre-allocated length, so the tail reads as zeros as before). A file nothing
        was attempted on is not touched. Raises the I/O error if a file cannot be restored."""
        self._size = mark.size
        self._max_timestamp = mark.max_timestamp
        self._offset_of_max_timestamp = mark.offset_of_max_timestamp
        self._max_timestamp_known = mark.max_timestamp_known
        self._rolling_based_timestamp = mark.rolling_based_timestamp
        self._rolling_based_timestamp_known = mark.rolling_based_timestamp_known
        self.bytes_since_last_index_entry = mark.bytes_since_last_index_entry
        self._next_offset = mark.next_offset
        self.offset_index.rollback(mark.offset_index)
        self.time_index.rollback(mark.time_index)
        if self._log_changes != mark.log_changes or self._log.size() != mark.log_length:
            self._log.truncate(mark.size)
            if mark.log_length != mark.size:
                self._log.truncate(mark.log_length)
            self._log_changes = mark.log_changes

    def append(
        self,
        data: bytes | bytearray | memoryview,
        fields: list[tuple[int, int, int]] | None = None,
    ) -> None:
        """Append whole batches: the bookkeeping (see the module doc) reads their headers, or
        takes ``fields``, the (last offset, max timestamp, size) of each, if the caller has
        them."""
        if data:
            fields = batch_fields(data) if fields is None else fields
            self.check_offset_in_range(fields[-1][0])  # last offsets only grow
            self._append(data, fields)

    def append_batches(
        self, data: bytes | bytearray | memoryview, batches: AppendedBatches
    ) -> None:
        """Append ``data``, the whole batches ``batches`` describes, in one write."""
        n = len(batches.sizes)
        if not n:
            return
        self.check_offset_in_range(int(batches.last_offsets.max()))
        if n < _VECTORIZE_FROM:
            fields = zip(
                batches.last_offsets.tolist(),
                batches.max_timestamps.tolist(),
                batches.sizes.tolist(),
                strict=True,
            )
            self._append(data, list(fields))
            return
        start = self._size
        self._log_changes += 1  # before the call: a failed write may have written a part
        self._log.write_at(start, data)
        with self.offset_index.batched_writes(), self.time_index.batched_writes():
            self._index_batches(start, batches)

    def _append(
        self, data: bytes | bytearray | memoryview, fields: list[tuple[int, int, int]]
    ) -> None:
        """Kafka 4.4's ``LogSegment.append`` loop, batch by batch (for a few batches)."""
        start = self._size
        self._log_changes += 1  # before the call: a failed write may have written a part
        self._log.write_at(start, data)
        position = start
        with self.offset_index.batched_writes(), self.time_index.batched_writes():
            for last, max_ts, size in fields:
                if position == 0:
                    self._rolling_based_timestamp = max_ts
                    self._rolling_based_timestamp_known = True
                if max_ts > self.max_timestamp_so_far:
                    self._max_timestamp, self._offset_of_max_timestamp = max_ts, last
                if self.bytes_since_last_index_entry > self.settings.index_interval_bytes:
                    self.offset_index.append(last, position)
                    self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
                    self.bytes_since_last_index_entry = 0
                self.bytes_since_last_index_entry += size
                position += size
        self._size = position
        self._next_offset = fields[-1][0] + 1

    def _index_batches(self, start: int, batches: AppendedBatches) -> None:
        """:meth:`_append`'s loop, vectorized for many batches (a cleaned region): the entries
        are found by searching the running byte count, not by visiting every batch."""
        sizes, last, max_ts = batches.sizes, batches.last_offsets, batches.max_timestamps
        n = len(sizes)
        if start == 0:
            self._rolling_based_timestamp = int(max_ts[0])
            self._rolling_based_timestamp_known = True
        # ends[i]: bytes written by batches 0..i-1 of this append; the count of bytes since the
        # last entry before batch i is (carried + ends[i]) until an entry resets it.
        ends = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=ends[1:])
        # Largest timestamp so far before each batch's index check (the batch's own included),
        # and the batch where it was first reached (a later equal one does not move it).
        running = np.maximum.accumulate(max_ts)
        raised = np.flatnonzero(np.r_[True, max_ts[1:] > running[:-1]])
        interval = self.settings.index_interval_bytes
        base = -self.bytes_since_last_index_entry  # ends[i] - base = bytes since, before batch i
        i = 0
        while True:
            i = int(np.searchsorted(ends, base + interval, side="right"))
            if i >= n:
                break
            self._raise_max_timestamp(running, raised, last, i)
            self.offset_index.append(int(last[i]), start + int(ends[i]))
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            base = int(ends[i])  # reset to 0, then this batch's size is counted
        self._raise_max_timestamp(running, raised, last, n - 1)
        self.bytes_since_last_index_entry = int(ends[n]) - base
        self._size = start + int(ends[n])
        self._next_offset = int(last[n - 1]) + 1

    def _raise_max_timestamp(
        self, running: np.ndarray, raised: np.ndarray, last: np.ndarray, i: int
    ) -> None:
        """The segment's largest timestamp after batch ``i`` of the append was counted."""
        if int(running[i]) > self.max_timestamp_so_far:
            first = int(raised[np.searchsorted(raised, i, side="right") - 1])
            self._max_timestamp = int(running[i])
            self._offset_of_max_timestamp = int(last[first])

    # --- reading ------------------------------------------------------------------------
    def batches(
        self, start_position: int = 0, *, verify_crc: bool = False, skip_damage: bool = False
    ) -> Iterator[FileBatch]:
        """The whole batches from ``start_position`` to the segment's size, in file order.

        Bytes that do not frame as a batch raise :class:`CorruptRecordError` naming the file and
        the position (the size counts whole batches only, so a torn batch inside it is damage);
        with ``verify_crc`` so does a batch whose CRC does not match. With ``skip_damage`` the
        walk instead steps over damaged ranges to the next valid batch (replaying producer
        state over a segment whose damage was left in place).
        """
        if skip_damage:
            return (
                item
                for item in salvage_walk(self._log, self.base_offset, start_position, self._size)
                if isinstance(item, FileBatch)
            )
        return self._strict_batches(start_position, verify_crc)

    def _strict_batches(self, start_position: int, verify_crc: bool) -> Iterator[FileBatch]:
        walk = WalkEnd()
        for batch in iter_file_batches(self._log, start_position, self._size, stop=walk):
            if verify_crc:
                data = batch.data
                stored = CRC_STRUCT.unpack_from(data, _CRC_POSITION)[0]
                computed = compute_crc(data, 0, len(data))
                if stored != computed:
                    header = batch.header
                    raise CorruptRecordError(
                        f"{self.log_path}: position {batch.position}: the batch of offsets "
                        f"{header.base_offset}..{header.last_offset} is damaged: CRC mismatch "
                        f"(stored {stored:#010x}, computed {computed:#010x})"
                    )
            yield batch
        if walk.problem is not None:
            raise CorruptRecordError(
                f"{self.log_path}: position {walk.position}: damaged bytes: {walk.problem}"
            )

    def indexed_position(self, offset: int) -> int:
        """Where a walk for ``offset`` may start: the offset index's entry for it, once the
        batch there is checked to begin at or before the entry's offset; else the start of the
        file (an entry that is in order but wrong would otherwise skip records)."""
        entry_offset, position = self.offset_index.lookup(offset)
        if position == 0:
            return 0
        if position < self._size:
            head = self._log.read_at(position, 8)
            if len(head) == 8 and struct.unpack(">q", head)[0] <= entry_offset:
                return position
        return 0

    def translate_offset(self, offset: int, *, verify_crc: bool = False) -> FileBatch | None:
        """The first batch whose last offset is >= ``offset`` (searching from the index).

        Damage between the index entry and ``offset`` does not hide the batches after it: the
        search steps over a damaged range that ends below ``offset`` (the next valid batch
        starts at or before it) and raises only if ``offset`` may lie inside the damage.
        """
        start = self.indexed_position(offset)
        try:
            for batch in self.batches(start, verify_crc=verify_crc):
                if batch.header.last_offset >= offset:
                    return batch
            return None
        except CorruptRecordError:
            for item in salvage_walk(self._log, self.base_offset, start, self._size):
                if isinstance(item, DamagedRange):
                    if item.next_valid_offset is None or offset < item.next_valid_offset:
                        raise
                elif item.header.last_offset >= offset:
                    return item
            return None

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``starting_offset`` whose
        timestamp is at least ``timestamp``, or None (Kafka's ``findOffsetByTimestamp``).

        The time index only says where to start: its last entry may be many batches behind the
        end (an entry is added every ``index.interval.bytes``, and a read-only view of a live
        segment does not read its index at all), so the batches are scanned forward from there
        to the segment's end."""
        _, indexed = self.time_index.lookup(timestamp)
        for batch in self.batches(self.indexed_position(max(indexed, starting_offset))):
            header = batch.header
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            for record in RecordBatch(batch.data).records():
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.offset, record.timestamp
        return None

    def first_batch_reaching(self, timestamp: int) -> FileBatch | None:
        """The first batch with a max timestamp >= ``timestamp`` (index lookup, then a scan)."""
        _, offset = self.time_index.lookup(timestamp)
        for batch in self.batches(self.indexed_position(offset)):
            if batch.header.max_timestamp >= timestamp:
                return batch
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (scanning from the last index entry)."""
        if self._next_offset is None:
            last_indexed, _ = self.offset_index.last_entry()
            position = self.indexed_position(last_indexed)
            next_offset = self.base_offset
            for batch in self.batches(position):
                next_offset = batch.header.next_offset
            self._next_offset = next_offset
        return self._next_offset

    @property
    def next_offset(self) -> int:
        return self.read_next_offset()

    def read_bytes(self, position: int, size: int) -> bytes:
        size = max(0, min(size, self._size - position))
        return self._log.read_at(position, size)

    def map_log(self) -> memoryview:
        """The log's bytes ``[0, size)`` as a read-only memory map (see ``FileHandle.map_read``).

        Only for inactive segments: the active one grows, and its pre-allocated file is
        trimmed when it rolls.
        """
        return self._log.map_read(self._size)

    def limit_to_whole_batches(self) -> None:
        """Only for looking at a file another process may be appending to: the segment's size
        (in memory) becomes the end of its last whole batch, so that a write in progress or
        pre-allocated space is not read as damage. Nothing is written."""
        walk = WalkEnd()
        size = self._log.size()
        max_ts, offset_of_max_ts = -1, self.base_offset
        for batch in iter_file_batches(self._log, 0, size, stop=walk):
            if batch.header.max_timestamp > max_ts:
                max_ts, offset_of_max_ts = batch.header.max_timestamp, batch.header.last_offset
        rest = self._log.read_at(walk.position, min(size - walk.position, 1 << 20))
        if walk.torn or not rest.strip(b"\0"):
            self._size = walk.position  # else damage: left in view, for reads to report
        self._next_offset = None
        # The largest timestamp as the appends kept it: the time index (not read here) lags.
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max_ts
        self._max_timestamp_known = True

    # --- recovery -----------------------------------------------------------------------
    def rebuild_indexes(self, end_offset: int | None = None) -> list[DamagedRange]:
        """Rebuild both indexes from the log over its valid batches; returns the damaged ranges.

        No byte of the log changes and the segment's size becomes the file's size (damage left
        in place stays visible to readers, which fail on it). The indexing rule is the append's,
        batch by batch, plus an offset-index entry at the first valid batch after each damaged
        range, so that a read of a later offset starts beyond the damage. ``end_offset`` is the
        next segment's base offset, when there is one: no batch may reach it.
        """
        self.offset_index.reset()
        self.time_index.reset()
        file_size = self._log.size()
        last_index_position = 0
        max_ts, offset_of_max_ts = -1, self.base_offset
        next_offset = self.base_offset
        first_ts: int | None = None
        damaged: list[DamagedRange] = []
        after_damage = False
        for item in salvage_walk(self._log, self.base_offset, 0, file_size, end_offset=end_offset):
            if isinstance(item, DamagedRange):
                damaged.append(item)
                after_damage = True
                continue
            header, position = item.header, item.position
            if first_ts is None:
                first_ts = header.max_timestamp
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max_ts = header.max_timestamp, header.last_offset
            if after_damage or (
                position - last_index_position > self.settings.index_interval_bytes
            ):
                self.offset_index.append(header.last_offset, position)
                self.time_index.maybe_append(max_ts, offset_of_max_ts)
                last_index_position = position
                after_damage = False
            next_offset = header.next_offset
        self._size = file_size
        self.offset_index.trim()
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max_ts
        self._max_timestamp_known = True
        self.time_index.maybe_append(max_ts, offset_of_max_ts, skip_full_check=True)
        self.time_index.trim()
        self._rolling_based_timestamp = first_ts
        self._rolling_based_timestamp_known = True
        self._next_offset = next_offset
        self.bytes_since_last_index_entry = 0
        return damaged

    def cut_damage(self, damaged: list[DamagedRange], end_offset: int | None = None) -> int:
        """Remove ``damaged`` (as :meth:`rebuild_indexes` found it) from the log and rebuild the
        indexes; returns the bytes removed.

        The caller has already kept any bytes that matter (see :mod:`.quarantine`). Damage at
        the tail only is truncated away; otherwise the valid bytes are copied to
        ``<base>.log.salvaged``, fsynced, and renamed over the ``.log`` (then the directory is
        fsynced), so a crash leaves the old file or the new one.
        """
        if not damaged:
            return 0
        file_size = self._log.size()
        removed = sum(d.size for d in damaged)
        if all(d.tail for d in damaged):
            self._log.truncate(damaged[0].start)
            self._log.sync()
        else:
            target = self.log_path + SALVAGED_SUFFIX
            out = self.fs.open(target, create=True)
            try:
                out.truncate(0)
                written, position = 0, 0
                for d in [*damaged, None]:
                    keep_end = file_size if d is None else d.start
                    while position < keep_end:
                        chunk = self._log.read_at(position, min(8 << 20, keep_end - position))
                        out.write_at(written, chunk)
                        written += len(chunk)
                        position += len(chunk)
                    if d is not None:
                        position = d.end
                out.sync()
            finally:
                out.close()
            self._log.close()
            self.fs.rename(target, self.log_path)
            self.fs.sync_dir(self.directory)
            self._log = self.fs.open(self.log_path)
        left = self.rebuild_indexes(end_offset)
        if left:  # the valid bytes were re-checked as they were copied: not expected
            raise CorruptRecordError(
                f"{self.log_path}: still damaged after cutting {removed} bytes: {left[0].reason}"
            )
        return removed

    # --- life cycle ---------------------------------------------------------------------
    def on_become_inactive(self) -> None:
        """Final time-index entry and trimmed files, as when Kafka rolls past a segment."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.trim()
        self.time_index.trim()
        if self._log.size() != self._size:
            self._log.truncate(self._size)

    def release_index_handles(self) -> None:
        """Close the index files of a segment that no longer receives appends.

        Their entries live in memory, so only writes need the files; like Kafka (which maps its
        indexes and closes the files), an inactive segment then holds one descriptor, its log.
        """
        self.offset_index.close()
        self.time_index.close()

    def make_active(self) -> None:
        """Re-expand the indexes of the segment that receives appends (Kafka does after load)."""
        self.offset_index.preallocate()
        self.time_index.preallocate()

    def sync_log(self) -> None:
        """``fdatasync`` the log file only: early write-back of a segment being filled, so that
        the final :meth:`flush` has less left to wait for."""
        self._log.sync()

    def flush(self) -> None:
        self._log.sync()
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        """Trim the files (the segment is closed cleanly) and release the handles."""
        self.on_become_inactive()
        self.close_handles()

    def close_handles(self) -> None:
        self._log.close()
        self.offset_index.close()
        self.time_index.close()

    def index_paths(self) -> list[str]:
        return [self.offset_index.path, self.time_index.path]

    def all_paths(self) -> list[str]:
        return [self.log_path, *self.index_paths(), self.txn_index_path]

    def aborted_transactions_size(self) -> int:
        """Bytes of Kafka's aborted-transaction index of this segment (0: none recorded)."""
        if not self.fs.exists(self.txn_index_path):
            return 0
        return self.fs.file_size(self.txn_index_path)

    def change_suffix(self, old: str, new: str) -> None:
        """Rename all files of the segment from suffix ``old`` to ``new`` (``""`` = none)."""
        if self.fs.exists(self.log_path):
            target = self.log_path[: len(self.log_path) - len(old)] + new
            self.fs.rename(self.log_path, target)
            self.log_path = target
        for index in (self.offset_index, self.time_index):
            target = index.path[: len(index.path) - len(old)] + new
            if self.fs.exists(index.path):
                index.rename(target)
            else:
                index.path = target
        target = self.txn_index_path[: len(self.txn_index_path) - len(old)] + new
        if self.fs.exists(self.txn_index_path):
            self.fs.rename(self.txn_index_path, target)
        self.txn_index_path = target
        self.suffix = new

    def delete_files(self) -> None:
        self.close_handles()
        for path in self.all_paths():
            self.fs.remove(path)

    def last_modified_ms(self) -> int:
        return self.fs.mtime_ms(self.log_path)

    def set_last_modified_ms(self, mtime_ms: int) -> None:
        for path in self.all_paths():
            if self.fs.exists(path):
                self.fs.set_mtime_ms(path, mtime_ms)


def draw_roll_jitter(segment_jitter_ms: int, segment_ms: int, rng: random.Random) -> int:
    """Kafka's per-segment jitter: ``abs(randomInt) % min(segment.jitter.ms, segment.ms)``."""
    if segment_jitter_ms <= 0:
        return 0
    return abs(rng.randint(-(2**31), 2**31 - 1)) % min(segment_jitter_ms, segment_ms)
