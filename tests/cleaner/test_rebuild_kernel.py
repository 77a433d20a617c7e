"""The fast rebuild of uncompressed batches gives the same bytes as the record-by-record one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.cleaner._rebuild_kernel import rebuild
from compactlog.cleaner.rebuild import rebuild_batch, rebuild_uncompressed
from compactlog.records import TimestampType, build_batch, decode_columns, read_header

blob = st.one_of(st.none(), st.binary(max_size=300))
record = st.tuples(
    blob, blob, st.lists(st.tuples(st.text(max_size=5), blob), max_size=2).map(tuple)
)


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(record, min_size=1, max_size=40),
    timestamps=st.lists(st.integers(-1, 2**45), min_size=40, max_size=40),
    keep_bits=st.lists(st.booleans(), min_size=40, max_size=40),
    horizon=st.one_of(st.none(), st.integers(0, 2**45)),
    log_append=st.booleans(),
    kernel=st.sampled_from(["python", "numba"]),
)
def test_fast_rebuild_equals_the_record_by_record_rebuild(
    records: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]],
    timestamps: list[int],
    keep_bits: list[bool],
    horizon: int | None,
    log_append: bool,
    kernel: str,
) -> None:
    n = len(records)
    keep = np.array(keep_bits[:n], dtype=bool)
    if not keep.any():
        keep[n // 2] = True
    ts_type = TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME
    raw = build_batch(
        records,
        base_offset=1000,
        timestamps=timestamps[:n],
        timestamp_type=ts_type,
        max_timestamp=2**44 if log_append else None,
        producer_id=7,
        producer_epoch=1,
        base_sequence=3,
        offset_deltas=[2 * i for i in range(n)],
        last_offset_delta=2 * n + 5,
    )
    header = read_header(raw)
    columns = decode_columns(raw)
    indices = np.flatnonzero(keep).tolist()
    slow = rebuild_batch(columns, indices, header, horizon)
    fast = rebuild_uncompressed(raw, 0, header, keep, columns.timestamps, horizon)
    assert fast == slow
    section = rebuild(
        raw,
        61,
        len(raw),
        keep,
        old_base_ts=header.base_timestamp,
        fixed_ts=header.max_timestamp if log_append else None,
        new_base_ts=read_header(slow).base_timestamp,
        kernel=kernel,
    )
    assert section == slow[61:]


@pytest.mark.parametrize("kernel", ["python", "numba"])
def test_timestamps_near_the_64_bit_edge_take_the_slow_path(kernel: str) -> None:
    raw = build_batch([(b"k", b"v"), (b"k2", b"v")], timestamps=[2**62, 2**62 + 5])
    header = read_header(raw)
    columns = decode_columns(raw)
    keep = np.array([False, True])
    assert rebuild_uncompressed(raw, 0, header, keep, columns.timestamps, None) is None
