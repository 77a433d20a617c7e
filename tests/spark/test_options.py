"""The ``compactlog`` Spark format's options are as strict as Spark's Kafka source's: unknown
names are refused naming the closest known one; ``assign``, the timestamp options and
``maxRecordsPerPartition`` work as Spark's Kafka source has them; errors reach the user as one
line; ``maxOffsetsPerTrigger`` counts records, so a compacted backlog takes few micro-batches.

Most checks plan without Spark (the reader classes called directly); one Spark job per
behaviour shows it end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyspark.sql.streaming.datasource import ReadMaxRows
from pyspark.sql.types import StructType

from compactlog.errors import ConfigError, SparkSourceError
from compactlog.spark._options import BATCH_READ, STREAM_READ, check_options
from compactlog.spark.datasource import CompactlogDataSource
from compactlog.spark.source import LogReader, SegmentSplit, plan_ranges, read_split
from compactlog.spark.stream import (
    LogStreamReader,
    RecordCursor,
    RefusedStreamReader,
    advance_records,
    rate_limit,
)
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed

NOW = 1_700_000_000_000


@pytest.fixture
def stamped(tmp_path: Path) -> Path:
    """``t``: 2 partitions of 30 records; record ``i`` of partition ``p`` has timestamp
    ``NOW + 10 * i + p``, in batches of 3 (small segments). ``u``: 1 partition, 5 records."""
    data = tmp_path / "data"
    with Store.open(data, ManualClock(NOW)) as store:
        store.create_topic("t", 2, {"segment.bytes": 1024})
        store.create_topic("u", 1)
        for p in range(2):
            for i in range(0, 30, 3):
                rows = [(b"k%d" % j, b"v%d" % j) for j in range(i, i + 3)]
                for j, row in enumerate(rows):  # one timestamp per record: append singly
                    store.append("t", p, [row], timestamp=NOW + 10 * (i + j) + p)
        for i in range(5):
            store.append("u", 0, [(b"k", b"%d" % i)], timestamp=NOW + i)
    return data


def _ranges(data: Path, **options: str) -> dict[tuple[str, int], tuple[int, int]]:
    opts = {"path": str(data), **{k.lower(): v for k, v in options.items()}}
    return {(r.topic, r.partition): (r.start, r.stop) for r in plan_ranges(str(data), opts)}


# --- option names ----------------------------------------------------------------------------


def test_unknown_options_name_the_closest_known_one(tmp_path: Path) -> None:
    lower = {"path": str(tmp_path), "subscrbe": "orders"}  # as Spark hands them: lower-cased
    with pytest.raises(
        ConfigError, match=r"unknown option subscrbe .*\(did you mean subscribe\?\)"
    ):
        check_options(lower, BATCH_READ, "a batch read")
    with pytest.raises(ConfigError, match=r"did you mean startingOffsets\?"):
        check_options({"startingoffset": "earliest"}, STREAM_READ, "a streaming read")
    with pytest.raises(ConfigError, match=r"unknown option zzz for a batch read; the options"):
        check_options({"zzz": "1"}, BATCH_READ, "a batch read")
    check_options({"path": "x", "STARTINGOFFSETS": "earliest"}, BATCH_READ, "a batch read")
    for name, message in [
        ("endingoffsets", "option endingOffsets is not valid for a streaming read"),
        ("endingtimestamp", "option endingTimestamp is not valid for a streaming read"),
        ("kafka.bootstrap.servers", "not a broker"),
        ("groupidprefix", "option groupIdPrefix of Spark's Kafka source is not supported"),
        ("minoffsetspertrigger", "option minOffsetsPerTrigger of Spark's Kafka source"),
    ]:
        with pytest.raises(ConfigError, match=message):
            check_options({name: "1"}, STREAM_READ, "a streaming read")
    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger is not valid for a batch read"):
        check_options({"maxoffsetspertrigger": "1"}, BATCH_READ, "a batch read")

    # Each entry point of the format checks its own use's names.
    def source(**options: str) -> CompactlogDataSource:
        return CompactlogDataSource({"path": str(tmp_path), **options})

    with pytest.raises(ConfigError, match="did you mean subscribe"):
        source(subscrbe="x").schema()
    with pytest.raises(ConfigError, match="unknown option topic for a batch read"):
        source(topic="x").reader(StructType())
    with pytest.raises(ConfigError, match="unknown option topik for a batch write"):
        source(topik="x").writer(StructType(), False)
    refused = source(endingoffsets="latest").streamReader(StructType())
    assert isinstance(refused, RefusedStreamReader)
    with pytest.raises(ConfigError, match="endingOffsets is not valid for a streaming read"):
        refused.initialOffset()
    refused.stop()  # PySpark calls it after the error: it must not raise


def test_a_typo_fails_the_spark_read_instead_of_reading_every_topic(
    spark: Any, stamped: Path
) -> None:
    reader = spark.read.format("compactlog").option("subscrbe", "u")
    with pytest.raises(Exception, match=r"unknown option subscrbe .*did you mean subscribe") as e:
        reader.load(str(stamped)).count()
    assert "Traceback" not in str(e.value)
    assert spark.read.format("compactlog").option("subScribe", "u").load(str(stamped)).count() == 5


# --- assign, timestamps, maxRecordsPerPartition ----------------------------------------------


def test_assign_reads_the_named_partitions(spark: Any, stamped: Path) -> None:
    assert _ranges(stamped, assign='{"t": [1], "u": [0]}') == {("t", 1): (0, 30), ("u", 0): (0, 5)}
    for bad in ["t", '{"t": 1}', '{"t": ["x"]}', "[1]", "{}"]:
        with pytest.raises(ConfigError, match="option assign"):
            _ranges(stamped, assign=bad)
    with pytest.raises(ConfigError, match="only one of the options assign and subscribe"):
        _ranges(stamped, assign='{"t": [0]}', subscribe="t")
    with pytest.raises(SparkSourceError, match="option assign names t-7, which the data"):
        _ranges(stamped, assign='{"t": [0, 7]}')

    df = spark.read.format("compactlog").option("assign", '{"t": [1]}').load(str(stamped))
    assert {(r.topic, r.partition) for r in df.select("topic", "partition").collect()} == {("t", 1)}


def test_timestamp_options_find_the_earliest_offset_at_or_after(stamped: Path) -> None:
    everything = {("t", 0): (0, 30), ("t", 1): (0, 30), ("u", 0): (0, 5)}
    # t-0 record i has NOW + 10i, t-1 NOW + 10i + 1, u-0 NOW + i.
    assert _ranges(stamped, startingTimestamp=str(NOW)) == everything
    assert _ranges(stamped, subscribe="t", startingTimestamp=str(NOW + 41)) == {
        ("t", 0): (5, 30),
        ("t", 1): (4, 30),
    }
    assert _ranges(stamped, subscribe="t", endingTimestamp=str(NOW + 41)) == {
        ("t", 0): (0, 5),
        ("t", 1): (0, 4),
    }
    by = json.dumps({"t": {"0": NOW + 100, "1": NOW + 101}})
    assert _ranges(stamped, subscribe="t", startingOffsetsByTimestamp=by) == {
        ("t", 0): (10, 30),
        ("t", 1): (10, 30),
    }
    assert _ranges(stamped, subscribe="t", endingOffsetsByTimestamp=by) == {
        ("t", 0): (0, 10),
        ("t", 1): (0, 10),
    }
    # Spark's preference: <x>Timestamp over <x>OffsetsByTimestamp over <x>Offsets.
    assert _ranges(
        stamped,
        subscribe="u",
        startingTimestamp=str(NOW + 3),
        startingOffsetsByTimestamp=json.dumps({"u": {"0": NOW}}),
        startingOffsets="earliest",
    ) == {("u", 0): (3, 5)}

    # No record late enough: a start fails (strategy "error", the default) or starts at the
    # end ("latest"); an end is the log end.
    late = str(NOW + 10_000)
    with pytest.raises(SparkSourceError, match=r"no record of u-0 has a timestamp at or after"):
        _ranges(stamped, subscribe="u", startingTimestamp=late)
    assert (
        _ranges(
            stamped,
            subscribe="u",
            startingTimestamp=late,
            startingOffsetsByTimestampStrategy="LATEST",
        )
        == {}
    )
    assert _ranges(stamped, subscribe="u", endingTimestamp=late) == {("u", 0): (0, 5)}

    for options, message in [
        ({"startingTimestamp": "soon"}, "option startingTimestamp must be milliseconds"),
        ({"endingTimestamp": "-5"}, "option endingTimestamp must be a timestamp >= 0"),
        ({"startingOffsetsByTimestamp": "{"}, "option startingOffsetsByTimestamp must be JSON"),
        ({"startingOffsetsByTimestampStrategy": "skip"}, 'must be "error" or "latest"'),
        ({"startingOffsetsByTimestamp": json.dumps({"t": {"0": NOW}})}, r"missing: t-1, u-0"),
        ({"startingOffsets": json.dumps({"t": {"0": -1}})}, "cannot be latest"),
        ({"endingOffsets": json.dumps({"t": {"0": -2}})}, "cannot be earliest"),
    ]:
        with pytest.raises(ConfigError, match=message):
            _ranges(stamped, **options)


def test_a_stream_starts_at_a_timestamp(stamped: Path) -> None:
    def initial(**options: str) -> dict[str, Any]:
        opts = {"path": str(stamped), **{k.lower(): v for k, v in options.items()}}
        return LogStreamReader(opts, headers=False).initialOffset()

    assert initial(subscribe="t", startingTimestamp=str(NOW + 41)) == {"t": {"0": 5, "1": 4}}
    by = json.dumps({"u": {"0": NOW + 2}})
    assert initial(assign='{"u": [0]}', startingOffsetsByTimestamp=by) == {"u": {"0": 2}}
    late = str(NOW + 10_000)
    assert initial(
        subscribe="u", startingTimestamp=late, startingOffsetsByTimestampStrategy="latest"
    ) == {"u": {"0": 5}}
    with pytest.raises(SparkSourceError, match="no record of u-0"):
        initial(subscribe="u", startingTimestamp=late)


def test_max_records_per_partition_caps_every_task(spark: Any, tmp_path: Path) -> None:
    """Counted in records: big batches are shared by several tasks, a compacted range holds
    fewer records than offsets."""
    data = tmp_path / "data"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 4096})
        for i in range(0, 300, 25):  # batches of 25 records
            store.append("c", 0, [(b"k%d" % (j % 120), b"v%d" % j) for j in range(i, i + 25)])
        store.roll("c", 0)
        manager_of(store).clean_log("c", 0)
        expected = [r.offset for r in store.read("c", 0)]
    assert len(expected) == 120 and expected[-1] == 299

    opts = {"path": str(data), "subscribe": "c", "maxrecordsperpartition": "7"}
    splits = LogReader(opts, headers=False).partitions()
    assert all(isinstance(s, SegmentSplit) for s in splits)
    read = [
        [o.as_py() for batch in read_split(s, False) for o in batch.column("offset")]  # type: ignore[arg-type]
        for s in splits
    ]
    assert all(len(offsets) <= 7 for offsets in read)
    assert [o for offsets in read for o in offsets] == expected  # each once, in order
    assert len(splits) == 18  # ceil(120 / 7): each task is filled before the next
    with pytest.raises(ConfigError, match="option maxRecordsPerPartition must be at least 1"):
        LogReader({**opts, "maxrecordsperpartition": "0"}, headers=False)

    df = (
        spark.read.format("compactlog")
        .option("subscribe", "c")
        .option("maxRecordsPerPartition", "50")
        .load(str(data))
    )
    assert df.rdd.getNumPartitions() == 3
    assert sorted(r.offset for r in df.select("offset").collect()) == expected


# --- errors as one line ----------------------------------------------------------------------


def test_sink_errors_are_one_readable_line(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Store.open(data) as store:
        store.create_topic("table", 1, {"cleanup.policy": "compact"})
    df = spark.createDataFrame([(None, b"v")], "key BINARY, value BINARY")

    def writer() -> Any:  # DataFrameWriter.mode() changes the writer: a new one each time
        return df.write.format("compactlog").option("topic", "table")

    with pytest.raises(Exception) as refused:
        writer().mode("append").save(str(data))
    message = str(refused.value)
    assert "compactlog.errors.InvalidRecordError: Compacted topic cannot accept message" in message
    assert "Traceback" not in message and 'File "' not in message
    assert len(message.strip().splitlines()) <= 2  # the error, then Spark's " SQLSTATE: ..."

    # Spark refuses save()'s default mode (ErrorIfExists) before the source sees the write;
    # its message names Append, and overwrite is refused by the sink as append-only.
    with pytest.raises(Exception, match=r'cannot be written in the "ErrorIfExists" mode.*Append'):
        writer().save(str(data))
    with pytest.raises(Exception, match=r"append-only: write with mode\('append'\)") as e:
        writer().mode("overwrite").save(str(data))
    assert "Traceback" not in str(e.value)

    # An error in a task (an executor's Python worker) is one line too.
    no_topic = spark.createDataFrame([(b"k", b"v", None)], "key BINARY, value BINARY, topic STRING")
    with pytest.raises(Exception, match=r"SinkError: a row has a null 'topic'") as e:
        no_topic.write.format("compactlog").mode("append").save(str(data))
    assert "Traceback" not in str(e.value) and 'File "' not in str(e.value)


def test_a_stream_with_ending_offsets_reports_that_alone(spark: Any, stamped: Path) -> None:
    query = (
        spark.readStream.format("compactlog")
        .option("endingOffsets", "latest")
        .load(str(stamped))
        .writeStream.format("noop")
        .option("checkpointLocation", str(stamped.parent / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception) as failed:
        query.awaitTermination()
    message = str(failed.value)
    assert "ConfigError: option endingOffsets is not valid for a streaming read" in message
    assert "UnboundLocalError" not in message and "Traceback" not in message


# --- maxOffsetsPerTrigger over a compacted backlog -------------------------------------------


def test_available_now_over_a_compacted_backlog_plans_by_records(
    spark: Any, tmp_path: Path
) -> None:
    """58 records left over 2,000 offsets, ``maxOffsetsPerTrigger=20``: Spark's Kafka source
    caps offsets and would run 100 micro-batches, most of them empty; this source caps records
    and runs 3 (20, 20 and 18 records)."""
    data = tmp_path / "data"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 8192})
        for i in range(0, 2000, 50):
            rows = [
                (b"s%d" % j if j % 35 == 0 and j < 1995 else b"dup", b"v%d" % j)
                for j in range(i, i + 50)
            ]
            store.append("c", 0, rows, timestamp=NOW + i)
        store.roll("c", 0)
        manager_of(store).clean_log("c", 0)
        kept = [r.offset for r in store.read("c", 0)]
        end = store.log_end_offset("c", 0)
    assert len(kept) == 58 and end == 2000
    assert kept == [*range(0, 1995, 35), 1999]  # a record every 35 offsets

    spark_kafka_batches = 0
    start, ends = {("c", 0): 0}, {("c", 0): end}
    while start != ends:
        start = rate_limit(20, start, ends)
        spark_kafka_batches += 1
    assert spark_kafka_batches == 100

    batches: dict[int, list[int]] = {}

    def collect(df: Any, batch_id: int) -> None:
        batches[batch_id] = sorted(r.offset for r in df.select("offset").collect())

    query = (
        spark.readStream.format("compactlog")
        .option("subscribe", "c")
        .option("maxOffsetsPerTrigger", "20")
        .load(str(data))
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert [len(batches[i]) for i in sorted(batches)] == [20, 20, 18]
    assert [o for i in sorted(batches) for o in batches[i]] == kept

    # The plan without Spark: each end is the offset of the first record left out.
    reader = LogStreamReader({"path": str(data), "subscribe": "c"}, headers=False)
    first = reader.latestOffset(reader.initialOffset(), ReadMaxRows(20))
    assert first == {"c": {"0": kept[20]}}
    assert reader.latestOffset(first, ReadMaxRows(20)) == {"c": {"0": kept[40]}}
    assert reader.latestOffset({"c": {"0": kept[40]}}, ReadMaxRows(20)) == {"c": {"0": 2000}}


def test_record_counting_resumes_where_it_stopped_and_survives_a_cleaning(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 4096})
        for i in range(200):
            store.append("c", 0, [(b"k%d" % (i % 50), b"v%d" % i)])
        store.roll("c", 0)
        directory = str(data / "c-0")
        cursors: dict[str, RecordCursor] = {}
        assert advance_records(directory, 0, 30, 200, cursors) == 30
        assert cursors[directory].base_offset == 30
        assert advance_records(directory, 30, 30, 200, cursors) == 60  # from the cursor
        manager_of(store).clean_log("c", 0)  # keeps 150..199, the last value of each key
        assert [r.offset for r in store.read("c", 0)] == list(range(150, 200))
        assert advance_records(directory, 60, 30, 200, cursors) == 180
        assert advance_records(directory, 180, 30, 200, cursors) == 200
        assert advance_records(directory, 0, 5, 140, {}) == 140  # nothing left below 140


def test_max_records_per_partition_with_offset_ranges_bytes_and_chunks(
    stamped: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("compactlog.spark.source.CHUNK_BYTES", 200)
    opts = {
        "path": str(stamped),
        "subscribe": "t",
        "startingoffsets": json.dumps({"t": {"0": 5, "1": 7}}),
        "endingoffsets": json.dumps({"t": {"0": 25}}),
        "maxrecordsperpartition": "6",
        "maxbytespersplit": "300",  # about 4 single-record batches
    }
    splits = LogReader(opts, headers=False).partitions()
    assert all(isinstance(s, SegmentSplit) for s in splits)
    read = [
        [(s.partition, o.as_py()) for b in read_split(s, False) for o in b.column("offset")]  # type: ignore[arg-type]
        for s in splits
    ]
    assert all(0 < len(rows) <= 6 for rows in read)
    assert [r for rows in read for r in rows] == [(0, o) for o in range(5, 25)] + [
        (1, o) for o in range(7, 30)
    ]
    assert any(s.cuts for s in splits)  # 200-byte chunks inside a task's range
