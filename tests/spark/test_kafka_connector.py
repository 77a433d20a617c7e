"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10) against
``compactlog serve``, beside the ``compactlog`` data source reading the same data directory.

The connector's jars come from tests/jars/spark-kafka/pom.xml (4.2.0: Maven Central serves no
4.3.0 build) into .jars/spark-kafka/, which the session fixture puts on ``spark.jars``; without
them these tests skip. One broker process serves one data directory for the whole module; it is
built offline first (several partitions, headers, tombstones, compressed batches), then cleaned
by the log cleaner so that every partition has offset gaps, and one topic has its log start
moved by DeleteRecords.

Findings each test asserts, on the connector's known compacted-topic problems:

* Offset gaps left by compaction: the 4.x connector skips them (an offset at or above the log
  start with no record is "invisible", not lost) in batch and streaming reads, with
  ``failOnDataLoss`` true or false; JSON starting and ending offsets inside a gap work.
* "Cannot fetch offset": a starting offset below the log start offset (records deleted) fails
  the read with failOnDataLoss=true, and starts at the log start with false. compactlog's source
  does the same, from the files.
* ``minPartitions`` splits by offset count, so a compacted partition (a wide offset range, few
  records) gets many nearly empty tasks and a dense one a single large task; compactlog's source
  splits by bytes and spreads the records. Likewise ``maxOffsetsPerTrigger`` counts offsets in
  the connector (empty micro-batches over a gap) and records in compactlog's stream.
* ``headers`` of a record without any: null through the connector, an empty array from
  compactlog's source (the one difference in what both expose).
* Writing back with ``df.write.format("kafka")`` lands every row in the broker's topic.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from tests.broker.helpers.server import CliBroker
from tests.managed import manager_of, open_managed
from tests.spark.conftest import session_jars

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

#: Record timestamps: an hour ago, so that no retention or compaction lag depends on the clock.
NOW = int(time.time() * 1000) - 3_600_000
EVENTS = "events"  # 3 partitions, compacted: gaps everywhere
TRIMMED = "trimmed"  # 1 partition, DeleteRecords moved its log start to TRIM_AT
TRIM_AT = 20
SKEW = "skew"  # partition 0: compacted to a few records over a wide range; 1: dense
SKEW_SPARSE_OFFSETS = 1000
SKEW_DENSE = 200
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


Stored = dict[str, list[tuple[int, int, bytes | None]]]


def _build(data: Path) -> Stored:
    """Writes and cleans the module's topics; returns (partition, offset, value) of every record
    of each topic, as stored."""
    store = open_managed(data)
    try:
        store.create_topic(EVENTS, 3, {"cleanup.policy": "compact", "segment.bytes": 4096})
        codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
        for i in range(120):
            rows: list[Any] = [
                (b"k%d" % (j % 11), b"v%d-%d" % (i, j), [("n", b"%d" % i), ("empty", None)])
                for j in range(i % 4 + 1)
            ]
            if i % 17 == 0:
                rows.append((b"gone%d" % i, None))  # a tombstone (kept: within delete.retention)
            store.append(EVENTS, i % 3, rows, timestamp=NOW + i, compression=codecs[i % 5])
        store.create_topic(TRIMMED, 1)
        for i in range(50):
            store.append(TRIMMED, 0, [(b"t%d" % i, b"x%d" % i)], timestamp=NOW + i)
        store.delete_records(TRIMMED, 0, TRIM_AT)
        store.create_topic(SKEW, 2, {"cleanup.policy": "compact"})
        for i in range(0, SKEW_SPARSE_OFFSETS, 50):
            store.append(SKEW, 0, [(b"s%d" % (j % 5), b"%d" % j) for j in range(i, i + 50)])
        for i in range(SKEW_DENSE):  # one record per batch: byte splits can cut anywhere
            store.append(SKEW, 1, [(b"d%d" % i, b"x" * 100)], timestamp=NOW + i)
        manager = manager_of(store)
        for topic, partitions in ((EVENTS, 3), (SKEW, 2)):
            for p in range(partitions):
                store.roll(topic, p)
                manager.clean_log(topic, p)
        return {
            topic: [
                (p, r.offset, r.value)
                for p in range(store.partitions(topic))
                for r in store.read(topic, p, store.log_start_offset(topic, p))
            ]
            for topic in (EVENTS, TRIMMED, SKEW)
        }
    finally:
        manager_of(store).close()


class Served(CliBroker):
    """The module's ``compactlog serve``, with what its topics held when it started."""

    stored: Stored


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[Served]:
    """``compactlog serve`` over the module's data directory (its own cleaner off, so that the
    files stay as the test built them); needs Spark's Kafka connector on the session."""
    if not session_jars():
        pytest.skip("no .jars/spark-kafka (run scripts/setup-env.sh: Spark's Kafka connector)")
    root = tmp_path_factory.mktemp("kafkaconn")
    stored = _build(root / "data")
    broker = Served(root / "data", {"log.cleaner.enable": "false"}, root / "serve.log")
    broker.stored = stored
    broker.start()
    yield broker
    broker.stop()


def _kafka(spark: Any, broker: CliBroker, **options: str) -> Any:
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _files(spark: Any, broker: CliBroker, **options: str) -> Any:
    reader = spark.read.format("compactlog")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(str(broker.data_dir))


def _rows(df: Any, headers: bool = False) -> list[tuple[Any, ...]]:
    cols = COLUMNS + (["headers"] if headers else [])
    out = []
    for r in df.select(*cols).orderBy("topic", "partition", "offset").collect():
        row = tuple(r[c] for c in COLUMNS)
        if headers:
            # null for a record without headers, in both (test_headers_of_a_record_without_any)
            row += (None if r.headers is None else tuple((h.key, h.value) for h in r.headers),)
        out.append(row)
    return out


def test_a_batch_read_equals_the_compactlog_source(spark: Any, served: Served) -> None:
    via_broker = _rows(_kafka(spark, served, subscribe=EVENTS, includeHeaders="true"), True)
    via_files = _rows(_files(spark, served, subscribe=EVENTS, includeHeaders="true"), True)
    assert via_broker == via_files
    assert {row[3] for row in via_broker} == {0, 1, 2}
    assert any(row[1] is None for row in via_broker), "no tombstone read"
    assert any(h[1] is None for row in via_broker for h in row[7] or ()), "no null header value"
    offsets = [row[4] for row in via_broker if row[3] == 0]
    assert len(offsets) < offsets[-1] + 1, "cleaning left no gap in partition 0"


def test_headers_of_a_record_without_any(spark: Any, served: Served) -> None:
    """Spark's connector gives ``headers`` null for a record without headers (its
    KafkaRecordToRowConverter does), and so does compactlog's source: a query moves between
    them unchanged."""
    where = "key LIKE 'gone%'"  # the tombstones were appended without headers
    via_broker = _kafka(spark, served, subscribe=EVENTS, includeHeaders="true").where(where)
    via_files = _files(spark, served, subscribe=EVENTS, includeHeaders="true").where(where)
    assert {r.headers is None for r in via_broker.select("headers").collect()} == {True}
    assert {r.headers is None for r in via_files.select("headers").collect()} == {True}


def _gap_after(stored: list[tuple[int, int, bytes | None]], partition: int) -> int:
    """An offset of ``partition`` inside a compaction gap (no record has it, later ones do)."""
    offsets = sorted(o for p, o, _ in stored if p == partition)
    return next(a + 1 for a, b in itertools.pairwise(offsets) if b > a + 1)


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_json_offsets_inside_compaction_gaps(
    spark: Any, served: Served, fail_on_data_loss: str
) -> None:
    """Starting and ending offsets that fall in gaps: both sources read the records in between,
    and the connector reports no data loss (gaps above the log start are not loss)."""
    stored = served.stored[EVENTS]
    start0, end1 = _gap_after(stored, 0), _gap_after(stored, 1)
    options = {
        "subscribe": EVENTS,
        "startingOffsets": json.dumps({EVENTS: {"0": start0, "1": -2, "2": -2}}),
        "endingOffsets": json.dumps({EVENTS: {"0": -1, "1": end1, "2": -1}}),
        "failOnDataLoss": fail_on_data_loss,
    }
    want = [
        (p, o, v)
        for p, o, v in stored
        if not (p == 0 and o < start0) and not (p == 1 and o >= end1)
    ]
    for df in (_kafka(spark, served, **options), _files(spark, served, **options)):
        got = [(r[3], r[4], r[1]) for r in _rows(df)]
        assert got == want


def test_offsets_by_timestamp_agree(spark: Any, served: Served) -> None:
    """``startingOffsetsByTimestamp`` / ``endingTimestamp`` (ListOffsets by timestamp through
    the broker, the time indexes in the files) select the same rows in both sources."""
    start = {str(p): NOW + 30 + p for p in range(3)}
    options = {
        "subscribe": EVENTS,
        "startingOffsetsByTimestamp": json.dumps({EVENTS: start}),
        "endingTimestamp": str(NOW + 90),
    }
    via_broker = _rows(_kafka(spark, served, **options))
    assert via_broker == _rows(_files(spark, served, **options))
    stamps = {int(row[5].timestamp() * 1000) - NOW for row in via_broker}
    assert via_broker and min(stamps) >= 30 and max(stamps) < 90, sorted(stamps)


def test_a_start_below_the_log_start_is_data_loss(spark: Any, served: Served) -> None:
    """Records deleted below the log start (the connector's "Cannot fetch offset" path, an
    OffsetOutOfRangeException): failOnDataLoss=true fails the read in both sources; false
    starts at the log start in both."""
    options = {"subscribe": TRIMMED, "startingOffsets": json.dumps({TRIMMED: {"0": 5}})}
    with pytest.raises(
        Exception,
        match=r"(?s)Could not read records in offset \[5, 50\).*"
        r"OffsetOutOfRangeException",
    ):
        _kafka(spark, served, **options, failOnDataLoss="true").collect()
    with pytest.raises(Exception, match="asks for offset 5 of trimmed-0, but its log starts at 20"):
        _files(spark, served, **options, failOnDataLoss="true").collect()
    want = list(range(TRIM_AT, 50))
    for df in (
        _kafka(spark, served, **options, failOnDataLoss="false"),
        _files(spark, served, **options, failOnDataLoss="false"),
    ):
        assert [r.offset for r in df.orderBy("offset").collect()] == want


def _stream(spark: Any, reader: Any, name: str, checkpoint: Path) -> list[tuple[Any, ...]]:
    query = (
        reader.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    if query.exception() is not None:
        raise AssertionError(str(query.exception()))
    return [(r[3], r[4], r[1]) for r in _rows(spark.table(name))]


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_streaming_across_gaps_equals_the_compactlog_source(
    spark: Any, served: Served, tmp_path: Path, fail_on_data_loss: str
) -> None:
    """trigger(availableNow): a stream from a start inside a gap reads what the files hold, in
    both sources, with failOnDataLoss true or false."""
    stored = served.stored[EVENTS]
    start0 = _gap_after(stored, 0)
    options = {
        "subscribe": EVENTS,
        "startingOffsets": json.dumps({EVENTS: {"0": start0, "1": -2, "2": -2}}),
        "failOnDataLoss": fail_on_data_loss,
    }
    want = [(p, o, v) for p, o, v in stored if not (p == 0 and o < start0)]
    kafka = spark.readStream.format("kafka").option("kafka.bootstrap.servers", served.bootstrap)
    files = spark.readStream.format("compactlog")
    for name, value in options.items():
        kafka, files = kafka.option(name, value), files.option(name, value)
    tag = fail_on_data_loss
    assert _stream(spark, kafka.load(), f"kafka_{tag}", tmp_path / "k") == want
    got = _stream(spark, files.load(str(served.data_dir)), f"files_{tag}", tmp_path / "f")
    assert got == want


def _records_per_task(df: Any) -> list[int]:
    return sorted(df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect())


def test_min_partitions_skew_on_a_compacted_partition(spark: Any, served: Served) -> None:
    """Spark's connector cuts ``minPartitions`` ranges by offset count: the compacted partition
    (1000 offsets, 5 records left) takes 5 of 6 tasks, 4 of them empty, and the dense one (200
    records) one task. compactlog's source cuts by bytes: no task is empty or holds most."""
    stored = served.stored[SKEW]
    sparse = sum(1 for p, _, _ in stored if p == 0)
    assert sparse == 5 and len(stored) == sparse + SKEW_DENSE
    kafka = _records_per_task(_kafka(spark, served, subscribe=SKEW, minPartitions="6"))
    assert kafka == [0, 0, 0, 0, sparse, SKEW_DENSE]
    files = _records_per_task(_files(spark, served, subscribe=SKEW, minPartitions="6"))
    assert sum(files) == len(stored)
    assert len(files) >= 6 and files[0] > 0 and files[-1] <= SKEW_DENSE // 2, files


def test_writing_back_through_the_broker(spark: Any, served: Served) -> None:
    """df.write.format("kafka") into a new topic of the broker: read back through the broker
    and from the files, every partition holds the same records (keys, values, tombstones,
    headers), at dense offsets from 0."""
    copy = "events-copy"
    subprocess.run(
        [
            *(str(Path(sys.executable).parent / "compactlog"), "--bootstrap-server"),
            *(served.bootstrap, "topics", "create", copy, "--partitions", "3"),
        ],
        check=True,
        capture_output=True,
    )
    source = _files(spark, served, subscribe=EVENTS, includeHeaders="true")
    (
        source.select("key", "value", "partition", "headers")
        .write.format("kafka")
        .option("kafka.bootstrap.servers", served.bootstrap)
        .option("topic", copy)
        .option("kafka.compression.type", "zstd")  # the producer's zstd batches, stored as sent
        .save()
    )

    def content(df: Any) -> list[tuple[Any, ...]]:
        return sorted(
            (r.partition, r.key, r.value, tuple((h.key, h.value) for h in r.headers or ()))
            for r in df.collect()
        )

    want = content(source)
    via_broker = _kafka(spark, served, subscribe=copy, includeHeaders="true")
    via_files = _files(spark, served, subscribe=copy, includeHeaders="true")
    assert content(via_broker) == want
    assert content(via_files) == want
    for p in range(3):
        offsets = sorted(r.offset for r in via_files.where(f"partition = {p}").collect())
        assert offsets == list(range(len(offsets)))


def test_a_stream_starting_below_the_log_start(spark: Any, served: Served, tmp_path: Path) -> None:
    """The same in streaming (trigger availableNow): failOnDataLoss=true stops the query in
    both sources, false reads from the log start in both."""
    start = json.dumps({TRIMMED: {"0": 5}})

    def reader(fmt: str, fail: str) -> Any:
        r = spark.readStream.format(fmt).option("subscribe", TRIMMED)
        r = r.option("startingOffsets", start).option("failOnDataLoss", fail)
        if fmt == "kafka":
            return r.option("kafka.bootstrap.servers", served.bootstrap).load()
        return r.load(str(served.data_dir))

    want = [(0, o, b"x%d" % o) for o in range(TRIM_AT, 50)]
    errors = {
        "kafka": r"Could not read records in offset \[5, 50\) for topic partition trimmed-0",
        "compactlog": "asks for offset 5 of trimmed-0, but its log starts at 20",
    }
    for fmt in ("kafka", "compactlog"):
        with pytest.raises(Exception, match=errors[fmt]):
            _stream(spark, reader(fmt, "true"), f"{fmt}_lost", tmp_path / f"{fmt}-t")
        assert _stream(spark, reader(fmt, "false"), f"{fmt}_skip", tmp_path / f"{fmt}-f") == want


def test_max_offsets_per_trigger_counts_offsets_in_the_connector(
    spark: Any, served: Served, tmp_path: Path
) -> None:
    """``maxOffsetsPerTrigger=100`` on the compacted partition (offsets 0-999, 5 records left):
    the connector cuts micro-batches by offsets, 10 of them (9 without a record); compactlog's
    source counts records, so one micro-batch reads all 5."""

    def batches(fmt: str) -> list[int]:
        r = spark.readStream.format(fmt).option("assign", json.dumps({SKEW: [0]}))
        r = r.option("maxOffsetsPerTrigger", "100").option("startingOffsets", "earliest")
        if fmt == "kafka":
            df = r.option("kafka.bootstrap.servers", served.bootstrap).load()
        else:
            df = r.load(str(served.data_dir))
        query = (
            df.writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / fmt))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        query.stop()
        return [p["numInputRows"] for p in query.recentProgress]

    assert batches("kafka") == [0] * 9 + [5]
    assert batches("compactlog") == [5]
