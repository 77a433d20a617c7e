"""The per-record loop of :func:`compactlog.records.columns.decode_columns`, written once.

:func:`walk_records` is plain Python that numba can also compile: the reference ("python")
kernel *is* this function, and the "numba" kernel is ``njit(cache=True)`` of the very same
source, so the two cannot drift apart. That shapes how it is written:

* no exceptions: a failure writes ``[status, field, batch, position, a, b]`` into ``err`` and
  returns the status; the caller turns it into a CorruptRecordError (``columns._kernel_error``);
* helpers are registered with ``register_jitable`` when numba is loaded, and remain ordinary
  functions for the Python kernel;
* integer arithmetic never overflows 63 bits, so Python ints and int64 agree: varlongs keep
  their 64th bit apart, and the kernel returns deltas only (the wrapper adds base offset and
  base timestamp with numpy, which wraps like Java's ``long``).

Input: ``data`` (the Python kernel gets ``bytes``, the numba kernel a uint8 array) and, per
batch, the records section ``[start, end)`` and its record count. Output: eight numbers per
record, in an int64 and an int32 table. The Python kernel gets lists of lists, the numba kernel
2-D arrays; both index them the same way.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar

# Status codes.
OK = 0
E_VARINT_TRUNCATED = 1  # a varint runs past the end of its record (or section)
E_VARINT_TOO_LONG = 2  # more than 5 (10) bytes
E_VARINT_OVERFLOW = 3  # last byte has bits beyond 32 (64)
E_RECORD_LENGTH = 4  # a = record length, b = bytes left in the section
E_FIELD_MISSING = 5  # the attributes byte is beyond the record's end
E_BAD_LENGTH = 6  # a = the length or count read for `field`
E_PAST_END = 7  # a = length of `field`, b = bytes left in the record
E_SIZE_MISMATCH = 8  # a = record length, b = bytes its fields took
E_LEFTOVER = 9  # a = bytes left in the section after the last record
E_HEADER_KEY_UTF8 = 10  # a = header key length

# Fields, for messages.
F_RECORD_LENGTH = 0
F_ATTRIBUTES = 1
F_TIMESTAMP_DELTA = 2
F_OFFSET_DELTA = 3
F_KEY_LENGTH = 4
F_KEY = 5
F_VALUE_LENGTH = 6
F_VALUE = 7
F_HEADERS_COUNT = 8
F_HEADER_KEY_LENGTH = 9
F_HEADER_KEY = 10
F_HEADER_VALUE_LENGTH = 11
F_HEADER_VALUE = 12

FIELD_NAMES = (
    "record length",
    "record attributes",
    "timestampDelta",
    "offsetDelta",
    "keyLength",
    "key",
    "valueLength",
    "value",
    "headersCount",
    "header keyLength",
    "header key",
    "header valueLength",
    "header value",
)

ERR_SIZE = 6
# Rows of the int64 output.
OUT64_ROWS = 6
OUT_TS_DELTA = 0
OUT_OFFSET_DELTA = 1
OUT_KEY_POS = 2
OUT_VALUE_POS = 3
OUT_HEADERS_POS = 4
OUT_RECORD_POS = 5
# Rows of the int32 output.
OUT32_ROWS = 3
OUT_KEY_LEN = 0
OUT_VALUE_LEN = 1
OUT_HEADERS_COUNT = 2

_F = TypeVar("_F", bound=Callable[..., Any])
_JITABLE: list[Callable[..., Any]] = []


def _jitable(fn: _F) -> _F:
    """Mark a helper for ``register_jitable`` (done when the numba kernel is first built)."""
    _JITABLE.append(fn)
    return fn


def copy_bytes(out: Any, o: int, src: Any, s: int, n: int) -> None:
    """``out[o : o + n] = src[s : s + n]``, for byte buffers that do not overlap.

    Compiled, this is one ``memcpy`` (:func:`register_numba_helpers`): numba's own slice
    assignment copies element by element, about three times slower on 1 KiB records.
    """
    out[o : o + n] = src[s : s + n]


@_jitable
def read_varint(data: Any, pos: int, end: int, max_bytes: int) -> tuple[int, int, int]:
    """Zig-zag varint (``max_bytes`` 5) or varlong (10) at ``pos``, not reading past ``end``.

    Returns ``(value, new position, status)``.
    """
    u = 0
    shift = 0
    i = pos
    last = pos + max_bytes - 1
    while True:
        if i >= end:
            return 0, i, E_VARINT_TRUNCATED
        b = data[i] & 0xFF  # numba: widen uint8 to int64 (a bare uint8 shifts as uint64)
        if i == last:
            if b & 0x80:
                return 0, i, E_VARINT_TOO_LONG
            if max_bytes == 5:
                if b > 0x0F:
                    return 0, i, E_VARINT_OVERFLOW
                u |= b << 28
                return (u >> 1) ^ -(u & 1), i + 1, OK
            if b > 0x01:
                return 0, i, E_VARINT_OVERFLOW
            # Bit 63 of the zig-zag value: kept out of `u` so nothing overflows int64.
            return ((u >> 1) | (b << 62)) ^ -(u & 1), i + 1, OK
        u |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return (u >> 1) ^ -(u & 1), i, OK
        shift += 7


@_jitable
def utf8_valid(data: Any, start: int, end: int) -> bool:
    """Well-formed UTF-8 as Python's strict decoder defines it (Unicode table 3-7):
    no overlong forms, no surrogates, nothing above U+10FFFF."""
    i = start
    while i < end:
        c = data[i] & 0xFF
        if c < 0x80:
            i += 1
            continue
        lo = 0x80
        hi = 0xBF
        if c < 0xC2:
            return False
        elif c < 0xE0:
            need = 1
        elif c < 0xF0:
            need = 2
            if c == 0xE0:
                lo = 0xA0
            elif c == 0xED:
                hi = 0x9F
        elif c < 0xF5:
            need = 3
            if c == 0xF0:
                lo = 0x90
            elif c == 0xF4:
                hi = 0x8F
        else:
            return False
        if i + need >= end:
            return False
        d = data[i + 1] & 0xFF
        if d < lo or d > hi:
            return False
        for k in range(2, need + 1):
            d = data[i + k] & 0xFF
            if d < 0x80 or d > 0xBF:
                return False
        i += need + 1
    return True


@_jitable
def fail(err: Any, status: int, field: int, batch: int, pos: int, a: int, b: int) -> int:
    err[0] = status
    err[1] = field
    err[2] = batch
    err[3] = pos
    err[4] = a
    err[5] = b
    return status


def walk_records(data: Any, sections: Any, out64: Any, out32: Any, err: Any) -> int:
    """Walk and validate every record of every section; fill the outputs; return a status.

    ``sections`` rows: start, end, record count (one column per batch). Output rows (one
    column per record): ``out64`` timestamp delta, offset delta, key position, value position,
    headers position, record position (its length varint); ``out32`` key length, value length,
    headers count.
    """
    sec_start = sections[0]
    sec_end = sections[1]
    sec_count = sections[2]
    ts_delta = out64[OUT_TS_DELTA]
    off_delta = out64[OUT_OFFSET_DELTA]
    key_pos = out64[OUT_KEY_POS]
    value_pos = out64[OUT_VALUE_POS]
    headers_pos = out64[OUT_HEADERS_POS]
    record_pos = out64[OUT_RECORD_POS]
    key_len = out32[OUT_KEY_LEN]
    value_len = out32[OUT_VALUE_LEN]
    headers_count = out32[OUT_HEADERS_COUNT]
    r = 0
    for b in range(len(sec_start)):
        pos = sec_start[b]
        end = sec_end[b]
        for _ in range(sec_count[b]):
            start = pos
            length, pos, st = read_varint(data, pos, end, 5)
            if st != OK:
                return fail(err, st, F_RECORD_LENGTH, b, start, 0, 0)
            if length < 0 or length > end - pos:
                return fail(err, E_RECORD_LENGTH, F_RECORD_LENGTH, b, start, length, end - pos)
            body = pos
            rec_end = pos + length
            # Attributes: unused and, as in Kafka, not checked.
            if pos >= rec_end:
                return fail(err, E_FIELD_MISSING, F_ATTRIBUTES, b, pos, 0, 0)
            pos += 1
            at = pos
            tsd, pos, st = read_varint(data, pos, rec_end, 10)
            if st != OK:
                return fail(err, st, F_TIMESTAMP_DELTA, b, at, 0, 0)
            at = pos
            od, pos, st = read_varint(data, pos, rec_end, 5)
            if st != OK:
                return fail(err, st, F_OFFSET_DELTA, b, at, 0, 0)

            at = pos
            kl, pos, st = read_varint(data, pos, rec_end, 5)
            if st != OK:
                return fail(err, st, F_KEY_LENGTH, b, at, 0, 0)
            if kl < -1:
                return fail(err, E_BAD_LENGTH, F_KEY_LENGTH, b, at, kl, 0)
            kp = pos
            if kl > 0:
                if kl > rec_end - pos:
                    return fail(err, E_PAST_END, F_KEY, b, pos, kl, rec_end - pos)
                pos += kl

            at = pos
            vl, pos, st = read_varint(data, pos, rec_end, 5)
            if st != OK:
                return fail(err, st, F_VALUE_LENGTH, b, at, 0, 0)
            if vl < -1:
                return fail(err, E_BAD_LENGTH, F_VALUE_LENGTH, b, at, vl, 0)
            vp = pos
            if vl > 0:
                if vl > rec_end - pos:
                    return fail(err, E_PAST_END, F_VALUE, b, pos, vl, rec_end - pos)
                pos += vl

            at = pos
            hc, pos, st = read_varint(data, pos, rec_end, 5)
            if st != OK:
                return fail(err, st, F_HEADERS_COUNT, b, at, 0, 0)
            if hc < 0:
                return fail(err, E_BAD_LENGTH, F_HEADERS_COUNT, b, at, hc, 0)
            hp = pos
            # Each header takes at least 2 bytes, so a huge count fails on the bytes quickly.
            for _h in range(hc):
                at = pos
                hkl, pos, st = read_varint(data, pos, rec_end, 5)
                if st != OK:
                    return fail(err, st, F_HEADER_KEY_LENGTH, b, at, 0, 0)
                if hkl < 0:
                    return fail(err, E_BAD_LENGTH, F_HEADER_KEY_LENGTH, b, at, hkl, 0)
                if hkl > rec_end - pos:
                    return fail(err, E_PAST_END, F_HEADER_KEY, b, pos, hkl, rec_end - pos)
                if not utf8_valid(data, pos, pos + hkl):
                    return fail(err, E_HEADER_KEY_UTF8, F_HEADER_KEY, b, pos, hkl, 0)
                pos += hkl
                at = pos
                hvl, pos, st = read_varint(data, pos, rec_end, 5)
                if st != OK:
                    return fail(err, st, F_HEADER_VALUE_LENGTH, b, at, 0, 0)
                if hvl < -1:
                    return fail(err, E_BAD_LENGTH, F_HEADER_VALUE_LENGTH, b, at, hvl, 0)
                if hvl > 0:
                    if hvl > rec_end - pos:
                        return fail(err, E_PAST_END, F_HEADER_VALUE, b, pos, hvl, rec_end - pos)
                    pos += hvl

            if pos != rec_end:
                return fail(err, E_SIZE_MISMATCH, F_RECORD_LENGTH, b, start, length, pos - body)
            ts_delta[r] = tsd
            off_delta[r] = od
            key_pos[r] = kp
            key_len[r] = kl
            value_pos[r] = vp
            value_len[r] = vl
            headers_pos[r] = hp
            headers_count[r] = hc
            record_pos[r] = start
            r += 1
        if pos != end:
            return fail(err, E_LEFTOVER, F_RECORD_LENGTH, b, pos, end - pos, 0)
    return OK


# --- batch headers ---------------------------------------------------------------------------

# Columns of the header table: the 13 fields of a v2 batch header in file order, then the
# batch's position in the buffer.
HEADER_COLUMNS = 14
H_BASE_OFFSET = 0
H_BATCH_LENGTH = 1
H_ATTRIBUTES = 5
H_LAST_OFFSET_DELTA = 6
H_BASE_TIMESTAMP = 7
H_MAX_TIMESTAMP = 8
H_PRODUCER_ID = 9
H_RECORDS_COUNT = 12
H_POSITION = 13
# (offset in the header, bytes, signed) of each field.
_HEADER_LAYOUT = (
    (0, 8, True),
    (8, 4, True),
    (12, 4, True),
    (16, 1, True),
    (17, 4, False),
    (21, 2, True),
    (23, 4, True),
    (27, 8, True),
    (35, 8, True),
    (43, 8, True),
    (51, 2, True),
    (53, 4, True),
    (57, 4, True),
)
_BATCH_OVERHEAD = 61  # the header; the smallest batch
_LOG_OVERHEAD = 12  # baseOffset + batchLength
_MIN_BATCH_LENGTH = _BATCH_OVERHEAD - _LOG_OVERHEAD
_MIN_RECORD_SIZE = 7
_CODEC_MASK = 0x07


@_jitable
def read_be(data: Any, pos: int, size: int, signed: bool) -> int:
    """A big-endian integer of ``size`` bytes (1-8) at ``pos``."""
    top = data[pos] & 0xFF
    if signed and top >= 0x80:
        top -= 0x100
    value: int = top
    for q in range(1, size):
        value = value * 256 + (data[pos + q] & 0xFF)
    return value


def scan_batches(data: Any, total: int, table: Any, fill: bool) -> int:
    """Frame the whole batches of ``data[:total]``; with ``fill``, write one row of
    ``table`` per batch (:data:`HEADER_COLUMNS`). Returns the number of batches, or -1 when
    anything does not frame cleanly: a short header, a magic other than 2, batchLength below
    the minimum, a negative recordsCount or lastOffsetDelta, a batch longer than the bytes
    left, or an uncompressed batch claiming more records than its bytes can hold. The caller
    then walks the buffer in Python, which names the problem.
    """
    pos = 0
    n = 0
    while pos < total:
        if total - pos < _BATCH_OVERHEAD or (data[pos + 16] & 0xFF) != 2:
            return -1
        size = read_be(data, pos + 8, 4, True) + _LOG_OVERHEAD
        count = read_be(data, pos + 57, 4, True)
        if (
            size < _MIN_BATCH_LENGTH + _LOG_OVERHEAD
            or count < 0
            or read_be(data, pos + 23, 4, True) < 0
            or size > total - pos
        ):
            return -1
        if (data[pos + 22] & _CODEC_MASK) == 0 and count > (
            size - _BATCH_OVERHEAD
        ) // _MIN_RECORD_SIZE:
            return -1
        if fill:
            for f in range(HEADER_COLUMNS - 1):
                at, width, signed = _HEADER_LAYOUT[f]
                table[n, f] = read_be(data, pos + at, width, signed)
            table[n, H_POSITION] = pos
        n += 1
        pos += size
    return n


@functools.cache
def numba_available() -> bool:
    return importlib.util.find_spec("numba") is not None


@functools.cache
def register_numba_helpers() -> None:
    """Make the helpers callable from compiled kernels: the ``_jitable`` ones as they are,
    :func:`copy_bytes` as a ``memcpy`` of two contiguous uint8 arrays.

    numba is imported here rather than at module level: importing it costs about half a second,
    which every CLI command would otherwise pay.
    """
    from numba.core import cgutils, types  # noqa: PLC0415
    from numba.extending import intrinsic, overload, register_jitable  # noqa: PLC0415

    for helper in _JITABLE:
        register_jitable(helper)

    raw_memcpy: Any = cgutils.raw_memcpy

    def memcpy_typing(typingctx: Any, out: Any, o: Any, src: Any, s: Any, n: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> None:
            out_arr = context.make_array(signature.args[0])(context, builder, args[0])
            src_arr = context.make_array(signature.args[2])(context, builder, args[2])
            to = builder.gep(out_arr.data, [args[1]])
            start = builder.gep(src_arr.data, [args[3]])
            raw_memcpy(builder, to, start, args[4], 1)

        return types.void(out, types.intp, src, types.intp, types.intp), codegen

    memcpy: Any = intrinsic(memcpy_typing)

    def copy_bytes_typing(out: Any, o: Any, src: Any, s: Any, n: Any) -> Any:
        def impl(out: Any, o: Any, src: Any, s: Any, n: Any) -> Any:
            memcpy(out, o, src, s, n)

        return impl

    overload(copy_bytes)(copy_bytes_typing)


@functools.cache
def numba_walk_records() -> Callable[..., int]:
    """The numba-compiled :func:`walk_records` (compiled, or loaded from cache, on first use)."""
    from numba import njit  # noqa: PLC0415

    register_numba_helpers()
    compiled: Callable[..., int] = njit(cache=True, nogil=True)(walk_records)
    return compiled


@functools.cache
def numba_scan_batches() -> Callable[..., int]:
    """The numba-compiled :func:`scan_batches` (see :func:`numba_walk_records`)."""
    register_numba_helpers()
    from numba import njit  # noqa: PLC0415

    compiled: Callable[..., int] = njit(cache=True, nogil=True)(scan_batches)
    return compiled
