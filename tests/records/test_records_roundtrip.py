"""Property tests: build_batch -> RecordBatch.records() and decode_columns().to_records() give
back exactly what went in, for every codec and both kernels; null and empty stay distinct."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.records import (
    Compression,
    Header,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    decode_columns,
    is_crc_valid,
)

INT64_MAX = 2**63 - 1


def _big_bytes(size_and_seed: tuple[int, int]) -> bytes:
    size, seed = size_and_seed
    rng = random.Random(seed)
    if seed % 2:  # compressible
        return (rng.randbytes(16) * (size // 16 + 1))[:size]
    return rng.randbytes(size)


# None, empty, small binary, or large (10-100 KiB) bytes.
field = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(min_size=1, max_size=64),
    st.tuples(st.integers(10_000, 100_000), st.integers(0, 2**32)).map(_big_bytes),
)
small_field = st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=64))
# Header keys: any unicode text (Hypothesis leaves out lone surrogates, which UTF-8 cannot hold).
header = st.tuples(st.text(max_size=12), field)
light_header = st.tuples(st.text(max_size=12), small_field)
record = st.tuples(field, field, st.lists(header, max_size=3))
light_record = st.tuples(small_field, small_field, st.lists(light_header, max_size=3))
timestamp = st.one_of(st.just(-1), st.integers(0, 2**41), st.integers(-(2**40), 2**62))

SETTINGS = settings(
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    want: list[Record],
    raw: bytes,
) -> None:
    assert is_crc_valid(raw)
    batch = RecordBatch(raw)
    assert batch.records() == want
    for kernel in ("python", "numba"):
        assert decode_columns(raw, kernel=kernel).to_records() == want
    # null and empty are different things
    for (key, value, _), got in zip(records, batch.records(), strict=True):
        assert (got.key is None) == (key is None)
        assert (got.value is None) == (value is None)


@pytest.mark.slow
@SETTINGS
@given(
    st.lists(record, max_size=6),
    st.sampled_from(list(Compression)),
    st.data(),
)
def test_round_trip(
    records: list[tuple[bytes | None, bytes | None, list[Header]]],
    codec: Compression,
    data: st.DataObject,
) -> None:
    timestamps = data.draw(st.lists(timestamp, min_size=len(records), max_size=len(records)))
    base_offset = data.draw(st.integers(0, 2**62))
    raw = build_batch(records, base_offset=base_offset, timestamps=timestamps, compression=codec)
    want = [
        Record(base_offset + i, ts, k, v, tuple(h))
        for i, ((k, v, h), ts) in enumerate(zip(records, timestamps, strict=True))
    ]
    check(records, want, raw)


@SETTINGS
@given(
    st.lists(light_record, min_size=1, max_size=8),
    st.sampled_from(list(Compression)),
    st.sampled_from(list(TimestampType)),
    st.booleans(),
    st.data(),
)
def test_round_trip_with_options(
    records: list[tuple[bytes | None, bytes | None, list[Header]]],
    codec: Compression,
    timestamp_type: TimestampType,
    with_horizon: bool,
    data: st.DataObject,
) -> None:
    n = len(records)
    timestamps = data.draw(st.lists(st.integers(0, 2**41), min_size=n, max_size=n))
    deltas = sorted(data.draw(st.sets(st.integers(0, 2**31 - 1), min_size=n, max_size=n)))
    horizon = data.draw(st.integers(0, 2**41)) if with_horizon else None
    append_time = data.draw(st.integers(0, 2**41))
    raw = build_batch(
        records,
        base_offset=10,
        timestamps=timestamps,
        compression=codec,
        timestamp_type=timestamp_type,
        delete_horizon_ms=horizon,
        offset_deltas=deltas,
        max_timestamp=append_time if timestamp_type is TimestampType.LOG_APPEND_TIME else None,
    )
    batch = RecordBatch(raw)
    assert batch.delete_horizon_ms == horizon
    assert batch.last_offset == 10 + deltas[-1]
    if timestamp_type is TimestampType.CREATE_TIME:
        assert batch.max_timestamp == max(timestamps)
        read_ts = timestamps
    else:
        read_ts = [append_time] * n
    want = [
        Record(10 + d, ts, k, v, tuple(h))
        for (k, v, h), d, ts in zip(records, deltas, read_ts, strict=True)
    ]
    check(records, want, raw)


@SETTINGS
@given(
    st.lists(
        st.tuples(st.lists(light_record, max_size=5), st.sampled_from(list(Compression))),
        max_size=6,
    )
)
def test_many_batches_in_one_buffer(
    batches: list[tuple[list[tuple[bytes | None, bytes | None, list[Header]]], Compression]],
) -> None:
    raws = []
    want: list[Record] = []
    offset = 0
    for records, codec in batches:
        raws.append(build_batch(records, base_offset=offset, timestamps=offset, compression=codec))
        want += [Record(offset + i, offset, k, v, tuple(h)) for i, (k, v, h) in enumerate(records)]
        offset += max(len(records), 1)
    buf = b"".join(raws)
    for kernel in ("python", "numba"):
        cols = decode_columns(buf, kernel=kernel)
        assert cols.to_records() == want
        assert [cols.key(i) for i in range(len(cols))] == [r.key for r in want]
        assert [cols.value(i) for i in range(len(cols))] == [r.value for r in want]
        assert [cols.headers(i) for i in range(len(cols))] == [r.headers for r in want]
        assert cols.has_null_key() == any(r.key is None for r in want)


@pytest.mark.parametrize("codec", list(Compression))
def test_large_fields_every_codec(codec: Compression) -> None:
    big = _big_bytes((100 * 1024, 7))
    incompressible = _big_bytes((99 * 1024, 8))
    records: list[tuple[bytes | None, bytes | None, list[Header]]] = [
        (big, incompressible, [("ключ", big), ("", None)]),
        (None, big, []),
        (b"", None, [("h", b"")]),
    ]
    raw = build_batch(records, base_offset=3, timestamps=[1, 2, 3], compression=codec)
    want = [Record(3 + i, 1 + i, k, v, tuple(h)) for i, (k, v, h) in enumerate(records)]
    check(records, want, raw)
