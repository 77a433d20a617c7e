"""Storage benchmarks. Prints one JSON line per figure: the figure, its unit, and the machine
limit measured in the same run on the same disk, so a figure is read against what the machine
can do rather than against a number from another day.

    python benchmarks/bench_storage.py [--dir bench-data] [--gib 1.0]

Figures:

* ``append``: 1 GiB of 1 KiB records in 100-record batches through ``Store.append``, flushed at
  the end, as MB/s and as a ratio to ``dd`` writing 1 GiB with fdatasync to the same directory
  just before; three interleaved rounds, the median ratio reported with every round.
* ``decode_columns``: bulk decode of 100-byte records into columns (numba kernel, and the pure
  Python reference kernel on a smaller buffer), records/s.
* ``iterate_records``: ``Store.read`` over a log of 100-byte records, records/s.
* ``raw_batch_read``: whole batches read back from the page cache by ``Log.iter_batches``, MB/s,
  against ``dd`` reading the same file to /dev/null: as every reader gets them (framing and
  every batch's CRC-32C checked), and with ``verify_crc=False`` (framing only), so that the
  cost of checking CRCs on every read is a figure of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any

from compactlog.records import Compression, build_batch, decode_columns
from compactlog.storage.store import Store

MB = 1_000_000


def emit(name: str, value: float, unit: str, **extra: Any) -> None:
    print(
        json.dumps({"benchmark": name, "value": round(value, 3), "unit": unit, **extra}), flush=True
    )


def dd_write_mb_s(directory: str, size_mib: int) -> float:
    path = os.path.join(directory, "dd.bin")
    out = subprocess.run(
        ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={size_mib}", "conv=fdatasync"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    os.remove(path)
    return _dd_rate(out, size_mib)


def dd_read_mb_s(path: str) -> float:
    size = os.path.getsize(path)
    out = subprocess.run(
        ["dd", f"if={path}", "of=/dev/null", "bs=1M"], capture_output=True, text=True, check=True
    ).stderr
    return _dd_rate(out, size / 2**20)


def _dd_rate(stderr: str, size_mib: float) -> float:
    match = re.search(r"copied, ([0-9.]+) s", stderr)
    if not match:
        raise RuntimeError(f"cannot read dd's output: {stderr!r}")
    return size_mib * 2**20 / float(match.group(1)) / MB


def _append_once(data_dir: str, gib: float) -> tuple[float, int, float, str]:
    shutil.rmtree(data_dir, ignore_errors=True)
    record_value = b"v" * 1010
    batches = int(gib * 2**30 / (100 * 1024))
    records = [(b"key-%08d" % i, record_value) for i in range(100)]  # 1024 B of key + value
    store = Store.open(data_dir)
    store.create_topic("bench", 1)
    started = time.perf_counter()
    for _ in range(batches):
        store.append("bench", 0, records)
    store.flush()
    elapsed = time.perf_counter() - started
    written = store.log("bench", 0).size()
    path = store.segments("bench", 0)[0].path
    store.close()
    return written / elapsed / MB, written, elapsed, path


def bench_append(directory: str, gib: float, rounds: int) -> str:
    """Interleaved rounds of (dd, append): this virtual disk's speed drifts by 2x between
    minutes, so each append is compared with the dd run just before it, and the median ratio
    is the figure."""
    data_dir = os.path.join(directory, "append")
    results = []
    path = ""
    for _ in range(rounds):
        limit = dd_write_mb_s(directory, int(gib * 1024))
        rate, written, elapsed, path = _append_once(data_dir, gib)
        results.append((rate, limit, written, elapsed))
    ratios = sorted(rate / limit for rate, limit, _, _ in results)
    median = ratios[len(ratios) // 2]
    rate, limit, written, elapsed = next(r for r in results if r[0] / r[1] == median)
    emit(
        "append_1KiB_records_100_per_batch",
        rate,
        "MB/s",
        bytes=written,
        seconds=round(elapsed, 3),
        limit={
            "what": "dd bs=1M conv=fdatasync to the same directory, just before",
            "value": round(limit, 1),
            "unit": "MB/s",
        },
        ratio=round(median, 3),
        rounds=[
            {"append_mb_s": round(r, 1), "dd_mb_s": round(d, 1), "ratio": round(r / d, 3)}
            for r, d, _, _ in results
        ],
        target_ratio=0.75,
    )
    return path


def bench_raw_read(store_dir: str, log_path: str) -> None:
    limit = dd_read_mb_s(log_path)  # also warms the page cache
    store = Store.open(store_dir)
    log = store.log("bench", 0)
    for name, verify_crc in (
        ("raw_batch_read_page_cache", True),
        ("raw_batch_read_page_cache_no_crc", False),
    ):
        best = 0.0
        for _ in range(3):
            started = time.perf_counter()
            total = 0
            for batch in log.iter_batches(0, verify_crc=verify_crc):
                total += len(batch.data)
            best = max(best, total / (time.perf_counter() - started) / MB)
        emit(
            name,
            best,
            "MB/s",
            bytes=total,
            crc_checked=verify_crc,
            limit={
                "what": "dd bs=1M of the same file to /dev/null",
                "value": round(limit, 1),
                "unit": "MB/s",
            },
            ratio=round(best / limit, 3),
            target_mb_s=1000,
        )
    store.close()


def _small_record_buffer(records: int) -> bytes:
    """Batches of 100 records whose key + value is 100 bytes (record size about 107 bytes)."""
    batch = build_batch(
        [(b"key-%06d" % i, b"x" * 90) for i in range(100)],
        timestamps=1_700_000_000_000,
        compression=Compression.NONE,
    )
    return batch * (records // 100)


def bench_decode(records: int) -> None:
    buf = _small_record_buffer(records)
    decode_columns(buf[: len(buf) // (records // 100)], kernel="numba")  # compile outside the clock
    best = 0.0
    for _ in range(3):
        started = time.perf_counter()
        cols = decode_columns(buf, kernel="numba")
        best = max(best, len(cols) / (time.perf_counter() - started))
    emit(
        "decode_columns_100B_records",
        best,
        "records/s",
        kernel="numba",
        records=records,
        buffer_bytes=len(buf),
        target=5_000_000,
    )
    small = buf[: len(buf) // 10]
    started = time.perf_counter()
    cols = decode_columns(small, kernel="python")
    emit(
        "decode_columns_100B_records",
        len(cols) / (time.perf_counter() - started),
        "records/s",
        kernel="python (reference)",
        records=len(cols),
    )


def bench_iterate(directory: str, records: int) -> None:
    data_dir = os.path.join(directory, "iterate")
    shutil.rmtree(data_dir, ignore_errors=True)
    store = Store.open(data_dir)
    store.create_topic("small", 1)
    batch_records = [(b"key-%06d" % i, b"x" * 90) for i in range(100)]
    for _ in range(records // 100):
        store.append("small", 0, batch_records)
    best = 0.0
    for _ in range(3):
        started = time.perf_counter()
        count = sum(1 for _ in store.read("small", 0))
        best = max(best, count / (time.perf_counter() - started))
    store.close()
    emit("iterate_records_store_read_100B", best, "records/s", records=count, target=1_000_000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="bench-data")
    parser.add_argument("--gib", type=float, default=1.0, help="size of the append benchmark")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved dd/append rounds")
    parser.add_argument("--records", type=int, default=2_000_000, help="records for decode/iterate")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    emit("machine", os.cpu_count() or 0, "cores", python=sys.version.split()[0])
    log_path = bench_append(args.dir, args.gib, args.rounds)
    bench_raw_read(os.path.join(args.dir, "append"), log_path)
    bench_decode(args.records)
    bench_iterate(args.dir, args.records // 2)
    if not args.keep:
        shutil.rmtree(args.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
