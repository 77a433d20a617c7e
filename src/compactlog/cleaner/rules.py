"""The cleaner's keep/drop rules (spec 5.4 to 5.7): which record survives (Kafka's
``shouldRetainRecord``: the offset map, tombstones and their delete horizon, keyless records),
which batch is kept, emptied or dropped (``shouldDiscardBatch``: active producers' last
batches, the batch at the high watermark, transaction markers), and the refusal of logs with
aborted transactions. Applied record by record here; the compiled region pass of
:mod:`._rebuild_kernel` applies the same rules to plain data batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compactlog.cleaner.rebuild import rebuild_batch, rebuild_uncompressed
from compactlog.cleaner.stats import CleanerStats
from compactlog.errors import AbortedTransactionsError
from compactlog.records import (
    BatchHeader,
    Compression,
    ControlRecordType,
    RecordColumns,
    TimestampType,
    build_empty_batch,
)
from compactlog.records.batch_header import DELETE_HORIZON_FLAG_MASK
from compactlog.records.control import decode_control_key
from compactlog.storage.log import Log
from compactlog.storage.producer_state import LastRecord


def refuse_aborted_transactions(log: Log, first_uncleanable_offset: int) -> None:
    """Raise :class:`AbortedTransactionsError` if a segment the round may rewrite has aborted
    transactions in its ``.txnindex``. Kafka's cleaner drops the records of aborted
    transactions (spec 5.7) and rewrites the index; this one would keep them as committed, and an
    aborted value would then win over the committed value it was meant never to replace."""
    for segment in log.segments():
        if segment.base_offset >= first_uncleanable_offset:
            break
        if segment.aborted_transactions_size() > 0:
            raise AbortedTransactionsError(
                f"{segment.txn_index_path} records aborted transactions: compactlog's cleaner "
                "cannot remove aborted records yet (Kafka's cleaner can), so it does not clean "
                f"{log.name}"
            )


class TransactionState:
    """What the cleaner must know of transactions (spec 5.7), for logs without aborted ones.

    compactlog writes no aborted-transaction index yet, and refuses a log with one Kafka wrote
    (:func:`refuse_aborted_transactions`), so every transactional batch it sees is treated as
    committed: the COMMIT marker of a producer is kept while a batch of its
    transaction was seen in the current round, and becomes discardable (after its delete
    horizon) once none is.
    """

    def __init__(self) -> None:
        self.ongoing_committed: set[int] = set()

    def on_data_batch(self, header: BatchHeader) -> bool:
        if header.is_transactional:
            self.ongoing_committed.add(header.producer_id)
        return False  # never aborted: no aborted transactions are recorded

    def on_control_batch(self, header: BatchHeader, first_key: bytes | None) -> bool:
        if header.records_count == 0 or first_key is None:
            return True  # an empty control batch is always discardable
        kind = decode_control_key(first_key)
        if kind == ControlRecordType.COMMIT:
            seen = header.producer_id in self.ongoing_committed
            self.ongoing_committed.discard(header.producer_id)
            return not seen
        # An ABORT marker: no batch of an aborted transaction is ever seen (none are recorded),
        # so it is discardable; other control types (leader change, ...) never are.
        return kind == ControlRecordType.ABORT


class ActiveProducers:
    """Spec 5.4, the first batch-retention rule: the last batch of every active producer stays
    (Kafka's ``isBatchLastRecordOfProducer``), from the producers as the round starts.

    A producer with data keeps the batch holding its last data offset; one that wrote only
    markers keeps a control batch of its current epoch.
    """

    def __init__(self, last_records: dict[int, LastRecord]) -> None:
        self._records = last_records
        offsets = {
            r.last_data_offset for r in last_records.values() if r.last_data_offset is not None
        }
        self._offsets = np.array(sorted(offsets), dtype=np.int64)

    def __bool__(self) -> bool:
        return bool(self._records)

    def candidates(self, columns: RecordColumns) -> np.ndarray:
        """Per batch of a region: whether it may be a producer's last batch (its last offset is
        one of theirs); those go through :func:`.rules.filter_batch`, which decides."""
        return (columns.batch_producer_id >= 0) & np.isin(columns.batch_last_offset, self._offsets)

    def retains(self, header: BatchHeader) -> bool:
        if not header.has_producer_id:
            return False
        record = self._records.get(header.producer_id)
        if record is None:
            return False
        if record.last_data_offset is not None:
            return header.last_offset == record.last_data_offset
        return header.is_control and header.producer_epoch == record.producer_epoch


@dataclass
class ChunkDecisions:
    """Per-record keep flags of a region and their per-batch counts."""

    columns: RecordColumns
    keep: np.ndarray
    starts: np.ndarray  # record index where each batch starts (and the end)
    kept: np.ndarray
    kept_tombstones: np.ndarray
    keyless: np.ndarray


def decide_records(
    columns: RecordColumns, found: np.ndarray, now: int, latest_offset: int
) -> ChunkDecisions:
    """The record rule of spec 5.4 for every record of a region at once (numpy); ``found`` is
    the offset map's answer per record and ``latest_offset`` the last offset the map covers."""
    count = columns.batch_count
    # No delete horizon stamped yet, or not reached.
    retain_tombstone = ((columns.batch_attributes & DELETE_HORIZON_FLAG_MASK) == 0) | (
        now < columns.batch_base_timestamp
    )
    batch = columns.batch_index
    offsets = columns.offsets
    beyond = offsets > latest_offset
    has_key = columns.key_len >= 0
    tombstone = columns.value_len < 0
    keep = beyond | (has_key & (offsets >= found) & (~tombstone | retain_tombstone[batch]))
    starts = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(columns.batch_records_count, out=starts[1:])
    return ChunkDecisions(
        columns=columns,
        keep=keep,
        starts=starts,
        kept=np.bincount(batch, weights=keep, minlength=count).astype(np.int64),
        kept_tombstones=np.bincount(batch, weights=keep & tombstone, minlength=count).astype(
            np.int64
        ),
        keyless=np.bincount(batch, weights=~beyond & ~has_key, minlength=count).astype(np.int64),
    )


def filter_batch(
    data: bytes | memoryview,
    position: int,
    header: BatchHeader,
    decisions: ChunkDecisions,
    b: int,
    now: int,
    delete_retention_ms: int,
    high_watermark: int,
    transactions: TransactionState,
    producers: ActiveProducers,
    stats: CleanerStats,
) -> bytes | memoryview | None:
    """Spec 5.4 for batch ``b`` of the chunk, record by record: the bytes to write, or None to
    drop it (the reference the compiled region pass is held to)."""
    first, stop = int(decisions.starts[b]), int(decisions.starts[b + 1])
    horizon = header.delete_horizon_ms
    columns = decisions.columns
    if header.is_control:
        key = columns.key(first) if stop > first else None
        can_discard = transactions.on_control_batch(header, key)
        discard_records = can_discard and horizon is not None and horizon <= now
    else:
        can_discard = transactions.on_data_batch(header)
        discard_records = can_discard
    # Batch retention, first matching rule: an active producer's last batch, the batch
    # ending at the high watermark (both RETAIN_EMPTY), then DELETE or DELETE_EMPTY.
    retain_empty = producers.retains(header) or header.next_offset == high_watermark
    if not retain_empty and discard_records:
        return None
    stats.messages_read += stop - first
    if discard_records:
        kept, tombstones_kept = 0, 0
    elif header.is_control:
        kept, tombstones_kept = stop - first, 0
    else:
        kept, tombstones_kept = int(decisions.kept[b]), int(decisions.kept_tombstones[b])
        stats.invalid_messages += int(decisions.keyless[b])
    if kept:
        need_horizon = (tombstones_kept > 0 or (can_discard and header.is_control)) and (
            horizon is None
        )
        if kept == stop - first and not need_horizon:
            return data[position : position + header.size_in_bytes]
        new_horizon = now + delete_retention_ms if need_horizon else horizon
        if header.is_control:
            indices = list(range(first, stop))
        else:
            indices = (np.flatnonzero(decisions.keep[first:stop]) + first).tolist()
        if header.compression == Compression.NONE and not header.is_control:
            fast = rebuild_uncompressed(
                data,
                position,
                header,
                decisions.keep[first:stop],
                columns.timestamps[first:stop],
                new_horizon,
            )
            if fast is not None:
                return fast
        return rebuild_batch(columns, indices, header, new_horizon)
    if retain_empty:
        empty = build_empty_batch(
            base_offset=header.base_offset,
            last_offset_delta=header.last_offset_delta,
            max_timestamp=header.max_timestamp,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch,
            timestamp_type=TimestampType(header.timestamp_type),
            is_transactional=header.is_transactional,
            is_control=header.is_control,
        )
        return empty
    return None
