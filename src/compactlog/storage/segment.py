"""One segment: a ``.log`` file and its offset and time indexes (Kafka's ``LogSegment``).

A segment is named by its base offset, rendered as 20 decimal digits. Only the active (last)
segment of a log receives appends. The indexing rule is Kafka's (spec 2.7): before an append is
counted, if more than ``index.interval.bytes`` were appended since the last index entry, an entry
``(largest offset of this append, position where this append starts)`` is added, so the first
append of a segment is never indexed.

Recovery (:meth:`LogSegment.recover`, spec 1.6) re-reads the file, checks every batch (framing,
CRC, offset range), rebuilds both indexes with the same rule applied per batch, and truncates the
file after the last valid batch.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass

from compactlog.errors import CompactlogError, CorruptRecordError
from compactlog.records import is_crc_valid
from compactlog.storage.file_records import FileBatch, iter_file_batches
from compactlog.storage.fs import FileHandle, FileSystem
from compactlog.storage.index import OffsetIndex, TimeIndex

# (largest offset, largest timestamp, offset of the largest timestamp, byte length)
AppendPiece = tuple[int, int, int, int]

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

MAX_RELATIVE_OFFSET = 2**31 - 1


def filename_prefix(offset: int) -> str:
    """Kafka's segment file name: the offset as 20 zero-padded decimal digits."""
    return f"{offset:020d}"


def offset_from_filename(name: str) -> int:
    """The offset a file name starts with (the digits before the first ``.``)."""
    return int(name.split(".", 1)[0])


class OffsetOverflowError(CompactlogError):
    """An offset that cannot be stored relative to its segment's base offset."""


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
            self._log.truncate(settings.segment_bytes)
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

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        data: bytes | bytearray,
    ) -> None:
        """Append whole batches whose last offset is ``largest_offset``."""
        if data:
            self.append_pieces(
                data, [(largest_offset, largest_timestamp, offset_of_max_timestamp, len(data))]
            )

    def append_pieces(
        self, data: bytes | bytearray | memoryview, pieces: list[AppendPiece]
    ) -> None:
        """Several :meth:`append` calls in one write: ``data`` is the pieces back to back, and
        each piece gets exactly the index and timestamp bookkeeping its own ``append`` would
        have had (``(largest_offset, largest_timestamp, offset_of_max_timestamp, length)``)."""
        start = self._size
        for largest_offset, _, _, _ in pieces:
            self.check_offset_in_range(largest_offset)
        self._log.write_at(start, data)
        with self.offset_index.batched_writes(), self.time_index.batched_writes():
            self._index_pieces(start, pieces)

    def _index_pieces(self, start: int, pieces: list[AppendPiece]) -> None:
        position = start
        for largest_offset, largest_timestamp, offset_of_max_timestamp, length in pieces:
            if not length:
                continue
            if position == 0:
                self._rolling_based_timestamp = largest_timestamp
                self._rolling_based_timestamp_known = True
            if largest_timestamp > self.max_timestamp_so_far:
                self._max_timestamp = largest_timestamp
                self._offset_of_max_timestamp = offset_of_max_timestamp
            if self.bytes_since_last_index_entry > self.settings.index_interval_bytes:
                self.offset_index.append(largest_offset, position)
                self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += length
            position += length
            self._next_offset = largest_offset + 1
        self._size = position

    # --- reading ------------------------------------------------------------------------
    def batches(self, start_position: int = 0) -> Iterator[FileBatch]:
        return iter_file_batches(self._log, start_position, self._size)

    def translate_offset(self, offset: int) -> FileBatch | None:
        """The first batch whose last offset is >= ``offset`` (searching from the index)."""
        _, position = self.offset_index.lookup(offset)
        for batch in self.batches(position):
            if batch.header.last_offset >= offset:
                return batch
        return None

    def find_offset_by_timestamp(self, timestamp: int) -> FileBatch | None:
        """The first batch with a max timestamp >= ``timestamp`` (Kafka's findOffsetByTimestamp)."""
        _, offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(offset)
        for batch in self.batches(position):
            if batch.header.max_timestamp >= timestamp:
                return batch
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (scanning from the last index entry)."""
        if self._next_offset is None:
            _, position = self.offset_index.last_entry()
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

    # --- recovery -----------------------------------------------------------------------
    def recover(self) -> int:
        """Rebuild the indexes from the log and cut the log after its last valid batch.

        Returns the number of bytes truncated. Stops at the first batch that fails framing,
        CRC or offset-range checks (spec 1.6).
        """
        self.offset_index.reset()
        self.time_index.reset()
        valid_bytes = 0
        last_index_position = 0
        max_ts, offset_of_max_ts = -1, self.base_offset
        next_offset = self.base_offset
        first_ts: int | None = None
        try:
            for batch in iter_file_batches(self._log, 0, self._log.size()):
                header = batch.header
                if not is_crc_valid(batch.data):
                    break
                if not 0 <= header.last_offset - self.base_offset <= MAX_RELATIVE_OFFSET:
                    break
                if header.base_offset < next_offset and next_offset > self.base_offset:
                    break  # offsets must increase: a batch that goes backwards is damage
                if first_ts is None:
                    first_ts = header.max_timestamp
                if header.max_timestamp > max_ts:
                    max_ts, offset_of_max_ts = header.max_timestamp, header.last_offset
                if valid_bytes - last_index_position > self.settings.index_interval_bytes:
                    self.offset_index.append(header.last_offset, valid_bytes)
                    self.time_index.maybe_append(max_ts, offset_of_max_ts)
                    last_index_position = valid_bytes
                valid_bytes += header.size_in_bytes
                next_offset = header.next_offset
        except CorruptRecordError:
            pass
        truncated = self._log.size() - valid_bytes
        if truncated > 0:
            self._log.truncate(valid_bytes)
        self._size = valid_bytes
        self.offset_index.trim()
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max_ts
        self._max_timestamp_known = True
        self.time_index.maybe_append(max_ts, offset_of_max_ts, skip_full_check=True)
        self.time_index.trim()
        self._rolling_based_timestamp = first_ts
        self._rolling_based_timestamp_known = True
        self._next_offset = next_offset
        self.bytes_since_last_index_entry = 0
        return truncated

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
