"""RecordBatch v2 ("magic 2"): the unit of storage, replication and compaction (spec 2.1-2.4).

Record layout (inside the records section)::

    length          varint   bytes of the record after this field
    attributes      int8     unused, 0
    timestampDelta  varlong  timestamp - baseTimestamp
    offsetDelta     varint   offset - baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value (a tombstone when the key is not null)
    value           bytes
    headersCount    varint   >= 0
    headers         headersCount x (keyLength varint >= 0, UTF-8 key,
                                    valueLength varint (-1 = null), value)

Null and empty are different everywhere: ``None`` is a null key or value, ``b""`` an empty one.

The batch header's layout, constants and parsing are in :mod:`compactlog.records.batch_header`.
Reading goes through :mod:`compactlog.records.columns` (one compiled pass over all records);
:meth:`RecordBatch.records` is the per-batch convenience on top of it. Writing:
:func:`build_batch` has the records section encoded by :mod:`compactlog.records._encode` and
writes the header around it here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

import crc32c

from compactlog.errors import CorruptRecordError
from compactlog.records._encode import _encode_records
from compactlog.records.batch_header import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BATCH_LENGTH_OFFSET,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    TimestampType,
    compute_crc,
    read_header,
)
from compactlog.records.columns import decode_columns
from compactlog.records.compression import Compression, compress
from compactlog.records.record import Buffer, Record, RecordInput

# The two halves around the CRC: what precedes it, and what it covers.
_HEAD_STRUCT = struct.Struct(">qiibI")  # baseOffset .. crc
_TAIL_STRUCT = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
assert _HEAD_STRUCT.size == ATTRIBUTES_OFFSET


def is_crc_valid(buf: Buffer, pos: int = 0, size: int | None = None) -> bool:
    """Whether the batch at ``pos`` is at least 61 bytes, fully present, and its CRC matches.

    ``size`` defaults to the size in the batch's own header.
    """
    if pos < 0 or len(buf) - pos < RECORD_BATCH_OVERHEAD:
        return False
    if size is None:
        size = _INT32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD
    if size < RECORD_BATCH_OVERHEAD or size > len(buf) - pos:
        return False
    stored: int = _UINT32.unpack_from(buf, pos + CRC_OFFSET)[0]
    return stored == compute_crc(buf, pos, size)


def _batch_size_at(buf: Buffer, pos: int, header: BatchHeader) -> int:
    size = header.size_in_bytes
    if size > len(buf) - pos:
        raise CorruptRecordError(
            f"record batch at position {pos} (base offset {header.base_offset}) is {size} bytes "
            f"but only {len(buf) - pos} are available"
        )
    return size


# --------------------------------------------------------------------------------------------
# Reading


class RecordBatch:
    """The exact bytes of one v2 batch, with its parsed header.

    ``RecordBatch(buf, pos)`` takes the batch starting at ``pos``; its length comes from the
    header. The bytes are copied (unless ``buf`` is already exactly the batch as ``bytes``), so
    later changes to ``buf`` do not show through.
    """

    __slots__ = ("_raw", "header")

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        header = read_header(buf, pos)
        size = _batch_size_at(buf, pos, header)
        if isinstance(buf, bytes) and pos == 0 and size == len(buf):
            self._raw = buf
        else:
            with memoryview(buf) as view:
                self._raw = bytes(view[pos : pos + size])
        self.header = header

    def __repr__(self) -> str:
        h = self.header
        return (
            f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, "
            f"count={h.records_count}, size={h.size_in_bytes}, attributes=0x{h.attributes:02x})"
        )

    @property
    def raw(self) -> bytes:
        """Exactly the batch's bytes."""
        return self._raw

    # Header conveniences.
    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def last_offset_delta(self) -> int:
        return self.header.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def size_in_bytes(self) -> int:
        return self.header.size_in_bytes

    @property
    def attributes(self) -> int:
        return self.header.attributes

    @property
    def compression(self) -> Compression:
        return self.header.compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header.timestamp_type

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def has_delete_horizon(self) -> bool:
        return self.header.has_delete_horizon

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.header.delete_horizon_ms

    @property
    def base_timestamp(self) -> int:
        return self.header.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def last_sequence(self) -> int:
        return self.header.last_sequence

    @property
    def records_count(self) -> int:
        return self.header.records_count

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def crc(self) -> int:
        return self.header.crc

    def compute_crc(self) -> int:
        return compute_crc(self._raw, 0, len(self._raw))

    def is_valid(self) -> bool:
        """Kafka's ``isValid``: at least 61 bytes and the stored CRC matches."""
        return len(self._raw) >= RECORD_BATCH_OVERHEAD and self.header.crc == self.compute_crc()

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError unless :meth:`is_valid`."""
        computed = self.compute_crc()
        if self.header.crc != computed:
            raise CorruptRecordError(
                f"record batch CRC mismatch at offset {self.header.base_offset}: "
                f"stored 0x{self.header.crc:08x}, computed 0x{computed:08x}"
            )

    def records(
        self, max_decompressed: int | None = None, *, verify_crc: bool = True
    ) -> list[Record]:
        """All records, fully validated (every length and count checked against the bytes).

        ``max_decompressed`` bounds the decompressed records section (decompression-bomb
        guard). The CRC is checked first unless ``verify_crc`` is False.
        """
        return decode_columns(
            self._raw, verify_crc=verify_crc, max_decompressed=max_decompressed
        ).to_records()

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())


def iter_batches(buf: Buffer, pos: int = 0) -> Iterator[RecordBatch]:
    """The batches of a buffer holding whole v2 batches back to back (strict: a partial batch
    at the end raises CorruptRecordError)."""
    end = len(buf)
    while pos < end:
        batch = RecordBatch(buf, pos)
        yield batch
        pos += batch.size_in_bytes


# --------------------------------------------------------------------------------------------
# Writing


def _attributes(
    compression: Compression,
    timestamp_type: TimestampType,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
) -> int:
    attrs = int(compression)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attrs |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attrs |= CONTROL_FLAG_MASK
    if has_delete_horizon:
        attrs |= DELETE_HORIZON_FLAG_MASK
    return attrs


def pack_batch(
    section: bytes,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
) -> bytes:
    """A whole batch from an already encoded records section: header fields and CRC-32C."""
    try:
        tail = _TAIL_STRUCT.pack(
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
        )
        crc = int(crc32c.crc32c(section, crc32c.crc32c(tail)))
        head = _HEAD_STRUCT.pack(
            base_offset,
            MIN_BATCH_LENGTH + len(section),
            partition_leader_epoch,
            MAGIC_V2,
            crc,
        )
    except struct.error as exc:
        raise ValueError(f"a record batch header field is out of range: {exc}") from exc
    return b"".join((head, tail, section))


def build_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    timestamps: int | Sequence[int] = NO_TIMESTAMP,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Encode ``records`` (``(key, value)`` or ``(key, value, headers)`` tuples) as one batch.

    The bytes are Kafka's: ``MemoryRecordsBuilder`` given the same inputs writes the same batch
    (for compressed batches, the same records section before compression).

    * ``timestamps``: one int for every record, or one per record.
    * ``offset_deltas``: defaults to ``0 .. n-1``; the cleaner passes the surviving records'
      original deltas, and ``last_offset_delta`` to keep the original last offset.
    * ``delete_horizon_ms``: sets attribute bit 6 and stores the horizon as baseTimestamp, the
      record timestamp deltas then being relative to it. Otherwise baseTimestamp is the first
      record's timestamp (-1 for no records).
    * ``max_timestamp``: defaults to the largest record timestamp, starting from -1 as Kafka's
      builder does; pass the append time for LOG_APPEND_TIME batches.
    """
    n = len(records)
    if isinstance(timestamps, int):
        ts_list: list[int] | None = None
        first_ts = max_ts = timestamps
    else:
        ts_list = list(timestamps)
        if len(ts_list) != n:
            raise ValueError(f"{len(ts_list)} timestamps given for {n} records")
        first_ts = ts_list[0] if n else NO_TIMESTAMP
        max_ts = max(ts_list, default=NO_TIMESTAMP)
    if offset_deltas is not None and len(offset_deltas) != n:
        raise ValueError(f"{len(offset_deltas)} offset deltas given for {n} records")
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = first_ts if n else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max(max_ts, NO_TIMESTAMP) if n else NO_TIMESTAMP
    if last_offset_delta is None:
        last_offset_delta = (n - 1 if offset_deltas is None else offset_deltas[-1]) if n else 0
    ts_deltas: int | list[int]
    if ts_list is None:
        ts_deltas = first_ts - base_timestamp
    else:
        ts_deltas = [t - base_timestamp for t in ts_list]
    section = _encode_records(records, ts_deltas, offset_deltas)
    if compression != Compression.NONE:
        section = compress(compression, section, compression_level)
    return pack_batch(
        section,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=_attributes(
            Compression.from_id(compression),
            timestamp_type,
            is_transactional,
            is_control,
            delete_horizon_ms is not None,
        ),
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=n,
    )


def build_empty_batch(
    *,
    base_offset: int,
    last_offset_delta: int,
    max_timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """A 61-byte batch with no records (Kafka's ``DefaultRecordBatch.writeEmptyHeader``).

    The cleaner writes one when it removes every record of a batch whose producer state must
    be kept (last batch of a producer, or a retained transaction marker position).
    """
    return pack_batch(
        b"",
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=_attributes(
            Compression.NONE, timestamp_type, is_transactional, is_control, False
        ),
        last_offset_delta=last_offset_delta,
        base_timestamp=NO_TIMESTAMP,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=0,
    )


# --------------------------------------------------------------------------------------------
# In-place patches (the broker's append path rewrites these fields without re-encoding)


def _check_patchable(buf: bytearray | memoryview, pos: int, need: int) -> None:
    if pos < 0 or len(buf) - pos < need:
        raise CorruptRecordError(
            f"record batch at position {pos} needs {need} bytes, only "
            f"{max(len(buf) - pos, 0)} available"
        )


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset; it is outside the CRC, so the CRC stays valid."""
    _check_patchable(buf, pos, LOG_OVERHEAD)
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch; it is outside the CRC, so the CRC stays valid."""
    _check_patchable(buf, pos, HEADER_SIZE_UP_TO_MAGIC)
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buf: bytearray | memoryview, pos: int, timestamp_type: TimestampType, max_timestamp: int
) -> None:
    """Set the timestamp type bit and maxTimestamp, and recompute the CRC
    (Kafka's ``DefaultRecordBatch.setMaxTimestamp``; a no-op when nothing changes)."""
    header = read_header(buf, pos)
    size = _batch_size_at(buf, pos, header)
    if header.timestamp_type == timestamp_type and header.max_timestamp == max_timestamp:
        return
    attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp`` as maxTimestamp; recomputes the CRC."""
    set_max_timestamp(buf, pos, TimestampType.LOG_APPEND_TIME, timestamp)
