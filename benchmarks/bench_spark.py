"""Spark benchmarks: one-pass compaction, the data source against Parquet, local[1] vs local[2].

One-pass compaction of a partition with more keys than Kafka's dedupe buffer holds, the
``compactlog`` data source's read against Parquet's, and local[1] against local[2]. Prints one
JSON line per figure: the figure, its unit, and the machine limit measured in the same run on the
same disk, so a figure is read against what the machine can do rather than against a number from
another day. Progress goes to stderr.

    python benchmarks/bench_spark.py [--dir bench-data/spark] [--keys 20000000]
        [--read-records 4000000] [--skip-compaction] [--skip-read] [--skip-scaling]
        [--skip-cluster] [--cluster-keys 1000000] [--executor-memory 2g] [--keep]

Every Spark measurement runs in a subprocess of this script with its own JVM (Spark's settings,
the master and the driver memory among them, bind when the JVM starts), ``local_session`` with
``--driver-memory`` (6g), ``spark.local.dir`` (shuffle and spill files) and the event log inside
``--dir``. The event log gives the per-stage figures (task time, shuffle, spill) printed beside
the compaction's.

Figures:

* ``build_log``: the log compacted below: ``--keys`` distinct 16-byte keys (``k%015d``) plus
  ``--updates`` (default keys / 4) updates of random keys, in a shuffled order, values 8-32
  random bytes, 5,000 records per ``Store.append`` (uncompressed) into one partition of a topic
  with ``cleanup.policy=compact`` and ``segment.bytes`` 1 GiB, flushed, then rolled so that
  everything is cleanable; records/s and MB/s of the appends (making the records' Python tuples
  included), against ``dd`` writing to the same directory just before.
* ``kafka_passes_needed``: the cleaning passes Kafka's default dedupe buffer (128 MiB, one
  cleaner thread, Kafka's 24-byte map entries, load factor 0.9) needs for the log's dirty
  distinct keys, replayed over the builder's key order (:func:`replay_passes`, the rule
  ``cleaner-status`` and the Spark report replay for ``passes_needed``), with the offset where
  each pass starts, how many keys one pass maps, and ``ceil(keys / keys_per_pass)``, which is
  only a lower bound (a key updated after an earlier pass's range is mapped again); with
  ``--inspect``, ``cleaner_status`` is run on the log and its numbers are printed too.
* ``spark_one_pass_compaction``: ``compact(mode="one-pass")`` of that log on ``--master``
  (local[2]), after a warm-up compaction of a tiny log in the same session (Python workers
  started, kernels compiled); records/s = records in the cleanable range / wall seconds of the
  whole job (plan, survivors job, rewrite, checkpoint), with each phase's seconds, the Spark
  stages from the job's start on (survivors job, rewrite, the count; from the event log:
  seconds, task seconds, shuffle and spill bytes, aggregation time), and the checks: the job's
  end offset is the first uncleanable offset planned before it, and a count of the records
  after (through the data source) equals ``--keys``. Limit: ``dd`` write (fdatasync) of the
  same directory, before and after the job.
* ``kafka_in_process_passes``: Kafka's own way on a copy of the same log: ``LogManager.clean_log``
  (one pass each, the default 128 MiB buffer, one thread) in a fresh process after a warm-up,
  ``--kafka-passes`` times (all by default, until the log is clean); seconds of the passes summed
  and of each, the passes it took against ``kafka_passes_needed``, and the Spark job's seconds.
* ``read_throughput``: ``--read-records`` records of 100 bytes (16-byte key + 84-byte value) in
  ``--read-partitions`` (4) partitions, read through ``spark.read.format("compactlog")`` into the
  ``noop`` sink, and a Parquet copy of the same DataFrame (written once by Spark, snappy) read
  into ``noop``, in the same session; one warm-up read each, then ``--repeats`` (3) timed reads
  of each, alternating; records/s of the median and the best, and the ratio of the medians
  (target >= 0.5).
* ``scaling_read`` and ``scaling_one_pass_compaction``: the same data-source read (warm, median
  of ``--repeats``) and a one-pass compaction of a smaller log (``--scaling-keys`` keys + a
  quarter of updates, after a warm-up) in a local[1] and a local[2] session, each in its own
  process; seconds of each and the speedup of local[2] (local[1] seconds / local[2] seconds).
* ``cluster_executor_env`` and ``cluster_one_pass_compaction``: the executors' environment
  packed by ``compactlog.spark.pack`` (MB, seconds), then a one-pass compaction of a log of
  ``--cluster-keys`` keys + a quarter of updates, after a warm-up, on local[2] and on a Spark
  standalone cluster on 127.0.0.1 (a master and two workers, one core and
  ``--executor-memory`` each, executors' Python from ``spark.archives``), each in its own
  driver process; records/s of the cluster and the ratio to local[2].
* ``snapshot_refresh_delta`` and ``snapshot_refresh_parquet``: a topic of ``--snapshot-keys``
  (1 M) distinct keys (100-byte records over ``--read-partitions`` partitions) snapshotted in
  full as a Delta table (``snapshot_delta``) and as the Parquet snapshot, then refreshed after
  each batch of ``--snapshot-batches`` (1,000, 10,000, 100,000) new records that update existing
  keys (every 20th a tombstone), after an untimed warm-up refresh of 100; seconds of each
  refresh, microseconds per new record (the slope from the smallest to the largest batch) and the
  fixed cost per refresh (the intercept). Delta's MERGE rewrites only the files holding matched
  keys; the Parquet snapshot rewrites the whole table each time.
* ``machine`` and ``load_average_at_end``: cores, memory, versions, and the load average at the
  start and the end (other jobs share the machine: read the figures against it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench_storage import dd_read_mb_s, dd_write_mb_s  # the same machine limits, measured alike
from compactlog.cleaner.explain import cleaner_status, keys_per_pass, next_cleaning_range
from compactlog.log_manager import LogManager
from compactlog.storage.config import BrokerConfig
from compactlog.storage.store import Store

MB = 1_000_000
MIB = 1 << 20
TOPIC = "bench"
READ_TOPIC = "read"
APPEND_RECORDS = 5_000  # records per Store.append: one batch
SEGMENT_BYTES = 1 << 30
VALUE_POOL = 4 * MIB
#: When the run started (epoch seconds), shared with the workers so that progress lines of
#: every process count from the same moment.
STARTED = float(os.environ.setdefault("BENCH_SPARK_STARTED", str(time.time())))


def emit(name: str, value: float, unit: str, **extra: Any) -> None:
    print(
        json.dumps({"benchmark": name, "value": round(value, 3), "unit": unit, **extra}), flush=True
    )


def say(message: str) -> None:
    print(f"[bench_spark {time.time() - STARTED:7.1f}s] {message}", file=sys.stderr, flush=True)


def _r(x: float, digits: int = 3) -> float:
    return round(x, digits)


# --- machine limits --------------------------------------------------------------------------


# --- the logs ------------------------------------------------------------------------------------


@dataclass
class BuiltLog:
    data_dir: str
    records: int
    keys: int
    seconds: float
    log_bytes: int
    segments: int
    largest_segment: str
    #: The key number of each offset, where the builder chose them (for replaying passes).
    key_ids: np.ndarray | None = None


def replay_passes(key_ids: np.ndarray, per_pass: int) -> list[int]:
    """The first offset of each cleaning pass Kafka's cleaner makes over a log whose record at
    offset i has key ``key_ids[i]`` (every record keyed): a pass maps the first occurrence of
    each key from its start on, is full once it holds ``per_pass`` keys, and the next record
    starts the next pass (the fullness test comes before every put)."""
    starts, start = [], 0
    while start < len(key_ids):
        starts.append(start)
        _, firsts = np.unique(key_ids[start:], return_index=True)
        if len(firsts) < per_pass:
            break  # the map never fills: this pass takes the rest
        start += int(np.partition(firsts, per_pass - 1)[per_pass - 1]) + 1
    return starts


def build_compacted_log(data_dir: str, keys: int, updates: int, seed: int) -> BuiltLog:
    """``keys`` distinct keys and ``updates`` updates of random ones, shuffled, in one
    partition; rolled, so that the whole log is cleanable."""
    shutil.rmtree(data_dir, ignore_errors=True)
    rng = np.random.default_rng(seed)
    order = np.concatenate([np.arange(keys), rng.integers(0, keys, updates)])
    rng.shuffle(order)
    value_len = rng.integers(8, 33, len(order))
    value_pos = rng.integers(0, VALUE_POOL - 32, len(order))
    pool = rng.bytes(VALUE_POOL)
    store = Store.open(data_dir)
    store.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "segment.bytes": SEGMENT_BYTES})
    started = time.perf_counter()
    report = started
    for lo in range(0, len(order), APPEND_RECORDS):
        hi = lo + APPEND_RECORDS
        records = [
            (b"k%015d" % k, pool[p : p + n])
            for k, p, n in zip(
                order[lo:hi].tolist(),
                value_pos[lo:hi].tolist(),
                value_len[lo:hi].tolist(),
                strict=True,
            )
        ]
        store.append(TOPIC, 0, records)
        if time.perf_counter() - report > 15:
            report = time.perf_counter()
            say(f"  appended {hi:,} of {len(order):,} records")
    store.flush()
    seconds = time.perf_counter() - started
    store.roll(TOPIC, 0)
    segments = [s for s in store.segments(TOPIC, 0) if s.size > 0]
    log_bytes = store.log(TOPIC, 0).size()
    store.close()
    largest = max(segments, key=lambda s: s.size).path
    return BuiltLog(data_dir, len(order), keys, seconds, log_bytes, len(segments), largest, order)


def build_read_log(data_dir: str, records: int, partitions: int) -> BuiltLog:
    """``records`` records of 100 bytes (key + value), round-robin over ``partitions``."""
    shutil.rmtree(data_dir, ignore_errors=True)
    pool = np.random.default_rng(7).bytes(VALUE_POOL)
    store = Store.open(data_dir)
    store.create_topic(READ_TOPIC, partitions)
    started = time.perf_counter()
    for i, lo in enumerate(range(0, records, APPEND_RECORDS)):
        n = min(APPEND_RECORDS, records - lo)
        at = (lo * 84) % (VALUE_POOL - 84 * APPEND_RECORDS)
        batch = [(b"key-%012d" % (lo + j), pool[at + 84 * j : at + 84 * j + 84]) for j in range(n)]
        store.append(READ_TOPIC, i % partitions, batch)
    store.flush()
    seconds = time.perf_counter() - started
    log_bytes = sum(store.log(READ_TOPIC, p).size() for p in range(partitions))
    segments = [s for p in range(partitions) for s in store.segments(READ_TOPIC, p)]
    store.close()
    largest = max(segments, key=lambda s: s.size).path
    return BuiltLog(data_dir, records, records, seconds, log_bytes, len(segments), largest)


def build_tiny_log(data_dir: str) -> None:
    """A few batches with updates, to warm a session up (Python workers, kernels)."""
    shutil.rmtree(data_dir, ignore_errors=True)
    rng = np.random.default_rng(0)
    with Store.open(data_dir) as store:
        store.create_topic(TOPIC, 1, {"cleanup.policy": "compact"})
        for _ in range(20):
            keys = rng.integers(0, 300, 100).tolist()
            store.append(TOPIC, 0, [(b"k%015d" % k, b"v" * 20) for k in keys])
        store.roll(TOPIC, 0)


def disk_bytes(directory: str) -> int:
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(directory)
        for name in names
    )


# --- workers: one Spark session (one JVM) each ----------------------------------------------------


def run_worker(
    kind: str, params: dict[str, Any], cwd: str | None = None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run ``kind`` in a fresh process of this script; its last stdout line is the result."""
    say(f"starting worker {kind} ({params.get('master', '')})")
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", kind, json.dumps(params)],
        stdout=subprocess.PIPE,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"worker {kind} failed ({out.returncode}):\n{out.stdout}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _session(params: dict[str, Any], app: str) -> Any:
    from compactlog.spark import local_session  # only the workers start Spark

    events = os.path.join(params["work"], "events")
    os.makedirs(events, exist_ok=True)
    started = time.monotonic()
    spark = local_session(
        params["master"],
        app,
        driver_memory=params["driver_memory"],
        shuffle_partitions=params["shuffle_partitions"],
        conf={
            "spark.local.dir": os.path.join(params["work"], "spark-local"),
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": "file://" + os.path.abspath(events),
            "spark.eventLog.compress": "false",
            **params.get("conf", {}),  # the cluster's: spark.archives, executor memory
        },
    )
    say(f"  {params['master']} session up in {time.monotonic() - started:.1f} s")
    return spark


def _noop(df: Any) -> float:
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def _read_source(spark: Any, data_dir: str) -> Any:
    return spark.read.format("compactlog").load(data_dir)


def _compact(spark: Any, data_dir: str) -> dict[str, Any]:
    """One one-pass compaction of ``TOPIC``, with the range planned before it."""
    from compactlog.spark.compact import compact

    with LogManager.open(data_dir) as logs:
        planned = next_cleaning_range(logs.cleaner, TOPIC, 0)
        log_end = logs.store.log_end_offset(TOPIC, 0)
    result = compact(
        spark,
        data_dir,
        TOPIC,
        mode="one-pass",
        progress=lambda m: say("  compact: " + m.strip().replace("\n", "\n      ")),
    )
    with Store.open(data_dir) as store:
        log_end_after = store.log_end_offset(TOPIC, 0)
    (outcome,) = result.outcomes
    facts = {
        "first_dirty_offset": planned.first_dirty_offset,
        "first_uncleanable_offset": planned.first_uncleanable_offset,
        "log_end_offset": log_end,
        "log_end_offset_after": log_end_after,
        "end_offset": outcome.end_offset,
        "error": outcome.error,
        "survivors": result.survivors,
        "seconds": result.elapsed_secs,
        "phases": result.phases,
        "stats": outcome.stats,
    }
    return facts


def _warm_up_compaction(spark: Any, work: str) -> None:
    tiny = os.path.join(work, "warm-up")
    build_tiny_log(tiny)
    _compact(spark, tiny)
    spark.sparkContext.setJobDescription("bench: warm-up")
    _read_source(spark, tiny).count()
    shutil.rmtree(tiny, ignore_errors=True)


def worker_compact(params: dict[str, Any]) -> dict[str, Any]:
    spark = _session(params, "bench-spark-compact")
    _warm_up_compaction(spark, params["work"])
    say("  warm-up done; compacting")
    since_ms = time.time_ns() // 1_000_000
    facts = _compact(spark, params["data"])
    say(f"  compacted in {facts['seconds']:.1f} s; counting the records after")
    spark.sparkContext.setJobDescription("bench: count the records after")
    started = time.perf_counter()
    facts["records_after"] = _read_source(spark, params["data"]).count()
    facts["count_seconds"] = time.perf_counter() - started
    spark.stop()
    facts["stages"] = stage_metrics(os.path.join(params["work"], "events"), since_ms)
    return facts


def worker_read(params: dict[str, Any]) -> dict[str, Any]:
    spark = _session(params, "bench-spark-read")
    source = _read_source(spark, params["data"])
    warm = {"compactlog": _noop(source)}
    say(f"  warm-up read through the data source: {warm['compactlog']:.1f} s")
    started = time.perf_counter()
    source.write.mode("overwrite").parquet(params["parquet"])
    parquet_write = time.perf_counter() - started
    parquet = spark.read.parquet(params["parquet"])
    warm["parquet"] = _noop(parquet)
    counts = {"compactlog": source.count(), "parquet": parquet.count()}
    times: dict[str, list[float]] = {"compactlog": [], "parquet": []}
    for i in range(params["repeats"]):
        times["compactlog"].append(_noop(source))
        times["parquet"].append(_noop(parquet))
        say(
            f"  read {i + 1}: compactlog {times['compactlog'][-1]:.2f} s, "
            f"parquet {times['parquet'][-1]:.2f} s"
        )
    spark.stop()
    return {
        "times": times,
        "warm_up": warm,
        "counts": counts,
        "parquet_write_seconds": parquet_write,
        "parquet_bytes": disk_bytes(params["parquet"]),
        "splits": _splits(params["data"]),
    }


def _splits(data_dir: str) -> int:
    from compactlog.spark.source import DEFAULT_SPLIT_BYTES, plan_ranges, segment_splits

    return sum(
        len(segment_splits(part, DEFAULT_SPLIT_BYTES))
        for part in plan_ranges(data_dir, {"path": data_dir})
    )


def worker_scaling(params: dict[str, Any]) -> dict[str, Any]:
    spark = _session(params, f"bench-spark-scaling-{params['master']}")
    source = _read_source(spark, params["read_data"])
    warm = _noop(source)
    reads = [_noop(source) for _ in range(params["repeats"])]
    say(f"  {params['master']} reads: warm-up {warm:.1f} s, then {[round(t, 2) for t in reads]}")
    data = os.path.join(params["work"], "data")
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(params["compact_pristine"], data)
    _warm_up_compaction(spark, params["work"])
    facts = _compact(spark, data)
    say(f"  {params['master']} one-pass compaction: {facts['seconds']:.1f} s")
    spark.stop()
    shutil.rmtree(data, ignore_errors=True)
    return {"read_warm_up": warm, "reads": reads, "compaction": facts}


def worker_kafka(params: dict[str, Any]) -> dict[str, Any]:
    """Kafka's way: ``clean_log`` passes with the default dedupe buffer, in this process."""
    tiny = os.path.join(params["work"], "warm-up")
    build_tiny_log(tiny)
    with LogManager.open(tiny) as logs:  # compiles (or loads) the cleaner's kernels
        logs.clean_log(TOPIC, 0)
    shutil.rmtree(tiny, ignore_errors=True)
    passes = []
    with LogManager.open(params["data"]) as logs:
        end = next_cleaning_range(logs.cleaner, TOPIC, 0).first_uncleanable_offset
        while len(passes) < params["passes"]:
            started = time.perf_counter()
            result = logs.clean_log(TOPIC, 0)
            seconds = time.perf_counter() - started
            stats = result.stats
            if stats is None:
                break
            passes.append(
                {
                    "seconds": _r(seconds),
                    "first_dirty_offset": result.first_dirty_offset,
                    "end_offset": result.end_offset,
                    "map_messages_read": stats.map_messages_read,
                    "messages_read": stats.messages_read,
                    "messages_written": stats.messages_written,
                    "bytes_read": stats.bytes_read,
                    "bytes_written": stats.bytes_written,
                    "buffer_utilization": _r(stats.buffer_utilization, 4),
                }
            )
            say(
                f"  Kafka pass {len(passes)}: [{result.first_dirty_offset:,}, "
                f"{result.end_offset:,}) in {seconds:.1f} s"
            )
            if result.end_offset >= end:
                break
        clean = bool(passes) and passes[-1]["end_offset"] >= end
        records_after = (
            sum(1 for _ in logs.store.read(TOPIC, 0)) if clean and params["count"] else None
        )
    return {
        "passes": passes,
        "first_uncleanable_offset": end,
        "clean": clean,
        "records_after": records_after,
    }


WORKERS = {
    "compact": worker_compact,
    "read": worker_read,
    "scaling": worker_scaling,
    "kafka": worker_kafka,
}


# --- snapshot refresh cost -----------------------------------------------------------------------

SNAPSHOT_TOPIC = "snap"


def _append_snapshot_records(store: Store, lo: int, n: int, keys: int, partitions: int) -> None:
    """``n`` records of 100 bytes for keys ``i % keys`` (so beyond the first ``keys`` records
    they update existing keys); every 20th update is a tombstone."""
    pool = np.random.default_rng(lo).bytes(84 * APPEND_RECORDS)
    for at in range(lo, lo + n, APPEND_RECORDS):
        chunk = range(at, min(at + APPEND_RECORDS, lo + n))
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for j, i in enumerate(chunk):
            value = None if i >= keys and i % 20 == 0 else pool[84 * j : 84 * j + 84]
            by_partition.setdefault(i % partitions, []).append((b"key-%012d" % (i % keys), value))
        for partition, rows in by_partition.items():
            store.append(SNAPSHOT_TOPIC, partition, rows)
    store.flush()


def worker_snapshot_refresh(params: dict[str, Any]) -> dict[str, Any]:
    """Full build, then refreshes of growing batches, of the Delta and the Parquet snapshot."""
    from compactlog.spark.delta_snapshot import snapshot_delta
    from compactlog.spark.snapshot import snapshot

    spark = _session(params, "bench-snapshot-refresh")
    data, keys, partitions = params["data_dir"], params["keys"], params["partitions"]
    shutil.rmtree(data, ignore_errors=True)
    tables = {"delta": os.path.join(params["work"], "delta"), "parquet": params["work"] + "/pq"}
    for table in tables.values():
        shutil.rmtree(table, ignore_errors=True)
    runs = {"delta": snapshot_delta, "parquet": snapshot}
    tiny = os.path.join(params["work"], "tiny")
    build_tiny_log(tiny)
    for kind, run in runs.items():  # warm-up: Python workers, the data source, delta-rs
        run(spark, tiny, TOPIC, os.path.join(params["work"], f"tiny-{kind}"))
    with Store.open(data) as store:
        store.create_topic(SNAPSHOT_TOPIC, partitions)
        _append_snapshot_records(store, 0, keys, keys, partitions)
    written = keys
    result: dict[str, Any] = {"full": {}, "refreshes": []}
    for kind, run in runs.items():
        started = time.perf_counter()
        r = run(spark, data, SNAPSHOT_TOPIC, tables[kind])
        result["full"][kind] = {"seconds": time.perf_counter() - started, "rows": r.rows}
        say(f"  full {kind} snapshot of {r.rows:,} rows in {result['full'][kind]['seconds']:.1f} s")
    for batch in [100, *params["batches"]]:  # the first one warms both paths up, untimed
        with Store.open(data) as store:
            _append_snapshot_records(store, written, batch, keys, partitions)
        written += batch
        row: dict[str, Any] = {"new_records": batch}
        for kind, run in runs.items():
            started = time.perf_counter()
            r = run(spark, data, SNAPSHOT_TOPIC, tables[kind])
            row[kind] = time.perf_counter() - started
            assert r.incremental and r.records_read == batch, (kind, r)
            row[f"{kind}_rows"] = r.rows
        assert row["delta_rows"] == row["parquet_rows"], row
        row["parquet_bytes"] = _snapshot_bytes(tables["parquet"])
        if batch != 100 or 100 in params["batches"]:
            result["refreshes"].append(row)
            say(
                f"  refresh of {batch:,}: delta {row['delta']:.2f} s, "
                f"parquet {row['parquet']:.2f} s"
            )
    spark.stop()
    return result


WORKERS["snapshot_refresh"] = worker_snapshot_refresh


def _snapshot_bytes(table: str) -> int:
    """Bytes of the Parquet snapshot's current version (``_current`` names it)."""
    with open(os.path.join(table, "_current")) as f:
        version = os.path.join(table, json.load(f)["version"])
    return sum(
        os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(version) for f in files
    )


def bench_snapshot_refresh(args: argparse.Namespace, root: str) -> None:
    """``snapshot_refresh``: seconds per refresh and the cost per new record (the slope between
    the smallest and the largest batch), Delta (MERGE) against Parquet (copy on write)."""
    batches = [int(b) for b in args.snapshot_batches.split(",")]
    say(f"snapshot refresh: {args.snapshot_keys:,} keys, batches {batches}")
    params = worker_params(
        args,
        os.path.join(root, "snapshot"),
        data_dir=os.path.join(root, "snapshot-data"),
        keys=args.snapshot_keys,
        partitions=args.read_partitions,
        batches=batches,
    )
    res = run_worker("snapshot_refresh", params)
    rows = res["refreshes"]
    small, large = rows[0], rows[-1]
    # The machine's limit, same run: writing the whole table's bytes once at the disk's speed,
    # which a copy-on-write refresh cannot beat and a MERGE need not pay.
    dd = dd_write_mb_s(os.path.join(root, "snapshot"), 256)
    table_mb = large["parquet_bytes"] / MB
    limit = {
        "what": f"writing the table's {table_mb:.0f} MB once at dd's {dd:.0f} MB/s "
        "(dd bs=1M conv=fdatasync, same directory, just after)",
        "value": _r(table_mb / dd),
        "unit": "seconds",
    }
    for kind in ("delta", "parquet"):
        slope = (large[kind] - small[kind]) / max(1, large["new_records"] - small["new_records"])
        emit(
            f"snapshot_refresh_{kind}",
            slope * 1e6,
            "us/new record",
            fixed_seconds=_r(small[kind] - slope * small["new_records"]),
            table_rows=large[f"{kind}_rows"],
            full_build_seconds=_r(res["full"][kind]["seconds"]),
            refreshes=[{"new_records": r["new_records"], "seconds": _r(r[kind])} for r in rows],
            limit=limit,
        )


# --- the event log --------------------------------------------------------------------------------

#: Per-stage metrics kept from the event log: name -> (key in the output, divisor). The SQL
#: metrics among them are summed over the stage's operators that have one. (Not "data returned
#: from Python workers": in this Spark it grows with the square of the batches of a task, 74 GB
#: for a 0.9 GB log, so it measures nothing.)
STAGE_METRICS = {
    "internal.metrics.executorRunTime": ("task_seconds", 1e3),
    "internal.metrics.executorCpuTime": ("task_cpu_seconds", 1e9),
    "internal.metrics.jvmGCTime": ("gc_seconds", 1e3),
    "internal.metrics.input.recordsRead": ("input_records", 1),
    "internal.metrics.shuffle.write.bytesWritten": ("shuffle_write_bytes", 1),
    "internal.metrics.shuffle.write.recordsWritten": ("shuffle_write_records", 1),
    "internal.metrics.shuffle.read.recordsRead": ("shuffle_read_records", 1),
    "internal.metrics.memoryBytesSpilled": ("memory_bytes_spilled", 1),
    "internal.metrics.diskBytesSpilled": ("disk_bytes_spilled", 1),
    "internal.metrics.peakExecutionMemory": ("peak_execution_memory_bytes", 1),
    "internal.metrics.output.bytesWritten": ("output_bytes", 1),
    "time in aggregation build": ("aggregation_build_seconds", 1e3),
    "sort time": ("sort_seconds", 1e3),
    "spill size": ("spill_bytes", 1),
}


def _event_log_files(events_dir: str) -> list[str]:
    """The event log files of the last application in ``events_dir``: one file, or the parts of
    a rolling log (Spark 4's ``eventlog_v2_<app>/events_<n>_<app>``), in order."""
    entries = [os.path.join(events_dir, n) for n in os.listdir(events_dir)]
    if not entries:
        return []
    last = max(entries, key=os.path.getmtime)
    if not os.path.isdir(last):
        return [last]
    parts = [n for n in os.listdir(last) if n.startswith("events_")]
    parts.sort(key=lambda n: int(n.split("_")[1]))
    return [os.path.join(last, n) for n in parts]


def stage_metrics(events_dir: str, since_ms: int = 0) -> list[dict[str, Any]]:
    """The stages submitted from ``since_ms`` (epoch ms) on of the last application logged in
    ``events_dir`` (Spark's JSON event log), with the description of their job, wall seconds
    and summed task metrics."""
    job_of_stage: dict[int, str] = {}
    stages = []
    for path in _event_log_files(events_dir):
        with open(path) as f:
            for line in f:
                event = json.loads(line)
                kind = event.get("Event")
                if kind == "SparkListenerJobStart":
                    description = (event.get("Properties") or {}).get("spark.job.description")
                    for stage_id in event.get("Stage IDs", []):
                        job_of_stage[stage_id] = description or ""
                elif kind == "SparkListenerStageCompleted":
                    info = event["Stage Info"]
                    if info.get("Submission Time", 0) >= since_ms:
                        stages.append(_stage_row(info, job_of_stage))
    return stages


def _stage_row(info: dict[str, Any], job_of_stage: dict[int, str]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "stage": info["Stage ID"],
        "job": job_of_stage.get(info["Stage ID"], ""),
        "rdds": sorted({r["Name"] for r in info.get("RDD Info", []) if r["Name"][0].isupper()}),
        "tasks": info["Number of Tasks"],
        "seconds": _r((info["Completion Time"] - info["Submission Time"]) / 1e3),
    }
    sums: dict[str, float] = {}
    for acc in info.get("Accumulables", []):
        metric = STAGE_METRICS.get(acc.get("Name", ""))
        if metric is not None:
            with contextlib.suppress(TypeError, ValueError):
                sums[metric[0]] = sums.get(metric[0], 0.0) + float(acc["Value"]) / metric[1]
    row.update({k: _r(v) if v != int(v) else int(v) for k, v in sums.items()})
    return row


# --- the figures ----------------------------------------------------------------------------------


def worker_params(args: argparse.Namespace, work: str, **extra: Any) -> dict[str, Any]:
    return {
        "master": args.master,
        "driver_memory": args.driver_memory,
        "shuffle_partitions": args.shuffle_partitions,
        "repeats": args.repeats,
        "work": work,
        **extra,
    }


def bench_compaction(args: argparse.Namespace, root: str) -> None:
    work = os.path.join(root, "compaction")
    os.makedirs(work, exist_ok=True)
    updates = args.keys // 4 if args.updates is None else args.updates
    limit_mib = max(64, min(1024, int((args.keys + updates) * 45 / MIB)))
    dd_before = dd_write_mb_s(work, limit_mib)
    say(
        f"dd write of {work}: {dd_before:.0f} MB/s; "
        f"building {args.keys:,} keys + {updates:,} updates"
    )
    built = build_compacted_log(os.path.join(work, "data"), args.keys, updates, seed=1)
    emit(
        "build_log",
        built.records / built.seconds,
        "records/s",
        records=built.records,
        keys=built.keys,
        updates=updates,
        seconds=_r(built.seconds),
        log_bytes=built.log_bytes,
        segments=built.segments,
        mb_s=_r(built.log_bytes / built.seconds / MB, 1),
        records_per_append=APPEND_RECORDS,
        what="Store.append of 5,000-record uncompressed batches (building the Python tuples "
        "included), 16-byte keys, 8-32-byte values, one partition, flushed at the end",
        limit={
            "what": "dd bs=1M conv=fdatasync to the same directory, just before",
            "value": _r(dd_before, 1),
            "unit": "MB/s",
            "mib": limit_mib,
        },
    )

    broker = BrokerConfig.from_dict({})
    per_pass = keys_per_pass(broker)
    lower_bound = math.ceil(args.keys / per_pass)
    assert built.key_ids is not None
    pass_starts = replay_passes(built.key_ids, per_pass)
    passes = len(pass_starts)
    inspected: dict[str, Any] = {}
    if args.inspect:
        say("cleaner_status of the log (every dirty key in a Python set)")
        started = time.perf_counter()
        with LogManager.open(built.data_dir) as logs:
            (status,) = cleaner_status(logs.cleaner, TOPIC)
        inspected = {
            "cleaner_status": {
                "dirty_keys": status.dirty_keys,
                "keys_per_pass": status.keys_per_pass,
                "passes_needed": status.passes_needed,
                "seconds": _r(time.perf_counter() - started),
            }
        }
    emit(
        "kafka_passes_needed",
        passes,
        "passes",
        dirty_distinct_keys=args.keys,
        keys_per_pass=per_pass,
        pass_start_offsets=pass_starts,
        ceil_keys_over_keys_per_pass=lower_bound,
        dedupe_buffer_bytes=broker.dedupe_buffer_size,
        cleaner_threads=broker.cleaner_threads,
        offset_map=broker.offset_map_type,
        what="the passes replayed over the builder's key order with keys_per_pass(BrokerConfig "
        "defaults) keys per map, as cleaner-status and the Spark report count passes_needed; "
        "ceil(keys / keys_per_pass) beside it is a lower bound",
        **inspected,
    )

    kafka_copy = os.path.join(work, "kafka-copy")
    if args.kafka_passes > 0:
        shutil.rmtree(kafka_copy, ignore_errors=True)
        shutil.copytree(built.data_dir, kafka_copy)

    say("one-pass compaction on Spark")
    facts = run_worker("compact", worker_params(args, work, data=built.data_dir))
    dd_after = dd_write_mb_s(work, limit_mib)
    dd_read = dd_read_mb_s(built.largest_segment) if os.path.exists(built.largest_segment) else 0.0
    checks = {
        "end_offset_is_first_uncleanable_offset": facts["end_offset"]
        == facts["first_uncleanable_offset"],
        "records_after_equal_keys": facts["records_after"] == args.keys,
        "survivors_equal_keys": facts["survivors"] == args.keys,
        "log_end_offset_unchanged": facts["log_end_offset_after"] == facts["log_end_offset"],
        "no_error": facts["error"] is None,
    }
    records = facts["first_uncleanable_offset"] - facts["first_dirty_offset"]
    stats = facts["stats"]
    emit(
        "spark_one_pass_compaction",
        records / facts["seconds"],
        "records/s",
        master=args.master,
        driver_memory=args.driver_memory,
        shuffle_partitions=args.shuffle_partitions,
        records=records,
        keys=args.keys,
        seconds=_r(facts["seconds"]),
        phases={k: _r(v) for k, v in facts["phases"].items()},
        mb_s=_r(built.log_bytes / facts["seconds"] / MB, 1),
        log_bytes_before=built.log_bytes,
        bytes_written=int(stats.get("bytes_written", 0)),
        messages_written=int(stats.get("messages_written", 0)),
        rewrite_task_seconds=_r(stats.get("elapsed_secs", 0.0)),
        passes_kafka_would_need=passes,
        keys_per_kafka_pass=per_pass,
        survivors=facts["survivors"],
        records_after=facts["records_after"],
        count_after_seconds=_r(facts["count_seconds"]),
        first_dirty_offset=facts["first_dirty_offset"],
        first_uncleanable_offset=facts["first_uncleanable_offset"],
        end_offset=facts["end_offset"],
        checks=checks,
        ok=all(checks.values()),
        stages=facts["stages"],
        what="compact(mode='one-pass') wall seconds after a warm-up compaction of a tiny log in "
        "the same session; records/s = records of the cleanable range / seconds; stages: the "
        "event log's stages from the job's start on (job: its description; seconds: wall)",
        limit={
            "what": "dd bs=1M conv=fdatasync to the same directory, before and after the job; "
            "dd read of the largest segment (page cache) after",
            "value": _r(min(dd_before, dd_after), 1),
            "unit": "MB/s",
            "dd_write_before_mb_s": _r(dd_before, 1),
            "dd_write_after_mb_s": _r(dd_after, 1),
            "dd_read_mb_s": _r(dd_read, 1),
        },
    )
    shutil.rmtree(built.data_dir, ignore_errors=True)

    if args.kafka_passes > 0:
        say(f"Kafka's in-process cleaner on a copy: up to {args.kafka_passes} pass(es)")
        kafka = run_worker(
            "kafka", {"work": work, "data": kafka_copy, "passes": args.kafka_passes, "count": False}
        )
        seconds = sum(p["seconds"] for p in kafka["passes"])
        emit(
            "kafka_in_process_passes",
            seconds,
            "s",
            passes_run=len(kafka["passes"]),
            passes_needed=passes,
            pass_starts_equal_replay=[p["first_dirty_offset"] for p in kafka["passes"]]
            == pass_starts[: len(kafka["passes"])],
            clean=kafka["clean"],
            first_uncleanable_offset=kafka["first_uncleanable_offset"],
            passes=kafka["passes"],
            spark_one_pass_seconds=_r(facts["seconds"]),
            seconds_ratio_kafka_over_spark=_r(seconds / facts["seconds"]),
            what="LogManager.clean_log (one cleaning pass each, 128 MiB dedupe buffer, one thread) "
            "of a copy of the same log in a fresh process after a warm-up; value = the passes' "
            "seconds summed",
        )
        shutil.rmtree(kafka_copy, ignore_errors=True)


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def bench_read(args: argparse.Namespace, root: str, read: BuiltLog) -> None:
    work = os.path.join(root, "read")
    os.makedirs(work, exist_ok=True)
    parquet = os.path.join(work, "parquet")
    result = run_worker("read", worker_params(args, work, data=read.data_dir, parquet=parquet))
    times = result["times"]
    n = result["counts"]["compactlog"]
    med = {k: _median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    emit(
        "read_throughput",
        n / med["compactlog"],
        "records/s",
        master=args.master,
        records=n,
        partitions=args.read_partitions,
        record_bytes=100,
        log_bytes=read.log_bytes,
        splits=result["splits"],
        compactlog={
            "median_records_s": round(n / med["compactlog"]),
            "best_records_s": round(n / best["compactlog"]),
            "seconds": [_r(t) for t in times["compactlog"]],
            "warm_up_seconds": _r(result["warm_up"]["compactlog"]),
        },
        parquet={
            "median_records_s": round(n / med["parquet"]),
            "best_records_s": round(n / best["parquet"]),
            "seconds": [_r(t) for t in times["parquet"]],
            "warm_up_seconds": _r(result["warm_up"]["parquet"]),
            "rows": result["counts"]["parquet"],
            "bytes": result["parquet_bytes"],
            "write_seconds": _r(result["parquet_write_seconds"]),
        },
        ratio=_r(med["parquet"] / med["compactlog"]),
        ratio_best=_r(best["parquet"] / best["compactlog"]),
        target_ratio=0.5,
        what="spark.read.format('compactlog') -> noop vs spark.read.parquet(copy) -> noop, same "
        "session, warm; value = the data source's records/s (median); ratio = data source "
        "records/s / Parquet records/s (medians)",
    )


def bench_scaling(args: argparse.Namespace, root: str, read: BuiltLog) -> None:
    work = os.path.join(root, "scaling")
    os.makedirs(work, exist_ok=True)
    updates = args.scaling_keys // 4
    say(f"scaling: building {args.scaling_keys:,} keys + {updates:,} updates")
    pristine = build_compacted_log(
        os.path.join(work, "pristine"), args.scaling_keys, updates, seed=2
    )
    results = {}
    for master in ("local[1]", "local[2]"):
        params = worker_params(args, os.path.join(work, master.replace("[", "").replace("]", "")))
        params.update(master=master, read_data=read.data_dir, compact_pristine=pristine.data_dir)
        results[master] = run_worker("scaling", params)
    one, two = results["local[1]"], results["local[2]"]
    read_1, read_2 = _median(one["reads"]), _median(two["reads"])
    emit(
        "scaling_read",
        read_1 / read_2,
        "speedup",
        records=read.records,
        local_1={"median_seconds": _r(read_1), "seconds": [_r(t) for t in one["reads"]]},
        local_2={"median_seconds": _r(read_2), "seconds": [_r(t) for t in two["reads"]]},
        records_s={
            "local[1]": round(read.records / read_1),
            "local[2]": round(read.records / read_2),
        },
        limit={"what": "cores of the machine (other jobs share them)", "value": os.cpu_count()},
        what="the read_throughput data-source read (-> noop, warm, median) in a local[1] and a "
        "local[2] session, separate processes; value = local[1] seconds / local[2] seconds",
    )
    c1, c2 = one["compaction"], two["compaction"]
    emit(
        "scaling_one_pass_compaction",
        c1["seconds"] / c2["seconds"],
        "speedup",
        records=pristine.records,
        keys=pristine.keys,
        local_1={
            "seconds": _r(c1["seconds"]),
            "phases": {k: _r(v) for k, v in c1["phases"].items()},
        },
        local_2={
            "seconds": _r(c2["seconds"]),
            "phases": {k: _r(v) for k, v in c2["phases"].items()},
        },
        ok=all(
            c["end_offset"] == c["first_uncleanable_offset"] and c["survivors"] == pristine.keys
            for c in (c1, c2)
        ),
        limit={"what": "cores of the machine (other jobs share them)", "value": os.cpu_count()},
        what="compact(mode='one-pass') of a copy of the same log in a local[1] and a local[2] "
        "session after a warm-up; value = local[1] seconds / local[2] seconds",
    )
    shutil.rmtree(pristine.data_dir, ignore_errors=True)


def bench_cluster(args: argparse.Namespace, root: str) -> None:
    """The one-pass compaction on a Spark standalone cluster (a master and two workers on
    127.0.0.1, one core each, executors' Python from a packed environment) and on local[2]."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from compactlog.spark.pack import pack
    from tests.spark.cluster.standalone import SparkCluster

    work = os.path.join(root, "cluster")
    os.makedirs(work, exist_ok=True)
    updates = args.cluster_keys // 4
    say(f"cluster: building {args.cluster_keys:,} keys + {updates:,} updates")
    pristine = build_compacted_log(os.path.join(work, "pristine"), args.cluster_keys, updates, 3)
    packed = pack(os.path.join(work, "env.tar.gz"))
    emit(
        "cluster_executor_env",
        packed.archive_bytes / MB,
        "MB",
        seconds=_r(packed.seconds, 1),
        unpacked_mb=_r(packed.bytes_in / MB, 1),
        files=packed.files,
        distributions=len(packed.distributions),
        limit={"what": "pyspark's package, which the archive leaves out (MB)",
               "value": _r(disk_bytes(os.path.dirname(__import__("pyspark").__file__)) / MB, 1)},
        what="python -m compactlog.spark.pack env.tar.gz: compactlog and its run-time "
        "dependencies without PySpark, gzip level 1",
    )  # fmt: skip
    job = os.path.join(work, "job")
    os.makedirs(os.path.join(job, "env"), exist_ok=True)
    subprocess.run(["tar", "-xzf", packed.path, "-C", os.path.join(job, "env")], check=True)
    cluster = SparkCluster(Path(work) / "standalone", worker_memory=args.executor_memory)
    results: dict[str, dict[str, Any]] = {}
    try:
        cluster.start()
        say(f"  cluster up in {cluster.started_secs:.1f} s at {cluster.url}")
        for name, master in (("local[2]", "local[2]"), ("cluster", cluster.url)):
            params = worker_params(args, os.path.join(work, name.replace("[", "").strip("]")))
            params.update(master=master, data=os.path.join(params["work"], "data"))
            shutil.rmtree(params["data"], ignore_errors=True)
            shutil.copytree(pristine.data_dir, params["data"])
            env = None
            if master == cluster.url:
                params["conf"] = {
                    "spark.archives": f"{packed.path}#env",
                    "spark.pyspark.python": "./env/bin/python",
                    "spark.executor.memory": args.executor_memory,
                    "spark.executor.cores": "1",
                }
                # The driver's own Python workers (planning) run the unpacked copy in ``job``.
                env = {**os.environ, "PYSPARK_PYTHON": "./env/bin/python"}
            results[name] = run_worker("compact", params, cwd=job, env=env)
            shutil.rmtree(params["data"], ignore_errors=True)
    finally:
        orphans = cluster.stop()
        if orphans:
            say(f"  killed processes left after the cluster: {orphans}")
    local, on_cluster = results["local[2]"], results["cluster"]
    range_records = local["first_uncleanable_offset"] - local["first_dirty_offset"]
    emit(
        "cluster_one_pass_compaction",
        range_records / on_cluster["seconds"],
        "records/s",
        records=range_records,
        keys=pristine.keys,
        cluster={"seconds": _r(on_cluster["seconds"]),
                 "phases": {k: _r(v) for k, v in on_cluster["phases"].items()}},
        local_2={"seconds": _r(local["seconds"]),
                 "phases": {k: _r(v) for k, v in local["phases"].items()},
                 "records_s": round(range_records / local["seconds"])},
        cluster_over_local=_r(local["seconds"] / on_cluster["seconds"]),
        ok=all(r["end_offset"] == r["first_uncleanable_offset"]
               and r["records_after"] == pristine.keys for r in (local, on_cluster)),
        executor_memory=args.executor_memory,
        limit={"what": "cores of the machine, shared by the master, 2 workers (1 core each) "
               "and the driver", "value": os.cpu_count()},
        what="compact(mode='one-pass') of copies of the same log after a warm-up, on local[2] "
        "and on a standalone cluster (2 workers x 1 core, executors in their own JVMs, Python "
        "from spark.archives); records/s on the cluster; cluster_over_local = local seconds / "
        "cluster seconds",
    )  # fmt: skip
    shutil.rmtree(pristine.data_dir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="bench-data/spark", help="work directory (created)")
    parser.add_argument("--keys", type=int, default=20_000_000, help="distinct keys to compact")
    parser.add_argument("--updates", type=int, default=None, help="updates (default keys / 4)")
    parser.add_argument("--read-records", type=int, default=4_000_000, help="records to read")
    parser.add_argument("--read-partitions", type=int, default=4, help="of the read log")
    parser.add_argument(
        "--scaling-keys", type=int, default=2_000_000, help="keys of the scaling compaction"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed reads of each kind")
    parser.add_argument(
        "--kafka-passes",
        type=int,
        default=1_000,
        help="in-process cleaner passes on a copy of the log (default: all; 0: skip)",
    )
    parser.add_argument("--master", default="local[2]", help="of the compaction and read runs")
    parser.add_argument("--driver-memory", default="6g", help="spark.driver.memory of every run")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument(
        "--inspect", action="store_true", help="also run cleaner_status on the log (slow)"
    )
    parser.add_argument("--skip-compaction", action="store_true", help="no compaction figures")
    parser.add_argument("--skip-read", action="store_true", help="no data source vs Parquet")
    parser.add_argument("--skip-scaling", action="store_true", help="no local[1] vs local[2]")
    parser.add_argument("--skip-cluster", action="store_true", help="no cluster vs local[2]")
    parser.add_argument(
        "--cluster-keys", type=int, default=1_000_000, help="keys of the cluster compaction"
    )
    parser.add_argument("--executor-memory", default="2g", help="of the cluster's executors")
    parser.add_argument(
        "--skip-snapshot", action="store_true", help="no snapshot refresh (Delta vs Parquet)"
    )
    parser.add_argument(
        "--snapshot-keys", type=int, default=1_000_000, help="live keys of the snapshot table"
    )
    parser.add_argument(
        "--snapshot-batches", default="1000,10000,100000", help="new records per timed refresh"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, params = args.worker
        print(json.dumps(WORKERS[kind](json.loads(params)), default=str), flush=True)
        return 0

    import pyspark

    root = os.path.abspath(args.dir)
    made_parent = not os.path.exists(os.path.dirname(root))
    os.makedirs(root, exist_ok=True)
    emit(
        "machine",
        os.cpu_count() or 0,
        "cores",
        python=sys.version.split()[0],
        pyspark=pyspark.__version__,
        load_average=[round(x, 2) for x in os.getloadavg()],
        memory_gib=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        driver_memory=args.driver_memory,
    )
    if not args.skip_compaction:
        bench_compaction(args, root)
    if not (args.skip_read and args.skip_scaling):
        say(f"building the read log: {args.read_records:,} records of 100 bytes")
        read = build_read_log(
            os.path.join(root, "read-data"), args.read_records, args.read_partitions
        )
        say(f"  built in {read.seconds:.1f} s ({read.log_bytes / MB:.0f} MB)")
        if not args.skip_read:
            bench_read(args, root, read)
        if not args.skip_scaling:
            bench_scaling(args, root, read)
    if not args.skip_cluster:
        bench_cluster(args, root)
    if not args.skip_snapshot:
        bench_snapshot_refresh(args, root)
    emit("load_average_at_end", os.getloadavg()[0], "load", load_average=list(os.getloadavg()))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
        if made_parent:  # bench-data, say: only if this run made it and nothing else is in it
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(root))
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
