"""Snapshot-table benchmark: a full build, an incremental refresh after a small batch of new
records, and a refresh with nothing new. Prints one JSON line per figure.

    python benchmarks/bench_snapshot.py [--dir bench-snapshot] [--records 1000000]
        [--keys 100000] [--partitions 4] [--new 10000] [--value-bytes 100]

Figures (wall clock around :func:`compactlog.spark.snapshot.snapshot`, in a warm local[2]
session; the first query through the data source is run and timed separately as ``warm_up``):

* ``full``: the latest value per key of ``--records`` records built from the log, s and
  records/s;
* ``incremental``: after ``--new`` more records (updates of existing keys and some tombstones),
  the refresh, s, with the records it read;
* ``full_again``: a full rebuild of the same offsets, s, and whether its files are
  byte-identical to the incremental refresh's;
* ``unchanged``: a refresh with nothing new (no Spark job), s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import time
from typing import Any

from compactlog.spark import local_session
from compactlog.spark.snapshot import snapshot
from compactlog.storage.store import Store

BATCH = 1000


def emit(name: str, value: float, unit: str, **extra: Any) -> None:
    print(
        json.dumps({"benchmark": name, "value": round(value, 3), "unit": unit, **extra}), flush=True
    )


def fill(store: Store, n: int, keys: int, partitions: int, value: bytes, seed: int) -> None:
    rng = random.Random(seed)
    for start in range(0, n, BATCH):
        per_partition: list[list[Any]] = [[] for _ in range(partitions)]
        for _ in range(min(BATCH, n - start)):
            k = rng.randrange(keys)
            tombstone = seed > 0 and rng.random() < 0.05
            per_partition[k % partitions].append((b"key-%08d" % k, None if tombstone else value))
        for partition, records in enumerate(per_partition):
            if records:
                store.append("bench", partition, records)


def hashes(version: str) -> dict[str, str]:
    out = {}
    for root, _, names in os.walk(version):
        for name in names:
            if name.startswith("part-"):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    out[os.path.relpath(path, version)] = hashlib.sha256(f.read()).hexdigest()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="bench-snapshot")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--new", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    data, table, again = (os.path.join(args.dir, n) for n in ("data", "table", "again"))
    value = b"v" * args.value_bytes
    with Store.open(data) as store:
        store.create_topic("bench", args.partitions)
        fill(store, args.records, args.keys, args.partitions, value, 0)

    spark = local_session("local[2]", shuffle_partitions=args.partitions)
    started = time.monotonic()
    spark.read.format("compactlog").load(data).limit(1).collect()
    emit("warm_up", time.monotonic() - started, "s")

    result = snapshot(spark, data, "bench", table)
    emit("full", result.elapsed_secs, "s", rows=result.rows, records=result.records_read)
    emit("full_rate", result.records_read / result.elapsed_secs, "records/s")

    with Store.open(data) as store:
        fill(store, args.new, args.keys, args.partitions, value, 1)
    result = snapshot(spark, data, "bench", table)
    emit("incremental", result.elapsed_secs, "s", rows=result.rows, records=result.records_read)

    rebuilt = snapshot(spark, data, "bench", again)
    same = hashes(rebuilt.version_path) == hashes(result.version_path)
    emit("full_again", rebuilt.elapsed_secs, "s", records=rebuilt.records_read, identical=same)

    result = snapshot(spark, data, "bench", table)
    emit("unchanged", result.elapsed_secs, "s", unchanged=result.unchanged)
    spark.stop()


if __name__ == "__main__":
    main()
