"""The per-record loops of the offset maps, written once (see :mod:`.offset_map`).

As in :mod:`compactlog.records._kernels`, the reference ("python") kernel *is* this source and
the "numba" kernel is ``njit(cache=True)`` of the very same functions, so the two cannot drift
apart. The rules that follow from that:

* no exceptions: a batch kernel stops and returns the index of the record it could not put;
* helpers are registered with ``register_jitable`` when numba is loaded;
* integer arithmetic never leaves 63 bits, so Python ints and int64 agree: MD5 works on 32-bit
  words held in int64, and MurmurHash3's 64-bit lanes are carried as (high, low) pairs of
  32-bit halves, with a multiplication that splits its operands so no product reaches 2^63;
* bytes are widened with ``& 0xFF`` (numba: a bare uint8 shifts as uint64) and uint32 table
  words with ``& MASK32``.

Input: ``data`` (bytes or a memoryview for the Python kernel, a uint8 array for numba) and the
record columns ``key_pos``, ``key_len`` (-1 = null key) and ``offsets`` (lists for the Python
kernel, int64/int32 arrays for numba). Tables: a uint8 array of 24-byte entries (Kafka's map)
or a uint32 array of 4-word entries (the compact map); the Python kernel gets memoryviews of
them, which index as ints. Scratch arrays (``w``, ``digest``) come from the caller so that the
compiled loop allocates nothing.

Everything is in this one module on purpose: numba's on-disk cache only checks the source file
of the function it compiled, so a helper in another module could change without the cached
kernel noticing.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

MASK32 = 0xFFFFFFFF
INT32_MIN = -(1 << 31)

# Kafka's entry: MD5 digest, then the offset as a big-endian int64.
SKIMPY_HASH_SIZE = 16
SKIMPY_ENTRY_SIZE = SKIMPY_HASH_SIZE + 8
# The last probe window starts here: digest bytes [12, 16) (``hashSize - 4`` in Kafka).
SKIMPY_LAST_WINDOW = SKIMPY_HASH_SIZE - 4

# The compact map's entry: three uint32 words of hash, then the offset relative to the base.
COMPACT_WORDS = 4
COMPACT_ENTRY_SIZE = COMPACT_WORDS * 4
COMPACT_MAX_RELATIVE = MASK32
# MurmurHash3's seed. Fixed so that a map's contents are reproducible; a per-map random seed
# would not protect against deliberately colliding keys anyway (see offset_map's docstring).
MURMUR_SEED = 0

# MurmurHash3_x64_128 constants as (high, low) 32-bit halves.
_C1_HI, _C1_LO = 0x87C37B91, 0x114253D5
_C2_HI, _C2_LO = 0x4CF5AD43, 0x2745937F
_FMIX1_HI, _FMIX1_LO = 0xFF51AFD7, 0xED558CCD
_FMIX2_HI, _FMIX2_LO = 0xC4CEB9FE, 0x1A85EC53

_F = TypeVar("_F", bound=Callable[..., Any])
_JITABLE: list[Callable[..., Any]] = []


def _jitable(fn: _F) -> _F:
    """Mark a helper for ``register_jitable`` (done when the numba kernels are first built)."""
    _JITABLE.append(fn)
    return fn


# --- MD5 (RFC 1321) --------------------------------------------------------------------------


@_jitable
def _rotl32(x: int, r: int) -> int:
    return ((x << r) & MASK32) | (x >> (32 - r))


@_jitable
def _read32le(data: Any, p: int) -> int:
    word: int = (
        (data[p] & 0xFF)
        | ((data[p + 1] & 0xFF) << 8)
        | ((data[p + 2] & 0xFF) << 16)
        | ((data[p + 3] & 0xFF) << 24)
    )
    return word


# The step functions leave their result unmasked: only the low 32 bits of every word matter
# and they depend only on low bits (+, &, |, ^), so one mask, before the rotation, is enough.
# A word stays below 2^39 within a block (each step adds less than 2^32 to an earlier word).


@_jitable
def _md5_f(a: int, b: int, c: int, d: int, x: int, s: int, k: int) -> int:
    return b + _rotl32((a + ((b & c) | ((b ^ MASK32) & d)) + x + k) & MASK32, s)


@_jitable
def _md5_g(a: int, b: int, c: int, d: int, x: int, s: int, k: int) -> int:
    return b + _rotl32((a + ((b & d) | (c & (d ^ MASK32))) + x + k) & MASK32, s)


@_jitable
def _md5_h(a: int, b: int, c: int, d: int, x: int, s: int, k: int) -> int:
    return b + _rotl32((a + (b ^ c ^ d) + x + k) & MASK32, s)


@_jitable
def _md5_i(a: int, b: int, c: int, d: int, x: int, s: int, k: int) -> int:
    return b + _rotl32((a + (c ^ (b | (d ^ MASK32))) + x + k) & MASK32, s)


@_jitable
def _md5_transform(a: int, b: int, c: int, d: int, w: Any) -> tuple[int, int, int, int]:
    """RFC 1321's ``MD5Transform``: the 64 steps over one block of 16 words, written out as
    in the RFC's reference code (constants ``floor(|sin(i + 1)| * 2^32)``)."""
    a0 = a
    b0 = b
    c0 = c
    d0 = d
    a = _md5_f(a, b, c, d, w[0], 7, 0xD76AA478)
    d = _md5_f(d, a, b, c, w[1], 12, 0xE8C7B756)
    c = _md5_f(c, d, a, b, w[2], 17, 0x242070DB)
    b = _md5_f(b, c, d, a, w[3], 22, 0xC1BDCEEE)
    a = _md5_f(a, b, c, d, w[4], 7, 0xF57C0FAF)
    d = _md5_f(d, a, b, c, w[5], 12, 0x4787C62A)
    c = _md5_f(c, d, a, b, w[6], 17, 0xA8304613)
    b = _md5_f(b, c, d, a, w[7], 22, 0xFD469501)
    a = _md5_f(a, b, c, d, w[8], 7, 0x698098D8)
    d = _md5_f(d, a, b, c, w[9], 12, 0x8B44F7AF)
    c = _md5_f(c, d, a, b, w[10], 17, 0xFFFF5BB1)
    b = _md5_f(b, c, d, a, w[11], 22, 0x895CD7BE)
    a = _md5_f(a, b, c, d, w[12], 7, 0x6B901122)
    d = _md5_f(d, a, b, c, w[13], 12, 0xFD987193)
    c = _md5_f(c, d, a, b, w[14], 17, 0xA679438E)
    b = _md5_f(b, c, d, a, w[15], 22, 0x49B40821)
    a = _md5_g(a, b, c, d, w[1], 5, 0xF61E2562)
    d = _md5_g(d, a, b, c, w[6], 9, 0xC040B340)
    c = _md5_g(c, d, a, b, w[11], 14, 0x265E5A51)
    b = _md5_g(b, c, d, a, w[0], 20, 0xE9B6C7AA)
    a = _md5_g(a, b, c, d, w[5], 5, 0xD62F105D)
    d = _md5_g(d, a, b, c, w[10], 9, 0x02441453)
    c = _md5_g(c, d, a, b, w[15], 14, 0xD8A1E681)
    b = _md5_g(b, c, d, a, w[4], 20, 0xE7D3FBC8)
    a = _md5_g(a, b, c, d, w[9], 5, 0x21E1CDE6)
    d = _md5_g(d, a, b, c, w[14], 9, 0xC33707D6)
    c = _md5_g(c, d, a, b, w[3], 14, 0xF4D50D87)
    b = _md5_g(b, c, d, a, w[8], 20, 0x455A14ED)
    a = _md5_g(a, b, c, d, w[13], 5, 0xA9E3E905)
    d = _md5_g(d, a, b, c, w[2], 9, 0xFCEFA3F8)
    c = _md5_g(c, d, a, b, w[7], 14, 0x676F02D9)
    b = _md5_g(b, c, d, a, w[12], 20, 0x8D2A4C8A)
    a = _md5_h(a, b, c, d, w[5], 4, 0xFFFA3942)
    d = _md5_h(d, a, b, c, w[8], 11, 0x8771F681)
    c = _md5_h(c, d, a, b, w[11], 16, 0x6D9D6122)
    b = _md5_h(b, c, d, a, w[14], 23, 0xFDE5380C)
    a = _md5_h(a, b, c, d, w[1], 4, 0xA4BEEA44)
    d = _md5_h(d, a, b, c, w[4], 11, 0x4BDECFA9)
    c = _md5_h(c, d, a, b, w[7], 16, 0xF6BB4B60)
    b = _md5_h(b, c, d, a, w[10], 23, 0xBEBFBC70)
    a = _md5_h(a, b, c, d, w[13], 4, 0x289B7EC6)
    d = _md5_h(d, a, b, c, w[0], 11, 0xEAA127FA)
    c = _md5_h(c, d, a, b, w[3], 16, 0xD4EF3085)
    b = _md5_h(b, c, d, a, w[6], 23, 0x04881D05)
    a = _md5_h(a, b, c, d, w[9], 4, 0xD9D4D039)
    d = _md5_h(d, a, b, c, w[12], 11, 0xE6DB99E5)
    c = _md5_h(c, d, a, b, w[15], 16, 0x1FA27CF8)
    b = _md5_h(b, c, d, a, w[2], 23, 0xC4AC5665)
    a = _md5_i(a, b, c, d, w[0], 6, 0xF4292244)
    d = _md5_i(d, a, b, c, w[7], 10, 0x432AFF97)
    c = _md5_i(c, d, a, b, w[14], 15, 0xAB9423A7)
    b = _md5_i(b, c, d, a, w[5], 21, 0xFC93A039)
    a = _md5_i(a, b, c, d, w[12], 6, 0x655B59C3)
    d = _md5_i(d, a, b, c, w[3], 10, 0x8F0CCC92)
    c = _md5_i(c, d, a, b, w[10], 15, 0xFFEFF47D)
    b = _md5_i(b, c, d, a, w[1], 21, 0x85845DD1)
    a = _md5_i(a, b, c, d, w[8], 6, 0x6FA87E4F)
    d = _md5_i(d, a, b, c, w[15], 10, 0xFE2CE6E0)
    c = _md5_i(c, d, a, b, w[6], 15, 0xA3014314)
    b = _md5_i(b, c, d, a, w[13], 21, 0x4E0811A1)
    a = _md5_i(a, b, c, d, w[4], 6, 0xF7537E82)
    d = _md5_i(d, a, b, c, w[11], 10, 0xBD3AF235)
    c = _md5_i(c, d, a, b, w[2], 15, 0x2AD7D2BB)
    b = _md5_i(b, c, d, a, w[9], 21, 0xEB86D391)
    return (a + a0) & MASK32, (b + b0) & MASK32, (c + c0) & MASK32, (d + d0) & MASK32


@_jitable
def _md5_transform2(
    a: int, b: int, c: int, d: int, w: Any, e: int, f: int, g: int, h: int, v: Any
) -> tuple[int, int, int, int, int, int, int, int]:
    """:func:`_md5_transform` of two blocks at once, their steps interleaved: one MD5 is a
    chain of 64 dependent steps, so a lone one leaves most of the CPU idle; two independent
    chains side by side hash two keys in about the time of 1.3."""
    a0, b0, c0, d0, e0, f0, g0, h0 = a, b, c, d, e, f, g, h
    a = _md5_f(a, b, c, d, w[0], 7, 0xD76AA478)
    e = _md5_f(e, f, g, h, v[0], 7, 0xD76AA478)
    d = _md5_f(d, a, b, c, w[1], 12, 0xE8C7B756)
    h = _md5_f(h, e, f, g, v[1], 12, 0xE8C7B756)
    c = _md5_f(c, d, a, b, w[2], 17, 0x242070DB)
    g = _md5_f(g, h, e, f, v[2], 17, 0x242070DB)
    b = _md5_f(b, c, d, a, w[3], 22, 0xC1BDCEEE)
    f = _md5_f(f, g, h, e, v[3], 22, 0xC1BDCEEE)
    a = _md5_f(a, b, c, d, w[4], 7, 0xF57C0FAF)
    e = _md5_f(e, f, g, h, v[4], 7, 0xF57C0FAF)
    d = _md5_f(d, a, b, c, w[5], 12, 0x4787C62A)
    h = _md5_f(h, e, f, g, v[5], 12, 0x4787C62A)
    c = _md5_f(c, d, a, b, w[6], 17, 0xA8304613)
    g = _md5_f(g, h, e, f, v[6], 17, 0xA8304613)
    b = _md5_f(b, c, d, a, w[7], 22, 0xFD469501)
    f = _md5_f(f, g, h, e, v[7], 22, 0xFD469501)
    a = _md5_f(a, b, c, d, w[8], 7, 0x698098D8)
    e = _md5_f(e, f, g, h, v[8], 7, 0x698098D8)
    d = _md5_f(d, a, b, c, w[9], 12, 0x8B44F7AF)
    h = _md5_f(h, e, f, g, v[9], 12, 0x8B44F7AF)
    c = _md5_f(c, d, a, b, w[10], 17, 0xFFFF5BB1)
    g = _md5_f(g, h, e, f, v[10], 17, 0xFFFF5BB1)
    b = _md5_f(b, c, d, a, w[11], 22, 0x895CD7BE)
    f = _md5_f(f, g, h, e, v[11], 22, 0x895CD7BE)
    a = _md5_f(a, b, c, d, w[12], 7, 0x6B901122)
    e = _md5_f(e, f, g, h, v[12], 7, 0x6B901122)
    d = _md5_f(d, a, b, c, w[13], 12, 0xFD987193)
    h = _md5_f(h, e, f, g, v[13], 12, 0xFD987193)
    c = _md5_f(c, d, a, b, w[14], 17, 0xA679438E)
    g = _md5_f(g, h, e, f, v[14], 17, 0xA679438E)
    b = _md5_f(b, c, d, a, w[15], 22, 0x49B40821)
    f = _md5_f(f, g, h, e, v[15], 22, 0x49B40821)
    a = _md5_g(a, b, c, d, w[1], 5, 0xF61E2562)
    e = _md5_g(e, f, g, h, v[1], 5, 0xF61E2562)
    d = _md5_g(d, a, b, c, w[6], 9, 0xC040B340)
    h = _md5_g(h, e, f, g, v[6], 9, 0xC040B340)
    c = _md5_g(c, d, a, b, w[11], 14, 0x265E5A51)
    g = _md5_g(g, h, e, f, v[11], 14, 0x265E5A51)
    b = _md5_g(b, c, d, a, w[0], 20, 0xE9B6C7AA)
    f = _md5_g(f, g, h, e, v[0], 20, 0xE9B6C7AA)
    a = _md5_g(a, b, c, d, w[5], 5, 0xD62F105D)
    e = _md5_g(e, f, g, h, v[5], 5, 0xD62F105D)
    d = _md5_g(d, a, b, c, w[10], 9, 0x02441453)
    h = _md5_g(h, e, f, g, v[10], 9, 0x02441453)
    c = _md5_g(c, d, a, b, w[15], 14, 0xD8A1E681)
    g = _md5_g(g, h, e, f, v[15], 14, 0xD8A1E681)
    b = _md5_g(b, c, d, a, w[4], 20, 0xE7D3FBC8)
    f = _md5_g(f, g, h, e, v[4], 20, 0xE7D3FBC8)
    a = _md5_g(a, b, c, d, w[9], 5, 0x21E1CDE6)
    e = _md5_g(e, f, g, h, v[9], 5, 0x21E1CDE6)
    d = _md5_g(d, a, b, c, w[14], 9, 0xC33707D6)
    h = _md5_g(h, e, f, g, v[14], 9, 0xC33707D6)
    c = _md5_g(c, d, a, b, w[3], 14, 0xF4D50D87)
    g = _md5_g(g, h, e, f, v[3], 14, 0xF4D50D87)
    b = _md5_g(b, c, d, a, w[8], 20, 0x455A14ED)
    f = _md5_g(f, g, h, e, v[8], 20, 0x455A14ED)
    a = _md5_g(a, b, c, d, w[13], 5, 0xA9E3E905)
    e = _md5_g(e, f, g, h, v[13], 5, 0xA9E3E905)
    d = _md5_g(d, a, b, c, w[2], 9, 0xFCEFA3F8)
    h = _md5_g(h, e, f, g, v[2], 9, 0xFCEFA3F8)
    c = _md5_g(c, d, a, b, w[7], 14, 0x676F02D9)
    g = _md5_g(g, h, e, f, v[7], 14, 0x676F02D9)
    b = _md5_g(b, c, d, a, w[12], 20, 0x8D2A4C8A)
    f = _md5_g(f, g, h, e, v[12], 20, 0x8D2A4C8A)
    a = _md5_h(a, b, c, d, w[5], 4, 0xFFFA3942)
    e = _md5_h(e, f, g, h, v[5], 4, 0xFFFA3942)
    d = _md5_h(d, a, b, c, w[8], 11, 0x8771F681)
    h = _md5_h(h, e, f, g, v[8], 11, 0x8771F681)
    c = _md5_h(c, d, a, b, w[11], 16, 0x6D9D6122)
    g = _md5_h(g, h, e, f, v[11], 16, 0x6D9D6122)
    b = _md5_h(b, c, d, a, w[14], 23, 0xFDE5380C)
    f = _md5_h(f, g, h, e, v[14], 23, 0xFDE5380C)
    a = _md5_h(a, b, c, d, w[1], 4, 0xA4BEEA44)
    e = _md5_h(e, f, g, h, v[1], 4, 0xA4BEEA44)
    d = _md5_h(d, a, b, c, w[4], 11, 0x4BDECFA9)
    h = _md5_h(h, e, f, g, v[4], 11, 0x4BDECFA9)
    c = _md5_h(c, d, a, b, w[7], 16, 0xF6BB4B60)
    g = _md5_h(g, h, e, f, v[7], 16, 0xF6BB4B60)
    b = _md5_h(b, c, d, a, w[10], 23, 0xBEBFBC70)
    f = _md5_h(f, g, h, e, v[10], 23, 0xBEBFBC70)
    a = _md5_h(a, b, c, d, w[13], 4, 0x289B7EC6)
    e = _md5_h(e, f, g, h, v[13], 4, 0x289B7EC6)
    d = _md5_h(d, a, b, c, w[0], 11, 0xEAA127FA)
    h = _md5_h(h, e, f, g, v[0], 11, 0xEAA127FA)
    c = _md5_h(c, d, a, b, w[3], 16, 0xD4EF3085)
    g = _md5_h(g, h, e, f, v[3], 16, 0xD4EF3085)
    b = _md5_h(b, c, d, a, w[6], 23, 0x04881D05)
    f = _md5_h(f, g, h, e, v[6], 23, 0x04881D05)
    a = _md5_h(a, b, c, d, w[9], 4, 0xD9D4D039)
    e = _md5_h(e, f, g, h, v[9], 4, 0xD9D4D039)
    d = _md5_h(d, a, b, c, w[12], 11, 0xE6DB99E5)
    h = _md5_h(h, e, f, g, v[12], 11, 0xE6DB99E5)
    c = _md5_h(c, d, a, b, w[15], 16, 0x1FA27CF8)
    g = _md5_h(g, h, e, f, v[15], 16, 0x1FA27CF8)
    b = _md5_h(b, c, d, a, w[2], 23, 0xC4AC5665)
    f = _md5_h(f, g, h, e, v[2], 23, 0xC4AC5665)
    a = _md5_i(a, b, c, d, w[0], 6, 0xF4292244)
    e = _md5_i(e, f, g, h, v[0], 6, 0xF4292244)
    d = _md5_i(d, a, b, c, w[7], 10, 0x432AFF97)
    h = _md5_i(h, e, f, g, v[7], 10, 0x432AFF97)
    c = _md5_i(c, d, a, b, w[14], 15, 0xAB9423A7)
    g = _md5_i(g, h, e, f, v[14], 15, 0xAB9423A7)
    b = _md5_i(b, c, d, a, w[5], 21, 0xFC93A039)
    f = _md5_i(f, g, h, e, v[5], 21, 0xFC93A039)
    a = _md5_i(a, b, c, d, w[12], 6, 0x655B59C3)
    e = _md5_i(e, f, g, h, v[12], 6, 0x655B59C3)
    d = _md5_i(d, a, b, c, w[3], 10, 0x8F0CCC92)
    h = _md5_i(h, e, f, g, v[3], 10, 0x8F0CCC92)
    c = _md5_i(c, d, a, b, w[10], 15, 0xFFEFF47D)
    g = _md5_i(g, h, e, f, v[10], 15, 0xFFEFF47D)
    b = _md5_i(b, c, d, a, w[1], 21, 0x85845DD1)
    f = _md5_i(f, g, h, e, v[1], 21, 0x85845DD1)
    a = _md5_i(a, b, c, d, w[8], 6, 0x6FA87E4F)
    e = _md5_i(e, f, g, h, v[8], 6, 0x6FA87E4F)
    d = _md5_i(d, a, b, c, w[15], 10, 0xFE2CE6E0)
    h = _md5_i(h, e, f, g, v[15], 10, 0xFE2CE6E0)
    c = _md5_i(c, d, a, b, w[6], 15, 0xA3014314)
    g = _md5_i(g, h, e, f, v[6], 15, 0xA3014314)
    b = _md5_i(b, c, d, a, w[13], 21, 0x4E0811A1)
    f = _md5_i(f, g, h, e, v[13], 21, 0x4E0811A1)
    a = _md5_i(a, b, c, d, w[4], 6, 0xF7537E82)
    e = _md5_i(e, f, g, h, v[4], 6, 0xF7537E82)
    d = _md5_i(d, a, b, c, w[11], 10, 0xBD3AF235)
    h = _md5_i(h, e, f, g, v[11], 10, 0xBD3AF235)
    c = _md5_i(c, d, a, b, w[2], 15, 0x2AD7D2BB)
    g = _md5_i(g, h, e, f, v[2], 15, 0x2AD7D2BB)
    b = _md5_i(b, c, d, a, w[9], 21, 0xEB86D391)
    f = _md5_i(f, g, h, e, v[9], 21, 0xEB86D391)
    return (
        (a + a0) & MASK32,
        (b + b0) & MASK32,
        (c + c0) & MASK32,
        (d + d0) & MASK32,
        (e + e0) & MASK32,
        (f + f0) & MASK32,
        (g + g0) & MASK32,
        (h + h0) & MASK32,
    )


@_jitable
def _md5_fill_block(data: Any, start: int, length: int, block: int, total: int, w: Any) -> None:
    """The 16 words of the block at message position ``block``, padding included (RFC 3.1-3.2):
    the message, a 0x80 byte, zeros, and the length in bits as a little-endian uint64."""
    end = block + 64 if block + 64 < length else length
    words = (end - block) // 4 if end > block else 0
    for j in range(words):
        w[j] = _read32le(data, start + block + 4 * j)
    for j in range(words, 16):
        w[j] = 0
    for m in range(block + 4 * words, end):
        w[(m - block) >> 2] |= (data[start + m] & 0xFF) << (8 * (m & 3))
    if block <= length < block + 64:
        w[(length - block) >> 2] |= 0x80 << (8 * (length & 3))
    if block + 64 == total:
        bits = length * 8
        w[14] = bits & MASK32
        w[15] = (bits >> 32) & MASK32


@_jitable
def md5_digest(data: Any, start: int, length: int, w: Any, digest: Any, at: int) -> None:
    """MD5 of ``data[start:start + length]``: its 16 bytes are written to ``digest[at:at + 16]``.

    ``w`` is 16 words of scratch.
    """
    a = 0x67452301
    b = 0xEFCDAB89
    c = 0x98BADCFE
    d = 0x10325476
    total = ((length + 8) // 64 + 1) * 64
    for block in range(0, total, 64):
        _md5_fill_block(data, start, length, block, total, w)
        a, b, c, d = _md5_transform(a, b, c, d, w)
    _md5_put(digest, at, a, b, c, d)


# A key of up to 55 bytes is one block once padded (a 0x80 byte and the 8-byte length follow).
MD5_ONE_BLOCK = 55


@_jitable
def _md5_put(digest: Any, at: int, a: int, b: int, c: int, d: int) -> None:
    for q in range(4):
        digest[at + q] = (a >> (8 * q)) & 0xFF
        digest[at + 4 + q] = (b >> (8 * q)) & 0xFF
        digest[at + 8 + q] = (c >> (8 * q)) & 0xFF
        digest[at + 12 + q] = (d >> (8 * q)) & 0xFF


@_jitable
def md5_digest_pair(
    data: Any,
    start1: int,
    length1: int,
    start2: int,
    length2: int,
    w: Any,
    v: Any,
    digest: Any,
    at1: int,
    at2: int,
) -> None:
    """:func:`md5_digest` of two messages of at most :data:`MD5_ONE_BLOCK` bytes each, hashed
    side by side (``w`` and ``v``: 16 words of scratch each)."""
    _md5_fill_block(data, start1, length1, 0, 64, w)
    _md5_fill_block(data, start2, length2, 0, 64, v)
    a, b, c, d, e, f, g, h = _md5_transform2(
        0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, w,
        0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, v,
    )  # fmt: skip
    _md5_put(digest, at1, a, b, c, d)
    _md5_put(digest, at2, e, f, g, h)


# --- MurmurHash3_x64_128 on (high, low) 32-bit halves ---------------------------------------


@_jitable
def _mul32(a: int, b: int) -> int:
    """``(a * b) mod 2^32`` for 32-bit a, b; b is split so no product passes 48 bits."""
    return (a * (b & 0xFFFF) + (((a * (b >> 16)) & 0xFFFF) << 16)) & MASK32


@_jitable
def _mul64(ah: int, al: int, bh: int, bl: int) -> tuple[int, int]:
    """``(a * b) mod 2^64`` on halves: the low product exactly, the cross products mod 2^32."""
    p0 = al * (bl & 0xFFFF)
    p1 = al * (bl >> 16)
    lo = p0 + ((p1 & 0xFFFF) << 16)
    hi = (p1 >> 16) + (lo >> 32) + _mul32(ah, bl) + _mul32(al, bh)
    return hi & MASK32, lo & MASK32


@_jitable
def _add64(ah: int, al: int, bh: int, bl: int) -> tuple[int, int]:
    lo = al + bl
    return (ah + bh + (lo >> 32)) & MASK32, lo & MASK32


@_jitable
def _rotl64(h: int, lo: int, r: int) -> tuple[int, int]:
    if r >= 32:
        h, lo = lo, h
        r -= 32
    if r == 0:
        return h, lo
    return ((h << r) | (lo >> (32 - r))) & MASK32, ((lo << r) | (h >> (32 - r))) & MASK32


@_jitable
def _fmix64(h: int, lo: int) -> tuple[int, int]:
    lo ^= h >> 1  # k ^= k >> 33: the high half is untouched
    h, lo = _mul64(h, lo, _FMIX1_HI, _FMIX1_LO)
    lo ^= h >> 1
    h, lo = _mul64(h, lo, _FMIX2_HI, _FMIX2_LO)
    lo ^= h >> 1
    return h, lo


@_jitable
def _mix_k1(h: int, lo: int) -> tuple[int, int]:
    h, lo = _mul64(h, lo, _C1_HI, _C1_LO)
    h, lo = _rotl64(h, lo, 31)
    return _mul64(h, lo, _C2_HI, _C2_LO)


@_jitable
def _mix_k2(h: int, lo: int) -> tuple[int, int]:
    h, lo = _mul64(h, lo, _C2_HI, _C2_LO)
    h, lo = _rotl64(h, lo, 33)
    return _mul64(h, lo, _C1_HI, _C1_LO)


@_jitable
def murmur3_x64_128(data: Any, start: int, length: int, seed: int) -> tuple[int, int, int, int]:
    """MurmurHash3_x64_128 (Appleby, SMHasher) of ``data[start:start + length]``.

    Returns the 128-bit result as four 32-bit words in output byte order: h1 low, h1 high,
    h2 low, h2 high (the digest is h1 then h2, each little-endian).
    """
    h1h = 0
    h1l = seed & MASK32
    h2h = 0
    h2l = seed & MASK32
    nblocks = length // 16
    for blk in range(nblocks):
        p = start + 16 * blk
        k1h, k1l = _mix_k1(_read32le(data, p + 4), _read32le(data, p))
        h1h ^= k1h
        h1l ^= k1l
        h1h, h1l = _rotl64(h1h, h1l, 27)
        h1h, h1l = _add64(h1h, h1l, h2h, h2l)
        h1h, h1l = _mul64(h1h, h1l, 0, 5)
        h1h, h1l = _add64(h1h, h1l, 0, 0x52DCE729)
        k2h, k2l = _mix_k2(_read32le(data, p + 12), _read32le(data, p + 8))
        h2h ^= k2h
        h2l ^= k2l
        h2h, h2l = _rotl64(h2h, h2l, 31)
        h2h, h2l = _add64(h2h, h2l, h1h, h1l)
        h2h, h2l = _mul64(h2h, h2l, 0, 5)
        h2h, h2l = _add64(h2h, h2l, 0, 0x38495AB5)
    tail = start + 16 * nblocks
    rem = length & 15
    if rem > 8:
        k2h = 0
        k2l = 0
        for t in range(8, rem):
            byte = data[tail + t] & 0xFF
            if t < 12:
                k2l |= byte << (8 * (t - 8))
            else:
                k2h |= byte << (8 * (t - 12))
        k2h, k2l = _mix_k2(k2h, k2l)
        h2h ^= k2h
        h2l ^= k2l
    if rem > 0:
        k1h = 0
        k1l = 0
        for t in range(min(rem, 8)):
            byte = data[tail + t] & 0xFF
            if t < 4:
                k1l |= byte << (8 * t)
            else:
                k1h |= byte << (8 * (t - 4))
        k1h, k1l = _mix_k1(k1h, k1l)
        h1h ^= k1h
        h1l ^= k1l
    # The length is an int, at most 2^31 - 1: only the low half changes.
    h1l ^= length & MASK32
    h2l ^= length & MASK32
    h1h, h1l = _add64(h1h, h1l, h2h, h2l)
    h2h, h2l = _add64(h2h, h2l, h1h, h1l)
    h1h, h1l = _fmix64(h1h, h1l)
    h2h, h2l = _fmix64(h2h, h2l)
    h1h, h1l = _add64(h1h, h1l, h2h, h2l)
    h2h, h2l = _add64(h2h, h2l, h1h, h1l)
    return h1l, h1h, h2l, h2h


@_jitable
def compact_hash(data: Any, start: int, length: int) -> tuple[int, int, int]:
    """The compact map's 96-bit key hash: the first 12 bytes of MurmurHash3_x64_128.

    The all-zero hash (the empty key hashes to it with seed 0) marks an empty slot, so it is
    moved to ``(1, 0, 0)``.
    """
    x0, x1, x2, _x3 = murmur3_x64_128(data, start, length, MURMUR_SEED)
    if x0 == 0 and x1 == 0 and x2 == 0:
        x0 = 1
    return x0, x1, x2


# --- Both maps: hash first, then probe ------------------------------------------------------
#
# A put or get is two kernels: one hashes the keys of a range of records into a table of
# hashes (pure: it reads only the keys, so it can run on another thread, ahead of the puts),
# the other probes in record order as Kafka does. The probing kernel works CHUNK records at a
# time: it first loads the home slot of each (the loads are independent, so their cache misses
# overlap instead of stalling one after another), then puts or gets them. Hashing records beyond
# the one a put stops at is only wasted work.
#
# Hash tables, one row per record of the range: Kafka's map keeps the 16 digest bytes (a uint8
# table) and the home slot (an int64 table); the compact map three hash words and the home slot
# (an int64 table of 4 columns). The sum of the prefetching loads is returned, so that they are
# not dead code.

CHUNK = 64
COMPACT_ROW = 4


# --- Kafka's SkimpyOffsetMap -----------------------------------------------------------------


@_jitable
def skimpy_slot(digest: Any, d: int, attempt: int, slots: int) -> int:
    """Kafka's ``positionOf`` / entry size: the slot of probe ``attempt`` (spec 5.1) for the
    digest at ``digest[d:d + 16]``.

    A big-endian int32 window of the digest at byte ``min(attempt, 12)``, plus
    ``max(0, attempt - 12)`` with int32 wrap-around, then ``Utils.abs(p) % slots``.
    """
    j = d + (attempt if attempt < SKIMPY_LAST_WINDOW else SKIMPY_LAST_WINDOW)
    p: int = (
        ((digest[j] & 0xFF) << 24)
        | ((digest[j + 1] & 0xFF) << 16)
        | ((digest[j + 2] & 0xFF) << 8)
        | (digest[j + 3] & 0xFF)
    )
    if attempt > SKIMPY_LAST_WINDOW:
        p = (p + attempt - SKIMPY_LAST_WINDOW) & MASK32
    if p >= 1 << 31:
        p -= 1 << 32
    if p == INT32_MIN:
        p = 0  # Utils.abs(Integer.MIN_VALUE) == 0
    elif p < 0:
        p = -p
    return p % slots


# Kafka's entries are compared a word at a time: ``words`` is the table and ``dwords`` the
# digests, both seen as int64 (entry e is words [3e, 3e + 3): two of digest, one of offset; the
# digest of row r is dwords [2r, 2r + 2)). Only equality is asked of a word, never arithmetic,
# so the byte order of the view does not matter and the Python kernel agrees.


@_jitable
def _skimpy_is_empty(words: Any, w: int) -> bool:
    empty: bool = words[w] == 0 and words[w + 1] == 0 and words[w + 2] == 0
    return empty


@_jitable
def _skimpy_same_digest(words: Any, w: int, dwords: Any, r: int) -> bool:
    same: bool = words[w] == dwords[2 * r] and words[w + 1] == dwords[2 * r + 1]
    return same


@_jitable
def _skimpy_read_offset(table: Any, pos: int) -> int:
    top: int = table[pos] & 0xFF
    if top >= 0x80:
        top -= 0x100
    rest = 0
    for q in range(1, 8):
        rest = (rest << 8) | (table[pos + q] & 0xFF)
    return top * (1 << 56) + rest


def skimpy_hash_batch(
    slots: int,
    data: Any,
    key_pos: Any,
    key_len: Any,
    start: int,
    stop: int,
    w: Any,
    v: Any,
    digests: Any,
    home: Any,
) -> None:
    """Digest and home slot of every keyed record of ``[start, stop)``: record ``i``'s digest
    at ``digests[16 (i - start):]``, its home slot at ``home[i - start]``. Keys of one block
    are hashed two at a time (:func:`md5_digest_pair`); ``w`` and ``v`` are scratch."""
    held = -1  # a one-block key waiting for a partner
    for i in range(start, stop):
        kl = key_len[i]
        if kl < 0:
            continue
        if kl > MD5_ONE_BLOCK:
            md5_digest(data, key_pos[i], kl, w, digests, (i - start) * SKIMPY_HASH_SIZE)
        elif held < 0:
            held = i
            continue
        else:
            md5_digest_pair(
                data,
                key_pos[held],
                key_len[held],
                key_pos[i],
                kl,
                w,
                v,
                digests,
                (held - start) * SKIMPY_HASH_SIZE,
                (i - start) * SKIMPY_HASH_SIZE,
            )
            home[held - start] = skimpy_slot(digests, (held - start) * SKIMPY_HASH_SIZE, 0, slots)
            held = -1
        home[i - start] = skimpy_slot(digests, (i - start) * SKIMPY_HASH_SIZE, 0, slots)
    if held >= 0:
        d = (held - start) * SKIMPY_HASH_SIZE
        md5_digest(data, key_pos[held], key_len[held], w, digests, d)
        home[held - start] = skimpy_slot(digests, d, 0, slots)


@_jitable
def _skimpy_touch(words: Any, key_len: Any, home: Any, start: int, lo: int, hi: int) -> int:
    touched = 0
    for i in range(lo, hi):
        if key_len[i] >= 0:
            touched += words[home[i - start] * 3] & 0xFF
    return touched


@_jitable
def _skimpy_get(
    table: Any, words: Any, slots: int, digests: Any, dwords: Any, r: int, first: int
) -> int:
    # Kafka guards the attempt counter: at most slots + hashSize - 4 probes.
    slot = first
    d = r * SKIMPY_HASH_SIZE
    for attempt in range(slots + SKIMPY_LAST_WINDOW):
        if attempt > 0:
            slot = skimpy_slot(digests, d, attempt, slots)
        if _skimpy_is_empty(words, slot * 3):
            return -1
        if _skimpy_same_digest(words, slot * 3, dwords, r):
            return _skimpy_read_offset(table, slot * SKIMPY_ENTRY_SIZE + SKIMPY_HASH_SIZE)
    return -1


@_jitable
def _mark_latest(marks: Any, marks_base: int, marks_len: int, old: int, offset: int) -> None:
    """Keep the latest-offset marks (see ``OffsetMap.track_latest``): the key's previous offset
    ``old`` (-1: none) is no longer its latest, ``offset`` is. Outside the window: nothing."""
    r = old - marks_base
    if old >= 0 and 0 <= r < marks_len:
        marks[r >> 3] = marks[r >> 3] & (0xFF ^ (1 << (r & 7)))
    r = offset - marks_base
    if 0 <= r < marks_len:
        marks[r >> 3] = marks[r >> 3] | (1 << (r & 7))


def skimpy_put_hashed(
    table: Any,
    words: Any,
    slots: int,
    key_len: Any,
    offsets: Any,
    start: int,
    stop: int,
    first_dirty: int,
    max_desired: int,
    size: int,
    latest: int,
    digests: Any,
    dwords: Any,
    home: Any,
    marks: Any,
    marks_base: int,
    marks_len: int,
) -> tuple[int, int, int, int]:
    """Kafka's map-building loop over records ``[start, stop)``, hashed by
    :func:`skimpy_hash_batch` (row 0 = record ``start``); see ``OffsetMap.put_batch``.
    ``words`` and ``dwords`` are int64 views of ``table`` and ``digests``.

    Returns ``(index of the record it stopped at, or stop; size; latest offset; a checksum of
    the prefetching loads)``. The caller keeps ``max_desired <= slots``, so an empty slot always
    exists when a put is attempted.
    """
    touched = 0
    for lo in range(start, stop, CHUNK):
        hi = min(lo + CHUNK, stop)
        touched += _skimpy_touch(words, key_len, home, start, lo, hi)
        for i in range(lo, hi):
            offset = offsets[i]
            if key_len[i] < 0 or offset < first_dirty:
                continue
            if size >= max_desired:
                return i, size, latest, touched
            r = i - start
            attempt = 0
            old = -1
            slot = home[r]
            while not _skimpy_is_empty(words, slot * 3):
                if _skimpy_same_digest(words, slot * 3, dwords, r):
                    old = _skimpy_read_offset(table, slot * SKIMPY_ENTRY_SIZE + SKIMPY_HASH_SIZE)
                    break
                attempt += 1
                slot = skimpy_slot(digests, r * SKIMPY_HASH_SIZE, attempt, slots)
            else:
                words[slot * 3] = dwords[2 * r]
                words[slot * 3 + 1] = dwords[2 * r + 1]
                size += 1
            pos = slot * SKIMPY_ENTRY_SIZE + SKIMPY_HASH_SIZE
            for q in range(8):
                table[pos + q] = (offset >> (56 - 8 * q)) & 0xFF
            if marks_len > 0:
                _mark_latest(marks, marks_base, marks_len, old, offset)
            latest = offset
    return stop, size, latest, touched


def skimpy_get_hashed(
    table: Any, words: Any, slots: int, key_len: Any, digests: Any, dwords: Any, home: Any, out: Any
) -> int:
    """``out[i]`` = the mapped offset of record i's key, -1 for a null key or an absent one;
    the records hashed by :func:`skimpy_hash_batch` from record 0. Returns the load checksum."""
    n = len(out)
    touched = 0
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        touched += _skimpy_touch(words, key_len, home, 0, lo, hi)
        for i in range(lo, hi):
            if key_len[i] < 0:
                out[i] = -1
            else:
                out[i] = _skimpy_get(table, words, slots, digests, dwords, i, home[i])
    return touched


# --- The compact map: 96-bit hash + 32-bit relative offset, linear probing -------------------


def compact_hash_batch(
    slots: int, data: Any, key_pos: Any, key_len: Any, start: int, stop: int, rows: Any
) -> None:
    """The three hash words and the home slot of every keyed record of ``[start, stop)``, in
    row ``i - start`` of ``rows`` (``COMPACT_ROW`` values a row)."""
    for i in range(start, stop):
        kl = key_len[i]
        if kl >= 0:
            r = (i - start) * COMPACT_ROW
            h0, h1, h2 = compact_hash(data, key_pos[i], kl)
            rows[r] = h0
            rows[r + 1] = h1
            rows[r + 2] = h2
            rows[r + 3] = (((h1 & 0x7FFFFFFF) << 32) | h0) % slots


@_jitable
def _compact_touch(table: Any, key_len: Any, rows: Any, start: int, lo: int, hi: int) -> int:
    touched = 0
    for i in range(lo, hi):
        if key_len[i] >= 0:
            touched += table[rows[(i - start) * COMPACT_ROW + 3] * COMPACT_WORDS] & MASK32
    return touched & MASK32


def compact_put_hashed(
    table: Any,
    slots: int,
    key_len: Any,
    offsets: Any,
    start: int,
    stop: int,
    first_dirty: int,
    max_desired: int,
    size: int,
    latest: int,
    base: int,
    rows: Any,
    marks: Any,
    marks_base: int,
    marks_len: int,
) -> tuple[int, int, int, int, int]:
    """As :func:`skimpy_put_hashed` (rows from :func:`compact_hash_batch`), and it also stops
    at an offset that is not within ``[base, base + 2^32)`` while the map holds entries. An
    empty map takes such an offset as its new base instead, so a pass always maps at least one
    key.

    Returns ``(stopped index or stop, size, latest offset, base, load checksum)``.
    """
    end = slots * COMPACT_WORDS
    touched = 0
    for lo in range(start, stop, CHUNK):
        hi = min(lo + CHUNK, stop)
        touched += _compact_touch(table, key_len, rows, start, lo, hi)
        for i in range(lo, hi):
            offset = offsets[i]
            if key_len[i] < 0 or offset < first_dirty:
                continue
            if size >= max_desired:
                return i, size, latest, base, touched
            rel = offset - base
            if rel < 0 or rel > COMPACT_MAX_RELATIVE:
                if size > 0:
                    return i, size, latest, base, touched
                base = offset
                rel = 0
            r = (i - start) * COMPACT_ROW
            h0 = rows[r]
            h1 = rows[r + 1]
            h2 = rows[r + 2]
            e = rows[r + 3] * COMPACT_WORDS
            old = -1
            while True:
                t0 = table[e] & MASK32
                t1 = table[e + 1] & MASK32
                t2 = table[e + 2] & MASK32
                if t0 == 0 and t1 == 0 and t2 == 0:
                    table[e] = h0
                    table[e + 1] = h1
                    table[e + 2] = h2
                    size += 1
                    break
                if t0 == h0 and t1 == h1 and t2 == h2:
                    old = base + (table[e + 3] & MASK32)
                    break
                e += COMPACT_WORDS
                if e == end:
                    e = 0
            table[e + 3] = rel
            if marks_len > 0:
                _mark_latest(marks, marks_base, marks_len, old, offset)
            latest = offset
    return stop, size, latest, base, touched


def compact_get_hashed(table: Any, slots: int, key_len: Any, base: int, rows: Any, out: Any) -> int:
    """As :func:`skimpy_get_hashed`; at most ``slots`` probes per key."""
    n = len(out)
    end = slots * COMPACT_WORDS
    touched = 0
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        touched += _compact_touch(table, key_len, rows, 0, lo, hi)
        for i in range(lo, hi):
            found = -1
            if key_len[i] >= 0:
                r = i * COMPACT_ROW
                h0 = rows[r]
                h1 = rows[r + 1]
                h2 = rows[r + 2]
                e = rows[r + 3] * COMPACT_WORDS
                for _ in range(slots):
                    t0 = table[e] & MASK32
                    t1 = table[e + 1] & MASK32
                    t2 = table[e + 2] & MASK32
                    if t0 == 0 and t1 == 0 and t2 == 0:
                        break
                    if t0 == h0 and t1 == h1 and t2 == h2:
                        found = base + (table[e + 3] & MASK32)
                        break
                    e += COMPACT_WORDS
                    if e == end:
                        e = 0
            out[i] = found
    return touched


# --- Kernel sets -----------------------------------------------------------------------------


class MapKernels(NamedTuple):
    """One implementation of every kernel: the plain functions, or their compiled twins."""

    md5_digest: Callable[..., None]
    murmur3_x64_128: Callable[..., tuple[int, int, int, int]]
    skimpy_slot: Callable[..., int]
    skimpy_hash_batch: Callable[..., None]
    skimpy_put_hashed: Callable[..., tuple[int, int, int, int]]
    skimpy_get_hashed: Callable[..., int]
    compact_hash_batch: Callable[..., None]
    compact_put_hashed: Callable[..., tuple[int, int, int, int, int]]
    compact_get_hashed: Callable[..., int]
    compiled: bool


PYTHON_KERNELS = MapKernels(
    md5_digest,
    murmur3_x64_128,
    skimpy_slot,
    skimpy_hash_batch,
    skimpy_put_hashed,
    skimpy_get_hashed,
    compact_hash_batch,
    compact_put_hashed,
    compact_get_hashed,
    compiled=False,
)


@functools.cache
def numba_available() -> bool:
    return importlib.util.find_spec("numba") is not None


@functools.cache
def numba_kernels() -> MapKernels:
    """The numba-compiled kernels (compiled, or loaded from numba's cache, on first use).

    numba is imported here rather than at module level: importing it costs about half a second,
    which every CLI command would otherwise pay.
    """
    from numba import njit  # noqa: PLC0415
    from numba.extending import register_jitable  # noqa: PLC0415

    for helper in _JITABLE:
        register_jitable(helper)
    jit = njit(cache=True, nogil=True)
    return MapKernels(
        jit(md5_digest),
        jit(murmur3_x64_128),
        jit(skimpy_slot),
        jit(skimpy_hash_batch),
        jit(skimpy_put_hashed),
        jit(skimpy_get_hashed),
        jit(compact_hash_batch),
        jit(compact_put_hashed),
        jit(compact_get_hashed),
        compiled=True,
    )
