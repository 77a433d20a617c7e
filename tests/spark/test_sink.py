"""The Spark sink (``df.write``/``df.writeStream`` into a data directory): placement, codecs,
validation before the first append, and exactly-once commits under retries and replays."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from compactlog.errors import MessageTooLargeError, SinkError, StorageError
from compactlog.records import Compression
from compactlog.spark import sink
from compactlog.spark._staging import (
    STAGING_DIR,
    Journal,
    sinks_dir,
    stream_journal_name,
    write_journal,
)
from compactlog.storage.partitioner import partition_for_key
from compactlog.storage.store import Store

pytestmark = pytest.mark.spark

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
FULL_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", HEADERS),
        StructField("timestamp", TimestampType()),
        StructField("ignored", LongType()),
    ]
)
UTC = dt.UTC


def make_store(data: Path, topic: str = "events", partitions: int = 3, **config: str) -> None:
    with Store.open(data) as store:
        store.create_topic(topic, partitions, config)


def records(data: Path, topic: str = "events") -> dict[int, list[Any]]:
    with Store.open(data) as store:
        return {p: list(store.read(topic, p)) for p in range(store.partitions(topic))}


def ts(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=UTC)


def test_round_trip_places_every_row_like_kafka(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_store(data)
    rows = [
        (b"k0", b"v0", 2, [("h", b"x"), ("n", None)], ts(1_700_000_000_123), 1),
        (b"k1", b"v1", None, [], ts(1_700_000_000_456), 2),
        (b"k2", b"v2", None, None, None, 3),
        (None, b"v3", None, None, ts(1_700_000_001_000), 4),
        (None, None, 0, None, ts(1_700_000_002_000), 5),
        (b"k1", b"v5", None, [("a", b"1")], ts(1_700_000_003_000), 6),
        (None, b"v6", None, None, ts(1_700_000_004_000), 7),
        (None, b"v7", None, None, ts(1_700_000_005_000), 8),
    ]
    df = spark.createDataFrame(rows, FULL_SCHEMA).coalesce(1)
    before = dt.datetime.now(UTC).timestamp() * 1000
    df.write.format("compactlog").mode("append").option("topic", "events").save(str(data))
    after = dt.datetime.now(UTC).timestamp() * 1000

    got = records(data)
    assert sum(len(v) for v in got.values()) == len(rows)
    keyless_partitions = []
    for partition, recs in got.items():
        assert [r.offset for r in recs] == list(range(len(recs)))
        for rec in recs:
            (row,) = [r for r in rows if r[0] == rec.key and r[1] == rec.value]
            key, _, explicit, headers, stamp, _ = row
            if explicit is not None:
                assert partition == explicit
            elif key is not None:
                assert partition == partition_for_key(key, 3)
            else:
                keyless_partitions.append(partition)
            assert rec.headers == tuple(headers or ())
            if stamp is None:
                assert before - 1 <= rec.timestamp <= after + 1
            else:
                assert rec.timestamp == int(stamp.timestamp() * 1000)
    # keyless rows go round-robin: three of them cover the three partitions
    assert sorted(keyless_partitions) == [0, 1, 2]
    # row order is kept within a partition: k1's two values in the order written
    k1 = [r.value for r in got[partition_for_key(b"k1", 3)] if r.key == b"k1"]
    assert k1 == [b"v1", b"v5"]
    assert not (data / STAGING_DIR).exists()


def test_every_codec_round_trips(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    with Store.open(data) as store:
        for codec in codecs:
            store.create_topic(f"t-{codec}", 1)
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("key", StringType()),
            StructField("value", StringType()),
        ]
    )
    for codec in codecs:
        rows = [(f"t-{codec}", f"key{i}", f"value {i} " * 20) for i in range(50)]
        df = spark.createDataFrame(rows, schema).coalesce(1)
        df.write.format("compactlog").mode("append").option("compression", codec).save(str(data))
    with Store.open(data) as store:
        for codec in codecs:
            got = list(store.read(f"t-{codec}", 0))
            assert [(r.key, r.value) for r in got] == [
                (f"key{i}".encode(), f"value {i} ".encode() * 20) for i in range(50)
            ]
            batches = list(store.log(f"t-{codec}", 0).iter_batches(0))
            assert {b.header.compression for b in batches} == {Compression.from_name(codec)}


def test_null_key_into_compacted_topic_appends_nothing(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_store(data, "table", 2, **{"cleanup.policy": "compact"})
    rows = [(b"a", b"1"), (b"b", b"2"), (None, b"3"), (b"c", b"4")]
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
    df = spark.createDataFrame(rows, schema)
    with pytest.raises(Exception, match="Compacted topic cannot accept message without key"):
        df.write.format("compactlog").mode("append").option("topic", "table").save(str(data))
    assert records(data, "table") == {0: [], 1: []}
    assert not list((data / STAGING_DIR).glob("*/*.arrow"))


def test_bad_input_is_refused_with_a_clear_error(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_store(data)
    no_value = spark.createDataFrame([(b"k",)], "key BINARY")
    with pytest.raises(Exception, match="needs a 'value' column"):
        no_value.write.format("compactlog").mode("append").option("topic", "events").save(str(data))
    # The same checks, without a Spark job each:
    with pytest.raises(SinkError, match="column 'partition' must be int, not bigint"):
        sink.check_sink_schema(
            StructType([StructField("value", BinaryType())]).add("partition", LongType())
        )
    with pytest.raises(SinkError, match="column 'key' must be binary or string"):
        sink.check_sink_schema(StructType().add("value", StringType()).add("key", IntegerType()))
    with pytest.raises(SinkError, match="'headers' must be"):
        sink.check_sink_schema(
            StructType().add("value", StringType()).add("headers", ArrayType(StringType()))
        )
    value_only = StructType().add("value", BinaryType())
    with pytest.raises(SinkError, match="set the 'topic' option or add a 'topic' column"):
        sink.LogWriter({"path": str(data)}, value_only, False)
    with pytest.raises(SinkError, match="append-only"):
        sink.LogWriter({"path": str(data), "topic": "events"}, value_only, True)
    with pytest.raises(SinkError, match="compression"):
        sink.LogWriter(
            {"path": str(data), "topic": "events", "compression": "brotli"}, value_only, False
        )
    with pytest.raises(SinkError, match="checkpointLocation"):
        sink.LogStreamWriter({"path": str(data), "topic": "events"}, value_only, False)


def _batch(values: list[bytes], keys: list[bytes | None] | None = None) -> pa.RecordBatch:
    keys = keys if keys is not None else [v[:1] for v in values]
    return pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.binary()), pa.array(values, pa.binary())], names=["key", "value"]
    )


KV = StructType().add("key", BinaryType()).add("value", BinaryType())


def test_only_the_committed_attempt_lands(tmp_path: Path) -> None:
    """A retried or speculative task writes twice; Spark commits one message per task."""
    data = tmp_path / "data"
    make_store(data, "t", 1)
    writer = sink.LogWriter({"path": str(data), "topic": "t"}, KV, False)
    first = writer.write(iter([_batch([b"a1", b"b1"])]))
    second = writer.write(iter([_batch([b"a1", b"b1"])]))
    other_task = dataclasses.replace(writer.write(iter([_batch([b"c1"])])), task=1)
    assert first.path != second.path and first.path and second.path
    writer.commit([second, other_task])
    assert [r.value for r in records(data, "t")[0]] == [b"a1", b"b1", b"c1"]
    assert not (data / STAGING_DIR).exists()  # the losing attempt's file went with it


def test_batches_fit_small_segments_and_a_record_too_big_for_one_is_refused(
    tmp_path: Path,
) -> None:
    """segment.bytes below 1 MiB (and below max.message.bytes): the commit cuts batches that
    fit a segment; a record no segment can hold fails the write before any append."""
    data = tmp_path / "data"
    make_store(data, "t", 1, **{"segment.bytes": "16384"})
    writer = sink.LogWriter({"path": str(data), "topic": "t"}, KV, False)
    values = [b"v%04d" % i + b"." * 95 for i in range(2000)]
    writer.commit([writer.write(iter([_batch(values)]))])
    assert [r.value for r in records(data, "t")[0]] == values
    with Store.open(data) as store:
        assert len(store.segments("t", 0)) > 10
    big = writer.write(iter([_batch([b"x" * 20_000])]))
    with pytest.raises(MessageTooLargeError, match=r"segment\.bytes=16384"):
        writer.commit([big])
    assert len(records(data, "t")[0]) == 2000


def test_store_locked_by_another_process_names_the_lock(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_store(data, "t", 1)
    writer = sink.LogWriter({"path": str(data), "topic": "t"}, KV, False)
    message = writer.write(iter([_batch([b"x"])]))
    with Store.open(data), pytest.raises(StorageError, match=r"is locked \(.*\.lock is held"):
        writer.commit([message])
    writer.abort([message])
    assert not os.path.exists(str(message.path))
    assert records(data, "t")[0] == []


def test_stream_commit_is_idempotent_per_batch_id(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_store(data, "t", 1)
    opts = {"path": str(data), "topic": "t", "checkpointLocation": str(tmp_path / "ck")}
    writer = sink.LogStreamWriter(opts, KV, False)
    writer.commit([writer.write(iter([_batch([b"b0"])]))], 0)
    writer.commit([writer.write(iter([_batch([b"b0"])]))], 0)  # replayed after a restart
    # a new writer object (what a restarted driver builds) still knows batch 0
    again = sink.LogStreamWriter(opts, KV, False)
    again.commit([again.write(iter([_batch([b"b0"])]))], 0)
    again.commit([again.write(iter([_batch([b"b1"])]))], 1)
    assert [r.value for r in records(data, "t")[0]] == [b"b0", b"b1"]
    assert not (data / STAGING_DIR).exists()


def test_a_commit_cut_short_is_finished_exactly_once(tmp_path: Path) -> None:
    """The driver died after appending a prefix: the replayed batch completes it, once."""
    data = tmp_path / "data"
    make_store(data, "t", 2)
    opts = {"path": str(data), "topic": "t", "sinkId": "q1"}
    writer = sink.LogStreamWriter(opts, KV, False)
    keys = [f"k{i}".encode() for i in range(40)]
    messages = [
        dataclasses.replace(writer.write(iter([_batch(keys[:25], keys[:25])])), task=0),
        dataclasses.replace(writer.write(iter([_batch(keys[25:], keys[25:])])), task=1),
    ]
    files = [m.path for m in messages]
    store = Store.open(data)
    journal_path = os.path.join(sinks_dir(store.path), stream_journal_name("q1"))
    pending = sink._plan(store, files, "none", 0)
    write_journal(store.fs, journal_path, Journal("q1", None, pending))
    # "Crash" after the first task's rows were appended: a prefix of every partition's plan.
    sink._apply(store, dataclasses.replace(pending, files=files[:1]), journal_path)
    store.close()
    assert sum(len(v) for v in records(data, "t").values()) == 25

    # Spark replays batch 0 with new staged files; the journal's plan wins, once.
    retry = [writer.write(iter([_batch(keys, keys)]))]
    writer.commit(retry, 0)
    writer.commit([writer.write(iter([_batch([b"z"], [b"z"])]))], 1)
    got = records(data, "t")
    assert sorted(r.key for recs in got.values() for r in recs) == sorted([*keys, b"z"])
    for partition, recs in got.items():
        assert all(partition_for_key(r.key, 2) == partition for r in recs)
        assert [r.offset for r in recs] == list(range(len(recs)))


def test_streaming_available_now_twice_neither_duplicates_nor_loses(
    spark: Any, tmp_path: Path
) -> None:
    data, source, checkpoint = tmp_path / "data", tmp_path / "in", tmp_path / "ck"
    make_store(data, "t", 2)
    source.mkdir()
    schema = StructType([StructField("key", StringType()), StructField("value", StringType())])

    def add_file(name: str, start: int, count: int) -> None:
        rows = [(f"k{i}", f"v{i}") for i in range(start, start + count)]
        out = tmp_path / f"out-{name}"
        spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(out))
        for i, part in enumerate(sorted(out.glob("*.parquet"))):
            part.rename(source / f"{name}-{i}.parquet")  # whole files appear at once

    def run_stream() -> None:
        query = (
            spark.readStream.schema(schema)
            .parquet(str(source))
            .writeStream.format("compactlog")
            .option("topic", "t")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(str(data))
        )
        query.awaitTermination()
        assert query.exception() is None

    add_file("a", 0, 30)
    run_stream()
    add_file("b", 30, 20)
    run_stream()
    run_stream()  # nothing new: appends nothing
    got = records(data, "t")
    values = sorted(r.value for recs in got.values() for r in recs)
    assert values == sorted(f"v{i}".encode() for i in range(50))
