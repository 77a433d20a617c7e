"""Kafka's default partitioner: murmur2 against Kafka's own vectors and against kafka-python."""

from __future__ import annotations

import importlib
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlog.storage.partitioner import murmur2, partition_for_key, to_positive

with warnings.catch_warnings():
    # kafka-python 3.0's package import calls importlib.resources.read_text, which Python 3.11
    # deprecates; pytest runs with warnings as errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    kafka_python_murmur2 = importlib.import_module("kafka.partitioner.default").murmur2

# Kafka's UtilsTest.testMurmur2.
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


def _java_int(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def java_murmur2(data: bytes) -> int:
    """A literal transcription of Utils.murmur2 in wrapping Java ints, with signed bytes."""
    signed = [b - 256 if b > 127 else b for b in data]  # Java's byte is signed
    length = len(signed)
    m, r = 0x5BD1E995, 24
    h = _java_int(0x9747B28C ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = _java_int(
            (signed[i4] & 0xFF)
            + ((signed[i4 + 1] & 0xFF) << 8)
            + ((signed[i4 + 2] & 0xFF) << 16)
            + ((signed[i4 + 3] & 0xFF) << 24)
        )
        k = _java_int(k * m)
        k ^= (k & 0xFFFFFFFF) >> r
        k = _java_int(k * m)
        h = _java_int(h * m)
        h = _java_int(h ^ k)
    tail = length % 4
    if tail == 3:
        h = _java_int(h ^ ((signed[(length & ~3) + 2] & 0xFF) << 16))
    if tail >= 2:
        h = _java_int(h ^ ((signed[(length & ~3) + 1] & 0xFF) << 8))
    if tail >= 1:
        h = _java_int(h ^ (signed[length & ~3] & 0xFF))
        h = _java_int(h * m)
    h = _java_int(h ^ ((h & 0xFFFFFFFF) >> 13))
    h = _java_int(h * m)
    return _java_int(h ^ ((h & 0xFFFFFFFF) >> 15))


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_kafka_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected
    assert java_murmur2(data) == expected


def test_every_tail_length_and_high_bit_bytes() -> None:
    for length in range(0, 13):
        for fill in (0x00, 0x7F, 0x80, 0xFF):
            data = bytes([fill]) * length
            assert murmur2(data) == java_murmur2(data), (length, fill)
            assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)


def test_accepts_bytes_like() -> None:
    assert murmur2(bytearray(b"foobar")) == -790332482
    assert murmur2(memoryview(b"xxfoobar")[2:]) == -790332482


def test_empty_key() -> None:
    assert murmur2(b"") == java_murmur2(b"")
    assert -(2**31) <= murmur2(b"") < 2**31


@given(st.binary(max_size=64))
def test_agrees_with_kafka_python(data: bytes) -> None:
    ours = murmur2(data)
    assert -(2**31) <= ours < 2**31
    assert ours & 0xFFFFFFFF == kafka_python_murmur2(data)  # kafka-python returns it unsigned
    assert ours == java_murmur2(data)


@given(st.binary(max_size=64), st.integers(1, 10_000))
def test_partition_for_key_matches_kafka_pythons_default_partitioner(
    key: bytes, partitions: int
) -> None:
    expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions
    assert partition_for_key(key, partitions) == expected
    assert 0 <= partition_for_key(key, partitions) < partitions


def test_to_positive_is_not_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5
    assert partition_for_key(b"foobar", 1) == 0
    assert partition_for_key(b"foobar", 3) == (-790332482 & 0x7FFFFFFF) % 3


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key(b"k", 0)
