"""The jobs the cluster tier compares with local[*], as one Spark application.

Run by ``spark-submit`` on the cluster (``steps.py INPUT_DIR OUT_DIR NOW``: only compactlog,
PySpark and the standard library are imported, since the driver runs in the packed environment,
which holds no tests), and called in-process with the test session's local[*] Spark, so that
both sides run the very same code:

1. the main job, ``compactlog spark pipeline`` (generate, report, clean one-pass, snapshot,
   report), into ``OUT/pipeline-data`` and ``OUT/pipeline-out``;
2. ``compactlog spark compact --mode one-pass --now NOW`` on a copy of ``INPUT_DIR``
   (``OUT/compact-data``);
3. ``compactlog spark snapshot`` of that compacted copy (``OUT/snapshot``);
4. a streaming read of a copy of ``INPUT_DIR`` (``maxOffsetsPerTrigger``, ``availableNow``) into
   a Parquet sink (``OUT/stream``);

and ``OUT/where.json``: where the executors' Python ran (interpreter, compactlog's files, working
directory), and the executors the application had.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from typing import Any

TOPIC = "events"
PIPELINE_ARGS = ("--keys", "1500", "--updates", "3000", "--value-bytes", "64", "--partitions", "2")


def _where(_: int) -> tuple[str, str, str, str]:
    import compactlog

    return (sys.executable, sys.prefix, compactlog.__file__ or "", os.getcwd())


def cli(args: list[str]) -> None:
    from compactlog.cli.main import main

    main(args, standalone_mode=False)


def run_steps(spark: Any, input_dir: str, out: str, now: int) -> dict[str, float]:
    seconds: dict[str, float] = {}
    os.makedirs(out, exist_ok=True)

    started = time.monotonic()
    data = os.path.join(out, "pipeline-data")
    cli(
        [
            "--data-dir", data, "spark", "pipeline", "--out", os.path.join(out, "pipeline-out"),
            *PIPELINE_ARGS, "--quiet",
        ]
    )  # fmt: skip
    seconds["pipeline"] = time.monotonic() - started

    started = time.monotonic()
    data = os.path.join(out, "compact-data")
    shutil.copytree(input_dir, data)
    cli(
        [
            "--data-dir", data, "spark", "compact", TOPIC, "--mode", "one-pass",
            "--now", str(now), "--quiet",
        ]
    )  # fmt: skip
    seconds["compact"] = time.monotonic() - started

    started = time.monotonic()
    cli(["--data-dir", data, "spark", "snapshot", TOPIC, os.path.join(out, "snapshot")])
    seconds["snapshot"] = time.monotonic() - started

    started = time.monotonic()
    data = os.path.join(out, "stream-data")
    shutil.copytree(input_dir, data)
    query = (
        spark.readStream.format("compactlog")
        .option("subscribe", TOPIC)
        .option("maxOffsetsPerTrigger", "2500")
        .load(data)
        .writeStream.format("parquet")
        .option("path", os.path.join(out, "stream"))
        .option("checkpointLocation", os.path.join(out, "stream-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds["stream"] = time.monotonic() - started

    sc = spark.sparkContext
    where = {
        "python": sc.parallelize(range(4), 4).map(_where).distinct().collect(),
        "executors": sorted(sc._jsc.sc().getExecutorIds().mkString(",").split(",")),
        "master": sc.master,
        "seconds": seconds,
    }
    with open(os.path.join(out, "where.json"), "w") as f:
        json.dump(where, f, indent=1)
    return seconds


def main() -> None:
    from pyspark.sql import SparkSession

    input_dir, out, now = sys.argv[1], sys.argv[2], int(sys.argv[3])
    spark = SparkSession.builder.appName("compactlog-cluster-tier").getOrCreate()
    try:
        run_steps(spark, input_dir, out, now)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
