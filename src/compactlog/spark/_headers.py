"""Record headers as an Arrow ``list<struct<key string, value binary>>`` column (null where a
record has none).

The decoder gives each record's first header position and header count (already validated:
lengths fit, keys are UTF-8). One compiled walk finds every header's key and value; the
strings and binaries are then gathered like keys and values (:mod:`._arrow`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compactlog.records import _kernels as _rk
from compactlog.records.columns import RecordColumns


def _locate(
    data: Any, pos: Any, count: Any, key_pos: Any, key_len: Any, val_pos: Any, val_len: Any
) -> None:
    """Positions and lengths of the headers of each record, one row per header in order."""
    h = 0
    end = len(data)
    for i in range(len(pos)):
        p = pos[i]
        for _ in range(count[i]):
            kl, p, _status = _rk.read_varint(data, p, end, 5)
            key_pos[h] = p
            key_len[h] = kl
            p += kl
            vl, p, _status = _rk.read_varint(data, p, end, 5)
            val_pos[h] = p
            val_len[h] = vl
            if vl > 0:
                p += vl
            h += 1


def headers_array(columns: RecordColumns, rows: Any) -> Any:
    """The headers of records ``rows`` of ``columns``: null for a record without headers, as
    Spark's own Kafka source gives it (``KafkaRecordToRowConverter``), so a query moves between
    ``format("kafka")`` and ``format("compactlog")`` unchanged."""
    import pyarrow as pa  # noqa: PLC0415

    from compactlog.spark._arrow import binary_array, compiled  # noqa: PLC0415

    counts = columns.headers_count[rows].astype(np.int64)
    total = int(counts.sum())
    key_pos = np.zeros(total, np.int64)
    key_len = np.zeros(total, np.int32)
    val_pos = np.zeros(total, np.int64)
    val_len = np.zeros(total, np.int32)
    data = np.frombuffer(columns.data, np.uint8)
    compiled(_locate)(
        data,
        columns.headers_pos[rows].astype(np.int64),
        counts,
        key_pos,
        key_len,
        val_pos,
        val_len,
    )
    keys = binary_array(columns.data, key_pos, key_len).cast(pa.string())
    values = binary_array(columns.data, val_pos, val_len)
    entries = pa.StructArray.from_arrays([keys, values], names=["key", "value"])
    offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), entries, mask=pa.array(counts == 0))
