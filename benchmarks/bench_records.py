"""Throughput of the record-format layer, as JSON lines; asserts nothing.

    python benchmarks/bench_records.py

Times are CPU seconds (best mean of several runs), so other processes on a shared machine
disturb them less. The machine reference measured in the same run is CRC-32C over the same
bytes: every decoder pays it, so it is the floor of what verified decoding can cost.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import crc32c

from compactlog.records import Compression, RecordBatch, build_batch, decode_columns
from compactlog.records._encode import _encode_records


def best_of(fn: Callable[[], object], repeat: int = 7, number: int = 200) -> float:
    """Best mean CPU seconds per call over ``repeat`` runs of ``number`` calls (CPU time, so
    that other processes on a shared machine disturb the numbers less)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - start) / number)
    return best


def emit(name: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"benchmark": name, "value": round(value, 3), "unit": unit, **extra}))


def main() -> None:
    # build_batch: 100 records of 1 KiB values (16-byte keys), no headers.
    big = [(os.urandom(16), os.urandom(1024)) for _ in range(100)]
    t_build = best_of(lambda: build_batch(big, timestamps=1_700_000_000_000))
    t_encode = best_of(lambda: _encode_records(big, 0, None))
    emit("build_batch_100x1KiB", t_build * 1e6, "us/batch", includes="CRC, header, join")
    emit("encode_records_100x1KiB", t_encode * 1e6, "us/batch")

    # 100-byte records (10-byte key, 80-byte value -> 98 bytes on the wire), 100 per batch.
    small = [(os.urandom(10), os.urandom(80)) for _ in range(100)]
    batch = build_batch(small, timestamps=1_700_000_000_000)
    rb = RecordBatch(batch)
    t = best_of(rb.records, number=500)
    emit("RecordBatch.records_100B", 100 / t, "records/s", batch_bytes=len(batch), target=1e6)

    segment = b"".join(
        build_batch(small, base_offset=i * 100, timestamps=1_700_000_000_000) for i in range(1000)
    )
    t_crc = best_of(lambda: crc32c.crc32c(segment), repeat=5, number=20)
    limit = {
        "what": "crc32c over the same buffer",
        "value": round(len(segment) / t_crc / 1e9, 2),
        "unit": "GB/s",
    }
    for kernel in ("numba", "python"):
        decode_columns(segment[: len(batch)], kernel=kernel)  # compile / warm up
        number = 20 if kernel == "numba" else 2
        t = best_of(lambda k=kernel: decode_columns(segment, kernel=k), repeat=5, number=number)
        t_nocrc = best_of(
            lambda k=kernel: decode_columns(segment, kernel=k, verify_crc=False),
            repeat=5,
            number=number,
        )
        emit(
            "decode_columns_100B",
            100_000 / t,
            "records/s",
            kernel=kernel,
            without_crc=round(100_000 / t_nocrc),
            limit=limit,
            target=5e6,
        )
    for codec in (Compression.LZ4, Compression.ZSTD, Compression.SNAPPY, Compression.GZIP):
        packed = b"".join(
            build_batch(small, base_offset=i * 100, timestamps=1, compression=codec)
            for i in range(1000)
        )
        t = best_of(lambda p=packed: decode_columns(p), repeat=3, number=3)
        emit(
            "decode_columns_100B",
            100_000 / t,
            "records/s",
            codec=codec.kafka_name,
            compressed_bytes=len(packed),
        )
    cols = decode_columns(segment)
    t = best_of(cols.to_records, repeat=3, number=3)
    emit("RecordColumns.to_records_100B", 100_000 / t, "records/s")


if __name__ == "__main__":
    main()
