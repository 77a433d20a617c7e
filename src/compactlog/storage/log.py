"""One partition's log: its segments, appends, reads, rolling, flushing and retention.

This is Kafka's ``LocalLog`` and ``UnifiedLog`` in one class. Theory of operation:

* **Segments.** The log is a list of segments sorted by base offset; the last one is *active* and
  the only one written. Offsets never change: a record keeps the offset it was appended at until
  retention or compaction removes it (leaving a gap).
* **Offsets.** ``log_start_offset`` is the lowest readable offset (it may lie inside the first
  segment), ``log_end_offset`` (LEO) the next offset to assign. With a single replica the high
  watermark equals the LEO. ``recovery_point`` is the offset below which everything was fsynced;
  after an unclean stop, only segments from the one holding it are re-checked.
* **Appends** (:meth:`Log.append`) are validated and given offsets by
  :mod:`compactlog.storage.validator`, then written to the active segment after the rolling check
  of spec 3 (size, time with jitter, full index, offset overflow). Appends and other changes hold
  ``lock``; reads take a snapshot of the segment list and do not block appends.
* **Durability** follows ``flush.messages`` (fsync once that many messages are unflushed; 1 means
  every append) and ``flush.ms`` (checked by the store's background flusher). As in Kafka, a
  segment the log rolls past is flushed asynchronously: the store's background thread does it
  within a second, and ``flush()``/``close()`` always do.
* **Retention** (:meth:`Log.delete_old_segments`, spec 6) deletes whole segments from the oldest,
  never past the high watermark; deleted segments are renamed ``.deleted`` at once and their files
  removed after ``file.delete.delay.ms``, so readers that hold a segment finish their read.
* **Producer state** (:mod:`compactlog.storage.producer_state`): batches with a producer id are
  checked against it after the roll check and before the write, as in Kafka's
  ``UnifiedLog.append``; a retry of one of a producer's last 5 batches is answered with that
  batch's offsets and not written again. A roll snapshots the state at the new segment's base
  offset, a clean close at the log end offset; the snapshots of segments that retention or
  cleaning removes go with them.
"""

from __future__ import annotations

import dataclasses
import os
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from compactlog.errors import (
    CompactlogError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RecordBatchTooLargeError,
)
from compactlog.records import RecordBatch
from compactlog.storage.config import BROKER_CONFIGS, LogConfig
from compactlog.storage.file_records import FileBatch
from compactlog.storage.fs import FileSystem, write_file_atomically
from compactlog.storage.producer_state import (
    LastRecord,
    ProducerState,
    ProducerStateManager,
    producer_batches,
)
from compactlog.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SWAP_RANGE_SUFFIX,
    SWAP_SUFFIX,
    LogSegment,
    SegmentSettings,
    draw_roll_jitter,
)
from compactlog.storage.validator import ValidatedAppend, validate_and_assign

Clock = Callable[[], int]

_EXPIRATION_DEFAULT = BROKER_CONFIGS["producer.id.expiration.ms"].default
assert isinstance(_EXPIRATION_DEFAULT, int)
DEFAULT_PRODUCER_ID_EXPIRATION_MS: int = _EXPIRATION_DEFAULT


def segment_settings(config: LogConfig) -> SegmentSettings:
    return SegmentSettings(
        index_interval_bytes=config.index_interval_bytes,
        segment_index_bytes=config.segment_index_bytes,
        preallocate=config.preallocate,
        segment_bytes=config.segment_bytes,
    )


@dataclass
class PendingDeletion:
    """A segment renamed ``.deleted`` (or, with ``segment`` None, the files in ``paths``: the
    producer snapshots of deleted segments), removed at ``delete_after_ms``."""

    segment: LogSegment | None
    delete_after_ms: int
    paths: tuple[str, ...] = ()


class Log:
    """A partition's segmented log. Create with :func:`compactlog.storage.loader.load_log`."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Clock,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        rng: random.Random,
        producer_state: ProducerStateManager | None = None,
    ) -> None:
        """``producer_state``: as the loader rebuilt it; without it the log starts with no
        producers and never writes producer snapshots (a view of the files, not their owner)."""
        if not segments:
            raise CompactlogError(f"log {directory} has no segment")
        self.fs = fs
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self._config = config
        self.clock = clock
        self.rng = rng
        self.lock = threading.RLock()
        self._segments = segments
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._next_offset = segments[-1].read_next_offset()
        self._last_flush_ms = clock()
        self._pending_deletions: list[PendingDeletion] = []
        self._pending_flush_offset = 0
        if producer_state is None:
            producer_state = ProducerStateManager(
                fs,
                directory,
                self.name,
                producer_id_expiration_ms=DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                writes_snapshots=False,
            )
            producer_state.update_map_end_offset(self._next_offset)
        self._producer_state = producer_state
        self._unsynced_snapshots: list[str] = []  # written at a roll, fsynced by the next flush
        # The directory needs an fsync only after a file in it was created, renamed or removed.
        self._dir_needs_sync = True
        self._closed = False

    # --- identity and state ---------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __repr__(self) -> str:
        return f"Log({self.name}, start={self._log_start_offset}, end={self._next_offset})"

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Dynamic config change: takes effect for the next append, roll and retention run."""
        with self.lock:
            self._config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments, oldest first."""
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def size(self) -> int:
        return sum(s.size for s in self._segments)

    def unflushed_messages(self) -> int:
        return self._next_offset - self._recovery_point

    def _check_open(self) -> None:
        if self._closed:
            raise CompactlogError(f"log {self.name} is closed")

    # --- producer state -------------------------------------------------------------------
    @property
    def producer_state_manager(self) -> ProducerStateManager:
        return self._producer_state

    def producer_state(self) -> list[ProducerState]:
        """The producers this partition knows, by producer id (Kafka's DescribeProducers)."""
        with self.lock:
            return self._producer_state.producer_states()

    def last_records_of_active_producers(self, now: int | None = None) -> dict[int, LastRecord]:
        """Each active producer's last data offset and epoch (what the cleaner keeps); with
        ``now``, producers expired by then are left out."""
        with self.lock:
            return self._producer_state.last_records_of_active_producers(now)

    def remove_expired_producers(self, now: int | None = None) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        with self.lock:
            return self._producer_state.remove_expired_producers(
                self.clock() if now is None else now
            )

    def take_producer_snapshot(self) -> str | None:
        """Snapshot the producer state at the log end offset now (if it moved since the last)."""
        with self.lock:
            self._check_open()
            return self._producer_state.take_snapshot()

    # --- appends --------------------------------------------------------------------------
    def append(
        self,
        data: bytes | bytearray | memoryview,
        *,
        from_client: bool = True,
        verify_crc: bool = True,
        keys_checked: bool = False,
    ) -> ValidatedAppend:
        """Validate, assign offsets, roll if needed and append whole batches as the leader.

        Batches with a producer id are checked against the producer state (client appends:
        epochs, sequences, duplicates). A retry of a batch already in the log writes nothing and
        returns ``duplicate=True`` with the earlier batch's offsets.
        """
        with self.lock:
            self._check_open()
            config = self._config
            now = self.clock()
            validated = validate_and_assign(
                data,
                config=config,
                topic_partition=self.name,
                next_offset=self._next_offset,
                now_ms=now,
                from_client=from_client,
                verify_crc=verify_crc,
                keys_checked=keys_checked,
            )
            size = len(validated.data)
            if size > config.segment_bytes:
                raise RecordBatchTooLargeError(
                    f"the append of {size} bytes to {self.name} is larger than "
                    f"segment.bytes={config.segment_bytes}"
                )
            segment = self._maybe_roll(size, validated.max_timestamp, validated.last_offset, now)
            producer_append = None
            if validated.has_producer_id:
                producer_append = self._producer_state.prepare_append(
                    producer_batches(validated.data), from_client=from_client
                )
                duplicate = producer_append.duplicate
                if duplicate is not None:
                    return dataclasses.replace(
                        validated,
                        data=b"",
                        first_offset=duplicate.first_offset,
                        last_offset=duplicate.last_offset,
                        log_append_time=duplicate.timestamp,
                        duplicate=True,
                    )
            if validated.batch_count == 1:  # a producer's append: its header is known
                fields = [(validated.last_offset, validated.max_timestamp, len(validated.data))]
                segment.append(validated.data, fields)
            else:
                segment.append(validated.data)
            self._next_offset = validated.last_offset + 1
            if producer_append is not None:
                self._producer_state.update(producer_append)
            self._producer_state.map_end_offset = self._next_offset
            if self.unflushed_messages() >= config.flush_messages:
                self.flush()
            return validated

    def _max_segment_ms(self) -> int:
        config = self._config
        if config.compact and config.max_compaction_lag_ms > 0:
            return min(config.max_compaction_lag_ms, config.segment_ms)
        return config.segment_ms

    def _should_roll(
        self, segment: LogSegment, size: int, max_ts: int, last: int, now: int
    ) -> bool:
        config = self._config
        if segment.size > config.segment_bytes - size:
            return True
        if segment.size > 0:
            first_ts = segment.rolling_based_timestamp()
            if first_ts is not None and first_ts >= 0:
                waited = max_ts - first_ts
            else:
                waited = now - segment.created_ms
            if waited > self._max_segment_ms() - segment.roll_jitter_ms:
                return True
        if segment.offset_index.is_full() or segment.time_index.is_full():
            return True
        return not 0 <= last - segment.base_offset <= 2**31 - 1

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, now: int) -> LogSegment:
        segment = self._segments[-1]
        if self._should_roll(segment, size, max_ts, last_offset, now):
            return self.roll()
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or a larger expected offset)."""
        with self.lock:
            self._check_open()
            new_offset = max(expected_next_offset or 0, self._next_offset)
            active = self._segments[-1]
            if active.base_offset == new_offset:
                if active.size == 0:
                    return active  # rolling an empty segment at the same offset changes nothing
                raise CompactlogError(
                    f"cannot roll {self.name}: a segment with base offset {new_offset} exists"
                )
            if new_offset < active.base_offset:
                raise CompactlogError(
                    f"cannot roll {self.name} at {new_offset}, below the active segment "
                    f"{active.base_offset}"
                )
            active.on_become_inactive()
            active.release_index_handles()
            segment = self._new_segment(new_offset)
            self._segments.append(segment)
            segment.make_active()
            # The snapshot's offset is the new segment's base, so that loading can start from it
            # and replay only this segment. Not fsynced here: the next flush does it.
            self._producer_state.update_map_end_offset(new_offset)
            snapshot = self._producer_state.take_snapshot(sync=False)
            if snapshot is not None:
                self._unsynced_snapshots.append(snapshot)
            # Kafka flushes the segment it rolled past asynchronously; so do we (flush_pending).
            self._pending_flush_offset = max(self._pending_flush_offset, new_offset)
            return segment

    def flush_pending(self) -> None:
        """Flush what a roll asked to flush (the store's background thread calls this)."""
        with self.lock:
            if self._closed or (
                self._pending_flush_offset <= self._recovery_point and not self._unsynced_snapshots
            ):
                return
            self.flush(self._pending_flush_offset)

    def _new_segment(self, base_offset: int) -> LogSegment:
        config = self._config
        prefix = os.path.join(self.dir, f"{base_offset:020d}")
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            self.fs.remove(prefix + suffix)
        jitter = draw_roll_jitter(config.segment_jitter_ms, config.segment_ms, self.rng)
        self._dir_needs_sync = True
        return LogSegment(
            self.fs,
            self.dir,
            base_offset,
            segment_settings(config),
            now_ms=self.clock(),
            roll_jitter_ms=jitter,
        )

    # --- durability -----------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in ``[recovery point, offset)``; advance it."""
        with self.lock:
            self._check_open()
            target = self._next_offset if offset is None else min(offset, self._next_offset)
            if target <= self._recovery_point:
                if self._unsynced_snapshots:  # a roll's snapshot, and no data to flush
                    self._sync_snapshots()
                    self.fs.sync_dir(self.dir)
                    self._dir_needs_sync = False
                return
            for i, segment in enumerate(self._segments):
                upper = (
                    self._segments[i + 1].base_offset
                    if i + 1 < len(self._segments)
                    else self._next_offset
                )
                if upper > self._recovery_point and segment.base_offset < target:
                    segment.flush()
            self._sync_snapshots()
            if self._dir_needs_sync:
                self.fs.sync_dir(self.dir)
                self._dir_needs_sync = False
            self._recovery_point = target
            self._last_flush_ms = self.clock()

    def _sync_snapshots(self) -> None:
        for path in self._unsynced_snapshots:
            if self.fs.exists(path):  # retention may have removed it since
                handle = self.fs.open(path)
                try:
                    handle.sync()
                finally:
                    handle.close()
        if self._unsynced_snapshots:
            self._dir_needs_sync = True
        self._unsynced_snapshots = []

    def flush_if_due(self, now: int) -> bool:
        """The ``flush.ms`` rule, run by the store's background flusher."""
        if now - self._last_flush_ms >= self._config.flush_ms and self.unflushed_messages() > 0:
            self.flush()
            return True
        return False

    # --- reads ----------------------------------------------------------------------------
    def _check_read_offset(self, offset: int) -> None:
        if offset < self._log_start_offset or offset > self._next_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.name}: the log holds "
                f"[{self._log_start_offset}, {self._next_offset})"
            )

    def _segment_index_for(self, segments: list[LogSegment], offset: int) -> int:
        lo, hi = 0, len(segments) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if segments[mid].base_offset <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def iter_batches(self, start_offset: int, end_offset: int | None = None) -> Iterator[FileBatch]:
        """Whole batches from the first one holding an offset >= ``start_offset``.

        Reads a snapshot of the segment list: concurrent appends after the call are not seen
        beyond the log end offset captured at the start.
        """
        self._check_open()
        self._check_read_offset(start_offset)
        segments = list(self._segments)
        upper = self._next_offset if end_offset is None else min(end_offset, self._next_offset)
        return self._iter_batches(segments, start_offset, upper)

    def _iter_batches(
        self, segments: list[LogSegment], start_offset: int, upper: int
    ) -> Iterator[FileBatch]:
        if start_offset >= upper:
            return
        i = self._segment_index_for(segments, start_offset)
        first = True
        for segment in segments[i:]:
            if segment.base_offset >= upper:
                return
            if first:
                batch = segment.translate_offset(start_offset)
                first = False
                if batch is None:
                    continue
                position = batch.position
            else:
                position = 0
            for batch in segment.batches(position):
                if batch.header.base_offset >= upper:
                    return
                yield batch

    def read(self, start_offset: int, max_bytes: int, *, min_one_batch: bool = True) -> bytes:
        """Up to ``max_bytes`` of whole batches from ``start_offset`` (at least one batch)."""
        out: list[memoryview] = []
        total = 0
        for batch in self.iter_batches(start_offset):
            size = len(batch.data)
            if total + size > max_bytes and (total > 0 or not min_one_batch):
                break
            out.append(batch.data)
            total += size
        return b"".join(out)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``, or None."""
        for segment in list(self._segments):
            if segment.largest_timestamp() < timestamp:
                continue
            batch = segment.find_offset_by_timestamp(timestamp)
            if batch is None:
                continue
            for record in RecordBatch(batch.data).records():
                if record.timestamp >= timestamp and record.offset >= self._log_start_offset:
                    return record.offset, record.timestamp
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the log's largest timestamp, or None
        for a log without records: Kafka's ListOffsets MAX_TIMESTAMP (-3), which looks in the
        first segment holding that timestamp and returns the record's own offset (Kafka 3.8+)."""
        segments = list(self._segments)
        latest = max(segments, key=lambda segment: segment.max_timestamp_so_far)
        target = latest.max_timestamp_so_far
        if target < 0:
            return None
        batch = latest.find_offset_by_timestamp(target)
        if batch is None:
            return None
        for record in RecordBatch(batch.data).records():
            if record.timestamp >= target:
                return record.offset, record.timestamp
        return None

    # --- the cleaner's swap ---------------------------------------------------------------
    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """An empty ``<base>.log.cleaned`` segment (leftovers of an earlier attempt removed)."""
        prefix = os.path.join(self.dir, f"{base_offset:020d}")
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            self.fs.remove(prefix + suffix + CLEANED_SUFFIX)
        config = self._config
        settings = SegmentSettings(
            index_interval_bytes=config.index_interval_bytes,
            segment_index_bytes=config.segment_index_bytes,
            preallocate=False,
            segment_bytes=config.segment_bytes,
        )
        return LogSegment(
            self.fs, self.dir, base_offset, settings, now_ms=self.clock(), suffix=CLEANED_SUFFIX
        )

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Swap a finished ``.cleaned`` segment in for ``old`` (Kafka's ``replaceSegments``).

        The protocol, with what a crash at each point leaves (the loader finishes or undoes it):

        1. ``new``'s files are renamed ``.cleaned`` -> ``.swap`` (a crash before all are
           renamed: the loader deletes the ``.swap`` at or above a ``.cleaned`` offset and every
           ``.cleaned``, so the originals stay);
        2. the segment map switches to ``new`` at once, so readers see either the old segments or
           the new one, never a mix;
        3. each old segment is renamed ``.deleted`` (a crash now: the loader deletes the
           originals that the ``.swap`` covers and completes the swap);
        4. ``new``'s files are renamed ``.swap`` -> final names and the directory is fsynced.

        Old segments stay readable by readers that already hold them until ``file.delete.delay.ms``.

        Beyond Kafka: before step 1, the replaced offset range is written to
        ``<base>.swaprange`` (atomically) and removed after step 4. Kafka's loader infers the
        range from the ``.swap`` segment's own offsets, which falls short when the group's last
        segments were compacted away entirely: after a crash between steps 1 and 3 those
        originals would come back next to the new segment. With the range file the loader
        removes them too.
        """
        with self.lock:
            self._check_open()
            present = [s for s in old if any(s is t for t in self._segments)]
            range_path = os.path.join(self.dir, f"{new.base_offset:020d}{SWAP_RANGE_SUFFIX}")
            if present:
                i = next(i for i, s in enumerate(self._segments) if s is present[-1])
                end = (
                    self._segments[i + 1].base_offset
                    if i + 1 < len(self._segments)
                    else present[-1].read_next_offset()
                )
                write_file_atomically(self.fs, range_path, f"{end}\n".encode())
            new.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            self.fs.sync_dir(self.dir)
            if present:
                first = next(i for i, s in enumerate(self._segments) if s is present[0])
                last = next(i for i, s in enumerate(self._segments) if s is present[-1])
                self._segments[first : last + 1] = [new]
            else:
                self._segments.append(new)
                self._segments.sort(key=lambda s: s.base_offset)
            delay = self._config.file_delete_delay_ms
            now = self.clock()
            for segment in present:
                segment.change_suffix("", DELETED_SUFFIX)
                segment.release_index_handles()
                self._pending_deletions.append(PendingDeletion(segment, now + delay))
            new.change_suffix(SWAP_SUFFIX, "")
            self.fs.sync_dir(self.dir)
            self.fs.remove(range_path)
            self._dir_needs_sync = True
            # The snapshots of the replaced segments go too, except at the new segment's base.
            self._delete_producer_snapshots(
                [s for s in present if s.base_offset != new.base_offset], now
            )

    def _delete_producer_snapshots(self, segments: list[LogSegment], now: int) -> None:
        """Rename the snapshots at these segments' base offsets ``.deleted``; they are removed
        after ``file.delete.delay.ms`` (Kafka's ``deleteProducerSnapshots``, async)."""
        paths = []
        for segment in segments:
            path = self._producer_state.remove_and_mark_snapshot_for_deletion(segment.base_offset)
            if path is not None:
                paths.append(path)
        if paths:
            self._dir_needs_sync = True
            self._pending_deletions.append(
                PendingDeletion(None, now + self._config.file_delete_delay_ms, tuple(paths))
            )

    # --- retention and deletion ---------------------------------------------------------
    def delete_records(self, before_offset: int) -> int:
        """Raise the log start offset to ``before_offset`` (Kafka's DeleteRecords).

        Refused on ``compact``-only topics with ``POLICY_VIOLATION``, and above the high
        watermark with ``OFFSET_OUT_OF_RANGE``. Whole segments below the new start offset are
        removed by the next retention run. Returns the log start offset after the call.
        """
        with self.lock:
            self._check_open()
            if not self._config.delete:
                raise PolicyViolationError(
                    f"records of partition {self.name} cannot be deleted: its cleanup.policy "
                    f"is {','.join(sorted(self._config.cleanup_policy))}"
                )
            if before_offset > self.high_watermark or before_offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot raise the log start offset of {self.name} to {before_offset}: the "
                    f"high watermark is {self.high_watermark}"
                )
            if before_offset > self._log_start_offset:
                self._log_start_offset = before_offset
                self._producer_state.on_log_start_offset_incremented(before_offset)
            return self._log_start_offset

    def _deletable_segments(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool]
    ) -> list[LogSegment]:
        result: list[LogSegment] = []
        segments = self._segments
        for i, segment in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._next_offset
            last_and_empty = nxt is None and segment.size == 0
            if self.high_watermark >= upper and not last_and_empty and predicate(segment, nxt):
                result.append(segment)
            else:
                break
        return result

    def _delete_segments(self, deletable: list[LogSegment]) -> int:
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            self.roll()
        now = self.clock()
        for segment in deletable:
            self._segments.remove(segment)
            segment.change_suffix("", DELETED_SUFFIX)
            segment.release_index_handles()
            self._pending_deletions.append(
                PendingDeletion(segment, now + self._config.file_delete_delay_ms)
            )
        self.fs.sync_dir(self.dir)
        start = max(self._log_start_offset, min(self._segments[0].base_offset, self.high_watermark))
        if start > self._log_start_offset:
            self._log_start_offset = start
            self._producer_state.on_log_start_offset_incremented(start)
        self._recovery_point = max(self._recovery_point, self._segments[0].base_offset)
        self._delete_producer_snapshots(deletable, now)
        return len(deletable)

    def delete_log_start_offset_breached_segments(self) -> int:
        def breached(segment: LogSegment, nxt: LogSegment | None) -> bool:
            return nxt is not None and nxt.base_offset <= self._log_start_offset

        return self._delete_segments(self._deletable_segments(breached))

    def delete_retention_size_breached_segments(self) -> int:
        retention = self._config.retention_bytes
        size = self.size()
        if retention < 0 or size < retention:
            return 0
        diff = size - retention

        def breached(segment: LogSegment, nxt: LogSegment | None) -> bool:
            nonlocal diff
            if diff - segment.size >= 0:
                diff -= segment.size
                return True
            return False

        return self._delete_segments(self._deletable_segments(breached))

    def delete_retention_ms_breached_segments(self, now: int) -> int:
        retention = self._config.retention_ms
        if retention < 0:
            return 0

        def breached(segment: LogSegment, nxt: LogSegment | None) -> bool:
            return now - segment.largest_timestamp() > retention

        return self._delete_segments(self._deletable_segments(breached))

    def delete_old_segments(self, now: int | None = None) -> int:
        """One retention pass (Kafka's ``deleteOldSegments``); returns the segments deleted."""
        with self.lock:
            self._check_open()
            now = self.clock() if now is None else now
            deleted = self.delete_log_start_offset_breached_segments()
            if self._config.delete:
                deleted += self.delete_retention_size_breached_segments()
                deleted += self.delete_retention_ms_breached_segments(now)
            self.remove_deleted_files(now)
            return deleted

    def remove_deleted_files(self, now: int | None = None, *, force: bool = False) -> None:
        """Physically remove ``.deleted`` segments whose ``file.delete.delay.ms`` has passed."""
        with self.lock:
            now = self.clock() if now is None else now
            keep: list[PendingDeletion] = []
            for pending in self._pending_deletions:
                if force or now >= pending.delete_after_ms:
                    if pending.segment is not None:
                        pending.segment.delete_files()
                    for path in pending.paths:
                        self.fs.remove(path)
                else:
                    keep.append(pending)
            self._pending_deletions = keep

    # --- life cycle -----------------------------------------------------------------------
    def close(self) -> None:
        """Flush, trim and close every segment (a clean shutdown of this log)."""
        with self.lock:
            if self._closed:
                return
            self.flush()
            # A snapshot at the log end offset: the next load needs no replay.
            if self._producer_state.take_snapshot() is not None:
                self.fs.sync_dir(self.dir)
            for segment in self._segments:
                segment.close()
            self.remove_deleted_files(force=True)
            self._closed = True

    def close_without_flush(self) -> None:
        """Release file handles only: what a crash would leave, minus the lost process. The
        segments waiting as ``.deleted`` are released too (their files stay for recovery)."""
        with self.lock:
            for segment in self._segments:
                segment.close_handles()
            for pending in self._pending_deletions:
                if pending.segment is not None:
                    pending.segment.close_handles()
            self._closed = True

    def delete(self) -> None:
        """Remove every file of this log and its directory."""
        with self.lock:
            for segment in self._segments:
                segment.delete_files()
            self.remove_deleted_files(force=True)
            self._closed = True
            for name in self.fs.listdir(self.dir):
                self.fs.remove(os.path.join(self.dir, name))
            self.fs.rmdir(self.dir)
