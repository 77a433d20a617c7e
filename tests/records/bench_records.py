"""Throughput of the record-format layer; prints numbers, asserts nothing.

Run: ``python tests/records/bench_records.py`` (not collected by pytest: no ``test_`` prefix).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from compactlog.records import Compression, RecordBatch, build_batch, decode_columns
from compactlog.records.batch import _encode_records


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


def main() -> None:
    # build_batch: 100 records of 1 KiB values (16-byte keys), no headers.
    big = [(os.urandom(16), os.urandom(1024)) for _ in range(100)]
    t_build = best_of(lambda: build_batch(big, timestamps=1_700_000_000_000))
    t_encode = best_of(lambda: _encode_records(big, 0, None))
    print(f"build_batch 100 x 1 KiB:        {t_build * 1e6:7.1f} us/batch (with CRC and header)")
    print(f"  record encoding only:         {t_encode * 1e6:7.1f} us/batch")

    # 100-byte records (10-byte key, 80-byte value -> 98 bytes on the wire), 100 per batch.
    small = [(os.urandom(10), os.urandom(80)) for _ in range(100)]
    batch = build_batch(small, timestamps=1_700_000_000_000)
    rb = RecordBatch(batch)
    t = best_of(rb.records, number=500)
    print(
        f"RecordBatch.records():          {100 / t / 1e6:7.2f} M records/s ({len(batch)} B batch)"
    )

    segment = b"".join(
        build_batch(small, base_offset=i * 100, timestamps=1_700_000_000_000) for i in range(1000)
    )
    for kernel in ("numba", "python"):
        decode_columns(segment[: len(batch)], kernel=kernel)  # compile / warm up
        number = 20 if kernel == "numba" else 2
        t = best_of(lambda k=kernel: decode_columns(segment, kernel=k), repeat=5, number=number)
        t_nocrc = best_of(
            lambda k=kernel: decode_columns(segment, kernel=k, verify_crc=False),
            repeat=5,
            number=number,
        )
        print(
            f"decode_columns[{kernel:6}] 100k recs: {100_000 / t / 1e6:7.2f} M records/s "
            f"({100_000 / t_nocrc / 1e6:.2f} M without CRC)"
        )
    for codec in (Compression.LZ4, Compression.ZSTD, Compression.SNAPPY, Compression.GZIP):
        packed = b"".join(
            build_batch(small, base_offset=i * 100, timestamps=1, compression=codec)
            for i in range(1000)
        )
        t = best_of(lambda p=packed: decode_columns(p), repeat=3, number=3)
        print(
            f"decode_columns[numba ] {codec.kafka_name:6}: {100_000 / t / 1e6:7.2f} M records/s "
            f"({len(packed) / 1e6:.1f} MB compressed)"
        )
    cols = decode_columns(segment)
    t = best_of(cols.to_records, repeat=3, number=3)
    print(f"RecordColumns.to_records():     {100_000 / t / 1e6:7.2f} M records/s")


if __name__ == "__main__":
    main()
