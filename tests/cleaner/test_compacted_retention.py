"""Retention of compacted topics, done by the cleaner's iteration (spec 4.2, 4.6, 4.8, 6, 9.11).

``compact,delete`` topics get time and size retention from ``LogManager.clean`` (the retention pass
that follows every selection); pure ``compact`` topics only lose whole segments below the log
start offset; the periodic ``run_retention`` task leaves both alone.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compactlog.errors import OffsetOutOfRangeError, PolicyViolationError
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import manager_of

StoreFactory = Callable[..., Store]
Row = tuple[int, bytes | None, bytes | None]

MIB = 1 << 20
BROKER = {"log.cleaner.dedupe.buffer.size": 2 * MIB}
MINUTE = 60_000


def create(store: Store, topic: str, policy: str = "compact,delete", **cfg: Any) -> None:
    overrides: dict[str, Any] = {"cleanup.policy": policy}
    overrides.update({k.replace("_", "."): v for k, v in cfg.items()})
    store.create_topic(topic, 1, overrides)


def segment(store: Store, topic: str, names: list[str], ts: int, roll: bool = True) -> None:
    """One segment of one-record batches (distinct keys, equal sizes) at timestamp ``ts``."""
    for name in names:
        store.append(topic, 0, [(name.encode(), b"value")], timestamp=ts)
    if roll:
        store.roll(topic, 0)


def bases(store: Store, topic: str) -> list[int]:
    return [s.base_offset for s in store.log(topic, 0).segments()]


def sizes(store: Store, topic: str) -> list[int]:
    return [s.size for s in store.log(topic, 0).segments()]


def state(store: Store, topic: str) -> list[Row]:
    start = store.log_start_offset(topic, 0)
    return [(r.offset, r.key, r.value) for r in store.read(topic, 0, start)]


def offsets(store: Store, topic: str) -> list[int]:
    return [offset for offset, _, _ in state(store, topic)]


def cleaner_checkpoint(store: Store, topic: str) -> int | None:
    return store.cleaner_offset_checkpoint.read().get((topic, 0))


def flip_crc_covered_byte(path: str) -> None:
    with open(path, "r+b") as f:
        f.seek(65)
        byte = f.read(1)
        f.seek(65)
        f.write(bytes([byte[0] ^ 0xFF]))


# --- time and size retention of compact,delete topics -------------------------------------


def test_compact_delete_topics_get_time_retention_from_the_cleaner(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    create(store, "cd", retention_ms=MINUTE, min_cleanable_dirty_ratio=1.0)
    now = clock.now
    segment(store, "cd", ["a", "b"], now - 3 * MINUTE)  # 0-1
    segment(store, "cd", ["c", "d"], now - 2 * MINUTE)  # 2-3
    segment(store, "cd", ["e"], now - 10_000)  # 4
    segment(store, "cd", ["f"], now, roll=False)  # 5, active
    assert store.run_retention(now) == 0  # the periodic task leaves compacted topics alone
    assert bases(store, "cd") == [0, 2, 4, 5]
    result = manager_of(store).clean(now)
    assert result.cleaned is None  # nothing qualifies for cleaning; retention still runs
    assert result.segments_deleted == {("cd", 0): 2}
    assert bases(store, "cd") == [4, 5]
    assert store.log_start_offset("cd", 0) == 4
    assert store.log_start_offset_checkpoint.read()[("cd", 0)] == 4
    with pytest.raises(OffsetOutOfRangeError):
        store.read("cd", 0, 3)
    assert offsets(store, "cd") == [4, 5]
    # A segment is deleted once now - its largest timestamp > retention.ms, not at equality.
    assert manager_of(store).clean(now - 10_000 + MINUTE).segments_deleted == {}
    assert manager_of(store).clean(now - 10_000 + MINUTE + 1).segments_deleted == {("cd", 0): 1}
    assert bases(store, "cd") == [5]
    assert store.log_start_offset("cd", 0) == 5


def test_one_iteration_cleans_a_log_then_runs_retention_on_it(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    create(store, "cd", retention_ms=MINUTE)
    now = clock.now
    store.append("cd", 0, [(b"a", b"1")], timestamp=now - 3 * MINUTE)
    store.append("cd", 0, [(b"a", b"2")], timestamp=now - 2 * MINUTE)
    store.roll("cd", 0)
    store.append("cd", 0, [(b"b", b"1")], timestamp=now)
    result = manager_of(store).clean(now)
    assert result.cleaned == ("cd", 0)
    assert (result.first_dirty_offset, result.end_offset) == (0, 2)
    assert result.segments_deleted == {("cd", 0): 1}  # the freshly cleaned segment, too old
    assert bases(store, "cd") == [2]
    assert store.log_start_offset("cd", 0) == 2
    assert cleaner_checkpoint(store, "cd") == 2
    assert state(store, "cd") == [(2, b"b", b"1")]


def test_time_retention_of_a_segment_without_timestamps_uses_its_mtime(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    create(store, "cd", retention_ms=MINUTE, min_cleanable_dirty_ratio=1.0)
    now = clock.now
    segment(store, "cd", ["a"], -1)
    segment(store, "cd", ["b"], -1)
    segment(store, "cd", ["c"], now, roll=False)
    first, second = store.log("cd", 0).segments()[:2]
    for seg, mtime in ((first, now - 2 * MINUTE), (second, now - MINUTE)):
        os.utime(seg.log_path, ns=(mtime * 1_000_000,) * 2)
    assert manager_of(store).clean(now).segments_deleted == {
        ("cd", 0): 1
    }  # now - mtime > retention.ms
    assert bases(store, "cd") == [1, 2]
    assert manager_of(store).clean(now + 1).segments_deleted == {("cd", 0): 1}
    assert bases(store, "cd") == [2]


def test_time_retention_deletes_only_a_prefix(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store(config=BROKER)
    create(store, "cd", retention_ms=MINUTE, min_cleanable_dirty_ratio=1.0)
    now = clock.now
    segment(store, "cd", ["a"], now - 3 * MINUTE)  # 0: old
    segment(store, "cd", ["b"], now - 1000)  # 1: young
    segment(store, "cd", ["c"], now - 3 * MINUTE)  # 2: old, but after a young one
    segment(store, "cd", ["d"], now, roll=False)
    assert manager_of(store).clean(now).segments_deleted == {("cd", 0): 1}
    assert bases(store, "cd") == [1, 2, 3]
    assert store.log_start_offset("cd", 0) == 1


def test_compact_delete_topics_get_size_retention_from_the_cleaner(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    create(store, "cd", min_cleanable_dirty_ratio=1.0)
    now = clock.now
    for name in ("a", "b", "c", "d"):
        segment(store, "cd", [name], now)
    segment(store, "cd", ["e"], now, roll=False)
    one = sizes(store, "cd")[0]
    assert sizes(store, "cd") == [one] * 5
    # logSize = 5 segments; diff = 5*one - (2*one + 1) = 3*one - 1 covers two whole segments.
    store.alter_config("cd", {"retention.bytes": 2 * one + 1})
    assert store.run_retention(now) == 0
    result = manager_of(store).clean(now)
    assert result.segments_deleted == {("cd", 0): 2}
    assert bases(store, "cd") == [2, 3, 4]
    assert store.log_start_offset("cd", 0) == 2
    with pytest.raises(OffsetOutOfRangeError):
        store.read("cd", 0, 1)
    # Now 3*one >= 2*one + 1 again but no whole segment fits in the difference (one - 1).
    assert manager_of(store).clean(now).segments_deleted == {}
    # A log exactly at retention.bytes is not skipped, but deletes nothing (diff 0).
    store.alter_config("cd", {"retention.bytes": 3 * one})
    assert manager_of(store).clean(now).segments_deleted == {}
    store.alter_config("cd", {"retention.bytes": 2 * one})
    assert manager_of(store).clean(now).segments_deleted == {("cd", 0): 1}
    assert bases(store, "cd") == [3, 4]


def test_size_retention_keeps_a_compacted_log_under_retention_bytes_plus_one_segment(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    create(store, "cd", segment_bytes=300, retention_bytes=1000, min_cleanable_dirty_ratio=1.0)
    for i in range(60):
        store.append("cd", 0, [(b"k%02d" % i, b"v" * 30)], timestamp=clock.now)
    largest = max(sizes(store, "cd"))
    before = bases(store, "cd")
    result = manager_of(store).clean(clock.now)
    deleted = result.segments_deleted[("cd", 0)]
    total = sum(sizes(store, "cd"))
    assert 1000 - largest < total <= 1000 + largest
    assert bases(store, "cd") == before[deleted:]  # oldest first, contiguous
    assert store.log_start_offset("cd", 0) == bases(store, "cd")[0]


def test_no_record_below_the_start_offset_comes_back_after_a_crash(
    open_store: StoreFactory, clock: ManualClock, tmp_path: Path
) -> None:
    store = open_store(config=BROKER)
    create(store, "cd", retention_ms=MINUTE, min_cleanable_dirty_ratio=1.0)
    now = clock.now
    segment(store, "cd", ["a", "b"], now - 2 * MINUTE)
    segment(store, "cd", ["c"], now - 2 * MINUTE)
    segment(store, "cd", ["d"], now, roll=False)
    assert manager_of(store).clean(now).segments_deleted == {("cd", 0): 2}
    store.abandon()  # a crash: the .deleted files are still there
    again = open_store(config=BROKER)
    assert again.log_start_offset("cd", 0) == 3
    assert state(again, "cd") == [(3, b"d", b"value")]
    with pytest.raises(OffsetOutOfRangeError):
        again.read("cd", 0, 2)
    assert not [n for n in os.listdir(tmp_path / "data" / "cd-0") if n.endswith(".deleted")]


def test_retention_that_covers_every_segment_rolls_a_new_one_first(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    create(store, "cd", retention_ms=MINUTE, min_cleanable_dirty_ratio=1.0)
    now = clock.now
    segment(store, "cd", ["a", "b"], now - 2 * MINUTE)
    segment(store, "cd", ["c"], now - 2 * MINUTE, roll=False)  # an old active segment
    assert manager_of(store).clean(now).segments_deleted == {("cd", 0): 2}
    assert bases(store, "cd") == [3]
    assert sizes(store, "cd") == [0]
    assert store.log_start_offset("cd", 0) == store.log_end_offset("cd", 0) == 3
    assert state(store, "cd") == []


def test_a_cleaned_segment_is_retained_until_its_newest_record_expires(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    create(store, "cd", retention_ms=10 * MINUTE)
    now = clock.now
    segment(store, "cd", ["a", "b"], now - 20 * MINUTE)  # 0-1
    store.append("cd", 0, [(b"a", b"newer")], timestamp=now - 5 * MINUTE)  # 2
    store.roll("cd", 0)
    first = manager_of(store).clean(now)
    assert first.cleaned == ("cd", 0)
    # Segments 0 and 2 became one; retention in the same iteration kept it (b is 20 minutes
    # old, but the segment's newest record is 5 minutes old).
    assert first.segments_deleted == {}
    assert bases(store, "cd") == [0, 3]
    assert state(store, "cd") == [(1, b"b", b"value"), (2, b"a", b"newer")]
    assert store.log("cd", 0).segments()[0].largest_timestamp() == now - 5 * MINUTE
    assert manager_of(store).clean(now + 5 * MINUTE).segments_deleted == {}
    assert manager_of(store).clean(now + 5 * MINUTE + 1).segments_deleted == {("cd", 0): 1}
    assert bases(store, "cd") == [3]
    assert store.log_start_offset("cd", 0) == 3


# --- pure compact topics: log start offset breach only --------------------------------------


def test_pure_compact_topics_only_lose_segments_below_the_log_start_offset(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    create(store, "c", min_cleanable_dirty_ratio=1.0)
    now = clock.now
    for names in (["a", "b"], ["c", "d"], ["e", "f"], ["g", "h"]):
        segment(store, "c", names, now - 10 * MINUTE)
    assert bases(store, "c") == [0, 2, 4, 6, 8]
    # DeleteRecords needs "delete" in the policy; raise the start offset, then make it compact.
    assert store.delete_records("c", 0, 5) == 5
    store.alter_config("c", {"cleanup.policy": "compact", "retention.ms": 1, "retention.bytes": 1})
    with pytest.raises(PolicyViolationError):
        store.delete_records("c", 0, 6)
    assert store.run_retention(now) == 0
    assert bases(store, "c") == [0, 2, 4, 6, 8]
    result = manager_of(store).clean(now)
    assert result.segments_deleted == {("c", 0): 2}
    # The segment holding the log start offset stays, and neither time nor size retention runs.
    assert bases(store, "c") == [4, 6, 8]
    assert store.log_start_offset("c", 0) == 5
    assert offsets(store, "c") == [5, 6, 7]
    with pytest.raises(OffsetOutOfRangeError):
        store.read("c", 0, 4)
    assert manager_of(store).clean(now + 100 * MINUTE).segments_deleted == {}
    assert bases(store, "c") == [4, 6, 8]


def test_a_start_offset_raised_by_retention_is_enforced_after_the_policy_becomes_compact(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Time retention moves the start offset to the active segment's base; segments written
    afterwards below a raised start offset go once the topic is pure ``compact``."""
    store = open_store(config=BROKER)
    create(store, "c", retention_ms=MINUTE, min_cleanable_dirty_ratio=1.0)
    now = clock.now
    segment(store, "c", ["a"], now - 2 * MINUTE)
    segment(store, "c", ["b"], now)
    segment(store, "c", ["c"], now, roll=False)
    assert manager_of(store).clean(now).segments_deleted == {("c", 0): 1}
    assert store.log_start_offset("c", 0) == 1
    store.log("c", 0).delete_records(2)
    store.alter_config("c", {"cleanup.policy": "compact"})
    assert store.run_retention(now) == 0
    assert manager_of(store).clean(now + 10 * MINUTE).segments_deleted == {("c", 0): 1}
    assert bases(store, "c") == [2]
    assert offsets(store, "c") == [2]


def test_run_retention_leaves_compacted_topics_alone(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    now = clock.now
    for topic, policy in (("d", "delete"), ("cd", "compact,delete"), ("c", "compact")):
        create(store, topic, policy, retention_ms=MINUTE, min_cleanable_dirty_ratio=1.0)
        segment(store, topic, ["a"], now - 2 * MINUTE)
        segment(store, topic, ["b"], now - 2 * MINUTE)
        segment(store, topic, ["c"], now, roll=False)
    store.log("c", 0).update_config(store.topic_config("cd"))  # compact,delete for a moment
    store.log("c", 0).delete_records(2)
    store.log("c", 0).update_config(store.topic_config("c"))
    assert store.run_retention(now) == 2
    assert bases(store, "d") == [2]
    assert bases(store, "cd") == [0, 1, 2]
    assert bases(store, "c") == [0, 1, 2]
    result = manager_of(store).clean(now)
    assert result.segments_deleted == {("cd", 0): 2, ("c", 0): 2}
    assert bases(store, "cd") == bases(store, "c") == [2]


# --- the cleaner checkpoint after retention (spec 4.2, 6) ------------------------------------


def write_checkpointed_log(store: Store, now: int) -> None:
    """Cleaned up to 2, then 2-3 (b, c) and 4-5 (d twice) in two segments; start offset 4."""
    store.append("t", 0, [(b"a", b"1")], timestamp=now)
    store.append("t", 0, [(b"a", b"2")], timestamp=now)
    store.roll("t", 0)
    assert manager_of(store).clean(now).end_offset == 2
    assert cleaner_checkpoint(store, "t") == 2
    segment(store, "t", ["b", "c"], now)  # 2-3
    store.append("t", 0, [(b"d", b"1")], timestamp=now)  # 4
    store.append("t", 0, [(b"d", b"2")], timestamp=now)  # 5
    store.roll("t", 0)
    store.delete_records("t", 0, 4)  # past the checkpoint


@pytest.mark.parametrize("policy", ["compact,delete", "compact"])
def test_the_cleaner_checkpoint_resets_to_the_log_start_offset_at_the_next_selection(
    open_store: StoreFactory,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    policy: str,
) -> None:
    store = open_store(config=BROKER)
    create(store, "t", min_cleanable_dirty_ratio=0.01)
    now = clock.now
    write_checkpointed_log(store, now)
    store.alter_config("t", {"cleanup.policy": policy, "min.cleanable.dirty.ratio": 1.0})
    caplog.set_level(logging.WARNING, logger="compactlog.cleaner")
    first = manager_of(store).clean(now)
    # The selection rewrote the checkpoint although it chose nothing; then retention removed
    # the two segments below the start offset.
    assert first.cleaned is None
    assert cleaner_checkpoint(store, "t") == 4
    assert first.segments_deleted == {("t", 0): 2}
    assert bases(store, "t") == [4, 6]
    resets = [r for r in caplog.records if "resetting the first dirty offset" in r.getMessage()]
    assert len(resets) == (0 if policy == "compact,delete" else 1)  # silent for compact,delete
    store.alter_config("t", {"min.cleanable.dirty.ratio": 0.01})
    second = manager_of(store).clean(now)
    assert second.cleaned == ("t", 0)
    assert (second.first_dirty_offset, second.end_offset) == (4, 6)
    assert cleaner_checkpoint(store, "t") == 6
    assert state(store, "t") == [(5, b"d", b"2")]


def test_a_cleaning_before_the_retention_pass_rewrites_segments_below_the_start_offset(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Selection resets the first dirty offset to 4, but the round rewrites every segment from
    the start of the log (spec 5.3): the ones below the start offset join the group, so the
    retention pass of the same iteration finds no segment wholly below the start offset."""
    store = open_store(config=BROKER)
    create(store, "t", min_cleanable_dirty_ratio=0.01)
    now = clock.now
    write_checkpointed_log(store, now)
    assert bases(store, "t") == [0, 2, 4, 6]
    result = manager_of(store).clean(now)
    assert (result.first_dirty_offset, result.end_offset) == (4, 6)
    assert result.segments_deleted == {}
    assert bases(store, "t") == [0, 6]
    assert store.log_start_offset("t", 0) == 4
    assert state(store, "t") == [(5, b"d", b"2")]
    with pytest.raises(OffsetOutOfRangeError):
        store.read("t", 0, 3)


def test_the_checkpoint_is_rewritten_even_when_the_log_is_not_selected(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    create(store, "cd", retention_ms=MINUTE, min_cleanable_dirty_ratio=0.01)
    now = clock.now
    segment(store, "cd", ["a", "b"], now - 2 * MINUTE)  # 0-1
    assert manager_of(store).clean(now - 2 * MINUTE).end_offset == 2
    segment(store, "cd", ["c"], now - 2 * MINUTE)  # 2
    segment(store, "cd", ["d"], now - 2 * MINUTE)  # 3
    store.append("cd", 0, [(b"e", b"1")], timestamp=now)  # 4, active
    store.alter_config("cd", {"min.cleanable.dirty.ratio": 1.0})
    first = manager_of(store).clean(now)
    assert first.cleaned is None
    assert first.segments_deleted == {("cd", 0): 3}
    assert store.log_start_offset("cd", 0) == 4
    assert cleaner_checkpoint(store, "cd") == 2  # retention does not touch it
    second = manager_of(store).clean(now)
    assert second.cleaned is None
    assert cleaner_checkpoint(store, "cd") == 4


# --- uncleanable partitions and the retention pass (spec 4.6) --------------------------------


def test_an_uncleanable_partition_is_skipped_by_the_retention_pass(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    now = clock.now
    for topic in ("bad", "good"):
        create(store, topic, retention_ms=MINUTE, min_cleanable_dirty_ratio=0.01)
        segment(store, topic, ["a", "a"], now - 2 * MINUTE)
        segment(store, topic, ["b"], now, roll=False)
    store.alter_config("good", {"min.cleanable.dirty.ratio": 1.0})  # only "bad" is selected
    flip_crc_covered_byte(store.log("bad", 0).segments()[0].log_path)
    result = manager_of(store).clean(now)
    assert result.cleaned == ("bad", 0)
    assert set(result.uncleanable) == {("bad", 0)}
    assert result.segments_deleted == {("good", 0): 1}
    assert bases(store, "bad") == [0, 2]
    assert bases(store, "good") == [2]
    assert manager_of(store).clean(now + MINUTE).segments_deleted == {}
    assert bases(store, "bad") == [0, 2]
