"""Rebuilding a batch from its surviving records: same base and last offset, producer fields,
flags, leader epoch and codec, a new delete horizon when the rules stamp one. Uncompressed
data batches copy the kept records' bytes (:func:`._rebuild_kernel.rebuild`); the others are
encoded again from the decoded columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compactlog.cleaner._rebuild_kernel import rebuild
from compactlog.records import BatchHeader, RecordColumns, TimestampType, build_batch
from compactlog.records.batch import pack_batch
from compactlog.records.batch_header import DELETE_HORIZON_FLAG_MASK, RECORD_BATCH_OVERHEAD

# Timestamps this far from zero could overflow the compiled kernel's 64-bit zig-zag arithmetic;
# such batches (never seen in practice) take the record-by-record path.
_SAFE_TIMESTAMP = 2**61


def rebuild_uncompressed(
    data: bytes | memoryview,
    position: int,
    header: BatchHeader,
    keep: np.ndarray,
    timestamps: np.ndarray,
    horizon: int | None,
) -> bytes | None:
    """:func:`rebuild_batch` for an uncompressed data batch, by copying the kept records' bytes
    (only the timestamp delta and the length are re-encoded); identical output."""
    kept_ts = timestamps[keep]
    if (
        len(kept_ts) == 0
        or max(abs(int(kept_ts.min())), abs(int(kept_ts.max()))) >= _SAFE_TIMESTAMP
    ):
        return None
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    new_base = horizon if horizon is not None else int(kept_ts[0])
    if abs(new_base) >= _SAFE_TIMESTAMP or abs(header.base_timestamp) >= _SAFE_TIMESTAMP:
        return None
    section = rebuild(
        data,
        position + RECORD_BATCH_OVERHEAD,
        position + header.size_in_bytes,
        keep,
        old_base_ts=header.base_timestamp,
        fixed_ts=header.max_timestamp if log_append else None,
        new_base_ts=new_base,
    )
    attributes = header.attributes & ~DELETE_HORIZON_FLAG_MASK
    if horizon is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    return pack_batch(
        section,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=new_base,
        max_timestamp=header.max_timestamp if log_append else int(kept_ts.max()),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(kept_ts),
    )


def rebuild_batch(
    columns: RecordColumns, indices: list[int], header: BatchHeader, horizon: int | None
) -> bytes:
    """The batch with only the kept records: same base and last offset, producer fields,
    flags, leader epoch and codec (at its default level); timestamps and offsets preserved."""
    data = columns.data
    pick = np.asarray(indices, dtype=np.int64)
    key_pos, key_len = columns.key_pos[pick].tolist(), columns.key_len[pick].tolist()
    value_pos, value_len = columns.value_pos[pick].tolist(), columns.value_len[pick].tolist()
    with_headers = columns.headers_count[pick].tolist()
    records: list[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Any]] = []
    for j, i in enumerate(indices):
        kl, vl, kp, vp = key_len[j], value_len[j], key_pos[j], value_pos[j]
        key = bytes(data[kp : kp + kl]) if kl >= 0 else None
        value = bytes(data[vp : vp + vl]) if vl >= 0 else None
        if with_headers[j]:
            records.append((key, value, columns.headers(i)))
        else:
            records.append((key, value))
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    base = header.base_offset
    return build_batch(
        records,
        base_offset=base,
        timestamps=columns.timestamps[pick].tolist(),
        compression=header.compression,
        timestamp_type=TimestampType(header.timestamp_type),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        delete_horizon_ms=horizon,
        offset_deltas=(columns.offsets[pick] - base).tolist(),
        last_offset_delta=header.last_offset_delta,
        max_timestamp=header.max_timestamp if log_append else None,
    )
