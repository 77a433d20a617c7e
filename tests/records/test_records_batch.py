"""RecordBatch v2: exact bytes (spec 2.4 and 2.6), header fields, attributes, patches."""

from __future__ import annotations

import struct

import pytest
from records_helpers import raw_batch, record_bytes

from compactlog.errors import CorruptRecordError, UnsupportedCompressionError
from compactlog.records import (
    CRC_OFFSET,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_empty_batch,
    compute_crc,
    is_crc_valid,
    iter_batches,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from compactlog.records import batch_header as header_module

SPEC_70_BYTES = bytes.fromhex(
    "0000000000000000"  # baseOffset 0
    "0000003a"  # batchLength 58
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic
    "716a6189"  # crc
    "0000"  # attributes
    "00000000"  # lastOffsetDelta
    "00000000000003e8"  # baseTimestamp 1000
    "00000000000003e8"  # maxTimestamp 1000
    "ffffffffffffffff"  # producerId
    "ffff"  # producerEpoch
    "ffffffff"  # baseSequence
    "00000001"  # recordsCount
    "10"  # record length 8
    "000000"  # attributes, timestampDelta, offsetDelta
    "026b"  # key "k"
    "0276"  # value "v"
    "00"  # headers
)


def test_constants() -> None:
    assert RECORD_BATCH_OVERHEAD == 61
    assert LOG_OVERHEAD == 12
    assert HEADER_SIZE_UP_TO_MAGIC == 17
    assert MAGIC_V2 == 2
    assert header_module.HEADER_STRUCT.size == 61
    offsets = [
        header_module.BASE_OFFSET_OFFSET,
        header_module.BATCH_LENGTH_OFFSET,
        header_module.PARTITION_LEADER_EPOCH_OFFSET,
        header_module.MAGIC_OFFSET,
        header_module.CRC_OFFSET,
        header_module.ATTRIBUTES_OFFSET,
        header_module.LAST_OFFSET_DELTA_OFFSET,
        header_module.BASE_TIMESTAMP_OFFSET,
        header_module.MAX_TIMESTAMP_OFFSET,
        header_module.PRODUCER_ID_OFFSET,
        header_module.PRODUCER_EPOCH_OFFSET,
        header_module.BASE_SEQUENCE_OFFSET,
        header_module.RECORDS_COUNT_OFFSET,
        header_module.RECORDS_OFFSET,
    ]
    assert offsets == [0, 8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57, 61]


# ---------------------------------------------------------------------------------------------
# Spec 2.6: the worked example, byte for byte


def test_spec_example_one_record() -> None:
    batch = build_batch([(b"k", b"v")], timestamps=1000)
    assert batch == SPEC_70_BYTES
    assert batch[17:21] == bytes.fromhex("716a6189")
    rb = RecordBatch(batch)
    assert rb.is_valid()
    assert rb.records() == [Record(0, 1000, b"k", b"v", ())]


def test_spec_example_tombstone() -> None:
    batch = build_batch([(b"k", None)], base_offset=5, timestamps=1000)
    assert len(batch) == 69
    assert struct.unpack_from(">q", batch, 0)[0] == 5
    assert struct.unpack_from(">i", batch, 8)[0] == 57
    assert batch[17:21] == bytes.fromhex("b27ef302")
    assert batch[61:] == bytes.fromhex("0e00000002 6b0100".replace(" ", ""))
    assert RecordBatch(batch).records() == [Record(5, 1000, b"k", None, ())]


def test_spec_example_empty_batch() -> None:
    batch = build_empty_batch(base_offset=10, last_offset_delta=2, max_timestamp=1000)
    assert len(batch) == 61
    assert batch[17:21] == bytes.fromhex("3e2696c1")
    header = read_header(batch)
    assert header == BatchHeader(10, 49, -1, 2, 0x3E2696C1, 0, 2, -1, 1000, -1, -1, -1, 0)
    rb = RecordBatch(batch)
    assert rb.is_valid()
    assert rb.records() == []
    assert (rb.base_offset, rb.last_offset, rb.next_offset) == (10, 12, 13)


@pytest.mark.parametrize(
    ("key", "value", "size"),
    [(b"0", b"0", 70), (b"10", b"10", 72), (b"100", b"100", 74), (b"0", None, 69)],
)
def test_spec_sizes(key: bytes, value: bytes | None, size: int) -> None:
    assert len(build_batch([(key, value)], timestamps=0)) == size


def test_spec_size_null_key() -> None:
    assert len(build_batch([(None, b"test")], timestamps=0)) == 72


def test_matches_independent_encoder() -> None:
    records = [(b"a", b"1", [("h", b"x")]), (None, None), (b"", b"")]
    section = (
        record_bytes(b"a", b"1", [(b"h", b"x")], ts_delta=0, offset_delta=0)
        + record_bytes(None, None, ts_delta=5, offset_delta=1)
        + record_bytes(b"", b"", ts_delta=-3, offset_delta=2)
    )
    expected = raw_batch(section, count=3, base_timestamp=100, max_timestamp=105)
    assert build_batch(records, timestamps=[100, 105, 97]) == expected


# ---------------------------------------------------------------------------------------------
# Header parsing


def test_read_header_fields() -> None:
    batch = build_batch(
        [(b"a", b"b"), (b"c", b"d")],
        base_offset=7,
        timestamps=[5, 9],
        producer_id=42,
        producer_epoch=3,
        base_sequence=11,
        partition_leader_epoch=4,
        is_transactional=True,
    )
    h = read_header(batch)
    assert h.base_offset == 7
    assert h.batch_length == len(batch) - 12
    assert h.size_in_bytes == len(batch)
    assert h.partition_leader_epoch == 4
    assert h.magic == 2
    assert h.crc == compute_crc(batch, 0, len(batch))
    assert h.last_offset_delta == 1
    assert (h.last_offset, h.next_offset) == (8, 9)
    assert (h.base_timestamp, h.max_timestamp) == (5, 9)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 11)
    assert h.last_sequence == 12
    assert h.records_count == 2
    assert h.is_transactional and not h.is_control
    assert h.compression is Compression.NONE
    assert h.timestamp_type is TimestampType.CREATE_TIME
    assert h.delete_horizon_ms is None and not h.has_delete_horizon


def test_last_sequence_wraps() -> None:
    batch = build_batch(
        [(b"a", b"b")] * 3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2
    )
    assert read_header(batch).last_sequence == 0


def test_read_header_at_position() -> None:
    batch = build_batch([(b"a", b"b")], base_offset=3)
    assert read_header(b"\x00" * 5 + batch, 5).base_offset == 3


@pytest.mark.parametrize("available", [0, 1, 17, 60])
def test_read_header_short(available: int) -> None:
    with pytest.raises(CorruptRecordError, match="needs 61 bytes"):
        read_header(SPEC_70_BYTES[:available])


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_read_header_bad_magic(magic: int) -> None:
    raw = bytearray(SPEC_70_BYTES)
    raw[16] = magic
    with pytest.raises(CorruptRecordError, match=f"unsupported magic {magic} at position 0"):
        read_header(raw)


def test_read_header_short_batch_length() -> None:
    raw = raw_batch(b"", count=0, batch_length=48)
    with pytest.raises(CorruptRecordError, match="batchLength 48"):
        read_header(raw)


def test_read_header_negative_count() -> None:
    with pytest.raises(CorruptRecordError, match="negative recordsCount -1"):
        read_header(raw_batch(b"", count=-1, last_offset_delta=0))


def test_read_header_negative_last_offset_delta() -> None:
    with pytest.raises(CorruptRecordError, match="negative lastOffsetDelta -2"):
        read_header(raw_batch(b"", count=0, last_offset_delta=-2))


# ---------------------------------------------------------------------------------------------
# RecordBatch and CRC


def test_record_batch_takes_the_batch_at_pos() -> None:
    first = build_batch([(b"a", b"1")], base_offset=0)
    second = build_batch([(b"b", b"2")], base_offset=1)
    buf = bytearray(first + second + b"junk")
    rb = RecordBatch(buf, len(first))
    assert rb.raw == second
    buf[len(first) + 70 - 2] = 0  # later changes to the buffer do not show through
    assert rb.records() == [Record(1, -1, b"b", b"2", ())]
    assert [b.base_offset for b in iter_batches(first + second)] == [0, 1]


def test_record_batch_shorter_buffer() -> None:
    with pytest.raises(CorruptRecordError, match="is 70 bytes but only 69 are available"):
        RecordBatch(SPEC_70_BYTES[:-1])


def test_crc_validation() -> None:
    assert is_crc_valid(SPEC_70_BYTES)
    assert is_crc_valid(b"xx" + SPEC_70_BYTES, 2)
    assert is_crc_valid(SPEC_70_BYTES, 0, 70)
    assert not is_crc_valid(SPEC_70_BYTES, 0, 69)
    assert not is_crc_valid(SPEC_70_BYTES[:60])
    assert not is_crc_valid(SPEC_70_BYTES[:69])
    bad = bytearray(SPEC_70_BYTES)
    bad[-2] ^= 1  # the value byte: "v" becomes "w"
    assert not is_crc_valid(bad)
    rb = RecordBatch(bytes(bad))
    assert not rb.is_valid()
    with pytest.raises(
        CorruptRecordError,
        match=r"record batch CRC mismatch at offset 0: stored 0x716a6189, computed 0x[0-9a-f]{8}",
    ):
        rb.ensure_valid()
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        rb.records()
    assert rb.records(verify_crc=False) == [Record(0, 1000, b"k", b"w", ())]
    # Leader epoch and base offset are outside the CRC.
    patched = bytearray(SPEC_70_BYTES)
    patched[0:8] = b"\x11" * 8
    patched[12:16] = b"\x22" * 4
    assert is_crc_valid(patched)


def test_record_batch_properties() -> None:
    batch = build_batch(
        [(b"a", b"b")],
        base_offset=100,
        timestamps=5,
        compression=Compression.GZIP,
        producer_id=9,
        producer_epoch=2,
        base_sequence=4,
        partition_leader_epoch=6,
        is_transactional=True,
    )
    rb = RecordBatch(batch)
    assert rb.header == read_header(batch)
    assert (rb.base_offset, rb.last_offset, rb.next_offset) == (100, 100, 101)
    assert rb.size_in_bytes == len(batch)
    assert rb.compression is Compression.GZIP
    assert rb.timestamp_type is TimestampType.CREATE_TIME
    assert rb.is_transactional and not rb.is_control
    assert rb.delete_horizon_ms is None
    assert (rb.max_timestamp, rb.producer_id, rb.producer_epoch) == (5, 9, 2)
    assert (rb.base_sequence, rb.records_count, rb.partition_leader_epoch) == (4, 1, 6)
    assert list(rb) == rb.records() == [Record(100, 5, b"a", b"b", ())]
    assert "base_offset=100" in repr(rb)


# ---------------------------------------------------------------------------------------------
# Attribute bits


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec(codec: Compression) -> None:
    records = [(b"key%d" % i, b"value %d " % i * 50, [("h", b"v")]) for i in range(300)]
    batch = build_batch(records, compression=codec, timestamps=list(range(300)))
    rb = RecordBatch(batch)
    assert rb.compression is codec
    assert read_header(batch).attributes == int(codec)
    assert rb.is_valid()
    assert rb.records() == [Record(i, i, k, v, tuple(h)) for i, (k, v, h) in enumerate(records)]
    if codec is not Compression.NONE:
        assert len(batch) < len(build_batch(records, timestamps=list(range(300))))


def test_log_append_time() -> None:
    batch = build_batch(
        [(b"a", b"1"), (b"b", b"2")],
        timestamps=[10, 20],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        max_timestamp=999,
    )
    rb = RecordBatch(batch)
    assert rb.header.attributes == 0x08
    assert rb.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in rb.records()] == [999, 999]


def test_transactional_and_control_bits() -> None:
    batch = build_batch([(b"\x00\x00\x00\x01", b"")], is_transactional=True, is_control=True)
    h = read_header(batch)
    assert h.attributes == 0x30
    assert h.is_transactional and h.is_control


def test_delete_horizon() -> None:
    batch = build_batch(
        [(b"a", None), (b"b", b"2")],
        timestamps=[1000, 1500],
        delete_horizon_ms=86_400_000,
        offset_deltas=[3, 7],
    )
    rb = RecordBatch(batch)
    assert rb.header.attributes == 0x40
    assert rb.has_delete_horizon
    assert rb.delete_horizon_ms == 86_400_000
    assert rb.header.base_timestamp == 86_400_000
    assert rb.max_timestamp == 1500
    assert rb.records() == [Record(3, 1000, b"a", None, ()), Record(7, 1500, b"b", b"2", ())]


def test_delete_horizon_deltas_are_relative_to_it() -> None:
    batch = build_batch([(b"a", b"")], timestamps=[10], delete_horizon_ms=74)
    # length 7, attributes, timestampDelta 10 - 74 = -64 (zig-zag 127 = 7f), offsetDelta,
    # key "a", empty value, no headers
    assert batch[61:] == bytes.fromhex("0e 00 7f 00 0261 00 00".replace(" ", ""))


def test_all_attribute_bits_together() -> None:
    batch = build_batch(
        [(b"k", b"v")],
        compression=Compression.ZSTD,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        is_transactional=True,
        is_control=True,
        delete_horizon_ms=5,
        max_timestamp=7,
        timestamps=1,
    )
    h = read_header(batch)
    assert h.attributes == 0x04 | 0x08 | 0x10 | 0x20 | 0x40
    assert h.compression is Compression.ZSTD
    assert (h.is_transactional, h.is_control, h.delete_horizon_ms) == (True, True, 5)
    assert RecordBatch(batch).records() == [Record(0, 7, b"k", b"v", ())]


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_invalid_codec_ids(codec_id: int) -> None:
    batch = raw_batch(record_bytes(b"k", b"v"), count=1, attributes=codec_id)
    header = read_header(batch)
    with pytest.raises(UnsupportedCompressionError, match=f"codec id {codec_id}"):
        _ = header.compression
    with pytest.raises(UnsupportedCompressionError):
        RecordBatch(batch).records()


# ---------------------------------------------------------------------------------------------
# build_batch options


def test_offset_deltas_and_last_offset_delta() -> None:
    batch = build_batch(
        [(b"a", b"1"), (b"b", b"2")], base_offset=50, offset_deltas=[2, 5], last_offset_delta=9
    )
    rb = RecordBatch(batch)
    assert (rb.last_offset, rb.next_offset) == (59, 60)
    assert [r.offset for r in rb.records()] == [52, 55]
    # last_offset_delta defaults to the last offset delta
    assert read_header(build_batch([(b"a", b"1")], offset_deltas=[4])).last_offset_delta == 4


def test_timestamps_default_and_max() -> None:
    assert read_header(build_batch([(b"a", b"1")])).max_timestamp == NO_TIMESTAMP
    h = read_header(build_batch([(b"a", b"1")] * 3, timestamps=[30, 10, 20]))
    assert (h.base_timestamp, h.max_timestamp) == (30, 30)
    h = read_header(build_batch([(b"a", b"1")], timestamps=[5], max_timestamp=99))
    assert h.max_timestamp == 99


def test_large_fields_use_multi_byte_varints() -> None:
    key = b"k" * 5000
    value = b"v" * 300_000
    records = [(key, value, [("x" * 70, b"y" * 9000)])] * 2
    rb = RecordBatch(build_batch(records, timestamps=[0, 2**40], offset_deltas=[0, 70_000]))
    assert rb.records() == [
        Record(0, 0, key, value, (("x" * 70, b"y" * 9000),)),
        Record(70_000, 2**40, key, value, (("x" * 70, b"y" * 9000),)),
    ]


def test_build_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="2 timestamps given for 1 records"):
        build_batch([(b"a", b"b")], timestamps=[1, 2])
    with pytest.raises(ValueError, match="offset deltas"):
        build_batch([(b"a", b"b")], offset_deltas=[1, 2])
    with pytest.raises(ValueError, match="out of range"):
        build_batch([(b"a", b"b")], producer_epoch=2**15)
    with pytest.raises(ValueError, match="int64"):
        build_batch([(b"a", b"b")], timestamps=[2**63 - 1], delete_horizon_ms=-(2**63))
    with pytest.raises(ValueError, match="int32"):
        build_batch([(b"a", b"b")], offset_deltas=[2**31])


def test_build_accepts_buffers() -> None:
    rb = RecordBatch(build_batch([(bytearray(b"k"), memoryview(b"v"), [("h", bytearray(b"x"))])]))
    assert rb.records() == [Record(0, -1, b"k", b"v", (("h", b"x"),))]


def test_build_with_no_records() -> None:
    batch = build_batch([], base_offset=4, last_offset_delta=3, max_timestamp=8)
    assert batch == build_empty_batch(base_offset=4, last_offset_delta=3, max_timestamp=8)


def test_empty_batch_options() -> None:
    batch = build_empty_batch(
        base_offset=1,
        last_offset_delta=0,
        max_timestamp=3,
        producer_id=5,
        producer_epoch=6,
        base_sequence=7,
        partition_leader_epoch=8,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        is_transactional=True,
        is_control=True,
    )
    h = read_header(batch)
    assert h == BatchHeader(1, 49, 8, 2, h.crc, 0x38, 0, -1, 3, 5, 6, 7, 0)
    assert is_crc_valid(batch)


# ---------------------------------------------------------------------------------------------
# In-place patches


def test_set_base_offset_keeps_crc() -> None:
    buf = bytearray(b"\xee" * 3 + SPEC_70_BYTES)
    set_base_offset(buf, 3, 1234)
    assert read_header(buf, 3).base_offset == 1234
    assert buf[3 + CRC_OFFSET : 3 + CRC_OFFSET + 4] == SPEC_70_BYTES[17:21]
    assert is_crc_valid(buf, 3)
    assert RecordBatch(buf, 3).records()[0].offset == 1234


def test_set_partition_leader_epoch_keeps_crc() -> None:
    buf = bytearray(SPEC_70_BYTES)
    set_partition_leader_epoch(buf, 0, 17)
    assert read_header(buf).partition_leader_epoch == 17
    assert buf[17:21] == SPEC_70_BYTES[17:21]
    assert is_crc_valid(buf)


def test_set_log_append_time_recomputes_crc() -> None:
    buf = bytearray(build_batch([(b"a", b"1"), (b"b", b"2")], timestamps=[1, 2]))
    set_log_append_time(memoryview(buf), 0, 5555)
    h = read_header(buf)
    assert h.attributes == 0x08
    assert h.max_timestamp == 5555
    assert is_crc_valid(buf)
    assert [r.timestamp for r in RecordBatch(buf).records()] == [5555, 5555]
    set_max_timestamp(buf, 0, TimestampType.CREATE_TIME, 2)
    assert read_header(buf).attributes == 0
    assert is_crc_valid(buf)
    assert [r.timestamp for r in RecordBatch(buf).records()] == [1, 2]


def test_patches_check_the_buffer() -> None:
    with pytest.raises(CorruptRecordError):
        set_base_offset(bytearray(5), 0, 1)
    with pytest.raises(CorruptRecordError):
        set_partition_leader_epoch(bytearray(20), 10, 1)
    with pytest.raises(CorruptRecordError):
        set_log_append_time(bytearray(SPEC_70_BYTES[:65]), 0, 1)
