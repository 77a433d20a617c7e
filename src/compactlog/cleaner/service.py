"""The log cleaner as a service (Kafka's ``LogCleaner`` and its ``CleanerThread``s).

Theory of operation. One :class:`LogCleaner` per store owns a
:class:`~compactlog.cleaner.manager.LogCleanerManager` (selection, states, checkpoint) and
``log.cleaner.threads`` cleaners, each with its own offset map of
``log.cleaner.dedupe.buffer.size / threads`` bytes. One *iteration* (Kafka's
``cleanFilthiestLog``) is:

1. select the filthiest eligible compacted log and clean it (the checkpoint moves to the round's
   end offset). A cleaning that raises leaves the log as it was; the partition backs off and is
   retried, and after ``compactlog.cleaner.max.attempts`` failures in a row it is marked
   uncleanable and skipped from then on, while the others keep being served. An I/O error
   (disk full) stops the round the same way but never counts towards the limit: the partition
   is retried after the back-off until space returns (see
   :class:`~compactlog.cleaner.manager.LogCleanerManager`);
2. run retention (``deleteOldSegments``) on every idle compacted log: ``compact,delete`` topics
   get time and size retention here, pure ``compact`` topics the log-start-offset rule;
3. forget uncleanable marks of partitions that are gone.

Background threads loop over iterations, sleeping ``log.cleaner.backoff.ms`` after one that found
nothing to clean. :meth:`LogCleaner.clean` runs one iteration on the caller's thread (cleaning on
demand), and :meth:`LogCleaner.clean_log` cleans a chosen log whatever its dirty ratio.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.manager import (
    CleaningFailure,
    LogCleanerManager,
    LogToClean,
    cleanable_offsets,
)
from compactlog.cleaner.offset_map import CompactOffsetMap, OffsetMap, SkimpyOffsetMap
from compactlog.cleaner.reads import CleanerBuffers
from compactlog.cleaner.stats import (
    CleanerStats,
    delayed_partitions_line,
    invalid_messages_line,
    summary_message,
)
from compactlog.cleaner.throttler import Throttler
from compactlog.errors import (
    CleaningAbortedError,
    CompactlogError,
    PolicyViolationError,
    StorageError,
)
from compactlog.storage.config import BrokerConfig
from compactlog.storage.log import Log
from compactlog.storage.store import Store

logger = logging.getLogger("compactlog.cleaner")

TopicPartition = tuple[str, int]
MAX_MAP_BYTES = 2**31 - 1
#: compactlog's own setting: failed cleanings in a row before a partition is uncleanable.
MAX_ATTEMPTS = "compactlog.cleaner.max.attempts"


def _errno_name(exc: BaseException) -> str:
    """The errno behind a StorageError, by name ("ENOSPC"), or "no errno"."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno is not None:
            return errno.errorcode.get(cause.errno, str(cause.errno))
        cause = cause.__cause__
    return "no errno"


def new_cleaner(
    broker: BrokerConfig,
    clock: Callable[[], int],
    thread_id: int = 0,
    threads: int = 1,
    *,
    throttler: Throttler | None = None,
    check_abort: Callable[[Log], None] = lambda log: None,
    cleaner_class: type[Cleaner] = Cleaner,
) -> Cleaner:
    """Cleaner ``thread_id`` of ``threads`` as the broker config sizes it: its share of
    ``log.cleaner.dedupe.buffer.size`` for the offset map, half its share of
    ``log.cleaner.io.buffer.size`` for each of the read and write buffers."""
    memory = min(broker.dedupe_buffer_size // threads, MAX_MAP_BYTES)
    offset_map: OffsetMap
    if broker.offset_map_type == "compact":
        offset_map = CompactOffsetMap(memory, broker.io_buffer_load_factor)
    else:
        offset_map = SkimpyOffsetMap(memory, broker.io_buffer_load_factor)
    io_share = max(broker.io_buffer_size // threads // 2, 1024)
    return cleaner_class(
        thread_id,
        offset_map,
        buffers=CleanerBuffers(io_share, max(broker.message_max_bytes, io_share)),
        throttler=throttler or Throttler(broker.io_max_bytes_per_second),
        clock=clock,
        check_abort=check_abort,
    )


@dataclass
class CleanResult:
    """What one cleaner iteration did."""

    cleaned: TopicPartition | None = None
    first_dirty_offset: int = -1
    end_offset: int = -1
    stats: CleanerStats | None = None
    summary: str = ""
    segments_deleted: dict[TopicPartition, int] = field(default_factory=dict)
    #: The partitions marked uncleanable, and the one whose cleaning failed in this iteration
    #: (marked or not), with the reason.
    uncleanable: dict[TopicPartition, str] = field(default_factory=dict)
    #: The partition whose cleaning failed this iteration and will be retried, with its count.
    failures: dict[TopicPartition, CleaningFailure] = field(default_factory=dict)
    aborted: bool = False

    @property
    def did_work(self) -> bool:
        return self.cleaned is not None or any(self.segments_deleted.values())


class LogCleaner:
    """The cleaner of one store; :class:`~compactlog.log_manager.LogManager` creates it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        broker = store.broker
        self.manager = LogCleanerManager(store.logs, store.cleaner_offset_checkpoint, store.clock)
        self.throttler = Throttler(broker.io_max_bytes_per_second)
        threads = max(broker.cleaner_threads, 1)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._cleaners = [self._new_cleaner(i, threads) for i in range(threads)]
        # One lock per cleaner, held for a whole iteration: a cleaner (and its offset map)
        # serves one thread at a time, whether a background thread or an on-demand call.
        self._cleaner_locks = {c.thread_id: threading.Lock() for c in self._cleaners}
        self._last_stats: dict[int, CleanerStats] = {}  # per cleaner thread: its last round
        self._io_errors = 0  # cleanings stopped by an I/O error since the start

    def _new_cleaner(self, thread_id: int, threads: int) -> Cleaner:
        return new_cleaner(
            self.store.broker,
            self.store.clock,
            thread_id,
            threads,
            throttler=self.throttler,
            check_abort=self._check_abort,
        )

    # --- abort checks ---------------------------------------------------------------------
    def _check_abort(self, log: Log) -> None:
        """Called by the cleaner before every chunk: stop at shutdown or when aborted."""
        if self._stop.is_set():
            raise CleaningAbortedError("the cleaner is shutting down")
        if self.manager.is_aborted((log.topic, log.partition)):
            raise CleaningAbortedError(f"cleaning of {log.name} was aborted")

    # --- one iteration --------------------------------------------------------------------
    def clean(self, now: int | None = None) -> CleanResult:
        """One iteration on the caller's thread (cleaning on demand), with cleaner 0 (waiting
        for background thread 0 to finish its iteration if it is in one)."""
        return self._iteration(self._cleaners[0], now)

    def _iteration(self, cleaner: Cleaner, now: int | None) -> CleanResult:
        with self._cleaner_locks[cleaner.thread_id]:
            return self._unlocked_iteration(cleaner, now)

    def _unlocked_iteration(self, cleaner: Cleaner, now: int | None) -> CleanResult:
        now = self.store.clock() if now is None else now
        result = CleanResult()
        to_clean = self.manager.grab_filthiest_compacted_log(now)
        if to_clean is not None:
            self._clean_selected(cleaner, to_clean, now, result)
        self._retention(now, result)
        self.manager.prune_uncleanable()
        # I/O errors are reported but, as in Kafka, do not mark the partition uncleanable.
        result.uncleanable = {**self.manager.uncleanable_partitions(), **result.uncleanable}
        return result

    def _clean_selected(
        self, cleaner: Cleaner, to_clean: LogToClean, now: int, result: CleanResult
    ) -> None:
        tp = to_clean.topic_partition
        log = to_clean.log
        fdo = to_clean.first_dirty_offset
        result.cleaned = tp
        result.first_dirty_offset = fdo
        end_offset = fdo
        try:
            end_offset, stats = cleaner.clean(log, fdo, to_clean.first_uncleanable_offset, now)
            result.end_offset = end_offset
            result.stats = stats
            self._last_stats[cleaner.thread_id] = stats
            result.summary = summary_message(cleaner.thread_id, log.name, fdo, end_offset, stats)
            logger.info("%s", result.summary)
            pre = self.manager.last_pre_clean_stats
            if pre.delayed_partitions:
                logger.info(
                    "%s",
                    delayed_partitions_line(
                        pre.cleanable_partitions,
                        pre.delayed_partitions,
                        pre.max_compaction_delay_ms,
                    ),
                )
            if stats.invalid_messages:
                logger.warning("%s", invalid_messages_line(stats.invalid_messages))
        except CleaningAbortedError:
            result.aborted = True
        except StorageError as exc:
            self._io_error(
                tp,
                log.name,
                "cleaning",
                "every segment group is as it was or wholly cleaned",
                exc,
                now,
                result,
            )
        except Exception as exc:
            end_offset = fdo
            self._failed(tp, log.name, f"{type(exc).__name__}: {exc}", now, result)
        else:
            self.manager.record_success(tp)
        finally:
            try:
                self.manager.done_cleaning(tp, end_offset if not result.aborted else fdo)
            except StorageError as exc:
                if tp in result.failures:  # the round failed already: one failure, two lines
                    logger.error("cannot write the cleaner checkpoint of %s: %s", log.name, exc)
                else:
                    # The cleaned segments are in; only the checkpoint is behind, so the next
                    # round cleans that range again (nothing is lost).
                    self._io_error(
                        tp,
                        log.name,
                        "writing the cleaner checkpoint of",
                        "the log is cleaned but its first dirty offset may stay behind",
                        exc,
                        now,
                        result,
                    )

    def _io_error(
        self,
        tp: TopicPartition,
        name: str,
        doing: str,
        outcome: str,
        exc: StorageError,
        now: int,
        result: CleanResult,
    ) -> None:
        """Report an I/O error of a round (log line with the errno, metric, back-off); it never
        counts towards marking the partition uncleanable: it is not the partition's fault."""
        self._io_errors += 1
        broker = self.store.broker
        failure = self.manager.record_failure(
            tp,
            f"I/O error: {exc}",
            now,
            counts=False,
            max_attempts=self._max_attempts(),
            backoff_ms=broker.cleaner_backoff_ms,
        )
        assert failure is not None
        logger.error(
            "%s %s stopped by an I/O error (%s): %s; %s, retrying after %d ms",
            doing,
            name,
            _errno_name(exc),
            exc,
            outcome,
            failure.retry_at_ms - now,
        )
        result.uncleanable[tp] = f"I/O error: {exc}"
        result.failures[tp] = failure

    def _failed(
        self, tp: TopicPartition, name: str, reason: str, now: int, result: CleanResult
    ) -> None:
        """A cleaning failed (damaged data, a bug): back off, or mark the partition uncleanable
        after ``compactlog.cleaner.max.attempts`` failures in a row."""
        max_attempts = self._max_attempts()
        failure = self.manager.record_failure(
            tp,
            reason,
            now,
            counts=True,
            max_attempts=max_attempts,
            backoff_ms=self.store.broker.cleaner_backoff_ms,
        )
        result.uncleanable[tp] = self.manager.uncleanable_partitions().get(tp, reason)
        if failure is None:
            logger.warning(
                "marking %s uncleanable after %d failed cleanings: %s", name, max_attempts, reason
            )
            return
        result.failures[tp] = failure
        logger.warning(
            "cleaning %s failed (attempt %d of %d, retrying after %d ms): %s",
            name,
            failure.attempts,
            max_attempts,
            failure.retry_at_ms - now,
            reason,
        )

    def _max_attempts(self) -> int:
        value = self.store.broker.get(MAX_ATTEMPTS)
        assert isinstance(value, int)
        return value

    def _retention(self, now: int, result: CleanResult) -> None:
        deletable = self.manager.logs_to_delete()
        try:
            for tp, log in deletable:
                try:
                    deleted = log.delete_old_segments(now)
                except Exception as exc:
                    self.manager.mark_uncleanable(tp, f"retention failed: {exc}")
                    continue
                if deleted:
                    result.segments_deleted[tp] = deleted
        finally:
            self.manager.done_deleting([tp for tp, _ in deletable])
        if result.segments_deleted:
            self.store.write_log_start_offset_checkpoint()

    # --- cleaning a chosen log --------------------------------------------------------------
    def clean_log(self, topic: str, partition: int, now: int | None = None) -> CleanResult:
        """Clean this log now whatever its ratio or lag (never the active segment, never inside
        ``min.compaction.lag.ms``); no retention."""
        tp = (topic, partition)
        now = self.store.clock() if now is None else now
        log = self.store.log(topic, partition)
        if not log.config.compact:
            raise PolicyViolationError(
                f"{log.name} is not compacted: its cleanup.policy is "
                f"{','.join(sorted(log.config.cleanup_policy)) or '(empty)'}"
            )
        result = CleanResult()
        with self._cleaner_locks[self._cleaners[0].thread_id]:
            self.manager.begin_cleaning(tp)
            checkpoint = self.manager.checkpoints().get(tp)
            try:
                offsets = cleanable_offsets(log, checkpoint, now)
            except BaseException:
                self.manager.done_cleaning(tp, checkpoint if checkpoint is not None else 0)
                raise
            fdo, fuo = offsets.first_dirty_offset, offsets.first_uncleanable_offset
            if fuo <= fdo:
                self.manager.done_cleaning(tp, fdo)
                result.first_dirty_offset = result.end_offset = fdo
                return result
            to_clean = LogToClean(
                topic_partition=tp,
                log=log,
                first_dirty_offset=fdo,
                first_uncleanable_offset=fuo,
                first_uncleanable_dirty_offset=offsets.first_uncleanable_dirty_offset,
                clean_bytes=0,
                cleanable_bytes=0,
                total_bytes=0,
                cleanable_ratio=0.0,
                needs_compaction_now=offsets.needs_compaction_now,
                compaction_delay_ms=offsets.compaction_delay_ms,
                uncleanable_reason=None,
            )
            self._clean_selected(self._cleaners[0], to_clean, now, result)
            result.uncleanable = {**self.manager.uncleanable_partitions(), **result.uncleanable}
            return result

    # --- gauges ---------------------------------------------------------------------------
    def gauges(self) -> dict[str, float]:
        """Kafka's cleaner gauges, by their metric names (spec 4.5, 4.6, 5.11)."""
        last = list(self._last_stats.values())
        read = sum(s.bytes_read for s in last)
        written = sum(s.bytes_written for s in last)
        dead = sum(1 for t in self._threads if not t.is_alive()) if not self._stop.is_set() else 0
        return {
            **self.manager.gauges(),
            "max-buffer-utilization-percent": max(
                (100.0 * s.buffer_utilization for s in last), default=0.0
            ),
            "cleaner-recopy-percent": 100.0 * written / read if read else 0.0,
            "max-clean-time-secs": max((s.elapsed_secs() for s in last), default=0.0),
            "DeadThreadCount": float(dead),
            # compactlog's own: cleanings stopped by an I/O error since the start, and the
            # partitions waiting to retry a failed cleaning.
            "compactlog-cleaner-io-errors": float(self._io_errors),
            "compactlog-cleaner-retrying-partitions": float(len(self.manager.failures())),
        }

    # --- pause, resume, deleted partitions ---------------------------------------------------
    def abort_and_pause(self, topic: str, partition: int) -> None:
        self.manager.abort_and_pause((topic, partition))

    def resume(self, topic: str, partition: int) -> None:
        self.manager.resume((topic, partition))

    def forget_partition(self, topic: str, partition: int) -> None:
        self.manager.forget_partition((topic, partition))

    # --- threads ----------------------------------------------------------------------------
    def start(self) -> None:
        """Start ``log.cleaner.threads`` background cleaner threads."""
        if self._threads:
            return
        self._stop.clear()
        for cleaner in self._cleaners:
            thread = threading.Thread(
                target=self._run,
                args=(cleaner,),
                name=f"kafka-log-cleaner-thread-{cleaner.thread_id}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def _run(self, cleaner: Cleaner) -> None:
        backoff = self.store.broker.cleaner_backoff_ms / 1000.0
        while not self._stop.is_set():
            try:
                result = self._iteration(cleaner, None)
            except CompactlogError:
                logger.exception("cleaner iteration failed")
                result = CleanResult()
            if result.cleaned is None and self._stop.wait(backoff):
                return

    def shutdown(self) -> None:
        """Stop the threads; a round in progress is aborted and leaves only recoverable files."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []

    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)
