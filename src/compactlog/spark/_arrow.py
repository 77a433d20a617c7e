"""Decoded record columns to Arrow arrays, without a Python object per record.

Keys and values lie scattered through a segment's bytes (key, value and headers of one record
are interleaved); Arrow's ``binary`` type wants them back to back behind an int32 offsets
buffer. :func:`gather` copies them into place in one compiled pass. Constant columns (topic,
partition) are built from repeated bytes, timestamps by arithmetic on the int64 column.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from compactlog.records import _kernels as _rk

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
#: Arrow ``binary`` addresses its values with int32 offsets: at most 2 GiB per array.
MAX_BINARY_BYTES = (1 << 31) - 1


def _gather(data: Any, pos: Any, length: Any, offsets: Any, out: Any) -> None:
    """``out[offsets[i]:offsets[i + 1]] = data[pos[i]:pos[i] + length[i]]`` (null: empty)."""
    for i in range(len(pos)):
        n = length[i]
        if n > 0:
            _rk.copy_bytes(out, offsets[i], data, pos[i], n)


@functools.cache
def compiled(kernel: Callable[..., None]) -> Callable[..., None]:
    """``kernel`` compiled by numba (no GIL, cached on disk), or as it is without numba."""
    try:
        from numba import njit  # noqa: PLC0415
    except ImportError:  # pragma: no cover - numba is a core dependency
        return kernel
    _rk.register_numba_helpers()
    jitted: Callable[..., None] = njit(cache=True, nogil=True)(kernel)
    return jitted


def binary_array(data: Any, pos: Int64Array, length: Int32Array) -> Any:
    """An Arrow ``binary`` array of ``data[pos[i]:pos[i] + length[i]]``, null where
    ``length[i] < 0``."""
    import pyarrow as pa  # noqa: PLC0415

    n = len(pos)
    valid = length >= 0
    sizes = np.where(valid, length, 0).astype(np.int64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    if total > MAX_BINARY_BYTES:
        raise ValueError(f"{total} bytes do not fit one Arrow binary array (at most 2 GiB)")
    out = np.empty(total, np.uint8)
    source = np.frombuffer(data, np.uint8)
    compiled(_gather)(source, pos.astype(np.int64, copy=False), sizes, offsets, out)
    nulls = n - int(valid.sum())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(out)],
        null_count=nulls,
    )


def constant_string_array(text: str, n: int) -> Any:
    """An Arrow ``string`` array of ``n`` times ``text``."""
    import pyarrow as pa  # noqa: PLC0415

    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)], null_count=0
    )
