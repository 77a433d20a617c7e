"""Selection of the log to clean, its range and the cleaning states (spec 4, 5.10, 6, 9)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from compactlog.cleaner.manager import (
    LogCleanerManager,
    PreCleanStats,
    cleanable_offsets,
    log_to_clean,
    log_to_clean_for_range,
)
from compactlog.errors import IllegalCleaningStateError, StorageError
from compactlog.storage.store import Store
from tests.conftest import ManualClock

StoreFactory = Callable[..., Store]

MINUTE = 60_000
OLD = 10 * MINUTE  # how far in the past "old" records are


def compacted(store: Store, topic: str, **config: Any) -> None:
    overrides: dict[str, Any] = {"cleanup.policy": "compact"}
    overrides.update({k.replace("_", "."): v for k, v in config.items()})
    store.create_topic(topic, 1, overrides)


def segment(store: Store, topic: str, timestamps: list[int], roll: bool = True) -> None:
    """One segment of one-record batches with these timestamps (same key, same sizes)."""
    for ts in timestamps:
        store.append(topic, 0, [(b"key", b"value-" + b"x" * 20)], timestamp=ts)
    if roll:
        store.roll(topic, 0)


def sizes(store: Store, topic: str) -> list[int]:
    return [s.size for s in store.log(topic, 0).segments()]


def manager_for(store: Store, clock: ManualClock) -> LogCleanerManager:
    return LogCleanerManager(store.logs, store.cleaner_offset_checkpoint, clock)


def in_thread(target: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.005)


# --- the dirty ratio (spec 4.4) ---------------------------------------------------------------


def test_log_to_clean_with_uncleanable_section(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Kafka's testLogToCleanWithUncleanableSection: s0,s1 clean; s2,s3 cleanable; s4,s5 not."""
    store = open_store()
    compacted(store, "t", min_compaction_lag_ms=MINUTE)
    now = clock.now
    for i in range(6):
        young = i == 4
        segment(store, "t", [now if young else now - OLD], roll=i < 5)
    log = store.log("t", 0)
    segs = log.segments()
    assert [s.base_offset for s in segs] == [0, 1, 2, 3, 4, 5]
    s = [seg.size for seg in segs]

    direct = log_to_clean_for_range(("t", 0), log, segs[2].base_offset, segs[4].base_offset)
    assert direct.clean_bytes == s[0] + s[1]
    assert direct.cleanable_bytes == s[2] + s[3]
    assert direct.total_bytes == s[0] + s[1] + s[2] + s[3]
    assert direct.cleanable_ratio == pytest.approx((s[2] + s[3]) / (s[0] + s[1] + s[2] + s[3]))

    # The same range found by the rules: checkpoint at s2, a young record in s4.
    ltc = log_to_clean(("t", 0), log, 2, now)
    assert (ltc.first_dirty_offset, ltc.first_uncleanable_offset) == (2, 4)
    assert ltc.first_uncleanable_dirty_offset == 4
    assert (ltc.clean_bytes, ltc.cleanable_bytes) == (direct.clean_bytes, direct.cleanable_bytes)
    assert ltc.cleanable_ratio == direct.cleanable_ratio
    assert ltc.uncleanable_reason == "min.compaction.lag.ms"


def test_first_dirty_offset_inside_a_segment_counts_it_in_both(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t")
    segment(store, "t", [clock.now] * 3)  # offsets 0-2
    segment(store, "t", [clock.now] * 3)  # offsets 3-5
    segment(store, "t", [clock.now], roll=False)  # active, offset 6
    s0, s1, _ = sizes(store, "t")
    ltc = log_to_clean(("t", 0), store.log("t", 0), 1, clock.now)
    assert ltc.first_dirty_offset == 1
    assert ltc.first_uncleanable_offset == 6
    assert ltc.clean_bytes == s0
    assert ltc.cleanable_bytes == s0 + s1
    assert ltc.total_bytes == 2 * s0 + s1
    assert ltc.cleanable_ratio == pytest.approx((s0 + s1) / (2 * s0 + s1))


def test_active_segment_and_empty_log_count_in_neither(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t")
    compacted(store, "empty")
    segment(store, "t", [clock.now] * 3, roll=False)  # only the active segment
    ltc = log_to_clean(("t", 0), store.log("t", 0), None, clock.now)
    assert (ltc.first_dirty_offset, ltc.first_uncleanable_offset) == (0, 0)
    assert (ltc.clean_bytes, ltc.cleanable_bytes, ltc.total_bytes) == (0, 0, 0)
    assert ltc.cleanable_ratio == 0.0
    assert ltc.uncleanable_reason == "active segment"
    empty = log_to_clean(("empty", 0), store.log("empty", 0), None, clock.now)
    assert empty.total_bytes == 0
    assert empty.uncleanable_reason is None  # nothing dirty at all
    assert manager_for(store, clock).grab_filthiest_compacted_log() is None


# --- the first dirty offset (spec 4.2) ----------------------------------------------------------


def test_checkpoint_below_log_start_offset_is_reset_and_rewritten_even_if_not_chosen(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"cleanup.policy": "compact,delete"})
    for _ in range(3):
        segment(store, "t", [clock.now] * 2)  # [0,1] [2,3] [4,5]
    segment(store, "t", [clock.now], roll=False)  # active [6]
    store.delete_records("t", 0, 3)  # inside the second segment
    checkpoint = store.cleaner_offset_checkpoint
    checkpoint.write({("t", 0): 1, ("gone", 0): 7})

    offsets = cleanable_offsets(store.log("t", 0), 1, clock.now)
    assert offsets.checkpoint_reset
    assert offsets.first_dirty_offset == 3
    assert offsets.first_uncleanable_offset == 6
    # clean = [0,1] + [2,3] (bases below 3), cleanable = [2,3] + [4,5]: exactly 0.5, which is
    # not strictly above the default minimum, so the log is not chosen ...
    manager = manager_for(store, clock)
    assert manager.grab_filthiest_compacted_log() is None
    # ... but its checkpoint was rewritten at once (and entries of unknown partitions dropped,
    # as Kafka's updateCheckpoints does).
    assert checkpoint.read() == {("t", 0): 3}
    assert manager.state(("t", 0)) is None


def test_checkpoint_above_log_end_offset_resets_to_log_start(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t")
    segment(store, "t", [clock.now] * 2)
    segment(store, "t", [clock.now], roll=False)
    store.cleaner_offset_checkpoint.write({("t", 0): 100})
    assert cleanable_offsets(store.log("t", 0), 100, clock.now).checkpoint_reset
    assert not cleanable_offsets(store.log("t", 0), 3, clock.now).checkpoint_reset
    assert not cleanable_offsets(store.log("t", 0), None, clock.now).checkpoint_reset
    manager = manager_for(store, clock)
    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None
    assert ltc.first_dirty_offset == 0
    assert ltc.cleanable_ratio == 1.0
    assert store.cleaner_offset_checkpoint.read() == {("t", 0): 0}


def test_checkpoint_inside_the_active_segment_leaves_nothing_to_clean(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Kafka's testDirtyOffsetLargerThanActiveSegmentBaseOffset."""
    store = open_store()
    compacted(store, "t")
    segment(store, "t", [clock.now] * 6, roll=False)
    offsets = cleanable_offsets(store.log("t", 0), 3, clock.now)
    assert not offsets.checkpoint_reset
    assert offsets.first_dirty_offset == offsets.first_uncleanable_dirty_offset == 3
    assert offsets.first_uncleanable_offset == 0  # aligned down to the active segment
    ltc = log_to_clean(("t", 0), store.log("t", 0), 3, clock.now)
    assert ltc.cleanable_bytes == 0
    assert ltc.clean_bytes == sizes(store, "t")[0]
    store.cleaner_offset_checkpoint.write({("t", 0): 3})
    assert manager_for(store, clock).grab_filthiest_compacted_log() is None


# --- the first uncleanable offset (spec 4.3) ----------------------------------------------------


def test_min_compaction_lag_young_record_protects_its_segment_and_all_later(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t", min_compaction_lag_ms=MINUTE)
    now = clock.now
    segment(store, "t", [now - OLD])  # 0
    segment(store, "t", [now - OLD])  # 1
    # One young record first: the segment's *largest* timestamp decides, not its last one.
    segment(store, "t", [now, now - OLD])  # 2-3
    segment(store, "t", [now - OLD])  # 4, old but after a young segment
    segment(store, "t", [now - OLD], roll=False)  # active 5
    log = store.log("t", 0)
    offsets = cleanable_offsets(log, None, now)
    assert offsets.first_uncleanable_dirty_offset == 2
    assert offsets.first_uncleanable_offset == 2
    ltc = log_to_clean(("t", 0), log, None, now)
    s = sizes(store, "t")
    assert ltc.cleanable_bytes == s[0] + s[1]
    assert ltc.uncleanable_reason == "min.compaction.lag.ms"

    # Strictly younger than the lag: a record exactly min.compaction.lag.ms old is cleanable.
    at_limit = cleanable_offsets(log, None, now + MINUTE)
    assert at_limit.first_uncleanable_offset == 5
    assert log_to_clean(("t", 0), log, None, now + MINUTE).uncleanable_reason == "active segment"
    assert cleanable_offsets(log, None, now + MINUTE - 1).first_uncleanable_offset == 2


def test_min_compaction_lag_search_starts_at_the_first_dirty_segment(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t", min_compaction_lag_ms=MINUTE)
    now = clock.now
    segment(store, "t", [now])  # 0: young, but already clean
    segment(store, "t", [now - OLD])  # 1
    segment(store, "t", [now - OLD], roll=False)  # active 2
    assert cleanable_offsets(store.log("t", 0), 1, now).first_uncleanable_offset == 2
    assert cleanable_offsets(store.log("t", 0), 0, now).first_uncleanable_offset == 0


def test_first_uncleanable_offset_is_aligned_down_to_a_segment_boundary(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t", min_compaction_lag_ms=MINUTE)
    now = clock.now
    segment(store, "t", [now - OLD] * 3)  # 0-2
    segment(store, "t", [now] * 3)  # 3-5, young
    segment(store, "t", [now - OLD], roll=False)  # active 6
    log = store.log("t", 0)
    # The FDO lies inside the young segment: FUDO = max(FDO, 3) = 4, FUO aligned down to 3.
    offsets = cleanable_offsets(log, 4, now)
    assert offsets.first_dirty_offset == 4
    assert offsets.first_uncleanable_dirty_offset == 4
    assert offsets.first_uncleanable_offset == 3
    ltc = log_to_clean(("t", 0), log, 4, now)
    s = sizes(store, "t")
    assert ltc.cleanable_bytes == 0
    assert ltc.clean_bytes == s[0] + s[1]
    assert ltc.cleanable_ratio == 0.0
    # Once the lag has passed the range reaches the active segment.
    later = cleanable_offsets(log, 4, now + 2 * MINUTE)
    assert later.first_uncleanable_dirty_offset == later.first_uncleanable_offset == 6


def test_min_compaction_lag_uses_file_mtime_for_segments_without_timestamps(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t", min_compaction_lag_ms=MINUTE)
    now = clock.now
    segment(store, "t", [-1])  # 0: no timestamps
    segment(store, "t", [-1])  # 1: no timestamps
    segment(store, "t", [now - OLD], roll=False)  # active 2
    log = store.log("t", 0)
    s0, s1, _ = log.segments()
    s0.set_last_modified_ms(now - OLD)
    s1.set_last_modified_ms(now - 1000)  # modified a second ago: young
    assert s1.largest_timestamp() == now - 1000
    assert cleanable_offsets(log, None, now).first_uncleanable_offset == 1
    s1.set_last_modified_ms(now - OLD)
    assert cleanable_offsets(log, None, now).first_uncleanable_offset == 2


def test_without_min_lag_the_range_stops_at_the_active_segment(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t")
    for _ in range(3):
        segment(store, "t", [clock.now])
    segment(store, "t", [clock.now], roll=False)
    ltc = log_to_clean(("t", 0), store.log("t", 0), None, clock.now)
    assert ltc.first_uncleanable_offset == ltc.first_uncleanable_dirty_offset == 3
    assert ltc.uncleanable_reason == "active segment"
    assert ltc.cleanable_ratio == 1.0


# --- max.compaction.lag.ms and eligibility (spec 4.5) -------------------------------------------


def test_max_compaction_lag_makes_a_log_eligible_below_the_ratio(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t", max_compaction_lag_ms=10_000, min_cleanable_dirty_ratio=0.9)
    now = clock.now
    segment(store, "t", [now - MINUTE])  # 0, clean
    segment(store, "t", [now - MINUTE])  # 1, dirty and past the max lag
    segment(store, "t", [now], roll=False)  # active 2
    store.cleaner_offset_checkpoint.write({("t", 0): 1})
    offsets = cleanable_offsets(store.log("t", 0), 1, now)
    assert offsets.needs_compaction_now
    assert offsets.compaction_delay_ms == (now - 10_000) - (now - MINUTE) == 50_000
    manager = manager_for(store, clock)
    stats = PreCleanStats()
    ltc = manager.grab_filthiest_compacted_log(stats=stats)
    assert ltc is not None
    assert ltc.cleanable_ratio == pytest.approx(0.5)  # below 0.9: chosen by the lag only
    assert ltc.needs_compaction_now and ltc.compaction_delay_ms == 50_000
    assert stats == PreCleanStats(
        max_compaction_delay_ms=50_000, delayed_partitions=1, cleanable_partitions=1
    )


def test_max_compaction_lag_does_not_prioritise_over_a_dirtier_log(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    now = clock.now
    compacted(store, "late", max_compaction_lag_ms=10_000, min_cleanable_dirty_ratio=0.9)
    segment(store, "late", [now - MINUTE])
    segment(store, "late", [now - MINUTE])
    segment(store, "late", [now], roll=False)
    compacted(store, "dirty")
    segment(store, "dirty", [now])
    segment(store, "dirty", [now], roll=False)
    store.cleaner_offset_checkpoint.write({("late", 0): 1})
    manager = manager_for(store, clock)
    first = manager.grab_filthiest_compacted_log()
    assert first is not None and first.topic_partition == ("dirty", 0)
    assert first.cleanable_ratio == 1.0 and not first.needs_compaction_now
    assert manager.cleanable_partitions == 2
    assert manager.delayed_partitions == 1
    second = manager.grab_filthiest_compacted_log()
    assert second is not None and second.topic_partition == ("late", 0)
    assert second.needs_compaction_now


def test_max_compaction_lag_needs_cleanable_bytes(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(
        store,
        "t",
        min_compaction_lag_ms=1000,
        max_compaction_lag_ms=10_000,
        min_cleanable_dirty_ratio=0.9,
    )
    now = clock.now
    segment(store, "t", [now - MINUTE])  # 0, clean
    segment(store, "t", [now])  # 1, young: min lag protects it and everything after
    segment(store, "t", [now - MINUTE])  # 2, past the max lag
    segment(store, "t", [now], roll=False)  # active 3
    store.cleaner_offset_checkpoint.write({("t", 0): 1})
    ltc = log_to_clean(("t", 0), store.log("t", 0), 1, now)
    assert ltc.needs_compaction_now
    assert ltc.cleanable_bytes == 0
    assert ltc.total_bytes > 0
    manager = manager_for(store, clock)
    stats = PreCleanStats()
    assert manager.grab_filthiest_compacted_log(stats=stats) is None
    assert stats.delayed_partitions == 1 and stats.cleanable_partitions == 0


def test_first_batch_timestamps_at_or_below_zero_are_ignored_by_the_max_lag(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t", max_compaction_lag_ms=10_000)
    segment(store, "t", [-1])
    segment(store, "t", [0])
    segment(store, "t", [clock.now], roll=False)
    offsets = cleanable_offsets(store.log("t", 0), None, clock.now)
    assert not offsets.needs_compaction_now
    assert offsets.compaction_delay_ms == 0


def test_ratio_equal_to_the_minimum_is_not_eligible(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t")  # min.cleanable.dirty.ratio = 0.5
    segment(store, "t", [clock.now])
    segment(store, "t", [clock.now])
    segment(store, "t", [clock.now], roll=False)
    store.cleaner_offset_checkpoint.write({("t", 0): 1})
    manager = manager_for(store, clock)
    assert log_to_clean(("t", 0), store.log("t", 0), 1, clock.now).cleanable_ratio == 0.5
    assert manager.grab_filthiest_compacted_log() is None
    assert manager.max_dirty_percent == 50
    store.alter_config("t", {"min.cleanable.dirty.ratio": "0.49"})
    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None and ltc.topic_partition == ("t", 0)


def test_minimum_ratio_zero_makes_any_dirty_log_eligible(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t", min_cleanable_dirty_ratio=0)
    segment(store, "t", [clock.now] * 20)  # 0-19, clean
    segment(store, "t", [clock.now])  # 20, dirty
    segment(store, "t", [clock.now], roll=False)
    manager = manager_for(store, clock)
    store.cleaner_offset_checkpoint.write({("t", 0): 21})  # nothing cleanable
    assert manager.grab_filthiest_compacted_log() is None
    store.cleaner_offset_checkpoint.write({("t", 0): 20})
    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None
    assert 0 < ltc.cleanable_ratio < 0.1


def test_minimum_ratio_one_never_qualifies_by_ratio(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "t", min_cleanable_dirty_ratio=1)
    segment(store, "t", [clock.now] * 5)
    segment(store, "t", [clock.now], roll=False)
    manager = manager_for(store, clock)
    assert log_to_clean(("t", 0), store.log("t", 0), None, clock.now).cleanable_ratio == 1.0
    assert manager.grab_filthiest_compacted_log() is None
    assert manager.max_dirty_percent == 100


@pytest.mark.parametrize(
    ("policy", "candidate"),
    [("compact", True), ("compact,delete", True), ("delete", False)],
)
def test_only_compacted_topics_are_candidates(
    open_store: StoreFactory, clock: ManualClock, policy: str, candidate: bool
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"cleanup.policy": policy})
    segment(store, "t", [clock.now] * 3)
    segment(store, "t", [clock.now], roll=False)
    manager = manager_for(store, clock)
    ltc = manager.grab_filthiest_compacted_log()
    assert (ltc is not None) == candidate
    assert manager.state(("t", 0)) == ("in-progress" if candidate else None)


def test_the_filthiest_eligible_log_is_chosen_and_held_until_done(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    # ratios: a = 1.0, b = 2/3, c = 0.5 (not eligible)
    for topic, clean_segments in (("a", 0), ("b", 1), ("c", 2)):
        compacted(store, topic)
        for _ in range(clean_segments):
            segment(store, topic, [clock.now])
        segment(store, topic, [clock.now])
        segment(store, topic, [clock.now])
        segment(store, topic, [clock.now], roll=False)
    store.cleaner_offset_checkpoint.write({("c", 0): 2, ("b", 0): 1})
    manager = manager_for(store, clock)
    first = manager.grab_filthiest_compacted_log()
    assert first is not None and first.topic_partition == ("a", 0)
    assert manager.state(("a", 0)) == "in-progress"
    second = manager.grab_filthiest_compacted_log()
    assert second is not None and second.topic_partition == ("b", 0)
    assert second.cleanable_ratio == pytest.approx(2 / 3)
    assert manager.max_dirty_percent == 66
    assert manager.grab_filthiest_compacted_log() is None
    assert manager.max_dirty_percent == 50  # only c was a candidate
    # An unsuccessful round hands back the old first dirty offset: a is dirty again.
    manager.done_cleaning(("a", 0), first.first_dirty_offset)
    again = manager.grab_filthiest_compacted_log()
    assert again is not None and again.topic_partition == ("a", 0)
    # A successful round moves the checkpoint to the end offset: b is clean.
    manager.done_cleaning(("b", 0), second.first_uncleanable_offset)
    assert store.cleaner_offset_checkpoint.read()[("b", 0)] == 3
    assert manager.grab_filthiest_compacted_log() is None


def test_concurrent_selections_never_hand_out_a_partition_twice(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    for i in range(12):
        compacted(store, f"t{i}")
        segment(store, f"t{i}", [clock.now] * (i + 1))
        segment(store, f"t{i}", [clock.now], roll=False)
    manager = manager_for(store, clock)
    got: list[tuple[str, int]] = []
    lock = threading.Lock()

    def worker() -> None:
        while (ltc := manager.grab_filthiest_compacted_log()) is not None:
            with lock:
                got.append(ltc.topic_partition)

    threads = [in_thread(worker) for _ in range(6)]
    for thread, errors in threads:
        thread.join(10)
        assert not thread.is_alive() and not errors
    assert sorted(got) == sorted((f"t{i}", 0) for i in range(12))


# --- cleaning states (spec 4.7) -----------------------------------------------------------------


@pytest.fixture
def dirty_store(open_store: StoreFactory, clock: ManualClock) -> Store:
    """Topic ``t`` (compact) with two dirty segments and an active one."""
    store = open_store()
    compacted(store, "t")
    segment(store, "t", [clock.now] * 2)
    segment(store, "t", [clock.now] * 2)
    segment(store, "t", [clock.now], roll=False)
    return store


TP = ("t", 0)


def test_abort_and_pause_of_an_idle_partition_nests_and_resume_unwinds(
    dirty_store: Store, clock: ManualClock
) -> None:
    manager = manager_for(dirty_store, clock)
    manager.abort_and_pause(TP)
    assert manager.state(TP) == "paused(1)"
    assert manager.grab_filthiest_compacted_log() is None  # paused logs are not candidates
    assert manager.logs_to_delete() == []
    manager.abort_and_pause(TP)
    assert manager.state(TP) == "paused(2)"
    manager.resume(TP)
    assert manager.state(TP) == "paused(1)"
    manager.resume(TP)
    assert manager.state(TP) is None
    with pytest.raises(IllegalCleaningStateError, match=r"t-0.*not paused"):
        manager.resume(TP)
    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None and ltc.topic_partition == TP


def test_resume_and_done_calls_refuse_the_wrong_states(
    dirty_store: Store, clock: ManualClock
) -> None:
    manager = manager_for(dirty_store, clock)
    with pytest.raises(IllegalCleaningStateError, match="t-0"):
        manager.done_cleaning(TP, 1)
    with pytest.raises(IllegalCleaningStateError, match="t-0"):
        manager.done_deleting([TP])
    manager.abort_and_pause(TP)
    with pytest.raises(IllegalCleaningStateError, match=r"t-0.*paused\(1\)"):
        manager.done_cleaning(TP, 1)
    with pytest.raises(IllegalCleaningStateError, match=r"t-0.*paused\(1\)"):
        manager.done_deleting([TP])
    with pytest.raises(IllegalCleaningStateError, match=r"t-0.*paused\(1\)"):
        manager.begin_cleaning(TP)
    manager.resume(TP)
    assert manager.grab_filthiest_compacted_log() is not None
    with pytest.raises(IllegalCleaningStateError, match=r"t-0.*in-progress"):
        manager.resume(TP)
    with pytest.raises(IllegalCleaningStateError, match=r"t-0.*in-progress"):
        manager.begin_cleaning(TP)
    assert dirty_store.cleaner_offset_checkpoint.read() == {}


def test_done_cleaning_writes_the_checkpoint_and_goes_idle(
    dirty_store: Store, clock: ManualClock
) -> None:
    manager = manager_for(dirty_store, clock)
    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None
    manager.done_cleaning(TP, 3)
    assert manager.state(TP) is None
    assert manager.checkpoints() == {TP: 3}
    assert dirty_store.cleaner_offset_checkpoint.read() == {TP: 3}


def test_abort_and_pause_blocks_until_done_cleaning_which_then_writes_nothing(
    dirty_store: Store, clock: ManualClock
) -> None:
    manager = manager_for(dirty_store, clock)
    assert manager.grab_filthiest_compacted_log() is not None
    assert not manager.is_aborted(TP)
    thread, errors = in_thread(lambda: manager.abort_and_pause(TP))
    wait_for(lambda: manager.state(TP) == "aborted")
    assert manager.is_aborted(TP)
    time.sleep(0.05)
    assert thread.is_alive()  # still waiting for the cleaner thread
    # A second abort while one is pending, and a resume of an aborted partition, are refused.
    with pytest.raises(IllegalCleaningStateError, match=r"t-0.*aborted"):
        manager.abort_and_pause(TP)
    with pytest.raises(IllegalCleaningStateError, match=r"t-0.*aborted"):
        manager.resume(TP)
    with pytest.raises(IllegalCleaningStateError, match=r"t-0.*aborted"):
        manager.begin_cleaning(TP)
    manager.done_cleaning(TP, 4)  # the cleaner thread reports back
    thread.join(5)
    assert not thread.is_alive() and not errors
    assert manager.state(TP) == "paused(1)"
    assert not manager.is_aborted(TP)
    assert dirty_store.cleaner_offset_checkpoint.read() == {}  # Aborted -> Paused(1): no write
    manager.resume(TP)
    assert manager.state(TP) is None


def test_abort_and_pause_blocks_until_done_deleting(dirty_store: Store, clock: ManualClock) -> None:
    manager = manager_for(dirty_store, clock)
    assert [tp for tp, _ in manager.logs_to_delete()] == [TP]
    thread, errors = in_thread(lambda: manager.abort_and_pause(TP))
    wait_for(lambda: manager.is_aborted(TP))
    assert thread.is_alive()
    manager.done_deleting([TP])
    thread.join(5)
    assert not thread.is_alive() and not errors
    assert manager.state(TP) == "paused(1)"


def test_abort_cleaning_waits_for_the_round_then_leaves_the_partition_idle(
    dirty_store: Store, clock: ManualClock
) -> None:
    manager = manager_for(dirty_store, clock)
    manager.abort_cleaning(TP)  # idle: pause then resume
    assert manager.state(TP) is None
    assert manager.grab_filthiest_compacted_log() is not None
    thread, errors = in_thread(lambda: manager.abort_cleaning(TP))
    wait_for(lambda: manager.is_aborted(TP))
    manager.done_cleaning(TP, 4)
    thread.join(5)
    assert not thread.is_alive() and not errors
    assert manager.state(TP) is None
    assert dirty_store.cleaner_offset_checkpoint.read() == {}


def test_logs_to_delete_takes_idle_compacted_logs_and_done_deleting_releases_them(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    for topic, policy in (("c", "compact"), ("cd", "compact,delete"), ("d", "delete")):
        store.create_topic(topic, 1, {"cleanup.policy": policy})
    store.create_topic("paused", 1, {"cleanup.policy": "compact"})
    store.create_topic("broken", 1, {"cleanup.policy": "compact"})
    manager = manager_for(store, clock)
    manager.abort_and_pause(("paused", 0))
    manager.mark_uncleanable(("broken", 0), "test")
    taken = manager.logs_to_delete()
    assert sorted(tp for tp, _ in taken) == [("c", 0), ("cd", 0)]
    assert all(log is store.log(*tp) for tp, log in taken)
    assert manager.state(("c", 0)) == manager.state(("cd", 0)) == "in-progress"
    assert manager.logs_to_delete() == []  # already taken
    manager.done_deleting([tp for tp, _ in taken])
    assert manager.state(("c", 0)) is None and manager.state(("cd", 0)) is None
    assert manager.state(("paused", 0)) == "paused(1)"


def test_pausing_non_compacted_partitions_for_the_store_retention(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("c", 1, {"cleanup.policy": "compact"})
    store.create_topic("d", 1, {"cleanup.policy": "delete"})
    manager = manager_for(store, clock)
    taken = manager.pause_cleaning_for_non_compacted_partitions()
    assert [tp for tp, _ in taken] == [("d", 0)]
    assert manager.state(("d", 0)) == "paused(1)"
    manager.resume(("d", 0))
    assert manager.state(("d", 0)) is None


# --- uncleanable partitions (spec 4.6) ----------------------------------------------------------


def test_a_log_whose_statistics_raise_is_marked_uncleanable_and_skipped(
    open_store: StoreFactory, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    for topic in ("bad", "good"):
        compacted(store, topic)
        segment(store, topic, [clock.now] * 3)
        segment(store, topic, [clock.now], roll=False)
    bad = store.log("bad", 0)

    def broken() -> list[Any]:
        raise StorageError("read of 00000000000000000000.timeindex failed: EIO")

    monkeypatch.setattr(bad, "segments", broken)
    manager = manager_for(store, clock)
    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None and ltc.topic_partition == ("good", 0)
    reasons = manager.uncleanable_partitions()
    assert list(reasons) == [("bad", 0)]
    assert "StorageError" in reasons[("bad", 0)] and "EIO" in reasons[("bad", 0)]
    assert manager.uncleanable_partitions_count == 1
    monkeypatch.undo()
    # Stays out of selection and of the cleaner's retention pass while hosted.
    manager.done_cleaning(("good", 0), 3)
    assert manager.grab_filthiest_compacted_log() is None
    assert manager.logs_to_delete() == [(("good", 0), store.log("good", 0))]
    manager.done_deleting([("good", 0)])
    # The uncleanable-bytes gauge: the cleanable bytes of the uncleanable partitions.
    expected = log_to_clean(("bad", 0), bad, None, clock.now).cleanable_bytes
    assert expected > 0
    assert manager.uncleanable_bytes == expected


def test_uncleanable_marks_are_pruned_when_the_partition_leaves(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "gone")
    compacted(store, "kept")
    manager = manager_for(store, clock)
    manager.mark_uncleanable(("gone", 0), "boom")
    manager.mark_uncleanable(("kept", 0), "bang")
    manager.prune_uncleanable()
    assert manager.uncleanable_partitions() == {("gone", 0): "boom", ("kept", 0): "bang"}
    store.delete_topic("gone")
    assert manager.uncleanable_bytes == 0  # a gone partition counts nothing
    manager.prune_uncleanable()
    assert manager.uncleanable_partitions() == {("kept", 0): "bang"}
    assert manager.uncleanable_partitions_count == 1


# --- the checkpoint file (spec 4.7, 5.10) -------------------------------------------------------


def test_checkpoint_updates_removal_and_truncation(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    compacted(store, "c")
    store.create_topic("d", 1, {"cleanup.policy": "delete"})
    manager = manager_for(store, clock)
    assert manager.checkpoints() == {}
    manager.update_checkpoint(("unknown", 0), 5)
    assert manager.checkpoints() == {("unknown", 0): 5}
    # Every rewrite keeps only the entries of hosted partitions (and the one it sets).
    manager.update_checkpoint(("c", 0), 10)
    manager.update_checkpoint(("d", 0), 7)
    assert manager.checkpoints() == {("c", 0): 10, ("d", 0): 7}
    manager.maybe_truncate_checkpoint(("c", 0), 12)  # not above: unchanged
    manager.maybe_truncate_checkpoint(("c", 0), 4)
    manager.maybe_truncate_checkpoint(("d", 0), 1)  # only compacted logs are truncated
    assert manager.checkpoints() == {("c", 0): 4, ("d", 0): 7}
    manager.update_checkpoint(("c", 0), None)
    assert store.cleaner_offset_checkpoint.read() == {("d", 0): 7}


def test_a_damaged_checkpoint_file_reads_as_empty(dirty_store: Store, clock: ManualClock) -> None:
    with open(dirty_store.cleaner_offset_checkpoint.path, "wb") as f:
        f.write(b"0\n3\nt 0 zz\n")
    manager = manager_for(dirty_store, clock)
    assert manager.checkpoints() == {}
    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None and ltc.first_dirty_offset == 0
    manager.done_cleaning(TP, 4)
    assert dirty_store.cleaner_offset_checkpoint.read() == {TP: 4}


def test_forget_partition_drops_its_checkpoint_and_mark(
    dirty_store: Store, clock: ManualClock
) -> None:
    manager = manager_for(dirty_store, clock)
    manager.update_checkpoint(TP, 2)
    manager.mark_uncleanable(TP, "boom")
    manager.forget_partition(TP)
    assert manager.checkpoints() == {}
    assert manager.uncleanable_partitions() == {}
    assert manager.state(TP) is None


# --- gauges (spec 4.5, 4.6, 5.11) ---------------------------------------------------------------


def test_gauges(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    now = clock.now
    compacted(store, "late", max_compaction_lag_ms=10_000, min_cleanable_dirty_ratio=0.9)
    segment(store, "late", [now - MINUTE])
    segment(store, "late", [now - MINUTE])
    segment(store, "late", [now], roll=False)
    store.cleaner_offset_checkpoint.write({("late", 0): 1})
    compacted(store, "dirty")
    segment(store, "dirty", [now] * 2)
    segment(store, "dirty", [now], roll=False)
    manager = manager_for(store, clock)
    assert manager.time_since_last_run_ms == 0
    clock.advance(2500)
    assert manager.time_since_last_run_ms == 2500
    assert manager.max_compaction_delay_secs == 0.0
    assert manager.last_pre_clean_stats == PreCleanStats()

    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None and ltc.topic_partition == ("dirty", 0)
    assert manager.time_since_last_run_ms == 0
    assert manager.max_dirty_percent == 100
    delay = (clock.now - 10_000) - (now - MINUTE)
    assert manager.max_compaction_delay_secs == delay / 1000
    assert manager.last_pre_clean_stats == PreCleanStats(delay, 1, 2)
    assert (manager.cleanable_partitions, manager.delayed_partitions) == (2, 1)

    manager.mark_uncleanable(("late", 0), "test")
    late_bytes = log_to_clean(("late", 0), store.log("late", 0), 1, clock.now).cleanable_bytes
    assert manager.gauges() == {
        "max-dirty-percent": 100,
        "time-since-last-run-ms": 0,
        "uncleanable-partitions-count": 1,
        "uncleanable-bytes": late_bytes,
        "max-compaction-delay-secs": delay / 1000,
    }
    # A selection that finds nothing keeps the last delay stats (Kafka keeps a thread's
    # lastPreCleanStats until it selects a log again) but updates the ratio and the run time.
    clock.advance(100)
    assert manager.grab_filthiest_compacted_log() is None
    assert manager.max_dirty_percent == 0
    assert manager.time_since_last_run_ms == 0
    assert manager.max_compaction_delay_secs == delay / 1000
