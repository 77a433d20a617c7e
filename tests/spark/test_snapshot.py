"""The snapshot table: the latest value per key of a topic as Parquet, refreshed incrementally.

The oracle is the store itself: the latest record of each key per partition, read with
``Store.read`` from the log start, tombstones applied, keyless records left out. The Parquet
files are read back with pyarrow (no Spark job), so the Spark jobs here are only the snapshots.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import pyarrow as pa
import pyarrow.parquet as pq

import compactlog.spark.snapshot as snap
from compactlog.errors import (
    CompactlogError,
    ConfigError,
    SnapshotError,
    UnknownTopicOrPartitionError,
)
from compactlog.spark._snapshot_plan import Manifest, PartitionState, TopicLayout, plan_refresh
from compactlog.spark.snapshot import FileLayout, read_snapshot, snapshot
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed

NOW = 1_700_000_000_000
#: Tiny row groups and files, so that partitions span several of each.
SMALL = FileLayout(row_group_bytes=100, row_groups_per_file=2)

Rows = dict[tuple[int, bytes], tuple[bytes, int, int]]


def _expected(data: Path, topic: str) -> Rows:
    """``(partition, key) -> (value, offset, timestamp)`` of the latest live record per key."""
    latest: dict[tuple[int, bytes], Any] = {}
    with open_managed(data, ManualClock(NOW)) as store:
        for partition in range(store.partitions(topic)):
            start = store.log_start_offset(topic, partition)
            for record in store.read(topic, partition, start):
                if record.key is not None:
                    latest[(partition, record.key)] = record
    return {
        key: (r.value, r.offset, r.timestamp) for key, r in latest.items() if r.value is not None
    }


def _part_files(version: str) -> list[str]:
    found = []
    for root, _, names in os.walk(version):
        found += [os.path.join(root, n) for n in names if n.startswith("part-")]
    return sorted(found)


def _files_rows(version: str) -> Rows:
    """The rows of a version's Parquet files, checking each partition is sorted by key."""
    rows: Rows = {}
    for path in _part_files(version):
        partition = int(os.path.basename(os.path.dirname(path)).removeprefix("partition="))
        table = pq.read_table(path)
        micros = table.column("timestamp").cast(pa.int64()).to_pylist()
        keys = table.column("key").to_pylist()
        for key, value, offset, ts in zip(
            keys,
            table.column("value").to_pylist(),
            table.column("offset").to_pylist(),
            micros,
            strict=True,
        ):
            assert (partition, key) not in rows
            rows[(partition, key)] = (value, offset, ts // 1000)
    for partition in {p for p, _ in rows}:
        keys = [k for p, k in rows if p == partition]
        assert keys == sorted(keys)  # files in name order, rows in key order
    return rows


def _hashes(version: str) -> dict[str, str]:
    return {
        os.path.relpath(path, version): hashlib.sha256(Path(path).read_bytes()).hexdigest()
        for path in _part_files(version)
    }


def test_the_snapshot_is_the_latest_value_per_key(spark: Any, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "table"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("orders", 3)
        for i in range(120):
            value = None if i % 11 == 0 else b"v%d" % i
            store.produce("orders", b"k%d" % (i % 17), value, [("h", value)], timestamp=NOW + i)
        deleted, _ = store.produce("orders", b"k3", None, timestamp=NOW + 200)
        back, _ = store.produce("orders", b"k5", None, timestamp=NOW + 201)
        store.produce("orders", b"k5", b"back", [("h", b"back")], timestamp=NOW + 202)
        store.append("orders", 1, [(None, b"keyless"), (None, None)], timestamp=NOW)
        ends = {p: store.log_end_offset("orders", p) for p in range(3)}
    result = snapshot(spark, data, "orders", out, headers=True)

    assert not result.incremental and result.reason == "there is no previous snapshot"
    assert result.end_offsets == ends
    assert result.records_read == 125 and result.keyless_records == 2
    expected = _expected(data, "orders")
    assert result.rows == len(expected) == sum(p.rows for p in result.partitions.values())
    assert Path(result.version_path).parent == out
    assert _part_files(result.version_path)[0].endswith(
        "topic=orders/partition=0/part-00000.parquet"
    )

    df = read_snapshot(spark, out)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "headers"]
    got = {}
    for r in df.collect():
        assert r.topic == "orders"
        assert [(h.key, h.value) for h in r.headers] == [("h", r.value)]
        got[(r.partition, r.key)] = (r.value, r.offset, round(r.timestamp.timestamp() * 1000))
    assert got == expected
    assert (deleted, b"k3") not in got  # its tombstone is the latest record
    assert got[(back, b"k5")][0] == b"back"  # deleted, then written again


def _produce(store: Any, topic: str, items: list[tuple[bytes, bytes | None]], at: int) -> None:
    for i, (key, value) in enumerate(items):
        store.produce(topic, key, value, timestamp=NOW + at + i)


def test_a_refresh_reads_only_new_records_survives_a_crash_and_equals_a_full_rebuild(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, out, full_out = tmp_path / "data", tmp_path / "table", tmp_path / "full"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("prices", 2)
        _produce(store, "prices", [(b"p%02d" % (i % 30), b"%d" % i) for i in range(90)], 0)
    first = snapshot(spark, data, "prices", out, layout=SMALL)
    before = _files_rows(first.version_path)
    assert before == _expected(data, "prices")
    assert any(len(p.files) > 1 for p in first.partitions.values())
    assert snapshot(spark, data, "prices", out, layout=SMALL).unchanged  # nothing new: no job

    updates = [(b"p%02d" % i, b"new%d" % i) for i in range(0, 30, 3)]  # updates
    updates += [(b"p%02d" % i, None) for i in range(1, 30, 5)]  # tombstones
    updates += [(b"q%02d" % i, b"fresh") for i in range(8)]  # new keys
    updates += [(b"p01", b"revived")]  # a tombstone overwritten
    with open_managed(data, ManualClock(NOW)) as store:
        _produce(store, "prices", updates, 1000)
        ends = {p: store.log_end_offset("prices", p) for p in range(2)}

    # A crash just before the commit point: the previous snapshot stays current and readable.
    def crash(*args: Any) -> None:
        raise OSError("simulated crash before the switch")

    monkeypatch.setattr(snap, "switch_current", crash)
    with pytest.raises(CompactlogError, match="simulated crash"):
        snapshot(spark, data, "prices", out, layout=SMALL)
    monkeypatch.undo()
    crashed = str(out / "version-00000002")
    assert json.loads((out / "_current").read_text())["version"] == "version-00000001"
    assert _files_rows(first.version_path) == before
    debris = _hashes(crashed)

    refreshed = snapshot(spark, data, "prices", out, layout=SMALL)
    assert refreshed.incremental and refreshed.reason is None
    assert refreshed.version_path == str(out / "version-00000003")
    assert not os.path.exists(first.version_path) and not os.path.exists(crashed)
    assert {p: r.read_from for p, r in refreshed.partitions.items()} == first.end_offsets
    assert refreshed.end_offsets == ends
    assert refreshed.records_read == len(updates)  # only the new records were read
    assert _files_rows(refreshed.version_path) == _expected(data, "prices")
    assert _hashes(refreshed.version_path) == debris  # the same run again: the same bytes

    rebuilt = snapshot(spark, data, "prices", full_out, layout=SMALL)
    assert not rebuilt.incremental and rebuilt.records_read == 90 + len(updates)
    assert _hashes(rebuilt.version_path) == _hashes(refreshed.version_path)


def test_compaction_leaves_the_snapshot_as_it_was(spark: Any, tmp_path: Path) -> None:
    data, out, after_out = tmp_path / "data", tmp_path / "table", tmp_path / "after"
    config = {"cleanup.policy": "compact", "segment.bytes": 1024, "delete.retention.ms": 0}

    def clean(store: Any) -> None:
        for p in range(2):
            store.roll("ledger", p)
            manager_of(store).clean_log("ledger", p)

    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("ledger", 2, config)
        _produce(store, "ledger", [(b"a%d" % (i % 12), b"x%d" % i * 9) for i in range(150)], 0)
        _produce(store, "ledger", [(b"a%d" % i, None) for i in range(3)], 500)
    before = snapshot(spark, data, "ledger", out)
    with open_managed(data, ManualClock(NOW + 10_000)) as store:
        clean(store)
        remaining = sum(len(list(store.read("ledger", p))) for p in range(2))
    assert remaining < 153  # compaction removed records (and left gaps)

    assert snapshot(spark, data, "ledger", out).unchanged  # log start and end did not move
    after = snapshot(spark, data, "ledger", after_out)
    assert _hashes(after.version_path) == _hashes(before.version_path)
    assert after.records_read == remaining

    # Records past the snapshot's end are compacted too before the next refresh reads them.
    with open_managed(data, ManualClock(NOW + 20_000)) as store:
        _produce(store, "ledger", [(b"a%d" % (i % 15), b"y%d" % i) for i in range(60)], 2000)
        clean(store)
    refreshed = snapshot(spark, data, "ledger", out)
    assert refreshed.incremental and refreshed.records_read < 60
    assert _files_rows(refreshed.version_path) == _expected(data, "ledger")


def test_a_moved_log_start_prunes_or_rebuilds(spark: Any, tmp_path: Path) -> None:
    """Partition 0: DeleteRecords below the snapshot's end, so old rows are pruned. Partition 1:
    size retention deletes records the snapshot never read, so it is rebuilt from the log."""
    data, out, full_out = tmp_path / "data", tmp_path / "table", tmp_path / "full"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("events", 2, {"cleanup.policy": "delete", "segment.bytes": 1024})
        for i in range(20):
            store.append("events", i % 2, [(b"e%d" % (i % 7), b"%d" % i)], timestamp=NOW + i)
    first = snapshot(spark, data, "events", out)
    assert first.end_offsets == {0: 10, 1: 10}

    with open_managed(data, ManualClock(NOW)) as store:
        store.delete_records("events", 0, 6)
        store.append("events", 0, [(b"e0", b"late")], timestamp=NOW + 100)
        for i in range(60):
            store.append("events", 1, [(b"f%d" % (i % 9), b"z" * 80)], timestamp=NOW + 200 + i)
        store.alter_config("events", {"retention.bytes": 2048})
        store.run_retention()
        assert store.log_start_offset("events", 0) == 6
        assert store.log_start_offset("events", 1) > 10
    refreshed = snapshot(spark, data, "events", out)
    p0, p1 = refreshed.partitions[0], refreshed.partitions[1]
    assert refreshed.incremental and p0.rebuilt is None and p0.read_from == 10
    assert p1.rebuilt is not None and "retention deleted offsets 10.." in p1.rebuilt
    assert p1.read_from == p1.log_start
    assert _files_rows(refreshed.version_path) == _expected(data, "events")
    rebuilt = snapshot(spark, data, "events", full_out)
    assert _hashes(rebuilt.version_path) == _hashes(refreshed.version_path)


def test_bad_input_is_refused_before_any_job(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("t", 1)
    with pytest.raises(UnknownTopicOrPartitionError, match="unknown topic 'nope'"):
        snapshot(None, data, "nope", tmp_path / "out")
    with pytest.raises(CompactlogError, match=r"Topic name .* is invalid"):
        snapshot(None, data, "../t", tmp_path / "out")
    with pytest.raises(SnapshotError, match="does not exist"):
        snapshot(None, tmp_path / "missing", "t", tmp_path / "out")
    (tmp_path / "file").write_text("x")
    with pytest.raises(SnapshotError, match="exists and is not a directory"):
        snapshot(None, data, "t", tmp_path / "file")
    with pytest.raises(SnapshotError, match="is a data directory"):
        snapshot(None, data, "t", data)
    with pytest.raises(SnapshotError, match="lies inside"):
        snapshot(None, data, "t", data / "t-0")
    other = tmp_path / "other"
    version = other / "version-00000001"
    version.mkdir(parents=True)
    (version / "_snapshot.json").write_bytes(Manifest("u", None, False, {}).encode())
    (other / "_current").write_text('{"format": 1, "version": "version-00000001"}')
    with pytest.raises(SnapshotError, match="holds the snapshot of topic 'u', not 't'"):
        snapshot(None, data, "t", other)
    with pytest.raises(SnapshotError, match=r"no snapshot in .*no _current file"):
        read_snapshot(None, tmp_path / "data")
    (other / "_current").write_text("{")
    with pytest.raises(SnapshotError, match="_current is unreadable"):
        read_snapshot(None, other)
    with pytest.raises(ConfigError, match="row_group_bytes must be at least 1"):
        FileLayout(row_group_bytes=0)
    busy = tmp_path / "busy"
    busy.mkdir()
    with open(busy / ".snapshot.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(SnapshotError, match="another snapshot is being written"):
            snapshot(None, data, "t", busy)


def _layout(offsets: dict[int, tuple[int, int]], topic_id: str = "id1") -> TopicLayout:
    return TopicLayout("t", topic_id, offsets)


def _manifest(ends: dict[int, tuple[int, int]], headers: bool = False) -> Manifest:
    return Manifest(
        "t", "id1", headers, {p: PartitionState(s, e, 1, ()) for p, (s, e) in ends.items()}
    )


def test_the_plan_says_what_is_read_and_why() -> None:
    """The decision table of the module doc, without Spark."""
    previous = _manifest({0: (0, 10), 1: (0, 10)})

    def plan(layout: TopicLayout, **kwargs: Any) -> Any:
        return plan_refresh(layout, previous, full=False, headers=False, **kwargs)

    assert plan(_layout({0: (0, 10), 1: (0, 10)})).unchanged(previous)
    grown = plan(_layout({0: (0, 15), 1: (0, 10)}))
    assert grown.incremental and not grown.unchanged(previous)
    assert [(p.read_from, p.end, p.keep_previous) for p in grown.partitions] == [
        (10, 15, True),
        (10, 10, True),
    ]
    pruned = plan(_layout({0: (4, 10), 1: (10, 10)})).partitions
    assert [(p.pruned, p.rebuilt) for p in pruned] == [(True, None), (True, None)]
    lost = plan(_layout({0: (12, 20), 1: (0, 10), 2: (0, 3)})).partitions
    assert lost[0].read_from == 12 and not lost[0].keep_previous
    assert "retention deleted offsets 10..11" in str(lost[0].rebuilt)
    assert lost[2].rebuilt == "a new partition" and lost[1].keep_previous
    truncated = plan(_layout({0: (0, 8), 1: (0, 10)})).partitions[0]
    assert "log end offset 8 is below the snapshot's end 10" in str(truncated.rebuilt)

    whole = {
        "recreated": plan(_layout({0: (0, 10), 1: (0, 10)}, topic_id="id2")),
        "gone": plan(_layout({0: (0, 10)})),
        "headers": plan_refresh(
            _layout({0: (0, 10), 1: (0, 10)}), previous, full=False, headers=True
        ),
        "full": plan_refresh(_layout({0: (0, 10), 1: (0, 10)}), previous, full=True, headers=False),
        "none": plan_refresh(_layout({0: (0, 10)}), None, full=False, headers=False),
    }
    for name, refresh in whole.items():
        assert not refresh.incremental, name
        assert all(p.read_from == 0 for p in refresh.partitions), name
    assert "was recreated (topic id id1 is now id2)" in str(whole["recreated"].reason)
    assert "partitions [1] are gone" in str(whole["gone"].reason)
    assert "built without headers" in str(whole["headers"].reason)
