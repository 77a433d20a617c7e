"""The 61-byte header of a v2 record batch: where each field lies, the attribute bits,
the constants, parsing (:func:`read_header`) and the CRC-32C over the bytes it covers.

Both sides of the record format build on it: :mod:`compactlog.records.batch` (reading one batch,
building one, patching a header in place) and :mod:`compactlog.records.columns` (decoding many).

Batch layout (big-endian; offsets are from the start of the batch)::

    offset size  field
     0      8    baseOffset            int64  offset of the first record slot
     8      4    batchLength           int32  bytes after this field (= total size - 12)
    12      4    partitionLeaderEpoch  int32  -1 if unknown; NOT covered by the CRC
    16      1    magic                 int8   2
    17      4    crc                   uint32 CRC-32C of bytes [21, end of batch)
    21      2    attributes            int16  see below
    23      4    lastOffsetDelta       int32  lastOffset - baseOffset
    27      8    baseTimestamp         int64  first record's timestamp, or the delete horizon
    35      8    maxTimestamp          int64  max record timestamp, or the log append time
    43      8    producerId            int64  -1 if none
    51      2    producerEpoch         int16  -1 if none
    53      4    baseSequence          int32  -1 if none
    57      4    recordsCount          int32  number of records
    61      ..   records               the records, or one compressed stream of them

Attributes (only the low byte is used)::

    bits 0-2  compression codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd; 5-7 invalid)
    bit  3    timestamp type (0 CreateTime, 1 LogAppendTime)
    bit  4    transactional
    bit  5    control batch (transaction markers and other control records)
    bit  6    baseTimestamp holds the delete horizon (KIP-534)
"""

from __future__ import annotations

import enum
import struct
import typing

import crc32c

from compactlog.errors import CorruptRecordError
from compactlog.records.compression import Compression
from compactlog.records.record import Buffer
from compactlog.records.varint import INT32_MAX

# --------------------------------------------------------------------------------------------
# Header field offsets and sizes

BASE_OFFSET_OFFSET = 0
BASE_OFFSET_LENGTH = 8
BATCH_LENGTH_OFFSET = BASE_OFFSET_OFFSET + BASE_OFFSET_LENGTH  # 8
BATCH_LENGTH_LENGTH = 4
PARTITION_LEADER_EPOCH_OFFSET = BATCH_LENGTH_OFFSET + BATCH_LENGTH_LENGTH  # 12
PARTITION_LEADER_EPOCH_LENGTH = 4
MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + PARTITION_LEADER_EPOCH_LENGTH  # 16
MAGIC_LENGTH = 1
CRC_OFFSET = MAGIC_OFFSET + MAGIC_LENGTH  # 17
CRC_LENGTH = 4
#: The CRC field: an unsigned 32-bit CRC-32C, big-endian.
CRC_STRUCT = struct.Struct(">I")
ATTRIBUTES_OFFSET = CRC_OFFSET + CRC_LENGTH  # 21
ATTRIBUTES_LENGTH = 2
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH  # 23
LAST_OFFSET_DELTA_LENGTH = 4
BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH  # 27
BASE_TIMESTAMP_LENGTH = 8
MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH  # 35
MAX_TIMESTAMP_LENGTH = 8
PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH  # 43
PRODUCER_ID_LENGTH = 8
PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH  # 51
PRODUCER_EPOCH_LENGTH = 2
BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH  # 53
BASE_SEQUENCE_LENGTH = 4
RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH  # 57
RECORDS_COUNT_LENGTH = 4
RECORDS_OFFSET = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH  # 61

#: Size of the batch header; also the smallest valid batch (no records).
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET
#: baseOffset + batchLength: the framing every log entry format shares.
LOG_OVERHEAD = BASE_OFFSET_LENGTH + BATCH_LENGTH_LENGTH
#: Bytes to read to learn an entry's size and format (framing, leader epoch, magic).
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + MAGIC_LENGTH
#: Smallest legal batchLength: a header with no records.
MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
#: A record takes at least 7 bytes (length, attributes, timestampDelta, offsetDelta, keyLength,
#: valueLength and headersCount at one byte each), which bounds how many records a batch can
#: hold before anything is allocated for them.
MIN_RECORD_SIZE = 7

MAGIC_V2 = 2
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# Attribute masks (Kafka's names).
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
assert HEADER_STRUCT.size == RECORD_BATCH_OVERHEAD


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(typing.NamedTuple):
    """The 13 fields of a v2 batch header, in file order."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        """The codec; raises UnsupportedCompressionError for codec ids 5-7."""
        return Compression.from_id(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (KIP-534) if bit 6 is set, else None."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG_MASK else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping past int32 max to 0 as Kafka does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return _increment_sequence(self.base_sequence, self.last_offset_delta)


def _increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte v2 header at ``pos`` and check the numbers that frame the batch.

    Raises CorruptRecordError when fewer than 61 bytes are available, the magic is not 2,
    batchLength < 49, recordsCount < 0 or lastOffsetDelta < 0. The CRC is not checked here
    (see :func:`is_crc_valid`), nor that the whole batch is present.
    """
    available = len(buf) - pos
    if pos < 0 or available < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"record batch header at position {pos} needs {RECORD_BATCH_OVERHEAD} bytes, "
            f"only {max(available, 0)} available"
        )
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC_V2:
        magic = magic - 256 if magic > 127 else magic  # an int8, as Kafka prints it
        raise CorruptRecordError(
            f"unsupported magic {magic} at position {pos} (only magic {MAGIC_V2} is supported)"
        )
    try:
        header = BatchHeader._make(HEADER_STRUCT.unpack_from(buf, pos))
    except struct.error as exc:  # not reachable with the length checked above; a backstop
        raise CorruptRecordError(f"record batch header at position {pos}: {exc}") from exc
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch at position {pos} has batchLength {header.batch_length}, "
            f"less than the minimum {MIN_BATCH_LENGTH}"
        )
    if header.records_count < 0:
        raise CorruptRecordError(
            f"record batch at position {pos} has negative recordsCount {header.records_count}"
        )
    if header.last_offset_delta < 0:
        raise CorruptRecordError(
            f"record batch at position {pos} has negative lastOffsetDelta "
            f"{header.last_offset_delta}"
        )
    return header


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C of the batch bytes the CRC covers: ``[pos + 21, pos + size)``."""
    with memoryview(buf) as view:
        return int(crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]))
