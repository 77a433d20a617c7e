"""Segments, indexes, rolling, reads and appends of one log (spec sections 1, 2.7, 2.8, 3)."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from compactlog.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from compactlog.records import RecordBatch, build_batch
from compactlog.storage.store import Store
from tests.conftest import ManualClock

StoreFactory = Callable[..., Store]


def files(path: Path) -> list[str]:
    return sorted(os.listdir(path))


def offset_index(path: Path) -> list[tuple[int, int]]:
    raw = path.read_bytes()
    return [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]


def time_index(path: Path) -> list[tuple[int, int]]:
    raw = path.read_bytes()
    return [struct.unpack_from(">qi", raw, i) for i in range(0, len(raw), 12)]


def test_segment_files_are_named_by_20_digit_base_offsets(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("orders", 2, {"segment.bytes": 200})
    for i in range(6):
        store.append("orders", 1, [(b"k%d" % i, b"v" * 30)])  # 100-byte batches
    segs = store.segments("orders", 1)
    assert [s.base_offset for s in segs] == [0, 2, 4]
    names = files(tmp_path / "data" / "orders-1")
    for base in ("00000000000000000000", "00000000000000000002", "00000000000000000004"):
        assert f"{base}.log" in names and f"{base}.index" in names and f"{base}.timeindex" in names
    assert os.path.isdir(tmp_path / "data" / "orders-0")


def test_size_rolling_equality_does_not_roll(open_store: StoreFactory) -> None:
    store = open_store()
    one = len(build_batch([(b"k", b"v")], timestamps=0))  # 70 bytes (spec 2.4)
    assert one == 70
    store.create_topic("t", 1, {"segment.bytes": 140})
    for _ in range(3):
        store.append("t", 0, [(b"k", b"v")])
    # Two 70-byte batches fill 140 bytes exactly; the third rolls.
    assert [(s.base_offset, s.size) for s in store.segments("t", 0)] == [(0, 140), (2, 70)]


def test_batch_larger_than_segment_bytes_is_refused(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.bytes": 100})
    with pytest.raises(RecordBatchTooLargeError):
        store.append("t", 0, [(b"k", b"v" * 100)])
    assert store.log_end_offset("t", 0) == 0


def test_max_message_bytes_gives_message_too_large(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1, {"max.message.bytes": 100})
    store.append("t", 0, [(b"k", b"v" * 20)])
    with pytest.raises(MessageTooLargeError) as info:
        store.append("t", 0, [(b"k", b"v" * 100)])
    assert info.value.error_code == 10
    assert store.log_end_offset("t", 0) == 1


def test_index_entries_follow_kafkas_rule(open_store: StoreFactory, tmp_path: Path) -> None:
    """An entry (last offset of the append, its position) once > index.interval.bytes were
    appended since the last entry, counted before the current append; never on the first."""
    store = open_store()
    store.create_topic("t", 1, {"index.interval.bytes": 100})
    for _ in range(6):
        store.append("t", 0, [(b"k", b"v" * 10), (b"k2", b"w")])  # 2 records, offsets 2i, 2i+1
    store.close()
    size = len(build_batch([(b"k", b"v" * 10), (b"k2", b"w")], timestamps=0))
    assert size <= 100 < 2 * size  # so the counter passes 100 every second append
    entries = offset_index(tmp_path / "data" / "t-0" / "00000000000000000000.index")
    # counter before each append: 0, s, 2s -> entry, s, 2s -> entry, s
    assert entries == [(5, 2 * size), (9, 4 * size)]


def test_index_interval_zero_indexes_every_append_but_the_first(
    open_store: StoreFactory, tmp_path: Path, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"index.interval.bytes": 0})
    for i in range(4):
        store.append("t", 0, [(b"k", b"v")], timestamp=1000 + i)
    store.close()
    d = tmp_path / "data" / "t-0"
    assert offset_index(d / "00000000000000000000.index") == [(1, 70), (2, 140), (3, 210)]
    assert time_index(d / "00000000000000000000.timeindex") == [(1001, 1), (1002, 2), (1003, 3)]


def test_closed_segment_indexes_are_trimmed_and_active_ones_preallocated(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.index.bytes": 1000, "index.interval.bytes": 0})
    for _ in range(3):
        store.append("t", 0, [(b"k", b"v")])
    d = tmp_path / "data" / "t-0"
    assert (d / "00000000000000000000.index").stat().st_size == 1000  # 125 entries of 8
    assert (d / "00000000000000000000.timeindex").stat().st_size == 996  # 83 entries of 12
    store.roll("t", 0)
    assert (d / "00000000000000000000.index").stat().st_size == 16
    # all three batches share one timestamp, so one time entry: (ts, offset 0), kept on roll
    assert (d / "00000000000000000000.timeindex").stat().st_size == 12


def test_time_rolling_uses_record_timestamps_and_segment_ms(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.ms": 1000})
    store.append("t", 0, [(b"k", b"v")], timestamp=10_000)
    store.append("t", 0, [(b"k", b"v")], timestamp=11_000)  # waited 1000, not > 1000
    assert len(store.segments("t", 0)) == 1
    store.append("t", 0, [(b"k", b"v")], timestamp=11_001)
    assert [s.base_offset for s in store.segments("t", 0)] == [0, 2]


def test_compacted_topics_roll_at_min_of_segment_ms_and_max_compaction_lag(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    store.create_topic(
        "t", 1, {"cleanup.policy": "compact", "segment.ms": 100_000, "max.compaction.lag.ms": 500}
    )
    store.append("t", 0, [(b"k", b"v")], timestamp=10_000)
    store.append("t", 0, [(b"k", b"v")], timestamp=10_501)
    assert [s.base_offset for s in store.segments("t", 0)] == [0, 1]
    store.create_topic("d", 1, {"segment.ms": 100_000, "max.compaction.lag.ms": 500})
    store.append("d", 0, [(b"k", b"v")], timestamp=10_000)
    store.append("d", 0, [(b"k", b"v")], timestamp=10_501)
    assert len(store.segments("d", 0)) == 1  # delete topics ignore the compaction lag


def test_segment_jitter_shortens_the_roll_time(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.ms": 1000, "segment.jitter.ms": 1000})
    log = store.log("t", 0)
    jitter = log.active_segment.roll_jitter_ms
    assert 0 <= jitter < 1000
    store.append("t", 0, [(b"k", b"v")], timestamp=10_000)
    store.append("t", 0, [(b"k", b"v")], timestamp=10_000 + 1000 - jitter)
    assert len(store.segments("t", 0)) == 1
    store.append("t", 0, [(b"k", b"v")], timestamp=10_000 + 1001 - jitter)
    assert len(store.segments("t", 0)) == 2


def test_records_without_timestamps_roll_by_wall_clock(
    open_store: StoreFactory, clock: ManualClock
) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.ms": 1000})
    store.append("t", 0, [(b"k", b"v")], timestamp=-1)
    clock.advance(1000)
    store.append("t", 0, [(b"k", b"v")], timestamp=-1)
    assert len(store.segments("t", 0)) == 1
    clock.advance(1)
    store.append("t", 0, [(b"k", b"v")], timestamp=-1)
    assert len(store.segments("t", 0)) == 2


def test_full_offset_index_rolls(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.index.bytes": 24, "index.interval.bytes": 0})
    for _ in range(5):
        store.append("t", 0, [(b"k", b"v")])
    # 3 offset entries max; time index holds 2 (one slot is kept for the roll entry).
    bases = [s.base_offset for s in store.segments("t", 0)]
    assert bases[0] == 0 and len(bases) >= 2


def test_explicit_roll_on_empty_active_segment_changes_nothing(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1)
    store.roll("t", 0)
    assert [s.base_offset for s in store.segments("t", 0)] == [0]
    store.append("t", 0, [(b"a", b"1"), (b"b", b"2")])
    store.roll("t", 0)
    store.roll("t", 0)
    assert [s.base_offset for s in store.segments("t", 0)] == [0, 2]


def test_read_from_any_offset_starts_at_the_record(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1, {"segment.bytes": 300})
    for b in range(10):
        store.append("t", 0, [(b"k%d" % (3 * b + i), b"v") for i in range(3)])
    for start in range(31):
        offsets = [r.offset for r in store.read("t", 0, start)]
        assert offsets == list(range(start, 30)), start
    assert list(store.read("t", 0, 30)) == []
    with pytest.raises(OffsetOutOfRangeError):
        store.read("t", 0, 31)


def test_null_and_empty_keys_values_and_headers_are_distinct(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1)
    records = [
        (None, None, ()),
        (b"", b"", ()),
        (b"k", None, (("h", None),)),
        (b"k", b"", (("", b""),)),
        (b"\x00\xff", b"\x00" * 100_000, (("h1", b"x"), ("h2", None))),
    ]
    store.append("t", 0, records)
    got = [(r.key, r.value, r.headers) for r in store.read("t", 0)]
    assert got == [(k, v, tuple(h)) for k, v, h in records]


def test_null_key_on_compacted_topic_rejects_the_whole_batch(
    open_store: StoreFactory, tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("c", 1, {"cleanup.policy": "compact,delete"})
    store.append("c", 0, [(b"k", b"v")])
    size = store.segments("c", 0)[0].size
    with pytest.raises(InvalidRecordError) as info:
        store.append("c", 0, [(b"a", b"1"), (None, b"2"), (b"b", b"3")])
    assert info.value.error_code == 87
    assert "Compacted topic cannot accept message without key in topic partition c-0." in str(
        info.value
    )
    assert store.log_end_offset("c", 0) == 1
    assert store.segments("c", 0)[0].size == size
    # The same refusal for a raw batch, compressed, as a client would send it.
    raw = build_batch([(b"a", b"1"), (None, b"2")], timestamps=0, compression=1)
    with pytest.raises(InvalidRecordError):
        store.append_batch("c", 0, raw)
    assert store.log_end_offset("c", 0) == 1


def test_raw_appends_are_validated(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1)
    good = bytearray(build_batch([(b"k", b"v")], timestamps=1000))
    assert store.append_batch("t", 0, bytes(good)) == 0
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # a CRC-covered byte
    from compactlog.errors import CorruptRecordError

    with pytest.raises(CorruptRecordError):
        store.append_batch("t", 0, bytes(bad))
    with pytest.raises(CorruptRecordError):
        store.append_batch("t", 0, bytes(good[:-3]))
    control = build_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
        timestamps=0,
        is_control=True,
        is_transactional=True,
        producer_id=1,
        producer_epoch=0,
    )
    with pytest.raises(InvalidRecordError):
        store.append_batch("t", 0, control)
    assert store.log_end_offset("t", 0) == 1


@pytest.mark.parametrize("compression", [0, 1, 4])
@pytest.mark.parametrize("deltas", [[1, 0], [0, 0], [0, 2], [-1, 1]])
def test_a_client_batch_must_have_offset_deltas_0_to_n_minus_1(
    open_store: StoreFactory, compression: int, deltas: list[int]
) -> None:
    # R16: records out of order (or skipping an offset) would make consumers see offsets go
    # backwards or land on another record's offset.
    store = open_store()
    store.create_topic("t", 1)
    store.append("t", 0, [(b"k", b"v")])
    size = store.segments("t", 0)[0].size
    bad = build_batch(
        [(b"a", b"1"), (b"b", b"2")],
        timestamps=0,
        compression=compression,
        offset_deltas=deltas,
        last_offset_delta=1,
    )
    with pytest.raises(InvalidRecordError, match="offset delta") as info:
        store.append_batch("t", 0, bad)
    assert info.value.error_code == 87
    assert store.log_end_offset("t", 0) == 1
    assert store.segments("t", 0)[0].size == size


def test_offsets_are_assigned_and_leader_epoch_stamped(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1)
    raw = build_batch([(b"a", b"1"), (b"b", b"2")], base_offset=1234, timestamps=5)
    store.append("t", 0, [(b"x", b"y")])
    assert store.append_batch("t", 0, raw) == 1
    batches = list(store.log("t", 0).iter_batches(0))
    second = RecordBatch(batches[1].data)
    assert second.base_offset == 1 and second.last_offset == 2
    assert second.partition_leader_epoch == 0
    assert second.is_valid()


def test_log_append_time(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    store.create_topic("t", 1, {"message.timestamp.type": "LogAppendTime"})
    store.append("t", 0, [(b"k", b"v"), (b"k2", b"v")], timestamp=5)
    records = list(store.read("t", 0))
    assert [r.timestamp for r in records] == [clock.now, clock.now]
    batch = RecordBatch(next(store.log("t", 0).iter_batches(0)).data)
    assert batch.timestamp_type == 1 and batch.max_timestamp == clock.now and batch.is_valid()


def test_create_time_bounds(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    store.create_topic(
        "t", 1, {"message.timestamp.before.max.ms": 1000, "message.timestamp.after.max.ms": 10}
    )
    store.append("t", 0, [(b"k", b"v")], timestamp=clock.now - 1000)
    with pytest.raises(InvalidTimestampError):
        store.append("t", 0, [(b"k", b"v")], timestamp=clock.now - 1001)
    with pytest.raises(InvalidTimestampError):
        store.append("t", 0, [(b"k", b"v")], timestamp=clock.now + 11)
    assert store.log_end_offset("t", 0) == 1


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips_through_the_store(open_store: StoreFactory, codec: str) -> None:
    store = open_store()
    store.create_topic("t", 1)
    records = [(b"key-%d" % i, b"value-%d" % i * 10) for i in range(50)]
    store.append("t", 0, records, compression=codec)
    assert [(r.key, r.value) for r in store.read("t", 0)] == records
    assert RecordBatch(next(store.log("t", 0).iter_batches(0)).data).compression.kafka_name == codec


def test_topic_compression_type_recompresses(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1, {"compression.type": "zstd"})
    store.append("t", 0, [(b"k", b"v" * 100)], compression="gzip")
    batch = RecordBatch(next(store.log("t", 0).iter_batches(0)).data)
    assert batch.compression.kafka_name == "zstd"
    assert [r.value for r in store.read("t", 0)] == [b"v" * 100]


def test_alter_config_takes_effect_at_once(open_store: StoreFactory) -> None:
    store = open_store()
    store.create_topic("t", 1)
    store.append("t", 0, [(b"k", b"v")])
    store.alter_config("t", set={"segment.bytes": "100"})
    assert store.describe_config("t")["segment.bytes"] == "100"
    store.append("t", 0, [(b"k", b"v")])
    assert len(store.segments("t", 0)) == 2
    store.alter_config("t", delete=["segment.bytes"])
    assert store.describe_config("t")["segment.bytes"] == "1073741824"


def test_configs_and_topics_survive_reopening(open_store: StoreFactory, tmp_path: Path) -> None:
    store = open_store()
    store.create_topic("t", 3, {"cleanup.policy": "compact", "segment.bytes": "1000"})
    store.append("t", 2, [(b"k", b"v")])
    store.close()
    again = open_store()
    assert again.topics() == ["t"]
    assert again.partitions("t") == 3
    assert again.describe_config("t")["cleanup.policy"] == "compact"
    assert again.describe_config("t")["segment.bytes"] == "1000"
    assert again.log_end_offset("t", 2) == 1
    again.delete_topic("t")
    assert again.topics() == []
    assert not any(n.startswith("t-") for n in os.listdir(tmp_path / "data"))
