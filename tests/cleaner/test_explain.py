"""cleaner_status and explain_key: the cleaner's view of a log, and of one key (spec 4, 5)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from compactlog.cleaner.explain import (
    VERDICT_LATEST,
    VERDICT_NOT_COMPACTED,
    VERDICT_REMOVABLE,
    VERDICT_WAITING,
    PartitionStatus,
    cleaner_status,
    explain_key,
    format_ms,
    key_partition,
    keys_per_pass,
    next_cleaning_range,
)
from compactlog.cleaner.service import LogCleaner
from compactlog.errors import UnknownTopicOrPartitionError
from compactlog.storage.config import BrokerConfig
from compactlog.storage.readonly import ReadOnlyDataDir
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import manager_of

StoreFactory = Callable[..., Store]
TOPIC = "fruit-prices"
RETENTION = 60_000  # delete.retention.ms
SEED = [(b"grape", b"$2.69"), (b"lime", b"$0.49"), (b"grape", None), (b"lime", b"$1.59")]


def seed(store: Store, roll: bool = True, **config: Any) -> None:
    overrides: dict[str, Any] = {"cleanup.policy": "compact", "delete.retention.ms": RETENTION}
    overrides.update(config)
    store.create_topic(TOPIC, 1, overrides)
    for key, value in SEED:
        store.append(TOPIC, 0, [(key, value)])
    if roll:
        store.roll(TOPIC, 0)


def status(store: Store, now: int, topic: str = TOPIC) -> PartitionStatus:
    (found,) = cleaner_status(manager_of(store).cleaner, topic, now)
    return found


def sizes(store: Store, topic: str = TOPIC) -> list[int]:
    return [s.size for s in store.segments(topic, 0)]


# --- cleaner_status ------------------------------------------------------------------------


def test_only_the_active_segment(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    seed(store, roll=False)
    s = status(store, clock.now)
    assert (s.first_dirty_offset, s.first_uncleanable_offset) == (0, 0)
    assert s.bounded_by == "active segment"
    assert (s.clean_bytes, s.cleanable_bytes, s.dirty_ratio) == (0, 0, 0.0)
    assert not s.eligible
    assert len(s.why_not) == 1 and "active segment (base offset 0)" in s.why_not[0]
    assert s.checkpoint is None and s.dirty_keys == 0 and s.passes_needed == 0
    (tombstone,) = s.tombstones
    assert (tombstone.offset, tombstone.key, tombstone.delete_horizon_ms) == (2, b"grape", None)
    assert not tombstone.horizon_passed and tombstone.superseded_by is None


def test_seed_example_before_and_after_cleaning(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    seed(store)
    t0 = clock.now
    before = status(store, t0)
    assert (before.first_dirty_offset, before.first_uncleanable_offset) == (0, 4)
    assert before.cleanable_bytes == sizes(store)[0] and before.clean_bytes == 0
    assert before.dirty_ratio == 1.0 and before.eligible and before.why_not == []
    assert before.dirty_keys == 2 and before.passes_needed == 1
    assert before.next_map_end_offset == 4
    assert before.keys_per_pass == keys_per_pass(store.broker) == 5_033_164

    result = manager_of(store).clean(t0)
    assert result.end_offset == 4

    after = status(store, t0 + 1)
    assert after.checkpoint == 4
    assert (after.first_dirty_offset, after.first_uncleanable_offset) == (4, 4)
    assert after.bounded_by is None and not after.eligible
    assert "nothing is dirty" in after.why_not[0]
    assert after.clean_bytes == sizes(store)[0] and after.cleanable_bytes == 0
    (tombstone,) = after.tombstones
    assert tombstone.offset == 2 and tombstone.delete_horizon_ms == t0 + RETENTION
    assert not tombstone.horizon_passed
    assert status(store, t0 + RETENTION).tombstones[0].horizon_passed


def test_dirty_ratio_below_the_minimum(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    seed(store)
    manager_of(store).clean(clock.now)
    store.append(TOPIC, 0, [(b"kiwi", b"$0.30")])
    store.roll(TOPIC, 0)
    s = status(store, clock.now)
    clean, dirty, _active = sizes(store)
    assert (s.first_dirty_offset, s.first_uncleanable_offset) == (4, 5)
    assert (s.clean_bytes, s.cleanable_bytes, s.total_bytes) == (clean, dirty, clean + dirty)
    assert s.dirty_ratio == pytest.approx(dirty / (clean + dirty))
    assert s.dirty_ratio < 0.5 and not s.eligible
    assert s.why_not == [f"dirty ratio {s.dirty_ratio:.3f} <= min.cleanable.dirty.ratio 0.5"]
    assert s.dirty_keys == 1
    # The same log with a lower minimum qualifies.
    store.alter_config(TOPIC, set={"min.cleanable.dirty.ratio": "0.1"})
    assert status(store, clock.now).eligible


def test_min_compaction_lag(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    seed(store, **{"min.compaction.lag.ms": 60_000})
    s = status(store, clock.now)
    assert s.bounded_by == "min.compaction.lag.ms"
    assert (s.first_dirty_offset, s.first_uncleanable_offset) == (0, 0)
    assert s.min_lag_until_ms == clock.now + 60_000
    assert not s.eligible and "min.compaction.lag.ms" in s.why_not[0]
    assert format_ms(clock.now + 60_000) in s.why_not[0]
    later = status(store, clock.now + 60_000)
    assert later.first_uncleanable_offset == 4 and later.eligible


def test_max_compaction_lag_makes_a_log_eligible(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    seed(store, **{"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": 1000})
    manager_of(store).clean(clock.now)  # clean once, so that the ratio of a small dirty tail is low
    store.append(TOPIC, 0, [(b"kiwi", b"$0.30")], timestamp=clock.now)
    store.roll(TOPIC, 0)
    s = status(store, clock.now + 5000)
    assert s.needs_compaction_now and s.compaction_delay_ms == 4000
    assert s.dirty_ratio < 0.99 and s.eligible


def test_uncleanable_and_not_compacted(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    seed(store)
    store.create_topic("plain", 1)
    store.append("plain", 0, [(b"k", None)])
    cleaner = manager_of(store).cleaner
    assert isinstance(cleaner, LogCleaner)
    cleaner.manager.mark_uncleanable((TOPIC, 0), "CorruptRecordError: bad batch")
    everything = {
        (s.topic, s.partition): s for s in cleaner_status(manager_of(store).cleaner, now=clock.now)
    }
    assert set(everything) == {(TOPIC, 0), ("plain", 0)}
    marked = everything[(TOPIC, 0)]
    assert not marked.eligible and marked.uncleanable == "CorruptRecordError: bad batch"
    assert marked.why_not == ["marked uncleanable: CorruptRecordError: bad batch"]
    plain = everything[("plain", 0)]
    assert plain.cleanup_policy == "delete" and not plain.eligible
    assert "only cleans compacted logs" in plain.why_not[0]
    assert plain.tombstones == [] and plain.dirty_keys == 0


def test_tombstones_superseded_within_and_across_runs(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"cleanup.policy": "compact"})
    store.append("t", 0, [(b"a", None), (b"b", None), (b"a", b"back"), (b"c", None)])
    store.append("t", 0, [(b"b", b"again"), (b"c", None)])
    found = [(t.offset, t.key, t.superseded_by) for t in status(store, clock.now, "t").tombstones]
    assert found == [(0, b"a", 2), (1, b"b", 4), (3, b"c", 5), (5, b"c", None)]


def test_unknown_topic(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    with pytest.raises(UnknownTopicOrPartitionError):
        cleaner_status(manager_of(store).cleaner, "nope", clock.now)
    with pytest.raises(UnknownTopicOrPartitionError):
        explain_key(manager_of(store).cleaner, "nope", b"k")


# --- passes of the dedupe buffer ---------------------------------------------------------------

SMALL_BUFFER = 1_100_000  # just above Kafka's 1 MiB minimum per thread


def test_keys_per_pass_follows_the_config() -> None:
    assert keys_per_pass(BrokerConfig.from_dict({})) == 5_033_164
    small = BrokerConfig.from_dict({"log.cleaner.dedupe.buffer.size": SMALL_BUFFER})
    assert keys_per_pass(small) == int((SMALL_BUFFER // 24) * 0.9)
    compact = BrokerConfig.from_dict(
        {"log.cleaner.dedupe.buffer.size": SMALL_BUFFER, "compactlog.cleaner.offset.map": "compact"}
    )
    assert keys_per_pass(compact) == int((SMALL_BUFFER // 16) * 0.9)


def test_passes_needed_and_where_the_first_pass_ends(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """The predicted end of the next map is where the real cleaner's first pass ends."""
    store = open_store(config={"log.cleaner.dedupe.buffer.size": SMALL_BUFFER})
    per_pass = keys_per_pass(store.broker)
    store.create_topic("big", 1, {"cleanup.policy": "compact"})
    total = per_pass + 5000
    for start in range(0, total, 5000):
        store.append("big", 0, [(b"k%d" % i, b"v") for i in range(start, min(start + 5000, total))])
    store.append("big", 0, [(b"k0", b"newer")])
    store.roll("big", 0)
    s = status(store, clock.now, "big")
    assert s.dirty_keys == total and s.passes_needed == 2
    assert s.next_map_end_offset == per_pass  # the first record met with a full map

    (old, new) = explain_key(manager_of(store).cleaner, "big", b"k0", now=clock.now)
    assert old.verdict == VERDICT_WAITING and old.superseded_by == total
    assert f"map ends at offset {per_pass}" in old.reason
    assert new.verdict == VERDICT_LATEST

    first = manager_of(store).clean(clock.now)
    assert first.end_offset == per_pass
    assert status(store, clock.now, "big").first_dirty_offset == per_pass
    (old, _) = explain_key(manager_of(store).cleaner, "big", b"k0", now=clock.now)
    assert old.verdict == VERDICT_REMOVABLE
    manager_of(store).clean_log("big", 0, clock.now)
    assert [r.value for r in store.read("big", 0) if r.key == b"k0"] == [b"newer"]


def test_passes_needed_replays_the_passes_when_keys_recur(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Every key twice, then 5000 new ones: ceil(distinct / per pass) says 2, but the second
    pass starts with the repeats and fills up again, so the cleaner needs 3 cleanings."""
    store = open_store(config={"log.cleaner.dedupe.buffer.size": SMALL_BUFFER})
    per_pass = keys_per_pass(store.broker)
    store.create_topic("big", 1, {"cleanup.policy": "compact"})
    blocks = [(0, per_pass), (0, per_pass), (per_pass, per_pass + 5000)]
    for lo, hi in blocks:
        for start in range(lo, hi, 5000):
            store.append(
                "big", 0, [(b"k%d" % i, b"v") for i in range(start, min(start + 5000, hi))]
            )
    store.roll("big", 0)
    s = status(store, clock.now, "big")
    assert s.dirty_keys == per_pass + 5000 and -(-s.dirty_keys // per_pass) == 2
    assert s.passes_needed == 3
    assert s.next_map_end_offset == per_pass

    ends = [manager_of(store).clean_log("big", 0, clock.now).end_offset for _ in range(3)]
    assert ends == [per_pass, 2 * per_pass, s.first_uncleanable_offset]
    assert status(store, clock.now, "big").passes_needed == 0


# --- explain_key ---------------------------------------------------------------------------


def test_explain_before_and_after_cleaning(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    seed(store)
    t0 = clock.now
    grape = explain_key(manager_of(store).cleaner, TOPIC, b"grape", now=t0)
    assert [(e.offset, e.value, e.verdict) for e in grape] == [
        (0, b"$2.69", VERDICT_REMOVABLE),
        (2, None, VERDICT_WAITING),
    ]
    assert grape[0].superseded_by == 2 and grape[0].segment_base_offset == 0
    assert grape[0].reason.startswith("removable now: superseded by offset 2")
    assert "the log is eligible now" in grape[0].reason
    stamp = format_ms(t0 + RETENTION)
    assert grape[1].reason.startswith("tombstone not yet stamped: the next cleaning stamps")
    assert stamp in grape[1].reason and grape[1].removable_after_ms == t0 + RETENTION
    lime = explain_key(manager_of(store).cleaner, TOPIC, b"lime", now=t0)
    assert [e.verdict for e in lime] == [VERDICT_REMOVABLE, VERDICT_LATEST]
    assert lime[1].reason.startswith("latest value")

    manager_of(store).clean(t0)
    (tombstone,) = explain_key(manager_of(store).cleaner, TOPIC, b"grape", now=t0 + 10)
    assert tombstone.is_tombstone and tombstone.delete_horizon_ms == t0 + RETENTION
    assert tombstone.verdict == VERDICT_WAITING
    assert tombstone.reason.startswith(f"tombstone: kept until its delete horizon {stamp}")
    assert f"set by the cleaning at {format_ms(t0)}" in tombstone.reason

    # Past the horizon: removable, but only a cleaning of dirty data removes it.
    (past,) = explain_key(manager_of(store).cleaner, TOPIC, b"grape", now=t0 + RETENTION)
    assert past.verdict == VERDICT_REMOVABLE and "nothing is cleanable now" in past.reason
    store.append(TOPIC, 0, [(b"kiwi", b"$0.30")])
    store.roll(TOPIC, 0)
    (past,) = explain_key(manager_of(store).cleaner, TOPIC, b"grape", now=t0 + RETENTION)
    assert "no cleaner iteration picks the log yet (dirty ratio" in past.reason
    manager_of(store).clean_log(TOPIC, 0, t0 + RETENTION)
    assert explain_key(manager_of(store).cleaner, TOPIC, b"grape", now=t0 + RETENTION) == []


def test_explain_superseded_in_the_active_segment_and_inside_min_lag(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    seed(store, roll=False)
    (old, tombstone) = explain_key(manager_of(store).cleaner, TOPIC, b"grape", now=clock.now)
    assert old.verdict == VERDICT_WAITING and old.in_active_segment
    assert "beyond the first uncleanable offset 0" in old.reason
    assert "inside the active segment" in old.reason
    assert "tombstone not yet stamped, and the next cleaning does not reach it" in tombstone.reason

    store.alter_config(TOPIC, set={"min.compaction.lag.ms": "60000"})
    store.roll(TOPIC, 0)
    store.append(TOPIC, 0, [(b"lime", b"$1.99")], timestamp=clock.now + 1000)
    store.roll(TOPIC, 0)
    now = clock.now + 60_500  # segment 0 is old enough, segment 4 is not (until +61000)
    lime = explain_key(manager_of(store).cleaner, TOPIC, b"lime", now=now)
    assert [e.verdict for e in lime] == [VERDICT_REMOVABLE, VERDICT_WAITING, VERDICT_LATEST]
    until = clock.now + 1000 + 60_000
    assert f"inside min.compaction.lag.ms until {format_ms(until)}" in lime[1].reason
    assert lime[1].removable_after_ms == until


def test_explain_partition_choice_and_binary_keys(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 3, {"cleanup.policy": "compact"})
    key = bytes([0, 255, 16])
    where, offset = store.produce("t", key, b"v")
    assert key_partition(store, "t", key) == where
    (found,) = explain_key(manager_of(store).cleaner, "t", key, now=clock.now)
    assert (found.partition, found.offset, found.key) == (where, offset, key)
    other = (where + 1) % 3
    assert explain_key(manager_of(store).cleaner, "t", key, partition=other, now=clock.now) == []
    with pytest.raises(UnknownTopicOrPartitionError):
        explain_key(manager_of(store).cleaner, "t", key, partition=3)
    assert explain_key(manager_of(store).cleaner, "t", b"", now=clock.now) == []


def test_explain_not_compacted(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    store.create_topic("plain", 1)
    store.append("plain", 0, [(b"k", b"1")])
    store.append("plain", 0, [(b"k", b"2")])
    assert [
        e.verdict for e in explain_key(manager_of(store).cleaner, "plain", b"k", now=clock.now)
    ] == [
        VERDICT_NOT_COMPACTED,
        VERDICT_NOT_COMPACTED,
    ]


def test_next_cleaning_range_writes_nothing(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    seed(store)
    store.cleaner_offset_checkpoint.write({(TOPIC, 0): 99})  # beyond the log end: reset
    found = next_cleaning_range(manager_of(store).cleaner, TOPIC, 0, clock.now)
    assert (found.first_dirty_offset, found.first_uncleanable_offset) == (0, 4)
    assert store.cleaner_offset_checkpoint.read() == {(TOPIC, 0): 99}


def test_format_ms() -> None:
    assert format_ms(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"
    assert format_ms(0) == "1970-01-01T00:00:00.000Z"


def test_the_files_alone_give_the_live_cleaners_answers(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """cleaner_status and explain_key over a ReadOnlyDataDir (what the CLI reads, no lock) agree
    with the live cleaner's, field for field, while the store stays open."""
    store = open_store()
    seed(store)
    store.write_log_start_offset_checkpoint()
    now = clock.now + 1
    live = cleaner_status(manager_of(store).cleaner, TOPIC, now)
    with ReadOnlyDataDir(store.path, now=now) as files:
        assert cleaner_status(files, TOPIC, now) == live
        assert explain_key(files, TOPIC, b"grape", now=now) == explain_key(
            manager_of(store).cleaner, TOPIC, b"grape", now=now
        )
        with pytest.raises(UnknownTopicOrPartitionError):
            cleaner_status(files, "nope", now)
