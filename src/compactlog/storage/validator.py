"""Validation of appended batches and offset assignment (Kafka's ``LogValidator`` role).

Every append to a log passes through :func:`validate_and_assign` before a byte is written. A
batch is refused as a whole, leaving the log untouched, when:

* it is larger than the topic's ``max.message.bytes`` -> ``MESSAGE_TOO_LARGE`` (10);
* its CRC or framing is wrong -> ``CORRUPT_MESSAGE`` (2);
* it is a control batch sent by a client, or a record has a null key on a topic whose
  ``cleanup.policy`` contains ``compact`` -> ``INVALID_RECORD`` (87), with Kafka's message;
* a client's records do not carry the offset deltas 0, 1, ..., n-1 -> ``INVALID_RECORD`` (87).
  Kafka checks this for compressed batches only; an uncompressed batch with deltas out of order
  would make its consumers see offsets go backwards, so compactlog refuses both;
* a client's batch has a producer id but no sequence, or an append of several batches holds one
  with a producer id (Kafka takes exactly one batch per produce) -> ``INVALID_RECORD`` (87);
* a client's batch is transactional -> ``INVALID_REQUEST`` (42): compactlog has no transaction
  coordinator, so no transaction can have been begun;
* a CreateTime timestamp is outside ``message.timestamp.before.max.ms`` /
  ``message.timestamp.after.max.ms`` of now -> ``INVALID_TIMESTAMP`` (32).

The producer-state rules (sequences, epochs, duplicates) need the log's state and are applied by
:class:`compactlog.storage.producer_state.ProducerStateManager` after this validation.

Accepted batches get their offsets (the base offset field is outside the CRC, so it is patched in
place), the partition leader epoch 0 of a single-node leader, the broker's time for
``LogAppendTime`` topics, and are re-compressed when the topic's ``compression.type`` names a codec
other than the batch's.

The delete-horizon bit (attributes bit 6, KIP-534) of a client's batch is cleared. The cleaner
sets it when it first keeps a tombstone, with the batch's first timestamp holding the time after
which the tombstone may go, so a producer that set it could have its tombstones removed at the
next cleaning instead of after ``delete.retention.ms``. Kafka 4.4's ``LogValidator`` neither
refuses nor clears it when it assigns offsets in place (it keeps the attributes), but drops it
whenever it rebuilds a batch (a recompression), since only the cleaner writes it. Clearing it
always changes no record: their timestamps are the first timestamp plus their deltas either
way. A WARNING (once per partition) names the partition; the CRC is recomputed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from compactlog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTimestampError,
    MessageTooLargeError,
)
from compactlog.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    LOG_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    Compression,
    RecordBatch,
    RecordColumns,
    TimestampType,
    build_batch,
    compute_crc,
    decode_columns,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from compactlog.storage.config import LogConfig

logger = logging.getLogger("compactlog.storage")

# The leader epoch a single-node leader stamps into every batch (Kafka's first epoch is 0).
LEADER_EPOCH = 0

# Decompressed bytes one batch may expand to. Bounds memory against decompression bombs: a
# 1 KiB gzip or zstd payload can claim a gigabyte. The promise (spec R17) is a peak of at most
# 2 x max.message.bytes + 16 MiB for an append that is refused as a bomb; the decompressed
# output is capped 8 MiB below that, which leaves the request's own bytes and the decoder's
# working memory inside the promise. Twice max.message.bytes leaves room for honest, highly
# compressible batches.
DECOMPRESSION_HEADROOM = 8 * 1024 * 1024


def max_decompressed_bytes(config: LogConfig) -> int:
    return 2 * config.max_message_bytes + DECOMPRESSION_HEADROOM


@dataclass(frozen=True)
class ValidatedAppend:
    """Batches ready to be written, with the facts the log needs about them."""

    data: bytes | bytearray
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    batch_count: int
    log_append_time: int
    #: Whether a batch carries a producer id (an idempotent producer's, or a marker's).
    has_producer_id: bool = False
    #: True when the append was a retry of a batch already in the log: nothing was written and
    #: the offsets (and ``log_append_time``, the batch's max timestamp) are the earlier batch's.
    duplicate: bool = False


def _split_batches(data: bytes | bytearray | memoryview) -> list[tuple[int, int]]:
    """(position, size) of each batch; the buffer must hold whole batches and nothing else."""
    spans: list[tuple[int, int]] = []
    position = 0
    total = len(data)
    while position < total:
        if total - position < LOG_OVERHEAD:
            raise CorruptRecordError(
                f"{total - position} trailing bytes at position {position} are not a batch"
            )
        header = read_header(data, position)
        size = header.size_in_bytes
        if position + size > total:
            raise CorruptRecordError(
                f"batch at position {position} claims {size} bytes but only "
                f"{total - position} remain"
            )
        spans.append((position, size))
        position += size
    if not spans:
        raise CorruptRecordError("an append must contain at least one record batch")
    return spans


def validate_and_assign(
    data: bytes | bytearray | memoryview,
    *,
    config: LogConfig,
    topic_partition: str,
    next_offset: int,
    now_ms: int,
    from_client: bool = True,
    verify_crc: bool = True,
    keys_checked: bool = False,
) -> ValidatedAppend:
    """Validate whole batches and assign offsets from ``next_offset``.

    ``verify_crc`` and ``keys_checked`` let a caller that built the batch itself (and so knows it
    is well formed and keyed) skip the record scan; the size, offset and timestamp rules still run.
    """
    spans = _split_batches(data)
    for position, size in spans:
        if size > config.max_message_bytes:
            raise MessageTooLargeError(
                f"the record batch at position {position} is {size} bytes, larger than "
                f"max.message.bytes={config.max_message_bytes} of {topic_partition}"
            )
    columns: RecordColumns | None = None
    must_scan = verify_crc or (config.compact and not keys_checked)
    if must_scan:
        columns = decode_columns(
            data, verify_crc=verify_crc, max_decompressed=max_decompressed_bytes(config)
        )
    buf = bytearray(data)
    log_append = config.message_timestamp_type == "LogAppendTime"
    target = _target_codec(config)
    out: list[bytes | bytearray] = []
    offset = next_offset
    max_ts, offset_of_max_ts = -1, next_offset
    record_count = 0
    has_producer_id = False
    for index, (position, size) in enumerate(spans):
        header = read_header(buf, position)
        if header.is_control and from_client:
            raise InvalidRecordError(
                f"clients may not write control records (batch at position {position} "
                f"of {topic_partition})"
            )
        if from_client and header.last_offset_delta != header.records_count - 1:
            raise CorruptRecordError(
                f"batch at position {position} has {header.records_count} records but a "
                f"last offset delta of {header.last_offset_delta}"
            )
        if header.producer_id >= 0:
            has_producer_id = True
            if from_client:
                _check_producer_fields(header, position, len(spans), topic_partition)
        if from_client and header.attributes & TRANSACTIONAL_FLAG_MASK:
            raise InvalidRequestError(
                f"transactional batch at position {position} of {topic_partition} refused: "
                "compactlog does not support transactions"
            )
        if columns is not None:
            mask = columns.batch_index == index
            _check_records(columns, mask, config, topic_partition, now_ms, log_append, header)
            if from_client:
                _check_offset_deltas(columns, mask, header, position, topic_partition)
        elif not log_append:
            _check_timestamp(header.max_timestamp, config, topic_partition, now_ms)
        base = offset
        target_buf, at = buf, position
        if target is not None and target != header.compression and not header.is_control:
            target_buf = bytearray(
                _recompress(bytes(buf[position : position + size]), target, base)
            )
            at = 0
        if from_client and header.attributes & DELETE_HORIZON_FLAG_MASK:
            if target_buf is buf:  # a recompressed batch was rebuilt without it
                _clear_delete_horizon(buf, position, size)
            _warn_horizon_cleared(topic_partition)
        set_base_offset(target_buf, at, base)
        set_partition_leader_epoch(target_buf, at, LEADER_EPOCH)
        if log_append:
            set_log_append_time(target_buf, at, now_ms)
        batch_bytes: bytes | bytearray = target_buf
        if target_buf is buf and len(spans) > 1:
            batch_bytes = bytes(buf[position : position + size])
        # One batch filling the buffer (the usual case) is written without another copy.
        batch_ts = now_ms if log_append else header.max_timestamp
        last = base + header.last_offset_delta
        if batch_ts > max_ts:
            max_ts, offset_of_max_ts = batch_ts, last
        record_count += header.records_count
        out.append(batch_bytes)
        offset = last + 1
    return ValidatedAppend(
        data=out[0] if len(out) == 1 else b"".join(out),
        first_offset=next_offset,
        last_offset=offset - 1,
        max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max_ts,
        record_count=record_count,
        batch_count=len(spans),
        log_append_time=now_ms if log_append else -1,
        has_producer_id=has_producer_id,
    )


#: Partitions whose producers' delete-horizon bit was cleared and logged (once each).
_horizon_warned: set[str] = set()


def _clear_delete_horizon(buf: bytearray, position: int, size: int) -> None:
    """Clear bit 6 of a client batch's attributes and recompute its CRC (see the docstring)."""
    attributes = int.from_bytes(
        buf[position + ATTRIBUTES_OFFSET : position + ATTRIBUTES_OFFSET + 2]
    )
    cleared = attributes & ~DELETE_HORIZON_FLAG_MASK
    buf[position + ATTRIBUTES_OFFSET : position + ATTRIBUTES_OFFSET + 2] = cleared.to_bytes(2)
    crc = compute_crc(buf, position, size)
    buf[position + CRC_OFFSET : position + CRC_OFFSET + 4] = crc.to_bytes(4)


def _warn_horizon_cleared(topic_partition: str) -> None:
    if topic_partition not in _horizon_warned:
        _horizon_warned.add(topic_partition)
        logger.warning(
            "cleared the delete-horizon flag a producer set on a batch to %s (only the log "
            "cleaner sets it; tombstones stay for delete.retention.ms); logged once per partition",
            topic_partition,
        )


def _check_producer_fields(
    header: BatchHeader, position: int, batches: int, topic_partition: str
) -> None:
    """Kafka's ``LogValidator`` rules for a client batch with a producer id."""
    if header.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id} in topic partition {topic_partition}"
        )
    if batches > 1:
        raise InvalidRecordError(
            f"the batch at position {position} has producerId {header.producer_id}: an "
            f"idempotent produce to {topic_partition} must hold exactly one record batch, not "
            f"{batches}"
        )


def _target_codec(config: LogConfig) -> Compression | None:
    name = config.compression_type
    if name == "producer":
        return None
    return Compression.from_name(name)


def _check_timestamp(ts: int, config: LogConfig, topic_partition: str, now_ms: int) -> None:
    if ts < 0:
        return
    if now_ms - ts > config.message_timestamp_before_max_ms:
        raise InvalidTimestampError(
            f"timestamp {ts} of a record to {topic_partition} is more than "
            f"message.timestamp.before.max.ms={config.message_timestamp_before_max_ms} before "
            f"the broker time {now_ms}"
        )
    if ts - now_ms > config.message_timestamp_after_max_ms:
        raise InvalidTimestampError(
            f"timestamp {ts} of a record to {topic_partition} is more than "
            f"message.timestamp.after.max.ms={config.message_timestamp_after_max_ms} after "
            f"the broker time {now_ms}"
        )


def _check_records(
    columns: RecordColumns,
    mask: npt.NDArray[np.bool_],
    config: LogConfig,
    topic_partition: str,
    now_ms: int,
    log_append: bool,
    header: BatchHeader,
) -> None:
    if config.compact and not header.is_control:
        null_keys = (columns.key_len[mask] < 0).nonzero()[0]
        if len(null_keys):
            why = (
                "Compacted topic cannot accept message without key in topic partition "
                f"{topic_partition}"
            )
            raise InvalidRecordError(
                f"{why}. (record {int(null_keys[0])} of the batch)",
                record_errors=tuple((int(i), why) for i in null_keys),
            )
    if not log_append:
        timestamps = columns.timestamps[mask]
        if len(timestamps):
            _check_timestamp(int(timestamps.min()), config, topic_partition, now_ms)
            _check_timestamp(int(timestamps.max()), config, topic_partition, now_ms)


def _check_offset_deltas(
    columns: RecordColumns,
    mask: npt.NDArray[np.bool_],
    header: BatchHeader,
    position: int,
    topic_partition: str,
) -> None:
    deltas = columns.offsets[mask] - header.base_offset
    wrong = (deltas != np.arange(len(deltas))).nonzero()[0]
    if len(wrong):
        at = int(wrong[0])
        raise InvalidRecordError(
            f"record {at} of the batch at position {position} to {topic_partition} has offset "
            f"delta {int(deltas[at])}, expected {at}: a batch's records must have the offset "
            "deltas 0, 1, 2, ..."
        )


def _recompress(batch: bytes, codec: Compression, base_offset: int) -> bytes:
    """Rebuild a batch with the topic's codec, keeping every record field and producer field."""
    source = RecordBatch(batch)
    records = source.records()
    base = source.base_offset
    return build_batch(
        [(r.key, r.value, r.headers) for r in records],
        base_offset=base_offset,
        timestamps=[r.timestamp for r in records],
        compression=codec,
        timestamp_type=TimestampType(source.timestamp_type),
        producer_id=source.producer_id,
        producer_epoch=source.producer_epoch,
        base_sequence=source.base_sequence,
        partition_leader_epoch=source.partition_leader_epoch,
        is_transactional=source.is_transactional,
        offset_deltas=[r.offset - base for r in records],
        last_offset_delta=source.last_offset - base,
    )
