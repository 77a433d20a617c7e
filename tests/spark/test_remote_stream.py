"""The streaming read of a data directory on s3:// (a real S3 server: s3proxy, started by
:mod:`tests.spark.test_remote_fs`'s fixture), kept up to date by a backup job's sync.

A backup sync uploads whole objects: between two runs of a stream the active segment's object
is replaced by a longer one and a rolled segment appears. Both runs together read exactly the
records a local stream reads from the same data, none twice; damage in an object stops the
stream with the local stream's message.

Spark work: five small streaming runs on the session's local[2]; s3proxy takes ~3 s to start.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pyspark.sql.streaming.datasource import ReadAllAvailable

from compactlog.errors import ConfigError
from compactlog.spark.datasource import register
from compactlog.spark.stream import LogStreamReader, StreamSplit, _inode, offsets_from_json
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed
from tests.spark import test_remote_fs as remote_fs_tests

NOW = 1_700_000_000_000
s3 = remote_fs_tests.s3  # the module's own s3proxy, as a fixture of this module
Row = tuple[Any, ...]


def _stream(spark: Any, path: str, checkpoint: Path, **options: str) -> dict[int, list[Row]]:
    """One ``availableNow`` run of a stream over ``path``: ``{batch id: rows}`` (every column,
    headers included), as a ``foreachBatch`` sink sees them."""
    register(spark)
    batches: dict[int, list[Row]] = {}

    def collect(df: Any, batch_id: int) -> None:
        batches[batch_id] = [tuple(r) for r in df.collect()]

    reader = spark.readStream.format("compactlog").option("includeHeaders", "true")
    query = (
        reader.options(**options)
        .load(path)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return batches


def _sync(
    options: dict[str, str], local: Path, prefix: str, uploaded: dict[str, bytes]
) -> list[str]:
    """As ``aws s3 sync`` does: upload each file that is new or differs from what was uploaded
    before, as a whole object; returns the relative names uploaded."""
    client = remote_fs_tests._client(options)
    client.create_dir(remote_fs_tests.BUCKET)
    sent = []
    for file in sorted(p for p in local.rglob("*") if p.is_file()):
        name = file.relative_to(local).as_posix()
        content = file.read_bytes()
        if uploaded.get(name) != content:
            with client.open_output_stream(f"{remote_fs_tests.BUCKET}/{prefix}/{name}") as out:
                out.write(content)
            uploaded[name] = content
            sent.append(name)
    return sent


def _write(data: Path, first: int, count: int) -> None:
    """``count`` more records per partition of ``t`` (compacted, 2 partitions, small segments,
    headers, tombstones), then the first partition's rolled segments cleaned (gaps)."""
    with open_managed(data, ManualClock(NOW)) as store:
        if "t" not in store.topics():
            store.create_topic("t", 2, {"cleanup.policy": "compact", "segment.bytes": 1024})
        for p in range(2):
            for i in range(first, first + count):
                key = b"k%d" % (i % 11) if i % 3 else b"u%d" % i
                value = None if i % 19 == 0 else b"v%d-%d" % (p, i)
                store.append("t", p, [(key, value, [("h", b"%d" % i)])], timestamp=NOW + i)
        manager_of(store).clean_log("t", 0)


def _key(row: Row) -> tuple[str, int, int]:
    return row[2], row[3], row[4]  # topic, partition, offset


def test_a_stream_follows_a_synced_backup_on_s3(
    spark: Any, s3: dict[str, str], tmp_path: Path
) -> None:
    data, prefix = tmp_path / "data", "live/data"
    uri = f"s3://{remote_fs_tests.BUCKET}/{prefix}"
    uploaded: dict[str, bytes] = {}
    _write(data, 0, 60)
    _sync(s3, data, prefix, uploaded)
    active = sorted((data / "t-1").glob("*.log"))[-1].name
    # A small read limit: several micro-batches, their ends counted in records over objects.
    limit = {"maxOffsetsPerTrigger": "50"}
    first = _stream(spark, uri, tmp_path / "checkpoint", **limit, **s3)
    local_first = _stream(spark, str(data), tmp_path / "local-checkpoint", **limit)
    assert len(first) > 1

    _write(data, 60, 40)  # the active segments grow and roll: the sync replaces and adds
    sent = _sync(s3, data, prefix, uploaded)
    assert f"t-1/{active}" in sent  # the active segment's object, replaced by a longer one
    assert any(n.startswith("t-1/") and n.endswith(".log") and n > f"t-1/{active}" for n in sent)
    second = _stream(spark, uri, tmp_path / "checkpoint", **limit, **s3)
    local_second = _stream(spark, str(data), tmp_path / "local-checkpoint", **limit)
    assert second and min(second) > max(first)

    # The same micro-batches as the local stream's, over the same data at the same times.
    def by_batch(batches: dict[int, list[Row]]) -> dict[int, list[Row]]:
        return {i: sorted(rows, key=_key) for i, rows in batches.items()}

    assert by_batch(first) == by_batch(local_first)
    assert by_batch(second) == by_batch(local_second)
    rows = [r for batches in (first, second) for b in batches.values() for r in b]
    assert len({_key(r) for r in rows}) == len(rows)  # nothing twice
    # Nothing missing: every record of each partition from the offset the second run started
    # at (the first run read what was there before; the cleaner has dropped some of it since).
    with open_managed(data, ManualClock(NOW)) as store:
        for p in range(2):
            start = min(r[4] for b in second.values() for r in b if r[3] == p)
            on_disk = [r.offset for r in store.read("t", p) if r.offset >= start]
            assert [r[4] for r in sorted(rows, key=_key) if r[3] == p and r[4] >= start] == on_disk
    offsets = [r[4] for r in rows if r[3] == 0]
    assert any(b - a > 1 for a, b in itertools.pairwise(sorted(offsets)))  # cleaned: gaps


def test_planned_splits_survive_the_sync_replacing_their_objects(
    s3: dict[str, str], tmp_path: Path
) -> None:
    """One reader (one query's driver), no Spark: a micro-batch planned before a sync is read
    after it, from objects replaced meanwhile (t-0's cleaned, t-1's active one longer): the
    splits whose object changed are planned again, and the next micro-batch starts where it
    ended. Together they read what the log holds, once."""
    data, prefix = tmp_path / "data", "reader/data"
    uploaded: dict[str, bytes] = {}
    _write(data, 0, 60)
    _sync(s3, data, prefix, uploaded)
    uri = f"s3://{remote_fs_tests.BUCKET}/{prefix}"
    reader = LogStreamReader({"path": uri, **{k.lower(): v for k, v in s3.items()}}, False)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    splits = reader.partitions(start, end)

    _write(data, 60, 40)
    _sync(s3, data, prefix, uploaded)
    changed = [s for s in splits if isinstance(s, StreamSplit) and _inode(s.path) != s.inode]
    assert {s.partition for s in changed} == {0, 1}
    assert all(isinstance(s.inode, tuple) for s in changed)  # size and modification time
    rows = [r for split in splits for r in _offsets(reader, split)]
    later = reader.latestOffset(end, ReadAllAvailable())
    assert all(later["t"][p] > end["t"][p] for p in ("0", "1"))
    rows += [r for split in reader.partitions(end, later) for r in _offsets(reader, split)]
    assert len(set(rows)) == len(rows)
    stop = offsets_from_json(later)
    with open_managed(data, ManualClock(NOW)) as store:
        on_disk = [
            (p, r.offset) for p in range(2) for r in store.read("t", p) if r.offset < stop[("t", p)]
        ]
    assert sorted(rows) == on_disk


def test_the_log_end_follows_the_active_segment_replaced_by_a_longer_object(
    s3: dict[str, str], tmp_path: Path
) -> None:
    """No roll between the syncs: the last segment keeps its name, its object gets longer, and
    the reader's walk over it (kept between micro-batches) starts again on the new object."""
    data, prefix = tmp_path / "data", "tail/data"
    uploaded: dict[str, bytes] = {}
    uri = f"s3://{remote_fs_tests.BUCKET}/{prefix}"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("a", 1)
        store.append("a", 0, [(b"k", b"v%d" % i) for i in range(5)])
    _sync(s3, data, prefix, uploaded)
    reader = LogStreamReader({"path": uri, **{k.lower(): v for k, v in s3.items()}}, False)
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 5}}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 5}}  # resumed walk
    with open_managed(data, ManualClock(NOW)) as store:
        store.append("a", 0, [(b"k", b"w%d" % i) for i in range(3)])
    assert "a-0/00000000000000000000.log" in _sync(s3, data, prefix, uploaded)
    assert reader.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 8}}


def test_a_file_uri_is_followed_by_inode_as_a_local_path(tmp_path: Path) -> None:
    """A ``file://`` directory may be live (a writer appending in place, changing the size and
    modification time): its files keep being told apart by inode, and the stream reads what
    the plain path's stream reads."""
    data = tmp_path / "data"
    _write(data, 0, 60)
    rows = []
    for path in (str(data), f"file://{data}"):
        reader = LogStreamReader({"path": path}, False)
        start = reader.initialOffset()
        splits = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
        assert splits and all(isinstance(s, StreamSplit) for s in splits)
        assert all(isinstance(s.inode, int) for s in splits if isinstance(s, StreamSplit))
        rows.append(sorted(r for split in splits for r in _offsets(reader, split)))
    assert rows[0] == rows[1] and len(rows[0]) > 60


def _offsets(reader: LogStreamReader, split: Any) -> list[tuple[int, int]]:
    """``(partition, offset)`` of each row of ``split``, read as an executor reads it."""
    return [
        (p, o)
        for batch in reader.read(split)
        for p, o in zip(
            batch.column("partition").to_pylist(), batch.column("offset").to_pylist(), strict=True
        )
    ]


def test_damage_in_an_object_stops_the_stream_as_locally(
    spark: Any, s3: dict[str, str], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    _write(data, 0, 60)
    copy, name = remote_fs_tests._damaged_copy(data, tmp_path)
    shutil.rmtree(data)
    uri = f"s3://{remote_fs_tests.BUCKET}/damaged-stream"
    _sync(s3, copy, "damaged-stream", {})
    messages = []
    for path, options in ((str(copy), {}), (uri, s3)):
        with pytest.raises(Exception, match="damaged") as caught:
            _stream(spark, path, tmp_path / f"checkpoint-{len(messages)}", **options)
        text = str(caught.value)
        where = f"{path}/{name}"
        assert where in text
        messages.append(text[text.index(where) + len(where) :].splitlines()[0])
    assert messages[0] == messages[1]
    assert "the batches at bytes" in messages[0]


def test_a_streaming_read_takes_the_storage_options_and_refuses_unknown_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown storage option fs\.s3\.endpiont; the storage"):
        LogStreamReader({"path": "s3://backups/d", "fs.s3.endpiont": "http://x"}, False)
    with pytest.raises(ConfigError, match=r"fs\.s3\.checksums must be one of"):
        LogStreamReader({"path": "s3://backups/d", "fs.s3.checksums": "never"}, False)
