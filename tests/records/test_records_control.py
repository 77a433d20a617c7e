"""Control records and transaction markers (spec 2.5)."""

from __future__ import annotations

import pytest

from compactlog.errors import CorruptRecordError
from compactlog.records import (
    ControlRecordType,
    Record,
    RecordBatch,
    build_end_txn_marker_batch,
    decode_columns,
    decode_control_key,
    decode_end_txn_marker,
    encode_control_key,
    encode_end_txn_marker,
)


@pytest.mark.parametrize("record_type", [t for t in ControlRecordType if t >= 0])
def test_key_round_trip(record_type: ControlRecordType) -> None:
    key = encode_control_key(record_type)
    assert key == b"\x00\x00" + int(record_type).to_bytes(2, "big")
    assert decode_control_key(key) is record_type


def test_key_values() -> None:
    assert encode_control_key(ControlRecordType.ABORT) == bytes.fromhex("00000000")
    assert encode_control_key(ControlRecordType.COMMIT) == bytes.fromhex("00000001")
    assert [int(t) for t in ControlRecordType] == [-1, 0, 1, 2, 3, 4, 5, 6]


def test_unknown_types_decode_as_numbers() -> None:
    assert decode_control_key(bytes.fromhex("00000063")) == 99
    assert ControlRecordType.from_id(99) is ControlRecordType.UNKNOWN
    assert ControlRecordType.from_id(1) is ControlRecordType.COMMIT
    # A newer key version, and trailing bytes, are read as version 0 (as Kafka does).
    assert decode_control_key(bytes.fromhex("0003000100ff")) is ControlRecordType.COMMIT
    with pytest.raises(ValueError, match="UNKNOWN"):
        encode_control_key(ControlRecordType.UNKNOWN)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (None, "null key"),
        (b"", "at least 4 bytes, found 0"),
        (b"\x00\x00\x00", "at least 4 bytes, found 3"),
        (bytes.fromhex("ffff0001"), "version -1"),
    ],
)
def test_bad_keys(key: bytes | None, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_control_key(key)


def test_end_txn_marker_value() -> None:
    value = encode_end_txn_marker(7)
    assert value == bytes.fromhex("000000000007")
    assert decode_end_txn_marker(value) == 7
    assert decode_end_txn_marker(encode_end_txn_marker(-(2**31))) == -(2**31)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "null value"),
        (b"\x00\x00\x00\x00\x00", "at least 6 bytes, found 5"),
        (bytes.fromhex("ffff00000001"), "version -1"),
    ],
)
def test_bad_marker_values(value: bytes | None, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_end_txn_marker(value)


@pytest.mark.parametrize("commit", [True, False])
def test_marker_batch(commit: bool, kernel: str) -> None:
    raw = build_end_txn_marker_batch(
        commit=commit,
        producer_id=1234,
        producer_epoch=5,
        coordinator_epoch=9,
        base_offset=77,
        timestamp=1_700_000_000_000,
        partition_leader_epoch=3,
    )
    assert len(raw) == 78
    batch = RecordBatch(raw)
    assert batch.is_valid()
    assert batch.header.attributes == 0x30
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1234, 5, -1)
    assert batch.partition_leader_epoch == 3
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (77, 77, 1)
    expected_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    (record,) = batch.records()
    assert record == Record(
        77, 1_700_000_000_000, encode_control_key(expected_type), encode_end_txn_marker(9), ()
    )
    assert decode_control_key(record.key) is expected_type
    assert decode_end_txn_marker(record.value) == 9
    assert decode_columns(raw, kernel=kernel).to_records() == [record]
