"""Control records: transaction markers and the KRaft log's own records (spec 2.5).

A control batch has attribute bit 5 set and holds control records, whose key says what they
are::

    key    version int16 (= 0), type int16
    value  depends on the type; for ABORT and COMMIT (end-transaction markers):
           version int16 (= 0), coordinator_epoch int32

A transaction marker batch is transactional and control (attributes 0x30), carries the
transaction's producer id and epoch, base sequence -1, and exactly one record: 61 + 17 = 78
bytes.

Types above the known ones decode as their plain number (Kafka maps them to ``UNKNOWN``), so a
newer broker's control records pass through and can still be reported by number.
"""

from __future__ import annotations

import enum
import struct

from compactlog.errors import CorruptRecordError
from compactlog.records.batch import build_batch
from compactlog.records.batch_header import NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE, TimestampType

CONTROL_KEY_VERSION = 0
CONTROL_KEY_SIZE = 4
END_TXN_MARKER_VERSION = 0
END_TXN_MARKER_VALUE_SIZE = 6

_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    """Kafka's ``ControlRecordType``; UNKNOWN (-1) stands for any type not listed."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    @classmethod
    def from_id(cls, type_id: int) -> ControlRecordType:
        """The type for a key's type field, UNKNOWN for types this code does not know."""
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN


def encode_control_key(record_type: ControlRecordType | int) -> bytes:
    """The 4-byte control record key for ``record_type`` (version 0)."""
    if record_type == ControlRecordType.UNKNOWN:
        raise ValueError("UNKNOWN is not a control record type that can be written")
    return _KEY.pack(CONTROL_KEY_VERSION, record_type)


def decode_control_key(key: bytes | None) -> ControlRecordType | int:
    """The type in a control record key: a ControlRecordType, or the plain number when the
    type is unknown. Raises CorruptRecordError for a null or short key or a negative version
    (a newer non-negative version is read as version 0, as Kafka does)."""
    if key is None:
        raise CorruptRecordError("control record has a null key")
    if len(key) < CONTROL_KEY_SIZE:
        raise CorruptRecordError(
            f"control record key must have at least {CONTROL_KEY_SIZE} bytes, found {len(key)}"
        )
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    record_type = ControlRecordType.from_id(type_id)
    return type_id if record_type is ControlRecordType.UNKNOWN else record_type


def encode_end_txn_marker(coordinator_epoch: int) -> bytes:
    """The 6-byte value of an ABORT/COMMIT marker (version 0)."""
    return _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def decode_end_txn_marker(value: bytes | None) -> int:
    """The coordinator epoch in an end-transaction marker value."""
    if value is None:
        raise CorruptRecordError("end transaction marker has a null value")
    if len(value) < END_TXN_MARKER_VALUE_SIZE:
        raise CorruptRecordError(
            f"end transaction marker value must have at least {END_TXN_MARKER_VALUE_SIZE} "
            f"bytes, found {len(value)}"
        )
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"invalid end transaction marker version {version}")
    return int(coordinator_epoch)


def build_end_txn_marker_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A COMMIT or ABORT marker batch (78 bytes), as the transaction coordinator writes it."""
    record_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_batch(
        [(encode_control_key(record_type), encode_end_txn_marker(coordinator_epoch))],
        base_offset=base_offset,
        timestamps=timestamp,
        timestamp_type=TimestampType.CREATE_TIME,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )
