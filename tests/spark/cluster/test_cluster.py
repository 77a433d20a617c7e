"""The pipeline on a real Spark standalone cluster gives what it gives on local[*].

One application is submitted with ``spark-submit`` to a master and two workers (each its own
JVM, executors in the workers' JVMs) with the executors' Python shipped as a packed environment
(``spark.archives``; :mod:`compactlog.spark.pack`), and the same steps (:mod:`.steps`) run on
the test session's local[*] Spark: the main job, a one-pass compaction, a snapshot and a
streaming read. Files written are compared byte for byte (every file of the compacted data
directory, every file of the snapshot), the rest row for row.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from compactlog.storage.store import Store
from tests.spark.cluster.standalone import SparkCluster, jvm_env, spark_home
from tests.spark.cluster.steps import TOPIC, run_steps

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

STEPS = Path(__file__).with_name("steps.py")
NOW = 1_800_000_000_000
SUBMIT_TIMEOUT = 600


def make_input(path: Path) -> None:
    """Two partitions of keyed updates, tombstones and headers over several segments."""
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000, 7))
    with Store.open(path, clock=lambda: next(clock)) as store:
        store.create_topic(TOPIC, 2, {"cleanup.policy": "compact"})
        for partition in range(2):
            for batch in range(40):
                records: list[Any] = []
                for i in range(100):
                    n = batch * 100 + i
                    key = b"key-%04d" % ((n * 7919 + partition) % 700)
                    if n % 23 == 0:
                        records.append((key, None))  # a tombstone
                    elif n % 31 == 0:
                        records.append((key, b"v%d" % n, [("h", b"%d" % partition)]))
                    else:
                        records.append((key, b"value-%d-" % n + b"x" * (n % 50)))
                store.append(TOPIC, partition, records, compression="none" if batch % 3 else "lz4")
                if batch % 10 == 9:
                    store.roll(TOPIC, partition)


def submit(
    cluster: SparkCluster, env_archive: str, work: Path, *args: str
) -> subprocess.Popen[bytes]:
    """Start ``spark-submit`` of steps.py to the cluster, in client mode from ``work``, where
    the driver finds the packed environment as ``./env``, as after unpacking it there; its
    output goes to ``work/submit.log``."""
    (work / "env").mkdir(parents=True)
    subprocess.run(["tar", "-xzf", env_archive, "-C", str(work / "env")], check=True)
    conf = {
        "spark.archives": f"{env_archive}#env",
        "spark.pyspark.python": "./env/bin/python",
        "spark.pyspark.driver.python": "./env/bin/python",
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.driver.memory": "1g",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
    }
    command = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", cluster.url]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    with open(work / "submit.log", "wb") as log:
        return subprocess.Popen(
            [*command, str(STEPS), *args],
            cwd=work,
            env=jvm_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed whole if it hangs
        )


def finish(process: subprocess.Popen[bytes], work: Path) -> str:
    try:
        process.wait(timeout=SUBMIT_TIMEOUT)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    text = (work / "submit.log").read_text(errors="replace")
    assert process.returncode == 0, f"spark-submit failed ({process.returncode}):\n{text[-8000:]}"
    return text


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".") and "_compactlog_work" not in p.parts
    }


def parquet_rows(path: Path, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    table = pq.read_table(str(path))
    table = table.drop_columns([c for c in drop if c in table.column_names])
    return sorted(table.to_pylist(), key=lambda r: (r["partition"], r["offset"]))


def report(path: Path) -> dict[str, Any]:
    """A report's JSON without the time of each partition's last gap (a record's timestamp)."""
    document: dict[str, Any] = json.loads(path.read_text())
    for partition in document["partitions"]:
        if partition.get("last_gap"):
            partition["last_gap"].pop("timestamp_ms")
    return document


def snapshot_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a snapshot's current version, without their timestamps."""
    version = json.loads((path / "_current").read_text())["version"]
    return parquet_rows(path / version, drop=("timestamp",))


def test_cluster_gives_the_same_results_as_local(
    spark: Any, spark_cluster: SparkCluster, executor_env: Any, tmp_path: Path
) -> None:
    make_input(tmp_path / "input")

    # The application on the cluster and the same steps on local[*] run side by side.
    started = time.monotonic()
    on_cluster, local, work = tmp_path / "cluster", tmp_path / "local", tmp_path / "job"
    process = submit(spark_cluster, executor_env.path, work,
                     str(tmp_path / "input"), str(on_cluster), str(NOW))  # fmt: skip
    try:
        run_steps(spark, str(tmp_path / "input"), str(local), NOW)
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)  # no waiting for the cluster's side
        process.wait()
        raise
    local_secs = time.monotonic() - started
    output = finish(process, work)
    print(f"local steps {local_secs:.1f} s, cluster application {time.monotonic() - started:.1f} s")

    # The executors ran the packed environment's Python, in the workers' directories.
    where = json.loads((on_cluster / "where.json").read_text())
    assert where["master"] == spark_cluster.url
    assert len(where["executors"]) == 2, where
    root = str(spark_cluster.root.resolve())
    for executable, prefix, module, cwd in where["python"]:
        assert executable.endswith("/env/bin/python"), executable
        assert module.startswith(prefix), (module, prefix)
        assert cwd.startswith(root + "/worker-"), cwd
    assert {cwd.split("/worker-")[1][0] for *_, cwd in where["python"]} == {"0", "1"}

    # Files written: byte for byte.
    compacted = files(on_cluster / "compact-data")
    assert any(name.endswith(".log") for name in compacted)
    assert compacted == files(local / "compact-data")
    snapshot = files(on_cluster / "snapshot")
    assert any(name.endswith(".parquet") for name in snapshot)
    assert snapshot == files(local / "snapshot")

    # The streaming read: row for row (Parquet file names are random).
    streamed = parquet_rows(on_cluster / "stream")
    assert len(streamed) == 8000
    assert streamed == parquet_rows(local / "stream")

    # The main job generates with the store's clock, so its timestamps differ: the rest of its
    # results are compared row for row.
    for name in ("report-before.json", "report-after.json"):
        assert report(on_cluster / "pipeline-out" / name) == report(local / "pipeline-out" / name)
    cluster_snap = snapshot_rows(on_cluster / "pipeline-out" / "snapshot")
    assert cluster_snap
    assert cluster_snap == snapshot_rows(local / "pipeline-out" / "snapshot")
    assert "OK" in output
    # What crosses to the executors is small: every serialised task (the driver logs each one's
    # size; 15 KB the largest when measured), and no warning of a task over 1000 KiB.
    sizes = [int(n) for n in re.findall(r"Starting task .*? (\d+) bytes\)", output)]
    assert sizes, "the driver logged no task"
    assert max(sizes) < 64 * 1024, max(sizes)
    assert "very large size" not in output
