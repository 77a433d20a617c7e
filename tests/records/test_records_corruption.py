"""Malformed batches: each raises CorruptRecordError (naming the problem) and nothing else.

Every case goes through both readers: RecordBatch(...).records() and decode_columns() with each
kernel.
"""

from __future__ import annotations

import time
import tracemalloc

import pytest
from records_helpers import raw_batch, record_bytes, zz

from compactlog.errors import CorruptRecordError, UnsupportedCompressionError
from compactlog.records import Compression, RecordBatch, build_batch, compress, decode_columns

GOOD = record_bytes(b"key", b"value")


def expect_corrupt(
    buf: bytes,
    kernel: str,
    match: str,
    *,
    error: type[CorruptRecordError] = CorruptRecordError,
    max_decompressed: int | None = None,
) -> None:
    with pytest.raises(error, match=match):
        decode_columns(buf, kernel=kernel, max_decompressed=max_decompressed)
    with pytest.raises(error, match=match):
        RecordBatch(buf).records(max_decompressed)


def test_truncated_buffers(kernel: str) -> None:
    whole = build_batch([(b"k", b"v"), (b"k2", None)], timestamps=[1, 2])
    for cut in range(1, len(whole)):
        prefix = whole[:cut]
        with pytest.raises(CorruptRecordError):
            decode_columns(prefix, kernel=kernel)
        with pytest.raises(CorruptRecordError):
            RecordBatch(prefix)
    # a whole batch followed by a partial one
    with pytest.raises(CorruptRecordError, match="header at position 79 needs 61 bytes, only 30"):
        decode_columns(whole + whole[:30], kernel=kernel)
    with pytest.raises(CorruptRecordError, match="batch is 79 bytes but only 61 remain"):
        decode_columns(whole + whole[:40] + b"\x00" * 21, kernel=kernel)


def test_bad_crc(kernel: str) -> None:
    buf = bytearray(raw_batch(GOOD, count=1))
    buf[-2] ^= 0xFF
    expect_corrupt(bytes(buf), kernel, "CRC mismatch at offset 0: stored 0x")
    assert not RecordBatch(bytes(buf)).is_valid()


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_bad_magic(magic: int, kernel: str) -> None:
    expect_corrupt(raw_batch(GOOD, count=1, magic=magic), kernel, f"unsupported magic {magic}")


def test_record_length_past_the_end(kernel: str) -> None:
    section = record_bytes(b"key", b"value", length_adjust=5)
    expect_corrupt(
        raw_batch(section, count=1), kernel, "record length 19 at position 61 exceeds the 14 bytes"
    )


def test_negative_record_length(kernel: str) -> None:
    expect_corrupt(raw_batch(zz(-3) + GOOD, count=1), kernel, "record length -3 .* is negative")


def test_record_shorter_than_its_fields(kernel: str) -> None:
    section = record_bytes(b"key", b"value", length_adjust=-2) + b"\x00\x00"
    expect_corrupt(raw_batch(section, count=1), kernel, "value of 5 bytes .* past the end")


def test_record_longer_than_its_fields(kernel: str) -> None:
    body = GOOD[1:] + b"\x00\x00"
    section = zz(len(body)) + body
    expect_corrupt(
        raw_batch(section, count=1), kernel, "has length 16 but its fields take 14 bytes"
    )


def test_leftover_bytes(kernel: str) -> None:
    expect_corrupt(
        raw_batch(GOOD * 2, count=1),
        kernel,
        "15 bytes left over after the last of 1 records, at position 76",
    )
    expect_corrupt(raw_batch(GOOD + b"\x00", count=1), kernel, "1 bytes left over")
    expect_corrupt(raw_batch(b"\x00", count=0), kernel, "1 bytes left over after the last of 0")


def test_count_larger_than_records(kernel: str) -> None:
    expect_corrupt(raw_batch(GOOD * 2, count=5), kernel, "recordsCount 5 cannot fit in 30 bytes")
    expect_corrupt(
        raw_batch(GOOD * 2, count=3),
        kernel,
        "record length varint at position 91 runs past the end of the records section",
    )


def test_impossible_count_allocates_nothing(kernel: str) -> None:
    buf = raw_batch(GOOD, count=2**31 - 1)
    tracemalloc.start()
    start = time.perf_counter()
    try:
        expect_corrupt(buf, kernel, "recordsCount 2147483647 cannot fit in 15 bytes")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert time.perf_counter() - start < 5


def test_impossible_count_in_compressed_batch(kernel: str) -> None:
    section = compress(Compression.ZSTD, GOOD)
    buf = raw_batch(section, count=2**31 - 1, attributes=Compression.ZSTD)
    expect_corrupt(buf, kernel, "recordsCount 2147483647 cannot fit in 15 bytes")
    expect_corrupt(
        buf, kernel, "cannot fit in 1000 bytes \\(max_decompressed\\)", max_decompressed=1000
    )


def test_negative_header_count(kernel: str) -> None:
    section = record_bytes(b"k", b"v", header_count=-1)
    expect_corrupt(raw_batch(section, count=1), kernel, "invalid headersCount -1")


def test_huge_header_count(kernel: str) -> None:
    section = record_bytes(b"k", b"v", header_count=2**31 - 1)
    expect_corrupt(raw_batch(section, count=1), kernel, "header keyLength varint .* runs past")


def test_negative_header_key_length(kernel: str) -> None:
    body = b"\x00\x00\x00" + zz(1) + b"k" + zz(1) + b"v" + zz(1) + zz(-1) + zz(-1)
    section = zz(len(body)) + body
    expect_corrupt(raw_batch(section, count=1), kernel, "invalid header keyLength -1")


def test_header_key_not_utf8(kernel: str) -> None:
    section = record_bytes(b"k", b"v", [(b"\xff\xfe", b"x")])
    expect_corrupt(raw_batch(section, count=1), kernel, "header key of 2 bytes .* not valid UTF-8")


@pytest.mark.parametrize(("field", "length"), [("keyLength", -2), ("valueLength", -7)])
def test_lengths_below_minus_one(field: str, length: int, kernel: str) -> None:
    if field == "keyLength":
        body = b"\x00\x00\x00" + zz(length) + zz(1) + b"v" + b"\x00"
    else:
        body = b"\x00\x00\x00" + zz(1) + b"k" + zz(length) + b"\x00"
    expect_corrupt(raw_batch(zz(len(body)) + body, count=1), kernel, f"invalid {field} {length}")


def test_header_value_length_below_minus_one(kernel: str) -> None:
    body = b"\x00\x00\x00" + zz(1) + b"k" + zz(1) + b"v" + zz(1) + zz(1) + b"h" + zz(-3)
    expect_corrupt(
        raw_batch(zz(len(body)) + body, count=1), kernel, "invalid header valueLength -3"
    )


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (b"\xff\xff\xff\xff\xff\xff", "timestampDelta varint at position 63 runs past the end"),
        (b"\xff" * 10 + b"\x01\x00\x00\x00\x00", "timestampDelta varint .* longer than 10"),
        (b"\xff" * 9 + b"\x7f\x00\x00\x00\x00", "timestampDelta varint .* not fit in 64 bits"),
    ],
)
def test_bad_timestamp_varints(bad: bytes, match: str, kernel: str) -> None:
    body = b"\x00" + bad
    expect_corrupt(raw_batch(zz(len(body)) + body, count=1), kernel, match)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (b"\xff\xff\xff\xff\xff\x01", "offsetDelta varint .* longer than 5 bytes"),
        (b"\xff\xff\xff\xff\x7f", "offsetDelta varint .* does not fit in 32 bits"),
    ],
)
def test_bad_offset_varints(bad: bytes, match: str, kernel: str) -> None:
    body = b"\x00\x00" + bad + b"\x00" * 4
    expect_corrupt(raw_batch(zz(len(body)) + body, count=1), kernel, match)


def test_bad_record_length_varint(kernel: str) -> None:
    expect_corrupt(
        raw_batch(b"\xff" * 7, count=1), kernel, "record length varint .* longer than 5 bytes"
    )
    expect_corrupt(
        raw_batch(b"\x00" * 6 + b"\x80", count=1),
        kernel,
        "record ends before its attributes byte",
    )


def test_errors_in_compressed_batches_name_the_decompressed_position(kernel: str) -> None:
    section = compress(Compression.GZIP, GOOD + record_bytes(b"k", b"v", header_count=-4))
    buf = raw_batch(section, count=2, attributes=Compression.GZIP)
    expect_corrupt(buf, kernel, "invalid headersCount -4 at byte 23 of the decompressed records")


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec(codec_id: int, kernel: str) -> None:
    expect_corrupt(
        raw_batch(GOOD, count=1, attributes=codec_id),
        kernel,
        f"unknown compression codec id {codec_id}",
        error=UnsupportedCompressionError,
    )


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_invalid_compressed_section(codec: Compression, kernel: str) -> None:
    buf = raw_batch(b"this is not compressed data", count=1, attributes=codec)
    expect_corrupt(buf, kernel, f"position 0 .*invalid {codec.kafka_name} data")


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_decompression_bomb(codec: Compression, kernel: str) -> None:
    records = [(b"k", bytes(100_000))] * 20  # 2 MB of zeros, a few KiB compressed
    buf = build_batch(records, compression=codec)
    assert len(buf) < 200_000
    expect_corrupt(buf, kernel, "more than max_decompressed = 100000", max_decompressed=100_000)
    assert len(decode_columns(buf, kernel=kernel, max_decompressed=3_000_000)) == 20
