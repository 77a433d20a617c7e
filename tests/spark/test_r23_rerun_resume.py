"""R23 (reliability-tests.md): the PySpark pipeline, rerun and resume.

* A stream from the data source into Parquet, SIGKILLed mid-run (driver, JVM and workers) and
  resumed from its checkpointed offsets: 0 missing and 0 duplicate output rows. Spark's file
  sink is exactly-once with its checkpoint; the source replays exactly the offset ranges the
  checkpoint names.
* A one-pass compaction rerun over the same offsets (two copies of one log) writes byte-identical
  segments.
"""

from __future__ import annotations

import hashlib
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
from compactlog.spark.compact import compact
from tests.conftest import ManualClock

NOW = 1_700_000_000_000
PARTITIONS = 3
PER_PARTITION = 20_000
MAX_OFFSETS = 6_000  # per micro-batch: 10 batches in all


def run_stream(spark: Any, data: str, checkpoint: str, out: str) -> None:
    """The pipeline under test: every record of ``entities`` into a Parquet table."""
    query = (
        spark.readStream.format("compactlog")
        .option("subscribe", "entities")
        .option("maxOffsetsPerTrigger", str(MAX_OFFSETS))
        .load(data)
        .select("partition", "offset", "key", "value")
        .writeStream.format("parquet")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(out)
    )
    query.awaitTermination()


def _fill(data: Path) -> None:
    with compactlog.Store.open(data, ManualClock(NOW)) as store:
        store.create_topic("entities", PARTITIONS, {"cleanup.policy": "compact"})
        for p in range(PARTITIONS):
            for lo in range(0, PER_PARTITION, 1000):
                rows: list[Any] = [
                    (b"k%d-%d" % (p, i % 5000), b"v%d" % i) for i in range(lo, lo + 1000)
                ]
                store.append("entities", p, rows, timestamp=NOW + lo)


def _commits(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([n for n in os.listdir(commits) if n.isdigit()]) if commits.is_dir() else 0


@pytest.mark.slow
def test_r23_a_killed_stream_resumes_with_no_row_missing_or_twice(
    spark: Any, tmp_path: Path
) -> None:
    data, checkpoint, out = tmp_path / "data", tmp_path / "ckpt", tmp_path / "out"
    _fill(data)
    child_code = (
        "import sys; from compactlog.spark import local_session; "
        "from tests.spark.test_r23_rerun_resume import run_stream; "
        "run_stream(local_session('local[1]'), *sys.argv[1:])"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", child_code, str(data), str(checkpoint), str(out)],
        cwd=Path(__file__).parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while child.poll() is None and _commits(checkpoint) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    done_before = _commits(checkpoint)
    assert 2 <= done_before < PARTITIONS * PER_PARTITION // MAX_OFFSETS, "not killed mid-run"

    run_stream(spark, str(data), str(checkpoint), str(out))
    rows = spark.read.parquet(str(out)).select("partition", "offset").collect()
    got = sorted((r.partition, r.offset) for r in rows)
    expected = [(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]
    assert len(got) == len(set(got))  # no duplicate
    assert got == expected  # none missing
    assert _commits(checkpoint) > done_before


def _digest(data: Path) -> str:
    h = hashlib.sha256()
    for root, _, names in sorted(os.walk(data)):
        if not os.path.basename(root).startswith("entities-"):
            continue
        for name in sorted(names):
            if name.endswith((".log", ".index", ".timeindex")):
                h.update(name.encode())
                h.update(Path(root, name).read_bytes())
    return h.hexdigest()


def test_r23_a_rerun_over_the_same_offsets_writes_the_same_bytes(
    spark: Any, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _fill(first)
    with compactlog.Store.open(first, ManualClock(NOW)) as store:
        for p in range(PARTITIONS):
            store.roll("entities", p)
    shutil.copytree(first, second)
    before = _digest(first)
    for data in (first, second):
        result = compact(spark, data, "entities", mode="one-pass", now=NOW)
        assert [o.end_offset for o in result.outcomes] == [PER_PARTITION] * PARTITIONS
    assert _digest(first) == _digest(second) != before
