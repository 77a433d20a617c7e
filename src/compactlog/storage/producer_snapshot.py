"""The producer-state snapshot file, ``<20-digit offset>.snapshot`` (Kafka's ``ProducerSnapshot``).

A snapshot named after offset N holds the state of every producer that wrote below N (see
:mod:`compactlog.storage.producer_state`). The format is Kafka's generated ``ProducerSnapshot``
message, schema version 1, written with its version in front; big-endian throughout::

    offset  size  field
    0       2     version (int16), 1
    2       4     crc (uint32): CRC-32C of every byte from offset 6 to the end of the file
    6       4     number of entries (int32)
    10      46*n  the entries, each:
                    +0   8  producerId (int64)
                    +8   2  epoch (int16)
                    +10  4  lastSequence (int32)           -1 without batch metadata
                    +14  8  lastOffset (int64)             -1 without batch metadata
                    +22  4  offsetDelta (int32)            lastOffset - firstOffset of its last
                                                           batch; 0 without batch metadata
                    +26  8  timestamp (int64)              the producer's last timestamp
                    +34  4  coordinatorEpoch (int32)       -1 until a transaction marker
                    +38  8  currentTxnFirstOffset (int64)  -1 without an ongoing transaction

Only the producer's *last* batch is kept (Kafka's ``writeSnapshot``), so after a restart a retry
of one of its earlier batches is no longer recognised as a duplicate.

Reading follows ``ProducerStateManager.readSnapshot``: a version other than 1, a count that is
negative or larger than the bytes left, a truncated entry, or a CRC mismatch make the file
*corrupt* (:class:`CorruptSnapshotError`); the loader then deletes it and rebuilds the state from
the log. Bytes after the last entry are covered by the CRC and otherwise ignored, as Kafka's
generated reader ignores them. Entries are written in producer-id order (Kafka's are in hash-map
order; readers do not care).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

import crc32c

from compactlog.errors import CorruptSnapshotError

SNAPSHOT_VERSION = 1
VERSION_OFFSET = 0
CRC_OFFSET = VERSION_OFFSET + 2
#: Where the CRC-covered part starts: the entry count.
PRODUCER_ENTRIES_OFFSET = CRC_OFFSET + 4
ENTRIES_START = PRODUCER_ENTRIES_OFFSET + 4

_PREFIX = struct.Struct(">hIi")  # version, crc, count
_ENTRY = struct.Struct(">qhiqiqiq")
ENTRY_SIZE = _ENTRY.size  # 46


class SnapshotEntry(NamedTuple):
    """One producer in a snapshot file, field for field."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """The bytes of a snapshot file holding ``entries`` (in the order given)."""
    rows = list(entries)
    buf = bytearray(ENTRIES_START + ENTRY_SIZE * len(rows))
    _PREFIX.pack_into(buf, 0, SNAPSHOT_VERSION, 0, len(rows))
    position = ENTRIES_START
    for row in rows:
        _ENTRY.pack_into(buf, position, *row)
        position += ENTRY_SIZE
    crc = crc32c.crc32c(memoryview(buf)[PRODUCER_ENTRIES_OFFSET:])
    struct.pack_into(">I", buf, CRC_OFFSET, crc)
    return bytes(buf)


def decode_snapshot(data: bytes, path: str = "snapshot") -> list[SnapshotEntry]:
    """The entries of a snapshot file; raises :class:`CorruptSnapshotError` naming the problem."""
    if len(data) < ENTRIES_START:
        raise CorruptSnapshotError(
            f"{path}: snapshot failed schema validation: {len(data)} bytes, fewer than the "
            f"{ENTRIES_START} of the header"
        )
    version, stored_crc, count = _PREFIX.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{path}: snapshot contained an unknown file version {version}")
    if count < 0:
        raise CorruptSnapshotError(
            f"{path}: snapshot failed schema validation: entry count {count} is negative"
        )
    if count * ENTRY_SIZE > len(data) - ENTRIES_START:
        raise CorruptSnapshotError(
            f"{path}: snapshot failed schema validation: {count} entries need "
            f"{count * ENTRY_SIZE} bytes, only {len(data) - ENTRIES_START} remain"
        )
    computed = crc32c.crc32c(memoryview(data)[PRODUCER_ENTRIES_OFFSET:])
    if computed != stored_crc:
        raise CorruptSnapshotError(
            f"{path}: snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. "
            f"Computed crc: {computed}"
        )
    return [
        SnapshotEntry._make(_ENTRY.unpack_from(data, ENTRIES_START + i * ENTRY_SIZE))
        for i in range(count)
    ]
