"""The snapshot as a Delta Lake table (compactlog.spark.delta_snapshot).

The oracle is computed independently of Spark and of Delta: the latest record of each key per
partition, read with the store's own ``Store.read`` from the log start, tombstones applied,
keyless records left out. After every refresh the table is read back twice without Spark, by
``deltalake`` (delta-rs) and by DuckDB (its delta extension cannot be installed offline, so
DuckDB reads the Parquet files the Delta log lists as live), and both must equal the oracle.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

import duckdb
import pyarrow as pa
from click.testing import CliRunner
from deltalake import DeltaTable, write_deltalake

from compactlog.cli.main import main
from compactlog.errors import SnapshotError
from compactlog.spark.delta_snapshot import (
    APP_ID_PREFIX,
    read_delta_snapshot,
    read_delta_state,
    snapshot_delta,
)
from compactlog.spark.snapshot import snapshot
from tests.conftest import ManualClock
from tests.managed import open_managed

NOW = 1_700_000_000_000
TOPIC = "orders"

Row = tuple[bytes, int, int, tuple[tuple[str, bytes | None], ...]]
Rows = dict[tuple[int, bytes], Row]


def _oracle(data: Path, topic: str = TOPIC) -> Rows:
    """``(partition, key) -> (value, offset, timestamp ms, headers)`` of the latest live record."""
    latest: dict[tuple[int, bytes], Any] = {}
    with open_managed(data, ManualClock(NOW)) as store:
        for partition in range(store.partitions(topic)):
            start = store.log_start_offset(topic, partition)
            for record in store.read(topic, partition, start):
                if record.key is not None:
                    latest[(partition, record.key)] = record
    return {
        k: (r.value, r.offset, r.timestamp, tuple((h[0], h[1]) for h in r.headers) or None)
        for k, r in latest.items()
        if r.value is not None
    }


def _rows(table: pa.Table) -> Rows:
    rows: Rows = {}
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    has_headers = "headers" in table.column_names
    headers = table.column("headers").to_pylist() if has_headers else [None] * table.num_rows
    for key, value, partition, offset, ts, hs in zip(
        table.column("key").to_pylist(),
        table.column("value").to_pylist(),
        table.column("partition").to_pylist(),
        table.column("offset").to_pylist(),
        micros,
        headers,
        strict=True,
    ):
        assert (partition, key) not in rows, f"two rows for key {key!r} of partition {partition}"
        rows[(partition, key)] = (
            value,
            offset,
            ts // 1000,
            None if hs is None else tuple((h["key"], h["value"]) for h in hs),
        )
    return rows


def _deltars_rows(table: Path) -> Rows:
    return _rows(DeltaTable(str(table)).to_pyarrow_table())


def _duckdb_rows(table: Path) -> Rows:
    files = DeltaTable(str(table)).file_uris()
    if not files:
        return {}
    con = duckdb.connect()
    try:
        return _rows(con.read_parquet(files).to_arrow_table())
    finally:
        con.close()


def _check(data: Path, table: Path) -> Rows:
    expected = _oracle(data)
    if "headers" not in DeltaTable(str(table)).schema().to_arrow().names:
        expected = {k: (*v[:3], None) for k, v in expected.items()}
    assert _deltars_rows(table) == expected
    assert _duckdb_rows(table) == expected
    return expected


def _state(table: Path) -> tuple[int, dict[int, tuple[int, int]]]:
    state = read_delta_state(str(table))
    assert state is not None
    offsets = {p: (s.log_start, s.end) for p, s in state.manifest.partitions.items()}
    return state.refresh, offsets


def _produce(data: Path, start: int, count: int, keys: int) -> None:
    with open_managed(data, ManualClock(NOW)) as store:
        for i in range(start, start + count):
            value = None if i % 7 == 3 else b"v%d" % i
            headers = [("n", b"%d" % i)] if i % 2 else []
            store.append(TOPIC, i % 2, [(b"k%d" % (i % keys), value, headers)], timestamp=NOW + i)


def _create(data: Path) -> None:
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic(TOPIC, 2, {"cleanup.policy": "delete", "segment.bytes": 1024})


def test_refreshes_equal_the_latest_record_per_key(spark: Any, tmp_path: Path) -> None:
    data, table = tmp_path / "data", tmp_path / "table"
    _create(data)
    _produce(data, 0, 60, 13)
    with open_managed(data, ManualClock(NOW)) as store:
        store.append(TOPIC, 1, [(None, b"keyless")], timestamp=NOW)

    first = snapshot_delta(spark, data, TOPIC, table, headers=True)
    assert not first.incremental and first.reason == "there is no previous snapshot"
    assert first.records_read == 61 and first.keyless_records == 1
    assert first.rows == len(_check(data, table))
    assert _state(table) == (1, {0: (0, 30), 1: (0, 31)})
    delta = DeltaTable(str(table))
    assert delta.transaction_version(APP_ID_PREFIX + TOPIC) == 1
    assert json.loads(delta.history(1)[0]["userMetadata"])["partitions"]["1"]["end"] == 31

    # Updates, tombstones of live keys, keys coming back: only the new records are read.
    _produce(data, 60, 40, 13)
    second = snapshot_delta(spark, data, TOPIC, table, headers=True)
    assert second.incremental and second.records_read == 40
    assert {p: r.read_from for p, r in second.partitions.items()} == {0: 30, 1: 31}
    _check(data, table)
    assert _state(table) == (2, {0: (0, 50), 1: (0, 51)})
    assert DeltaTable(str(table)).history(1)[0]["operation"] == "MERGE"

    # Nothing new: no Spark job, no commit.
    version = DeltaTable(str(table)).version()
    third = snapshot_delta(spark, data, TOPIC, table, headers=True)
    assert third.unchanged and third.records_read == 0
    assert DeltaTable(str(table)).version() == version

    # Retention: partition 0's log start moves below the table's end (its old rows below it
    # are pruned), partition 1's past it (records no refresh read are gone: rebuilt).
    _produce(data, 100, 8, 13)
    with open_managed(data, ManualClock(NOW)) as store:
        store.delete_records(TOPIC, 0, 20)
        for i in range(60):
            store.append(TOPIC, 1, [(b"f%d" % (i % 9), b"z" * 80)], timestamp=NOW + 500 + i)
        store.alter_config(TOPIC, {"retention.bytes": 2048})
        store.run_retention()
        start1 = store.log_start_offset(TOPIC, 1)
        assert store.log_start_offset(TOPIC, 0) == 20 and start1 > 51
    fourth = snapshot_delta(spark, data, TOPIC, table, headers=True)
    p0, p1 = fourth.partitions[0], fourth.partitions[1]
    assert fourth.incremental and p0.rebuilt is None and p0.read_from == 50
    assert p1.rebuilt is not None and "retention deleted offsets 51.." in p1.rebuilt
    assert p1.read_from == start1
    _check(data, table)
    assert _state(table)[1][0] == (20, 54)

    # The log start moves with nothing new: a MERGE of no rows deletes the rows below it.
    with open_managed(data, ManualClock(NOW)) as store:
        store.delete_records(TOPIC, 0, 52)
    pruned = snapshot_delta(spark, data, TOPIC, table, headers=True)
    assert pruned.incremental and not pruned.unchanged and pruned.records_read == 0
    assert pruned.partitions[0].rows < fourth.partitions[0].rows
    _check(data, table)
    assert _state(table)[1][0] == (52, 54)

    # The refreshed table holds what one clean build of the same log holds.
    rebuilt = snapshot_delta(spark, data, TOPIC, tmp_path / "clean", headers=True)
    assert _deltars_rows(tmp_path / "clean") == _deltars_rows(table)
    assert _state(tmp_path / "clean")[1] == _state(table)[1]
    assert rebuilt.rows == pruned.rows

    # Without headers the table is rewritten (a change of schema), and Spark reads it back.
    plain = snapshot_delta(spark, data, TOPIC, table)
    assert not plain.incremental and "built with headers" in str(plain.reason)
    assert "headers" not in DeltaTable(str(table)).schema().to_arrow().names
    back = read_delta_snapshot(spark, table)
    assert back.columns == ["key", "value", "topic", "partition", "offset", "timestamp"]
    got = {(r.partition, bytes(r.key)): (bytes(r.value), r.offset) for r in back.collect()}
    assert got == {k: (v[0], v[1]) for k, v in _oracle(data).items()}


_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import deltalake
    from deltalake.table import TableMerger
    from compactlog.spark import local_session
    from compactlog.spark.delta_snapshot import snapshot_delta

    data, table, when = sys.argv[1:4]

    def die():
        sys.stdout.flush()
        os.killpg(os.getpgid(0), signal.SIGKILL)  # the driver, its JVM and Python workers

    if when == "before-commit":
        def merge(self, *args, **kwargs):
            print("killing before-commit", flush=True)
            die()
        deltalake.DeltaTable.merge = merge
    else:
        execute = TableMerger.execute
        def after(self):
            execute(self)
            print("killing after-commit", flush=True)
            die()
        TableMerger.execute = after
    spark = local_session("local[1]", "killed-refresh", shuffle_partitions=2)
    snapshot_delta(spark, data, "orders", table, headers=True)
    print("not killed", flush=True)
    """
)


def _killed_refresh(data: Path, table: Path, when: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(data), str(table), when],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        start_new_session=True,
        check=False,
    )
    assert proc.returncode == -9, proc.stdout + proc.stderr[-3000:]
    assert f"killing {when}" in proc.stdout


@pytest.mark.slow
def test_a_killed_refresh_reruns_to_what_one_clean_run_writes(spark: Any, tmp_path: Path) -> None:
    data, table, clean = tmp_path / "data", tmp_path / "table", tmp_path / "clean"
    _create(data)
    _produce(data, 0, 50, 11)
    snapshot_delta(spark, data, TOPIC, table, headers=True)
    _produce(data, 50, 30, 11)

    # Killed after Spark read the new records, before Delta committed: the table is unchanged,
    # and the rerun reads the same records again.
    before = DeltaTable(str(table)).version()
    _killed_refresh(data, table, "before-commit")
    assert DeltaTable(str(table)).version() == before and _state(table)[0] == 1
    rerun = snapshot_delta(spark, data, TOPIC, table, headers=True)
    assert rerun.incremental and rerun.records_read == 30
    _check(data, table)

    # Killed just after the commit: the data, the offsets and the txn version went in together,
    # and the rerun has nothing left to do.
    _produce(data, 80, 20, 11)
    _killed_refresh(data, table, "after-commit")
    assert DeltaTable(str(table)).version() == before + 2
    assert _state(table) == (3, {0: (0, 50), 1: (0, 50)})
    assert DeltaTable(str(table)).transaction_version(APP_ID_PREFIX + TOPIC) == 3
    assert snapshot_delta(spark, data, TOPIC, table, headers=True).unchanged
    _check(data, table)

    # Both equal one clean run over the same log.
    snapshot_delta(spark, data, TOPIC, clean, headers=True)
    assert _deltars_rows(clean) == _deltars_rows(table)
    assert _state(clean)[1] == _state(table)[1]


def test_bad_tables_are_refused_and_left_alone(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _create(data)
    _produce(data, 0, 6, 3)

    stranger = tmp_path / "stranger"
    write_deltalake(str(stranger), pa.table({"a": [1, 2]}))
    with pytest.raises(SnapshotError, match="Delta table that compactlog did not write"):
        snapshot_delta(spark, data, TOPIC, stranger)
    assert DeltaTable(str(stranger)).version() == 0

    cluttered = tmp_path / "cluttered"
    cluttered.mkdir()
    (cluttered / "notes.txt").write_text("mine")
    with pytest.raises(SnapshotError, match="neither empty nor a Delta table"):
        snapshot_delta(spark, data, TOPIC, cluttered)

    # A first build killed before its commit left data files and no Delta log: built anyway.
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    stray = crashed / "part-00000-0eb9f6d5-655d-47a0-859b-3e5ca3fde4ca-c000.snappy.parquet"
    stray.write_bytes(b"PAR1 torn")
    snapshot_delta(spark, data, TOPIC, crashed)
    _check(data, crashed)

    parquet = tmp_path / "parquet"
    snapshot(spark, data, TOPIC, parquet)
    with pytest.raises(SnapshotError, match="holds a Parquet snapshot"):
        snapshot_delta(spark, data, TOPIC, parquet)

    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic("other", 1)
        store.append("other", 0, [(b"a", b"1")], timestamp=NOW)
    table = tmp_path / "table"
    snapshot_delta(spark, data, "other", table)
    with pytest.raises(SnapshotError, match="holds the snapshot of topic 'other'"):
        snapshot_delta(spark, data, TOPIC, table)
    with pytest.raises(SnapshotError, match="no Delta snapshot table"):
        read_delta_snapshot(spark, tmp_path / "nothing")
    shutil.rmtree(parquet)


def test_the_cli_writes_and_refreshes_the_delta_table(spark: Any, tmp_path: Path) -> None:
    data, table = tmp_path / "data", tmp_path / "table"
    _create(data)
    _produce(data, 0, 20, 5)
    args = ["--data-dir", str(data), "spark", "snapshot", TOPIC, str(table), "--format", "delta"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    assert "full (there is no previous snapshot)" in first.output
    _produce(data, 20, 6, 5)
    second = CliRunner().invoke(main, args)
    assert second.exit_code == 0, second.output
    assert "6 records read, incremental" in second.output
    _check(data, table)
    wrong = CliRunner().invoke(main, [*args[:-1], "iceberg"])
    assert wrong.exit_code == 2 and "'iceberg' is not one of 'parquet', 'delta'" in wrong.output


_DELTA_ON_SPARK = textwrap.dedent(
    """
    import glob, sys
    from compactlog.spark import local_session

    jars, table = sys.argv[1:3]
    spark = local_session("local[1]", "delta-on-spark", conf={
        "spark.jars": ",".join(sorted(glob.glob(jars + "/*.jar"))),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    })
    spark.range(3).write.format("delta").save(table)
    print("appended", flush=True)
    try:
        print("read", spark.read.format("delta").load(table).count(), flush=True)
    except Exception as exc:
        print("read failed:", str(exc).splitlines()[1][:400], flush=True)
    """
)


@pytest.mark.slow
def test_delta_on_spark_cannot_read_a_table_on_spark_4_3(tmp_path: Path) -> None:
    """Why the table is written by delta-rs: the newest delta-spark (4.4.0, built for Spark
    4.2) creates a table on PySpark 4.3 but fails to load one. When this fails because the
    read works, a Delta release runs on this Spark: the module can use it."""
    jars = Path(__file__).resolve().parents[2] / ".jars" / "delta"
    if not list(jars.glob("delta-spark_*.jar")):
        pytest.skip(f"no Delta jars in {jars} (scripts/setup-env.sh fetches them)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run(
        [sys.executable, "-c", _DELTA_ON_SPARK, str(jars), str(tmp_path / "t")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "appended" in proc.stdout
    assert "read failed: : java.lang.NoSuchMethodError" in proc.stdout, proc.stdout
    assert "org.apache.spark.sql.execution.LogicalRDD.<init>" in proc.stdout
    # delta-rs reads what Delta on Spark wrote.
    assert DeltaTable(str(tmp_path / "t")).to_pyarrow_table().num_rows == 3


def test_a_recreated_topic_overwrites_the_table(spark: Any, tmp_path: Path) -> None:
    data, table = tmp_path / "data", tmp_path / "table"
    _create(data)
    _produce(data, 0, 12, 5)
    snapshot_delta(spark, data, TOPIC, table)
    with open_managed(data, ManualClock(NOW)) as store:
        store.delete_topic(TOPIC)
    _create(data)
    _produce(data, 100, 3, 50)
    again = snapshot_delta(spark, data, TOPIC, table)
    assert not again.incremental and "was recreated" in str(again.reason)
    assert DeltaTable(str(table)).history(1)[0]["operation"] == "WRITE"
    assert _check(data, table).keys() == {(0, b"k0"), (0, b"k2")}  # k1's record is a tombstone
    assert _state(table) == (2, {0: (0, 2), 1: (0, 1)})
