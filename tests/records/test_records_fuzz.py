"""Fuzzing the readers: any input decodes or raises CorruptRecordError, nothing else.

The invariant (after h11's): random bytes, mutated valid batches (with the CRC repaired so the
record parser is reached), and every prefix of a valid buffer either decode or raise the one
error class; and the two kernels agree on which, and on the message.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.errors import CorruptRecordError
from compactlog.records import (
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_empty_batch,
    decode_columns,
)

FUZZ = settings(deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])


def decode_everything(buf: bytes) -> None:
    """Every reader, with and without CRC checks; only CorruptRecordError may come out, and
    the kernels must agree."""
    for verify_crc in (False, True):
        outcomes: list[object] = []
        for kernel in ("python", "numba"):
            try:
                cols = decode_columns(
                    buf, kernel=kernel, verify_crc=verify_crc, max_decompressed=1 << 20
                )
                outcomes.append(cols.to_records())
            except CorruptRecordError as exc:
                outcomes.append(f"{type(exc).__name__}: {exc}")
        assert outcomes[0] == outcomes[1]
        try:
            batch = RecordBatch(buf)
            batch.is_valid()
            batch.records(1 << 20, verify_crc=verify_crc)
        except CorruptRecordError:
            pass


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(buf: bytes) -> None:
    decode_everything(buf)


@FUZZ
@given(st.binary(min_size=0, max_size=200), st.integers(0, 0x7F), st.integers(-3, 40))
def test_random_sections_behind_a_valid_header(section: bytes, attributes: int, count: int) -> None:
    tail = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), 0, 0, -1, -1, -1, count)
    crc = crc32c.crc32c(tail + section)
    head = struct.pack(">qiibI", 0, 49 + len(section), -1, 2, crc)
    decode_everything(head + tail + section)


def _valid_buffer(codec: Compression) -> tuple[bytes, list[int]]:
    """A few batches with varied records, and where each batch starts."""
    batches = [
        build_batch(
            [(b"key", b"value", [("h", b"x"), ("é", None)]), (None, b""), (b"", None)],
            base_offset=0,
            timestamps=[5, 3, 9],
            compression=codec,
        ),
        build_empty_batch(base_offset=3, last_offset_delta=1, max_timestamp=9),
        build_batch(
            [(b"k%d" % i, b"v" * i) for i in range(20)],
            base_offset=5,
            timestamps=100,
            compression=codec,
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            max_timestamp=200,
        ),
    ]
    starts = [0]
    for b in batches[:-1]:
        starts.append(starts[-1] + len(b))
    return b"".join(batches), starts


@FUZZ
@given(st.sampled_from(list(Compression)), st.data())
def test_mutated_batches_with_repaired_crc(codec: Compression, data: st.DataObject) -> None:
    buf, starts = _valid_buffer(codec)
    mutated = bytearray(buf)
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(mutated) - 1))
        mutated[i] = data.draw(st.integers(0, 255))
    decode_everything(bytes(mutated))
    # Repair every CRC that still frames a batch, so that the record parser is exercised.
    for start in starts:
        try:
            (length,) = struct.unpack_from(">i", mutated, start + 8)
            end = start + 12 + length
            if end - start >= 61 and end <= len(mutated):
                struct.pack_into(
                    ">I", mutated, start + 17, crc32c.crc32c(mutated[start + 21 : end])
                )
        except struct.error:
            pass
    decode_everything(bytes(mutated))


@pytest.mark.parametrize("codec", list(Compression))
def test_every_prefix(codec: Compression) -> None:
    """Fed a byte at a time: each prefix decodes (at a batch boundary) or raises."""
    buf, starts = _valid_buffer(codec)
    boundaries = set(starts[1:]) | {len(buf)}
    whole = decode_columns(buf).to_records()
    for cut in range(len(buf) + 1):
        prefix = buf[:cut]
        for kernel in ("python", "numba"):
            if cut == 0 or cut in boundaries:
                records = decode_columns(prefix, kernel=kernel).to_records()
                assert records == whole[: len(records)]
            else:
                with pytest.raises(CorruptRecordError):
                    decode_columns(prefix, kernel=kernel)


@FUZZ
@given(
    st.lists(
        st.tuples(st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=30)),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 61 + 200),
    st.binary(min_size=1, max_size=4),
)
def test_spliced_bytes(
    records: list[tuple[bytes | None, bytes | None]], at: int, junk: bytes
) -> None:
    buf = build_batch(records)
    at = min(at, len(buf))
    decode_everything(buf[:at] + junk + buf[at:])
    decode_everything(buf[:at] + buf[at + len(junk) :])


def test_decoded_fuzz_survivors_are_records() -> None:
    # A sanity check of the fuzz helper itself: a valid buffer decodes to Records.
    buf, _ = _valid_buffer(Compression.NONE)
    records = decode_columns(buf).to_records()
    assert all(isinstance(r, Record) for r in records)
    assert len(records) == 23
    decode_everything(buf)
