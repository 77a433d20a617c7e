"""The ``compactlog`` Spark data source, streaming read: micro-batches tile each partition's
offsets with no record lost or read twice, across appends, restarts, replays, read limits,
compaction and segment swaps; its options behave as Spark's Kafka source's."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import compactlog
from compactlog.errors import ConfigError, SparkSourceError
from compactlog.records import build_batch
from compactlog.spark import stream
from compactlog.spark.stream import (
    LogStreamReader,
    StreamSplit,
    _inode,
    offsets_from_json,
    rate_limit,
)
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed

NOW = 1_700_000_000_000
Row = tuple[str, int, int, bytes | None]  # topic, partition, offset, value


def _store_rows(store: compactlog.Store, *topics: str) -> list[Row]:
    out = []
    for topic in topics:
        for partition in range(store.partitions(topic)):
            out.extend((topic, partition, r.offset, r.value) for r in store.read(topic, partition))
    return sorted(out)


def _rows_on_disk(data: Path, *topics: str) -> list[Row]:
    with open_managed(data, ManualClock(NOW)) as store:
        return _store_rows(store, *topics)


def _stream(
    spark: Any, data: Path, checkpoint: Path, columns: set[str] | None = None, **options: str
) -> dict[int, list[Row]]:
    """One ``availableNow`` run of a stream over ``data``: ``{batch id: rows}``, as a
    ``foreachBatch`` sink sees them (their column names added to ``columns``)."""
    batches: dict[int, list[Row]] = {}

    def collect(df: Any, batch_id: int) -> None:
        rows = [(r.topic, r.partition, r.offset, r.value) for r in df.collect()]
        batches[batch_id] = sorted(rows)
        if columns is not None:
            columns.update(df.columns)

    reader = spark.readStream.format("compactlog")
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (
        reader.load(str(data))
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return batches


def _reader(data: Path, **options: str) -> LogStreamReader:
    opts = {"path": str(data), **{k.lower(): v for k, v in options.items()}}
    return LogStreamReader(opts, headers=False)


def _read(reader: LogStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[Row]:
    """A micro-batch planned and read without Spark."""
    rows: list[Row] = []
    for split in reader.partitions(start, end):
        for batch in reader.read(split):
            columns = [batch.column(c).to_pylist() for c in ("topic", "partition", "offset")]
            rows.extend(zip(*columns, batch.column("value").to_pylist(), strict=True))
    return sorted(rows)


def _append(store: compactlog.Store, topic: str, partition: int, count: int, seq: int) -> int:
    for i in range(seq, seq + count):
        records = [(b"k%d" % (i % 7), b"v%d" % i * 10) for _ in range(1 + i % 3)]
        store.append(topic, partition, records, timestamp=NOW + i)
    return seq + count


def test_a_restarted_stream_reads_new_appends_and_topics_once(spark: Any, tmp_path: Path) -> None:
    """The store stays open (as a producer's would) while two runs read it without its lock.
    Between the runs: appends, a new topic matching the pattern, and a lost commit, so that the
    second run first replays the first run's last micro-batch."""
    data, checkpoint = tmp_path / "data", tmp_path / "checkpoint"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("orders", 3)
        seq = 0
        for partition in range(3):
            seq = _append(store, "orders", partition, 15, seq)
        first = _stream(spark, data, checkpoint, subscribePattern="orders|audit")
        assert sorted(r for rows in first.values() for r in rows) == _store_rows(store, "orders")

        seq = _append(store, "orders", 1, 20, seq)
        store.create_topic("audit", 2)
        seq = _append(store, "audit", 1, 5, seq)
        last = max(first)
        for name in (str(last), f".{last}.crc"):  # as if the driver died before the commit
            (checkpoint / "commits" / name).unlink()
        second = _stream(spark, data, checkpoint, subscribePattern="orders|audit")
        everything = _store_rows(store, "audit", "orders")

    assert min(second) == last and second[last] == first[last]  # the replay reads the same rows
    merged = {**first, **second}  # as an idempotent sink keeps them: one write per batch id
    rows = [r for batch in merged.values() for r in batch]
    assert sorted(rows) == everything  # 0 missing, 0 duplicates
    assert {r[0] for rows in second.values() for r in rows} == {"orders", "audit"}


def test_max_offsets_per_trigger_splits_a_compacted_backlog_by_records(
    spark: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("c", 2, {"cleanup.policy": "compact", "segment.bytes": 1024})
        for i in range(260):
            store.append("c", int(i % 4 == 0), [(b"k%d" % (i % 9), b"v%d" % i * 30)], NOW + i)
        for partition in range(2):
            store.roll("c", partition)
            manager_of(store).clean_log("c", partition)
        ends = {("c", p): store.log_end_offset("c", p) for p in range(2)}
    expected = _rows_on_disk(data, "c")
    assert len(expected) < sum(ends.values())  # compaction left gaps

    limit = 4
    by_offsets = 0  # micro-batches of Spark's Kafka source, which caps offsets, not records
    start = {tp: 0 for tp in ends}
    while start != ends:
        start = rate_limit(limit, start, ends)
        by_offsets += 1
    planned = []  # each micro-batch's [start, end) by partition, as this source caps them
    reader = _reader(data, subscribe="c")
    begin = reader.initialOffset()
    while (end := reader.latestOffset(begin, ReadMaxRows(limit))) != begin:
        planned.append((offsets_from_json(begin), offsets_from_json(end)))
        begin = end
    assert len(planned) < by_offsets

    columns: set[str] = set()
    options = {"subscribe": "c", "maxOffsetsPerTrigger": str(limit), "includeHeaders": "true"}
    batches = _stream(spark, data, tmp_path / "checkpoint", columns, **options)
    assert "headers" in columns
    assert len(batches) == len(planned) > 4
    for batch_id, (lo, hi) in enumerate(planned):
        assert all(lo[("c", p)] <= o < hi[("c", p)] for _, p, o, _ in batches[batch_id])
        assert 0 < len(batches[batch_id]) <= limit  # records, not offsets
    assert sorted(r for rows in batches.values() for r in rows) == expected


def test_bad_options_are_named(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    with pytest.raises(Exception, match="option maxOffsetsPerTrigger must be an integer"):
        _stream(spark, tmp_path / "data", tmp_path / "ck", maxOffsetsPerTrigger="lots")

    data = tmp_path / "data"
    for options, message in [
        ({"endingOffsets": "latest"}, "option endingOffsets is not valid for a streaming read"),
        ({"maxOffsetsPerTrigger": "0"}, "option maxOffsetsPerTrigger must be at least 1"),
        ({"startingOffsets": "{oops"}, "option startingOffsets must be"),
        ({"subscribe": "a", "subscribePattern": "b"}, "only one of the options subscribe"),
        ({"subscribePattern": "("}, "option subscribePattern '\\(' is not a regex"),
        ({"failOnDataLoss": "maybe"}, "option failOnDataLoss must be true or false"),
        ({"maxBytesPerSplit": "-1"}, "option maxBytesPerSplit must be at least 1"),
    ]:
        with pytest.raises(ConfigError, match=message):
            _reader(data, **options)
    with pytest.raises(SparkSourceError, match="is not a compactlog offset"):
        _reader(data).latestOffset({"files": 3}, ReadAllAvailable())


@pytest.fixture
def three(tmp_path: Path) -> Path:
    """``t``: 3 partitions holding 10, 20 and 0 offsets (small segments)."""
    data = tmp_path / "data"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("t", 3, {"segment.bytes": 1024})
        for partition, count in enumerate([10, 20]):
            for i in range(count):
                store.append("t", partition, [(b"k%d" % i, b"x" * 40)], timestamp=NOW + i)
    return data


def test_starting_offsets(three: Path) -> None:
    def initial(**options: str) -> dict[str, Any]:
        return _reader(three, **options).initialOffset()

    assert initial() == {"t": {"0": 0, "1": 0, "2": 0}}
    assert initial(startingOffsets="latest") == {"t": {"0": 10, "1": 20, "2": 0}}
    wanted = json.dumps({"t": {"0": 4, "1": -1, "2": 99}})
    assert initial(startingOffsets=wanted) == {"t": {"0": 4, "1": 20, "2": 0}}
    assert initial(startingOffsets=json.dumps({"t": {"1": -2}})) == {"t": {"0": 0, "1": 0, "2": 0}}
    assert json.dumps(initial()) == '{"t": {"0": 0, "1": 0, "2": 0}}'


def test_read_limits_and_the_available_now_target(three: Path) -> None:
    reader = _reader(three, maxOffsetsPerTrigger="6")
    assert reader.getDefaultReadLimit() == ReadMaxRows(6)
    assert _reader(three).getDefaultReadLimit() == ReadAllAvailable()
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadMaxRows(6)) == {"t": {"0": 2, "1": 4, "2": 0}}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 10, "1": 20, "2": 0}}
    assert reader.reportLatestOffset() == {"t": {"0": 10, "1": 20, "2": 0}}

    reader.prepareForTriggerAvailableNow()
    with open_managed(three, ManualClock(NOW)) as store:
        store.append("t", 2, [(b"late", b"1")])
        store.create_topic("u", 1)
    target = {"t": {"0": 10, "1": 20, "2": 0}}
    assert reader.latestOffset(start, ReadAllAvailable()) == target  # nothing after the start
    assert reader.reportLatestOffset() == {"t": {"0": 10, "1": 20, "2": 1}, "u": {"0": 0}}


def test_rate_limit_is_spark_kafka_s() -> None:
    a, b, c = ("t", 0), ("t", 1), ("t", 2)
    # shares in proportion to the backlog, rounded down
    assert rate_limit(10, {a: 0, b: 0}, {a: 75, b: 25}) == {a: 7, b: 2}
    # a share below one offset is rounded up: no partition starves
    assert rate_limit(10, {a: 0, b: 5, c: 9}, {a: 1000, b: 6, c: 9}) == {a: 9, b: 6, c: 9}
    assert rate_limit(10, {a: 3}, {a: 3}) == {a: 3}
    assert rate_limit(100, {a: 3, b: 0}, {a: 5, b: 1}) == {a: 5, b: 1}


def test_a_micro_batch_is_its_offset_range_whatever_the_gaps(tmp_path: Path) -> None:
    """Ranges that start and end inside gaps of a compacted log, and in the middle of batches."""
    data = tmp_path / "data"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 1024})
        for i in range(120):
            records = [(b"k%d" % ((i + j) % 13), b"v%d" % i * 20) for j in range(3)]
            store.append("c", 0, records, timestamp=NOW + i)
        store.roll("c", 0)
        manager_of(store).clean_log("c", 0)
        end = store.log_end_offset("c", 0)
    everything = _rows_on_disk(data, "c")
    reader = _reader(data, maxBytesPerSplit="300")
    cuts = [0, 1, 5, 17, 100, 101, 250, end]
    rows = []
    for lo, hi in itertools.pairwise(cuts):
        batch = _read(reader, {"c": {"0": lo}}, {"c": {"0": hi}})
        assert batch == [r for r in everything if lo <= r[2] < hi]
        rows.extend(batch)
    assert rows == everything


def test_splits_planned_before_a_cleaning_are_read_by_offset(tmp_path: Path) -> None:
    """The cleaner swaps segments between planning and reading: each split's offsets are found
    again in the new files (and the records the cleaner dropped are gone)."""
    data = tmp_path / "data"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 1024})
        for i in range(150):
            store.append("c", 0, [(b"k%d" % (i % 5), b"v%d" % i * 20)], timestamp=NOW + i)
        store.roll("c", 0)
        reader = _reader(data, maxBytesPerSplit="200")
        splits = reader.partitions({"c": {"0": 0}}, {"c": {"0": 150}})
        assert len(splits) > 10
        manager_of(store).clean_log("c", 0)
    replaced = [s for s in splits if isinstance(s, StreamSplit) and _inode(s.path) != s.inode]
    assert len(replaced) == len(splits)
    offsets = []
    for split in splits:
        for batch in reader.read(split):
            offsets.extend(batch.column("offset").to_pylist())
    assert sorted(offsets) == [r[2] for r in _rows_on_disk(data, "c")]
    assert len(offsets) < 150


def test_offsets_deleted_before_the_stream_read_them_are_data_loss(tmp_path: Path) -> None:
    data = tmp_path / "data"
    start, end = {"t": {"0": 3}}, {"t": {"0": 40}}
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("t", 1, {"cleanup.policy": "delete", "segment.bytes": 1024})
        for i in range(40):
            store.append("t", 0, [(b"k", b"x" * 100)], timestamp=NOW + i)
        strict, lenient = _reader(data), _reader(data, failOnDataLoss="false")
        planned = strict.partitions(start, end)
        store.delete_records("t", 0, 25)
        store.run_retention()
        log_start = store.log_start_offset("t", 0)
    assert 0 < log_start <= 25

    # planned before retention deleted their segments: read by offset, what is left
    with pytest.raises(SparkSourceError, match=r"of t-0 were deleted.*failOnDataLoss=false"):
        [batch for split in planned for batch in strict.read(split)]
    offsets = [o for s in planned for b in lenient.read(s) for o in b.column("offset").to_pylist()]
    assert 3 < offsets[0] <= log_start and offsets == list(range(offsets[0], 40))

    # planned after
    with pytest.raises(SparkSourceError, match=f"offsets 3 to {log_start - 1} of t-0 were del"):
        strict.partitions(start, end)
    assert [r[2] for r in _read(lenient, start, end)] == list(range(log_start, 40))
    with pytest.raises(SparkSourceError, match="partition gone-0 is gone"):
        strict.partitions({"gone": {"0": 1}, "t": {"0": 30}}, end)
    with pytest.raises(SparkSourceError, match="went back from offset 50 to 40"):
        strict.partitions({"t": {"0": 50}}, end)


def test_the_log_end_is_that_of_the_last_complete_batch(three: Path) -> None:
    """A producer mid-append leaves a torn batch at the tail: the stream ends before it until
    it is whole (the walk resumes where the last one stopped, and starts again after a
    truncation)."""
    reader = _reader(three, subscribe="t")
    start = reader.initialOffset()
    segment = max((three / "t-1").glob("*.log"))
    whole = segment.read_bytes()
    assert reader.latestOffset(start, ReadAllAvailable())["t"]["1"] == 20
    batch = build_batch([(b"new", b"1"), (b"new", b"2")], base_offset=20, timestamps=NOW)
    with segment.open("ab") as f:
        f.write(batch[:30])
        f.flush()
        assert reader.latestOffset(start, ReadAllAvailable())["t"]["1"] == 20
        f.write(batch[30:])
    assert reader.latestOffset(start, ReadAllAvailable())["t"]["1"] == 22
    assert [r[2] for r in _read(reader, start, {"t": {"1": 22}})][-2:] == [20, 21]
    segment.write_bytes(whole[: len(whole) // 2])  # truncated: its tail batches are gone
    assert reader.latestOffset(start, ReadAllAvailable())["t"]["1"] < 20


def test_planning_waits_for_a_segment_swap_to_end(
    three: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing taken while the cleaner swaps segments may miss offsets: it is never used."""
    swap_range = three / "t-1" / "00000000000000000000.swaprange"
    swap_range.write_text("0 20\n")
    reader = _reader(three)
    monkeypatch.setattr(stream, "SWAP_WAIT_SECONDS", 0.2)
    with pytest.raises(SparkSourceError, match="t-1 has been in the middle of a segment swap"):
        reader.initialOffset()
    monkeypatch.setattr(stream, "SWAP_WAIT_SECONDS", 10.0)
    swap_ends = threading.Timer(0.1, swap_range.unlink)
    swap_ends.start()
    assert reader.initialOffset() == {"t": {"0": 0, "1": 0, "2": 0}}
    swap_ends.join()
    assert not swap_range.exists()
