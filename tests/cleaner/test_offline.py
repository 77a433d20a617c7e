"""Cleaning a partition's files with no store open (what Spark tasks run), without Spark: the
same bytes as the in-process cleaner, one-pass survivors, and the job/store handshake."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from compactlog.cleaner.offline import SurvivorMap, clean_partition, plan_partitions, record_cleaned
from compactlog.errors import StorageError
from compactlog.records import Compression, build_batch
from compactlog.storage.datadir import DataDirLock, PartitionJobs
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed

NOW = 1_700_000_000_000
SMALL_BUFFER = {"log.cleaner.dedupe.buffer.size": str((1 << 20) + 1)}


def _fill(data: Path, keys: int = 50_000) -> None:
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "131072"})
        for version in range(2):
            for lo in range(0, keys, 2000):
                rows: list[Any] = [
                    (b"k%07d" % k, None if version and k % 5 == 0 else b"v%d" % version)
                    for k in range(lo, min(lo + 2000, keys))
                ]
                store.append("t", 0, rows, timestamp=NOW + lo, compression="lz4")
        store.roll("t", 0)


def _files(data: Path) -> dict[str, bytes]:
    d = data / "t-0"
    return {n: (d / n).read_bytes() for n in sorted(os.listdir(d)) if not n.startswith(".")}


def _job(data: Path, broker: dict[str, str] | None = None) -> tuple[DataDirLock, Any]:
    lock = DataDirLock(data).acquire()
    with open_managed(data, ManualClock(NOW), broker, dir_lock=lock) as store:
        plans = plan_partitions(manager_of(store).cleaner, "t", "job-1", now=NOW, broker=broker)
    PartitionJobs(str(data)).begin("job-1")
    return lock, plans


def _finish(data: Path, lock: DataDirLock, outcomes: list[Any]) -> None:
    with open_managed(data, ManualClock(NOW), dir_lock=lock) as store:
        record_cleaned(manager_of(store).cleaner, outcomes)
    lock.release()


def _records(data: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    with open_managed(data, ManualClock(NOW)) as store:
        return [(r.offset, r.key, r.value) for r in store.read("t", 0, 0)]


def test_a_task_writes_what_the_in_process_cleaner_writes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _fill(a)
    shutil.copytree(a, b)
    with open_managed(a, ManualClock(NOW), SMALL_BUFFER) as store:
        expected = manager_of(store).clean_log("t", 0, now=NOW)
    lock, plans = _job(b, SMALL_BUFFER)
    outcome = clean_partition(plans[0])
    _finish(b, lock, [outcome])
    assert outcome.error is None
    assert outcome.end_offset == expected.end_offset < 100_000  # a partial round, as Kafka's
    assert _files(b) == _files(a)
    assert (b / "cleaner-offset-checkpoint").read_bytes() == (
        a / "cleaner-offset-checkpoint"
    ).read_bytes()


def _fill_with_producers(data: Path) -> None:
    """Three idempotent producers, then plain writes that supersede all of their keys: each
    producer's last batch survives only as the empty header kept for it (spec 5.6)."""
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "4096"})
        sequences = {1: 0, 2: 0, 3: 0}
        for i in range(300):
            pid = 1 + i % 3
            count = 1 + i % 4
            raw = build_batch(
                [(b"k%03d" % ((i + j) % 60), b"p%d" % i) for j in range(count)],
                timestamps=NOW - 1000 + i,
                compression=Compression.GZIP if i % 5 == 0 else Compression.NONE,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=sequences[pid],
            )
            store.append_batch("t", 0, raw)
            sequences[pid] += count
        for k in range(60):
            store.append("t", 0, [(b"k%03d" % k, b"plain")], timestamp=NOW)
        store.roll("t", 0)


@pytest.mark.parametrize("now", [NOW, NOW + 86_400_000 - 702])
def test_a_task_keeps_the_producers_last_batches_as_the_in_process_cleaner(
    tmp_path: Path, now: int
) -> None:
    """With producers active at the plan's time (and, second case, with producers 1 and 2
    expired by then), a task writes the same bytes, producer snapshots included."""
    a, b = tmp_path / "a", tmp_path / "b"
    _fill_with_producers(a)
    shutil.copytree(a, b)
    with open_managed(a, ManualClock(NOW)) as store:
        manager_of(store).clean_log("t", 0, now=now)
        headers = [
            (batch.header.producer_id, batch.header.records_count)
            for batch in store.log("t", 0).iter_batches(0)
            if batch.header.has_producer_id
        ]
    assert headers == ([(1, 0), (2, 0), (3, 0)] if now == NOW else [(3, 0)])
    lock = DataDirLock(b).acquire()
    with open_managed(b, ManualClock(NOW), dir_lock=lock) as store:
        plans = plan_partitions(manager_of(store).cleaner, "t", "job-1", now=now)
    PartitionJobs(str(b)).begin("job-1")
    outcome = clean_partition(plans[0])
    _finish(b, lock, [outcome])
    assert outcome.error is None
    assert _files(b) == _files(a)
    assert any(name.endswith(".snapshot") for name in _files(a))


def test_survivors_clean_the_whole_range_in_one_round(tmp_path: Path) -> None:
    _fill(tmp_path)
    before = _records(tmp_path)
    latest = {key: offset for offset, key, _ in before}
    survivors = np.array(sorted(latest.values()), dtype=np.int64)
    lock, plans = _job(tmp_path, SMALL_BUFFER)
    outcome = clean_partition(plans[0], survivors)
    _finish(tmp_path, lock, [outcome])
    assert outcome.end_offset == 100_000
    assert _records(tmp_path) == [r for r in before if latest[r[1]] == r[0]]


def test_survivor_map_answers_by_offset() -> None:
    survivors = np.array([3, 7, 8, 20], dtype=np.int64)
    smap = SurvivorMap(survivors, 0, 25)
    offsets = np.arange(0, 30, dtype=np.int64)
    marks = smap.latest_marks(offsets)
    assert marks is not None
    covered, marked = marks
    assert covered.tolist() == [o < 25 for o in range(30)]
    assert np.flatnonzero(marked).tolist() == [3, 7, 8, 20]
    assert smap.latest_offset == 24
    for bad in ([3, 3], [5, 4], [25], [-1]):
        with pytest.raises(ValueError, match="increasing offsets"):
            SurvivorMap(np.array(bad, dtype=np.int64), 0, 25)


def test_a_store_and_a_task_never_work_on_the_files_at_once(tmp_path: Path) -> None:
    _fill(tmp_path, keys=2000)
    before = _files(tmp_path)
    lock, plans = _job(tmp_path)
    jobs = PartitionJobs(str(tmp_path))
    with jobs.task("job-1", "t-0"):  # a task at work, its driver gone
        lock.release()
        with pytest.raises(StorageError, match="still being rewritten"):
            open_managed(tmp_path, ManualClock(NOW))
    # The store that opens forgets the job: a task of it that starts late touches nothing.
    with open_managed(tmp_path, ManualClock(NOW)):
        pass
    outcome = clean_partition(plans[0])
    assert outcome.end_offset is None
    assert outcome.error is not None and "no longer running" in outcome.error
    assert _files(tmp_path) == before
