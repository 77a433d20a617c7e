"""Retention of ``delete`` topics and DeleteRecords (spec 6; R13 at its CI tier)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.errors import OffsetOutOfRangeError, PolicyViolationError
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import close_managed, manager_of, open_managed

StoreFactory = Callable[..., Store]


def fill_segments(store: Store, topic: str, count: int, per_segment: int = 3, ts0: int = 0) -> None:
    """``count`` segments of ``per_segment`` one-record batches, timestamps ts0, ts0+1, ..."""
    ts = ts0
    for _ in range(count):
        for _ in range(per_segment):
            store.append(topic, 0, [(b"k", b"v" * 20)], timestamp=ts)
            ts += 1
        store.roll(topic, 0)


def bases(store: Store, topic: str = "t") -> list[int]:
    return [s.base_offset for s in store.segments(topic, 0)]


def test_time_retention_deletes_whole_old_segments_oldest_first(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"retention.ms": 1000})
    now = clock.now
    fill_segments(store, "t", 4, ts0=now - 5000)  # timestamps now-5000 .. now-4989
    store.append("t", 0, [(b"k", b"young")], timestamp=now - 10)
    assert bases(store) == [0, 3, 6, 9, 12]
    assert store.run_retention() == 4
    assert bases(store) == [12]
    assert store.log_start_offset("t", 0) == 12
    with pytest.raises(OffsetOutOfRangeError) as info:
        store.read("t", 0, 11)
    assert info.value.error_code == 1
    assert [r.value for r in store.read("t", 0, 12)] == [b"young"]


def test_a_segment_with_a_young_record_stops_the_walk(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"retention.ms": 1000})
    now = clock.now
    store.append("t", 0, [(b"k", b"old")], timestamp=now - 5000)
    store.roll("t", 0)
    store.append("t", 0, [(b"k", b"young")], timestamp=now - 10)
    store.roll("t", 0)
    store.append("t", 0, [(b"k", b"old")], timestamp=now - 5000)  # old, but after a young one
    store.roll("t", 0)
    store.append("t", 0, [(b"k", b"active")], timestamp=now)
    assert store.run_retention() == 1
    assert bases(store) == [1, 2, 3]


def test_retention_that_covers_every_segment_rolls_first(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"retention.ms": 1000})
    store.append("t", 0, [(b"k", b"v")], timestamp=clock.now - 5000)
    store.append("t", 0, [(b"k", b"v")], timestamp=clock.now - 5000)
    assert store.run_retention() == 1
    assert bases(store) == [2]
    assert store.segments("t", 0)[0].size == 0
    assert store.log_start_offset("t", 0) == 2 == store.log_end_offset("t", 0)
    assert store.append("t", 0, [(b"k", b"v")]) == 2
    # An empty active segment is never deleted.
    assert store.run_retention(clock.now + 10**9) == 1
    assert bases(store) == [3]


def test_size_retention_keeps_total_under_retention_bytes_plus_one_segment(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"retention.bytes": 1000, "segment.bytes": 300})
    for i in range(60):
        store.append("t", 0, [(b"k%d" % i, b"v" * 30)])
    seg_size = max(s.size for s in store.segments("t", 0))
    deleted = store.run_retention()
    total = sum(s.size for s in store.segments("t", 0))
    assert deleted > 0
    assert total <= 1000 + seg_size
    assert total > 1000 - seg_size  # it deletes no more than needed
    first = store.segments("t", 0)[0].base_offset
    assert store.log_start_offset("t", 0) == first


def test_negative_retention_means_unlimited(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    store.create_topic("t", 1, {"retention.ms": -1, "retention.bytes": -1})
    fill_segments(store, "t", 3, ts0=0)
    assert store.run_retention(clock.now + 10**12) == 0


def test_compacted_topics_are_left_to_the_cleaner(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    for policy in ("compact", "compact,delete"):
        name = policy.replace(",", "_")
        store.create_topic(name, 1, {"cleanup.policy": policy, "retention.ms": 1})
        fill_segments(store, name, 3, ts0=0)
    assert store.run_retention() == 0


def test_delete_records_raises_the_log_start_offset_then_retention_drops_segments(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1)
    fill_segments(store, "t", 4, ts0=clock.now)  # segments at 0, 3, 6, 9; empty active at 12
    assert store.delete_records("t", 0, 7) == 7
    assert store.log_start_offset("t", 0) == 7
    assert [r.offset for r in store.read("t", 0, 7)] == [7, 8, 9, 10, 11]
    with pytest.raises(OffsetOutOfRangeError):
        store.read("t", 0, 6)
    assert bases(store) == [0, 3, 6, 9, 12]  # nothing deleted yet, as in Kafka
    assert store.run_retention() == 2
    assert bases(store) == [6, 9, 12]  # the segment holding 7 stays
    assert store.delete_records("t", 0, 5) == 7  # never lowered


def test_delete_records_policy_and_bounds(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("c", 1, {"cleanup.policy": "compact"})
    store.create_topic("cd", 1, {"cleanup.policy": "compact,delete"})
    store.append("c", 0, [(b"k", b"v")])
    store.append("cd", 0, [(b"k", b"v")])
    with pytest.raises(PolicyViolationError) as info:
        store.delete_records("c", 0, 1)
    assert info.value.error_code == 44
    assert store.log_start_offset("c", 0) == 0
    assert store.delete_records("cd", 0, 1) == 1
    with pytest.raises(OffsetOutOfRangeError):
        store.delete_records("cd", 0, 2)


def test_deleted_segments_wait_for_file_delete_delay(
    open_store: StoreFactory, tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"retention.ms": 10, "file.delete.delay.ms": 5000})
    fill_segments(store, "t", 2, ts0=clock.now - 1000)
    store.run_retention()
    d = tmp_path / "data" / "t-0"
    assert "00000000000000000000.log.deleted" in os.listdir(d)
    clock.advance(5000)
    store.run_retention()
    assert not any(n.endswith(".deleted") for n in os.listdir(d))


def test_no_resurrection_after_a_crash_during_deletion(
    open_store: StoreFactory, tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"retention.ms": 10})
    fill_segments(store, "t", 3, ts0=clock.now - 1000)
    store.append("t", 0, [(b"k", b"live")])
    store.run_retention()
    start = store.log_start_offset("t", 0)
    manager_of(store).abandon()  # crash: .deleted files left, checkpoint maybe stale
    again = open_store()
    assert again.log_start_offset("t", 0) == start
    assert [r.value for r in again.read("t", 0, start)] == [b"live"]
    assert not any(n.endswith(".deleted") for n in os.listdir(tmp_path / "data" / "t-0"))


def test_delete_records_survives_a_crash(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1)
    store.append("t", 0, [(b"k", b"%d" % i) for i in range(10)])
    store.delete_records("t", 0, 4)
    manager_of(store).abandon()
    again = open_store()
    assert again.log_start_offset("t", 0) == 4
    with pytest.raises(OffsetOutOfRangeError):
        again.read("t", 0, 3)


def test_background_service_runs_retention(tmp_path: Path, clock: ManualClock) -> None:
    import time

    store = open_managed(
        tmp_path / "data",
        clock=clock,
        config={"log.retention.check.interval.ms": 20, "log.initial.task.delay.ms": 0},
        background=True,
    )
    try:
        store.create_topic("t", 1, {"retention.ms": 10})
        fill_segments(store, "t", 3, ts0=clock.now - 1000)
        deadline = time.monotonic() + 10
        while len(store.segments("t", 0)) > 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(store.segments("t", 0)) == 1
    finally:
        close_managed(store)


def test_a_deleted_segment_takes_kafkas_transaction_index_with_it(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"retention.ms": 1000})
    now = clock.now
    fill_segments(store, "t", 2, ts0=now - 5000)
    store.append("t", 0, [(b"k", b"young")], timestamp=now - 10)
    directory = os.path.dirname(store.segments("t", 0)[0].path)
    # An aborted-transaction index as Kafka leaves beside a segment (one 34-byte entry).
    txn_index = os.path.join(directory, f"{0:020d}.txnindex")
    with open(txn_index, "wb") as f:
        f.write(bytes(34))
    assert store.run_retention() == 2
    assert not os.path.exists(txn_index)
    assert os.path.exists(txn_index + ".deleted")  # with the segment's other files
    close_managed(store)
    assert not [n for n in os.listdir(directory) if n.startswith(f"{0:020d}")]
