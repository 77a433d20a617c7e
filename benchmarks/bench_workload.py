"""The Spark workload generator's speed. Prints one JSON line per figure.

    python benchmarks/bench_workload.py [--dir bench-data/workload] [--keys 200000]
        [--updates 200000] [--value-bytes 1024] [--master local[2]]

Figures:

* ``warm_up``: a 100-key workload first, so the session's start and the Python data source's
  first use (5-10 s) are not charged to the figures below;
* ``rows_only``: every phase's rows computed by Spark and dropped (the ``noop`` sink): the cost
  of the column expressions alone, records/s;
* ``phase``: each phase of ``generate`` (rows, staging, the sink's commit into the store),
  records/s and MB/s of key + value bytes; ``total``: the whole ``generate``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from typing import Any

from compactlog.spark import local_session
from compactlog.spark.workload import PHASES, WorkloadSpec, expected_state, generate, phase_frames

MB = 1_000_000


def emit(name: str, value: float, unit: str, **extra: Any) -> None:
    print(
        json.dumps({"benchmark": name, "value": round(value, 3), "unit": unit, **extra}), flush=True
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="bench-data/workload")
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--updates", type=int, default=200_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--tombstone-fraction", type=float, default=0.0)
    parser.add_argument("--distribution", default="uniform")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    start = time.perf_counter()
    spark = local_session(args.master, "compactlog-bench-workload", shuffle_partitions=8)
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    generate(spark, os.path.join(args.dir, "warm-up"), WorkloadSpec(topic="warm", keys=100))
    emit("warm_up", time.perf_counter() - start, "s")

    spec = WorkloadSpec(
        topic="tickets",
        keys=args.keys,
        value_bytes=args.value_bytes,
        distribution=args.distribution,
        updates=args.updates,
        tombstone_fraction=args.tombstone_fraction,
        republish=True,
        partitions=6,
    )
    expected = expected_state(spec)
    began = time.perf_counter()
    for phase, frame in phase_frames(spark, spec).items():
        if expected.records[phase]:
            frame.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - began
    emit("rows_only", expected.total_records / seconds, "records/s", seconds=round(seconds, 2))

    result = generate(spark, os.path.join(args.dir, "data"), spec)
    for p in result.phases:
        if p.records:
            emit(
                "phase",
                p.records / p.seconds,
                "records/s",
                phase=p.phase,
                records=p.records,
                seconds=round(p.seconds, 2),
                mb_s=round(p.payload_bytes / MB / p.seconds, 1),
            )
    emit(
        "total",
        result.seconds,
        "s",
        records=result.records,
        mb=round(result.payload_bytes / MB, 1),
        phases=[phase for phase in PHASES if expected.records[phase]],
        master=args.master,
    )
    spark.stop()


if __name__ == "__main__":
    main()
