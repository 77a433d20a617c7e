"""``Log.offset_for_timestamp`` (Kafka's ``fetchOffsetByTimestamp``) finds every record with a
timestamp >= T: the time index only says where to start, and a segment is scanned from there to
its end, so the records appended since its last index entry count too. That holds for the
store's own logs and for read-only views (``ReadOnlyDataDir``) of a directory a store keeps
appending to, or that is stopped; the Spark source's lookup gives the same offsets.

Record timestamps lie in the future here: a read-only view once took the largest timestamp of a
live active segment from its (unread) time index, fell back to the file's modification time,
and skipped the segment whenever T was later than that.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from compactlog.storage.log import Log
from compactlog.storage.readonly import ReadOnlyDataDir
from compactlog.storage.store import Store
from tests.conftest import ManualClock

StoreFactory = Callable[..., Store]

#: 30 days ahead of the wall clock: later than any file's modification time.
FUTURE = (time.time_ns() // 1_000_000 // 1000) * 1000 + 30 * 86_400_000
STEP = 10  # ms between batches
BATCHES = 60
RECORDS_PER_BATCH = 2
#: Small segments and a short index interval: several segments, each with a few index entries
#: and unindexed batches after the last one.
CONFIG = {"segment.bytes": 1500, "index.interval.bytes": 300}


def stamp(batch: int) -> int:
    return FUTURE + STEP * batch


def queries(appended: int) -> list[int]:
    """Timestamps to look up once ``appended`` batches are in: before, at and between batches,
    and past the last one."""
    qs = [FUTURE - 1]
    for b in range(appended):
        qs += [stamp(b), stamp(b) + 1]
    return qs


def expected(appended: int, t: int, log_start: int = 0) -> tuple[int, int] | None:
    for b in range(appended):
        first = b * RECORDS_PER_BATCH
        if stamp(b) >= t and first + RECORDS_PER_BATCH > log_start:
            return max(first, log_start), stamp(b)
    return None


def append_batch(store: Store, b: int) -> None:
    records = [(f"k{b}-{i}".encode(), b"v" * 40) for i in range(RECORDS_PER_BATCH)]
    store.append("t", 0, records, timestamp=stamp(b))


def read_only_answers(path: str, appended: int) -> list[tuple[int, int] | None]:
    with ReadOnlyDataDir(path) as files:
        log: Log = files.log("t", 0)
        return [log.offset_for_timestamp(t) for t in queries(appended)]


def test_a_read_only_view_of_a_live_store_finds_the_active_segments_records(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    clock.now = stamp(0)
    store = open_store()
    store.create_topic("t", 1, CONFIG)
    for b in range(BATCHES):
        clock.now = stamp(b)
        append_batch(store, b)
        want = [expected(b + 1, t) for t in queries(b + 1)]
        assert read_only_answers(store.path, b + 1) == want, f"after batch {b}"
        live = store.log("t", 0)
        assert [live.offset_for_timestamp(t) for t in queries(b + 1)] == want
    segments = store.log("t", 0).local_log.segments()
    assert len(segments) > 3
    assert any(s.time_index.entries() > 1 for s in segments[:-1])  # indexed, then scanned


def test_a_stopped_directory_answers_as_the_store_did(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    clock.now = stamp(0)
    store = open_store()
    store.create_topic("t", 1, CONFIG)
    for b in range(BATCHES):
        append_batch(store, b)
    store.delete_records("t", 0, 7)  # inside batch 3: its second record is the first kept
    want = [expected(BATCHES, t, log_start=7) for t in queries(BATCHES)]
    assert [store.log("t", 0).offset_for_timestamp(t) for t in queries(BATCHES)] == want
    path = store.path
    store.close()
    assert read_only_answers(path, BATCHES) == want
    reopened = Store.open(path, clock)
    try:
        assert [reopened.log("t", 0).offset_for_timestamp(t) for t in queries(BATCHES)] == want
    finally:
        reopened.close()


def test_records_below_the_log_start_do_not_hide_later_ones_in_the_segment(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Batch 0 (offsets 0-1) reaches T but lies below the log start; batch 2, in the same
    segment, reaches T too: Kafka's segment search goes on to it."""
    store = open_store()
    store.create_topic("t", 1)
    t = FUTURE
    store.append("t", 0, [(b"a", b"1"), (b"b", b"2")], timestamp=t)
    store.append("t", 0, [(b"c", b"3"), (b"d", b"4")], timestamp=t - 1000)
    store.append("t", 0, [(b"e", b"5")], timestamp=t)
    store.delete_records("t", 0, 2)
    assert store.log("t", 0).offset_for_timestamp(t) == (4, t)
    assert store.log("t", 0).offset_for_timestamp(t - 1000) == (2, t - 1000)
    with ReadOnlyDataDir(store.path) as files:
        assert files.log("t", 0).offset_for_timestamp(t) == (4, t)


def test_the_spark_sources_lookup_agrees(open_store: StoreFactory, clock: ManualClock) -> None:
    pytest.importorskip("pyspark")
    from compactlog.spark.source import offset_for_timestamp

    store = open_store()
    store.create_topic("t", 1, CONFIG)
    for b in range(BATCHES):
        append_batch(store, b)
        if b % 7 == 0:
            with ReadOnlyDataDir(store.path) as files:
                log = files.log("t", 0)
                directory = log.local_log.dir
                start, end = log.log_start_offset, log.log_end_offset
                for t in queries(b + 1):
                    found = log.offset_for_timestamp(t)
                    offset = None if found is None else found[0]
                    assert offset_for_timestamp(directory, t, start, end) == offset, t
