"""Rebuilding an uncompressed batch with fewer records, without a Python object per record.

When the cleaner keeps some records of an uncompressed v2 batch, the new records section is the
kept records' bytes with two fields re-encoded: each record's ``timestampDelta`` (relative to the
new base timestamp: the delete horizon when one is set, else the first kept record's timestamp)
and the record length in front of it. ``offsetDelta``, key, value and headers stay byte for byte
(the base offset does not change). :func:`rebuild_section` does that walk; as with the other
kernels, the same source runs as the reference implementation and, compiled by numba, as the
fast one. Compressed batches are rebuilt record by record in ``cleaner.py``.
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
    """Write the kept records of ``src[start:end]`` into ``out``; returns the bytes written.

    A record's timestamp is ``old_base_ts + delta``, or ``fixed_ts`` for LogAppendTime batches
    (``use_fixed_ts``); its new delta is that minus ``new_base_ts``.
    """
    pos = start
    o = 0
    i = 0
    while pos < end:
        length_z, body = _read_uvarint(src, pos)
        record_end = body + _unzigzag(length_z)
        if keep[i]:
            delta_z, rest = _read_uvarint(src, body + 1)
            ts = fixed_ts if use_fixed_ts else old_base_ts + _unzigzag(delta_z)
            new_delta_z = _zigzag64(ts - new_base_ts)
            rest_len = record_end - rest
            new_length = 1 + _uvarint_size(new_delta_z) + rest_len
            o = _put_uvarint(out, o, 2 * new_length)
            out[o] = src[body]  # the record attributes byte
            o = _put_uvarint(out, o + 1, new_delta_z)
            out[o : o + rest_len] = src[rest:record_end]
            o += rest_len
        pos = record_end
        i += 1
    return o


@functools.cache
def _compiled() -> Callable[..., int]:
    """numba's compilation of :func:`rebuild_section` (compiled, or loaded from cache, once)."""
    from numba import njit  # noqa: PLC0415  (numba costs half a second to import)
    from numba.extending import register_jitable  # noqa: PLC0415

    for helper in (_read_uvarint, _unzigzag, _zigzag64, _uvarint_size, _put_uvarint):
        register_jitable(helper)
    compiled: Callable[..., int] = njit(cache=True, nogil=True)(rebuild_section)
    return compiled


def rebuild(
    data: bytes,
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
    use_python = kernel == "python" or (kernel == "auto" and not _kernels.numba_available())
    run = rebuild_section if use_python else _compiled()
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
