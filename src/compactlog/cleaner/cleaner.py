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
in :func:`.rules.filter_batch` defines and a differential test holds the bulk path to):

* Segments are read through a read-only memory map, a **region** (about 8 MiB of whole
  chunks) at a time; within a region, :func:`.reads.kafka_chunks` gives the exact byte ranges
  Kafka's cleaner would read (its 256 KiB buffer, grown as Kafka grows it), which its
  statistics count (the map pass's bytes when the map fills mid-segment). Kafka 4.4 indexes
  each appended batch on its own, so the reads no longer decide the index entries. Pages are
  released after each region so the mapping does not grow the process's RSS.
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

import itertools
import logging
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from compactlog.cleaner import _rebuild_kernel as _rk
from compactlog.cleaner.offset_map import OffsetMap
from compactlog.cleaner.reads import (
    READ_AHEAD,
    CleanerBuffers,
    DecodedRegions,
    MapRegion,
    PageRelease,
    chunks_in,
    drop_pages,
    kafka_chunks,
    prepare_copy_region,
    prepare_map_region,
    regions_of,
)
from compactlog.cleaner.rules import (
    ActiveProducers,
    TransactionState,
    decide_records,
    filter_batch,
    refuse_aborted_transactions,
)
from compactlog.cleaner.stats import CleanerStats
from compactlog.cleaner.throttler import Throttler
from compactlog.errors import CorruptRecordError, StorageError
from compactlog.records import RecordColumns, read_header
from compactlog.records.batch_header import CRC_OFFSET, CRC_STRUCT, compute_crc
from compactlog.storage.log import Log
from compactlog.storage.salvage import DamagedRange, salvage_walk
from compactlog.storage.segment import AppendedBatches, LogSegment

logger = logging.getLogger("compactlog.cleaner")

MAX_RELATIVE_OFFSET = 2**31 - 1
_EMPTY_OUT = np.empty(0, np.uint8)


_T = TypeVar("_T")


@dataclass
class _Unswapped:
    """A group's ``.cleaned`` segment, written, waiting to be swapped in for ``group``."""

    cleaned: LogSegment
    group: list[LogSegment]
    syncs: list[Future[None]]  # its fsyncs and finish, running on the sync helper


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


def _remove_cleaned(cleaned: LogSegment) -> None:
    """Remove an unswapped group's ``.cleaned`` files as a failed round unwinds. Best effort:
    the round's own error is the one to report, and a ``.cleaned`` file left behind is only
    space (the next round's :meth:`~compactlog.storage.log.Log.new_cleaned_segment` and the
    loader both remove it)."""
    try:
        cleaned.delete_files()
    except StorageError as exc:
        logger.error("cannot remove %s: %s", cleaned.log_path, exc)


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
        # Each source segment's chunks, found (and framed) by the check before the copy.
        self._chunks: dict[int, list[tuple[int, int]]] = {}
        # The next segment's base offset by base offset, as the round starts: the end of the
        # offsets a segment may hold (no source is the active segment, which has none).
        self._next_base: dict[int, int] = {}
        self._decoded = DecodedRegions()
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
        self._chunks = {}
        segments = log.segments()
        self._next_base = {s.base_offset: n.base_offset for s, n in itertools.pairwise(segments)}
        self._writes = [None, None]
        self._region_count = 0
        try:
            refuse_aborted_transactions(log, first_uncleanable_offset)
            self.build_offset_map(log, first_dirty_offset, first_uncleanable_offset, stats)
            end_offset = self.offset_map.latest_offset + 1
            stats.map_complete_ms = self.clock()
            stats.buffer_utilization = self.offset_map.utilization
            segments = [s for s in log.segments() if s.base_offset < end_offset]
            self._check_sources(log, segments)
            config = log.config
            groups = group_segments_by_size(
                segments,
                config.segment_bytes,
                config.segment_index_bytes,
                first_uncleanable_offset,
            )
            transactions = TransactionState()
            producers = ActiveProducers(log.last_records_of_active_producers(now))
            for group in groups:
                self.clean_segments(log, group, now, transactions, producers, stats)
                stats.groups += 1
            while self._unswapped:
                self._swap_in(log, self._unswapped[0])
        finally:
            self._background.close()  # no append may still be running when the files go
            self._syncer.close()
            for unswapped in self._unswapped:
                _remove_cleaned(unswapped.cleaned)
            self._unswapped = []
            self._verified = {}
            self._chunks = {}
            self._decoded = DecodedRegions()
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
        self._decoded = DecodedRegions(offset_map.spare_bytes)
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
            (segment.base_offset, self._next_base.get(segment.base_offset)),
        )
        drop_pages(view, position, len(view))  # the walk touched a page per batch
        regions = [
            (region[0][0], region[-1][1])
            for region in regions_of(chunks, self.buffers.region_bytes)
        ]

        def prepare(k: int) -> Future[MapRegion]:
            r0, r1 = regions[k]
            self.throttler.maybe_throttle(r1 - r0)
            return self._background.submit(prepare_map_region, view, r0, r1, segment.log_path)

        # The helper thread checks and decodes region k + 1 while this one hashes and puts the
        # keys of region k (the two halves take about as long).
        ahead = deque(prepare(j) for j in range(min(READ_AHEAD, len(regions))))
        release = PageRelease(view, position)
        try:
            for k, (r0, r1) in enumerate(regions):
                self.check_abort(log)
                columns, key_len, counts = self._background.take(ahead.popleft())  # corrupt: fails
                if k + READ_AHEAD < len(regions):
                    ahead.append(prepare(k + READ_AHEAD))
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
                    stats.map_bytes_read += sum(e - s for s, e in chunks_in(chunks, r0, at))
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

    # --- between 1 and 2: every byte to be rewritten is checked -----------------------------
    def _source_chunks(
        self, log: Log, source: LogSegment, view: memoryview
    ) -> list[tuple[int, int]]:
        chunks = kafka_chunks(
            view,
            0,
            self.buffers,
            log.config.max_message_bytes,
            source.log_path,
            self._kernel,
            (source.base_offset, self._next_base.get(source.base_offset)),
        )
        drop_pages(view, 0, len(view))  # the walk touched a page per batch
        return chunks

    def _check_sources(self, log: Log, segments: list[LogSegment]) -> None:
        """Frame and CRC-check every batch of the segments this round rewrites, before the
        first ``.cleaned`` file is created.

        The map pass checked the dirty part it read; the rest (the clean section, the first
        dirty segment before the first dirty offset, what follows where the map filled up) is
        checked here. A damaged batch anywhere raises :class:`CorruptRecordError` naming the
        file and the position while nothing has been written, so the log stays byte for byte
        as it was; checking group by group instead would leave the groups before the damage
        swapped in. The copy phase then checks nothing twice.
        """
        for source in segments:
            self.check_abort(log)
            # Read with pread, not through a second memory map of every source (with the map
            # and the compiled walk here, the R9 power-loss test aborted the process now and
            # then with "double free or corruption"; the cause is not found yet, see issue 17's
            # note). The storage layer's salvage walk checks framing, magic, CRC and offsets
            # (rising, inside the segment) and reports the first damaged range.
            end_offset = self._next_base.get(source.base_offset)
            for item in salvage_walk(
                source.log, source.base_offset, 0, source.size, end_offset=end_offset
            ):
                if isinstance(item, DamagedRange):
                    raise CorruptRecordError(
                        f"{source.log_path}: corrupt batch at position {item.start}: {item.reason}"
                    )
            self._verified[source.base_offset] = (0, source.size)

    # --- 2-4. rewriting a group -------------------------------------------------------------
    def clean_segments(
        self,
        log: Log,
        group: list[LogSegment],
        now: int,
        transactions: TransactionState,
        producers: ActiveProducers,
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
        transactions: TransactionState,
        producers: ActiveProducers,
        stats: CleanerStats,
    ) -> None:
        """Kafka's ``cleanInto``: read ``source`` a chunk at a time, filter, append each
        chunk's survivors to ``dest`` (each batch indexed on its own, as Kafka 4.4 does).

        The work is done a region (many chunks) at a time: one bulk decode, one offset-map
        lookup of every key and one compiled pass (:func:`filter_region`) that copies or
        rebuilds every plain data batch into one output buffer. Compressed, transactional and
        control batches, and the rare cases the compiled pass declines, go through
        :func:`.rules.filter_batch` record by record, in order, so the transaction state sees them
        as Kafka's filter would.
        """
        view = source.map_log()
        chunks = self._chunks.pop(source.base_offset, None)
        if chunks is None:  # pragma: no cover - _check_sources framed every source
            chunks = self._source_chunks(log, source, view)
        delete_retention_ms = log.config.delete_retention_ms
        # Batches the map pass of this round checked need no second CRC check.
        verified_lo, verified_hi = self._verified.get(source.base_offset, (0, 0))
        writes = self._writes  # the round's, across segments: an append may still be running
        regions = list(regions_of(chunks, self.buffers.region_bytes))

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
                prepare_copy_region, view, r0, r1, source.log_path, check
            )

        # The helper thread checks and decodes region k + 1 (and appends region k - 1's
        # survivors) while this one filters region k.
        ahead = deque(prepare(j) for j in range(min(READ_AHEAD, len(regions))))
        release = PageRelease(view, 0)
        for i, region in enumerate(regions):
            k = self._region_count
            self._region_count += 1
            self.check_abort(log)
            r0, r1 = region[0][0], region[-1][1]
            columns = self._background.take(ahead.popleft())  # corrupt: fails, before any append
            if i + READ_AHEAD < len(regions):
                ahead.append(prepare(i + READ_AHEAD))
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
        transactions: TransactionState,
        producers: ActiveProducers,
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
            CRC_STRUCT.pack_into(out_view, o + CRC_OFFSET, compute_crc(out_view, o, e - o))

        callers = np.flatnonzero(~by_kernel).tolist()
        if not callers:
            written_by = np.flatnonzero(action != _rk.A_DROP)
            return out_view[:written], AppendedBatches(
                last_offsets[written_by],
                res[written_by, _rk.R_MAX_TS],
                res[written_by, _rk.R_OUT_END] - res[written_by, _rk.R_OUT_START],
            )

        # Some batches go record by record: splice their bytes in, in order.
        decisions = decide_records(columns, found, now, self.offset_map.latest_offset)
        headers = columns.batch_headers
        parts: list[bytes | memoryview] = []
        last: list[int] = []
        max_ts: list[int] = []
        sizes: list[int] = []
        caller_set = set(callers)
        for b in range(nb):
            if b in caller_set:
                filtered = filter_batch(
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
