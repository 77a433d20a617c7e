"""Kafka's default partitioner for keyed records: ``toPositive(murmur2(key)) % partitions``.

``murmur2`` is Kafka's ``Utils.murmur2`` (MurmurHash2, 32-bit, seed ``0x9747b28c``), so a key lands
on the same partition as when the Java client (or kafka-python) produces it. Java computes in
wrapping signed 32-bit ints; here every step is masked to 32 bits, and the final value is read back
as a signed int, which is what Java returns. Bytes are unsigned here, as Java's ``& 0xff`` makes
them. Keyless records are partitioned elsewhere (sticky/round-robin), not by this module.
"""

from __future__ import annotations

import struct
from typing import Final

SEED: Final = 0x9747B28C
#: MurmurHash2's mixing constants.
_M: Final = 0x5BD1E995
_R: Final = 24
_MASK32: Final = 0xFFFFFFFF
_WORDS: Final = struct.Struct("<I")


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit hash of ``data``."""
    view = memoryview(data).cast("B")
    length = len(view)
    h = (SEED ^ length) & _MASK32
    body = length & ~3
    # Little-endian 4-byte words, as Java assembles them from data[i] .. data[i+3].
    for (k,) in _WORDS.iter_unpack(view[:body]):
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length & 3
    # Java's switch falls through from case 3 to case 1; only case 1 multiplies.
    if tail == 3:
        h ^= view[body + 2] << 16
    if tail >= 2:
        h ^= view[body + 1] << 8
    if tail >= 1:
        h ^= view[body]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``: MIN_VALUE maps to 0)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, not {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
