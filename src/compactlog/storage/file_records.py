"""Walking the record batches of a ``.log`` file (Kafka's ``FileRecords``/``FileLogInputStream``).

Framing rules (spec 1.6), applied to every batch from a start position:

* fewer than 17 bytes left (offset, length, leader epoch, magic): the end of the data;
* a length field below 14: :class:`~compactlog.errors.CorruptRecordError`;
* a batch that would extend past the end of the file: the end of the data (a torn write at the
  tail is not an error while reading; recovery truncates it away);
* a magic byte other than 2: :class:`~compactlog.errors.CorruptRecordError` (only the v2 format is
  written by compactlog and by every Kafka client since 0.11).

The file is read in large chunks through the filesystem seam; batches are handed out as
``memoryview`` slices of a chunk, so walking headers costs no copy per batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from compactlog.errors import CorruptRecordError
from compactlog.records import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, BatchHeader, read_header
from compactlog.storage.fs import FileHandle

READ_CHUNK = 1 << 20
_OFFSET_AND_LENGTH = struct.Struct(">qi")
MIN_BATCH_LENGTH_FIELD = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: smaller is never a batch


class FileBatch(NamedTuple):
    """One batch found in a file: where it starts, its parsed header, and its bytes."""

    position: int
    header: BatchHeader
    data: memoryview


def iter_file_batches(
    handle: FileHandle, start: int = 0, end: int | None = None, chunk_size: int = READ_CHUNK
) -> Iterator[FileBatch]:
    """Every whole batch in ``[start, end)`` of the file, in order, with the framing rules above."""
    limit = handle.size() if end is None else end
    position = start
    while limit - position >= HEADER_SIZE_UP_TO_MAGIC:
        chunk = memoryview(handle.read_at(position, min(chunk_size, limit - position)))
        consumed = 0
        while len(chunk) - consumed >= HEADER_SIZE_UP_TO_MAGIC:
            base_offset, length = _OFFSET_AND_LENGTH.unpack_from(chunk, consumed)
            if length < MIN_BATCH_LENGTH_FIELD:
                raise CorruptRecordError(
                    f"{handle.path}: record size {length} is smaller than the minimum record "
                    "overhead "
                    f"({MIN_BATCH_LENGTH_FIELD}) at position {position + consumed} "
                    f"(offset field {base_offset})"
                )
            size = length + LOG_OVERHEAD
            if position + consumed + size > limit:
                return  # torn tail: the data ends here
            if consumed + size > len(chunk):
                if consumed == 0:
                    # One batch larger than the chunk: read exactly it.
                    chunk = memoryview(handle.read_at(position, size))
                else:
                    break
            try:
                header = read_header(chunk, consumed)
            except CorruptRecordError as exc:
                raise CorruptRecordError(
                    f"{handle.path}: position {position + consumed}: {exc}"
                ) from exc
            yield FileBatch(position + consumed, header, chunk[consumed : consumed + size])
            consumed += size
        if consumed == 0:
            return
        position += consumed
