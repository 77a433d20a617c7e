"""Cleaning a partition's files with no store open: what a Spark compaction task runs.

A store holds its data directory's lock while open, and a cleaning round must not race appends,
retention or another cleaner on the same files. So a job that cleans partitions in other
processes (Spark tasks, possibly on other hosts over shared storage) works in three steps:

1. **Plan** (the driver, store open, directory lock held by the job): the store recovers every
   log, and :func:`plan_partitions` computes each partition's range exactly as
   :meth:`LogCleaner.clean_log <compactlog.cleaner.service.LogCleaner.clean_log>` does (the
   cleaner checkpoint, the active segment, ``min.compaction.lag.ms``; no dirty-ratio
   threshold). The store then closes cleanly, and the job keeps the lock (:class:`DataDirLock`).
2. **Clean** (a task per partition): :func:`clean_partition` loads the one log from its files
   and runs the same :class:`~compactlog.cleaner.cleaner.Cleaner` round as the in-process
   cleaner, with the offset map the broker config sizes, so the resulting segments are
   byte-identical. With ``survivors`` (one-pass mode) the map pass is replaced by the latest
   offset of every key, computed elsewhere for the whole range at once (:class:`SurvivorMap`):
   the round then covers the whole dirty range whatever the number of keys.
3. **Record** (the driver): :func:`record_cleaned` moves the cleaner checkpoint of each cleaned
   partition to its round's end offset.

Crash safety is the cleaner's own: a round writes ``.cleaned`` files and swaps them in through
``.swap`` files, and loading a log (the next task attempt, the next store open) completes or
rolls back a half-done swap. A plan whose task never finished leaves the checkpoint where it was,
so the partition is cleaned again next time; cleaning a clean range again writes the same bytes.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.manager import cleanable_offsets
from compactlog.cleaner.offset_map import HashedKeys, IntColumn
from compactlog.cleaner.reads import DecodedRegions
from compactlog.cleaner.service import LogCleaner, new_cleaner
from compactlog.cleaner.stats import CleanerStats, summary_message
from compactlog.errors import (
    CleaningAbortedError,
    CompactlogError,
    PolicyViolationError,
    StorageError,
)
from compactlog.storage.config import BrokerConfig, LogConfig
from compactlog.storage.datadir import PartitionJobs
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.loader import load_log
from compactlog.storage.log import Log
from compactlog.storage.topic_names import partition_dir_name

#: Where a job keeps its partition locks and scratch files, inside the data directory.
WORK_DIR = PartitionJobs.DIR


@dataclass(frozen=True)
class PartitionPlan:
    """One partition's cleaning round, as planned on the driver (picklable)."""

    data_dir: str
    job_id: str
    topic: str
    partition: int
    config: LogConfig
    broker: dict[str, str]
    log_start_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    now: int

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def cleanable(self) -> bool:
        return self.first_uncleanable_offset > self.first_dirty_offset


@dataclass
class PartitionOutcome:
    """What a task did with its plan (picklable). ``end_offset`` is None when it failed."""

    topic: str
    partition: int
    first_dirty_offset: int
    end_offset: int | None
    summary: str = ""
    error: str | None = None
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def untouched(cls, plan: PartitionPlan) -> PartitionOutcome:
        """A partition left as it was: its checkpoint stays at the first dirty offset."""
        return cls(plan.topic, plan.partition, plan.first_dirty_offset, plan.first_dirty_offset)


def plan_partitions(
    cleaner: LogCleaner,
    topic: str,
    job_id: str,
    partitions: Sequence[int] | None = None,
    now: int | None = None,
    broker: dict[str, str] | None = None,
) -> list[PartitionPlan]:
    """The cleaning range of each partition of ``topic`` (all by default) at ``now``, by the
    rules of an on-demand clean; raises :class:`PolicyViolationError` for a topic that is not
    compacted and :class:`CompactlogError` for an unknown partition."""
    store = cleaner.store
    config = store.topic_config(topic)
    if not config.compact:
        raise PolicyViolationError(
            f"topic {topic} is not compacted: its cleanup.policy is "
            f"{','.join(sorted(config.cleanup_policy)) or '(empty)'}"
        )
    count = store.partitions(topic)
    chosen = list(range(count)) if partitions is None else list(partitions)
    for p in chosen:
        if not 0 <= p < count:
            raise CompactlogError(f"topic {topic} has no partition {p} (it has {count})")
    now = store.clock() if now is None else now
    checkpoints = cleaner.manager.checkpoints()
    plans = []
    for p in chosen:
        log = store.log(topic, p)
        offsets = cleanable_offsets(log, checkpoints.get((topic, p)), now)
        plans.append(
            PartitionPlan(
                data_dir=store.path,
                job_id=job_id,
                topic=topic,
                partition=p,
                config=log.config,
                broker=dict(broker or {}),
                log_start_offset=log.log_start_offset,
                first_dirty_offset=offsets.first_dirty_offset,
                first_uncleanable_offset=offsets.first_uncleanable_offset,
                now=now,
            )
        )
    return plans


def record_cleaned(cleaner: LogCleaner, outcomes: Sequence[PartitionOutcome]) -> None:
    """Move the cleaner checkpoint of every successfully cleaned partition to its end offset."""
    manager = cleaner.manager
    for outcome in outcomes:
        if outcome.end_offset is not None:
            manager.update_checkpoint((outcome.topic, outcome.partition), outcome.end_offset)


def clean_partition(
    plan: PartitionPlan, survivors: npt.NDArray[np.int64] | None = None
) -> PartitionOutcome:
    """Run ``plan``'s cleaning round on the partition's files (the directory lock must be held
    by the job). ``survivors``: the sorted offsets of ``[log start, first uncleanable)`` that are
    the latest of their key (one-pass mode); None: Kafka's offset map, as in process.

    A failure of the round (a corrupt batch, a full disk) is returned in the outcome, as the
    in-process cleaner marks such a log uncleanable; the files stay recoverable."""
    outcome = PartitionOutcome.untouched(plan)
    if not plan.cleanable:
        return outcome
    name = partition_dir_name(plan.topic, plan.partition)
    try:
        with PartitionJobs(plan.data_dir).task(plan.job_id, name):
            return _clean_locked(plan, survivors, outcome)
    except StorageError as exc:  # the job is over: nothing was touched
        outcome.end_offset = None
        outcome.error = f"{type(exc).__name__}: {exc}"
        return outcome


def _clean_locked(
    plan: PartitionPlan, survivors: npt.NDArray[np.int64] | None, outcome: PartitionOutcome
) -> PartitionOutcome:
    broker = BrokerConfig.from_dict(plan.broker)
    directory = os.path.join(plan.data_dir, partition_dir_name(plan.topic, plan.partition))
    # The planning store closed cleanly and nothing appends while the job runs, so the files
    # need no recovery; a swap an earlier attempt left half done is completed or undone. The
    # log lives at the plan's time: its producer state (read from the snapshot the planning
    # store wrote) then has the producers the in-process cleaner would see as active then.
    log, _ = load_log(
        OsFileSystem(),
        directory,
        plan.topic,
        plan.partition,
        plan.config,
        lambda: plan.now,
        had_clean_shutdown=True,
        recovery_point=None,
        log_start_offset=plan.log_start_offset,
        rng=random.Random(0),
        producer_id_expiration_ms=broker.producer_id_expiration_ms,
    )
    try:
        cleaner = new_cleaner(broker, _epoch_ms, cleaner_class=OnePassCleaner)
        if survivors is not None:
            assert isinstance(cleaner, OnePassCleaner)
            cleaner.use_survivors(
                SurvivorMap(survivors, plan.log_start_offset, plan.first_uncleanable_offset)
            )
        end, stats = cleaner.clean(
            log, plan.first_dirty_offset, plan.first_uncleanable_offset, plan.now
        )
    except (CompactlogError, OSError, CleaningAbortedError) as exc:
        outcome.end_offset = None
        outcome.error = f"{type(exc).__name__}: {exc}"
        return outcome
    finally:
        log.close()
    outcome.end_offset = end
    outcome.summary = summary_message(0, log.name, plan.first_dirty_offset, end, stats)
    outcome.stats = _figures(stats)
    return outcome


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


def _figures(stats: CleanerStats) -> dict[str, float]:
    return {
        "bytes_read": float(stats.bytes_read),
        "bytes_written": float(stats.bytes_written),
        "messages_read": float(stats.messages_read),
        "messages_written": float(stats.messages_written),
        "elapsed_secs": stats.elapsed_secs(),
    }


# --------------------------------------------------------------------------------------------
# One-pass mode: the map pass answered from the survivors


class SurvivorMap:
    """An offset map whose answers come from the survivors of ``[start, end)``: the offsets
    that are the latest of their key there, sorted (Spark's shuffle computed them, so there is
    no limit on the number of keys; this holds 8 bytes per survivor).

    The cleaner asks a map two things: whether a record of the cleaned range is the latest of
    its key (:meth:`latest_marks`, the same question its own map answers from the round's
    marks), and the last offset covered (``latest_offset``: ``end - 1``, the whole range). A
    record is kept by the same rule as in a Kafka round, ``offset >= map[key]``: a survivor is
    its own key's latest; any other record of the range has a later one. Records below the log
    start offset (hidden by DeleteRecords) are not survivors, so the round drops them.
    """

    def __init__(self, survivors: npt.NDArray[np.int64], start: int, end: int) -> None:
        offsets = np.asarray(survivors, dtype=np.int64)
        if len(offsets) and (
            int(offsets[0]) < start
            or int(offsets[-1]) >= end
            or bool((offsets[1:] <= offsets[:-1]).any())
        ):
            raise ValueError(
                f"survivors must be increasing offsets inside [{start}, {end}); got "
                f"{int(offsets[0])}..{int(offsets[-1])} ({len(offsets)} offsets)"
            )
        self._survivors = offsets
        self._start = start
        self._end = end

    # The answers a cleaning round needs.
    @property
    def latest_offset(self) -> int:
        return self._end - 1

    @property
    def size(self) -> int:
        return len(self._survivors)

    @property
    def max_desired_size(self) -> int:
        return len(self._survivors)

    @property
    def utilization(self) -> float:
        return 0.0  # no table

    @property
    def spare_bytes(self) -> int:
        return 0

    def latest_marks(
        self, offsets: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]] | None:
        covered = offsets < self._end  # everything before the end, below the start included
        survivors = self._survivors
        if len(offsets) == 0 or len(survivors) == 0:
            return covered, np.zeros(len(offsets), dtype=bool)
        # A region's offsets increase: search only the survivors of its span.
        lo = int(np.searchsorted(survivors, offsets.min(), side="left"))
        hi = int(np.searchsorted(survivors, offsets.max(), side="right"))
        window = survivors[lo:hi]
        if len(window) == 0:
            return covered, np.zeros(len(offsets), dtype=bool)
        at = np.minimum(np.searchsorted(window, offsets), len(window) - 1)
        return covered, covered & (window[at] == offsets)

    def get_batch(
        self,
        data: Any,
        key_pos: IntColumn,
        key_len: IntColumn,
        start: int = 0,
        stop: int | None = None,
    ) -> npt.NDArray[np.int64]:
        n = len(key_len) if stop is None else stop
        return np.full(n - start, -1, dtype=np.int64)  # only records past the end: kept anyway

    # An offset map's writing side: never used, the survivors are given.
    def clear(self, base_offset: int | None = None, *, expected_puts: int = 0) -> None:
        pass

    def track_latest(self, start: int, end: int) -> None:
        pass

    def update_latest_offset(self, offset: int) -> None:
        raise TypeError("a SurvivorMap is read-only")

    def put(self, key: bytes, offset: int) -> None:
        raise TypeError("a SurvivorMap is read-only")

    def get(self, key: bytes) -> int:
        raise TypeError("a SurvivorMap answers by offset, not by key")

    def put_batch(self, *args: Any, **kwargs: Any) -> int:
        raise TypeError("a SurvivorMap is read-only")

    def hash_keys(self, *args: Any, **kwargs: Any) -> HashedKeys:
        raise TypeError("a SurvivorMap hashes no keys")

    def put_hashed(self, keys: HashedKeys, offsets: IntColumn, first_dirty_offset: int) -> int:
        raise TypeError("a SurvivorMap is read-only")


class OnePassCleaner(Cleaner):
    """A :class:`Cleaner` that, once given survivors, skips its map pass and cleans the whole
    range; without them it is the ordinary cleaner."""

    _survivor_map: SurvivorMap | None = None

    def use_survivors(self, survivors: SurvivorMap) -> None:
        self._survivor_map = survivors

    def build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats) -> None:
        if self._survivor_map is None:
            super().build_offset_map(log, start, end, stats)
            return
        if self._survivor_map.latest_offset != end - 1:
            raise ValueError(
                f"the survivors cover up to {self._survivor_map.latest_offset + 1}, "
                f"the round up to {end}"
            )
        self.offset_map = self._survivor_map  # type: ignore[assignment]
        self._decoded = DecodedRegions()
