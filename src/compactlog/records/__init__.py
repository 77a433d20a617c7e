"""The Kafka record format, version 2 ("magic 2"): pure functions over bytes.

This is the bottom layer of compactlog (above :mod:`compactlog.errors` only). It opens no
files, no sockets and reads no clock: everything here takes bytes and returns bytes, numbers or
records, so every test and fuzzer runs without I/O. Within the package it imports only
:mod:`compactlog.errors`.

Modules:

* :mod:`~compactlog.records.varint` - zig-zag varints and varlongs;
* :mod:`~compactlog.records.compression` - the five codecs, with a decompression-bomb guard;
* :mod:`~compactlog.records.record` - one record's Python shapes, as read and as given to write;
* :mod:`~compactlog.records.batch_header` - the 61-byte batch header: field positions, attribute
  bits, parsing and the CRC;
* :mod:`~compactlog.records.batch` - reading a batch, building one byte-for-byte as Kafka does
  (the records section by :mod:`~compactlog.records._encode`), and the in-place header patches
  of the append path;
* :mod:`~compactlog.records.control` - control records (transaction markers);
* :mod:`~compactlog.records.columns` - decoding many batches at once into numpy columns, with
  the per-record loop in a compiled kernel (numba) or its plain-Python twin.

Every malformed input raises :class:`~compactlog.errors.CorruptRecordError` (or its subclass
:class:`~compactlog.errors.UnsupportedCompressionError`) with a message naming the field, the
position and the numbers; nothing lower-level (``struct.error``, ``IndexError``) escapes.
Mistakes by the caller when *building* (a value out of range) raise ``ValueError``.
"""

from compactlog.records.batch import (
    RecordBatch,
    build_batch,
    build_empty_batch,
    is_crc_valid,
    iter_batches,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from compactlog.records.batch_header import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    MIN_RECORD_SIZE,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    TimestampType,
    compute_crc,
    read_header,
)
from compactlog.records.columns import RecordColumns, decode_columns
from compactlog.records.compression import Compression, compress, decompress
from compactlog.records.control import (
    ControlRecordType,
    build_end_txn_marker_batch,
    decode_control_key,
    decode_end_txn_marker,
    encode_control_key,
    encode_end_txn_marker,
)
from compactlog.records.record import Header, Record, RecordInput
from compactlog.records.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BASE_OFFSET_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "BATCH_LENGTH_OFFSET",
    "COMPRESSION_CODEC_MASK",
    "CONTROL_FLAG_MASK",
    "CRC_OFFSET",
    "DELETE_HORIZON_FLAG_MASK",
    "HEADER_SIZE_UP_TO_MAGIC",
    "LAST_OFFSET_DELTA_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAGIC_V2",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_BATCH_LENGTH",
    "MIN_RECORD_SIZE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORDS_OFFSET",
    "RECORD_BATCH_OVERHEAD",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG_MASK",
    "BatchHeader",
    "Compression",
    "ControlRecordType",
    "Header",
    "Record",
    "RecordBatch",
    "RecordColumns",
    "RecordInput",
    "TimestampType",
    "build_batch",
    "build_empty_batch",
    "build_end_txn_marker_batch",
    "compress",
    "compute_crc",
    "decode_columns",
    "decode_control_key",
    "decode_end_txn_marker",
    "decode_varint",
    "decode_varlong",
    "decompress",
    "encode_control_key",
    "encode_end_txn_marker",
    "encode_varint",
    "encode_varlong",
    "is_crc_valid",
    "iter_batches",
    "read_header",
    "set_base_offset",
    "set_log_append_time",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "size_of_varint",
    "size_of_varlong",
]
