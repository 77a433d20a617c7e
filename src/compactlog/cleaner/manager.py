"""Which log the cleaner works on next, and which range of it (Kafka's ``LogCleanerManager``).

Theory of operation (spec 4):

* **Candidates.** Every call of :meth:`LogCleanerManager.grab_filthiest_compacted_log` looks at
  all hosted logs afresh: a log is a candidate if its ``cleanup.policy`` contains ``compact``, it
  has no cleaning state (below) and it is not marked uncleanable.
* **First dirty offset (FDO).** The partition's entry in ``cleaner-offset-checkpoint`` (re-read
  from disk on every call), or the log start offset when there is none. An entry below the log
  start offset or above the log end offset is reset to the log start offset, and the file is
  rewritten at once, whether or not the log is chosen afterwards.
* **First uncleanable offset.** Cleaning never reaches the active segment, data above the high
  watermark (= the last stable offset here), or, with ``min.compaction.lag.ms`` > 0, the first
  segment from the one holding the FDO whose largest timestamp (file mtime if it has none) is
  younger than the lag. The minimum of these, but at least the FDO, is the *first uncleanable
  dirty offset* (FUDO); aligned down to a segment base it is the *first uncleanable offset*
  (FUO), the exclusive bound the cleaning algorithm uses.
* **Dirty ratio.** ``cleanable / (clean + cleanable)`` where *clean* is the bytes of the segments
  that start below the FDO and *cleanable* the bytes of the segments from the one holding the FDO
  up to the FUO. Bytes at or after the FUO count in neither; a segment straddling the FDO counts
  in both.
* **Choice.** A candidate is eligible if its ratio is strictly above ``min.cleanable.dirty.ratio``
  or if ``max.compaction.lag.ms`` has expired for one of its dirty segments (by the first batch's
  timestamp) and it has cleanable bytes. The eligible log with the highest ratio wins (max lag
  only makes a log eligible, it does not give it priority) and is marked in progress.
* **Cleaning states** (absent = idle)::

      idle --grab/logs_to_delete--> InProgress --done_cleaning/done_deleting--> idle
      idle --abort_and_pause--> Paused(1)           Paused(n) --abort_and_pause--> Paused(n+1)
      InProgress --abort_and_pause--> Aborted --done_cleaning/done_deleting--> Paused(1)
      Paused(1) --resume--> idle                    Paused(n>1) --resume--> Paused(n-1)

  ``abort_and_pause`` of an in-progress partition blocks until the cleaner thread reports back,
  so when it returns no thread works on the partition. Every other transition is an error.
* **Uncleanable partitions.** A partition whose statistics or retention raised, or whose
  cleaning failed ``compactlog.cleaner.max.attempts`` times in a row, is kept out of cleaning and
  of the cleaner's retention pass until it leaves the store (or the store is reopened), as
  Kafka keeps it (``uncleanable-partitions-count``).
* **Failed cleanings** (beyond Kafka, which marks a partition uncleanable at its first failure):
  a cleaning that fails is retried, not at once but after a back-off of
  ``log.cleaner.backoff.ms`` x 2^(failures - 1), at most :data:`MAX_BACKOFF_FACTOR` x
  ``log.cleaner.backoff.ms``; during the back-off the partition is not selected. A failure
  counts towards the limit unless it is an I/O error (disk full, EIO: not the partition's
  fault; such a partition is retried after the back-off for as long as it takes). A cleaning
  that succeeds forgets the failures. A partition with counted failures is kept out of the
  cleaner's retention pass, as an uncleanable one is.

One lock (a condition variable over a re-entrant lock) guards the states, the uncleanable set and
every read-modify-write of the checkpoint file: several cleaner threads share one manager.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from compactlog.errors import (
    IllegalCleaningStateError,
    MalformedCheckpointError,
    StorageError,
)
from compactlog.storage.checkpoint import OffsetCheckpointFile
from compactlog.storage.log import Log
from compactlog.storage.segment import LogSegment

logger = logging.getLogger("compactlog.cleaner")

TopicPartition = tuple[str, int]

#: Java's Long.MAX_VALUE: "no timestamp" for the max-compaction-lag rule.
LONG_MAX = 2**63 - 1

#: Why a dirty range stops where it stops (``LogToClean.uncleanable_reason``).
REASON_ACTIVE_SEGMENT = "active segment"
REASON_MIN_COMPACTION_LAG = "min.compaction.lag.ms"
REASON_HIGH_WATERMARK = "high watermark"


#: The back-off after a failed cleaning grows up to this many times ``log.cleaner.backoff.ms``.
MAX_BACKOFF_FACTOR = 16


@dataclass(frozen=True)
class CleaningFailure:
    """The failed cleanings of a partition since its last success."""

    attempts: int  # failures that count towards ``compactlog.cleaner.max.attempts``
    io_errors: int  # failures by an I/O error (not counted)
    retry_at_ms: int  # not selected before this time
    reason: str  # the last failure


# --- cleaning states ------------------------------------------------------------------------


@dataclass(frozen=True)
class LogCleaningState:
    """``in-progress``, ``aborted`` or ``paused`` with its nesting count."""

    kind: str
    paused_count: int = 0

    def __str__(self) -> str:
        return f"paused({self.paused_count})" if self.kind == "paused" else self.kind


IN_PROGRESS = LogCleaningState("in-progress")
ABORTED = LogCleaningState("aborted")


def paused(count: int) -> LogCleaningState:
    return LogCleaningState("paused", count)


# --- the range to clean -------------------------------------------------------------------


class OffsetsToClean(NamedTuple):
    """The range of spec 4.2/4.3 and the max-lag verdict of 4.5."""

    first_dirty_offset: int
    #: FUDO: before alignment, never below the FDO.
    first_uncleanable_dirty_offset: int
    #: FUO: FUDO aligned down to a segment base (the active base if FUDO is at or past it).
    first_uncleanable_offset: int
    needs_compaction_now: bool
    compaction_delay_ms: int
    #: The checkpoint was outside [log start offset, LEO]: it must be rewritten as the FDO.
    checkpoint_reset: bool


@dataclass(frozen=True)
class LogToClean:
    """A candidate log with its range and byte counts (Kafka's ``LogToClean``)."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    #: FUO, aligned down to a segment boundary: the exclusive upper bound used for cleaning.
    first_uncleanable_offset: int
    #: FUDO, before alignment (spec 4.3).
    first_uncleanable_dirty_offset: int
    clean_bytes: int
    cleanable_bytes: int
    total_bytes: int
    #: ``cleanable_bytes / total_bytes``; 0.0 for a log with no bytes (never chosen).
    cleanable_ratio: float
    needs_compaction_now: bool
    compaction_delay_ms: int
    #: What ends the range: "active segment", "min.compaction.lag.ms", "high watermark", or
    #: None when nothing is dirty (FDO = LEO).
    uncleanable_reason: str | None


class _Range(NamedTuple):
    offsets: OffsetsToClean
    reason: str | None
    segments: list[LogSegment]


def _values(segments: list[LogSegment], start: int, end: int) -> list[LogSegment]:
    """Kafka's ``LogSegments.values(from, to)``: the segments from the one holding ``start`` (or
    the first) whose base offset is below ``end``; empty when ``start == end``."""
    if start == end:
        return []
    if end < start:
        raise ValueError(f"invalid segment range [{start}, {end})")
    bases = [s.base_offset for s in segments]
    first = max(bisect.bisect_right(bases, start) - 1, 0)
    return segments[first : bisect.bisect_left(bases, end)]


def _non_active_from(segments: list[LogSegment], offset: int) -> list[LogSegment]:
    """Kafka's ``nonActiveLogSegmentsFrom``: from the segment holding ``offset``, not the active."""
    active = segments[-1]
    if offset > active.base_offset:
        return []
    return _values(segments, offset, active.base_offset)


def _size(segments: Iterable[LogSegment]) -> int:
    return sum(s.size for s in segments)


def _compaction_delay_ms(log: Log, dirty: list[LogSegment], now: int) -> int:
    """How long ago max.compaction.lag.ms expired for the oldest dirty segment (0 if it has not).

    Measured by each non-active dirty segment's first-batch timestamp; values <= 0 (no
    timestamp) are ignored.
    """
    timestamps = [t for t in (s.first_batch_timestamp() for s in dirty) if t > 0]
    earliest = min(timestamps, default=LONG_MAX)
    clean_until = now - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def _cleanable_range(log: Log, checkpoint: int | None, now: int) -> _Range:
    segments = log.segments()
    active = segments[-1]
    log_start = log.log_start_offset
    log_end = log.log_end_offset
    config = log.config
    wanted = log_start if checkpoint is None else checkpoint
    if wanted < log_start:
        if not (config.compact and config.delete):
            logger.warning(
                "resetting the first dirty offset of %s to the log start offset %d: the "
                "checkpointed offset %d is below it",
                log.name,
                log_start,
                wanted,
            )
        first_dirty, reset = log_start, True
    elif wanted > log_end:
        logger.warning(
            "the cleaner checkpoint %d of %s is above the log end offset %d; resetting it to "
            "the log start offset %d (the whole log needs cleaning)",
            wanted,
            log.name,
            log_end,
            log_start,
        )
        first_dirty, reset = log_start, True
    else:
        first_dirty, reset = wanted, False

    dirty = _non_active_from(segments, first_dirty)
    # Ties go to the later entry: an empty active segment explains more than the high watermark.
    limits = [
        (log.high_watermark, REASON_HIGH_WATERMARK),
        (active.base_offset, REASON_ACTIVE_SEGMENT),
    ]
    min_lag = max(config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        young = next((s for s in dirty if s.largest_timestamp() > now - min_lag), None)
        if young is not None:
            limits.append((young.base_offset, REASON_MIN_COMPACTION_LAG))
    limit = min(offset for offset, _ in limits)
    reason = [r for offset, r in limits if offset == limit][-1]
    first_uncleanable_dirty = max(first_dirty, limit)

    above = _non_active_from(segments, first_uncleanable_dirty)
    first_uncleanable = above[0].base_offset if above else active.base_offset

    delay = _compaction_delay_ms(log, dirty, now)
    offsets = OffsetsToClean(
        first_dirty, first_uncleanable_dirty, first_uncleanable, delay > 0, delay, reset
    )
    return _Range(offsets, None if first_dirty >= log_end else reason, segments)


def cleanable_offsets(log: Log, checkpoint: int | None, now: int) -> OffsetsToClean:
    """The range of ``log`` to clean given its cleaner checkpoint (None: no entry) at ``now``.

    Applies every rule of spec 4.2 (reset of a checkpoint outside [log start offset, LEO]),
    4.3 (high watermark, active segment, min.compaction.lag.ms per segment, alignment) and 4.5
    (max.compaction.lag.ms). Writes nothing: when ``checkpoint_reset`` is set the caller rewrites
    the checkpoint with ``first_dirty_offset``.
    """
    return _cleanable_range(log, checkpoint, now).offsets


def _log_to_clean(tp: TopicPartition, log: Log, rng: _Range) -> LogToClean:
    offsets = rng.offsets
    first_dirty = offsets.first_dirty_offset
    first_uncleanable = offsets.first_uncleanable_offset
    clean = _size(_values(rng.segments, -1, first_dirty))
    cleanable = _size(_values(rng.segments, min(first_dirty, first_uncleanable), first_uncleanable))
    total = clean + cleanable
    return LogToClean(
        topic_partition=tp,
        log=log,
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=first_uncleanable,
        first_uncleanable_dirty_offset=offsets.first_uncleanable_dirty_offset,
        clean_bytes=clean,
        cleanable_bytes=cleanable,
        total_bytes=total,
        cleanable_ratio=cleanable / total if total > 0 else 0.0,
        needs_compaction_now=offsets.needs_compaction_now,
        compaction_delay_ms=offsets.compaction_delay_ms,
        uncleanable_reason=rng.reason,
    )


def log_to_clean(tp: TopicPartition, log: Log, checkpoint: int | None, now: int) -> LogToClean:
    """The candidate ``log`` with its range (:func:`cleanable_offsets`) and dirty ratio (4.4)."""
    return _log_to_clean(tp, log, _cleanable_range(log, checkpoint, now))


def log_to_clean_for_range(
    tp: TopicPartition,
    log: Log,
    first_dirty_offset: int,
    first_uncleanable_dirty_offset: int,
    *,
    compaction_delay_ms: int = 0,
    uncleanable_reason: str | None = None,
) -> LogToClean:
    """Kafka's ``LogToClean`` constructor: byte counts for a range given directly."""
    segments = log.segments()
    above = _non_active_from(segments, first_uncleanable_dirty_offset)
    first_uncleanable = above[0].base_offset if above else segments[-1].base_offset
    offsets = OffsetsToClean(
        first_dirty_offset,
        first_uncleanable_dirty_offset,
        first_uncleanable,
        compaction_delay_ms > 0,
        compaction_delay_ms,
        False,
    )
    return _log_to_clean(tp, log, _Range(offsets, uncleanable_reason, segments))


def is_eligible(candidate: LogToClean) -> bool:
    """Spec 4.5: max lag expired with something to clean, or a ratio strictly above the minimum."""
    return (
        candidate.needs_compaction_now and candidate.cleanable_bytes > 0
    ) or candidate.cleanable_ratio > candidate.log.config.min_cleanable_dirty_ratio


# --- statistics ----------------------------------------------------------------------------


@dataclass
class PreCleanStats:
    """What one selection saw (Kafka's ``PreCleanStats``), for the summary line of spec 5.11."""

    max_compaction_delay_ms: int = 0
    delayed_partitions: int = 0
    cleanable_partitions: int = 0

    def update_max_compaction_delay(self, delay_ms: int) -> None:
        self.max_compaction_delay_ms = max(self.max_compaction_delay_ms, delay_ms)
        if delay_ms > 0:
            self.delayed_partitions += 1


# --- the manager ---------------------------------------------------------------------------


class LogCleanerManager:
    """Cleaning states, the cleaner checkpoint and the choice of the filthiest log.

    ``logs`` returns the hosted logs (read afresh on every call, so topics may come and go),
    ``checkpoint`` is the data directory's ``cleaner-offset-checkpoint`` and ``clock`` returns
    epoch milliseconds.
    """

    def __init__(
        self,
        logs: Callable[[], Mapping[TopicPartition, Log]],
        checkpoint: OffsetCheckpointFile,
        clock: Callable[[], int],
    ) -> None:
        self._logs = logs
        self._checkpoint = checkpoint
        self._clock = clock
        self._cond = threading.Condition(threading.RLock())
        self._states: dict[TopicPartition, LogCleaningState] = {}
        self._uncleanable: dict[TopicPartition, str] = {}
        self._failures: dict[TopicPartition, CleaningFailure] = {}
        self._dirtiest_ratio = 0.0
        self._time_of_last_run = clock()
        # Per cleaner thread, the stats of its last selection that returned a log (Kafka's
        # CleanerThread.lastPreCleanStats); max-compaction-delay-secs is the max over threads.
        self._last_stats_by_thread: dict[int, PreCleanStats] = {}
        self._last_stats = PreCleanStats()

    # --- checkpoints ---------------------------------------------------------------------
    def _read_checkpoints(self) -> dict[TopicPartition, int]:
        try:
            return self._checkpoint.read()
        except (MalformedCheckpointError, StorageError) as exc:
            # Kafka logs a checkpoint it cannot read and carries on as if it were empty.
            logger.error("cannot read %s: %s", self._checkpoint.path, exc)
            return {}

    def _update_checkpoints(
        self, update: tuple[TopicPartition, int] | None = None, remove: TopicPartition | None = None
    ) -> None:
        """Read-modify-write; entries of partitions no longer hosted are dropped (as Kafka)."""
        with self._cond:
            hosted = self._logs()
            entries = {tp: o for tp, o in self._read_checkpoints().items() if tp in hosted}
            if remove is not None:
                entries.pop(remove, None)
            if update is not None:
                entries[update[0]] = update[1]
            self._checkpoint.write(entries)

    def checkpoints(self) -> dict[TopicPartition, int]:
        """The cleaner checkpoint as on disk (a damaged file reads as empty)."""
        with self._cond:
            return self._read_checkpoints()

    def update_checkpoint(self, tp: TopicPartition, offset: int | None) -> None:
        """Set ``tp``'s entry, or remove it with None (topic deleted, partition moved away)."""
        if offset is None:
            self._update_checkpoints(remove=tp)
        else:
            self._update_checkpoints(update=(tp, offset))

    def maybe_truncate_checkpoint(self, tp: TopicPartition, offset: int) -> None:
        """After a truncation: lower ``tp``'s entry to ``offset`` if above (compacted logs only)."""
        with self._cond:
            log = self._logs().get(tp)
            if log is None or not log.config.compact:
                return
            entries = self._read_checkpoints()
            if entries.get(tp, 0) > offset:
                entries[tp] = offset
                self._checkpoint.write(entries)

    # --- selection -----------------------------------------------------------------------
    def _candidate(
        self, tp: TopicPartition, log: Log, checkpoint: int | None, now: int
    ) -> LogToClean:
        rng = _cleanable_range(log, checkpoint, now)
        if rng.offsets.checkpoint_reset:
            try:
                self._update_checkpoints(update=(tp, rng.offsets.first_dirty_offset))
            except StorageError as exc:
                # As Kafka: a checkpoint that cannot be written is logged, not held against the
                # partition.
                logger.error("cannot reset the cleaner checkpoint of %s: %s", log.name, exc)
        return _log_to_clean(tp, log, rng)

    def grab_filthiest_compacted_log(
        self, now: int | None = None, stats: PreCleanStats | None = None
    ) -> LogToClean | None:
        """Choose the eligible log with the highest dirty ratio and mark it in progress.

        ``stats``, if given, is filled with what this selection saw (the cleaner thread's
        summary line). A log whose statistics raise is marked uncleanable and skipped.
        """
        stats = PreCleanStats() if stats is None else stats
        with self._cond:
            now = self._clock() if now is None else now
            self._time_of_last_run = now
            last_clean = self._read_checkpoints()
            candidates: list[LogToClean] = []
            for tp, log in self._logs().items():
                if not log.config.compact or tp in self._states or tp in self._uncleanable:
                    continue
                failure = self._failures.get(tp)
                if failure is not None and failure.retry_at_ms > now:
                    continue  # backing off after a failed cleaning
                try:
                    candidate = self._candidate(tp, log, last_clean.get(tp), now)
                except Exception as exc:
                    logger.warning(
                        "failed to calculate log cleaning stats for %s; marking it uncleanable",
                        log.name,
                        exc_info=True,
                    )
                    self._uncleanable[tp] = (
                        f"failed to calculate log cleaning stats: {type(exc).__name__}: {exc}"
                    )
                    continue
                stats.update_max_compaction_delay(candidate.compaction_delay_ms)
                if candidate.total_bytes > 0:  # an empty log has nothing to weigh
                    candidates.append(candidate)
            self._dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            eligible = [c for c in candidates if is_eligible(c)]
            if not eligible:
                return None
            stats.cleanable_partitions = len(eligible)
            filthiest = max(eligible, key=lambda c: c.cleanable_ratio)
            self._states[filthiest.topic_partition] = IN_PROGRESS
            self._last_stats_by_thread[threading.get_ident()] = stats
            self._last_stats = stats
            return filthiest

    def logs_to_delete(self) -> list[tuple[TopicPartition, Log]]:
        """The compacted logs that are idle and not uncleanable, marked in progress, for the
        cleaner's retention pass (spec 4.8 step 2). Hand them back with :meth:`done_deleting`."""
        with self._cond:
            taken = [
                (tp, log)
                for tp, log in self._logs().items()
                if log.config.compact
                and tp not in self._states
                and tp not in self._uncleanable
                and not self._failing(tp)
            ]
            for tp, _ in taken:
                self._states[tp] = IN_PROGRESS
            return taken

    def pause_cleaning_for_non_compacted_partitions(self) -> list[tuple[TopicPartition, Log]]:
        """Pause (Paused(1)) every idle non-compacted log for the store's own retention run, so
        that a log switching policies is never worked on twice at once; undo with :meth:`resume`."""
        with self._cond:
            taken = [
                (tp, log)
                for tp, log in self._logs().items()
                if not log.config.compact and tp not in self._states
            ]
            for tp, _ in taken:
                self._states[tp] = paused(1)
            return taken

    # --- states --------------------------------------------------------------------------
    def done_cleaning(self, tp: TopicPartition, end_offset: int) -> None:
        """The cleaner thread finished with ``tp``: InProgress -> checkpoint := ``end_offset``,
        idle; Aborted -> Paused(1) without writing."""
        with self._cond:
            state = self._states.get(tp)
            if state is None:
                raise IllegalCleaningStateError(
                    f"done_cleaning: partition {_name(tp)} has no cleaning state"
                )
            if state == IN_PROGRESS:
                # Idle first: a failed write (raised to the caller) must not leave it stuck.
                del self._states[tp]
                self._update_checkpoints(update=(tp, end_offset))
            elif state == ABORTED:
                self._states[tp] = paused(1)
                self._cond.notify_all()
            else:
                raise IllegalCleaningStateError(
                    f"done_cleaning: partition {_name(tp)} is in state {state}, not in progress"
                )

    def done_deleting(self, tps: Iterable[TopicPartition]) -> None:
        """The retention pass finished with ``tps``: InProgress -> idle; Aborted -> Paused(1)."""
        with self._cond:
            for tp in tps:
                state = self._states.get(tp)
                if state is None:
                    raise IllegalCleaningStateError(
                        f"done_deleting: partition {_name(tp)} has no cleaning state"
                    )
                if state == IN_PROGRESS:
                    del self._states[tp]
                elif state == ABORTED:
                    self._states[tp] = paused(1)
                    self._cond.notify_all()
                else:
                    raise IllegalCleaningStateError(
                        f"done_deleting: partition {_name(tp)} is in state {state}, not in progress"
                    )

    def abort_and_pause(self, tp: TopicPartition) -> None:
        """Stop any cleaning of ``tp`` and keep it from being cleaned until :meth:`resume`.

        idle -> Paused(1); Paused(n) -> Paused(n+1); InProgress -> Aborted, then wait until the
        cleaner thread reports (done_cleaning/done_deleting turn it into Paused(1)). Aborted
        raises: someone else is already waiting for that abort.
        """
        with self._cond:
            state = self._states.get(tp)
            if state is None:
                self._states[tp] = paused(1)
            elif state == IN_PROGRESS:
                self._states[tp] = ABORTED
            elif state.kind == "paused":
                self._states[tp] = paused(state.paused_count + 1)
            else:
                raise IllegalCleaningStateError(
                    f"cleaning of partition {_name(tp)} cannot be aborted and paused: it is in "
                    f"state {state}"
                )
            self._cond.wait_for(lambda: self._is_paused(tp))

    def _is_paused(self, tp: TopicPartition) -> bool:
        state = self._states.get(tp)
        return state is not None and state.kind == "paused"

    def resume(self, tp: TopicPartition) -> None:
        """Undo one pause: Paused(1) -> idle, Paused(n) -> Paused(n-1); anything else raises."""
        with self._cond:
            state = self._states.get(tp)
            if state is None:
                raise IllegalCleaningStateError(
                    f"cleaning of partition {_name(tp)} cannot be resumed: it is not paused"
                )
            if state.kind != "paused":
                raise IllegalCleaningStateError(
                    f"cleaning of partition {_name(tp)} cannot be resumed: it is in state {state}"
                )
            if state.paused_count == 1:
                del self._states[tp]
            else:
                self._states[tp] = paused(state.paused_count - 1)

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Abort a cleaning of ``tp`` in progress (blocking until it stopped), then resume."""
        with self._cond:
            self.abort_and_pause(tp)
            self.resume(tp)

    def begin_cleaning(self, tp: TopicPartition) -> None:
        """Mark an idle partition in progress outside the selection (cleaning on demand); end
        with :meth:`done_cleaning`. An uncleanable mark does not prevent it: it is a request."""
        with self._cond:
            state = self._states.get(tp)
            if state is not None:
                raise IllegalCleaningStateError(
                    f"cleaning of partition {_name(tp)} cannot begin: it is in state {state}"
                )
            self._states[tp] = IN_PROGRESS

    def forget_partition(self, tp: TopicPartition) -> None:
        """The partition is being deleted: abort any cleaning of it (blocking, as
        :meth:`abort_cleaning`), then drop its checkpoint entry and its uncleanable mark."""
        with self._cond:
            self.abort_cleaning(tp)
            self._uncleanable.pop(tp, None)
            self._failures.pop(tp, None)
            self._update_checkpoints(remove=tp)

    def is_aborted(self, tp: TopicPartition) -> bool:
        """True once an abort of ``tp`` was requested; the cleaning algorithm polls this."""
        with self._cond:
            return self._states.get(tp) == ABORTED

    def state(self, tp: TopicPartition) -> str | None:
        """The state as text: "in-progress", "aborted", "paused(n)", or None when idle."""
        with self._cond:
            state = self._states.get(tp)
            return None if state is None else str(state)

    def states(self) -> dict[TopicPartition, str]:
        with self._cond:
            return {tp: str(state) for tp, state in self._states.items()}

    # --- uncleanable partitions --------------------------------------------------------------
    def mark_uncleanable(self, tp: TopicPartition, reason: str) -> None:
        with self._cond:
            self._uncleanable[tp] = reason

    def record_failure(
        self,
        tp: TopicPartition,
        reason: str,
        now: int,
        *,
        counts: bool,
        max_attempts: int,
        backoff_ms: int,
    ) -> CleaningFailure | None:
        """A cleaning of ``tp`` failed: back off, or (``counts``, and this was attempt
        ``max_attempts``) mark it uncleanable with ``reason`` and return None."""
        with self._cond:
            last = self._failures.get(tp)
            attempts = (last.attempts if last else 0) + counts
            io_errors = (last.io_errors if last else 0) + (not counts)
            if counts and attempts >= max_attempts:
                self._failures.pop(tp, None)
                self._uncleanable[tp] = f"{reason} (failed {attempts} attempts)"
                return None
            factor = min(2 ** (attempts + io_errors - 1), MAX_BACKOFF_FACTOR)
            failure = CleaningFailure(attempts, io_errors, now + backoff_ms * factor, reason)
            self._failures[tp] = failure
            return failure

    def _failing(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s last cleaning failed for a reason that counts (damaged data): kept
        out of the retention pass as an uncleanable partition is. After I/O errors only, the
        retention pass goes on: it frees space."""
        failure = self._failures.get(tp)
        return failure is not None and failure.attempts > 0

    def record_success(self, tp: TopicPartition) -> None:
        """A cleaning of ``tp`` completed: its failures are forgotten."""
        with self._cond:
            self._failures.pop(tp, None)

    def failures(self) -> dict[TopicPartition, CleaningFailure]:
        """The partitions whose last cleaning failed and that will be retried."""
        with self._cond:
            return dict(self._failures)

    def uncleanable_partitions(self) -> dict[TopicPartition, str]:
        with self._cond:
            return dict(self._uncleanable)

    def prune_uncleanable(self) -> None:
        """Forget uncleanable partitions that are no longer hosted (after every loop)."""
        with self._cond:
            hosted = self._logs()
            for tp in [tp for tp in self._uncleanable if tp not in hosted]:
                del self._uncleanable[tp]
            for tp in [tp for tp in self._failures if tp not in hosted]:
                del self._failures[tp]

    # --- gauges --------------------------------------------------------------------------
    @property
    def max_dirty_percent(self) -> int:
        """``max-dirty-percent``: 100 x the highest ratio among the last selection's candidates."""
        return int(100 * self._dirtiest_ratio)

    @property
    def time_since_last_run_ms(self) -> int:
        """``time-since-last-run-ms``: since the last selection (or since construction)."""
        return self._clock() - self._time_of_last_run

    @property
    def uncleanable_partitions_count(self) -> int:
        with self._cond:
            return len(self._uncleanable)

    @property
    def uncleanable_bytes(self) -> int:
        """``uncleanable-bytes``: the cleanable bytes (spec 4.4) of the uncleanable partitions."""
        with self._cond:
            if not self._uncleanable:
                return 0
            hosted = self._logs()
            last_clean = self._read_checkpoints()
            now = self._clock()
            total = 0
            for tp in self._uncleanable:
                log = hosted.get(tp)
                if log is not None:
                    total += log_to_clean(tp, log, last_clean.get(tp), now).cleanable_bytes
            return total

    @property
    def max_compaction_delay_secs(self) -> float:
        """``max-compaction-delay-secs``: over the cleaner threads, the max compaction delay seen
        by each one's last selection that returned a log."""
        with self._cond:
            delays = [s.max_compaction_delay_ms for s in self._last_stats_by_thread.values()]
            return max(delays, default=0) / 1000

    @property
    def last_pre_clean_stats(self) -> PreCleanStats:
        """The stats of the latest selection that returned a log (any thread)."""
        with self._cond:
            return PreCleanStats(**vars(self._last_stats))

    @property
    def cleanable_partitions(self) -> int:
        """Eligible logs seen by the latest selection that returned a log."""
        return self.last_pre_clean_stats.cleanable_partitions

    @property
    def delayed_partitions(self) -> int:
        """Logs with a positive compaction delay seen by the latest selection that returned one."""
        return self.last_pre_clean_stats.delayed_partitions

    def gauges(self) -> dict[str, float]:
        """Every gauge by its Kafka metric name."""
        return {
            "max-dirty-percent": self.max_dirty_percent,
            "time-since-last-run-ms": self.time_since_last_run_ms,
            "uncleanable-partitions-count": self.uncleanable_partitions_count,
            "uncleanable-bytes": self.uncleanable_bytes,
            "max-compaction-delay-secs": self.max_compaction_delay_secs,
        }


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"
