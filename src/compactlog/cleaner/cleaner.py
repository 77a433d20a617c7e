"""The cleaning algorithm (Kafka's ``Cleaner.doClean``, spec 5).

Theory of operation, for one log and one round with first dirty offset FDO and first
uncleanable offset FUO:

1. **Map.** The offset map is cleared and filled with ``key -> latest offset`` for the records
   of ``[FDO, FUO)``, segment by segment, starting at the offset-index position of FDO. Records
   without a key, below FDO, and control batches are not mapped. Before every put the map is
   checked against ``floor(slots * load factor)``; when it is full, mapping stops at that exact
   record (possibly mid-batch, mid-segment). ``endOffset = latestOffset + 1`` is the first offset
   the map does not cover and becomes the next checkpoint; when a whole segment is mapped,
   latestOffset jumps to the next segment's base - 1.
2. **Groups.** Every segment from the start of the log with a base offset below endOffset
   (the already-clean part included) is rewritten, in consecutive groups that fit
   ``segment.bytes``, ``segment.index.bytes`` and a 32-bit offset range; each group becomes one
   new segment named after the group's first base offset.
3. **Batches.** Each batch is copied verbatim, rebuilt with fewer records, reduced to a 61-byte
   header, or dropped, by the rules of spec 5.4: a keyed record survives when no later record of
   its key is mapped (or its offset is beyond the map), a tombstone only until its batch's delete
   horizon (KIP-534), which the first cleaning that keeps it stamps as ``now +
   delete.retention.ms``; keyless records inside the map's range are dropped and counted; batches
   are never merged or split, and their offsets, timestamps, producer fields and codec survive;
   the last batch of every producer still active when the round starts (not expired by its
   ``now``) is kept, as an empty header if all its records go, so that the producer's sequence
   and epoch survive a restart (spec 5.6); so is the batch that ends right at the log's high
   watermark (KAFKA-17076; Kafka 4.4 checks the high watermark, read as each source segment
   is cleaned, where 4.0 checked FUO), so the log keeps its last offset.
4. **Swap.** The new segment is written as ``.cleaned``, finished (final time-index entry,
   trimmed, fsynced, the last source segment's mtime), and swapped in by
   :meth:`compactlog.storage.log.Log.replace_segments`, whose rename protocol makes every crash
   point recover to the old or the new group.

Rounds can be aborted between regions (``check_abort``); an aborted group's ``.cleaned`` files
are removed and nothing of that group is swapped.

How the work is done (none of it changes a byte of the output, which the record-by-record path
in :meth:`Cleaner._filter_batch` defines and a differential test holds the bulk path to):

* Segments are read through a read-only memory map, a **region** (about 8 MiB of whole
  chunks) at a time; within a region, :func:`kafka_chunks` gives the exact byte ranges Kafka's
  cleaner would read (its 256 KiB buffer, grown as Kafka grows it), which its statistics count
  (the map pass's bytes when the map fills mid-segment). Kafka 4.4 indexes each appended batch
  on its own, so the reads no longer decide the index entries. Pages are released after each
  region so the mapping does not grow the process's RSS.
* Per region: one bulk decode (:func:`compactlog.records.decode_columns`), one offset-map call,
  and in the copy phase one compiled pass (:func:`._rebuild_kernel.filter_region`) that applies
  the rules to every plain data batch and writes the kept batches into an output buffer.
  Compressed and transactional batches go record by record, in order.
* **Latest-offset marks**: while the map is built, one bit per offset of the mapped range says
  whether that record is (still) the latest of its key; the copy phase reads the bit instead of
  hashing the key again. Records outside the mapped range (the already-clean part) are looked
  up in the map as Kafka does.
* A helper thread checks CRCs (each batch once per round: the map pass checks the dirty part,
  the copy phase what the map pass did not read) and appends to the cleaned segment while the
  round's thread filters the next region; every result is waited for before it matters.
"""

from __future__ import annotations

import bisect
import logging
import mmap
import struct
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import numpy as np

from compactlog.cleaner import _rebuild_kernel as _rk
from compactlog.cleaner._rebuild_kernel import rebuild
from compactlog.cleaner.offset_map import OffsetMap
from compactlog.cleaner.stats import CleanerStats
from compactlog.cleaner.throttler import Throttler
from compactlog.errors import CompactlogError, CorruptRecordError
from compactlog.records import (
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    ControlRecordType,
    RecordColumns,
    TimestampType,
    build_batch,
    build_empty_batch,
    decode_columns,
    read_header,
)
from compactlog.records.batch import pack_batch
from compactlog.records.batch_header import (
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    RECORD_BATCH_OVERHEAD,
    compute_crc,
)
from compactlog.records.control import decode_control_key
from compactlog.storage.log import Log
from compactlog.storage.producer_state import LastRecord
from compactlog.storage.segment import AppendedBatches, LogSegment

logger = logging.getLogger("compactlog.cleaner")

MAX_RELATIVE_OFFSET = 2**31 - 1
_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_BASE_OFFSET = struct.Struct(">q")
_EMPTY_OUT = np.empty(0, np.uint8)


class AbortedTransactionsError(CompactlogError):
    """The log records aborted transactions (a ``.txnindex`` Kafka wrote), which this cleaner
    cannot remove yet: the partition is marked uncleanable instead of cleaned wrongly."""


class CleaningAbortedError(CompactlogError):
    """The round was aborted (the partition was paused, truncated or deleted)."""


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
) -> list[tuple[int, int]]:
    """The ``[start, end)`` byte ranges Kafka's cleaner reads a segment in, from ``start``.

    Each read takes the whole batches that fit the read buffer; when not even one fits, the
    buffer grows (doubling, up to ``max.message.bytes`` of the topic or the batch's own size)
    and stays grown for the rest of the segment, as Kafka's does until ``restoreBuffers``. A
    batch claiming more bytes than the segment holds, or fewer than a record needs, is corrupt.
    The batch boundaries come from one compiled walk (:func:`_rebuild_kernel.batch_ends`);
    the reads are then cut with a binary search each.
    """
    size = len(view)
    found = np.empty((size - start) // (_rk.MIN_READ_LENGTH + LOG_OVERHEAD) + 1, np.int64)
    data = view if _rk.use_python(kernel) else np.frombuffer(view, np.uint8)
    count = _rk.batch_ends_kernel(kernel)(data, start, found)
    ends: list[int] = found[:count].tolist()
    p = ends[-1] if ends else start
    if p < size:  # the walk stopped early: say why
        if size - p < LOG_OVERHEAD:
            raise CorruptRecordError(f"{path}: {size - p} trailing bytes at {p}")
        (length,) = _LENGTH.unpack_from(view, p + 8)
        raise CorruptRecordError(
            f"{path}: batch at position {p} claims {length + LOG_OVERHEAD} bytes but "
            f"{size - p} remain"
        )
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


def _regions(chunks: list[tuple[int, int]], region_bytes: int) -> Iterator[list[tuple[int, int]]]:
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
        (stored,) = _CRC.unpack_from(view, p + CRC_OFFSET)
        computed = compute_crc(view, p, size)
        if computed != stored:
            (base_offset,) = _BASE_OFFSET.unpack_from(view, p)
            raise CorruptRecordError(
                f"{path}: record batch CRC mismatch at offset {base_offset}: stored "
                f"0x{stored:08x}, computed 0x{computed:08x} (position {p})"
            )
        p += size


def _drop_pages(view: memoryview, start: int, end: int) -> None:
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


# Pages of a mapped segment are released in steps of this many bytes (see _PageRelease).
_RELEASE_BYTES = 64 << 20


class _PageRelease:
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
            _drop_pages(self._view, self._start, end)
            self._start = end

    def finish(self) -> None:
        _drop_pages(self._view, self._start, len(self._view))
        self._start = len(self._view)


_T = TypeVar("_T")
# Regions the helper thread checks and decodes ahead of the one being mapped or filtered.
_READ_AHEAD = 1


class _MapRegion(NamedTuple):
    columns: RecordColumns
    key_len: np.ndarray  # control batches' records hidden (-1): they are never mapped
    counts: np.ndarray  # records per batch as Kafka's map statistics count them


def _prepare_map_region(view: memoryview, r0: int, r1: int, path: str) -> _MapRegion:
    """A region of the map pass up to the puts: CRC checks and decode."""
    verify_crcs(view, r0, r1, path)
    columns = decode_columns(view[r0:r1], verify_crc=False)
    control = (columns.batch_attributes & CONTROL_FLAG_MASK) != 0
    counts = np.where(control, 1, columns.batch_records_count)  # a control batch counts one
    key_len = columns.key_len
    if control.any():
        key_len = key_len.copy()
        key_len[control[columns.batch_index]] = -1
    return _MapRegion(columns, key_len, counts)


def _prepare_copy_region(
    view: memoryview, r0: int, r1: int, path: str, check: bool
) -> RecordColumns:
    """A region of the copy phase up to the filter: CRC checks (unless the map pass did
    them), decode."""
    if check:
        verify_crcs(view, r0, r1, path)
    return decode_columns(view[r0:r1], verify_crc=False)


@dataclass
class _Unswapped:
    """A group's ``.cleaned`` segment, written, waiting to be swapped in for ``group``."""

    cleaned: LogSegment
    group: list[LogSegment]
    syncs: list[Future[None]]  # its fsyncs and finish, running on the sync helper


class _DecodedRegions:
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


def _sync_after(write: Future[None], dest: LogSegment) -> None:
    futures_wait([write])
    if write.exception() is None:  # a failed append is reported by its own future
        dest.sync_log()


def _finish_after(write: Future[None] | None, dest: LogSegment, mtime_ms: int) -> None:
    """After the last append to a group's cleaned segment: its last index entries, trimmed
    files, fsyncs and the group's modification time (Kafka's end of ``cleanSegments``)."""
    if write is not None:
        futures_wait([write])
        if write.exception() is not None:  # reported by its own future
            return
    dest.on_become_inactive()
    dest.flush()
    dest.release_index_handles()
    dest.set_last_modified_ms(mtime_ms)


def _chunks_in(chunks: list[tuple[int, int]], r0: int, at: int) -> list[tuple[int, int]]:
    """The chunks of the region starting at ``r0`` that end at or before ``at``."""
    return [(s, e) for s, e in chunks if s >= r0 and e <= at]


class _Background:
    """A helper thread of one cleaning round, running its tasks in submission order.

    The round has two: the I/O helper reads ahead (CRC checks and decode of the next region)
    and appends to the cleaned segment while the round's own thread puts keys or filters; the
    sync helper fsyncs each source segment's share of the cleaned segment as soon as it is
    written, then finishes the group's files (see ``clean_segments``). The compiled
    loops, crc32c and file I/O release the GIL, so on two cores the work overlaps; the output is
    the same as doing everything in order, which is what every wait below enforces.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._pool: ThreadPoolExecutor | None = None  # started by the first task
        self._pending: list[Future[Any]] = []

    def submit(self, fn: Callable[..., _T], *args: Any) -> Future[_T]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix=self._name)
        future = self._pool.submit(fn, *args)
        self._pending.append(future)
        return future

    def ready(self, result: _T) -> Future[_T]:
        """A task already done, with ``result``; taken like the others."""
        future: Future[_T] = Future()
        future.set_result(result)
        self._pending.append(future)
        return future

    def take(self, future: Future[_T]) -> _T:
        """A task's result (or its error), no longer kept for :meth:`wait_all`: a read-ahead's
        result is a whole decoded region, which must not outlive its use."""
        try:
            return future.result()
        finally:
            self._pending.remove(future)

    def discard(self, future: Future[Any]) -> None:
        """Wait for a task whose result is not wanted; its error, if any, is dropped."""
        futures_wait([future])
        self._pending.remove(future)

    def wait_all(self) -> None:
        """Wait for every task; raise the first one's error (in submission order)."""
        pending, self._pending = self._pending, []
        futures_wait(pending)
        for future in pending:
            future.result()

    def close(self) -> None:
        """Wait for every task, ignoring errors (the round is already failing or done)."""
        futures_wait(self._pending)
        self._pending = []
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def group_segments_by_size(
    segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize`` (spec 5.3): greedy, left to right."""
    groups: list[list[LogSegment]] = []
    i = 0
    n = len(segments)
    while i < n:
        first = segments[i]
        group = [first]
        log_size = first.size
        index_size = first.offset_index.entries() * 8
        time_index_size = first.time_index.entries() * 12
        i += 1
        while i < n:
            s = segments[i]
            estimated_last = segments[i + 1].base_offset - 1 if i + 1 < n else first_uncleanable - 1
            if not (
                log_size + s.size <= max_size
                and index_size + s.offset_index.entries() * 8 <= max_index_size
                and time_index_size + s.time_index.entries() * 12 <= max_index_size
                and (s.size == 0 or estimated_last - first.base_offset <= MAX_RELATIVE_OFFSET)
            ):
                break
            group.append(s)
            log_size += s.size
            index_size += s.offset_index.entries() * 8
            time_index_size += s.time_index.entries() * 12
            i += 1
        groups.append(group)
    return groups


def _refuse_aborted_transactions(log: Log, first_uncleanable_offset: int) -> None:
    """Raise :class:`AbortedTransactionsError` if a segment the round may rewrite has aborted
    transactions in its ``.txnindex``. Kafka's cleaner drops the records of aborted
    transactions (spec 5.7) and rewrites the index; this one would keep them as committed, and an
    aborted value would then win over the committed value it was meant never to replace."""
    for segment in log.segments():
        if segment.base_offset >= first_uncleanable_offset:
            break
        if segment.aborted_transactions_size() > 0:
            raise AbortedTransactionsError(
                f"{segment.txn_index_path} records aborted transactions: compactlog's cleaner "
                "cannot remove aborted records yet (Kafka's cleaner can), so it does not clean "
                f"{log.name}"
            )


class _TransactionState:
    """What the cleaner must know of transactions (spec 5.7), for logs without aborted ones.

    compactlog writes no aborted-transaction index yet, and refuses a log with one Kafka wrote
    (:func:`_refuse_aborted_transactions`), so every transactional batch it sees is treated as
    committed: the COMMIT marker of a producer is kept while a batch of its
    transaction was seen in the current round, and becomes discardable (after its delete
    horizon) once none is.
    """

    def __init__(self) -> None:
        self.ongoing_committed: set[int] = set()

    def on_data_batch(self, header: BatchHeader) -> bool:
        if header.is_transactional:
            self.ongoing_committed.add(header.producer_id)
        return False  # never aborted: no aborted transactions are recorded

    def on_control_batch(self, header: BatchHeader, first_key: bytes | None) -> bool:
        if header.records_count == 0 or first_key is None:
            return True  # an empty control batch is always discardable
        kind = decode_control_key(first_key)
        if kind == ControlRecordType.COMMIT:
            seen = header.producer_id in self.ongoing_committed
            self.ongoing_committed.discard(header.producer_id)
            return not seen
        # An ABORT marker: no batch of an aborted transaction is ever seen (none are recorded),
        # so it is discardable; other control types (leader change, ...) never are.
        return kind == ControlRecordType.ABORT


class _ActiveProducers:
    """Spec 5.4, the first batch-retention rule: the last batch of every active producer stays
    (Kafka's ``isBatchLastRecordOfProducer``), from the producers as the round starts.

    A producer with data keeps the batch holding its last data offset; one that wrote only
    markers keeps a control batch of its current epoch.
    """

    def __init__(self, last_records: dict[int, LastRecord]) -> None:
        self._records = last_records
        offsets = {
            r.last_data_offset for r in last_records.values() if r.last_data_offset is not None
        }
        self._offsets = np.array(sorted(offsets), dtype=np.int64)

    def __bool__(self) -> bool:
        return bool(self._records)

    def candidates(self, columns: RecordColumns) -> np.ndarray:
        """Per batch of a region: whether it may be a producer's last batch (its last offset is
        one of theirs); those go through :meth:`Cleaner._filter_batch`, which decides."""
        return (columns.batch_producer_id >= 0) & np.isin(columns.batch_last_offset, self._offsets)

    def retains(self, header: BatchHeader) -> bool:
        if not header.has_producer_id:
            return False
        record = self._records.get(header.producer_id)
        if record is None:
            return False
        if record.last_data_offset is not None:
            return header.last_offset == record.last_data_offset
        return header.is_control and header.producer_epoch == record.producer_epoch


class Cleaner:
    """Cleans one log at a time with one offset map (one per cleaner thread)."""

    def __init__(
        self,
        thread_id: int,
        offset_map: OffsetMap,
        *,
        buffers: CleanerBuffers | None = None,
        throttler: Throttler | None = None,
        clock: Callable[[], int],
        check_abort: Callable[[Log], None] = lambda log: None,
        kernel: str = "auto",
        fast_path: bool = True,
    ) -> None:
        """``kernel`` picks the region kernel (``"python"``: the reference); ``fast_path=False``
        sends every batch through the record-by-record path (the reference for tests)."""
        self.thread_id = thread_id
        self.offset_map = offset_map
        self.buffers = buffers or CleanerBuffers()
        self.throttler = throttler or Throttler()
        self.clock = clock
        self.check_abort = check_abort
        self.fast_path = fast_path
        self._kernel = kernel
        self._filter_kernel = _rk.filter_region_kernel(kernel)
        self._background = _Background(f"compactlog-cleaner-{thread_id}-io")  # one per round
        self._syncer = _Background(f"compactlog-cleaner-{thread_id}-sync")
        # Byte ranges of each segment (by base offset) whose CRCs this round already checked,
        # and regions the map pass decoded for the copy phase.
        self._verified: dict[int, tuple[int, int]] = {}
        self._decoded = _DecodedRegions()
        self._out_buffers = [_EMPTY_OUT, _EMPTY_OUT]
        # The last append from each output buffer, and the regions filtered so far this round.
        self._writes: list[Future[None] | None] = [None, None]
        self._region_count = 0
        # Groups written but not yet swapped in (see clean), oldest first.
        self._unswapped: list[_Unswapped] = []

    # --- the round ------------------------------------------------------------------------
    def clean(
        self,
        log: Log,
        first_dirty_offset: int,
        first_uncleanable_offset: int,
        now: int | None = None,
    ) -> tuple[int, CleanerStats]:
        """One cleaning round of ``[FDO, FUO)``; returns (end offset, stats)."""
        now = self.clock() if now is None else now
        # Durations come from the clock (Kafka's Time); ``now`` only drives decisions, so a
        # caller that cleans "as of" another time still gets true durations.
        stats = CleanerStats(start_ms=self.clock())
        self._background = _Background(f"compactlog-cleaner-{self.thread_id}-io")
        self._syncer = _Background(f"compactlog-cleaner-{self.thread_id}-sync")
        self._verified = {}
        self._writes = [None, None]
        self._region_count = 0
        try:
            _refuse_aborted_transactions(log, first_uncleanable_offset)
            self.build_offset_map(log, first_dirty_offset, first_uncleanable_offset, stats)
            end_offset = self.offset_map.latest_offset + 1
            stats.map_complete_ms = self.clock()
            stats.buffer_utilization = self.offset_map.utilization
            segments = [s for s in log.segments() if s.base_offset < end_offset]
            config = log.config
            groups = group_segments_by_size(
                segments,
                config.segment_bytes,
                config.segment_index_bytes,
                first_uncleanable_offset,
            )
            transactions = _TransactionState()
            producers = _ActiveProducers(log.last_records_of_active_producers(now))
            for group in groups:
                self.clean_segments(log, group, now, transactions, producers, stats)
                stats.groups += 1
            while self._unswapped:
                self._swap_in(log, self._unswapped[0])
        finally:
            self._background.close()  # no append may still be running when the files go
            self._syncer.close()
            for unswapped in self._unswapped:
                unswapped.cleaned.delete_files()
            self._unswapped = []
            self._verified = {}
            self._decoded = _DecodedRegions()
            self._out_buffers = [_EMPTY_OUT, _EMPTY_OUT]
        stats.end_ms = self.clock()
        return end_offset, stats

    # --- 1. the map -------------------------------------------------------------------------
    def build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        offset_map = self.offset_map
        segs = log.segments()
        dirty_at = [
            i
            for i, s in enumerate(segs)
            if s.base_offset < end and (i + 1 == len(segs) or segs[i + 1].base_offset > start)
        ]
        dirty = [segs[i] for i in dirty_at]
        # At most one put per offset of the dirty segments from the start on (as in Kafka, a
        # dirty segment is mapped whole, even past ``end``); the compact map stores offsets
        # relative to the start.
        after = dirty_at[-1] + 1 if dirty_at else len(segs)
        limit = segs[after].base_offset if after < len(segs) else log.log_end_offset
        offset_map.clear(base_offset=start, expected_puts=max(1, limit - start))
        offset_map.track_latest(start, end)
        self._decoded = _DecodedRegions(offset_map.spare_bytes)
        for i, segment in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._map_segment(log, segment, start, next_start, stats):
                return  # the map is full
        # Nothing left to map: the map covers the whole dirty range.

    def _map_segment(
        self, log: Log, segment: LogSegment, start: int, next_start: int, stats: CleanerStats
    ) -> bool:
        """Map one segment; True when the map filled up inside it.

        One kernel call per region: control batches are hidden from it (their records are never
        mapped), and Kafka's per-batch rule for latestOffset (a fully processed batch moves it
        to the batch's last offset) is replayed from where the kernel stopped. The statistics
        are Kafka's: the bytes of the reads (chunks) processed whole, and every record
        processed before the one that found the map full (a control batch counts one).
        """
        offset_map = self.offset_map
        _, position = segment.offset_index.lookup(start)
        view = segment.map_log()
        chunks = kafka_chunks(
            view,
            position,
            self.buffers,
            log.config.max_message_bytes,
            segment.log_path,
            self._kernel,
        )
        _drop_pages(view, position, len(view))  # the walk touched a page per batch
        regions = [
            (region[0][0], region[-1][1]) for region in _regions(chunks, self.buffers.region_bytes)
        ]

        def prepare(k: int) -> Future[_MapRegion]:
            r0, r1 = regions[k]
            self.throttler.maybe_throttle(r1 - r0)
            return self._background.submit(_prepare_map_region, view, r0, r1, segment.log_path)

        # The helper thread checks and decodes region k + 1 while this one hashes and puts the
        # keys of region k (the two halves take about as long).
        ahead = deque(prepare(j) for j in range(min(_READ_AHEAD, len(regions))))
        release = _PageRelease(view, position)
        try:
            for k, (r0, r1) in enumerate(regions):
                self.check_abort(log)
                columns, key_len, counts = self._background.take(ahead.popleft())  # corrupt: fails
                if k + _READ_AHEAD < len(regions):
                    ahead.append(prepare(k + _READ_AHEAD))
                n = len(columns)
                done = offset_map.put_batch(
                    columns.data, columns.key_pos, key_len, columns.offsets, 0, n, start
                )
                release.passed(r1)
                self._verified[segment.base_offset] = (chunks[0][0], r1)
                self._decoded.keep(segment.base_offset, r0, r1, columns)
                if done < n:
                    for unused in ahead:
                        self._background.discard(unused)  # read ahead for nothing
                    # Full inside batch j: batches before it were fully processed.
                    j = int(columns.batch_index[done])
                    first_of_j = int(np.searchsorted(columns.batch_index, j, side="left"))
                    at = r0 + int(columns.batch_position[j])
                    stats.map_bytes_read += sum(e - s for s, e in _chunks_in(chunks, r0, at))
                    stats.map_messages_read += int(counts[:j].sum()) + done - first_of_j
                    put_in_j = done > first_of_j and bool(
                        (
                            (key_len[first_of_j:done] >= 0)
                            & (columns.offsets[first_of_j:done] >= start)
                        ).any()
                    )
                    if not put_in_j:
                        previous = columns.batch_last_offset[:j]
                        previous = previous[previous >= start]
                        if len(previous):
                            offset_map.update_latest_offset(int(previous[-1]))
                    return True
                stats.map_bytes_read += r1 - r0
                stats.map_messages_read += int(counts.sum())
                mapped_last = columns.batch_last_offset
                mapped_last = mapped_last[mapped_last >= start]  # batches at or after the start
                if len(mapped_last):
                    offset_map.update_latest_offset(int(mapped_last[-1]))
            offset_map.update_latest_offset(next_start - 1)
            return False
        finally:
            release.finish()

    # --- 2-4. rewriting a group -------------------------------------------------------------
    def clean_segments(
        self,
        log: Log,
        group: list[LogSegment],
        now: int,
        transactions: _TransactionState,
        producers: _ActiveProducers,
        stats: CleanerStats,
    ) -> None:
        """Write the ``.cleaned`` segment of a group, then swap in the previous group's.

        Kafka finishes each group (fsyncs, swap) before it reads the next. Here a group's
        files are finished and fsynced by the sync helper while the next group is filtered,
        and swapped in by :meth:`_swap_in` once that group is written: the order of the swaps,
        and what a crash leaves, are the same. The previous group is swapped in before this
        one's final fsync starts, since the swap's own directory fsyncs would wait behind
        it. Until its swap a group is in ``_unswapped``, whose files the round deletes if it
        fails.
        """
        cleaned = log.new_cleaned_segment(group[0].base_offset)
        unswapped = _Unswapped(cleaned, group, [])
        self._unswapped.append(unswapped)
        for i, source in enumerate(group):
            # As Kafka, the high watermark as this source segment's cleaning starts.
            high_watermark = log.high_watermark
            self._clean_into(
                log, source, cleaned, now, high_watermark, transactions, producers, stats
            )
            stats.segments_read += 1
            # The last append so far (appends run in order): everything before it is written.
            last = self._writes[(self._region_count - 1) % 2]
            if i + 1 < len(group) and last is not None:
                # This source's share of the fsync, while the next one is filtered.
                unswapped.syncs.append(self._syncer.submit(_sync_after, last, cleaned))
        for previous in self._unswapped[:-1]:  # all but this group
            self._swap_in(log, previous)
        mtime_ms = group[-1].last_modified_ms()
        unswapped.syncs.append(self._syncer.submit(_finish_after, last, cleaned, mtime_ms))

    def _swap_in(self, log: Log, unswapped: _Unswapped) -> None:
        """Wait until a written group's files are finished and durable; swap it in."""
        self._background.wait_all()  # the appends so far (the next group's too: cheap)
        for sync in unswapped.syncs:
            self._syncer.take(sync)
        self._unswapped.remove(unswapped)  # from here on the swap's own recovery applies
        log.replace_segments(unswapped.cleaned, unswapped.group)

    def _clean_into(
        self,
        log: Log,
        source: LogSegment,
        dest: LogSegment,
        now: int,
        high_watermark: int,
        transactions: _TransactionState,
        producers: _ActiveProducers,
        stats: CleanerStats,
    ) -> None:
        """Kafka's ``cleanInto``: read ``source`` a chunk at a time, filter, append each
        chunk's survivors to ``dest`` (each batch indexed on its own, as Kafka 4.4 does).

        The work is done a region (many chunks) at a time: one bulk decode, one offset-map
        lookup of every key and one compiled pass (:func:`filter_region`) that copies or
        rebuilds every plain data batch into one output buffer. Compressed, transactional and
        control batches, and the rare cases the compiled pass declines, go through
        :meth:`_filter_batch` record by record, in order, so the transaction state sees them
        as Kafka's filter would.
        """
        view = source.map_log()
        chunks = kafka_chunks(
            view, 0, self.buffers, log.config.max_message_bytes, source.log_path, self._kernel
        )
        _drop_pages(view, 0, len(view))  # the walk touched a page per batch
        delete_retention_ms = log.config.delete_retention_ms
        # Batches the map pass of this round checked need no second CRC check.
        verified_lo, verified_hi = self._verified.get(source.base_offset, (0, 0))
        writes = self._writes  # the round's, across segments: an append may still be running
        regions = list(_regions(chunks, self.buffers.region_bytes))

        def prepare(k: int) -> Future[RecordColumns]:
            r0, r1 = regions[k][0][0], regions[k][-1][1]
            self.throttler.maybe_throttle(r1 - r0)
            decoded = self._decoded.take(source.base_offset, r0, r1)
            if decoded is not None:
                if isinstance(decoded.data, memoryview):
                    # The same bytes, through this pass's map, whose pages are released.
                    decoded.data = view[r0:r1]
                return self._background.ready(decoded)
            check = not verified_lo <= r0 < r1 <= verified_hi
            return self._background.submit(
                _prepare_copy_region, view, r0, r1, source.log_path, check
            )

        # The helper thread checks and decodes region k + 1 (and appends region k - 1's
        # survivors) while this one filters region k.
        ahead = deque(prepare(j) for j in range(min(_READ_AHEAD, len(regions))))
        release = _PageRelease(view, 0)
        for i, region in enumerate(regions):
            k = self._region_count
            self._region_count += 1
            self.check_abort(log)
            r0, r1 = region[0][0], region[-1][1]
            columns = self._background.take(ahead.popleft())  # corrupt: fails, before any append
            if i + _READ_AHEAD < len(regions):
                ahead.append(prepare(i + _READ_AHEAD))
            stats.bytes_read += r1 - r0
            previous_write = writes[k % 2]
            if previous_write is not None:
                previous_write.result()  # its output buffer is about to be reused
            data, kept = self._filter_region(
                view[r0:r1],
                columns,
                r0,
                region,
                now,
                delete_retention_ms,
                high_watermark,
                transactions,
                producers,
                stats,
                k % 2,
            )
            release.passed(r1)
            if len(kept.sizes):
                self.throttler.maybe_throttle(len(data))
                writes[k % 2] = self._background.submit(dest.append_batches, data, kept)
        release.finish()
        self._decoded.forget(source.base_offset)

    def _filter_region(
        self,
        region_view: memoryview,
        columns: RecordColumns,
        r0: int,
        region: list[tuple[int, int]],
        now: int,
        delete_retention_ms: int,
        high_watermark: int,
        transactions: _TransactionState,
        producers: _ActiveProducers,
        stats: CleanerStats,
        buffer: int,
    ) -> tuple[bytes | memoryview, AppendedBatches]:
        """One region: the bytes to append and the batches they hold (each batch is indexed on
        its own, as Kafka 4.4's ``LogSegment.append`` does). The bytes may live in output
        buffer ``buffer``, valid until the region after next."""
        found = self._lookup(columns)
        nb = columns.batch_count
        positions = columns.batch_position
        starts = np.zeros(nb + 1, dtype=np.int64)
        np.cumsum(columns.batch_records_count, out=starts[1:])
        n = len(columns)
        src = np.frombuffer(region_view, np.uint8)
        # Each kept record grows by at most 9 bytes (longer length and timestamp varints).
        need = len(region_view) + 9 * n + 64
        out = self._out_buffers[buffer]
        if len(out) < need:
            out = self._out_buffers[buffer] = np.empty(max(need, 2 * len(out)), np.uint8)
        res = np.empty((nb, _rk.RESULT_COLUMNS), np.int64)
        attributes = columns.batch_attributes
        if not self.fast_path:
            attributes = attributes | _rk.SPECIAL_MASK  # everything record by record
        elif producers:
            # A producer's last batch may have to stay as an empty header: record by record.
            candidates = producers.candidates(columns)
            if candidates.any():
                attributes = np.where(candidates, attributes | _rk.SPECIAL_MASK, attributes)
        written = self._filter_kernel(
            src,
            positions,
            columns.batch_size,
            attributes,
            columns.batch_base_timestamp,
            columns.batch_max_timestamp,
            columns.batch_last_offset,
            starts,
            columns.offsets,
            columns.timestamps,
            columns.key_len,
            columns.value_len,
            columns.record_pos,
            found,
            np.empty(n, np.uint8),
            self.offset_map.latest_offset,
            now,
            delete_retention_ms,
            high_watermark,
            out,
            res,
        )
        action = res[:, _rk.R_ACTION]
        last_offsets = columns.batch_last_offset
        by_kernel = action != _rk.A_CALLER
        kept = res[:, _rk.R_KEPT]
        stats.messages_read += int((starts[1:] - starts[:-1])[by_kernel].sum())
        stats.invalid_messages += int(res[by_kernel, _rk.R_INVALID].sum())
        stats.messages_written += int(kept[by_kernel].sum())
        stats.bytes_written += written
        out_view = out.data
        for b in np.flatnonzero(action == _rk.A_REBUILT).tolist():
            o, e = int(res[b, _rk.R_OUT_START]), int(res[b, _rk.R_OUT_END])
            _CRC.pack_into(out_view, o + CRC_OFFSET, compute_crc(out_view, o, e - o))

        callers = np.flatnonzero(~by_kernel).tolist()
        if not callers:
            written_by = np.flatnonzero(action != _rk.A_DROP)
            return out_view[:written], AppendedBatches(
                last_offsets[written_by],
                res[written_by, _rk.R_MAX_TS],
                res[written_by, _rk.R_OUT_END] - res[written_by, _rk.R_OUT_START],
            )

        # Some batches go record by record: splice their bytes in, in order.
        decisions = self._decide(columns, found, now)
        headers = columns.batch_headers
        parts: list[bytes | memoryview] = []
        last: list[int] = []
        max_ts: list[int] = []
        sizes: list[int] = []
        caller_set = set(callers)
        for b in range(nb):
            if b in caller_set:
                filtered = self._filter_batch(
                    region_view,
                    int(positions[b]),
                    headers[b],
                    decisions,
                    b,
                    now,
                    delete_retention_ms,
                    high_watermark,
                    transactions,
                    producers,
                    stats,
                )
                if filtered is None:
                    continue
                kept_bytes = filtered
                kept_header = read_header(kept_bytes)
                stats.bytes_written += len(kept_bytes)
                stats.messages_written += kept_header.records_count
                batch_max_ts = kept_header.max_timestamp
            else:
                if action[b] == _rk.A_DROP:
                    continue
                o, e = int(res[b, _rk.R_OUT_START]), int(res[b, _rk.R_OUT_END])
                kept_bytes = out_view[o:e]
                batch_max_ts = int(res[b, _rk.R_MAX_TS])
            parts.append(kept_bytes)
            last.append(int(last_offsets[b]))  # a rebuilt batch keeps its last offset
            max_ts.append(batch_max_ts)
            sizes.append(len(kept_bytes))
        return b"".join(parts), AppendedBatches(
            np.array(last, np.int64), np.array(max_ts, np.int64), np.array(sizes, np.int64)
        )

    def _lookup(self, columns: RecordColumns) -> np.ndarray:
        """The map's offset for every record's key (-1: keyless or absent). Records this round
        mapped are answered from the map's latest-offset marks (their own offset when marked,
        a later one when not) without hashing their keys a second time."""
        marks = self.offset_map.latest_marks(columns.offsets)
        if marks is None or not marks[0].any():
            return self.offset_map.get_batch(columns.data, columns.key_pos, columns.key_len)
        covered, marked = marks
        key_len = np.where(covered, np.int32(-1), columns.key_len)
        found = self.offset_map.get_batch(columns.data, columns.key_pos, key_len)
        offsets = columns.offsets
        found[covered] = np.where(marked, offsets, offsets + 1)[covered]
        return found

    def _decide(self, columns: RecordColumns, found: np.ndarray, now: int) -> _ChunkDecisions:
        """The record rule of spec 5.4 for every record of a region at once (numpy)."""
        count = columns.batch_count
        # No delete horizon stamped yet, or not reached.
        retain_tombstone = ((columns.batch_attributes & DELETE_HORIZON_FLAG_MASK) == 0) | (
            now < columns.batch_base_timestamp
        )
        batch = columns.batch_index
        offsets = columns.offsets
        beyond = offsets > self.offset_map.latest_offset
        has_key = columns.key_len >= 0
        tombstone = columns.value_len < 0
        keep = beyond | (has_key & (offsets >= found) & (~tombstone | retain_tombstone[batch]))
        starts = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(columns.batch_records_count, out=starts[1:])
        return _ChunkDecisions(
            columns=columns,
            keep=keep,
            starts=starts,
            kept=np.bincount(batch, weights=keep, minlength=count).astype(np.int64),
            kept_tombstones=np.bincount(batch, weights=keep & tombstone, minlength=count).astype(
                np.int64
            ),
            keyless=np.bincount(batch, weights=~beyond & ~has_key, minlength=count).astype(
                np.int64
            ),
        )

    def _filter_batch(
        self,
        data: bytes | memoryview,
        position: int,
        header: BatchHeader,
        decisions: _ChunkDecisions,
        b: int,
        now: int,
        delete_retention_ms: int,
        high_watermark: int,
        transactions: _TransactionState,
        producers: _ActiveProducers,
        stats: CleanerStats,
    ) -> bytes | memoryview | None:
        """Spec 5.4 for batch ``b`` of the chunk: the bytes to write, or None to drop it."""
        first, stop = int(decisions.starts[b]), int(decisions.starts[b + 1])
        horizon = header.delete_horizon_ms
        columns = decisions.columns
        if header.is_control:
            key = columns.key(first) if stop > first else None
            can_discard = transactions.on_control_batch(header, key)
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            can_discard = transactions.on_data_batch(header)
            discard_records = can_discard
        # Batch retention, first matching rule: an active producer's last batch, the batch
        # ending at the high watermark (both RETAIN_EMPTY), then DELETE or DELETE_EMPTY.
        retain_empty = producers.retains(header) or header.next_offset == high_watermark
        if not retain_empty and discard_records:
            return None
        stats.messages_read += stop - first
        if discard_records:
            kept, tombstones_kept = 0, 0
        elif header.is_control:
            kept, tombstones_kept = stop - first, 0
        else:
            kept, tombstones_kept = int(decisions.kept[b]), int(decisions.kept_tombstones[b])
            stats.invalid_messages += int(decisions.keyless[b])
        if kept:
            need_horizon = (tombstones_kept > 0 or (can_discard and header.is_control)) and (
                horizon is None
            )
            if kept == stop - first and not need_horizon:
                return data[position : position + header.size_in_bytes]
            new_horizon = now + delete_retention_ms if need_horizon else horizon
            if header.is_control:
                indices = list(range(first, stop))
            else:
                indices = (np.flatnonzero(decisions.keep[first:stop]) + first).tolist()
            if header.compression == Compression.NONE and not header.is_control:
                fast = _rebuild_uncompressed(
                    data,
                    position,
                    header,
                    decisions.keep[first:stop],
                    columns.timestamps[first:stop],
                    new_horizon,
                )
                if fast is not None:
                    return fast
            return _rebuild(columns, indices, header, new_horizon)
        if retain_empty:
            empty = build_empty_batch(
                base_offset=header.base_offset,
                last_offset_delta=header.last_offset_delta,
                max_timestamp=header.max_timestamp,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                partition_leader_epoch=header.partition_leader_epoch,
                timestamp_type=TimestampType(header.timestamp_type),
                is_transactional=header.is_transactional,
                is_control=header.is_control,
            )
            return empty
        return None


@dataclass
class _ChunkDecisions:
    """Per-record keep flags of a region and their per-batch counts."""

    columns: RecordColumns
    keep: np.ndarray
    starts: np.ndarray  # record index where each batch starts (and the end)
    kept: np.ndarray
    kept_tombstones: np.ndarray
    keyless: np.ndarray


# Timestamps this far from zero could overflow the compiled kernel's 64-bit zig-zag arithmetic;
# such batches (never seen in practice) take the record-by-record path.
_SAFE_TIMESTAMP = 2**61


def _rebuild_uncompressed(
    data: bytes | memoryview,
    position: int,
    header: BatchHeader,
    keep: np.ndarray,
    timestamps: np.ndarray,
    horizon: int | None,
) -> bytes | None:
    """:func:`_rebuild` for an uncompressed data batch, by copying the kept records' bytes
    (only the timestamp delta and the length are re-encoded); identical output."""
    kept_ts = timestamps[keep]
    if (
        len(kept_ts) == 0
        or max(abs(int(kept_ts.min())), abs(int(kept_ts.max()))) >= _SAFE_TIMESTAMP
    ):
        return None
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    new_base = horizon if horizon is not None else int(kept_ts[0])
    if abs(new_base) >= _SAFE_TIMESTAMP or abs(header.base_timestamp) >= _SAFE_TIMESTAMP:
        return None
    section = rebuild(
        data,
        position + RECORD_BATCH_OVERHEAD,
        position + header.size_in_bytes,
        keep,
        old_base_ts=header.base_timestamp,
        fixed_ts=header.max_timestamp if log_append else None,
        new_base_ts=new_base,
    )
    attributes = header.attributes & ~DELETE_HORIZON_FLAG_MASK
    if horizon is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    return pack_batch(
        section,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=new_base,
        max_timestamp=header.max_timestamp if log_append else int(kept_ts.max()),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(kept_ts),
    )


def _rebuild(
    columns: RecordColumns, indices: list[int], header: BatchHeader, horizon: int | None
) -> bytes:
    """The batch with only the kept records: same base and last offset, producer fields,
    flags, leader epoch and codec (at its default level); timestamps and offsets preserved."""
    data = columns.data
    pick = np.asarray(indices, dtype=np.int64)
    key_pos, key_len = columns.key_pos[pick].tolist(), columns.key_len[pick].tolist()
    value_pos, value_len = columns.value_pos[pick].tolist(), columns.value_len[pick].tolist()
    with_headers = columns.headers_count[pick].tolist()
    records: list[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Any]] = []
    for j, i in enumerate(indices):
        kl, vl, kp, vp = key_len[j], value_len[j], key_pos[j], value_pos[j]
        key = bytes(data[kp : kp + kl]) if kl >= 0 else None
        value = bytes(data[vp : vp + vl]) if vl >= 0 else None
        if with_headers[j]:
            records.append((key, value, columns.headers(i)))
        else:
            records.append((key, value))
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    base = header.base_offset
    return build_batch(
        records,
        base_offset=base,
        timestamps=columns.timestamps[pick].tolist(),
        compression=header.compression,
        timestamp_type=TimestampType(header.timestamp_type),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        delete_horizon_ms=horizon,
        offset_deltas=(columns.offsets[pick] - base).tolist(),
        last_offset_delta=header.last_offset_delta,
        max_timestamp=header.max_timestamp if log_append else None,
    )
