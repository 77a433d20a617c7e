"""The ``compactlog`` Spark data source, read side: the DataFrame holds exactly what the store
holds (every codec, headers, nulls, compaction gaps), its options behave as Spark's Kafka
source's, and a partition is split at batch boundaries."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import numpy as np

from compactlog.errors import ConfigError, CorruptRecordError, SparkSourceError
from compactlog.records import decode_columns
from compactlog.spark._arrow import binary_array
from compactlog.spark.source import (
    LogReader,
    SegmentSplit,
    plan_ranges,
    read_split,
)
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
NOW = 1_700_000_000_000


def _store_rows(data: Path, topic: str) -> list[tuple[Any, ...]]:
    out = []
    with open_managed(data, ManualClock(NOW)) as store:
        for partition in range(store.partitions(topic)):
            for r in store.read(topic, partition, 0):
                headers = [(k, v) for k, v in r.headers] or None  # none: null, as Spark's source
                out.append((r.key, r.value, topic, partition, r.offset, r.timestamp, headers))
    return sorted(out, key=lambda row: (row[3], row[4]))


def _df_rows(df: Any) -> list[tuple[Any, ...]]:
    rows = df.orderBy("partition", "offset").collect()
    return [
        (
            r.key,
            r.value,
            r.topic,
            r.partition,
            r.offset,
            int(r.timestamp.timestamp() * 1000) if r.timestamp else None,
            None if r.headers is None else [(h.key, h.value) for h in r.headers],
        )
        for r in rows
    ]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two topics; ``orders`` (3 partitions) has every codec, headers, null keys and values."""
    data = tmp_path_factory.mktemp("mixed")
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("orders", 3, {"segment.bytes": 4096})
        store.create_topic("payments", 1)
        for i in range(60):
            rows: list[Any] = [
                (b"k%d" % (i % 9), b"v%d" % i * (1 + i % 5), [("h", b"%d" % i), ("nil", None)]),
                (None, b"keyless"),
                (b"gone", None),
            ]
            store.append("orders", i % 3, rows, timestamp=NOW + i, compression=CODECS[i % 5])
        store.append("payments", 0, [(b"p", b"1")], timestamp=NOW)
    return data


def test_a_batch_read_returns_what_the_store_holds(spark: Any, mixed: Path) -> None:
    df = (
        spark.read.format("compactlog")
        .option("subscribe", "orders")
        .option("includeHeaders", "true")
        .load(str(mixed))
    )
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert _df_rows(df) == _store_rows(mixed, "orders")
    assert {r.timestampType for r in df.select("timestampType").distinct().collect()} == {0}


def test_topics_are_selected_like_spark_kafka_source(spark: Any, mixed: Path) -> None:
    def topics(**options: str) -> list[str]:
        reader = spark.read.format("compactlog")
        for name, value in options.items():
            reader = reader.option(name, value)
        df = reader.load(str(mixed))
        return sorted(r.topic for r in df.select("topic").distinct().collect())

    assert topics() == ["orders", "payments"]
    assert "headers" not in spark.read.format("compactlog").load(str(mixed)).columns
    assert topics(subscribePattern="pay.*") == ["payments"]
    assert topics(subscribe="payments, missing") == ["payments"]


def test_offset_options(mixed: Path) -> None:
    """Planning alone (no Spark job): the ranges each option asks for, and its errors."""

    def ranges(**options: str) -> dict[tuple[str, int], tuple[int, int]]:
        opts = {"path": str(mixed), **{k.lower(): v for k, v in options.items()}}
        return {(r.topic, r.partition): (r.start, r.stop) for r in plan_ranges(str(mixed), opts)}

    assert ranges(subscribe="orders") == {("orders", p): (0, 60) for p in range(3)}
    chosen = ranges(
        subscribe="orders",
        startingOffsets=json.dumps({"orders": {"0": 10, "1": -2}}),
        endingOffsets=json.dumps({"orders": {"0": 20, "2": 5}}),
    )
    assert chosen == {("orders", 0): (10, 20), ("orders", 1): (0, 60), ("orders", 2): (0, 5)}
    with pytest.raises(ConfigError, match='startingOffsets "latest" is not valid'):
        ranges(startingOffsets="latest")
    with pytest.raises(ConfigError, match='endingOffsets "earliest" is not valid'):
        ranges(endingOffsets="earliest")
    with pytest.raises(ConfigError, match="only one of the options subscribe and subscribePattern"):
        ranges(subscribe="a", subscribePattern="b")
    with pytest.raises(ConfigError, match="startingOffsets must be"):
        ranges(startingOffsets="{not json")
    with pytest.raises(ConfigError, match="failOnDataLoss must be true or false"):
        ranges(failOnDataLoss="maybe")


def test_a_start_below_the_log_start_is_data_loss(tmp_path: Path) -> None:
    with open_managed(tmp_path, ManualClock(NOW)) as store:
        store.create_topic("t", 1, {"cleanup.policy": "delete", "segment.bytes": 1024})
        for i in range(40):
            store.append("t", 0, [(b"k", b"x" * 100)], timestamp=NOW + i)
        store.delete_records("t", 0, 25)
        store.run_retention()
        log_start = store.log_start_offset("t", 0)
    assert log_start > 0
    opts = {"path": str(tmp_path), "startingoffsets": json.dumps({"t": {"0": 3}})}
    with pytest.raises(SparkSourceError, match=f"its log starts at {log_start}"):
        plan_ranges(str(tmp_path), opts)
    [part] = plan_ranges(str(tmp_path), {**opts, "failondataloss": "false"})
    assert (part.start, part.stop) == (log_start, 40)


def test_a_cleaned_log_reads_with_its_gaps(spark: Any, tmp_path: Path) -> None:
    with open_managed(tmp_path, ManualClock(NOW)) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 2048})
        for i in range(200):
            store.append("c", 0, [(b"k%d" % (i % 10), b"v%d" % i * 20)], timestamp=NOW + i)
        store.roll("c", 0)
        manager_of(store).clean_log("c", 0)
    expected = _store_rows(tmp_path, "c")
    offsets = [row[4] for row in expected]
    assert offsets != list(range(len(offsets)))  # compaction left gaps
    df = spark.read.format("compactlog").option("includeHeaders", "true").load(str(tmp_path))
    assert _df_rows(df) == expected


def _read_splits(splits: Any) -> list[tuple[int, int]]:
    """(partition, offset) of every record the splits read, checking that each split is made
    of whole batches inside its file."""
    rows = []
    for split in splits:
        assert isinstance(split, SegmentSplit)
        assert split.end <= os.path.getsize(split.path)
        bounds = [split.start, *split.cuts, split.end]
        assert bounds == sorted(set(bounds))
        with open(split.path, "rb") as f:
            f.seek(split.start)
            decode_columns(f.read(split.end - split.start))  # whole batches, CRCs valid
        for batch in read_split(split, headers=False):
            rows.extend(
                zip(
                    batch.column("partition").to_pylist(),
                    batch.column("offset").to_pylist(),
                    strict=True,
                )
            )
    return sorted(rows)


ORDERS_ROWS = [(p, o) for p in range(3) for o in range(60)]


def test_a_partition_is_split_at_batch_boundaries(mixed: Path) -> None:
    reader = LogReader(
        {"path": str(mixed), "subscribe": "orders", "maxbytespersplit": "700"}, False
    )
    splits = reader.partitions()
    assert len(splits) > 6  # more tasks than the topic has partitions or segments
    assert _read_splits(splits) == ORDERS_ROWS


def test_a_segment_is_cut_into_pieces_of_about_equal_size(mixed: Path) -> None:
    whole = LogReader({"path": str(mixed), "subscribe": "orders"}, False).partitions()
    assert all(isinstance(s, SegmentSplit) and not s.cuts for s in whole)
    largest = max(s.end - s.start for s in whole if isinstance(s, SegmentSplit))
    limit = largest // 2 + 1  # two pieces of the largest range, not one full and one scrap
    cut = LogReader(
        {"path": str(mixed), "subscribe": "orders", "maxbytespersplit": str(limit)}, False
    ).partitions()
    pieces = [
        s.end - s.start for s in cut if isinstance(s, SegmentSplit) and s.path == whole[0].path
    ]
    assert len(pieces) >= 2
    assert min(pieces) > largest / 4
    assert _read_splits(cut) == ORDERS_ROWS


def test_a_task_reads_its_range_in_chunks(mixed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("compactlog.spark.source.CHUNK_BYTES", 300)
    splits = LogReader({"path": str(mixed), "subscribe": "orders"}, False).partitions()
    assert sum(len(s.cuts) for s in splits if isinstance(s, SegmentSplit)) > 3
    assert _read_splits(splits) == ORDERS_ROWS


def test_min_partitions_cuts_smaller_ranges(mixed: Path) -> None:
    options = {"path": str(mixed), "subscribe": "orders"}
    few = LogReader(options, False).partitions()
    many = LogReader({**options, "minpartitions": str(4 * len(few))}, False).partitions()
    assert len(many) >= 3 * len(few)
    assert _read_splits(many) == ORDERS_ROWS
    with pytest.raises(ConfigError, match="option minPartitions must be at least 1"):
        LogReader({**options, "minpartitions": "0"}, False)


def test_binary_arrays_are_gathered_with_their_nulls() -> None:
    data = b"..abc.de...f"
    pos = np.array([2, 0, 6, 11], np.int64)
    length = np.array([3, -1, 2, 0], np.int32)
    array = binary_array(data, pos, length)
    assert array.to_pylist() == [b"abc", None, b"de", b""]
    assert array.null_count == 1


def test_a_read_with_nothing_to_read_is_empty(spark: Any, mixed: Path) -> None:
    at_end = json.dumps({"orders": {"0": 60, "1": 60, "2": 60}})
    df = (
        spark.read.format("compactlog")
        .option("subscribe", "orders")
        .option("startingOffsets", at_end)
        .load(str(mixed))
    )
    assert df.count() == 0


def _damaged_copy(tmp_path: Path, position_in_batch: int) -> tuple[Path, Path, int]:
    """A topic of two sealed segments and an active one; byte ``position_in_batch`` of the
    fourth batch of the first segment is flipped. Returns the data dir, the segment file and
    the damaged batch's position."""
    data = tmp_path / "data"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("t", 1, {"segment.bytes": 1024})
        for i in range(40):
            store.append("t", 0, [(b"k%d" % i, b"v" * 50)], timestamp=NOW + i)
        first = store.log("t", 0).segments()[0]
        victim = [b.position for b in first.batches()][3]
        path = Path(first.log_path)
    raw = bytearray(path.read_bytes())
    raw[victim + position_in_batch] ^= 0xFF
    path.write_bytes(bytes(raw))
    return data, path, victim


@pytest.mark.parametrize(
    ("where", "error"), [(16, SparkSourceError), (70, CorruptRecordError)], ids=["magic", "crc"]
)
def test_damage_in_a_sealed_segment_fails_the_read_naming_file_and_position(
    tmp_path: Path, where: int, error: type[Exception]
) -> None:
    """Issue 17: the source never skips damaged bytes quietly (a framing stop in a sealed
    segment used to end that segment's walk, hiding every record after it)."""
    data, path, victim = _damaged_copy(tmp_path, where)
    reader = LogReader({"path": str(data), "subscribe": "t"}, False)
    with pytest.raises(error, match=str(path)):
        for split in reader.partitions():
            list(read_split(split, False))
    if where == 16:
        with pytest.raises(SparkSourceError, match=f"position {victim}: damaged bytes"):
            reader.partitions()
