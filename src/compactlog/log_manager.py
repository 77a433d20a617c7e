"""The log manager: one data directory's store, its log cleaner and its periodic tasks.

Kafka's ``LogManager`` owns a broker's logs, the ``LogCleaner`` and the scheduled tasks that keep
them (retention, flush, checkpoints). compactlog splits the same work in three owners and puts
this class above them, so that neither the storage layer nor the cleaner needs the other's
services:

* :class:`~compactlog.storage.store.Store`: topics, partitions, appends and reads, checkpoints;
* :class:`~compactlog.cleaner.service.LogCleaner`: selection and cleaning, its threads;
* the scheduler here: one thread that runs Kafka's periodic tasks.

Theory of operation of the scheduler (started by :meth:`LogManager.start`, or
``LogManager.open(..., background=True)``): retention of ``delete``-only topics every
``log.retention.check.interval.ms`` (first after ``log.initial.task.delay.ms``), the ``flush.ms``
check every ``log.flush.scheduler.interval.ms``, the recovery-point and log-start-offset
checkpoints at their intervals, the removal of ``.deleted`` files every second, and the removal
of expired producer ids every ``producer.id.expiration.check.interval.ms``. Decisions use the
store's clock; only the thread's sleeping uses real time. A task that fails with a
:class:`~compactlog.errors.CompactlogError` is logged and runs again at its next interval. The
cleaner threads start with the scheduler when ``log.cleaner.enable`` is true (the default).

Closing stops the scheduler, then the cleaner threads (a cleaning in progress is aborted and
leaves only files recovery completes or removes), then closes the store (flush, checkpoints, the
clean-shutdown marker).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from compactlog.cleaner.service import CleanResult, LogCleaner
from compactlog.errors import CompactlogError, InvalidArgumentError
from compactlog.storage.datadir import DataDirLock
from compactlog.storage.fs import FileSystem
from compactlog.storage.store import Clock, Store

logger = logging.getLogger("compactlog.storage")

__all__ = ["LogManager"]


class LogManager:
    """A data directory's :class:`Store`, its :class:`LogCleaner` and its scheduler.

    Use :meth:`LogManager.open`; ``manager.store`` is the store (topics, appends, reads),
    ``manager.cleaner`` the log cleaner, :meth:`clean` and :meth:`clean_log` clean on demand.
    """

    def __init__(self, store: Store, cleaner: LogCleaner | None = None) -> None:
        self.store = store
        self.cleaner = cleaner if cleaner is not None else LogCleaner(store)
        store.add_removal_listener(self.cleaner)
        self._scheduler: threading.Thread | None = None
        self._stop = threading.Event()

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        clock: Clock | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        fs: FileSystem | None = None,
        background: bool = False,
        rng: random.Random | None = None,
        dir_lock: DataDirLock | None = None,
    ) -> LogManager:
        """Open (creating if needed) the data directory ``path``, recover its logs and attach
        the log cleaner; the arguments are :meth:`Store.open`'s. ``background=True`` starts the
        periodic tasks and, when ``log.cleaner.enable`` is true, the cleaner threads."""
        store = Store.open(path, clock, config, fs=fs, rng=rng, dir_lock=dir_lock)
        try:
            manager = cls(store)
        except BaseException:
            store.close()
            raise
        if background:
            manager.start()
        return manager

    def __enter__(self) -> LogManager:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- cleaning on demand ---------------------------------------------------------------------
    def clean(self, now: int | None = None) -> CleanResult:
        """One cleaner iteration, exactly as a Kafka cleaner thread runs it.

        Selects and cleans the filthiest eligible compacted log, then runs retention on the
        compacted logs; returns what it did. A log whose cleaning fails is marked uncleanable
        and reported in the result, never raised. Works whether or not background cleaning runs.
        """
        _check_now(now)
        return self.cleaner.clean(now)

    def clean_log(self, topic: str, partition: int, now: int | None = None) -> CleanResult:
        """Clean this log now, whatever its dirty ratio or compaction lag (never the active
        segment, never inside ``min.compaction.lag.ms``; no retention)."""
        self.store.log(topic, partition)
        _check_now(now)
        return self.cleaner.clean_log(topic, partition, now)

    # --- the periodic tasks -------------------------------------------------------------------
    def start(self) -> None:
        """Start Kafka's periodic tasks (retention, flush.ms, checkpoints) in one thread, and
        the cleaner threads when ``log.cleaner.enable`` is true."""
        if self._scheduler is not None:
            return
        if self.store.broker.cleaner_enable:
            self.cleaner.start()
        self._stop.clear()
        thread = threading.Thread(target=self._run, name="compactlog-scheduler", daemon=True)
        self._scheduler = thread
        thread.start()

    def stop(self) -> None:
        """Stop the periodic tasks and the cleaner threads (the store stays open)."""
        thread = self._scheduler
        if thread is not None:
            self._stop.set()
            thread.join()
            self._scheduler = None
        self.cleaner.shutdown()

    def _run(self) -> None:
        store, broker = self.store, self.store.broker
        start = time.monotonic()
        tasks: list[tuple[float, float, Callable[[], object]]] = [
            (broker.initial_task_delay_ms, broker.retention_check_interval_ms, store.run_retention),
            (
                broker.initial_task_delay_ms,
                broker.flush_scheduler_interval_ms,
                store.flush_due_logs,
            ),
            (
                broker.initial_task_delay_ms,
                broker.recovery_point_checkpoint_interval_ms,
                store.write_recovery_point_checkpoint,
            ),
            (
                broker.initial_task_delay_ms,
                broker.log_start_offset_checkpoint_interval_ms,
                store.write_log_start_offset_checkpoint,
            ),
            (0, 1000, store.remove_deleted_files),
            (
                broker.producer_id_expiration_check_interval_ms,
                broker.producer_id_expiration_check_interval_ms,
                store.remove_expired_producers,
            ),
        ]
        due = [start + delay / 1000 for delay, _, _ in tasks]
        while not self._stop.is_set():
            now = time.monotonic()
            for i, (_, interval, task) in enumerate(tasks):
                if now >= due[i]:
                    try:
                        task()
                    except CompactlogError:
                        logger.exception(
                            "background task %s failed", getattr(task, "__name__", task)
                        )
                    due[i] = now + max(interval, 1) / 1000
            self._stop.wait(max(0.0, min(due) - time.monotonic()))

    # --- closing --------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the tasks and the cleaner, then close the store cleanly."""
        self.stop()
        self.store.close()

    def abandon(self) -> None:
        """Stop the tasks and the cleaner and drop the store without a clean shutdown (tests:
        what a crash leaves on disk)."""
        self.stop()
        self.store.abandon()


def _check_now(now: object) -> None:
    if now is not None and (isinstance(now, bool) or not isinstance(now, int)):
        raise InvalidArgumentError(
            f"now must be epoch milliseconds (an int) or None, not {type(now).__name__} {now!r}"
        )
