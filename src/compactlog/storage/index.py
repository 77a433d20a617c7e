"""The sparse offset index (``.index``) and time index (``.timeindex``) of a segment.

Spec sections 2.7 and 2.8.

Both are arrays of fixed-size big-endian entries, as Kafka writes them:

* offset index entry, 8 bytes: ``relativeOffset int32`` + ``position int32``;
* time index entry, 12 bytes: ``timestamp int64`` + ``relativeOffset int32``.

Kafka memory-maps these files; here the entries live in Python lists (for ``bisect``) and every
new entry is also written through the filesystem seam at ``entries * entrySize``. The file of an
active segment is pre-allocated (extended with zeros) to ``segment.index.bytes`` rounded down to a
whole number of entries, and trimmed to exactly ``entries * entrySize`` when the segment stops
being active or is closed, so closed segments' index files are byte-identical to Kafka's.

Indexes are a cache of the ``.log`` file: :meth:`check` finds damage (a length that is not a whole
number of entries, entries out of order, positions past the log), and the loader then rebuilds the
index from the log.

Loading is bounded: a file longer than the topic's ``segment.index.bytes`` allows (rounded down to
whole entries, the size of a pre-allocated index) is never read. No index Kafka or compactlog
writes is longer, since a segment rolls when its index is full, so such a file is damage (a
sparse file of 512 MiB took 8.6 s and 2.5 GB to load before): it loads empty and :meth:`check`
reports it, so the loader rebuilds it from the log, which costs no more than reading the log.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from compactlog.errors import CorruptIndexError
from compactlog.records import RECORD_BATCH_OVERHEAD
from compactlog.storage.fs import FileHandle, FileSystem

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TIME_DTYPE = np.dtype([("timestamp", ">i8"), ("offset", ">i4")])


class IndexMark(NamedTuple):
    """What :meth:`_Index.rollback` restores: the entry count, the file's length, and how many
    writes and resizes had been attempted (any later one may have left bytes to undo)."""

    entries: int
    file_length: int
    changes: int


class _Index:
    """What the two index kinds share: the file, pre-allocation, trimming."""

    entry_size: int

    def __init__(self, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> None:
        self.fs = fs
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_index_size // self.entry_size
        self._file: FileHandle | None = None
        self._file_length = 0
        self._unsynced = False  # written since the last fsync (even if the handle is closed)
        self._batch: bytearray | None = None  # entries held back by batched_writes()
        self._batch_at = 0
        #: The length of a file found longer than ``max_index_size`` allows (not read).
        self._oversized: int | None = None
        self._changes = 0  # file writes and resizes attempted (see mark/rollback)

    # --- file handling -------------------------------------------------------------------
    def _handle(self) -> FileHandle:
        if self._file is None:
            self._file = self.fs.open(self.path, create=True)
            self._file_length = self._file.size()
        return self._file

    def entries(self) -> int:
        raise NotImplementedError

    def is_full(self) -> bool:
        return self.entries() >= self.max_entries

    def _write_entry(self, position: int, data: bytes) -> None:
        batch = self._batch
        if batch is None:
            self._write_at(position, data)
            return
        if batch and position != self._batch_at + len(batch):
            self._flush_batch()  # not contiguous: what is held goes first
        if not batch:
            self._batch_at = position
        batch += data

    def _write_at(self, position: int, data: bytes) -> None:
        handle = self._handle()
        self._changes += 1  # before the call: a failed write may have written a part
        handle.write_at(position, data)
        self._file_length = max(self._file_length, position + len(data))
        self._unsynced = True

    @contextmanager
    def batched_writes(self) -> Iterator[None]:
        """Entries appended inside the block reach the file in one write at its end (one
        system call for a bulk append's entries, rather than one per entry)."""
        self._batch = bytearray()
        try:
            yield
        finally:
            try:
                self._flush_batch()
            finally:
                # Even when the write fails: entries appended later (a roll's final time-index
                # entry) must not wait in a batch that no block will write.
                self._batch = None

    def _flush_batch(self) -> None:
        if self._batch:
            self._write_at(self._batch_at, bytes(self._batch))
            self._batch.clear()

    def _truncate_file(self, handle: FileHandle, size: int) -> None:
        self._changes += 1
        handle.truncate(size)

    def mark(self) -> IndexMark:
        """The state :meth:`rollback` returns to (taken before an append or a roll)."""
        return IndexMark(self.entries(), self._file_length, self._changes)

    def rollback(self, mark: IndexMark) -> None:
        """Undo every entry, write and resize since ``mark``: the entries after it leave memory
        and their bytes leave the file (cut, then the file is extended back to its length at the
        mark, so a pre-allocated tail reads as zeros again, as it did). Touches the file only
        if something was attempted on it since the mark."""
        self._truncate_entries(mark.entries)
        if self._batch is not None:
            self._batch.clear()
        if self._changes == mark.changes:
            return
        handle = self._handle()
        kept = mark.entries * self.entry_size
        self._truncate_file(handle, kept)
        if mark.file_length != kept:
            self._truncate_file(handle, mark.file_length)
        self._file_length = mark.file_length
        self._changes = mark.changes

    def _truncate_entries(self, count: int) -> None:
        raise NotImplementedError

    def preallocate(self) -> None:
        """Extend the file to its maximum size, as Kafka does for an active segment's index."""
        handle = self._handle()
        target = self.max_entries * self.entry_size
        if self._file_length != target:
            self._truncate_file(handle, target)
            self._file_length = target
            self._unsynced = True
        self._oversized = None

    def trim(self) -> None:
        """Cut the file to exactly its entries (on roll, close and after recovery)."""
        handle = self._handle()
        target = self.entries() * self.entry_size
        if self._file_length != target:
            self._truncate_file(handle, target)
            self._file_length = target
            self._unsynced = True
        self._oversized = None

    def flush(self) -> None:
        """fsync what was written, reopening the file if its handle was already released."""
        if not self._unsynced:
            return
        if self._file is not None:
            self._file.sync()
        else:
            handle = self.fs.open(self.path)
            try:
                handle.sync()
            finally:
                handle.close()
        self._unsynced = False

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def rename(self, new_path: str) -> None:
        self.fs.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        self.fs.remove(self.path)

    def _read_raw(self) -> bytes:
        """The file's bytes, or nothing (and :attr:`_oversized` set) when it is longer than
        ``max_index_size`` allows; :attr:`_file_length` is the file's length either way."""
        self._oversized = None
        if not self.fs.exists(self.path):
            self._file_length = 0
            return b""
        length = self.fs.file_size(self.path)
        if length > self.max_entries * self.entry_size:
            self._oversized = self._file_length = length
            return b""
        raw = self.fs.read_file(self.path)
        self._file_length = len(raw)
        return raw

    def _check_size(self) -> None:
        if self._oversized is not None:
            limit = self.max_entries * self.entry_size
            raise CorruptIndexError(
                f"{self.path}: {self._oversized} bytes, longer than the {limit} bytes "
                f"({self.max_entries} entries) that segment.index.bytes allows; not read"
            )


class OffsetIndex(_Index):
    """``relative offset -> file position`` for some batches of the segment."""

    entry_size = OFFSET_ENTRY_SIZE

    def __init__(self, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> None:
        super().__init__(fs, path, base_offset, max_index_size)
        self._offsets: list[int] = []
        self._positions: list[int] = []

    def load(self) -> None:
        """Read the entries of an existing file (``floor(length / 8)`` entries, as Kafka)."""
        raw = self._read_raw()
        count = len(raw) // OFFSET_ENTRY_SIZE
        table = np.frombuffer(raw, dtype=">i4", count=count * 2).reshape(count, 2).astype(np.int64)
        self._offsets = (table[:, 0] + self.base_offset).tolist()
        self._positions = table[:, 1].tolist()

    def check(self, log_size: int) -> None:
        """Raise :class:`CorruptIndexError` unless the entries could be Kafka's for this log.

        Kafka never indexes the first append of a segment, so no real entry points at position 0:
        a zero-filled (or pre-allocated, untrimmed) index fails this check and gets rebuilt.
        A file longer than ``segment.index.bytes`` allows fails it unread (see the module
        docstring), and so do more entries than the log has room for batches.
        """
        self._check_size()
        if self._file_length % OFFSET_ENTRY_SIZE:
            raise CorruptIndexError(
                f"{self.path}: length {self._file_length} is not a multiple of {OFFSET_ENTRY_SIZE}"
            )
        if len(self._offsets) > log_size // RECORD_BATCH_OVERHEAD:
            raise CorruptIndexError(
                f"{self.path}: {len(self._offsets)} entries, more than the {log_size} B log has "
                f"room for batches of at least {RECORD_BATCH_OVERHEAD} B"
            )
        previous_offset, previous_position = self.base_offset - 1, 0
        for offset, position in zip(self._offsets, self._positions, strict=True):
            if offset <= previous_offset or position <= previous_position:
                raise CorruptIndexError(
                    f"{self.path}: entry ({offset}, {position}) is not after "
                    f"({previous_offset}, {previous_position})"
                )
            if position >= log_size:
                raise CorruptIndexError(
                    f"{self.path}: entry ({offset}, {position}) points past the log ({log_size} B)"
                )
            previous_offset, previous_position = offset, position

    def entries(self) -> int:
        return len(self._offsets)

    def _truncate_entries(self, count: int) -> None:
        del self._offsets[count:]
        del self._positions[count:]

    def last_entry(self) -> tuple[int, int]:
        """The last entry, or ``(baseOffset, 0)`` when there is none."""
        if not self._offsets:
            return self.base_offset, 0
        return self._offsets[-1], self._positions[-1]

    def append(self, offset: int, position: int) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            raise CorruptIndexError(
                f"{self.path}: attempt to append offset {offset} after {self._offsets[-1]}"
            )
        rel = offset - self.base_offset
        self._write_entry(len(self._offsets) * OFFSET_ENTRY_SIZE, _OFFSET_ENTRY.pack(rel, position))
        self._offsets.append(offset)
        self._positions.append(position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= target, or ``(baseOffset, 0)``."""
        i = bisect.bisect_right(self._offsets, target_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self._offsets[i], self._positions[i]

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose offset is >= ``offset``."""
        keep = bisect.bisect_left(self._offsets, offset)
        del self._offsets[keep:]
        del self._positions[keep:]

    def reset(self) -> None:
        self._offsets.clear()
        self._positions.clear()
        self.trim()

    def items(self) -> list[tuple[int, int]]:
        return list(zip(self._offsets, self._positions, strict=True))


class TimeIndex(_Index):
    """``max timestamp so far -> relative offset`` for some batches of the segment."""

    entry_size = TIME_ENTRY_SIZE

    def __init__(self, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> None:
        super().__init__(fs, path, base_offset, max_index_size)
        self._timestamps: list[int] = []
        self._offsets: list[int] = []

    def load(self) -> None:
        raw = self._read_raw()
        count = len(raw) // TIME_ENTRY_SIZE
        table = np.frombuffer(raw, dtype=_TIME_DTYPE, count=count)
        self._timestamps = table["timestamp"].astype(np.int64).tolist()
        self._offsets = (table["offset"].astype(np.int64) + self.base_offset).tolist()

    def check(self, next_offset: int) -> None:
        """Raise :class:`CorruptIndexError` unless the entries are in order and inside the log
        (and the file was not too long to read)."""
        self._check_size()
        if self._file_length % TIME_ENTRY_SIZE:
            raise CorruptIndexError(
                f"{self.path}: length {self._file_length} is not a multiple of {TIME_ENTRY_SIZE}"
            )
        previous_ts, previous_offset = -1, self.base_offset
        for ts, offset in zip(self._timestamps, self._offsets, strict=True):
            if ts <= previous_ts or offset < previous_offset or offset >= next_offset:
                raise CorruptIndexError(
                    f"{self.path}: entry ({ts}, {offset}) is out of order or past the log"
                )
            previous_ts, previous_offset = ts, offset

    def entries(self) -> int:
        return len(self._timestamps)

    def _truncate_entries(self, count: int) -> None:
        del self._timestamps[count:]
        del self._offsets[count:]

    def is_full(self) -> bool:
        # One slot stays free for the entry written when the segment stops being active.
        return self.entries() >= self.max_entries - 1

    def last_entry(self) -> tuple[int, int]:
        """The last entry, or ``(-1, baseOffset)`` when there is none."""
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` if the timestamp is newer than the last entry's."""
        if not skip_full_check and self.is_full():
            raise CorruptIndexError(f"{self.path}: attempt to append to a full time index")
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if timestamp < 0:
            return
        if self.entries() >= self.max_entries:
            return
        rel = offset - self.base_offset
        self._write_entry(len(self._timestamps) * TIME_ENTRY_SIZE, _TIME_ENTRY.pack(timestamp, rel))
        self._timestamps.append(timestamp)
        self._offsets.append(offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= target, or ``(-1, baseOffset)``."""
        i = bisect.bisect_right(self._timestamps, target_timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self._offsets[i]

    def truncate_to(self, offset: int) -> None:
        keep = bisect.bisect_left(self._offsets, offset)
        del self._timestamps[keep:]
        del self._offsets[keep:]

    def reset(self) -> None:
        self._timestamps.clear()
        self._offsets.clear()
        self.trim()

    def items(self) -> list[tuple[int, int]]:
        return list(zip(self._timestamps, self._offsets, strict=True))
