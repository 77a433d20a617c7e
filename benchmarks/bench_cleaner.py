"""Log cleaner benchmarks. Prints one JSON line per figure with the figure, its unit and, where
there is one, the machine limit measured in the same run on the same files.

    python benchmarks/bench_cleaner.py [--dir bench-data] [--gib 1.0] [--records 10000000]

Workload: ``--versions`` (5) updates of every key, keys ``key-%010d`` (14 bytes), values
random bytes (incompressible), 100 records a batch through ``Store.append``, uncompressed, into a
compacted topic with ``segment.bytes`` = ``--segment-mib`` (128). Two update orders
(``--order``): ``shuffled``, the updates in a uniformly random order, so that nearly every batch
keeps some of its records and is rebuilt (the realistic case); ``rounds``, every key once, then
every key again, so that a batch is either dropped whole or kept verbatim (the best case). The
log is rolled, then one cleaning (``LogManager.clean_log`` with the offset map of the job) runs in a
fresh subprocess that opens the store and cleans, after warming the compiled kernels on a tiny
store. This is repeated ``--repeats`` (3) times on the log as built, each cleaning between the
bound's reads and its write; the figures are medians, and every repeat is listed.

Figures:

* ``clean_1KiB_records``: ``--gib`` of 1 KiB records (key + value = 1024 bytes); MB/s = bytes
  read by the cleaner / wall seconds of the cleaning, against the I/O bound of the same job
  measured with plain file I/O on the same files: read the dirty section (what the map pass
  reads) + read the log (what the rewrite reads), 1 MiB ``readinto``, the page cache as warm as
  it is for the cleaner (the log was just written), + write the kept bytes into as many files as
  the cleaner wrote segments and fsync each. ``ratio`` = bound seconds / cleaner seconds.
* ``clean_100B_records_per_s``: ``--records`` records of 100 bytes (key + value), records/s of the
  cleaning (records in the dirty section / wall seconds), one thread; the same I/O bound.
* ``cleaner_peak_rss``: peak RSS of the cleaning subprocess of each job while it cleans (its
  ``VmHWM``, reset just before the cleaning; ``ru_maxrss`` where that is impossible), with the
  RSS just before the cleaning, the whole process's peak, and the dedupe buffer configured
  (``--dedupe-mib``).
* ``offset_map_keys_per_mib``: keys per MiB of both offset maps and the passes a 128 MiB buffer
  (Kafka's default, one cleaner thread) needs for N distinct keys; computed, not timed.
* ``rocksdb_same_job``: the updates of the shuffled 1 KiB job, same keys, values and order, put
  into RocksDB (``rocksdict``, default options in raw mode, 100 puts per WriteBatch, the WAL
  synced at the end as compactlog's append is flushed), then one full compaction
  (``compact_range(None, None)``); time and bytes on disk, next to compactlog's append + clean
  of the same updates. RocksDB flushes and compacts on background threads while the puts run,
  so CPU seconds (all threads) are reported next to wall seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from compactlog.cleaner.offset_map import CompactOffsetMap, SkimpyOffsetMap, keys_per_mib
from compactlog.log_manager import LogManager
from compactlog.storage.config import BrokerConfig
from compactlog.storage.store import Store

MB = 1_000_000
MIB = 1 << 20
KEY_BYTES = 14  # b"key-%010d"
BATCH = 100
TOPIC = "bench"
POOL_BYTES = 64 * MIB


def emit(name: str, value: float, unit: str, **extra: Any) -> None:
    print(
        json.dumps({"benchmark": name, "value": round(value, 3), "unit": unit, **extra}), flush=True
    )


# --- the workload ---------------------------------------------------------------------------


@dataclass
class Updates:
    """A deterministic sequence of updates: key index and value of each, in order."""

    keys: np.ndarray
    value_offsets: np.ndarray
    pool: bytes
    value_size: int
    order: str

    @property
    def count(self) -> int:
        return len(self.keys)

    def batches(self) -> Iterator[list[tuple[bytes, bytes]]]:
        pool, size = self.pool, self.value_size
        for i in range(0, len(self.keys), BATCH):
            keys = self.keys[i : i + BATCH].tolist()
            offsets = self.value_offsets[i : i + BATCH].tolist()
            yield [
                (b"key-%010d" % k, pool[o : o + size]) for k, o in zip(keys, offsets, strict=True)
            ]


def make_updates(n_keys: int, versions: int, order: str, record_bytes: int, seed: int) -> Updates:
    rng = np.random.default_rng(seed)
    if order == "rounds":
        keys = np.tile(np.arange(n_keys, dtype=np.int64), versions)
    else:
        keys = rng.permutation(np.repeat(np.arange(n_keys, dtype=np.int64), versions))
    value_size = record_bytes - KEY_BYTES
    pool = rng.bytes(POOL_BYTES)
    offsets = rng.integers(0, POOL_BYTES - value_size, len(keys), dtype=np.int64)
    return Updates(keys, offsets, pool, value_size, order)


@dataclass
class BuiltLog:
    store_dir: str
    append_seconds: float
    log_bytes: int
    segment_paths: list[str]  # the rolled (cleanable) segments


def build_log(store_dir: str, updates: Updates, segment_bytes: int) -> BuiltLog:
    shutil.rmtree(store_dir, ignore_errors=True)
    store = Store.open(store_dir)
    store.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "segment.bytes": segment_bytes})
    started = time.perf_counter()
    for records in updates.batches():
        store.append(TOPIC, 0, records)
    store.flush()
    elapsed = time.perf_counter() - started
    store.roll(TOPIC, 0)
    segments = [s for s in store.segments(TOPIC, 0) if s.size > 0]
    log_bytes = store.log(TOPIC, 0).size()
    store.close()
    return BuiltLog(store_dir, elapsed, log_bytes, [s.path for s in segments])


def disk_usage(directory: str) -> dict[str, int]:
    """Apparent bytes and allocated bytes (st_blocks) of every file under ``directory``."""
    apparent = allocated = files = 0
    for root, _, names in os.walk(directory):
        for name in names:
            st = os.stat(os.path.join(root, name))
            apparent += st.st_size
            allocated += st.st_blocks * 512
            files += 1
    return {"bytes": apparent, "allocated_bytes": allocated, "files": files}


# --- the I/O bound ----------------------------------------------------------------------------


def read_files_seconds(paths: list[str]) -> tuple[float, int]:
    buf = bytearray(MIB)
    total = 0
    started = time.perf_counter()
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
    return time.perf_counter() - started, total


def write_files_seconds(directory: str, total: int, files: int) -> float:
    """Write ``total`` bytes split over ``files`` files, 1 MiB at a time, fsync each file."""
    chunk = os.urandom(MIB)
    files = max(files, 1)
    per_file = [total // files + (1 if i < total % files else 0) for i in range(files)]
    paths = [os.path.join(directory, f"io-bound-{i}.bin") for i in range(files)]
    started = time.perf_counter()
    for path, size in zip(paths, per_file, strict=True):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            left = size
            while left > 0:
                left -= os.write(fd, chunk[: min(left, MIB)])
            os.fsync(fd)
        finally:
            os.close(fd)
    elapsed = time.perf_counter() - started
    for path in paths:
        os.remove(path)
    return elapsed


# --- one cleaning in a fresh process ------------------------------------------------------------


def _proc_status_bytes(field: str) -> int:
    """``VmRSS`` (resident now) or ``VmHWM`` (its high-water mark) of this process, or -1."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def _reset_peak_rss() -> bool:
    """Reset the high-water mark of this process's RSS (``VmHWM``; Linux >= 4.0), so that it
    is the peak of what follows, not of the imports and the warm-up. (``ru_maxrss`` cannot be
    reset, and in a fork+exec child it also counts the parent's RSS at the fork.)"""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _warm_up(directory: str, offset_map: str) -> None:
    """Compile (or load) the numba kernels of ``offset_map`` on a tiny store, outside the clock."""
    shutil.rmtree(directory, ignore_errors=True)
    logs = LogManager.open(
        directory,
        config={
            "log.cleaner.dedupe.buffer.size": 2 * MIB,
            "compactlog.cleaner.offset.map": offset_map,
        },
    )
    store = logs.store
    store.create_topic("warmup", 1, {"cleanup.policy": "compact"})
    rng = np.random.default_rng(0)
    for _ in range(20):
        keys = rng.integers(0, 300, BATCH).tolist()
        store.append("warmup", 0, [(b"key-%010d" % k, b"v" * 86) for k in keys])
    store.roll("warmup", 0)
    logs.clean_log("warmup", 0)
    logs.close()
    shutil.rmtree(directory, ignore_errors=True)


def child_clean(store_dir: str, dedupe_bytes: int, offset_map: str) -> int:
    """Run in a fresh process: open the store, clean the topic once, print one JSON line."""
    _warm_up(store_dir.rstrip("/") + "-warmup", offset_map)
    logs = LogManager.open(
        store_dir,
        config={
            "log.cleaner.dedupe.buffer.size": dedupe_bytes,
            "compactlog.cleaner.offset.map": offset_map,
        },
    )
    rss_before = _proc_status_bytes("VmRSS")
    peak_before = _proc_status_bytes("VmHWM")  # imports, warm-up and opening
    reset = peak_before > 0 and _reset_peak_rss()
    started, cpu_started = time.perf_counter(), time.process_time()
    result = logs.clean_log(TOPIC, 0)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    # ru_maxrss is the fallback only: it also counts the parent's RSS at fork (the mm a
    # fork+exec child starts from) and cannot be reset.
    peak = (
        _proc_status_bytes("VmHWM")
        if reset
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )
    stats = result.stats
    if stats is None:
        print(json.dumps({"error": f"nothing was cleaned: {result!r}"}))
        return 1
    log_bytes_after = logs.store.log(TOPIC, 0).size()
    logs.close()
    print(
        json.dumps(
            {
                "offset_map": offset_map,
                "seconds": seconds,
                "cpu_seconds": cpu,
                "index_seconds": stats.elapsed_indexing_secs(),
                "first_dirty_offset": result.first_dirty_offset,
                "end_offset": result.end_offset,
                "bytes_read": stats.bytes_read,
                "map_bytes_read": stats.map_bytes_read,
                "bytes_written": stats.bytes_written,
                "messages_read": stats.messages_read,
                "map_messages_read": stats.map_messages_read,
                "messages_written": stats.messages_written,
                "buffer_utilization": stats.buffer_utilization,
                "groups": stats.groups,
                "log_bytes_after": log_bytes_after,
                "rss_before_bytes": rss_before,
                "peak_rss_before_bytes": peak_before,
                "peak_rss_bytes": peak,
                "peak_rss_reset": reset,
                "process_peak_rss_bytes": max(peak, peak_before),
            }
        )
    )
    return 0


def clean_in_subprocess(store_dir: str, dedupe_bytes: int, offset_map: str) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--child-clean",
            store_dir,
            str(dedupe_bytes),
            offset_map,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise RuntimeError(
            f"the cleaning subprocess failed ({out.returncode}):\n{out.stdout}{out.stderr}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# --- a cleaning job with its bound ---------------------------------------------------------------


@dataclass
class CleaningRun:
    built: BuiltLog
    clean: dict[str, Any]  # the cleaning of median duration
    bound: dict[str, Any]  # the median of each part of the bound over the repeats
    repeats: list[tuple[float, float]]  # (cleaner seconds, bound seconds) of every repeat


def run_cleaning(
    store_dir: str, updates: Updates, args: argparse.Namespace, offset_map: str
) -> CleaningRun:
    """Build the log once, then ``--repeats`` times: restore the log as built, measure the
    bound's reads, clean in a fresh process, measure the bound's write. The disk and page
    cache of the development VM drift by a third between minutes, so the figures are the
    medians of cleanings and bounds measured alternately."""
    built = build_log(store_dir, updates, args.segment_mib * MIB)
    pristine = store_dir + ".as-built"
    repeats = max(1, args.repeats)
    if repeats > 1:
        shutil.rmtree(pristine, ignore_errors=True)
        shutil.copytree(store_dir, pristine)
    cleans: list[dict[str, Any]] = []
    bounds: list[dict[str, Any]] = []
    for i in range(repeats):
        if i > 0:
            shutil.rmtree(store_dir)
            shutil.copytree(pristine, store_dir)
        # The bound's reads: the dirty section (everything rolled: never cleaned) and the log.
        read_dirty, dirty_bytes = read_files_seconds(built.segment_paths)
        read_log, log_bytes = read_files_seconds(built.segment_paths)
        clean = clean_in_subprocess(store_dir, args.dedupe_mib * MIB, offset_map)
        # The bound's write, right after the cleaning: the kept bytes, one file per group.
        write_kept = write_files_seconds(store_dir, clean["bytes_written"], clean["groups"])
        cleans.append(clean)
        bounds.append(
            {
                "read_dirty_seconds": read_dirty,
                "read_log_seconds": read_log,
                "write_kept_seconds": write_kept,
                "seconds": read_dirty + read_log + write_kept,
                "bytes_read": dirty_bytes + log_bytes,
                "bytes_written": clean["bytes_written"],
            }
        )
    shutil.rmtree(pristine, ignore_errors=True)
    median_clean = sorted(cleans, key=lambda c: c["seconds"])[len(cleans) // 2]
    bound = {key: statistics.median(b[key] for b in bounds) for key in bounds[0]}
    pairs = [(c["seconds"], b["seconds"]) for c, b in zip(cleans, bounds, strict=True)]
    return CleaningRun(built, median_clean, bound, pairs)


def _r(x: float, digits: int = 3) -> float:
    return round(x, digits)


def emit_cleaning(
    name: str, run: CleaningRun, updates: Updates, n_keys: int, args: argparse.Namespace
) -> None:
    c, b = run.clean, run.bound
    seconds = c["seconds"]
    rewrite_seconds = max(seconds - c["index_seconds"], 1e-9)
    common = {
        "what": "LogManager.clean_log of the whole rolled log in a fresh process, the median of "
        "--repeats cleanings of the same log; MB/s = bytes the cleaner read to rewrite the log "
        "/ wall seconds of the cleaning (map pass included)",
        "order": updates.order,
        "offset_map": c["offset_map"],
        "records": updates.count,
        "keys": n_keys,
        "versions_per_key": args.versions,
        "record_bytes": updates.value_size + KEY_BYTES,
        "segment_bytes": args.segment_mib * MIB,
        "dedupe_buffer_bytes": args.dedupe_mib * MIB,
        "seconds": _r(seconds),
        "cpu_seconds": _r(c["cpu_seconds"]),
        "index_seconds": _r(c["index_seconds"]),
        "rewrite_seconds": _r(rewrite_seconds),
        "bytes_read": c["bytes_read"],
        "map_bytes_read": c["map_bytes_read"],
        "bytes_written": c["bytes_written"],
        "messages_read": c["messages_read"],
        "messages_written": c["messages_written"],
        "buffer_utilization": _r(c["buffer_utilization"], 4),
        "log_bytes_before": run.built.log_bytes,
        "log_bytes_after": c["log_bytes_after"],
        "limit": {
            "what": "plain file I/O on the same files: read the dirty section + read the log "
            "(1 MiB readinto, page cache warm as for the cleaner) + write the kept bytes "
            "(one file per cleaned segment, fsync each)",
            "value": _r(c["bytes_read"] / b["seconds"] / MB, 1),
            "unit": "MB/s",
            "seconds": _r(b["seconds"]),
            "read_dirty_seconds": _r(b["read_dirty_seconds"]),
            "read_log_seconds": _r(b["read_log_seconds"]),
            "write_kept_seconds": _r(b["write_kept_seconds"]),
        },
        "ratio": _r(b["seconds"] / seconds),
        "repeats": {
            "what": "every repeat's cleaner and bound seconds; the figures above are medians",
            "cleaner_seconds": [_r(c) for c, _ in run.repeats],
            "bound_seconds": [_r(x) for _, x in run.repeats],
            "ratios": [_r(x / c) for c, x in run.repeats],
        },
        "phase_ratios": {
            "index": _r(b["read_dirty_seconds"] / max(c["index_seconds"], 1e-9)),
            "rewrite": _r((b["read_log_seconds"] + b["write_kept_seconds"]) / rewrite_seconds),
        },
    }
    if name == "clean_1KiB_records":
        emit(name, c["bytes_read"] / seconds / MB, "MB/s", **common, target_ratio=0.5)
    else:
        records = c["map_messages_read"]  # every record of the dirty section
        emit(
            name,
            records / seconds,
            "records/s",
            mb_s=_r(c["bytes_read"] / seconds / MB, 1),
            **common,
            threads=1,
            target=1_000_000,
        )
    peak = c["peak_rss_bytes"]
    emit(
        "cleaner_peak_rss",
        peak / MIB,
        "MiB",
        job=f"{name}/{updates.order}",
        dedupe_buffer_mib=args.dedupe_mib,
        rss_before_clean_mib=_r(c["rss_before_bytes"] / MIB, 1),
        growth_during_clean_mib=_r((peak - c["rss_before_bytes"]) / MIB, 1),
        process_peak_rss_mib=_r(c["process_peak_rss_bytes"] / MIB, 1),
        what=(
            "peak RSS during one cleaning (VmHWM, reset just before it) in a fresh process that "
            "imported compactlog, warmed the kernels on a tiny store and opened the store; "
            "process_peak_rss_mib: the process's whole life (imports and warm-up included)"
            if c["peak_rss_reset"]
            else "ru_maxrss of a fresh process that imported compactlog, warmed the kernels on "
            "a tiny store, opened the store and cleaned once (the high-water mark could not be "
            "reset: imports and warm-up included)"
        ),
    )


# --- the figures ----------------------------------------------------------------------------------


def bench_keys_per_mib(n_keys_job: int) -> None:
    buffer = BrokerConfig.from_dict({}).dedupe_buffer_size  # Kafka's default, 128 MiB
    counts = sorted({n_keys_job, 10**6, 10**7, 10**8, 10**9})
    for cls in (SkimpyOffsetMap, CompactOffsetMap):
        per_pass = cls(buffer).max_desired_size  # the table is allocated lazily (np.zeros)
        emit(
            "offset_map_keys_per_mib",
            keys_per_mib(cls),
            "keys/MiB",
            map=cls.__name__,
            entry_bytes=cls.entry_size,
            load_factor=0.9,
            dedupe_buffer_bytes=buffer,
            keys_per_pass=per_pass,
            passes_for_keys={str(n): math.ceil(n / per_pass) for n in counts},
            what="computed from the map's size (floor(slots * load factor)), not timed",
        )


def _rocksdb_options(directory: str) -> dict[str, str]:
    wanted = ("compression", "compaction_style", "max_background_jobs", "write_buffer_size")
    found: dict[str, str] = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith("OPTIONS-"):
            with open(os.path.join(directory, name)) as f:
                for line in f:
                    key, _, value = line.strip().partition("=")
                    if key in wanted and key not in found:
                        found[key] = value
    return found


def bench_rocksdb(directory: str, updates: Updates, compactlog_side: dict[str, Any]) -> None:
    try:
        import rocksdict
        from rocksdict import Options, Rdict, WriteBatch
    except ImportError:
        print(
            json.dumps(
                {
                    "benchmark": "rocksdb_same_job",
                    "skipped": "rocksdict not installed: pip install rocksdict",
                }
            ),
            flush=True,
        )
        return
    path = os.path.join(directory, "rocksdb")
    shutil.rmtree(path, ignore_errors=True)
    db = Rdict(path, Options(raw_mode=True))
    started, cpu_started = time.perf_counter(), time.process_time()
    for records in updates.batches():
        wb = WriteBatch(raw_mode=True)
        for key, value in records:
            wb.put(key, value)
        db.write(wb)
    db.flush_wal(True)
    put_seconds = time.perf_counter() - started
    put_cpu = time.process_time() - cpu_started
    before = disk_usage(path)
    started, cpu_started = time.perf_counter(), time.process_time()
    db.compact_range(None, None)
    compact_seconds = time.perf_counter() - started
    compact_cpu = time.process_time() - cpu_started
    keys = db.property_int_value("rocksdb.estimate-num-keys")
    db.close()
    del db
    after = disk_usage(path)
    rocks_seconds = put_seconds + compact_seconds
    emit(
        "rocksdb_same_job",
        rocks_seconds,
        "s",
        what="the updates of clean_1KiB_records/shuffled; value = RocksDB puts + full compaction",
        records=updates.count,
        rocksdb={
            "version": getattr(rocksdict, "__version__", None) or _dist_version("rocksdict"),
            "options": _rocksdb_options(path),
            "put_seconds": _r(put_seconds),
            "put_cpu_seconds": _r(put_cpu),
            "compact_seconds": _r(compact_seconds),
            "compact_cpu_seconds": _r(compact_cpu),
            "seconds": _r(rocks_seconds),
            "bytes_on_disk_before_compaction": before["bytes"],
            "bytes_on_disk_after": after["bytes"],
            "allocated_bytes_after": after["allocated_bytes"],
            "estimate_num_keys": keys,
        },
        compactlog=compactlog_side,
        seconds_ratio_compactlog_over_rocksdb=_r(compactlog_side["seconds"] / rocks_seconds),
        bytes_ratio_compactlog_over_rocksdb=_r(
            compactlog_side["bytes_on_disk_after"] / after["bytes"]
        ),
    )
    shutil.rmtree(path, ignore_errors=True)


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="bench-data", help="work directory (a 'cleaner' subdir)")
    parser.add_argument("--gib", type=float, default=1.0, help="size of the 1 KiB-record log")
    parser.add_argument("--records", type=int, default=10_000_000, help="100-byte records")
    parser.add_argument("--versions", type=int, default=5, help="updates of every key")
    parser.add_argument("--segment-mib", type=int, default=128, help="segment.bytes, MiB")
    parser.add_argument(
        "--dedupe-mib",
        type=int,
        default=BrokerConfig.from_dict({}).dedupe_buffer_size // MIB,
        help="log.cleaner.dedupe.buffer.size, MiB (Kafka's default 128)",
    )
    parser.add_argument(
        "--order", choices=("shuffled", "rounds", "both"), default="both", help="update order"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="cleanings (and bounds) per job; medians reported"
    )
    parser.add_argument("--no-rocksdb", action="store_true", help="skip the RocksDB comparison")
    parser.add_argument(
        "--maps",
        choices=["kafka", "compact", "both"],
        default="both",
        help="offset map of the cleanings (compactlog.cleaner.offset.map); default both",
    )
    parser.add_argument("--child-clean", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_clean:
        return child_clean(args.child_clean[0], int(args.child_clean[1]), args.child_clean[2])

    work = os.path.abspath(os.path.join(args.dir, "cleaner"))
    os.makedirs(work, exist_ok=True)
    orders = ["shuffled", "rounds"] if args.order == "both" else [args.order]
    emit(
        "machine",
        os.cpu_count() or 0,
        "cores",
        python=sys.version.split()[0],
        load_average=[round(x, 2) for x in os.getloadavg()],
        memory_gib=round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    )

    n_keys = int(args.gib * 2**30 / 1024) // args.versions
    bench_keys_per_mib(n_keys)

    maps = ["kafka", "compact"] if args.maps == "both" else [args.maps]
    jobs = [(order, offset_map) for offset_map in maps for order in orders]
    for order, offset_map in jobs:
        updates = make_updates(n_keys, args.versions, order, 1024, seed=1)
        store_dir = os.path.join(work, f"store-1KiB-{order}")
        run = run_cleaning(store_dir, updates, args, offset_map)
        emit_cleaning("clean_1KiB_records", run, updates, n_keys, args)
        if (order, offset_map) == jobs[0] and not args.no_rocksdb:
            usage = disk_usage(store_dir)
            compactlog_side = {
                "append_seconds": _r(run.built.append_seconds),
                "clean_seconds": _r(run.clean["seconds"]),
                "clean_cpu_seconds": _r(run.clean["cpu_seconds"]),
                "seconds": _r(run.built.append_seconds + run.clean["seconds"]),
                "log_bytes_before_clean": run.built.log_bytes,
                "bytes_on_disk_after": usage["bytes"],
                "allocated_bytes_after": usage["allocated_bytes"],
                "log_bytes_after": run.clean["log_bytes_after"],
            }
            shutil.rmtree(store_dir, ignore_errors=True)  # free the disk for RocksDB
            bench_rocksdb(work, updates, compactlog_side)
        shutil.rmtree(store_dir, ignore_errors=True)

    small_keys = args.records // args.versions
    for order, offset_map in jobs:
        updates = make_updates(small_keys, args.versions, order, 100, seed=2)
        store_dir = os.path.join(work, f"store-100B-{order}")
        run = run_cleaning(store_dir, updates, args, offset_map)
        emit_cleaning("clean_100B_records_per_s", run, updates, small_keys, args)
        shutil.rmtree(store_dir, ignore_errors=True)

    shutil.rmtree(work, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(args.dir)  # only if nothing else is in it
    return 0


if __name__ == "__main__":
    sys.exit(main())
