"""One partition's log: Kafka's ``UnifiedLog``, over the files of a
:class:`~compactlog.storage.local_log.LocalLog`.

A :class:`Log` holds a :class:`~compactlog.storage.local_log.LocalLog` (the directory, the segment
map, rolling, flushing files, the cleaner's swap, deleting segments) and adds what the partition
means to producers and readers. Theory of operation:

* **Offsets.** Offsets never change: a record keeps the offset it was appended at until retention
  or compaction removes it (leaving a gap). ``log_start_offset`` is the lowest readable offset (it
  may lie inside the first segment), ``log_end_offset`` (LEO) the next offset to assign. With a
  single replica the high watermark equals the LEO. ``recovery_point`` is the local log's: the
  offset below which everything was fsynced.
* **Appends** (:meth:`Log.append`) are validated and given offsets by
  :mod:`compactlog.storage.validator`, then written to the active segment after the rolling check
  of spec 3 (size, time with jitter, full index, offset overflow). Appends and other changes hold
  ``lock``; reads take a snapshot of the segment list and do not block appends.
* **Durability** follows ``flush.messages`` (fsync once that many messages are unflushed; 1 means
  every append) and ``flush.ms`` (checked by the store's background flusher). As in Kafka, a
  segment the log rolls past is flushed asynchronously: the store's background thread does it
  within a second, and ``flush()``/``close()`` always do.
* **I/O errors** (disk full, EIO). An append or a roll that fails is undone by the local log
  before the error is raised (no byte of it stays and the log end offset does not move, so no
  offset is handed out twice); the caller gets a :class:`~compactlog.errors.StorageError` naming
  the file and the errno (the broker answers KAFKA_STORAGE_ERROR), and the next append, once
  there is space again, continues at the same offset. When the undo fails, or an fsync fails
  (after a failed fsync the kernel may have dropped the dirty pages, so nothing written since
  the last good flush can be trusted to be on disk, and retrying the fsync proves nothing), the
  log goes *offline*, as Kafka takes its log directory offline: every later append, roll, flush,
  retention run and segment swap is refused with a StorageError that gives the first error,
  reads keep serving what is in memory, and reopening the store recovers the log from its files.
  Compactlog takes only that partition's log offline, not the whole data directory as Kafka
  does: Kafka can because another replica takes over the partitions; here the other logs have
  no other copy and nothing shows they are damaged (each one that meets the error itself goes
  offline in turn), so they keep serving.
* **Retention** (:meth:`Log.delete_old_segments`, spec 6) chooses whole segments from the oldest,
  never past the high watermark; the local log renames them ``.deleted`` at once and removes their
  files after ``file.delete.delay.ms``, so readers that hold a segment finish their read.
* **Producer state** (:mod:`compactlog.storage.producer_state`): batches with a producer id are
  checked against it after the roll check and before the write, as in Kafka's
  ``UnifiedLog.append``; a retry of one of a producer's last 5 batches is answered with that
  batch's offsets and not written again. A roll snapshots the state at the new segment's base
  offset, a clean close at the log end offset; the snapshots of segments that retention or
  cleaning removes go with them.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator

from compactlog.errors import (
    CompactlogError,
    CorruptRecordError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RecordBatchTooLargeError,
    StorageError,
)
from compactlog.records import RecordBatch
from compactlog.storage.config import BROKER_CONFIGS, LogConfig
from compactlog.storage.file_records import FileBatch
from compactlog.storage.fs import FileSystem
from compactlog.storage.local_log import Clock, LocalLog
from compactlog.storage.producer_state import (
    LastRecord,
    ProducerState,
    ProducerStateManager,
    producer_batches,
)
from compactlog.storage.segment import LogSegment
from compactlog.storage.validator import ValidatedAppend, validate_and_assign

logger = logging.getLogger("compactlog.storage")

_EXPIRATION_DEFAULT = BROKER_CONFIGS["producer.id.expiration.ms"].default
assert isinstance(_EXPIRATION_DEFAULT, int)
DEFAULT_PRODUCER_ID_EXPIRATION_MS: int = _EXPIRATION_DEFAULT


class Log:
    """A partition's segmented log. Create with :func:`compactlog.storage.loader.load_log`."""

    def __init__(
        self,
        local_log: LocalLog,
        *,
        log_start_offset: int,
        producer_state: ProducerStateManager | None = None,
    ) -> None:
        """``producer_state``: as the loader rebuilt it; without it the log starts with no
        producers and never writes producer snapshots (a view of the files, not their owner)."""
        self.local_log = local_log
        self.lock = threading.RLock()
        self._log_start_offset = log_start_offset
        self._pending_flush_offset = 0
        if producer_state is None:
            producer_state = ProducerStateManager(
                local_log.fs,
                local_log.dir,
                self.name,
                producer_id_expiration_ms=DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                writes_snapshots=False,
            )
            producer_state.update_map_end_offset(local_log.log_end_offset)
        self._producer_state = producer_state
        self._unsynced_snapshots: list[str] = []  # written at a roll, fsynced by the next flush
        self._closed = False

    # --- identity and state ---------------------------------------------------------------
    @property
    def fs(self) -> FileSystem:
        return self.local_log.fs

    @property
    def dir(self) -> str:
        return self.local_log.dir

    @property
    def topic(self) -> str:
        return self.local_log.topic

    @property
    def partition(self) -> int:
        return self.local_log.partition

    @property
    def clock(self) -> Clock:
        return self.local_log.clock

    @property
    def name(self) -> str:
        return self.local_log.name

    def __repr__(self) -> str:
        return f"Log({self.name}, start={self._log_start_offset}, end={self.log_end_offset})"

    @property
    def config(self) -> LogConfig:
        return self.local_log.config

    def update_config(self, config: LogConfig) -> None:
        """Dynamic config change: takes effect for the next append, roll and retention run."""
        with self.lock:
            self.local_log.update_config(config)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.local_log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.local_log.log_end_offset

    @property
    def recovery_point(self) -> int:
        return self.local_log.recovery_point

    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments, oldest first."""
        return self.local_log.segments()

    @property
    def active_segment(self) -> LogSegment:
        return self.local_log.active_segment

    def size(self) -> int:
        return self.local_log.size()

    def unflushed_messages(self) -> int:
        return self.local_log.unflushed_messages()

    def _check_open(self) -> None:
        if self._closed:
            raise CompactlogError(f"log {self.name} is closed")

    @property
    def offline(self) -> StorageError | None:
        """Why the log refuses writes since an I/O error it could not undo, or None."""
        return self.local_log.offline

    def _check_writable(self) -> None:
        """Open and not offline (see the module doc); reads need only :meth:`_check_open`."""
        self._check_open()
        offline = self.local_log.offline
        if offline is not None:
            raise StorageError(f"refused: {offline}") from offline

    def _go_offline(self, reason: str) -> StorageError:
        """Take the log offline because of ``reason`` (the first one stays); returns the error
        to raise."""
        if self.local_log.offline is None:
            self.local_log.offline = StorageError(
                f"{self.name} is offline: {reason}; appends, rolls and flushes of {self.name} "
                f"are refused until the store is reopened, which recovers the log from its "
                f"files in {self.dir}"
            )
            logger.error("%s", self.local_log.offline)
        return self.local_log.offline

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
            self._check_writable()
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
            self._check_writable()
            config = self.config
            now = self.clock()
            validated = validate_and_assign(
                data,
                config=config,
                topic_partition=self.name,
                next_offset=self.log_end_offset,
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
            self._maybe_roll(size, validated.max_timestamp, validated.last_offset, now)
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
            fields = None
            if validated.batch_count == 1:  # a producer's append: its header is known
                fields = [(validated.last_offset, validated.max_timestamp, len(validated.data))]
            mark = self.local_log.append(validated.last_offset, validated.data, fields)
            if producer_append is not None:
                self._producer_state.update(producer_append)
            self._producer_state.map_end_offset = self.log_end_offset
            if self.unflushed_messages() >= config.flush_messages:
                try:
                    self.flush()
                except StorageError as exc:
                    # Offline now; the append is not acknowledged, so readers must not see it.
                    removed = self.local_log.withdraw_append(mark, validated.first_offset)
                    raise StorageError(
                        f"the append of offsets {validated.first_offset}.."
                        f"{validated.last_offset} to {self.name} could not be made durable "
                        "(flush.messages), so it is not acknowledged; it was withdrawn from the "
                        + (
                            "log and its file"
                            if removed
                            else "log, but cutting it from the file failed: it may be found "
                            "there when the log is reopened"
                        )
                        + f": {exc}"
                    ) from exc
            return validated

    def _max_segment_ms(self) -> int:
        config = self.config
        if config.compact and config.max_compaction_lag_ms > 0:
            return min(config.max_compaction_lag_ms, config.segment_ms)
        return config.segment_ms

    def _should_roll(
        self, segment: LogSegment, size: int, max_ts: int, last: int, now: int
    ) -> bool:
        config = self.config
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
        segment = self.local_log.active_segment
        if self._should_roll(segment, size, max_ts, last_offset, now):
            return self.roll()
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or a larger expected offset)."""
        with self.lock:
            self._check_writable()
            active = self.local_log.active_segment
            segment = self.local_log.roll(expected_next_offset)
            if segment is active:
                return segment  # rolling an empty segment at the same offset changes nothing
            new_offset = segment.base_offset
            # Kafka flushes the segment it rolled past asynchronously; so do we (flush_pending).
            self._pending_flush_offset = max(self._pending_flush_offset, new_offset)
            # The snapshot's offset is the new segment's base, so that loading can start from it
            # and replay only this segment. Not fsynced here: the next flush does it.
            self._producer_state.update_map_end_offset(new_offset)
            try:
                snapshot = self._producer_state.take_snapshot(sync=False)
            except StorageError as exc:
                raise self._discard_failed_snapshot(new_offset, exc) from exc
            if snapshot is not None:
                self._unsynced_snapshots.append(snapshot)
            return segment

    def _discard_failed_snapshot(self, offset: int, exc: StorageError) -> StorageError:
        """A roll's producer snapshot could not be written: remove what was written of it (the
        roll itself stands: the new segment is empty and valid, and without this snapshot the
        next load replays from the previous one); returns the error to raise, which takes the
        log offline if even the removal fails."""
        path = self._producer_state.snapshot_path(offset)
        try:
            self.fs.remove(path)
        except StorageError as remove_exc:
            return self._go_offline(
                f"the producer snapshot of a roll could not be written ({exc}) and removing "
                f"what was written of it failed too ({remove_exc})"
            )
        return StorageError(
            f"{self.name} rolled to a new segment at offset {offset}, but its producer "
            f"snapshot could not be written and was removed (the next load replays from the "
            f"previous one): {exc}"
        )

    def flush_pending(self) -> None:
        """Flush what a roll asked to flush (the store's background thread calls this)."""
        with self.lock:
            if (
                self._closed
                or self.local_log.offline is not None
                or (
                    self._pending_flush_offset <= self.recovery_point
                    and not self._unsynced_snapshots
                )
            ):
                return
            self.flush(self._pending_flush_offset)

    # --- durability -----------------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in ``[recovery point, offset)``; advance it."""
        with self.lock:
            self._check_writable()
            try:
                self._flush(offset)
            except StorageError as exc:
                # A failed fsync cannot be retried: the kernel may have dropped the pages.
                raise self._go_offline(f"a flush failed ({exc})") from exc

    def _flush(self, offset: int | None) -> None:
        local = self.local_log
        end = local.log_end_offset
        target = end if offset is None else min(offset, end)
        if target <= local.recovery_point:
            if self._unsynced_snapshots:  # a roll's snapshot, and no data to flush
                self._sync_snapshots()  # marks the directory changed
                local.sync_dir_if_changed()
            return
        local.flush(target)
        self._sync_snapshots()
        local.sync_dir_if_changed()
        local.mark_flushed(target)

    def _sync_snapshots(self) -> None:
        for path in self._unsynced_snapshots:
            if self.fs.exists(path):  # retention may have removed it since
                handle = self.fs.open(path)
                try:
                    handle.sync()
                finally:
                    handle.close()
        if self._unsynced_snapshots:
            self.local_log.note_dir_change()
        self._unsynced_snapshots = []

    def flush_if_due(self, now: int) -> bool:
        """The ``flush.ms`` rule, run by the store's background flusher."""
        if (
            self.local_log.offline is None
            and now - self.local_log.last_flush_ms >= self.config.flush_ms
            and self.unflushed_messages() > 0
        ):
            self.flush()
            return True
        return False

    # --- reads ----------------------------------------------------------------------------
    def _check_read_offset(self, offset: int) -> None:
        end = self.log_end_offset
        if offset < self._log_start_offset or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.name}: the log holds "
                f"[{self._log_start_offset}, {end})"
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

    def iter_batches(
        self, start_offset: int, end_offset: int | None = None, *, verify_crc: bool = True
    ) -> Iterator[FileBatch]:
        """Whole batches from the first one holding an offset >= ``start_offset``.

        Reads a snapshot of the segment list: concurrent appends after the call are not seen
        beyond the log end offset captured at the start. Every batch's CRC is checked before it
        is handed out (``verify_crc=False`` skips that, for callers that check it themselves):
        a damaged batch raises :class:`~compactlog.errors.CorruptRecordError` naming the file
        and the position, after every batch before it was yielded.
        """
        self._check_open()
        self._check_read_offset(start_offset)
        segments = self.local_log.segments()
        end = self.log_end_offset
        upper = end if end_offset is None else min(end_offset, end)
        return self._iter_batches(segments, start_offset, upper, verify_crc)

    def _iter_batches(
        self, segments: list[LogSegment], start_offset: int, upper: int, verify_crc: bool
    ) -> Iterator[FileBatch]:
        if start_offset >= upper:
            return
        i = self._segment_index_for(segments, start_offset)
        first = True
        expected = 0  # the smallest base offset the next batch may have
        for k in range(i, len(segments)):
            segment = segments[k]
            if segment.base_offset >= upper:
                return
            if first:
                batch = segment.translate_offset(start_offset, verify_crc=verify_crc)
                first = False
                if batch is None:
                    continue
                position = batch.position
            else:
                position = 0
            bound = segments[k + 1].base_offset if k + 1 < len(segments) else None
            for batch in segment.batches(position, verify_crc=verify_crc):
                header = batch.header
                if header.base_offset >= upper:
                    # Beyond the read; but a base offset past the live log end offset (its
                    # bytes are outside the CRC) is damage, not the end of the data.
                    if header.base_offset > self.log_end_offset:
                        raise _misplaced(segment, batch, f"the log ends at {self.log_end_offset}")
                    return
                if header.base_offset < expected:
                    raise _misplaced(segment, batch, f"the batch before ends at {expected - 1}")
                if bound is not None and header.last_offset >= bound:
                    raise _misplaced(segment, batch, f"the next segment starts at {bound}")
                expected = header.next_offset
                yield batch

    def read(self, start_offset: int, max_bytes: int, *, min_one_batch: bool = True) -> bytes:
        """Up to ``max_bytes`` of whole batches from ``start_offset`` (at least one batch).

        A damaged batch ends the read: the batches before it are returned, and a read that
        starts at it raises :class:`~compactlog.errors.CorruptRecordError` (the broker answers
        CORRUPT_MESSAGE for that partition only).
        """
        out: list[memoryview] = []
        total = 0
        try:
            for batch in self.iter_batches(start_offset):
                size = len(batch.data)
                if total + size > max_bytes and (total > 0 or not min_one_batch):
                    break
                out.append(batch.data)
                total += size
        except CorruptRecordError:
            if not out:
                raise
        return b"".join(out)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start offset with
        timestamp >= ``timestamp``, or None: Kafka's ``fetchOffsetByTimestamp``, the first
        segment whose largest timestamp reaches ``timestamp``, searched from its time index's
        entry onward to its end (so its records not yet indexed count). Where that segment's
        only such records lie below the log start offset, the next segments are searched
        (Kafka answers none)."""
        start = self._log_start_offset
        for segment in self.local_log.segments():
            if segment.largest_timestamp() < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, start)
            if found is not None:
                return found
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the log's largest timestamp, or None
        for a log without records: Kafka's ListOffsets MAX_TIMESTAMP (-3), which looks in the
        first segment holding that timestamp and returns the record's own offset (Kafka 3.8+)."""
        segments = self.local_log.segments()
        latest = max(segments, key=lambda segment: segment.max_timestamp_so_far)
        target = latest.max_timestamp_so_far
        if target < 0:
            return None
        batch = latest.first_batch_reaching(target)
        if batch is None:
            return None
        for record in RecordBatch(batch.data).records():
            if record.timestamp >= target:
                return record.offset, record.timestamp
        return None

    # --- the cleaner's swap ---------------------------------------------------------------
    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        """An empty ``<base>.log.cleaned`` segment (:meth:`LocalLog.new_cleaned_segment
        <compactlog.storage.local_log.LocalLog.new_cleaned_segment>`)."""
        return self.local_log.new_cleaned_segment(base_offset)

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Swap a finished ``.cleaned`` segment in for ``old``.

        The local log's crash-safe swap
        (:meth:`~compactlog.storage.local_log.LocalLog.replace_segments`) runs first; then, as in
        Kafka's ``UnifiedLog.replaceSegments``, the producer snapshots of the replaced segments
        go too, except the one at the new segment's base offset.
        """
        with self.lock:
            self._check_writable()
            present, now = self.local_log.replace_segments(new, old)
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
            self.local_log.delete_files_later(tuple(paths), now)

    # --- retention and deletion ---------------------------------------------------------
    def delete_records(self, before_offset: int) -> int:
        """Raise the log start offset to ``before_offset`` (Kafka's DeleteRecords).

        Refused on ``compact``-only topics with ``POLICY_VIOLATION``, and above the high
        watermark with ``OFFSET_OUT_OF_RANGE``. Whole segments below the new start offset are
        removed by the next retention run. Returns the log start offset after the call.
        """
        with self.lock:
            self._check_writable()
            config = self.config
            if not config.delete:
                raise PolicyViolationError(
                    f"records of partition {self.name} cannot be deleted: its cleanup.policy "
                    f"is {','.join(sorted(config.cleanup_policy))}"
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
        segments = self.local_log.segments()
        for i, segment in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            last_and_empty = nxt is None and segment.size == 0
            if self.high_watermark >= upper and not last_and_empty and predicate(segment, nxt):
                result.append(segment)
            else:
                break
        return result

    def _delete_segments(self, deletable: list[LogSegment]) -> int:
        if not deletable:
            return 0
        local = self.local_log
        if len(deletable) == len(local.segments()):
            self.roll()
        now = self.clock()
        # Also moves the recovery point up to the first remaining segment.
        local.remove_and_delete_segments(deletable, now)
        first_base = local.segments()[0].base_offset
        start = max(self._log_start_offset, min(first_base, self.high_watermark))
        if start > self._log_start_offset:
            self._log_start_offset = start
            self._producer_state.on_log_start_offset_incremented(start)
        self._delete_producer_snapshots(deletable, now)
        return len(deletable)

    def delete_log_start_offset_breached_segments(self) -> int:
        def breached(segment: LogSegment, nxt: LogSegment | None) -> bool:
            return nxt is not None and nxt.base_offset <= self._log_start_offset

        return self._delete_segments(self._deletable_segments(breached))

    def delete_retention_size_breached_segments(self) -> int:
        retention = self.config.retention_bytes
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
        retention = self.config.retention_ms
        if retention < 0:
            return 0

        def breached(segment: LogSegment, nxt: LogSegment | None) -> bool:
            return now - segment.largest_timestamp() > retention

        return self._delete_segments(self._deletable_segments(breached))

    def delete_old_segments(self, now: int | None = None) -> int:
        """One retention pass (Kafka's ``deleteOldSegments``); returns the segments deleted."""
        with self.lock:
            self._check_writable()
            now = self.clock() if now is None else now
            deleted = self.delete_log_start_offset_breached_segments()
            if self.config.delete:
                deleted += self.delete_retention_size_breached_segments()
                deleted += self.delete_retention_ms_breached_segments(now)
            self.remove_deleted_files(now)
            return deleted

    def remove_deleted_files(self, now: int | None = None, *, force: bool = False) -> None:
        """Physically remove ``.deleted`` segments whose ``file.delete.delay.ms`` has passed."""
        with self.lock:
            self.local_log.remove_deleted_files(now, force=force)

    # --- life cycle -----------------------------------------------------------------------
    def close(self) -> None:
        """Flush, trim and close every segment (a clean shutdown of this log)."""
        with self.lock:
            if self._closed:
                return
            if self.local_log.offline is not None:
                # Nothing more is written: the next open recovers the log from its files.
                self.close_without_flush()
                return
            try:
                self.flush()
                # A snapshot at the log end offset: the next load needs no replay.
                if self._producer_state.take_snapshot() is not None:
                    self.fs.sync_dir(self.dir)
                self.local_log.close()
            except StorageError as exc:
                error = self._go_offline(f"closing the log failed ({exc})")
                self.close_without_flush()
                raise error from exc
            self._closed = True

    def close_without_flush(self) -> None:
        """Release file handles only: what a crash would leave, minus the lost process. The
        segments waiting as ``.deleted`` are released too (their files stay for recovery)."""
        with self.lock:
            self.local_log.close_handles()
            self._closed = True

    def delete(self) -> None:
        """Remove every file of this log and its directory."""
        with self.lock:
            self.local_log.delete_all_segments()
            self._closed = True
            self.local_log.delete_dir()


def _misplaced(segment: LogSegment, batch: FileBatch, why: str) -> CorruptRecordError:
    header = batch.header
    return CorruptRecordError(
        f"{segment.log_path}: position {batch.position}: the batch of offsets "
        f"{header.base_offset}..{header.last_offset} is damaged: its base offset does not fit "
        f"({why})"
    )
