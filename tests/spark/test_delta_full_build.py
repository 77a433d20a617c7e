"""The Delta snapshot's full build: executors write the data files, the driver commits them.

What the driver receives is measured (not mocked): every DataFrame action the module can
collect rows through is wrapped to count the bytes it hands back, and the real action runs.
"""

from __future__ import annotations

import glob
import json
import os
import pickle
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")
pytest.importorskip("duckdb")

from deltalake import DeltaTable

from compactlog.spark.delta_snapshot import APP_ID_PREFIX, snapshot_delta
from tests.conftest import ManualClock
from tests.managed import open_managed
from tests.spark.test_delta_snapshot import (
    NOW,
    TOPIC,
    _check,
    _create,
    _deltars_rows,
    _produce,
    _state,
)


def _produce_big(data: Path, count: int, keys: int, size: int) -> None:
    noise = random.Random(7)  # incompressible values: the files are as big as the data
    with open_managed(data, ManualClock(NOW)) as store:
        for i in range(count):
            value = noise.randbytes(size)
            store.append(TOPIC, i % 2, [(b"k%d" % (i % keys), value, [])], timestamp=NOW)


def _files(table: Path) -> set[str]:
    """The data files of the table's current version (names in the table directory)."""
    return {os.path.basename(uri) for uri in DeltaTable(str(table)).file_uris()}


def _data_files(table: Path) -> set[str]:
    """Every file in the table directory but the lock and the Delta log."""
    return {n for n in os.listdir(table) if n != "_delta_log" and not n.startswith(".")}


def _newest_commit(table: Path) -> list[dict[str, Any]]:
    log = sorted(glob.glob(str(table / "_delta_log" / "*.json")))[-1]
    return [json.loads(line) for line in Path(log).read_text().splitlines() if line]


def test_a_full_build_never_collects_the_table(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, table = tmp_path / "data", tmp_path / "table"
    with open_managed(data, ManualClock(NOW)) as store:
        store.create_topic(TOPIC, 2, {"cleanup.policy": "delete"})
    _produce_big(data, 3000, 2500, 1000)  # about 2.5 MB of live values

    received: list[int] = []
    frame = type(spark.range(1))  # the session's concrete DataFrame class (classic or Connect)

    def measured(name: str) -> None:
        real = getattr(frame, name)

        def action(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = real(self, *args, **kwargs)
            received.append(len(pickle.dumps(result)))
            return result

        monkeypatch.setattr(frame, name, action)

    for name in ("collect", "toArrow", "toPandas", "take", "head", "tail", "toLocalIterator"):
        measured(name)

    first = snapshot_delta(spark, data, TOPIC, table)
    assert first.rows == 2500
    assert received and sum(received) < 64 * 1024, received
    files = DeltaTable(str(table)).file_uris()
    size = sum(os.path.getsize(p.removeprefix("file://")) for p in files)
    assert size > 2_000_000  # the table is far bigger than what the driver received

    # A --full rebuild over the table: one commit removing every old file, adding the new ones
    # with their statistics, with the offsets and the txn version.
    old = _files(table)
    received.clear()
    rebuilt = snapshot_delta(spark, data, TOPIC, table, full=True)
    assert rebuilt.rows == 2500 and not rebuilt.incremental
    assert received and sum(received) < 64 * 1024, received
    actions = _newest_commit(table)
    removed = {a["remove"]["path"] for a in actions if "remove" in a}
    adds = [a["add"] for a in actions if "add" in a]
    assert removed == old and not removed & {a["path"] for a in adds}
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == 2500
    (info,) = [a["commitInfo"] for a in actions if "commitInfo" in a]
    assert json.loads(info["userMetadata"])["refresh"] == 2
    txns = [(a["txn"]["appId"], a["txn"]["version"]) for a in actions if "txn" in a]
    assert txns == [(APP_ID_PREFIX + TOPIC, 2)]
    assert _state(table) == (2, {0: (0, 1500), 1: (0, 1500)})
    _check(data, table)


_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import deltalake
    from deltalake import transaction
    from compactlog.spark import local_session
    from compactlog.spark.delta_snapshot import snapshot_delta

    data, table, full = sys.argv[1], sys.argv[2], sys.argv[3] == "full"

    def die(*args, **kwargs):
        print("killing before-commit", flush=True)
        os.killpg(os.getpgid(0), signal.SIGKILL)  # the driver, its JVM and Python workers

    transaction.create_table_with_add_actions = die
    deltalake.DeltaTable.create_write_transaction = die
    spark = local_session("local[1]", "killed-full-build", shuffle_partitions=2)
    snapshot_delta(spark, data, "orders", table, full=full, headers=True)
    print("not killed", flush=True)
    """
)


def _killed_build(data: Path, table: Path, full: bool) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(data), str(table), "full" if full else "first"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        start_new_session=True,
        check=False,
    )
    assert proc.returncode == -9, proc.stdout + proc.stderr[-3000:]
    assert "killing before-commit" in proc.stdout


@pytest.mark.slow
def test_a_killed_full_build_leaves_the_table_as_it_was(spark: Any, tmp_path: Path) -> None:
    data, table = tmp_path / "data", tmp_path / "table"
    _create(data)
    _produce(data, 0, 60, 13)

    # A first build killed before its commit: data files and no Delta table; the rerun builds it.
    _killed_build(data, table, full=False)
    orphans = _data_files(table)
    assert orphans and all(n.endswith(".parquet") for n in orphans)
    assert not DeltaTable.is_deltatable(str(table))
    snapshot_delta(spark, data, TOPIC, table, headers=True)
    _check(data, table)
    assert not orphans & _files(table)

    # A --full rebuild killed before its commit: the table is unchanged, its new files are
    # referenced by no version and VACUUM finds them.
    _produce(data, 60, 20, 13)
    version, rows, state = DeltaTable(str(table)).version(), _deltars_rows(table), _state(table)
    before = _data_files(table)
    _killed_build(data, table, full=True)
    new = _data_files(table) - before
    assert new and all(n.endswith(".parquet") for n in new)
    assert DeltaTable(str(table)).version() == version
    assert _deltars_rows(table) == rows and _state(table) == state
    vacuumable = DeltaTable(str(table)).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=True, full=True
    )
    assert new | orphans <= {os.path.basename(p) for p in vacuumable}
    rerun = snapshot_delta(spark, data, TOPIC, table, full=True, headers=True)
    assert not rerun.incremental and rerun.records_read == 80
    assert _state(table) == (2, {0: (0, 40), 1: (0, 40)})
    _check(data, table)
