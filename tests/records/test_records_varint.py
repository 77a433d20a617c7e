from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from records_helpers import zz

from compactlog.errors import CorruptRecordError
from compactlog.records import _kernels
from compactlog.records.varint import (
    VARINT_TABLE,
    VARINT_TABLE_MAX,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.mark.parametrize(
    ("n", "encoded"),
    [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (64, "80 01"), (-65, "81 01")],
)
def test_spec_examples(n: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert encode_varint(n) == raw
    assert encode_varlong(n) == raw
    assert decode_varint(raw, 0) == (n, len(raw))
    assert decode_varlong(raw, 0) == (n, len(raw))


def test_extremes() -> None:
    assert encode_varint(2**31 - 1) == bytes.fromhex("feffffff0f")
    assert encode_varint(-(2**31)) == bytes.fromhex("ffffffff0f")
    assert encode_varlong(2**63 - 1) == bytes.fromhex("feffffffffffffffff01")
    assert encode_varlong(-(2**63)) == bytes.fromhex("ffffffffffffffffff01")
    assert size_of_varint(-(2**31)) == 5
    assert size_of_varlong(-(2**63)) == 10


def test_table_matches_the_loop() -> None:
    for n in range(-1, VARINT_TABLE_MAX + 1):
        assert VARINT_TABLE[n + 1] == zz(n)


@given(INT32)
def test_varint_round_trip(n: int) -> None:
    raw = encode_varint(n)
    assert raw == zz(n)
    assert decode_varint(b"\xaa" + raw + b"\xbb", 1) == (n, 1 + len(raw))
    assert size_of_varint(n) == len(raw)


@given(INT64)
def test_varlong_round_trip(n: int) -> None:
    raw = encode_varlong(n)
    assert raw == zz(n)
    assert decode_varlong(memoryview(raw), 0) == (n, len(raw))


@given(st.integers(0, 2**32 - 1))
def test_unsigned_round_trip(u: int) -> None:
    raw = encode_unsigned_varint(u)
    assert decode_unsigned_varint(bytearray(raw), 0) == (u, len(raw))


@pytest.mark.parametrize("n", [2**31, -(2**31) - 1])
def test_encode_varint_out_of_range(n: int) -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_varint(n)


@pytest.mark.parametrize("n", [2**63, -(2**63) - 1])
def test_encode_varlong_out_of_range(n: int) -> None:
    with pytest.raises(ValueError, match="int64"):
        encode_varlong(n)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "truncated varint at position 0"),
        (b"\x80", "truncated varint at position 0"),
        (b"\xff\xff\xff\xff", "truncated"),
        (b"\xff\xff\xff\xff\xff\x01", "longer than 5 bytes"),
        (b"\xff\xff\xff\xff\x1f", "does not fit in 32 bits"),
    ],
)
def test_bad_varints(raw: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_varint(raw, 0)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\xff" * 9, "truncated varlong"),
        (b"\xff" * 10 + b"\x01", "longer than 10 bytes"),
        (b"\xff" * 9 + b"\x02", "does not fit in 64 bits"),
    ],
)
def test_bad_varlongs(raw: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_varlong(raw, 0)


def test_error_names_the_position() -> None:
    with pytest.raises(CorruptRecordError, match="at position 3"):
        decode_varint(b"\x00\x00\x00\x80", 3)


# The kernel has its own varint reader (numba cannot raise); it must agree with this module.


def _kernel_read(data: bytes, max_bytes: int) -> tuple[int, int, int]:
    return _kernels.read_varint(data, 0, len(data), max_bytes)


@settings(max_examples=500)
@given(st.binary(max_size=12))
def test_kernel_reader_agrees_with_module(raw: bytes) -> None:
    for max_bytes, decode in ((5, decode_varint), (10, decode_varlong)):
        value, pos, status = _kernel_read(raw, max_bytes)
        try:
            expected = decode(raw, 0)
        except CorruptRecordError:
            assert status != _kernels.OK
        else:
            assert status == _kernels.OK
            assert (value, pos) == expected


@functools.cache
def _compiled_reader() -> Callable[..., int]:
    from numba import njit

    _kernels.numba_walk_records()  # registers the helpers with numba
    read = _kernels.read_varint

    @njit(cache=False)
    def read_all(data: Any, n: int, out: Any) -> int:
        pos = 0
        for i in range(n):
            v, pos, status = read(data, pos, len(data), 10)
            if status != 0:
                return -1
            out[i] = v
        return pos

    return read_all  # type: ignore[no-any-return]


@settings(deadline=None)
@given(st.lists(INT64, min_size=1, max_size=20))
def test_compiled_kernel_reader_agrees(values: list[int]) -> None:
    raw = b"".join(zz(v) for v in values)
    out = np.zeros(len(values), np.int64)
    assert _compiled_reader()(np.frombuffer(raw, np.uint8), len(values), out) == len(raw)
    assert out.tolist() == values
