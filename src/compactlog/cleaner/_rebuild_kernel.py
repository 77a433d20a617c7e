"""Rebuilding an uncompressed batch with fewer records, without a Python object per record.

When the cleaner keeps some records of an uncompressed v2 batch, the new records section is the
kept records' bytes with two fields re-encoded: each record's ``timestampDelta`` (relative to the
new base timestamp: the delete horizon when one is set, else the first kept record's timestamp)
and the record length in front of it. ``offsetDelta``, key, value and headers stay byte for byte
(the base offset does not change). :func:`rebuild_section` does that walk.

:func:`filter_region` is the cleaner's copy phase for a whole region of plain (uncompressed,
non-transactional) data batches: the per-record rule, then a verbatim copy, a rebuild with the
delete horizon stamped, or nothing, into one output buffer. As with the other kernels, the same
source runs as the reference implementation and, compiled by numba, as the fast one.
Compressed and transactional batches are filtered record by record in ``cleaner.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from compactlog.records import _kernels


def _read_uvarint(src: Any, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        b = int(src[pos])
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _unzigzag(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def _zigzag64(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _uvarint_size(u: int) -> int:
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def _put_uvarint(out: Any, pos: int, u: int) -> int:
    while u >= 0x80:
        out[pos] = (u & 0x7F) | 0x80
        u >>= 7
        pos += 1
    out[pos] = u
    return pos + 1


def _rewrite_record(
    src: Any,
    start: int,
    old_base_ts: int,
    fixed_ts: int,
    use_fixed_ts: bool,
    new_base_ts: int,
    out: Any,
    o: int,
) -> tuple[int, int]:
    """Write the record at ``src[start:]`` into ``out`` from ``o`` with its timestamp delta
    taken from ``new_base_ts``; returns the end in ``out`` and the record's end in ``src``.

    The record's timestamp is ``old_base_ts + delta``, or ``fixed_ts`` for LogAppendTime
    batches (``use_fixed_ts``).
    """
    length_z, body = _read_uvarint(src, start)
    record_end = body + _unzigzag(length_z)
    delta_z, rest = _read_uvarint(src, body + 1)
    ts = fixed_ts if use_fixed_ts else old_base_ts + _unzigzag(delta_z)
    new_delta_z = _zigzag64(ts - new_base_ts)
    rest_len = record_end - rest
    new_length = 1 + _uvarint_size(new_delta_z) + rest_len
    o = _put_uvarint(out, o, 2 * new_length)
    out[o] = src[body]  # the record attributes byte
    o = _put_uvarint(out, o + 1, new_delta_z)
    _kernels.copy_bytes(out, o, src, rest, rest_len)
    return o + rest_len, record_end


def _rebuild_into(
    src: Any,
    start: int,
    end: int,
    keep: Any,
    first: int,
    old_base_ts: int,
    fixed_ts: int,
    use_fixed_ts: bool,
    new_base_ts: int,
    out: Any,
    o: int,
) -> int:
    """Write the kept records of ``src[start:end]`` into ``out`` from ``o``; returns the end.

    Record ``i`` of the section is kept when ``keep[first + i]``; each is rewritten by
    :func:`_rewrite_record`.
    """
    pos = start
    i = first
    while pos < end:
        if keep[i]:
            o, pos = _rewrite_record(
                src, pos, old_base_ts, fixed_ts, use_fixed_ts, new_base_ts, out, o
            )
        else:
            length_z, body = _read_uvarint(src, pos)
            pos = body + _unzigzag(length_z)
        i += 1
    return o


def rebuild_section(
    src: Any,
    start: int,
    end: int,
    keep: Any,
    old_base_ts: int,
    fixed_ts: int,
    use_fixed_ts: bool,
    new_base_ts: int,
    out: Any,
) -> int:
    """:func:`_rebuild_into` of one batch into a fresh ``out``; returns the bytes written."""
    return _rebuild_into(
        src, start, end, keep, 0, old_base_ts, fixed_ts, use_fixed_ts, new_base_ts, out, 0
    )


def _put_be(out: Any, pos: int, value: int, size: int) -> None:
    """``value`` as a big-endian two's-complement integer of ``size`` bytes."""
    for q in range(size):
        out[pos + q] = (value >> (8 * (size - 1 - q))) & 0xFF


# Batch attribute bits the region kernel needs (spec 1.2).
_CODEC_MASK = 0x07
_LOG_APPEND_TIME_FLAG = 0x08
_TRANSACTIONAL_FLAG = 0x10
_CONTROL_FLAG = 0x20
_DELETE_HORIZON_FLAG = 0x40
# Batches the region kernel leaves to the record-by-record path: compressed ones (recompressing
# needs the codecs) and those in transactions (markers and their bookkeeping).
SPECIAL_MASK = _CODEC_MASK | _TRANSACTIONAL_FLAG | _CONTROL_FLAG
# Timestamps this far from zero could overflow 64-bit zig-zag arithmetic; their batches take the
# record-by-record path.
SAFE_TIMESTAMP = 2**61
_HEADER = 61

# Columns of the per-batch result of :func:`filter_region`.
R_ACTION, R_OUT_START, R_OUT_END, R_KEPT, R_MAX_TS, R_INVALID = range(6)
RESULT_COLUMNS = 6
# Actions: dropped; copied verbatim; rebuilt with fewer records (its CRC is left to the caller);
# left to the caller (nothing written, nothing counted).
A_DROP, A_COPY, A_REBUILT, A_CALLER = range(4)


def filter_region(
    src: Any,
    b_pos: Any,
    b_size: Any,
    b_attr: Any,
    b_base_ts: Any,
    b_max_ts: Any,
    b_last_offset: Any,
    b_first: Any,
    offsets: Any,
    timestamps: Any,
    key_len: Any,
    value_len: Any,
    record_pos: Any,
    found: Any,
    keep: Any,
    latest_offset: int,
    now: int,
    delete_retention_ms: int,
    high_watermark: int,
    out: Any,
    res: Any,
) -> int:
    """The cleaner's batch and record rules (spec 5.4) for every plain data batch of a region.

    Batch ``b`` lies at ``src[b_pos[b] : b_pos[b] + b_size[b]]`` and holds records
    ``[b_first[b], b_first[b + 1])`` of the record columns; ``found`` is the offset map's entry
    for each record's key (-1 when absent or keyless). Kept batches are written to ``out`` back
    to back: copied verbatim, or rebuilt with the kept records and the delete horizon stamped
    when a kept tombstone needs one. A rebuild reads only the kept records, at ``record_pos``
    (walking every record's length instead would be a chain of dependent reads, one cache
    miss per record). Batches in ``SPECIAL_MASK``, empty batches that must stay
    (the one ending at ``high_watermark``) and batches with extreme timestamps are left to the
    caller (``A_CALLER``), which splices its own bytes in at ``res[b, R_OUT_START]``. Returns
    the bytes written. ``keep`` is scratch (one byte per record).
    """
    o = 0
    for b in range(len(b_pos)):
        res[b, R_OUT_START] = o
        res[b, R_OUT_END] = o
        res[b, R_KEPT] = 0
        res[b, R_MAX_TS] = -1
        res[b, R_INVALID] = 0
        res[b, R_ACTION] = A_CALLER
        attr = b_attr[b]
        if attr & SPECIAL_MASK:
            continue
        first = b_first[b]
        stop = b_first[b + 1]
        horizon_set = (attr & _DELETE_HORIZON_FLAG) != 0
        horizon = b_base_ts[b]
        retain_tombstones = (not horizon_set) or now < horizon
        kept = 0
        tombstones = 0
        invalid = 0
        first_kept = -1
        last_kept = -1
        ts_min = 0
        ts_max = 0
        for i in range(first, stop):
            offset = offsets[i]
            k = False
            if offset > latest_offset:
                k = True
            elif key_len[i] < 0:
                invalid += 1
            elif offset >= found[i] and (value_len[i] >= 0 or retain_tombstones):
                k = True
            if k:
                keep[i] = 1
                ts = timestamps[i]
                if kept == 0:
                    first_kept = i
                    ts_min = ts
                    ts_max = ts
                else:
                    ts_min = min(ts_min, ts)
                    ts_max = max(ts_max, ts)
                kept += 1
                if value_len[i] < 0:
                    tombstones += 1
                last_kept = i
            else:
                keep[i] = 0
        if kept == 0:
            if b_last_offset[b] + 1 != high_watermark:
                res[b, R_ACTION] = A_DROP
                res[b, R_INVALID] = invalid
            continue  # else: kept as an empty batch, by the caller
        need_horizon = tombstones > 0 and not horizon_set
        pos = b_pos[b]
        size = b_size[b]
        if kept == stop - first and not need_horizon:
            _kernels.copy_bytes(out, o, src, pos, size)
            o += size
            res[b, R_ACTION] = A_COPY
            res[b, R_MAX_TS] = b_max_ts[b]
        else:
            has_horizon = need_horizon or horizon_set
            new_horizon = now + delete_retention_ms if need_horizon else horizon
            new_base = new_horizon if has_horizon else timestamps[first_kept]
            if (
                max(abs(ts_min), abs(ts_max)) >= SAFE_TIMESTAMP
                or abs(new_base) >= SAFE_TIMESTAMP
                or abs(b_base_ts[b]) >= SAFE_TIMESTAMP
            ):
                continue  # the caller rebuilds it record by record
            log_append = (attr & _LOG_APPEND_TIME_FLAG) != 0
            _kernels.copy_bytes(out, o, src, pos, _HEADER)
            end = o + _HEADER
            for i in range(first_kept, last_kept + 1):
                if keep[i]:
                    end, _ = _rewrite_record(
                        src,
                        record_pos[i],
                        b_base_ts[b],
                        b_max_ts[b],
                        log_append,
                        new_base,
                        out,
                        end,
                    )
            max_ts = b_max_ts[b] if log_append else ts_max
            attributes = attr & ~_DELETE_HORIZON_FLAG
            if has_horizon:
                attributes |= _DELETE_HORIZON_FLAG
            _put_be(out, o + 8, end - o - 12, 4)  # batchLength
            _put_be(out, o + 17, 0, 4)  # the CRC, computed by the caller
            _put_be(out, o + 21, attributes, 2)
            _put_be(out, o + 27, new_base, 8)
            _put_be(out, o + 35, max_ts, 8)
            _put_be(out, o + 57, kept, 4)
            o = end
            res[b, R_ACTION] = A_REBUILT
            res[b, R_MAX_TS] = max_ts
        res[b, R_OUT_END] = o
        res[b, R_KEPT] = kept
        res[b, R_INVALID] = invalid
    return o


# A batch's length field (batchLength) sits 8 bytes in; it counts the bytes after the first 12.
_LOG_OVERHEAD = 12
# The smallest batchLength the cleaner's reads accept (Kafka's header minus the first 12 bytes
# would be 49; its read loop only refuses lengths below a legacy record's minimum, 14).
MIN_READ_LENGTH = 14


def batch_ends(data: Any, start: int, ends: Any) -> int:
    """The end position of each whole batch of ``data[start:]``, in ``ends``; returns how many.

    The walk stops at the first place a batch cannot be framed: fewer than 12 bytes left, a
    batchLength below :data:`MIN_READ_LENGTH`, or a batch longer than the bytes left; the
    caller finds it at the last end (or ``start``) and names the problem. ``ends`` needs room
    for ``(len(data) - start) // 26 + 1`` entries.
    """
    total = len(data)
    pos = start
    n = 0
    while total - pos >= _LOG_OVERHEAD:
        length = _kernels.read_be(data, pos + 8, 4, True)
        if length < MIN_READ_LENGTH or length + _LOG_OVERHEAD > total - pos:
            break
        pos += length + _LOG_OVERHEAD
        ends[n] = pos
        n += 1
    return n


@functools.cache
def _compiled() -> tuple[Callable[..., int], Callable[..., int], Callable[..., int]]:
    """numba's compilation of :func:`rebuild_section`, :func:`filter_region` and
    :func:`batch_ends` (compiled, or loaded from cache, once)."""
    from numba import njit  # noqa: PLC0415  (numba costs half a second to import)
    from numba.extending import register_jitable  # noqa: PLC0415

    _kernels.register_numba_helpers()

    for helper in (
        _read_uvarint,
        _unzigzag,
        _zigzag64,
        _uvarint_size,
        _put_uvarint,
        _rewrite_record,
        _rebuild_into,
        _put_be,
    ):
        register_jitable(helper)
    jit = njit(cache=True, nogil=True)
    return jit(rebuild_section), jit(filter_region), jit(batch_ends)


def use_python(kernel: str) -> bool:
    if kernel not in ("auto", "numba", "python"):
        raise ValueError(f"unknown kernel {kernel!r}; expected auto, numba or python")
    return kernel == "python" or (kernel == "auto" and not _kernels.numba_available())


def filter_region_kernel(kernel: str = "auto") -> Callable[..., int]:
    """:func:`filter_region`, compiled unless ``kernel`` is ``"python"`` (or numba is absent)."""
    return filter_region if use_python(kernel) else _compiled()[1]


def batch_ends_kernel(kernel: str = "auto") -> Callable[..., int]:
    """:func:`batch_ends`, compiled unless ``kernel`` is ``"python"`` (or numba is absent)."""
    return batch_ends if use_python(kernel) else _compiled()[2]


def rebuild(
    data: bytes | memoryview,
    start: int,
    end: int,
    keep: np.ndarray,
    *,
    old_base_ts: int,
    fixed_ts: int | None,
    new_base_ts: int,
    kernel: str = "auto",
) -> bytes:
    """The records section of the kept records (``keep``: one bool per record, in order)."""
    src = np.frombuffer(data, dtype=np.uint8)
    # Each kept record grows by at most 9 bytes (a longer timestamp delta and length).
    out = np.empty(end - start + 9 * int(keep.sum()) + 16, dtype=np.uint8)
    run = rebuild_section if use_python(kernel) else _compiled()[0]
    written = run(
        src,
        start,
        end,
        keep.astype(np.uint8),
        old_base_ts,
        0 if fixed_ts is None else fixed_ts,
        fixed_ts is not None,
        new_base_ts,
        out,
    )
    return out[:written].tobytes()
