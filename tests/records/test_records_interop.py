"""Interoperability with kafka-python's and aiokafka's record code, for every codec.

What those libraries need per codec (as installed here):

* kafka-python 3.0 (``kafka.codec``): gzip - stdlib ``gzip``; snappy - ``python-snappy``
  (module ``snappy``), xerial framing done in Python; lz4 - ``lz4`` (``lz4.frame``); zstd -
  ``zstandard``.
* aiokafka 0.14 (``aiokafka.codec``, used by both its Python and its Cython records): gzip -
  stdlib ``gzip``; snappy, lz4 and zstd - ``cramjam``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from aiokafka.record import default_records as aio_default
from aiokafka.record import memory_records as aio_memory

from compactlog.records import (
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
    decode_columns,
    decompress,
)

with warnings.catch_warnings():
    # kafka-python's package import uses importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import default_records as kp_default
    from kafka.record import memory_records as kp_memory

CODECS = list(Compression)

RecordTuple = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def sample_records(n: int = 40) -> list[RecordTuple]:
    """Compressible records with nulls, empties and headers (kafka-python falls back to an
    uncompressed batch when compression does not pay, so the data must compress)."""
    out: list[RecordTuple] = []
    for i in range(n):
        key = None if i % 7 == 3 else (b"" if i % 11 == 5 else b"key-%d" % i)
        value = None if i % 5 == 2 else (b"" if i % 9 == 4 else b"value %d; " % i * (i % 13))
        headers: list[tuple[str, bytes | None]] = []
        if i % 3 == 0:
            headers = [("trace-id", b"abc%d" % i), ("ünïcode-ключ", None), ("", b"")]
        out.append((key, value, headers))
    return out


def expected(
    records: Sequence[RecordTuple], base_offset: int, timestamps: Sequence[int]
) -> list[Record]:
    return [
        Record(base_offset + i, ts, k, v, tuple(h))
        for i, ((k, v, h), ts) in enumerate(zip(records, timestamps, strict=True))
    ]


def as_records(foreign: Any) -> list[Record]:
    """Records read by a foreign library, as ours."""
    return [
        Record(r.offset, r.timestamp, r.key, r.value, tuple((k, v) for k, v in r.headers))
        for r in foreign
    ]


FOREIGN_BATCH_READERS: dict[str, Callable[[bytes], Any]] = {
    "kafka-python": lambda raw: kp_default.DefaultRecordBatch(bytearray(raw)),
    "aiokafka-py": aio_default._DefaultRecordBatchPy,
    "aiokafka-cython": aio_default.DefaultRecordBatch,
}

FOREIGN_MEMORY_READERS: dict[str, Callable[[bytes], Any]] = {
    "kafka-python": kp_memory.MemoryRecords,
    "aiokafka-py": aio_memory._MemoryRecordsPy,
    "aiokafka-cython": aio_memory.MemoryRecords,
}

FOREIGN_BUILDERS: dict[str, Callable[..., Any]] = {
    "kafka-python": kp_default.DefaultRecordBatchBuilder,
    "aiokafka-py": aio_default._DefaultRecordBatchBuilderPy,
    "aiokafka-cython": aio_default.DefaultRecordBatchBuilder,
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("reader", list(FOREIGN_BATCH_READERS))
def test_ours_read_by_them(codec: Compression, reader: str) -> None:
    records = sample_records()
    timestamps = [1_700_000_000_000 + 3 * i for i in range(len(records))]
    raw = build_batch(
        records,
        base_offset=1000,
        timestamps=timestamps,
        compression=codec,
        producer_id=77,
        producer_epoch=2,
        base_sequence=10,
        is_transactional=True,
    )
    batch = FOREIGN_BATCH_READERS[reader](raw)
    assert batch.validate_crc()
    assert batch.compression_type == int(codec)
    assert batch.base_offset == 1000
    assert batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 2, 10)
    assert batch.max_timestamp == max(timestamps)
    assert as_records(batch) == expected(records, 1000, timestamps)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("reader", list(FOREIGN_MEMORY_READERS))
def test_ours_read_by_their_memory_records(codec: Compression, reader: str) -> None:
    records = sample_records(10)
    first = build_batch(records, base_offset=0, timestamps=5, compression=codec)
    second = build_batch(records, base_offset=10, timestamps=6, compression=codec)
    memory = FOREIGN_MEMORY_READERS[reader](first + second)
    seen: list[Record] = []
    while memory.has_next():
        seen += as_records(memory.next_batch())
    assert seen == expected(records, 0, [5] * 10) + expected(records, 10, [6] * 10)


@pytest.mark.parametrize("reader", list(FOREIGN_BATCH_READERS))
def test_log_append_time_read_by_them(reader: str) -> None:
    raw = build_batch(
        [(b"k", b"v")] * 3,
        timestamps=[1, 2, 3],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        max_timestamp=42,
    )
    batch = FOREIGN_BATCH_READERS[reader](raw)
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [42, 42, 42]


def test_control_batch_read_by_kafka_python() -> None:
    raw = build_end_txn_marker_batch(
        commit=False, producer_id=5, producer_epoch=1, coordinator_epoch=3, timestamp=9
    )
    batch = kp_default.DefaultRecordBatch(bytearray(raw))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert record.abort and not record.commit


def _build_theirs(
    builder_name: str, codec: Compression, records: Sequence[RecordTuple], timestamps: list[int]
) -> bytes:
    builder = FOREIGN_BUILDERS[builder_name](2, int(codec), 0, -1, -1, -1, 1 << 30)
    for i, ((key, value, headers), ts) in enumerate(zip(records, timestamps, strict=True)):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder", list(FOREIGN_BUILDERS))
def test_theirs_read_by_us(codec: Compression, builder: str, kernel: str) -> None:
    records = sample_records()
    timestamps = [1_600_000_000_000 - 5 * i for i in range(len(records))]
    raw = _build_theirs(builder, codec, records, timestamps)
    batch = RecordBatch(raw)
    assert batch.is_valid()
    assert batch.compression is codec
    want = expected(records, 0, timestamps)
    assert batch.records() == want
    assert decode_columns(raw, kernel=kernel).to_records() == want

    # The same bytes as ours (kafka-python writes partitionLeaderEpoch 0, aiokafka -1); for
    # compressed batches the same header and the same records before compression.
    epoch = batch.partition_leader_epoch
    ours = build_batch(
        records, timestamps=timestamps, partition_leader_epoch=epoch, compression=codec
    )
    if codec is Compression.NONE:
        assert raw == ours
    else:
        assert decompress(codec, raw[61:]) == decompress(codec, ours[61:])
        assert raw[:8] + raw[12:17] + raw[21:61] == ours[:8] + ours[12:17] + ours[21:61]


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_big_multi_block_streams_both_ways(codec: Compression) -> None:
    # > 64 KiB: several xerial blocks and several LZ4 blocks.
    records: list[RecordTuple] = [(b"k%d" % i, b"%08d" % i * 500, []) for i in range(60)]
    timestamps = [7] * len(records)
    ours = build_batch(records, timestamps=timestamps, compression=codec)
    for reader in FOREIGN_BATCH_READERS.values():
        assert as_records(reader(ours)) == expected(records, 0, timestamps)
    for builder in FOREIGN_BUILDERS:
        theirs = _build_theirs(builder, codec, records, timestamps)
        assert RecordBatch(theirs).compression is codec
        assert RecordBatch(theirs).records() == expected(records, 0, timestamps)
