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
   the batch that ends right at FUO is kept as an empty header if all its records go
   (KAFKA-17076), so the log keeps its last offset.
4. **Swap.** The new segment is written as ``.cleaned``, finished (final time-index entry,
   trimmed, fsynced, the last source segment's mtime), and swapped in by
   :meth:`compactlog.storage.log.Log.replace_segments`, whose rename protocol makes every crash
   point recover to the old or the new group.

Rounds can be aborted between chunks (``check_abort``); an aborted group's ``.cleaned`` files are
removed and nothing of that group is swapped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

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
from compactlog.records.batch import DELETE_HORIZON_FLAG_MASK, RECORD_BATCH_OVERHEAD, pack_batch
from compactlog.records.control import decode_control_key
from compactlog.storage.log import Log
from compactlog.storage.segment import LogSegment

logger = logging.getLogger("compactlog.cleaner")

MAX_RELATIVE_OFFSET = 2**31 - 1


class CleaningAbortedError(CompactlogError):
    """The round was aborted (the partition was paused, truncated or deleted)."""


@dataclass(frozen=True)
class CleanerBuffers:
    """Read-buffer sizes: ``log.cleaner.io.buffer.size / threads / 2``, grown on demand up to
    the largest batch allowed (``max(message.max.bytes, the batch's own size)``).

    The copy phase reads with Kafka's buffer size because each read becomes one append to the
    cleaned segment, and appends decide its index entries. The map phase writes nothing, so it
    reads ``map_read_size`` at a time: fewer, larger decodes.
    """

    read_buffer_size: int = 262_144
    max_buffer_size: int = 1_048_588
    map_read_size: int = 4 << 20


@dataclass
class _Chunk:
    """Whole batches read from a segment at ``position``."""

    position: int
    data: bytes
    headers: list[tuple[int, BatchHeader]]  # (position in data, header)


def read_chunks(segment: LogSegment, start: int, buffers: CleanerBuffers) -> Iterator[_Chunk]:
    """Whole batches of ``segment`` from byte ``start``, a read buffer at a time.

    If not even one batch fits, the buffer doubles up to ``max_buffer_size`` or the batch's own
    size, as Kafka's cleaner grows its I/O buffers; a batch claiming more bytes than the file
    holds is corrupt.
    """
    size = segment.size
    position = start
    buffer_size = buffers.read_buffer_size
    while position < size:
        data = segment.read_bytes(position, buffer_size)
        headers: list[tuple[int, BatchHeader]] = []
        consumed = 0
        while len(data) - consumed >= LOG_OVERHEAD:
            length = int.from_bytes(data[consumed + 8 : consumed + 12], "big", signed=True)
            batch_size = length + LOG_OVERHEAD
            if position + consumed + batch_size > size or length < 14:
                raise CorruptRecordError(
                    f"{segment.log_path}: batch at position {position + consumed} claims "
                    f"{batch_size} bytes but {size - position - consumed} remain"
                )
            if consumed + batch_size > len(data):
                break
            headers.append((consumed, read_header(data, consumed)))
            consumed += batch_size
        if not headers:
            if size - position < LOG_OVERHEAD:
                raise CorruptRecordError(
                    f"{segment.log_path}: {size - position} trailing bytes at {position}"
                )
            need = int.from_bytes(data[8:12], "big", signed=True) + LOG_OVERHEAD
            buffer_size = max(buffer_size * 2, need)
            if buffer_size > max(buffers.max_buffer_size, need):
                raise CompactlogError(f"{segment.log_path}: batch of {need} bytes at {position}")
            continue
        yield _Chunk(position, data[:consumed], headers)
        position += consumed
        buffer_size = buffers.read_buffer_size


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


class _TransactionState:
    """What the cleaner must know of transactions (spec 5.7), for logs without aborted ones.

    compactlog writes no aborted-transaction index yet, so every transactional batch it sees is
    treated as committed: the COMMIT marker of a producer is kept while a batch of its
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
    ) -> None:
        self.thread_id = thread_id
        self.offset_map = offset_map
        self.buffers = buffers or CleanerBuffers()
        self.throttler = throttler or Throttler()
        self.clock = clock
        self.check_abort = check_abort

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
        self.build_offset_map(log, first_dirty_offset, first_uncleanable_offset, stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.map_complete_ms = self.clock()
        stats.buffer_utilization = self.offset_map.utilization
        segments = [s for s in log.segments() if s.base_offset < end_offset]
        config = log.config
        groups = group_segments_by_size(
            segments, config.segment_bytes, config.segment_index_bytes, first_uncleanable_offset
        )
        transactions = _TransactionState()
        for group in groups:
            self.clean_segments(log, group, now, first_uncleanable_offset, transactions, stats)
            stats.groups += 1
        stats.end_ms = self.clock()
        return end_offset, stats

    # --- 1. the map -------------------------------------------------------------------------
    def build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        offset_map = self.offset_map
        offset_map.clear(base_offset=start)  # the compact map stores offsets relative to it
        segs = log.segments()
        dirty = [
            s
            for i, s in enumerate(segs)
            if s.base_offset < end and (i + 1 == len(segs) or segs[i + 1].base_offset > start)
        ]
        for i, segment in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._map_segment(log, segment, start, next_start, stats):
                return  # the map is full
        # Nothing left to map: the map covers the whole dirty range.

    def _map_segment(
        self, log: Log, segment: LogSegment, start: int, next_start: int, stats: CleanerStats
    ) -> bool:
        """Map one segment; True when the map filled up inside it.

        One kernel call per chunk: control batches are hidden from it (their records are never
        mapped), and Kafka's per-batch rule for latestOffset (a fully processed batch moves it
        to the batch's last offset) is replayed from where the kernel stopped.
        """
        offset_map = self.offset_map
        _, position = segment.offset_index.lookup(start)
        map_buffers = CleanerBuffers(
            self.buffers.map_read_size,
            max(self.buffers.max_buffer_size, self.buffers.map_read_size),
        )
        for chunk in read_chunks(segment, position, map_buffers):
            self.check_abort(log)
            stats.map_bytes_read += len(chunk.data)
            self.throttler.maybe_throttle(len(chunk.data))
            columns = decode_columns(chunk.data)
            headers = [h for _, h in chunk.headers]
            stats.map_messages_read += sum(
                max(h.records_count, 1) if h.is_control else h.records_count for h in headers
            )
            key_len = columns.key_len
            if any(h.is_control for h in headers):
                key_len = key_len.copy()
                control = np.fromiter((h.is_control for h in headers), bool, len(headers))
                key_len[control[columns.batch_index]] = -1
            n = len(columns)
            done = offset_map.put_batch(
                columns.data, columns.key_pos, key_len, columns.offsets, 0, n, start
            )
            if done < n:
                # Full inside batch j: batches before it were fully processed.
                j = int(columns.batch_index[done])
                first_of_j = int(np.searchsorted(columns.batch_index, j, side="left"))
                put_in_j = done > first_of_j and bool(
                    (
                        (key_len[first_of_j:done] >= 0)
                        & (columns.offsets[first_of_j:done] >= start)
                    ).any()
                )
                if not put_in_j:
                    previous = [h.last_offset for h in headers[:j] if h.last_offset >= start]
                    if previous:
                        offset_map.update_latest_offset(previous[-1])
                return True
            last = [h.last_offset for h in headers if h.last_offset >= start]
            if last:
                offset_map.update_latest_offset(last[-1])
        offset_map.update_latest_offset(next_start - 1)
        return False

    # --- 2-4. rewriting a group -------------------------------------------------------------
    def clean_segments(
        self,
        log: Log,
        group: list[LogSegment],
        now: int,
        upper_bound: int,
        transactions: _TransactionState,
        stats: CleanerStats,
    ) -> None:
        cleaned = log.new_cleaned_segment(group[0].base_offset)
        try:
            for source in group:
                self._clean_into(log, source, cleaned, now, upper_bound, transactions, stats)
                stats.segments_read += 1
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.release_index_handles()
            cleaned.set_last_modified_ms(group[-1].last_modified_ms())
        except BaseException:
            cleaned.delete_files()
            raise
        log.replace_segments(cleaned, group)

    def _clean_into(
        self,
        log: Log,
        source: LogSegment,
        dest: LogSegment,
        now: int,
        upper_bound: int,
        transactions: _TransactionState,
        stats: CleanerStats,
    ) -> None:
        delete_retention_ms = log.config.delete_retention_ms
        for chunk in read_chunks(source, 0, self.buffers):
            self.check_abort(log)
            self.throttler.maybe_throttle(len(chunk.data))
            stats.bytes_read += len(chunk.data)
            decisions = self._decide_chunk(chunk, now)
            out: list[bytes] = []
            max_offset = -1
            max_ts, offset_of_max_ts = -1, -1
            for b, (position, header) in enumerate(chunk.headers):
                filtered = self._filter_batch(
                    chunk.data,
                    position,
                    header,
                    decisions,
                    b,
                    now,
                    delete_retention_ms,
                    upper_bound,
                    transactions,
                    stats,
                )
                if filtered is None:
                    continue
                kept, kept_max_offset = filtered
                out.append(kept)
                kept_header = read_header(kept)
                stats.bytes_written += len(kept)
                stats.messages_written += kept_header.records_count
                max_offset = max(max_offset, kept_max_offset)
                if kept_header.max_timestamp > max_ts:
                    max_ts, offset_of_max_ts = kept_header.max_timestamp, kept_header.last_offset
            if out:
                data = b"".join(out)
                self.throttler.maybe_throttle(len(data))
                dest.append(max_offset, max_ts, offset_of_max_ts, data)

    def _decide_chunk(self, chunk: _Chunk, now: int) -> _ChunkDecisions:
        """The record rule of spec 5.4 for every record of a chunk at once (numpy)."""
        columns = decode_columns(chunk.data)
        found = self.offset_map.get_batch(columns.data, columns.key_pos, columns.key_len)
        headers = [h for _, h in chunk.headers]
        count = len(headers)
        retain_tombstone = np.fromiter(
            (h.delete_horizon_ms is None or now < h.delete_horizon_ms for h in headers),
            bool,
            count,
        )
        batch = columns.batch_index
        offsets = columns.offsets
        beyond = offsets > self.offset_map.latest_offset
        has_key = columns.key_len >= 0
        tombstone = columns.value_len < 0
        keep = beyond | (has_key & (offsets >= found) & (~tombstone | retain_tombstone[batch]))
        starts = np.zeros(count + 1, dtype=np.int64)
        np.cumsum([h.records_count for h in headers], out=starts[1:])
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
        data: bytes,
        position: int,
        header: BatchHeader,
        decisions: _ChunkDecisions,
        b: int,
        now: int,
        delete_retention_ms: int,
        upper_bound: int,
        transactions: _TransactionState,
        stats: CleanerStats,
    ) -> tuple[bytes, int] | None:
        """Spec 5.4 for batch ``b`` of the chunk: the bytes to write and the offset that keys the
        chunk's index entry (the batch's last offset, or for a rebuilt batch its largest kept
        record offset, as Kafka's ``filterTo``), or None to drop the batch."""
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
        # Batch retention, first matching rule (no producer state is kept yet, so the "last
        # batch of an active producer" rule never applies).
        retain_empty = header.next_offset == upper_bound
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
                return data[position : position + header.size_in_bytes], header.last_offset
            new_horizon = now + delete_retention_ms if need_horizon else horizon
            if header.is_control:
                indices = list(range(first, stop))
            else:
                indices = (np.flatnonzero(decisions.keep[first:stop]) + first).tolist()
            largest = int(columns.offsets[indices[-1]])
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
                    return fast, largest
            return _rebuild(columns, indices, header, new_horizon), largest
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
            return empty, header.last_offset
        return None


@dataclass
class _ChunkDecisions:
    """Per-record keep flags of a chunk and their per-batch counts."""

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
    data: bytes,
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
        key = data[kp : kp + kl] if kl >= 0 else None
        value = data[vp : vp + vl] if vl >= 0 else None
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
