"""decode_columns over many batches; every test runs with both kernels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from records_helpers import raw_batch, record_bytes

from compactlog.errors import CorruptRecordError
from compactlog.records import (
    Compression,
    Record,
    RecordBatch,
    RecordColumns,
    TimestampType,
    _kernels,
    build_batch,
    build_empty_batch,
    build_end_txn_marker_batch,
    decode_columns,
    decompress,
)


def test_empty_input(kernel: str) -> None:
    cols = decode_columns(b"", kernel=kernel)
    assert len(cols) == 0
    assert cols.to_records() == []
    assert not cols.has_null_key()
    assert cols.batch_base_offset.shape == (0,)


def test_uncompressed_positions_point_into_the_input(kernel: str) -> None:
    first = build_batch([(b"k1", b"v1"), (None, b"")], base_offset=10, timestamps=[5, 6])
    second = build_batch([(b"", None, [("h", b"x")])], base_offset=12, timestamps=[7])
    buf = first + second
    cols = decode_columns(buf, kernel=kernel)
    assert cols.data is buf
    assert len(cols) == 3
    assert cols.offsets.tolist() == [10, 11, 12]
    assert cols.timestamps.tolist() == [5, 6, 7]
    assert cols.key_len.tolist() == [2, -1, 0]
    assert cols.value_len.tolist() == [2, 0, -1]
    assert cols.headers_count.tolist() == [0, 0, 1]
    assert cols.batch_index.tolist() == [0, 0, 1]
    assert buf[cols.key_pos[0] : cols.key_pos[0] + 2] == b"k1"
    assert buf[cols.value_pos[0] : cols.value_pos[0] + 2] == b"v1"
    # Each record starts at its length varint (one byte here: zig-zag of the length).
    first_record_length = buf[61] >> 1
    assert cols.record_pos.tolist() == [61, 61 + 1 + first_record_length, len(first) + 61]
    assert [cols.key(i) for i in range(3)] == [b"k1", None, b""]
    assert [cols.value(i) for i in range(3)] == [b"v1", b"", None]
    assert cols.headers(2) == (("h", b"x"),)
    assert cols.headers(0) == ()
    assert cols.has_null_key()
    assert cols.batch_position.tolist() == [0, len(first)]
    assert cols.batch_size.tolist() == [len(first), len(second)]
    assert cols.batch_base_offset.tolist() == [10, 12]
    assert cols.batch_last_offset.tolist() == [11, 12]
    assert cols.batch_records_count.tolist() == [2, 1]
    assert cols.batch_attributes.tolist() == [0, 0]
    assert cols.batch_base_timestamp.tolist() == [5, 7]
    assert cols.batch_max_timestamp.tolist() == [6, 7]
    assert cols.offsets.dtype == np.int64 and cols.key_len.dtype == np.int32
    assert cols.batch_index.dtype == np.int32 and cols.headers_count.dtype == np.int32
    assert cols.to_records() == [
        Record(10, 5, b"k1", b"v1", ()),
        Record(11, 6, None, b"", ()),
        Record(12, 7, b"", None, (("h", b"x"),)),
    ]


def test_memoryview_and_bytearray_input(kernel: str) -> None:
    buf = build_batch([(b"a", b"b")])
    for wrapped in (bytearray(buf), memoryview(buf)):
        assert decode_columns(wrapped, kernel=kernel).to_records() == [Record(0, -1, b"a", b"b")]


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_mixed_codecs(codec: Compression, kernel: str) -> None:
    plain = build_batch([(b"p", b"plain")], base_offset=0, timestamps=1)
    packed = build_batch(
        [(b"c%d" % i, b"compressed" * 20) for i in range(50)],
        base_offset=1,
        timestamps=2,
        compression=codec,
    )
    cols = decode_columns(plain + packed + plain, kernel=kernel)
    assert len(cols) == 52
    # Compressed records live in decompressed buffers appended after the input.
    assert cols.data[: len(plain + packed + plain)] == plain + packed + plain
    assert cols.key_pos[1] >= len(plain + packed + plain)
    assert cols.key(1) == b"c0"
    records = cols.to_records()
    assert records[0] == records[-1] == Record(0, 1, b"p", b"plain")
    assert records[1:-1] == RecordBatch(packed).records()
    assert cols.batch_attributes.tolist() == [0, int(codec), 0]

    only = decode_columns(packed + packed, kernel=kernel)
    section = decompress(codec, packed[61:])
    assert only.data == section + section  # every batch compressed: no copy of the input
    assert only.to_records() == records[1:-1] * 2


def test_log_append_time_per_batch(kernel: str) -> None:
    create = build_batch([(b"a", b"1")] * 2, timestamps=[1, 2])
    append = build_batch(
        [(b"b", b"2")] * 2,
        base_offset=2,
        timestamps=[3, 4],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        max_timestamp=1000,
    )
    cols = decode_columns(create + append + create, kernel=kernel)
    assert cols.timestamps.tolist() == [1, 2, 1000, 1000, 1, 2]


def test_empty_and_control_batches(kernel: str) -> None:
    empty = build_empty_batch(base_offset=3, last_offset_delta=4, max_timestamp=0)
    marker = build_end_txn_marker_batch(
        commit=True,
        producer_id=1,
        producer_epoch=0,
        coordinator_epoch=0,
        base_offset=8,
        timestamp=1,
    )
    data = build_batch([(b"k", b"v")], base_offset=9)
    cols = decode_columns(empty + marker + data, kernel=kernel)
    assert cols.offsets.tolist() == [8, 9]
    assert cols.batch_index.tolist() == [1, 2]
    assert cols.batch_records_count.tolist() == [0, 1, 1]
    assert [h.is_control for h in cols.batch_headers] == [False, True, False]


def test_wrapping_arithmetic_matches_java(kernel: str) -> None:
    # baseOffset + delta and baseTimestamp + delta wrap like Java longs.
    section = record_bytes(b"k", b"v", ts_delta=10, offset_delta=5)
    buf = raw_batch(
        section, count=1, base_offset=2**63 - 2, base_timestamp=2**63 - 1, last_offset_delta=5
    )
    cols = decode_columns(buf, kernel=kernel)
    assert cols.offsets.tolist() == [-(2**63) + 3]
    assert cols.timestamps.tolist() == [-(2**63) + 9]


def test_crc_is_checked_unless_disabled(kernel: str) -> None:
    buf = bytearray(build_batch([(b"k", b"v")]))
    buf[-4] ^= 0x01  # the key byte: the structure stays intact
    with pytest.raises(CorruptRecordError, match="CRC mismatch at offset 0"):
        decode_columns(bytes(buf), kernel=kernel)
    assert len(decode_columns(bytes(buf), kernel=kernel, verify_crc=False)) == 1


def test_unknown_kernel() -> None:
    with pytest.raises(ValueError, match="unknown kernel"):
        decode_columns(b"", kernel="cython")


def test_large_segment(kernel: str) -> None:
    batches = [
        build_batch(
            [(b"key-%d" % (i * 10 + j), b"v" * (j * 13)) for j in range(10)],
            base_offset=i * 10,
            timestamps=[i * 10 + j for j in range(10)],
        )
        for i in range(300)
    ]
    cols = decode_columns(b"".join(batches), kernel=kernel)
    assert cols.offsets.tolist() == list(range(3000))
    assert cols.timestamps.tolist() == list(range(3000))
    assert cols.to_records() == [r for b in batches for r in RecordBatch(b).records()]


def _arrays(cols: RecordColumns) -> dict[str, list[int]]:
    names = [
        "offsets",
        "timestamps",
        "key_pos",
        "key_len",
        "value_pos",
        "value_len",
        "headers_pos",
        "headers_count",
        "record_pos",
        "batch_index",
        "batch_base_offset",
        "batch_last_offset",
        "batch_position",
        "batch_size",
        "batch_attributes",
        "batch_records_count",
    ]
    return {name: getattr(cols, name).tolist() for name in names}


def decode_both(buf: bytes, **kwargs: object) -> RecordColumns | str:
    """Decode with both kernels; they must agree on the arrays or on the error message."""
    results: list[RecordColumns | str] = []
    for k in ("python", "numba"):
        try:
            results.append(decode_columns(buf, kernel=k, **kwargs))  # type: ignore[arg-type]
        except CorruptRecordError as exc:
            results.append(f"{type(exc).__name__}: {exc}")
    py, nb = results
    if isinstance(py, str) or isinstance(nb, str):
        assert py == nb
    else:
        assert _arrays(py) == _arrays(nb)
        assert py.batch_headers == nb.batch_headers
        assert py.data == nb.data
    return py


record_st = st.tuples(
    st.none() | st.binary(max_size=20),
    st.none() | st.binary(max_size=200),
    st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3),
)


@settings(deadline=None, max_examples=100)
@given(
    st.lists(
        st.tuples(
            st.lists(record_st, max_size=8),
            st.sampled_from(list(Compression)),
            st.sampled_from(list(TimestampType)),
        ),
        max_size=5,
    )
)
def test_kernels_agree_on_valid_input(
    batches: list[
        tuple[
            list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
            Compression,
            TimestampType,
        ]
    ],
) -> None:
    buf = b"".join(
        build_batch(records, compression=codec, timestamp_type=tt, timestamps=7, max_timestamp=9)
        for records, codec, tt in batches
    )
    cols = decode_both(buf)
    assert not isinstance(cols, str)
    assert cols.to_records() == [
        r
        for records, codec, tt in batches
        for r in RecordBatch(
            build_batch(
                records, compression=codec, timestamp_type=tt, timestamps=7, max_timestamp=9
            )
        ).records()
    ]


@settings(deadline=None, max_examples=300)
@given(st.binary(min_size=1, max_size=40), st.integers(0, 5))
def test_kernels_agree_on_any_section(section: bytes, count: int) -> None:
    decode_both(raw_batch(section, count=count))


# ---------------------------------------------------------------------------------------------
# The kernel's UTF-8 check must be Python's strict decoder, exactly.


def _python_says(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(max_examples=1000)
@given(
    st.binary(max_size=12) | st.text(max_size=6).map(lambda s: s.encode("utf-8", "surrogatepass"))
)
def test_utf8_check_matches_python(raw: bytes) -> None:
    assert _kernels.utf8_valid(raw, 0, len(raw)) == _python_says(raw)


def test_utf8_check_edge_cases() -> None:
    cases = [
        b"\xc0\x80",  # overlong NUL
        b"\xc1\xbf",
        b"\xc2\x80",
        b"\xe0\x80\x80",
        b"\xe0\xa0\x80",
        b"\xed\x9f\xbf",
        b"\xed\xa0\x80",  # surrogate
        b"\xef\xbf\xbf",
        b"\xf0\x8f\xbf\xbf",
        b"\xf0\x90\x80\x80",
        b"\xf4\x8f\xbf\xbf",
        b"\xf4\x90\x80\x80",  # > U+10FFFF
        b"\xf5\x80\x80\x80",
        b"\xff",
        b"\xe2\x82",  # truncated
        b"a\xe2\x82\xacb",
    ]
    for raw in cases:
        assert _kernels.utf8_valid(raw, 0, len(raw)) == _python_says(raw), raw
        batch = raw_batch(record_bytes(b"k", b"v", [(raw, b"x")]), count=1)
        result = decode_both(batch)
        assert isinstance(result, str) != _python_says(raw)


def test_auto_kernel_is_numba_when_installed() -> None:
    from compactlog.records.columns import _select_kernel

    walk, compiled = _select_kernel("auto")
    assert compiled
    assert walk is _kernels.numba_walk_records()
    assert _select_kernel("python") == (_kernels.walk_records, False)
