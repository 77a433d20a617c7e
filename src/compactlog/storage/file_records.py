"""Walking the record batches of a ``.log`` file (Kafka's ``FileRecords``/``FileLogInputStream``).

This is the one batch-framing walk: the log's reads and recovery, Kafka's metadata log,
``dump-log``, ``verify`` and the Spark source all frame batches here. Framing rules (spec 1.6),
applied to every batch from a start position:

* no byte left: the end of the data;
* fewer than 17 bytes left (offset, length, leader epoch, magic): a torn tail;
* a length field below 14: damage (Kafka's ``CorruptRecordException``);
* a batch that would extend past the end of the range: a torn tail (a partial write);
* a magic byte other than 2, or a ``batchLength`` below 49: damage (only the v2 format is
  written by compactlog and by every Kafka client since 0.11).

What happens at a stop depends on the caller. By default a torn tail ends the walk quietly (a
torn write at the tail is not an error while reading; recovery truncates it away) and damage
raises :class:`~compactlog.errors.CorruptRecordError` naming the file and the position. Given a
:class:`WalkEnd`, the walk never raises for framing: it stops at the first torn or damaged byte
and records where and why in the :class:`WalkEnd` (what ``verify`` and ``dump-log`` report).

The file is read in large chunks through the filesystem seam; batches are handed out as
``memoryview`` slices of a chunk, so walking headers costs no copy per batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from compactlog.errors import CorruptRecordError
from compactlog.records import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    BatchHeader,
    read_header,
)
from compactlog.records.batch_header import HEADER_STRUCT

READ_CHUNK = 1 << 20
_OFFSET_AND_LENGTH = struct.Struct(">qi")
MIN_BATCH_LENGTH_FIELD = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: smaller is never a batch


class ReadableFile(Protocol):
    """What the walk needs of a file (a :class:`~compactlog.storage.fs.FileHandle` has it)."""

    @property
    def path(self) -> str: ...

    def size(self) -> int: ...

    def read_at(self, position: int, size: int) -> bytes: ...


class FileBatch(NamedTuple):
    """One batch found in a file: where it starts, its parsed header, and its bytes."""

    position: int
    header: BatchHeader
    data: memoryview


@dataclass
class WalkEnd:
    """Where and why a walk over a ``.log`` file stopped (see the module docstring)."""

    position: int = 0
    #: None: the data ended exactly at the end of the range.
    problem: str | None = None
    #: The stop is a torn tail (a partial write), not damage in the middle of the data.
    torn: bool = False


def iter_file_batches(
    handle: ReadableFile,
    start: int = 0,
    end: int | None = None,
    chunk_size: int = READ_CHUNK,
    *,
    stop: WalkEnd | None = None,
) -> Iterator[FileBatch]:
    """Every whole batch in ``[start, end)`` of the file, in order, with the framing rules above.

    Without ``stop``, damage raises :class:`CorruptRecordError`; with it, the walk records the
    stop there instead (the headers of the batches it yields are then unpacked as they are:
    counts are the caller's to judge)."""
    limit = handle.size() if end is None else end
    position = start
    chunk = memoryview(b"")
    chunk_start = position
    while True:
        if stop is not None:
            stop.position = position
        remaining = limit - position
        if remaining <= 0:
            return
        if remaining < HEADER_SIZE_UP_TO_MAGIC:
            if stop is not None:
                stop.torn = True
                stop.problem = (
                    f"torn tail: {remaining} bytes after the last complete batch, too few for a "
                    "batch header"
                )
            return
        offset = position - chunk_start
        if offset + HEADER_SIZE_UP_TO_MAGIC > len(chunk):
            chunk = memoryview(handle.read_at(position, min(chunk_size, remaining)))
            chunk_start, offset = position, 0
        base_offset, length = _OFFSET_AND_LENGTH.unpack_from(chunk, offset)
        if length < MIN_BATCH_LENGTH_FIELD:
            if stop is None:
                raise CorruptRecordError(
                    f"{handle.path}: record size {length} is smaller than the minimum record "
                    f"overhead ({MIN_BATCH_LENGTH_FIELD}) at position {position} "
                    f"(offset field {base_offset})"
                )
            stop.problem = (
                f"record size {length} is smaller than the minimum record overhead "
                f"({MIN_BATCH_LENGTH_FIELD}); {remaining} bytes from here are unreadable"
            )
            return
        size = length + LOG_OVERHEAD
        if size > remaining:
            if stop is not None:
                stop.torn = True
                stop.problem = (
                    f"torn tail: the batch here claims {size} bytes but only {remaining} remain "
                    "(a partial write, or a damaged length field)"
                )
            return
        if offset + size > len(chunk):
            chunk = memoryview(handle.read_at(position, max(size, min(chunk_size, remaining))))
            chunk_start, offset = position, 0
        if stop is None:
            try:
                header = read_header(chunk, offset)
            except CorruptRecordError as exc:
                raise CorruptRecordError(f"{handle.path}: position {position}: {exc}") from exc
        else:
            magic = chunk[offset + HEADER_SIZE_UP_TO_MAGIC - 1]
            if magic != MAGIC_V2:
                stop.problem = (
                    f"unsupported magic {magic} (only {MAGIC_V2} is written since Kafka 0.11)"
                )
                return
            if length < MIN_BATCH_LENGTH:
                stop.problem = (
                    f"batchLength {length} is less than the v2 minimum {MIN_BATCH_LENGTH}; "
                    f"{remaining} bytes from here are unreadable"
                )
                return
            header = BatchHeader._make(HEADER_STRUCT.unpack_from(chunk, offset))
        yield FileBatch(position, header, chunk[offset : offset + size])
        position += size
