"""The cleaning rules, observed through the store (spec 4, 5, 9).

Every test writes a small compacted log, cleans it (``manager_of(store).clean(now)``,
``clean_log`` or, for partial passes, a :class:`Cleaner` with a tiny offset map) and reads back
offsets, values, batch boundaries and segment base offsets exactly.
"""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from compactlog.cleaner.cleaner import Cleaner, group_segments_by_size
from compactlog.cleaner.offset_map import CompactOffsetMap, OffsetMap, SkimpyOffsetMap
from compactlog.cleaner.stats import summary_message
from compactlog.errors import CompactlogError
from compactlog.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Compression,
    RecordBatch,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
)
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import manager_of

StoreFactory = Callable[..., Store]
Row = tuple[int, bytes | None, bytes | None]

MIB = 1 << 20
# Kafka refuses 1 MiB or less per cleaner thread; 2 MiB keeps every clear() cheap.
BROKER = {"log.cleaner.dedupe.buffer.size": 2 * MIB}
T = "t"
MINUTE = 60_000
DAY = 86_400_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


# --- helpers ---------------------------------------------------------------------------------


def new_store(
    open_store: StoreFactory, topic: str = T, policy: str = "compact", **cfg: Any
) -> Store:
    store = open_store(config=BROKER)
    create(store, topic, policy, **cfg)
    return store


def create(store: Store, topic: str, policy: str = "compact", **cfg: Any) -> None:
    """A one-partition topic; ``min_cleanable_dirty_ratio=0.1`` -> ``min.cleanable.dirty.ratio``."""
    overrides: dict[str, Any] = {"cleanup.policy": policy}
    overrides.update({k.replace("_", "."): v for k, v in cfg.items()})
    store.create_topic(topic, 1, overrides)


def put(
    store: Store,
    topic: str,
    *records: tuple[bytes | None, bytes | None],
    ts: int | None = None,
    codec: str = "none",
) -> int:
    """One batch of ``records``; returns its base offset."""
    return store.append(topic, 0, list(records), timestamp=ts, compression=codec)


def put_raw(store: Store, topic: str, raw: bytes) -> int:
    return store.append_batch(topic, 0, raw)


def state(store: Store, topic: str = T) -> list[Row]:
    start = store.log_start_offset(topic, 0)
    return [(r.offset, r.key, r.value) for r in store.read(topic, 0, start)]


def batches(store: Store, topic: str = T) -> list[RecordBatch]:
    log = store.log(topic, 0)
    return [RecordBatch(bytes(b.data)) for b in log.iter_batches(log.log_start_offset)]


def shape(store: Store, topic: str = T) -> list[tuple[int, int, int]]:
    """(base offset, last offset, record count) of every batch."""
    return [(b.base_offset, b.last_offset, b.records_count) for b in batches(store, topic)]


def bases(store: Store, topic: str = T) -> list[int]:
    return [s.base_offset for s in store.log(topic, 0).segments()]


def sizes(store: Store, topic: str = T) -> list[int]:
    return [s.size for s in store.log(topic, 0).segments()]


def checkpoint(store: Store, topic: str = T) -> int | None:
    return store.cleaner_offset_checkpoint.read().get((topic, 0))


def set_checkpoint(store: Store, offset: int, topic: str = T) -> None:
    entries = store.cleaner_offset_checkpoint.read()
    entries[(topic, 0)] = offset
    store.cleaner_offset_checkpoint.write(entries)


def keys(*names: str, value: bytes = b"v") -> list[tuple[bytes | None, bytes | None]]:
    return [(n.encode(), value) for n in names]


def tiny_cleaner(clock: Callable[[], int], slots: int = 11, kind: str = "skimpy") -> Cleaner:
    """A cleaner whose map holds floor(slots * 0.9) keys (9 for 11 slots)."""
    offset_map: OffsetMap = (
        SkimpyOffsetMap(24 * slots) if kind == "skimpy" else CompactOffsetMap(16 * slots)
    )
    return Cleaner(0, offset_map, clock=clock)


def clean_to_the_end(
    cleaner: Cleaner, store: Store, topic: str, fdo: int, fuo: int, now: int
) -> list[int]:
    """Rounds of ``cleaner`` from ``fdo`` until the map covered ``fuo``; the end offsets."""
    log = store.log(topic, 0)
    ends: list[int] = []
    while fdo < fuo:
        end, _ = cleaner.clean(log, fdo, fuo, now)
        assert end > fdo, "a round must make progress"
        ends.append(end)
        set_checkpoint(store, end, topic)
        fdo = end
    return ends


def inode(segment_path: str) -> int:
    return os.stat(segment_path).st_ino


# --- latest offset per key wins (spec 5.4) ----------------------------------------------------


def test_the_latest_offset_of_each_key_wins_and_no_offset_changes(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    put(store, T, (b"a", b"a1"), (b"b", b"b1"))  # 0-1
    put(store, T, (b"c", b"c1"), (b"a", b"a2"))  # 2-3
    put(store, T, (b"b", b"b2"))  # 4
    put(store, T, (b"a", b"a3"), (b"d", b"d1"))  # 5-6
    store.roll(T, 0)
    result = manager_of(store).clean(clock.now)
    assert result.cleaned == (T, 0)
    assert (result.first_dirty_offset, result.end_offset) == (0, 7)
    assert state(store) == [(2, b"c", b"c1"), (4, b"b", b"b2"), (5, b"a", b"a3"), (6, b"d", b"d1")]
    # The emptied batch 0-1 is gone (it does not end at the first uncleanable offset); 2-3 keeps
    # its last offset although only offset 2 survives.
    assert shape(store) == [(2, 3, 1), (4, 4, 1), (5, 6, 2)]
    assert bases(store) == [0, 7]
    assert store.log_end_offset(T, 0) == 7
    assert checkpoint(store) == 7


def test_keys_only_in_the_clean_section_keep_their_value(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, min_cleanable_dirty_ratio=0.01)
    put(store, T, (b"x", b"x1"))
    put(store, T, (b"y", b"y1"))
    put(store, T, (b"x", b"x2"))
    store.roll(T, 0)
    assert manager_of(store).clean(clock.now).end_offset == 3
    assert state(store) == [(1, b"y", b"y1"), (2, b"x", b"x2")]
    put(store, T, (b"z", b"z1"))
    put(store, T, (b"x", b"x3"))
    store.roll(T, 0)
    second = manager_of(store).clean(clock.now)
    assert (second.first_dirty_offset, second.end_offset) == (3, 5)
    # y never occurs in the dirty range [3, 5): its clean-section value stays.
    assert state(store) == [(1, b"y", b"y1"), (3, b"z", b"z1"), (4, b"x", b"x3")]
    assert shape(store) == [(1, 1, 1), (3, 3, 1), (4, 4, 1)]


def test_records_are_never_reordered_and_batches_never_merged_or_split(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    rng = random.Random(5)
    originals: list[tuple[int, int]] = []
    latest: dict[bytes, int] = {}
    for i in range(40):
        records = [(b"k%d" % rng.randrange(12), b"v%d" % i) for _ in range(rng.randrange(1, 6))]
        base = put(store, T, *records)
        originals.append((base, base + len(records) - 1))
        for j, (key, _) in enumerate(records):
            latest[key] = base + j
    store.roll(T, 0)
    manager_of(store).clean(clock.now)
    offsets = [offset for offset, _, _ in state(store)]
    assert offsets == sorted(latest.values())
    # Every surviving batch is one original batch with its first and last offset.
    survivors = [(b.base_offset, b.last_offset) for b in batches(store)]
    assert set(survivors) <= set(originals)
    assert survivors == sorted(survivors)
    for batch in batches(store):
        assert all(batch.base_offset <= r.offset <= batch.last_offset for r in batch.records())


def test_surviving_batches_keep_offsets_sequences_producer_fields_codec_and_timestamps(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    now = clock.now
    first = build_batch(
        [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")],
        timestamps=[now - 40, now - 30, now - 20, now - 10],
        compression=Compression.GZIP,
        producer_id=1234,
        producer_epoch=5,
        base_sequence=100,
    )
    second = build_batch(
        [(b"a", b"2"), (b"d", b"2")],
        timestamps=[now - 5, now - 4],
        compression=Compression.LZ4,
        producer_id=1234,
        producer_epoch=5,
        base_sequence=104,
    )
    put_raw(store, T, first)  # 0-3
    put_raw(store, T, second)  # 4-5
    store.roll(T, 0)
    before = batches(store)
    manager_of(store).clean(now)
    after = batches(store)
    assert [(b.base_offset, b.last_offset) for b in after] == [(0, 3), (4, 5)]
    rebuilt, verbatim = after
    original = before[0]
    # b and c survive in the middle of the first batch: it is rebuilt, header kept.
    assert [(r.offset, r.key, r.timestamp) for r in rebuilt.records()] == [
        (1, b"b", now - 30),
        (2, b"c", now - 20),
    ]
    assert rebuilt.records_count == 2
    for field in (
        "base_offset",
        "last_offset",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "last_sequence",
        "compression",
        "timestamp_type",
        "partition_leader_epoch",
        "is_transactional",
        "is_control",
    ):
        assert getattr(rebuilt, field) == getattr(original, field), field
    assert (rebuilt.base_sequence, rebuilt.last_sequence) == (100, 103)
    assert rebuilt.compression == Compression.GZIP
    assert rebuilt.max_timestamp == now - 20  # the max of the kept records (CreateTime)
    assert rebuilt.base_timestamp == now - 30
    assert not rebuilt.has_delete_horizon
    assert rebuilt.raw != original.raw
    # Every record of the second batch survives: copied verbatim, same CRC.
    assert verbatim.raw == before[1].raw
    assert verbatim.compression == Compression.LZ4


def test_a_batch_whose_records_all_survive_is_copied_byte_for_byte(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """A gzip batch at level 1 would come out different if it were re-compressed."""
    store = new_store(open_store)
    records = [(b"k%d" % i, b"value-%d" % i * 8) for i in range(10)]
    fast = build_batch(
        records, timestamps=clock.now, compression=Compression.GZIP, compression_level=1
    )
    rebuilt_alike = build_batch(records, timestamps=clock.now, compression=Compression.GZIP)
    assert fast[61:] != rebuilt_alike[61:]  # the level shows in the compressed bytes
    put_raw(store, T, fast)
    put(store, T, (b"other", b"x"))
    store.roll(T, 0)
    before = [b.raw for b in batches(store)]
    manager_of(store).clean(clock.now)
    after = batches(store)
    assert [b.raw for b in after] == before
    assert [b.crc for b in after] == [RecordBatch(raw).crc for raw in before]


def test_a_rebuilt_batch_is_recompressed_with_its_own_codec_at_the_default_level(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Not with the topic's compression.type (zstd here), not at the producer's level (1)."""
    store = new_store(open_store)
    now = clock.now
    records = [(b"k%d" % i, b"value-%d" % i * 8) for i in range(6)]
    put_raw(
        store,
        T,
        build_batch(records, timestamps=now, compression=Compression.GZIP, compression_level=1),
    )
    put(store, T, (b"k5", b"newer"))  # supersedes the batch's last record
    store.roll(T, 0)
    store.alter_config(T, {"compression.type": "zstd"})
    manager_of(store).clean(now)
    rebuilt = batches(store)[0]
    expected = build_batch(
        records[:5],
        timestamps=now,
        compression=Compression.GZIP,
        offset_deltas=[0, 1, 2, 3, 4],
        last_offset_delta=5,
        partition_leader_epoch=0,  # what the store's append stamped
    )
    assert rebuilt.raw == expected
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.records_count) == (0, 5, 5)


# --- keyless records (spec 5.4, 5.13, 9.12) ----------------------------------------------------


def test_keyless_records_in_the_map_range_are_dropped_and_counted(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, policy="delete")
    put(store, T, (b"a", b"1"), (None, b"x"), (b"b", b"1"))  # 0-2
    put(store, T, (None, b"y"))  # 3
    put(store, T, (b"a", b"2"))  # 4
    store.alter_config(T, {"cleanup.policy": "compact"})
    store.roll(T, 0)
    result = manager_of(store).clean(clock.now)
    assert result.cleaned == (T, 0)
    assert result.uncleanable == {}
    assert result.stats.invalid_messages == 2
    assert result.end_offset == 5
    assert state(store) == [(2, b"b", b"1"), (4, b"a", b"2")]
    assert shape(store) == [(0, 2, 1), (4, 4, 1)]
    assert checkpoint(store) == 5


def test_keyless_records_that_bypassed_the_key_check_are_dropped_too(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Records that reached a compacted log without key validation (as replicated data does)."""
    store = new_store(open_store)
    raw = build_batch([(None, b"x"), (b"k", b"1"), (None, b"y")], timestamps=clock.now)
    store.log(T, 0).append(raw, from_client=False, verify_crc=False, keys_checked=True)
    put(store, T, (b"j", b"1"))
    store.roll(T, 0)
    result = manager_of(store).clean(clock.now)
    assert result.stats.invalid_messages == 2
    assert result.uncleanable == {}
    assert state(store) == [(1, b"k", b"1"), (3, b"j", b"1")]
    assert shape(store) == [(0, 2, 1), (3, 3, 1)]


# --- tombstones and the delete horizon (spec 2.3, 5.4, 5.5, 9.1) --------------------------------


def test_a_tombstone_with_a_later_record_of_its_key_goes_at_once(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, delete_retention_ms=DAY)
    put(store, T, (b"k", b"1"))
    put(store, T, (b"k", None))
    put(store, T, (b"k", b"2"))
    put(store, T, (b"j", None))
    put(store, T, (b"j", None))  # a tombstone superseded by a tombstone
    store.roll(T, 0)
    now = clock.now
    manager_of(store).clean(now)
    assert state(store) == [(2, b"k", b"2"), (4, b"j", None)]
    assert shape(store) == [(2, 2, 1), (4, 4, 1)]
    # The surviving k needs no horizon; the surviving j tombstone gets one.
    assert [b.delete_horizon_ms for b in batches(store)] == [None, now + DAY]


def test_the_latest_tombstone_is_kept_and_its_batch_stamped_with_the_horizon(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, delete_retention_ms=MINUTE)
    t_write = clock.now
    put(store, T, (b"k", b"1"), ts=t_write - 100)
    put(store, T, (b"k", None), (b"j", b"1"), ts=t_write - 50)
    store.roll(T, 0)
    before = batches(store)[1]
    now = clock.advance(1000)
    manager_of(store).clean(now)
    (stamped,) = batches(store)
    assert stamped.delete_horizon_ms == now + MINUTE
    assert stamped.has_delete_horizon
    assert stamped.attributes & 0x40
    assert stamped.base_timestamp == now + MINUTE
    assert stamped.max_timestamp == t_write - 50  # unaffected by the horizon
    assert (stamped.base_offset, stamped.last_offset, stamped.records_count) == (1, 2, 2)
    # The record timestamps are the original ones (deltas now relative to the horizon).
    assert [(r.offset, r.key, r.value, r.timestamp) for r in stamped.records()] == [
        (1, b"k", None, t_write - 50),
        (2, b"j", b"1", t_write - 50),
    ]
    assert stamped.raw != before.raw
    assert stamped.compression == before.compression


def test_a_tombstone_is_removed_by_the_first_later_cleaning_at_or_after_its_horizon(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, delete_retention_ms=MINUTE, min_cleanable_dirty_ratio=0.01)
    put(store, T, (b"k", b"1"))
    put(store, T, (b"k", None))
    store.roll(T, 0)
    t0 = clock.now
    manager_of(store).clean(t0)
    horizon = t0 + MINUTE
    assert state(store) == [(1, b"k", None)]
    # One millisecond before the horizon: kept, the horizon unchanged.
    put(store, T, (b"a", b"1"))
    store.roll(T, 0)
    assert manager_of(store).clean(horizon - 1).cleaned == (T, 0)
    assert state(store) == [(1, b"k", None), (2, b"a", b"1")]
    assert batches(store)[0].delete_horizon_ms == horizon
    # At the horizon exactly: removed.
    put(store, T, (b"b", b"1"))
    store.roll(T, 0)
    assert manager_of(store).clean(horizon).cleaned == (T, 0)
    assert state(store) == [(2, b"a", b"1"), (3, b"b", b"1")]
    assert shape(store) == [(2, 2, 1), (3, 3, 1)]


def test_delete_retention_zero_still_takes_two_passes(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, delete_retention_ms=0, min_cleanable_dirty_ratio=0.01)
    put(store, T, (b"k", b"1"))
    put(store, T, (b"k", None))
    store.roll(T, 0)
    now = clock.now
    manager_of(store).clean(now)
    assert state(store) == [(1, b"k", None)]
    assert batches(store)[0].delete_horizon_ms == now
    put(store, T, (b"a", b"1"))
    store.roll(T, 0)
    manager_of(store).clean(now)  # the same instant: now >= horizon
    assert state(store) == [(2, b"a", b"1")]


def test_an_expired_tombstone_stays_until_the_log_is_dirty_again(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Spec 9.2: the horizon does not make a log eligible; only new dirt does."""
    store = new_store(open_store, delete_retention_ms=0, min_cleanable_dirty_ratio=0.01)
    put(store, T, (b"k", b"1"))
    put(store, T, (b"k", None))
    store.roll(T, 0)
    now = clock.now
    manager_of(store).clean(now)
    for later in (now + 1, now + 100 * DAY):
        assert manager_of(store).clean(later).cleaned is None
        assert state(store) == [(1, b"k", None)]
    put(store, T, (b"a", b"1"))
    store.roll(T, 0)
    assert manager_of(store).clean(now + 100 * DAY).cleaned == (T, 0)
    assert state(store) == [(2, b"a", b"1")]


def test_the_horizon_survives_a_later_rewrite_of_its_batch(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, delete_retention_ms=MINUTE, min_cleanable_dirty_ratio=0.01)
    put(store, T, (b"a", None), (b"b", b"1"), (b"c", b"1"))  # 0-2
    store.roll(T, 0)
    t0 = clock.now
    manager_of(store).clean(t0)
    stamped = batches(store)[0]
    assert stamped.delete_horizon_ms == t0 + MINUTE
    # A second cleaning before the horizon that keeps the whole batch: copied verbatim.
    put(store, T, (b"d", b"1"))
    store.roll(T, 0)
    manager_of(store).clean(t0 + 1000)
    assert batches(store)[0].raw == stamped.raw
    # A third one drops b: the batch is rebuilt and keeps the first horizon, not now + 60 s.
    put(store, T, (b"b", b"2"))
    store.roll(T, 0)
    manager_of(store).clean(t0 + 2000)
    rewritten = batches(store)[0]
    assert [(r.offset, r.key, r.value) for r in rewritten.records()] == [
        (0, b"a", None),
        (2, b"c", b"1"),
    ]
    assert (rewritten.base_offset, rewritten.last_offset) == (0, 2)
    assert rewritten.delete_horizon_ms == t0 + MINUTE
    assert rewritten.raw != stamped.raw
    # Past the horizon the tombstone goes; c is kept and the batch keeps its (old) horizon.
    put(store, T, (b"e", b"1"))
    store.roll(T, 0)
    manager_of(store).clean(t0 + MINUTE)
    expired = batches(store)[0]
    assert [(r.offset, r.key) for r in expired.records()] == [(2, b"c")]
    assert (expired.base_offset, expired.last_offset) == (0, 2)
    assert expired.delete_horizon_ms == t0 + MINUTE


@pytest.mark.parametrize("tombstone_age", [0, 30 * DAY])
def test_the_tombstone_timestamp_plays_no_part(
    open_store: StoreFactory, clock: ManualClock, tombstone_age: int
) -> None:
    """An old tombstone (written 30 days before, retention one day) is kept like a new one."""
    store = new_store(open_store, delete_retention_ms=DAY, min_cleanable_dirty_ratio=0.01)
    now = clock.now
    put(store, T, (b"k", b"1"), ts=now - tombstone_age - 1)
    put(store, T, (b"k", None), ts=now - tombstone_age)
    store.roll(T, 0)
    manager_of(store).clean(now)
    assert state(store) == [(1, b"k", None)]
    assert batches(store)[0].delete_horizon_ms == now + DAY
    put(store, T, (b"a", b"1"))
    store.roll(T, 0)
    manager_of(store).clean(now + DAY - 1)
    assert state(store) == [(1, b"k", None), (2, b"a", b"1")]
    put(store, T, (b"b", b"1"))
    store.roll(T, 0)
    manager_of(store).clean(now + DAY)
    assert state(store) == [(2, b"a", b"1"), (3, b"b", b"1")]


def test_a_commit_marker_outlives_its_transaction_by_two_cleanings(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Spec 5.6/5.7: kept while a batch of its transaction is seen; then stamped with a
    horizon by the pass that finds none; removed by a pass at or after the horizon."""
    store = new_store(open_store, delete_retention_ms=MINUTE, min_cleanable_dirty_ratio=0.01)
    t0 = clock.now
    # Written a day ago, so producer 5 has expired (producer.id.expiration.ms) and its last batch
    # is not kept for it (spec 5.6); as the log's own append: clients cannot write transactions.
    txn = build_batch(
        [(b"k", b"1")],
        timestamps=t0 - DAY,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    store.append_batch(T, 0, txn, from_client=False)  # 0
    marker = build_end_txn_marker_batch(
        commit=True, producer_id=5, producer_epoch=0, coordinator_epoch=0, timestamp=t0 - DAY
    )
    store.append_batch(T, 0, marker, from_client=False)  # 1
    put(store, T, (b"k", b"2"))  # 2
    put(store, T, (b"z", b"1"))  # 3
    store.roll(T, 0)

    def control() -> list[RecordBatch]:
        return [b for b in batches(store) if b.is_control]

    manager_of(store).clean(t0)
    assert state(store) == [(2, b"k", b"2"), (3, b"z", b"1")]
    (kept,) = control()
    assert (kept.base_offset, kept.records_count, kept.delete_horizon_ms) == (1, 1, None)
    put(store, T, (b"y", b"1"))
    store.roll(T, 0)
    t1 = t0 + 1000
    manager_of(store).clean(t1)
    (stamped,) = control()
    assert (stamped.base_offset, stamped.records_count) == (1, 1)
    assert stamped.delete_horizon_ms == t1 + MINUTE
    assert stamped.is_transactional and stamped.producer_id == 5
    put(store, T, (b"w", b"1"))
    store.roll(T, 0)
    manager_of(store).clean(t1 + MINUTE - 1)
    assert [b.delete_horizon_ms for b in control()] == [t1 + MINUTE]
    put(store, T, (b"v", b"1"))
    store.roll(T, 0)
    manager_of(store).clean(t1 + MINUTE)
    assert control() == []
    assert shape(store) == [(2, 2, 1), (3, 3, 1), (4, 4, 1), (5, 5, 1), (6, 6, 1)]


# --- compression codecs (spec 5.4, 9.9) ------------------------------------------------------


def write_codec_scenario(store: Store, topic: str, codec: str, now: int) -> None:
    put(store, topic, (b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"e", b"1"), ts=now, codec=codec)
    put(store, topic, (b"a", b"2"), (b"c", None), ts=now + 1, codec=codec)  # 4-5
    put(store, topic, (b"b", b"2"), (b"d", b"1"), ts=now + 2, codec=codec)  # 6-7
    store.roll(topic, 0)


def outcome(store: Store, topic: str) -> list[Any]:
    """Everything about the cleaned log except the codec and the bytes."""
    return [
        (
            b.base_offset,
            b.last_offset,
            b.records_count,
            b.delete_horizon_ms,
            b.max_timestamp,
            b.base_sequence,
            b.producer_id,
            [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b.records()],
        )
        for b in batches(store, topic)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_a_rebuilt_batch_keeps_its_codec(
    open_store: StoreFactory, clock: ManualClock, codec: str
) -> None:
    store = new_store(open_store, delete_retention_ms=MINUTE)
    now = clock.now
    write_codec_scenario(store, T, codec, now)
    before = batches(store)
    manager_of(store).clean(now)
    after = batches(store)
    expected = Compression.from_name(codec)
    assert [b.compression for b in before] == [expected] * 3
    assert [b.compression for b in after] == [expected] * 3
    assert [(b.base_offset, b.last_offset, b.records_count) for b in after] == [
        (0, 3, 1),
        (4, 5, 2),
        (6, 7, 2),
    ]
    assert [b.delete_horizon_ms for b in after] == [None, now + MINUTE, None]
    assert after[2].raw == before[2].raw  # untouched: verbatim
    assert state(store) == [
        (3, b"e", b"1"),
        (4, b"a", b"2"),
        (5, b"c", None),
        (6, b"b", b"2"),
        (7, b"d", b"1"),
    ]


def test_the_result_is_the_same_for_every_codec(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    now = clock.now
    for codec in CODECS:
        create(store, codec, delete_retention_ms=MINUTE)
        write_codec_scenario(store, codec, codec, now)
    results = []
    for _ in CODECS:
        result = manager_of(store).clean(now)
        assert result.cleaned is not None
        results.append(result)
    assert {r.cleaned[0] for r in results} == set(CODECS)
    assert {(r.end_offset, r.stats.messages_read, r.stats.messages_written) for r in results} == {
        (8, 8, 5)
    }
    reference = outcome(store, "none")
    for codec in CODECS[1:]:
        assert outcome(store, codec) == reference, codec
        assert state(store, codec) == state(store, "none")
        assert bases(store, codec) == bases(store, "none") == [0, 8]


# --- empty batches and empty segments (spec 5.4, 5.8, 9.7, 9.8) -------------------------------


def test_the_emptied_batch_ending_at_the_first_uncleanable_offset_stays_as_a_header(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, policy="delete")
    now = clock.now
    put(store, T, (b"a", b"1"), ts=now - 30)  # 0
    put(store, T, (None, b"z"), ts=now - 20)  # 1: emptied, not last: disappears
    put(store, T, (b"b", b"1"), ts=now - 15)  # 2
    put_raw(store, T, build_batch([(None, b"x"), (None, b"y")], timestamps=[now - 10, now - 12]))
    store.alter_config(T, {"cleanup.policy": "compact"})
    store.roll(T, 0)
    result = manager_of(store).clean(now)
    assert result.end_offset == 5
    assert result.stats.invalid_messages == 3
    assert state(store) == [(0, b"a", b"1"), (2, b"b", b"1")]
    assert shape(store) == [(0, 0, 1), (2, 2, 1), (3, 4, 0)]
    header = batches(store)[-1]
    assert header.size_in_bytes == len(header.raw) == 61
    assert header.max_timestamp == now - 10
    assert header.base_timestamp == NO_TIMESTAMP
    assert not header.has_delete_horizon
    assert header.compression == Compression.NONE
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        NO_SEQUENCE,
    )
    assert header.is_valid()
    assert store.log_end_offset(T, 0) == 5
    # The next cleaning, whose first uncleanable offset is further on, drops the header.
    store.alter_config(T, {"min.cleanable.dirty.ratio": 0.01})
    put(store, T, (b"c", b"1"))
    store.roll(T, 0)
    manager_of(store).clean(now)
    assert shape(store) == [(0, 0, 1), (2, 2, 1), (5, 5, 1)]


def test_a_tombstone_batch_emptied_at_the_first_uncleanable_offset_loses_its_horizon(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, delete_retention_ms=MINUTE, min_cleanable_dirty_ratio=0.01)
    t0 = clock.now
    put(store, T, (b"k", b"1"), ts=t0 - 2)
    put(store, T, (b"k", None), (b"j", None), ts=t0 - 1)  # 1-2
    store.roll(T, 0)
    manager_of(store).clean(t0)
    assert batches(store)[0].delete_horizon_ms == t0 + MINUTE
    # Clean the whole log again (a checkpoint of 0) after the horizon: both tombstones go and
    # their batch, which ends right at the first uncleanable offset 3, stays as a header.
    set_checkpoint(store, 0)
    result = manager_of(store).clean_log(T, 0, t0 + MINUTE)
    assert (result.first_dirty_offset, result.end_offset) == (0, 3)
    assert state(store) == []
    (header,) = batches(store)
    assert (header.base_offset, header.last_offset, header.records_count) == (1, 2, 0)
    assert len(header.raw) == 61
    assert header.delete_horizon_ms is None
    assert header.base_timestamp == NO_TIMESTAMP
    assert header.max_timestamp == t0 - 1


def test_segments_emptied_by_cleaning_stay_until_a_later_cleaning_merges_them(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, min_cleanable_dirty_ratio=0.01)
    for value in (b"1", b"2", b"3"):
        put(store, T, (b"k", value))
        store.roll(T, 0)
    one = sizes(store)[0]
    # Two source segments never fit one group: every segment is cleaned on its own.
    store.alter_config(T, {"segment.bytes": one + one // 2})
    manager_of(store).clean(clock.now)
    assert bases(store) == [0, 1, 2, 3]
    assert sizes(store)[:3] == [0, 0, one]
    assert [os.path.getsize(s.log_path) for s in store.log(T, 0).segments()[:2]] == [0, 0]
    assert state(store) == [(2, b"k", b"3")]
    put(store, T, (b"j", b"1"))
    store.roll(T, 0)
    manager_of(store).clean(clock.now)
    # The empty segments skip every limit and join the next group.
    assert bases(store) == [0, 3, 4]
    assert sizes(store)[:2] == [one, one]
    assert state(store) == [(2, b"k", b"3"), (3, b"j", b"1")]


# --- a full offset map (spec 5.1, 5.2, 9.5) ----------------------------------------------------


def write_full_map_scenario(store: Store, topic: str = T) -> None:
    put(store, topic, *keys("k0", "k1", "k2", "k0"))  # 0-3
    put(store, topic, *keys("k3", "k4", "k5", "k6"))  # 4-7
    put(store, topic, *keys("k7", "k8", "k1", "k9"))  # 8-11: the map fills before offset 10
    put(store, topic, *keys("k2", "k3"))  # 12-13
    store.roll(topic, 0)


FULL_MAP_FINAL: list[Row] = [
    (3, b"k0", b"v"),
    (5, b"k4", b"v"),
    (6, b"k5", b"v"),
    (7, b"k6", b"v"),
    (8, b"k7", b"v"),
    (9, b"k8", b"v"),
    (10, b"k1", b"v"),
    (11, b"k9", b"v"),
    (12, b"k2", b"v"),
    (13, b"k3", b"v"),
]


@pytest.mark.parametrize("kind", ["skimpy", "compact"])
def test_a_full_map_stops_at_the_exact_record_and_the_next_round_resumes_there(
    open_store: StoreFactory, clock: ManualClock, kind: str
) -> None:
    store = new_store(open_store, min_cleanable_dirty_ratio=0.49)
    write_full_map_scenario(store)
    log = store.log(T, 0)
    cleaner = tiny_cleaner(clock, slots=11, kind=kind)
    assert cleaner.offset_map.max_desired_size == 9  # floor(11 * 0.9)
    end, stats = cleaner.clean(log, 0, 14, clock.now)
    # Puts at offsets 0..9 (k0 twice) reach 9 keys; the check before offset 10 stops the map.
    assert cleaner.offset_map.size == 9
    assert cleaner.offset_map.latest_offset == 9
    assert end == 10
    assert stats.buffer_utilization == 9 / 11
    # Only what the map covers is deduplicated: k1@1 stays although k1@10 exists.
    assert [o for o, _, _ in state(store)] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    assert shape(store) == [(0, 3, 3), (4, 7, 4), (8, 11, 4), (12, 13, 2)]
    # The store's next round starts at the checkpoint, in the middle of segment 0, which then
    # counts as clean and as cleanable: ratio 0.5, not above a minimum of 0.5.
    set_checkpoint(store, end)
    store.alter_config(T, {"min.cleanable.dirty.ratio": 0.5})
    assert manager_of(store).clean(clock.now).cleaned is None
    store.alter_config(T, {"min.cleanable.dirty.ratio": 0.49})
    result = manager_of(store).clean(clock.now)
    assert result.cleaned == (T, 0)
    assert (result.first_dirty_offset, result.end_offset) == (10, 14)
    assert state(store) == FULL_MAP_FINAL
    assert shape(store) == [(0, 3, 1), (4, 7, 3), (8, 11, 4), (12, 13, 2)]
    assert checkpoint(store) == 14


def test_partial_rounds_end_where_one_big_round_ends(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    create(store, "big")
    write_full_map_scenario(store)
    store.alter_config(T, {"min.cleanable.dirty.ratio": 1.0})  # only "big" is selected
    write_full_map_scenario(store, "big")
    assert manager_of(store).clean(clock.now).cleaned == ("big", 0)
    ends = clean_to_the_end(tiny_cleaner(clock), store, T, 0, 14, clock.now)
    assert ends == [10, 14]
    assert state(store) == state(store, "big") == FULL_MAP_FINAL
    assert [b.raw for b in batches(store)] == [b.raw for b in batches(store, "big")]


@pytest.mark.parametrize("kind", ["skimpy", "compact"])
def test_many_partial_rounds_over_many_segments_equal_one_big_round(
    open_store: StoreFactory, clock: ManualClock, kind: str
) -> None:
    store = open_store(config=BROKER)
    create(store, "small", delete_retention_ms=MINUTE, min_cleanable_dirty_ratio=1.0)
    create(store, "big", delete_retention_ms=MINUTE)
    rng = random.Random(11)
    for segment in range(5):
        for _ in range(12):
            records = [
                (b"key-%02d" % rng.randrange(40), b"v%d" % rng.randrange(1000))
                for _ in range(rng.randrange(1, 7))
            ]
            for topic in ("small", "big"):
                put(store, topic, *records, ts=clock.now + segment)
        for topic in ("small", "big"):
            store.roll(topic, 0)
    fuo = store.log_end_offset("small", 0)
    assert manager_of(store).clean(clock.now).cleaned == ("big", 0)
    ends = clean_to_the_end(tiny_cleaner(clock, kind=kind), store, "small", 0, fuo, clock.now)
    assert len(ends) >= 4 and ends[-1] == fuo
    assert state(store, "small") == state(store, "big")
    assert [b.raw for b in batches(store, "small")] == [b.raw for b in batches(store, "big")]


def test_a_full_map_stops_even_for_a_key_it_already_holds(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    put(store, T, *keys(*[f"k{i}" for i in range(9)], "k0"))  # 0-9
    put(store, T, *keys("k9"))  # 10
    store.roll(T, 0)
    cleaner = tiny_cleaner(clock)
    end, _ = cleaner.clean(store.log(T, 0), 0, 11, clock.now)
    assert end == 9  # stopped before re-putting k0 at 9
    assert cleaner.offset_map.get(b"k0") == 0
    assert [o for o, _, _ in state(store)] == list(range(11))


def test_a_map_filled_by_the_last_key_of_a_batch_ends_after_the_batch(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """The map is full after k8, but the batch ends with two keyless records: the batch is
    processed to its end, so the round covers up to its last offset (10)."""
    store = new_store(open_store, policy="delete")
    put(store, T, *keys(*[f"k{i}" for i in range(9)]), (None, b"x"), (None, b"y"))  # 0-10
    put(store, T, *keys("k9"))  # 11
    put(store, T, *keys("k0"))  # 12
    store.alter_config(T, {"cleanup.policy": "compact"})
    store.roll(T, 0)
    cleaner = tiny_cleaner(clock)
    end, stats = cleaner.clean(store.log(T, 0), 0, 13, clock.now)
    assert cleaner.offset_map.size == 9
    assert end == 11
    assert stats.invalid_messages == 2  # both keyless records are within the map's range
    assert [o for o, _, _ in state(store)] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12]
    end, _ = cleaner.clean(store.log(T, 0), end, 13, clock.now)
    assert end == 13
    assert [o for o, _, _ in state(store)] == [1, 2, 3, 4, 5, 6, 7, 8, 11, 12]


def test_keyless_records_beyond_a_full_map_are_kept_until_a_round_covers_them(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, policy="delete")
    put(store, T, *keys(*[f"k{i}" for i in range(10)]), (None, b"x"))  # 0-10
    store.alter_config(T, {"cleanup.policy": "compact"})
    store.roll(T, 0)
    cleaner = tiny_cleaner(clock)
    end, stats = cleaner.clean(store.log(T, 0), 0, 11, clock.now)
    assert end == 9
    assert stats.invalid_messages == 0
    assert state(store)[-1] == (10, None, b"x")
    end, stats = cleaner.clean(store.log(T, 0), end, 11, clock.now)
    assert end == 11
    assert stats.invalid_messages == 1
    assert [o for o, _, _ in state(store)] == list(range(10))


# --- grouping (spec 5.3) ------------------------------------------------------------------


def one_batch_segments(store: Store, count: int, per_segment: int = 1, ts_step: int = 0) -> None:
    n = 0
    for _ in range(count):
        for _ in range(per_segment):
            put(store, T, (b"key-%03d" % n, b"value"), ts=1_700_000_000_000 + n * ts_step)
            n += 1
        store.roll(T, 0)


def test_groups_fill_segment_bytes_exactly(open_store: StoreFactory, clock: ManualClock) -> None:
    store = new_store(open_store)
    one_batch_segments(store, 5)
    one = sizes(store)[0]
    assert sizes(store)[:5] == [one] * 5
    store.alter_config(T, {"segment.bytes": 2 * one})
    manager_of(store).clean(clock.now)
    assert bases(store) == [0, 2, 4, 5]
    assert sizes(store) == [2 * one, 2 * one, one, 0]
    assert [o for o, _, _ in state(store)] == [0, 1, 2, 3, 4]


def test_a_segment_larger_than_segment_bytes_forms_its_own_group(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    put(store, T, (b"key-000", b"value"))
    store.roll(T, 0)
    for i in range(1, 4):
        put(store, T, (b"key-%03d" % i, b"value"))
    store.roll(T, 0)
    put(store, T, (b"key-004", b"value"))
    store.roll(T, 0)
    one = sizes(store)[0]
    assert sizes(store) == [one, 3 * one, one, 0]
    store.alter_config(T, {"segment.bytes": 2 * one})
    result = manager_of(store).clean(clock.now)
    assert result.uncleanable == {}
    assert result.stats.groups == 3
    assert bases(store) == [0, 1, 4, 5]
    assert sizes(store) == [one, 3 * one, one, 0]


@pytest.mark.parametrize(
    ("ts_step", "index_bytes", "expected_bases"),
    [
        # Equal timestamps: 3 offset-index entries (24 bytes), 1 time-index entry (12 bytes).
        (0, 40, [0, 4, 8, 12]),
        (0, 48, [0, 8, 12]),
        # Rising timestamps, 3 appends: 2 offset entries (16 bytes), 2 time entries (24 bytes).
        (1, 40, [0, 3, 6, 9]),
        # Two such segments fit a group by their index sizes (2 x 24 bytes), but the group's
        # cleaned segment indexes every batch but its first: 5 time entries, 60 bytes > 48.
        # Kafka 4.4 fails the round ("full time index") and marks the partition uncleanable,
        # as the kafka tier's differential shows; so does compactlog, changing nothing.
        (1, 48, None),
    ],
)
def test_groups_respect_segment_index_bytes_by_entries(
    open_store: StoreFactory,
    clock: ManualClock,
    ts_step: int,
    index_bytes: int,
    expected_bases: list[int] | None,
) -> None:
    store = new_store(open_store, index_interval_bytes=0, segment_index_bytes=index_bytes)
    per_segment = 4 if ts_step == 0 else 3
    one_batch_segments(store, 3, per_segment=per_segment, ts_step=ts_step)
    log = store.log(T, 0)
    sealed = log.segments()[:3]
    if ts_step == 0:
        assert [(s.offset_index.entries(), s.time_index.entries()) for s in sealed] == [(3, 1)] * 3
    else:
        assert [(s.offset_index.entries(), s.time_index.entries()) for s in sealed] == [(2, 2)] * 3
    before = bases(store)
    result = manager_of(store).clean(clock.now)
    if expected_bases is None:
        assert "full time index" in result.uncleanable[(T, 0)]
        assert bases(store) == before
        assert not [n for n in os.listdir(log.dir) if n.endswith(".cleaned")]
        return
    assert result.uncleanable == {}
    assert bases(store) == expected_bases
    assert [o for o, _, _ in state(store)] == list(range(3 * per_segment))


@pytest.mark.parametrize(
    ("third_base", "expected_groups"),
    [
        # The group [0, 100, third] ends at FUO - 1 = third: 2^31 - 1 above 0 still fits.
        (2**31 - 1, [[0, 100, 2**31 - 1]]),
        # One more and the third segment goes to a group of its own.
        (2**31, [[0, 100], [2**31]]),
    ],
)
def test_groups_respect_the_32_bit_offset_range_of_a_segment(
    open_store: StoreFactory,
    clock: ManualClock,
    tmp_path: Path,
    third_base: int,
    expected_groups: list[list[int]],
) -> None:
    """Segments written at far-apart offsets (as a replica would have them), then cleaned."""
    store = new_store(open_store)
    store.close()
    directory = tmp_path / "data" / "t-0"
    for name in os.listdir(directory):
        if name[0].isdigit():
            os.remove(directory / name)
    for base in (0, 100, third_base):
        batch = build_batch(
            [(b"k", b"%d" % base)], base_offset=base, timestamps=clock.now, partition_leader_epoch=0
        )
        (directory / f"{base:020d}.log").write_bytes(batch)
    (directory / f"{third_base + 1:020d}.log").write_bytes(b"")  # the empty active segment
    store = open_store(config=BROKER)
    assert bases(store) == [0, 100, third_base, third_base + 1]
    groups = group_segments_by_size(store.log(T, 0).segments()[:3], 2**30, 2**20, third_base + 1)
    assert [[s.base_offset for s in g] for g in groups] == expected_groups
    result = manager_of(store).clean(clock.now)
    assert result.uncleanable == {}
    assert result.stats.groups == len(expected_groups)
    assert bases(store) == [g[0] for g in expected_groups] + [third_base + 1]
    assert state(store) == [(third_base, b"k", b"%d" % third_base)]
    assert checkpoint(store) == third_base + 1


class FakeIndex:
    def __init__(self, entries: int) -> None:
        self._entries = entries

    def entries(self) -> int:
        return self._entries


def fake(base: int, size: int, offset_entries: int = 0, time_entries: int = 0) -> Any:
    return SimpleNamespace(
        base_offset=base,
        size=size,
        offset_index=FakeIndex(offset_entries),
        time_index=FakeIndex(time_entries),
    )


def grouped(segments: Sequence[Any], *args: int) -> list[list[int]]:
    return [[s.base_offset for s in g] for g in group_segments_by_size(segments, *args)]


def test_group_segments_by_size_log_bytes() -> None:
    segs = [fake(0, 10), fake(1, 10), fake(2, 10), fake(3, 25), fake(4, 1)]
    assert grouped(segs, 20, 1000, 5) == [[0, 1], [2], [3], [4]]
    assert grouped(segs, 21, 1000, 5) == [[0, 1], [2], [3], [4]]
    assert grouped(segs, 26, 1000, 5) == [[0, 1], [2], [3, 4]]
    assert grouped(segs, 30, 1000, 5) == [[0, 1, 2], [3, 4]]
    assert grouped([], 10, 10, 0) == []


def test_group_segments_by_size_index_bytes() -> None:
    segs = [fake(0, 1, 2, 0), fake(10, 1, 2, 0), fake(20, 1, 1, 0)]
    assert grouped(segs, 100, 32, 30) == [[0, 10], [20]]  # 16 + 16 = 32 fits, + 8 does not
    assert grouped(segs, 100, 31, 30) == [[0], [10, 20]]
    segs = [fake(0, 1, 0, 2), fake(10, 1, 0, 2), fake(20, 1, 0, 1)]
    assert grouped(segs, 100, 48, 30) == [[0, 10], [20]]  # 24 + 24 = 48 fits, + 12 does not
    assert grouped(segs, 100, 47, 30) == [[0], [10, 20]]


def test_group_segments_by_size_offset_range() -> None:
    max_rel = 2**31 - 1
    # Next base - 1 - first base must stay within 2^31 - 1.
    segs = [fake(0, 5), fake(10, 5), fake(max_rel + 1, 5)]
    assert grouped(segs, 1000, 1000, max_rel + 10) == [[0, 10], [max_rel + 1]]
    segs = [fake(0, 5), fake(10, 5), fake(max_rel + 2, 5)]
    assert grouped(segs, 1000, 1000, max_rel + 10) == [[0], [10, max_rel + 2]]
    # The last segment's estimated last offset is FUO - 1.
    segs = [fake(0, 5), fake(10, 5)]
    assert grouped(segs, 1000, 1000, max_rel + 1) == [[0, 10]]
    assert grouped(segs, 1000, 1000, max_rel + 2) == [[0], [10]]
    # Empty segments skip the range test (runs of empty segments always merge).
    segs = [fake(0, 5), fake(10, 0), fake(max_rel + 50, 0)]
    assert grouped(segs, 1000, 1000, max_rel + 100) == [[0, 10, max_rel + 50]]


def test_group_segments_by_size_a_single_segment_may_break_every_limit() -> None:
    segs = [fake(0, 5), fake(1, 500, 100, 100), fake(3, 5)]
    assert grouped(segs, 10, 16, 10) == [[0], [1], [3]]
    assert grouped([fake(0, 2**31 + 5)], 10, 10, 2**40) == [[0]]


# --- what is rewritten, and the checkpoint (spec 5.3, 5.10, 9.3, 9.13) ------------------------


def test_every_segment_below_the_end_offset_is_rewritten_the_clean_ones_too(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, min_cleanable_dirty_ratio=0.01)
    put(store, T, (b"a", b"1"))
    put(store, T, (b"b", b"1"))
    store.roll(T, 0)
    manager_of(store).clean(clock.now)
    log = store.log(T, 0)
    clean_inode = inode(log.segments()[0].log_path)
    put(store, T, (b"a", b"2"))
    store.roll(T, 0)
    put(store, T, (b"a", b"3"))  # the active segment, never rewritten
    active_inode = inode(log.active_segment.log_path)
    result = manager_of(store).clean(clock.now)
    assert (result.first_dirty_offset, result.end_offset) == (2, 3)
    assert result.stats.segments_read == 2  # the clean segment 0 and the dirty segment 2
    assert bases(store) == [0, 3]
    assert inode(log.segments()[0].log_path) != clean_inode
    assert inode(log.active_segment.log_path) == active_inode
    assert state(store) == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"a", b"3")]
    assert checkpoint(store) == 3


def test_a_partial_round_rewrites_only_the_segments_below_its_end_offset(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    put(store, T, *keys("k0", "k1", "k2", "k3"))  # 0-3
    store.roll(T, 0)
    put(store, T, *keys("k4", "k5", "k6", "k0", "k7", "k8", "k9"))  # 4-10: full before 10
    store.roll(T, 0)
    put(store, T, *keys("k1", "k2"))  # 11-12
    store.roll(T, 0)
    log = store.log(T, 0)
    before = [inode(s.log_path) for s in log.segments()]
    end, stats = tiny_cleaner(clock).clean(log, 0, 13, clock.now)
    assert end == 10  # inside the second segment
    assert stats.segments_read == 2
    after = [inode(s.log_path) for s in log.segments()]
    assert bases(store) == [0, 11, 13]  # segments 0 and 4 were cleaned into one
    assert after[0] not in before
    assert after[1:] == before[2:]  # at or above the end offset: not rewritten
    assert [o for o, _, _ in state(store)] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]


def test_a_cleaned_segment_takes_the_mtime_of_the_last_segment_of_its_group(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    put(store, T, (b"a", b"1"))
    store.roll(T, 0)
    put(store, T, (b"a", b"2"))
    store.roll(T, 0)
    log = store.log(T, 0)
    first, second = log.segments()[:2]
    os.utime(first.log_path, ns=(1_500_000_000_000_000_000,) * 2)
    os.utime(second.log_path, ns=(1_600_000_000_000_000_000,) * 2)
    manager_of(store).clean(clock.now)
    (cleaned, _) = log.segments()
    assert cleaned.base_offset == 0
    for path in (cleaned.log_path, cleaned.offset_index.path, cleaned.time_index.path):
        assert os.stat(path).st_mtime_ns // 1_000_000 == 1_600_000_000_000


def test_only_the_batch_ending_at_the_high_watermark_stays_as_an_empty_batch(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Kafka 4.4 (KAFKA-17076 as 4.4 has it, checked by the kafka tier's differential): a batch
    whose records all go is kept as an empty header when it ends at the log's high watermark,
    not when it ends at the round's end (4.0's rule)."""
    store = new_store(open_store, policy="delete")
    put(store, T, (b"k", b"1"))  # 0
    put(store, T, (None, b"keyless"))  # 1: ends the round, not the log
    store.roll(T, 0)
    put(store, T, (b"k", b"2"))  # 2, in the active segment
    store.alter_config(T, {"cleanup.policy": "compact"})
    manager_of(store).clean_log(T, 0, clock.now)
    assert shape(store) == [(0, 0, 1), (2, 2, 1)]
    store.alter_config(T, {"cleanup.policy": "delete"})  # to take one more keyless record
    store.roll(T, 0)
    put(store, T, (None, b"keyless"))  # 3: ends the log once the active segment is empty
    store.roll(T, 0)
    store.alter_config(T, {"cleanup.policy": "compact"})
    manager_of(store).clean_log(T, 0, clock.now)
    assert shape(store) == [(2, 2, 1), (3, 3, 0)]


def test_the_cleaned_segment_is_indexed_batch_by_batch_by_last_offset(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Kafka 4.4 (``LogSegment.append``, checked against Kafka by the kafka tier): every batch of
    a cleaned chunk is indexed on its own, by the batch's last offset. The batch 1-2 loses its
    last record c@2 but keeps its last offset 2, so its entry is keyed 2 (Kafka 4.0 keyed a
    chunk's one entry by the largest kept record offset, 1)."""
    store = new_store(open_store, index_interval_bytes=0)
    put(store, T, (b"x", b"1"))  # 0
    store.roll(T, 0)
    put(store, T, (b"b", b"1"), (b"c", b"1"))  # 1-2
    store.roll(T, 0)
    put(store, T, (b"c", b"2"))  # 3
    store.roll(T, 0)
    manager_of(store).clean(clock.now)
    cleaned = store.log(T, 0).segments()[0]
    positions = [b.position for b in cleaned.batches()]
    assert shape(store) == [(0, 0, 1), (1, 2, 1), (3, 3, 1)]
    assert cleaned.offset_index.items() == [(2, positions[1]), (3, positions[2])]


def test_the_checkpoint_is_an_exclusive_bound(open_store: StoreFactory, clock: ManualClock) -> None:
    """After a round ending at 10, offset 10 is still dirty: its key k1 then removes k1@1."""
    store = new_store(open_store, min_cleanable_dirty_ratio=0.49)
    write_full_map_scenario(store)
    end, _ = tiny_cleaner(clock).clean(store.log(T, 0), 0, 14, clock.now)
    assert end == 10
    set_checkpoint(store, end)
    assert (1, b"k1", b"v") in state(store)
    manager_of(store).clean(clock.now)
    assert (1, b"k1", b"v") not in state(store)
    assert (10, b"k1", b"v") in state(store)


# --- selection through LogManager.clean (spec 4) --------------------------------------------------


def test_only_topics_with_compact_in_their_policy_are_cleaned(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    for topic, policy in (("d", "delete"), ("c", "compact"), ("cd", "compact,delete")):
        create(store, topic, policy)
        put(store, topic, (b"k", b"1"))
        put(store, topic, (b"k", b"2"))
        store.roll(topic, 0)
    cleaned = {manager_of(store).clean(clock.now).cleaned for _ in range(3)}
    assert cleaned == {("c", 0), ("cd", 0), None}
    assert state(store, "c") == state(store, "cd") == [(1, b"k", b"2")]
    assert state(store, "d") == [(0, b"k", b"1"), (1, b"k", b"2")]
    assert ("d", 0) not in store.cleaner_offset_checkpoint.read()


def half_dirty(store: Store, topic: str, now: int) -> None:
    """A log whose dirty ratio is exactly 0.5: one clean segment, one dirty one of equal size."""
    put(store, topic, (b"a", b"1"))
    store.roll(topic, 0)
    assert manager_of(store).clean_log(topic, 0, now).end_offset == 1
    put(store, topic, (b"a", b"2"))
    store.roll(topic, 0)
    first, second = sizes(store, topic)[:2]
    assert first == second


def test_the_filthiest_eligible_log_is_cleaned_first(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    create(store, "half", min_cleanable_dirty_ratio=0.1)
    half_dirty(store, "half", clock.now)
    create(store, "full", min_cleanable_dirty_ratio=0.1)
    put(store, "full", (b"x", b"1"))
    put(store, "full", (b"x", b"2"))
    store.roll("full", 0)
    create(store, "clean", min_cleanable_dirty_ratio=0.1)
    put(store, "clean", (b"y", b"1"))
    store.roll("clean", 0)
    assert manager_of(store).clean_log("clean", 0, clock.now).end_offset == 1  # ratio 0 from now on
    assert [manager_of(store).clean(clock.now).cleaned for _ in range(3)] == [
        ("full", 0),
        ("half", 0),
        None,
    ]


def test_the_minimum_dirty_ratio_must_be_exceeded(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, min_cleanable_dirty_ratio=0.5)
    half_dirty(store, T, clock.now)
    assert manager_of(store).clean(clock.now).cleaned is None  # 0.5 is not > 0.5
    store.alter_config(T, {"min.cleanable.dirty.ratio": 0.4999})
    assert manager_of(store).clean(clock.now).cleaned == (T, 0)
    # A ratio of 1.0 never qualifies when the minimum is 1.0.
    create(store, "all-dirty", min_cleanable_dirty_ratio=1.0)
    put(store, "all-dirty", (b"k", b"1"))
    put(store, "all-dirty", (b"k", b"2"))
    store.roll("all-dirty", 0)
    assert manager_of(store).clean(clock.now).cleaned is None
    store.alter_config("all-dirty", {"min.cleanable.dirty.ratio": 0.0})
    assert manager_of(store).clean(clock.now).cleaned == ("all-dirty", 0)


def test_max_compaction_lag_makes_a_log_eligible(
    open_store: StoreFactory, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = new_store(open_store, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=MINUTE)
    t0 = clock.now
    put(store, T, (b"k", b"1"), ts=t0)  # the first batch's timestamp counts
    put(store, T, (b"k", b"2"), ts=t0 + 30_000)
    store.roll(T, 0)
    caplog.set_level(logging.INFO, logger="compactlog.cleaner")
    clock.now = t0 + MINUTE
    assert manager_of(store).clean().cleaned is None  # the injected clock: delay 0, not yet
    clock.now = t0 + MINUTE + 1
    result = manager_of(store).clean()
    assert result.cleaned == (T, 0)
    assert result.stats.start_ms == t0 + MINUTE + 1
    assert state(store) == [(1, b"k", b"2")]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos[-1] == "\tCleanable partitions: 1, Delayed partitions: 1, max delay: 1"
    # Once clean, max lag alone does not select it again (no cleanable bytes).
    clock.now = t0 + 10 * MINUTE
    assert manager_of(store).clean().cleaned is None


def test_max_compaction_lag_does_not_outrank_a_dirtier_log(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store(config=BROKER)
    t0 = clock.now
    create(store, "late", min_cleanable_dirty_ratio=0.1, max_compaction_lag_ms=MINUTE)
    half_dirty(store, "late", t0)  # ratio 0.5, and overdue below
    create(store, "dirty", min_cleanable_dirty_ratio=0.1)
    put(store, "dirty", (b"k", b"1"), ts=t0 + 10 * MINUTE)
    put(store, "dirty", (b"k", b"2"), ts=t0 + 10 * MINUTE)
    store.roll("dirty", 0)
    now = t0 + 10 * MINUTE
    assert [manager_of(store).clean(now).cleaned for _ in range(3)] == [
        ("dirty", 0),
        ("late", 0),
        None,
    ]


def set_mtime(path: str, mtime_ms: int) -> None:
    os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def test_max_compaction_lag_ignores_segments_without_timestamps(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=MINUTE)
    put(store, T, (b"k", b"1"), ts=NO_TIMESTAMP)
    put(store, T, (b"k", b"2"), ts=NO_TIMESTAMP)
    store.roll(T, 0)
    assert (
        manager_of(store).clean(clock.now + 1000 * MINUTE).cleaned is None
    )  # first batch ts -1: ignored
    put(store, T, (b"k", b"3"), ts=clock.now)
    store.roll(T, 0)
    assert manager_of(store).clean(clock.now + MINUTE + 1).cleaned == (T, 0)
    assert state(store) == [(2, b"k", b"3")]


def test_min_compaction_lag_uses_the_file_mtime_of_a_segment_without_timestamps(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, min_compaction_lag_ms=MINUTE)
    now = clock.now
    put(store, T, (b"k", b"1"), ts=NO_TIMESTAMP)
    put(store, T, (b"k", b"2"), ts=NO_TIMESTAMP)
    store.roll(T, 0)
    put(store, T, (b"k", b"3"), ts=NO_TIMESTAMP)
    put(store, T, (b"k", b"4"), ts=NO_TIMESTAMP)
    store.roll(T, 0)
    put(store, T, (b"z", b"1"), ts=now)
    first, second = store.log(T, 0).segments()[:2]
    set_mtime(first.log_path, now - 2 * MINUTE)
    set_mtime(second.log_path, now - 1000)  # young by its mtime
    result = manager_of(store).clean(now)
    assert (result.first_dirty_offset, result.end_offset) == (0, 2)
    assert [o for o, _, _ in state(store)] == [1, 2, 3, 4]
    result = manager_of(store).clean(now - 1000 + MINUTE)
    assert (result.first_dirty_offset, result.end_offset) == (2, 4)
    assert [o for o, _, _ in state(store)] == [3, 4]


def test_min_compaction_lag_protects_a_young_segment_and_everything_after_it(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, min_compaction_lag_ms=MINUTE)
    now = clock.now
    put(store, T, (b"k", b"1"), ts=now - 120_000)  # 0
    put(store, T, (b"k", b"2"), ts=now - 110_000)  # 1
    store.roll(T, 0)
    put(store, T, (b"j", b"1"), ts=now - 100_000)  # 2
    put(store, T, (b"x", b"1"), ts=now - 1000)  # 3: one young record
    store.roll(T, 0)
    put(store, T, (b"k", b"3"), ts=now - 100_000)  # 4: old, but after the young segment
    put(store, T, (b"j", b"2"), ts=now - 90_000)  # 5
    store.roll(T, 0)
    put(store, T, (b"z", b"1"), ts=now)  # 6, active
    result = manager_of(store).clean(now)
    assert (result.first_dirty_offset, result.end_offset) == (0, 2)
    assert [o for o, _, _ in state(store)] == [1, 2, 3, 4, 5, 6]
    assert bases(store) == [0, 2, 4, 6]
    assert checkpoint(store) == 2
    # Young while largest timestamp > now - min lag: one millisecond before it ages, nothing.
    assert manager_of(store).clean(now - 1000 + MINUTE - 1).cleaned is None
    result = manager_of(store).clean(now - 1000 + MINUTE)
    assert (result.first_dirty_offset, result.end_offset) == (2, 6)
    assert [o for o, _, _ in state(store)] == [3, 4, 5, 6]


def test_the_active_segment_is_never_cleaned(open_store: StoreFactory, clock: ManualClock) -> None:
    store = new_store(open_store, min_cleanable_dirty_ratio=0.0)
    for value in (b"1", b"2", b"3"):
        put(store, T, (b"k", value))
    before = [b.raw for b in batches(store)]
    assert manager_of(store).clean(clock.now).cleaned is None
    result = manager_of(store).clean_log(T, 0, clock.now)
    assert result.cleaned is None and result.end_offset == 0
    assert [b.raw for b in batches(store)] == before
    store.roll(T, 0)
    assert manager_of(store).clean(clock.now).cleaned == (T, 0)
    assert state(store) == [(2, b"k", b"3")]


def test_clean_log_ignores_the_ratio_but_not_the_active_segment_or_the_min_lag(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store, min_cleanable_dirty_ratio=1.0, min_compaction_lag_ms=MINUTE)
    now = clock.now
    put(store, T, (b"k", b"1"), ts=now - 2 * MINUTE)
    put(store, T, (b"k", b"2"), ts=now - 2 * MINUTE)
    store.roll(T, 0)
    put(store, T, (b"k", b"3"), ts=now - 1000)  # young
    put(store, T, (b"k", b"4"), ts=now - 1000)
    store.roll(T, 0)
    put(store, T, (b"k", b"5"), ts=now)  # active
    put(store, T, (b"k", b"6"), ts=now)
    assert manager_of(store).clean(now).cleaned is None  # ratio 1.0 is not > 1.0
    result = manager_of(store).clean_log(T, 0, now)
    assert result.cleaned == (T, 0)
    assert (result.first_dirty_offset, result.end_offset) == (0, 2)
    assert [o for o, _, _ in state(store)] == [1, 2, 3, 4, 5]
    assert checkpoint(store) == 2


def test_clean_log_leaves_a_topic_without_compact_alone(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """Spec 4.1: only logs whose cleanup.policy contains compact are cleaned. Compacting a
    ``delete`` topic on request would silently destroy records the topic promises to keep."""
    store = new_store(open_store, policy="delete")
    put(store, T, (b"k", b"1"))
    put(store, T, (None, b"x"))
    put(store, T, (b"k", b"2"))
    store.roll(T, 0)
    before = [b.raw for b in batches(store)]
    try:
        result = manager_of(store).clean_log(T, 0, clock.now)
    except CompactlogError:
        result = None  # refusing is fine too
    assert result is None or result.cleaned is None
    assert [b.raw for b in batches(store)] == before
    assert state(store) == [(0, b"k", b"1"), (1, None, b"x"), (2, b"k", b"2")]
    assert checkpoint(store) is None


def test_the_last_batch_of_an_active_producer_stays_as_an_empty_header(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    now = clock.now
    for seq, value in enumerate((b"1", b"2")):
        put_raw(
            store,
            T,
            build_batch(
                [(b"k", value)],
                timestamps=now,
                producer_id=77,
                producer_epoch=3,
                base_sequence=seq,
            ),
        )
    put(store, T, (b"k", b"3"))  # another writer supersedes the producer's last record
    store.roll(T, 0)
    manager_of(store).clean(now)
    assert state(store) == [(2, b"k", b"3")]
    header = batches(store)[0]
    assert (header.base_offset, header.last_offset, header.records_count) == (1, 1, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 1)


def producer_batch(
    seq: int, *records: tuple[bytes, bytes | None], ts: int, pid: int = 77, codec: str = "none"
) -> bytes:
    return build_batch(
        list(records),
        timestamps=ts,
        producer_id=pid,
        producer_epoch=3,
        base_sequence=seq,
        compression=Compression.from_name(codec),
    )


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_only_the_producers_last_batch_is_kept_for_it(
    open_store: StoreFactory, clock: ManualClock, codec: str
) -> None:
    """An earlier batch of the producer is dropped as usual; the last one stays (with its
    surviving records, or as a header), compressed or not."""
    store = new_store(open_store)
    now = clock.now
    put_raw(store, T, producer_batch(0, (b"a", b"1"), (b"b", b"1"), ts=now, codec=codec))  # 0-1
    put_raw(store, T, producer_batch(2, (b"a", b"2"), (b"c", b"1"), ts=now, codec=codec))  # 2-3
    put(store, T, (b"a", b"3"), (b"b", b"2"), (b"c", b"2"))  # 4-6
    store.roll(T, 0)
    manager_of(store).clean_log(T, 0, now)
    assert shape(store) == [(2, 3, 0), (4, 6, 3)]
    header = batches(store)[0]
    assert (header.producer_id, header.base_sequence, header.compression) == (
        77,
        2,
        Compression.NONE,  # an empty header is never compressed
    )
    assert header.size_in_bytes == 61


def test_an_expired_producers_last_batch_is_not_kept(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = new_store(open_store)
    now = clock.now
    put_raw(store, T, producer_batch(0, (b"k", b"1"), ts=now - DAY - 1))  # 0
    put_raw(store, T, producer_batch(0, (b"j", b"1"), ts=now - DAY + 1, pid=78))  # 1
    put(store, T, (b"k", b"2"), (b"j", b"2"))  # 2-3
    store.roll(T, 0)
    manager_of(store).clean_log(
        T, 0, now - 1
    )  # producer.id.expiration.ms (a day): 77 expired, 78 not yet
    assert shape(store) == [(1, 1, 0), (2, 3, 2)]
    put(store, T, (b"z", b"1"))  # 4
    store.roll(T, 0)
    manager_of(store).clean_log(T, 0, now + 1)
    assert shape(store) == [(2, 3, 2), (4, 4, 1)]


def test_a_duplicate_is_still_detected_after_cleaning_and_reload(
    open_store: StoreFactory, clock: ManualClock, tmp_path: Path
) -> None:
    """Kafka's ``testDuplicateCheckAfterCleaning``: the empty header keeps the producer's last
    sequence, so after a restart its retry is still answered with the original offsets."""
    store = new_store(open_store)
    now = clock.now
    last = producer_batch(1, (b"k", b"1"), ts=now)
    put_raw(store, T, producer_batch(0, (b"j", b"1"), ts=now))  # 0
    put_raw(store, T, last)  # 1
    put(store, T, (b"k", b"2"), (b"j", b"2"))  # 2-3
    store.roll(T, 0)
    manager_of(store).clean_log(T, 0, now)
    assert shape(store) == [(1, 1, 0), (2, 3, 2)]
    store.close()
    for name in os.listdir(tmp_path / "data" / "t-0"):
        if name.endswith(".snapshot"):
            os.remove(tmp_path / "data" / "t-0" / name)  # rebuilt from the log alone
    (tmp_path / "data" / ".kafka_cleanshutdown").unlink()
    again = open_store()
    retry = again.append_batch_info(T, 0, last)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (1, 1)
    again.append_batch(T, 0, producer_batch(2, (b"k", b"3"), ts=now))


def test_a_producer_with_only_a_marker_keeps_its_marker_as_a_header(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    """A producer whose current epoch wrote no data (its coordinator aborted the transaction
    with a bumped epoch) keeps the marker of that epoch instead (spec 5.4 rule 1)."""
    store = new_store(open_store, delete_retention_ms=MINUTE)
    now = clock.now
    txn = build_batch(
        [(b"k", b"1")],
        timestamps=now,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    store.append_batch(T, 0, txn, from_client=False)  # 0
    abort = build_end_txn_marker_batch(
        commit=False, producer_id=5, producer_epoch=1, coordinator_epoch=0, timestamp=now
    )
    store.append_batch(T, 0, abort, from_client=False)  # 1
    put(store, T, (b"k", b"2"))  # 2
    store.roll(T, 0)
    assert store.log(T, 0).last_records_of_active_producers()[5] == (None, 1)
    manager_of(store).clean_log(T, 0, now)
    assert shape(store) == [(1, 1, 1), (2, 2, 1)]  # the marker, stamped with its horizon
    put(store, T, (b"z", b"1"))  # 3
    store.roll(T, 0)
    manager_of(store).clean_log(
        T, 0, now + MINUTE
    )  # past the horizon: its record goes, the header stays
    marker = batches(store)[0]
    assert shape(store) == [(1, 1, 0), (2, 2, 1), (3, 3, 1)]
    assert (marker.is_control, marker.is_transactional) == (True, True)
    assert (marker.producer_id, marker.producer_epoch) == (5, 1)


# --- uncleanable partitions (spec 4.6, 5.14) -------------------------------------------------


def flip_crc_covered_byte(path: str) -> None:
    with open(path, "r+b") as f:
        f.seek(61 + 4)  # inside the first record of the first batch
        byte = f.read(1)
        f.seek(61 + 4)
        f.write(bytes([byte[0] ^ 0xFF]))


def garbage_header(path: str) -> None:
    with open(path, "r+b") as f:
        f.write(b"jogeajgoea")  # Kafka's LogCleanerIntegrationTest breaks a log this way


@pytest.mark.parametrize("corrupt", [flip_crc_covered_byte, garbage_header])
def test_a_corrupt_log_is_marked_uncleanable_and_the_others_are_still_cleaned(
    open_store: StoreFactory, clock: ManualClock, corrupt: Callable[[str], None]
) -> None:
    # Kafka's behaviour, one attempt (compactlog retries by default: test_cleaner_damage.py).
    store = open_store(config={**BROKER, "compactlog.cleaner.max.attempts": 1})
    create(store, "good", min_cleanable_dirty_ratio=0.1)
    half_dirty(store, "good", clock.now)  # ratio 0.5: chosen after "bad" (1.0)
    create(store, "bad")
    put(store, "bad", (b"k", b"1"))
    put(store, "bad", (b"k", b"2"))
    store.roll("bad", 0)
    corrupt(store.log("bad", 0).segments()[0].log_path)
    first = manager_of(store).clean(clock.now)  # nothing escapes
    assert first.cleaned == ("bad", 0)
    assert first.stats is None
    assert set(first.uncleanable) == {("bad", 0)}
    assert first.uncleanable[("bad", 0)].startswith("CorruptRecordError")
    assert checkpoint(store, "bad") == 0
    second = manager_of(store).clean(clock.now)
    assert second.cleaned == ("good", 0)
    assert state(store, "good") == [(1, b"a", b"2")]
    assert set(second.uncleanable) == {("bad", 0)}
    third = manager_of(store).clean(clock.now)
    assert third.cleaned is None
    assert set(third.uncleanable) == {("bad", 0)}
    # The mark goes with the partition.
    store.delete_topic("bad")
    assert manager_of(store).clean(clock.now).uncleanable == {}


# --- LogAppendTime (spec 5.4) -------------------------------------------------------------


def test_log_append_time_survives_a_rebuild(open_store: StoreFactory, clock: ManualClock) -> None:
    store = new_store(
        open_store, message_timestamp_type="LogAppendTime", delete_retention_ms=MINUTE
    )
    appended = clock.now
    put(store, T, (b"a", b"1"), (b"b", None), (b"c", b"1"), ts=5)  # client time 5 is ignored
    clock.advance(1000)
    put(store, T, (b"a", b"2"), ts=6)
    store.roll(T, 0)
    now = clock.advance(1000)
    manager_of(store).clean(now)
    rebuilt, untouched = batches(store)
    assert rebuilt.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert rebuilt.max_timestamp == appended
    assert rebuilt.delete_horizon_ms == now + MINUTE
    assert [(r.offset, r.timestamp) for r in rebuilt.records()] == [(1, appended), (2, appended)]
    assert untouched.max_timestamp == appended + 1000
    assert [(r.offset, r.timestamp) for r in store.read(T, 0)] == [
        (1, appended),
        (2, appended),
        (3, appended + 1000),
    ]


# --- the summary message (spec 5.11) ---------------------------------------------------------


def write_two_mib(store: Store) -> None:
    """32 keys twice, 32 KiB values, 8 records a batch: the second half supersedes the first."""
    rng = random.Random(3)
    for round_ in range(2):
        for chunk in range(4):
            records = [(b"key-%02d" % (chunk * 8 + i), rng.randbytes(32 * 1024)) for i in range(8)]
            put(store, T, *records, ts=1_700_000_000_000 + round_)
    store.roll(T, 0)


def expected_summary(
    name: str,
    fdo: int,
    end: int,
    read: int,
    written: int,
    msgs_read: int,
    msgs_written: int,
    utilization: float,
    total: float,
    indexing: float,
) -> str:
    """Kafka's message built from its format strings: ``%,.1f`` (grouped) for megabytes, the
    first line's seconds and the rates; ``%.1f`` elsewhere; Java's Infinity/NaN for x/0."""
    mb = 1024.0 * 1024.0
    cleaning = total - indexing

    def div(x: float, y: float) -> float:
        return x / y if y else (math.nan if x == 0 else math.inf)

    def j(x: float, grouped: bool = True) -> str:
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity"
        return f"{x:,.1f}" if grouped else f"{x:.1f}"

    r = read / mb
    return (
        f"\n\tLog cleaner thread 0 cleaned log {name} (dirty section = [{fdo}, {end}])\n"
        f"\t{j(r)} MB of log processed in {j(total)} seconds ({j(div(read, total) / mb)} MB/sec).\n"
        f"\tIndexed {j(r)} MB in {j(indexing, False)} seconds "
        f"({j(div(r, indexing))} Mb/sec, {j(100 * div(indexing, total), False)}% of total time)\n"
        f"\tBuffer utilization: {j(100 * utilization, False)}%\n"
        f"\tCleaned {j(r)} MB in {j(cleaning, False)} seconds "
        f"({j(div(r, cleaning))} Mb/sec, {j(100 * div(cleaning, total), False)}% of total time)\n"
        f"\tStart size: {j(r)} MB ({msgs_read:,} messages)\n"
        f"\tEnd size: {j(written / mb)} MB ({msgs_written:,} messages)\n"
        f"\t{j(100 * (1 - div(written, read)), False)}% size reduction "
        f"({j(100 * (1 - div(msgs_written, msgs_read)), False)}% fewer messages)\n"
    )


def test_the_summary_message_of_a_round(
    open_store: StoreFactory, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = new_store(open_store)
    write_two_mib(store)
    read = sizes(store)[0]
    caplog.set_level(logging.INFO, logger="compactlog.cleaner")
    result = manager_of(store).clean(clock.now)
    written = sizes(store)[0]
    assert (result.stats.bytes_read, result.stats.bytes_written) == (read, written)
    assert result.stats.map_bytes_read == read
    assert (result.stats.messages_read, result.stats.messages_written) == (64, 32)
    slots = (2 * MIB) // 24
    expected = expected_summary("t-0", 0, 64, read, written, 64, 32, 32 / slots, 0.0, 0.0)
    assert result.summary == expected
    lines = result.summary.split("\n")
    assert lines[0] == "" and lines[-1] == "" and len(lines) == 10  # eight lines of text
    assert lines[2].startswith("\t2.0 MB of log processed")
    assert lines[7] == "\tEnd size: 1.0 MB (32 messages)"
    assert lines[8].startswith("\t50.0% size reduction (50.0% fewer messages)")
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [expected]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_summary_times_and_percentages(open_store: StoreFactory) -> None:
    store = new_store(open_store)
    write_two_mib(store)
    log = store.log(T, 0)
    read = sizes(store)[0]
    ticks: Iterator[int] = iter([0, 2_000, 5_000])  # start, map complete after 2 s, done at 5 s
    cleaner = Cleaner(0, SkimpyOffsetMap(24 * 64), clock=lambda: next(ticks))
    end, stats = cleaner.clean(log, 0, 64, 0)
    written = sizes(store)[0]
    message = summary_message(0, log.name, 0, end, stats)
    assert message == expected_summary("t-0", 0, 64, read, written, 64, 32, 0.5, 5.0, 2.0)
    assert "\tBuffer utilization: 50.0%\n" in message
    assert "in 2.0 seconds (1.0 Mb/sec, 40.0% of total time)" in message
    assert "in 3.0 seconds (0.7 Mb/sec, 60.0% of total time)" in message


def test_dropped_keyless_records_are_reported_at_warning(
    open_store: StoreFactory, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = new_store(open_store, policy="delete")
    put(store, T, (None, b"x"), (b"k", b"1"), (None, b"y"))
    put(store, T, (None, b"z"))
    store.alter_config(T, {"cleanup.policy": "compact"})
    store.roll(T, 0)
    caplog.set_level(logging.INFO, logger="compactlog.cleaner")
    result = manager_of(store).clean(clock.now)
    assert result.stats.invalid_messages == 3
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == ["\tFound 3 invalid messages during compaction."]
    assert warnings[0].name == "compactlog.cleaner"
    assert "(4 messages)" in result.summary and "(1 messages)" in result.summary


def test_a_round_without_keyless_records_logs_no_warning(
    open_store: StoreFactory, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = new_store(open_store)
    put(store, T, (b"k", b"1"))
    put(store, T, (b"k", b"2"))
    store.roll(T, 0)
    caplog.set_level(logging.INFO, logger="compactlog.cleaner")
    assert manager_of(store).clean(clock.now).stats.invalid_messages == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_log_with_kafkas_aborted_transactions_is_not_cleaned(
    open_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``.txnindex`` (Kafka's record of aborted transactions) in the range a round rewrites:
    this cleaner would keep the aborted records as committed, so it refuses the log."""
    store = new_store(open_store)
    put(store, T, *keys("a", "b"))
    store.roll(T, 0)
    put(store, T, *keys("a", "b", value=b"w"))
    store.roll(T, 0)
    before = state(store)
    segment = store.log(T, 0).segments()[0]
    with open(segment.txn_index_path, "wb") as f:
        f.write(bytes(34))  # one AbortedTxn entry
    with caplog.at_level(logging.WARNING, "compactlog"):
        result = manager_of(store).clean_log(T, 0)
    assert "records aborted transactions" in result.uncleanable[(T, 0)]
    assert state(store) == before
    assert os.path.getsize(segment.txn_index_path) == 34


def test_an_empty_transaction_index_does_not_stop_the_cleaner(open_store: StoreFactory) -> None:
    store = new_store(open_store)
    put(store, T, *keys("a", "b"))
    store.roll(T, 0)
    put(store, T, *keys("a", "b", value=b"w"))
    store.roll(T, 0)
    txn_index = store.log(T, 0).segments()[0].txn_index_path
    open(txn_index, "wb").close()
    result = manager_of(store).clean_log(T, 0)
    assert not result.uncleanable
    assert state(store) == [(2, b"a", b"w"), (3, b"b", b"w")]
    assert not os.path.exists(txn_index)  # it went with the replaced segment
    assert os.path.exists(txn_index + ".deleted")
