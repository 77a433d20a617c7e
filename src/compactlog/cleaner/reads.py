"""The cleaner's read pipeline over segments: where Kafka's cleaner cuts its reads
(:func:`kafka_chunks`, with its ``CleanerBuffers``), regions of whole chunks handed to the
compiled loops, CRC checks, the decode of a region for the map pass and the copy phase, the
regions kept between the two passes, and releasing a mapped segment's pages behind a pass.
"""

from __future__ import annotations

import bisect
import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from compactlog.cleaner import _rebuild_kernel as _rk
from compactlog.errors import CompactlogError, CorruptRecordError
from compactlog.records import LOG_OVERHEAD, RecordColumns, decode_columns
from compactlog.records.batch_header import CONTROL_FLAG_MASK, CRC_OFFSET, CRC_STRUCT, compute_crc

_LENGTH = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")


@dataclass(frozen=True)
class CleanerBuffers:
    """Kafka's cleaner I/O buffers: ``read_buffer_size`` is ``log.cleaner.io.buffer.size /
    threads / 2``; ``max_buffer_size`` is ``message.max.bytes`` (Kafka's ``maxIoBufferSize``).

    compactlog reads segments through a memory map, so the buffers are not allocated: they
    decide where Kafka's cleaner would cut its reads (see :func:`kafka_chunks`), which its
    statistics count. ``region_bytes`` is how much is handed to the compiled loops at once
    (whole chunks); it changes nothing in the output.
    """

    read_buffer_size: int = 262_144
    max_buffer_size: int = 1_048_588
    region_bytes: int = 8 << 20


def _grown_buffer(capacity: int, next_batch: int, max_io: int, max_message: int, where: str) -> int:
    """Kafka's ``growBuffersOrFail`` + ``growBuffers``: the read buffer's next capacity when not
    even one batch fitted in ``capacity`` bytes."""
    if capacity >= max_message:
        if next_batch <= capacity:  # pragma: no cover - a fitting batch is always processed
            raise CompactlogError(f"batch of {next_batch} bytes not processed at {where}")
        max_size = next_batch
    else:
        max_size = max_message
    max_buffer = max(max_size, max_io)
    if capacity >= max_buffer:
        raise CompactlogError(
            f"this log contains a message larger than the maximum allowable size of "
            f"{max_buffer} ({next_batch}-byte batch at {where})"
        )
    return min(capacity * 2, max_buffer)


def kafka_chunks(
    view: memoryview,
    start: int,
    buffers: CleanerBuffers,
    max_message: int,
    path: str,
    kernel: str = "auto",
    offsets: tuple[int, int | None] | None = None,
) -> list[tuple[int, int]]:
    """The ``[start, end)`` byte ranges Kafka's cleaner reads a segment in, from ``start``.

    Each read takes the whole batches that fit the read buffer; when not even one fits, the
    buffer grows (doubling, up to ``max.message.bytes`` of the topic or the batch's own size)
    and stays grown for the rest of the segment, as Kafka's does until ``restoreBuffers``. A
    batch claiming more bytes than the segment holds, or fewer than a record needs, is corrupt.
    The batch boundaries come from one compiled walk (:func:`_rebuild_kernel.batch_ends`);
    the reads are then cut with a binary search each. With ``offsets`` (the segment's base
    offset and the next segment's, or None), every batch's framing is checked too
    (:func:`framing_problem`), since the CRC does not cover the header's first 21 bytes.
    """
    size = len(view)
    found = np.empty((size - start) // (_rk.MIN_READ_LENGTH + LOG_OVERHEAD) + 1, np.int64)
    data = view if _rk.use_python(kernel) else np.frombuffer(view, np.uint8)
    count = _rk.batch_ends_kernel(kernel)(data, start, found)
    ends: list[int] = found[:count].tolist()
    p = ends[-1] if ends else start
    problem: tuple[int, str] | None = None
    if p < size:  # the walk stopped early: say why
        if size - p < LOG_OVERHEAD:
            problem = (p, f"{path}: {size - p} trailing bytes at {p}")
        else:
            (length,) = _LENGTH.unpack_from(view, p + 8)
            problem = (
                p,
                f"{path}: batch at position {p} claims {length + LOG_OVERHEAD} bytes but "
                f"{size - p} remain",
            )
    if offsets is not None and ends:
        # Always before the walk's stop, which follows every batch it framed.
        problem = framing_problem(view, start, ends, offsets[0], offsets[1], path) or problem
    if problem is not None:
        # Damage before it shows first as a CRC mismatch (a shortened length frames the next
        # batch at the wrong place): the earliest damaged batch is the one to name.
        verify_crcs(view, start, problem[0], path)
        raise CorruptRecordError(problem[1])
    chunks: list[tuple[int, int]] = []
    position = start
    capacity = buffers.read_buffer_size
    first = 0  # the first batch of the next read
    while first < len(ends):
        last = bisect.bisect_right(ends, position + capacity, first)  # the batches that fit
        if last == first:
            capacity = _grown_buffer(
                capacity,
                ends[first] - position,
                buffers.max_buffer_size,
                max_message,
                f"{path}:{position}",
            )
            continue
        chunks.append((position, ends[last - 1]))
        position = ends[last - 1]
        first = last
    return chunks


# Where the header fields the CRC does not cover sit in a v2 batch, and its smallest size.
_MAGIC_AT = 16
_LAST_DELTA_AT = 23
_BATCH_OVERHEAD = 61


def _be_ints(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The big-endian signed integers of ``width`` bytes at each position of ``at``."""
    raw = data[np.minimum(at[:, None] + np.arange(width), len(data) - 1)]
    return np.ascontiguousarray(raw).view(f">i{width}").ravel().astype(np.int64)


def framing_problem(
    view: memoryview,
    start: int,
    ends: list[int],
    base_offset: int,
    next_offset: int | None,
    path: str,
) -> tuple[int, str] | None:
    """What a batch's CRC does not cover, checked for the whole batches ending at ``ends``:
    the position and the error message of the first batch that fails, or None.

    Kafka's CRC-32C starts at the attributes: a damaged base offset, length or magic byte
    passes it. Every batch must be a v2 batch (magic 2) at least as long as its header, its
    last offset (base offset + lastOffsetDelta) not below its base offset, its base offset
    above the previous batch's last offset, and its offsets inside the segment:
    ``[base_offset, next_offset)``. (A base offset moved inside an offset gap that compaction left
    cannot be told from the original; nothing can tell it.)
    """
    data = np.frombuffer(view, np.uint8)
    ends_arr = np.asarray(ends, np.int64)
    starts = np.empty_like(ends_arr)
    starts[0] = start
    starts[1:] = ends_arr[:-1]
    magic = data[starts + _MAGIC_AT]
    short = ends_arr - starts < _BATCH_OVERHEAD
    bases = _be_ints(data, starts, 8)
    lasts = bases + _be_ints(data, starts + _LAST_DELTA_AT, 4)
    previous = np.empty_like(lasts)
    previous[0] = base_offset - 1
    previous[1:] = lasts[:-1]
    upper = np.iinfo(np.int64).max if next_offset is None else next_offset
    bad = (magic != 2) | short | (lasts < bases) | (bases <= previous) | (lasts >= upper)
    if not bad.any():
        return None
    i = int(np.flatnonzero(bad)[0])
    p, base, last = int(starts[i]), int(bases[i]), int(lasts[i])
    if magic[i] != 2:
        why = f"unsupported magic {int(magic[i])} (expected 2)"
    elif short[i]:
        why = f"{int(ends_arr[i]) - p} bytes, fewer than a batch header's {_BATCH_OVERHEAD}"
    elif last < base:
        why = f"last offset {last} below its base offset {base}"
    elif base <= previous[i]:
        why = (
            f"base offset {base} not above the previous batch's last offset {int(previous[i])}"
            if i
            else f"base offset {base} below the segment's base offset {base_offset}"
        )
    else:
        why = f"offsets [{base}, {last}] reach the next segment's base offset {next_offset}"
    return p, f"{path}: corrupt batch at position {p}: {why}"


def regions_of(chunks: list[tuple[int, int]], region_bytes: int) -> Iterator[list[tuple[int, int]]]:
    """Consecutive chunks, about ``region_bytes`` at a time (at least one chunk)."""
    i = 0
    while i < len(chunks):
        j = i + 1
        start = chunks[i][0]
        while j < len(chunks) and chunks[j][1] - start <= region_bytes:
            j += 1
        yield chunks[i:j]
        i = j


def verify_crcs(view: memoryview, start: int, end: int, path: str) -> None:
    """Check the CRC-32C of every batch in ``view[start:end]`` (whole batches)."""
    p = start
    while p < end:
        (length,) = _LENGTH.unpack_from(view, p + 8)
        size = length + LOG_OVERHEAD
        (stored,) = CRC_STRUCT.unpack_from(view, p + CRC_OFFSET)
        computed = compute_crc(view, p, size)
        if computed != stored:
            (base_offset,) = _BASE_OFFSET.unpack_from(view, p)
            raise CorruptRecordError(
                f"{path}: record batch CRC mismatch at offset {base_offset}: stored "
                f"0x{stored:08x}, computed 0x{computed:08x} (position {p})"
            )
        p += size


def drop_pages(view: memoryview, start: int, end: int) -> None:
    """Unmap the pages of ``view[start:end]`` from this process (``MADV_DONTNEED``).

    A mapped segment's pages count in the process's RSS once touched; a round that maps a
    whole log would otherwise grow by the log's size. The bytes stay in the page cache and a
    later touch maps them again, so this never changes what is read.
    """
    mapped = view.obj
    if not isinstance(mapped, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    lo = start - start % mmap.PAGESIZE
    hi = min(len(mapped), end + (-end) % mmap.PAGESIZE)
    if hi > lo:
        mapped.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


# Pages of a mapped segment are released in steps of this many bytes (see PageRelease).
_RELEASE_BYTES = 64 << 20


class PageRelease:
    """Releases the pages of a mapped segment behind a pass over it, ``_RELEASE_BYTES`` at a
    time. Each release makes the kernel flush the TLB of every CPU running this process, the
    helper thread's included; one per 8 MiB region made the round's thread spend a third more
    on the map pass (its puts reach into a table of up to 128 MiB and refill the TLB after
    each flush). RSS grows by at most this step over the pages being read."""

    def __init__(self, view: memoryview, start: int) -> None:
        self._view = view
        self._start = start

    def passed(self, end: int) -> None:
        """Everything before ``end`` has been read for good."""
        if end - self._start >= _RELEASE_BYTES:
            drop_pages(self._view, self._start, end)
            self._start = end

    def finish(self) -> None:
        drop_pages(self._view, self._start, len(self._view))
        self._start = len(self._view)


# Regions the helper thread checks and decodes ahead of the one being mapped or filtered.
READ_AHEAD = 1


class MapRegion(NamedTuple):
    columns: RecordColumns
    key_len: np.ndarray  # control batches' records hidden (-1): they are never mapped
    counts: np.ndarray  # records per batch as Kafka's map statistics count them


def prepare_map_region(view: memoryview, r0: int, r1: int, path: str) -> MapRegion:
    """A region of the map pass up to the puts: CRC checks and decode."""
    verify_crcs(view, r0, r1, path)
    columns = decode_columns(view[r0:r1], verify_crc=False)
    control = (columns.batch_attributes & CONTROL_FLAG_MASK) != 0
    counts = np.where(control, 1, columns.batch_records_count)  # a control batch counts one
    key_len = columns.key_len
    if control.any():
        key_len = key_len.copy()
        key_len[control[columns.batch_index]] = -1
    return MapRegion(columns, key_len, counts)


def prepare_copy_region(
    view: memoryview, r0: int, r1: int, path: str, check: bool
) -> RecordColumns:
    """A region of the copy phase up to the filter: CRC checks (unless the map pass did
    them), decode."""
    if check:
        verify_crcs(view, r0, r1, path)
    return decode_columns(view[r0:r1], verify_crc=False)


class DecodedRegions:
    """Regions the map pass decoded, kept for the copy phase of the same round, which reads
    the same regions again (every segment but maybe the first dirty one is cut into the same
    regions by both passes) and so skips their second decode.

    Bounded by ``budget`` bytes of columns: the memory of the dedupe buffer that the offset
    map's table left unused (see ``OffsetMap.spare_bytes``), so a round never holds more than
    Kafka's buffer. A region that does not fit is decoded again, as before.
    """

    def __init__(self, budget: int = 0) -> None:
        self._budget = budget
        self._held = 0
        self._regions: dict[tuple[int, int, int], tuple[RecordColumns, int]] = {}

    def keep(self, segment: int, r0: int, r1: int, columns: RecordColumns) -> None:
        size = _held_bytes(columns)
        if self._held + size <= self._budget:
            self._regions[segment, r0, r1] = (columns, size)
            self._held += size

    def take(self, segment: int, r0: int, r1: int) -> RecordColumns | None:
        kept = self._regions.pop((segment, r0, r1), None)
        if kept is None:
            return None
        self._held -= kept[1]
        return kept[0]

    def forget(self, segment: int) -> None:
        """Drop what is left of a segment (it is about to be replaced)."""
        for key in [key for key in self._regions if key[0] == segment]:
            self._held -= self._regions.pop(key)[1]


def _held_bytes(columns: RecordColumns) -> int:
    """The memory a region's columns hold: the arrays, and the records' buffer when it is not
    the mapped segment (decompressed batches)."""
    arrays = (
        columns.offsets,
        columns.timestamps,
        columns.key_pos,
        columns.key_len,
        columns.value_pos,
        columns.value_len,
        columns.headers_pos,
        columns.headers_count,
        columns.record_pos,
        columns.batch_index,
        columns.batch_table,
    )
    data = 0 if isinstance(columns.data, memoryview) else len(columns.data)
    return sum(a.nbytes for a in arrays) + data


def chunks_in(chunks: list[tuple[int, int]], r0: int, at: int) -> list[tuple[int, int]]:
    """The chunks of the region starting at ``r0`` that end at or before ``at``."""
    return [(s, e) for s, e in chunks if s >= r0 and e <= at]
