"""Zig-zag varints, the integer encoding inside v2 records (spec 2.4).

A signed number ``n`` is first mapped to an unsigned one so that small magnitudes of either sign
stay small (zig-zag: ``0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, ...``), then written as little-endian
groups of 7 bits, the high bit of each byte saying "more bytes follow"::

    0 -> 00     -1 -> 01     1 -> 02     63 -> 7e     64 -> 80 01     -65 -> 81 01

A *varint* holds an int32 (at most 5 bytes), a *varlong* an int64 (at most 10 bytes).

Decoding rules (what counts as corrupt):

* the buffer ends while the high bit still says "more" -> truncated;
* the last allowed byte (5th / 10th) still has the high bit set -> too long;
* the last allowed byte carries bits beyond 32 / 64 bits -> does not fit. Kafka's reader drops
  those bits silently; we refuse them, since no writer produces them.

Encoding a number outside the int32 / int64 range is a bug in the caller, not corrupt data, so
it raises ``ValueError``.

Records also use *unsigned* varints nowhere, but the wire protocol's flexible versions do; the
``*_unsigned_varint`` helpers are here so that there is one varint module in the package.
"""

from __future__ import annotations

from compactlog.errors import CorruptRecordError

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1

#: Longest legal encodings.
MAX_VARINT_SIZE = 5
MAX_VARLONG_SIZE = 10

Buffer = bytes | bytearray | memoryview


def _encode_unsigned(u: int) -> bytes:
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


# Encodings of -1 .. VARINT_TABLE_MAX, built once: record lengths, key and value lengths and
# offset deltas of ordinary records all land here, and a tuple lookup is several times faster than
# running the loop above. 4 KiB covers the common record sizes while keeping the table ~150 KiB.
VARINT_TABLE_MAX = 4095
VARINT_TABLE: tuple[bytes, ...] = tuple(
    _encode_unsigned((n << 1) ^ (n >> 63)) for n in range(-1, VARINT_TABLE_MAX + 1)
)
"""``VARINT_TABLE[n + 1]`` is the varint encoding of ``n`` for ``-1 <= n <= VARINT_TABLE_MAX``."""


def encode_varint(n: int) -> bytes:
    """Zig-zag varint encoding of the int32 ``n`` (1-5 bytes)."""
    if -1 <= n <= VARINT_TABLE_MAX:
        return VARINT_TABLE[n + 1]
    if not INT32_MIN <= n <= INT32_MAX:
        raise ValueError(f"varint value {n} is outside the int32 range")
    return _encode_unsigned(((n << 1) ^ (n >> 31)) & UINT32_MAX)


def encode_varlong(n: int) -> bytes:
    """Zig-zag varint encoding of the int64 ``n`` (1-10 bytes)."""
    if -1 <= n <= VARINT_TABLE_MAX:
        return VARINT_TABLE[n + 1]
    if not INT64_MIN <= n <= INT64_MAX:
        raise ValueError(f"varlong value {n} is outside the int64 range")
    return _encode_unsigned((n << 1) ^ (n >> 63))


def encode_unsigned_varint(u: int) -> bytes:
    """Plain (not zig-zag) varint of the uint32 ``u``, as used by the wire protocol."""
    if not 0 <= u <= UINT32_MAX:
        raise ValueError(f"unsigned varint value {u} is outside the uint32 range")
    return _encode_unsigned(u)


def size_of_varint(n: int) -> int:
    """Number of bytes :func:`encode_varint` writes for ``n``."""
    return len(encode_varint(n))


def size_of_varlong(n: int) -> int:
    """Number of bytes :func:`encode_varlong` writes for ``n``."""
    return len(encode_varlong(n))


def _decode_unsigned(buf: Buffer, pos: int, max_size: int, what: str) -> tuple[int, int]:
    """Read an unsigned base-128 number of at most ``max_size`` bytes starting at ``pos``."""
    end = len(buf)
    if pos < 0:
        raise CorruptRecordError(f"{what} at negative position {pos}")
    u = 0
    shift = 0
    i = pos
    last = pos + max_size - 1
    while True:
        if i >= end:
            raise CorruptRecordError(
                f"truncated {what} at position {pos}: the buffer ends after {i - pos} byte(s)"
            )
        b = buf[i]
        if i == last:
            if b & 0x80:
                raise CorruptRecordError(
                    f"{what} at position {pos} is longer than {max_size} bytes"
                )
            # The last byte may only carry the bits left over: 32 - 28 = 4 or 64 - 63 = 1.
            spare = max_size * 7 - (32 if max_size == MAX_VARINT_SIZE else 64)
            if b >> (7 - spare):
                raise CorruptRecordError(
                    f"{what} at position {pos} does not fit in "
                    f"{32 if max_size == MAX_VARINT_SIZE else 64} bits (last byte 0x{b:02x})"
                )
        u |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return u, i
        shift += 7


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag int32 varint at ``pos``; returns ``(value, position after it)``."""
    u, new_pos = _decode_unsigned(buf, pos, MAX_VARINT_SIZE, "varint")
    return (u >> 1) ^ -(u & 1), new_pos


def decode_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag int64 varlong at ``pos``; returns ``(value, position after it)``."""
    u, new_pos = _decode_unsigned(buf, pos, MAX_VARLONG_SIZE, "varlong")
    return (u >> 1) ^ -(u & 1), new_pos


def decode_unsigned_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a plain (not zig-zag) uint32 varint at ``pos``; returns ``(value, new position)``."""
    return _decode_unsigned(buf, pos, MAX_VARINT_SIZE, "unsigned varint")
