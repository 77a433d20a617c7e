"""A Spark compaction killed mid-swap (SIGKILL of the whole job: driver, JVM, Python workers)
leaves only files the store recovers, loses no key's latest record, and a rerun finishes with
what an undisturbed job writes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import compactlog
from compactlog.errors import StorageError
from compactlog.spark.compact import compact
from tests.conftest import ManualClock

NOW = 1_700_000_000_000
TOPIC = "entities"
RECORDS = 240_000
KEYS = 60_000


def _fill(data: Path) -> None:
    with compactlog.Store.open(data, ManualClock(NOW)) as store:
        store.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "segment.bytes": "1048576"})
        for lo in range(0, RECORDS, 2000):
            rows: list[Any] = [
                (b"key-%08d" % (i % KEYS), b"value-%d" % i) for i in range(lo, lo + 2000)
            ]
            store.append(TOPIC, 0, rows, timestamp=NOW + lo)
        store.roll(TOPIC, 0)


def _latest(data: Path) -> dict[bytes | None, tuple[int, bytes | None]]:
    with compactlog.Store.open(data, ManualClock(NOW)) as store:
        return {r.key: (r.offset, r.value) for r in store.read(TOPIC, 0, 0)}


def _records(data: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    with compactlog.Store.open(data, ManualClock(NOW)) as store:
        return [(r.offset, r.key, r.value) for r in store.read(TOPIC, 0, 0)]


def _swap_files(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap", ".deleted"))]


@pytest.mark.slow
def test_killed_compaction_recovers_and_a_rerun_finishes(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "killed"
    _fill(data)
    undisturbed = tmp_path / "undisturbed"
    shutil.copytree(data, undisturbed)
    expected_latest = _latest(data)

    command = [
        sys.executable, "-m", "compactlog.cli.main", "--data-dir", str(data),
        "spark", "compact", TOPIC, "--now", str(NOW), "--master", "local[1]",
    ]  # fmt: skip
    child = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    partition_dir = data / f"{TOPIC}-0"
    seen: list[str] = []
    deadline = time.monotonic() + 300
    while child.poll() is None and time.monotonic() < deadline:
        seen = _swap_files(partition_dir)
        if seen:
            os.killpg(child.pid, signal.SIGKILL)  # the driver, its JVM and the Python workers
            break
        time.sleep(0.002)
    child.wait()
    assert seen, "the job finished before a swap file appeared: nothing was interrupted"
    assert child.returncode == -signal.SIGKILL

    # A Python worker survives its driver (PySpark's daemon has its own process group) and
    # finishes its task; until then the store refuses to open. Then it recovers whatever the
    # kill left, and every key still has its latest record.
    deadline = time.monotonic() + 120
    while True:
        try:
            latest = _latest(data)
            break
        except StorageError as exc:
            assert "still being rewritten" in str(exc)
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert latest == expected_latest
    compact(spark, data, TOPIC, now=NOW)
    compact(spark, undisturbed, TOPIC, now=NOW)
    assert _records(data) == _records(undisturbed)
    assert len(_records(data)) == KEYS
    assert not _swap_files(partition_dir)
