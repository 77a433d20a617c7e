"""Idempotent producers' state of one partition (Kafka's ``ProducerStateManager``,
``ProducerAppendInfo``, ``ProducerStateEntry`` and ``BatchMetadata``).

Theory of operation:

* **State.** For every producer id seen in the log the partition keeps an entry: the producer's
  epoch, the metadata of its last 5 data batches (first/last sequence, first/last offset, max
  timestamp), its last timestamp (the max timestamp of its last batch), and for transactions the
  coordinator epoch of its last marker and the first offset of its ongoing transaction. The state
  covers every batch below ``map_end_offset``.
* **Client appends** (``from_client=True``) are checked batch by batch before anything is written
  (``ProducerAppendInfo``): an epoch older than the entry's raises ``InvalidProducerEpochError``
  (47). With a new epoch the batch must start at sequence 0, except for a producer the partition
  has no entry for, whose first batch may start anywhere (its earlier writes may have been
  removed by retention). With the same epoch the batch must start right after the last sequence;
  sequences wrap from 2147483647 to 0. Anything else raises ``OutOfOrderSequenceError`` (45).
* **Duplicates.** A batch whose epoch and sequence range equal one of the producer's last 5
  batches is a retry of a batch already in the log: nothing is appended, and the append answers
  with that batch's offsets and timestamp, without error (``UnifiedLog.append``). Kafka's
  brokers never answer ``DUPLICATE_SEQUENCE_NUMBER`` (46) for this; a retry older than the last
  5 batches is out of sequence (45).
* **Other appends** (``from_client=False``, and replaying the log at load) update the state the
  same way without sequence checks; an older epoch is accepted with a warning (Kafka's
  ``REPLICATION`` origin). Transaction markers end the producer's transaction and set its epoch.
* **Snapshots** (:mod:`compactlog.storage.producer_snapshot`): ``<offset>.snapshot`` holds the
  state at that offset. The log takes one at every roll (at the new segment's base offset) and at
  a clean close (at the log end offset), each only if the state moved past the last snapshot.
  Snapshots go with the segments retention or cleaning removes (renamed ``.deleted`` and deleted
  after ``file.delete.delay.ms``).
* **Loading** (:func:`rebuild_producer_state`, Kafka's ``rebuildProducerState``): snapshots above
  the log end offset or at or below the log start offset are deleted; the latest remaining one is
  read (a corrupt one is deleted and the next older tried), and the batches from its offset to the
  log end are replayed. A log that stopped cleanly and has no snapshot at all (written before
  producer state existed) is not scanned: its state starts empty, as after Kafka's upgrade path.
* **Expiration.** A producer without an ongoing transaction whose last timestamp is
  ``producer.id.expiration.ms`` or more in the past is expired: dropped when a snapshot is
  loaded, removed by the periodic check (:meth:`ProducerStateManager.remove_expired_producers`),
  and not counted as active by the cleaner. Times come from the caller's clock.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, Protocol

from compactlog.errors import (
    CorruptRecordError,
    CorruptSnapshotError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from compactlog.records import (
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    ControlRecordType,
    RecordBatch,
    read_header,
)
from compactlog.records.control import decode_control_key, decode_end_txn_marker
from compactlog.storage.fs import FileSystem
from compactlog.storage.producer_snapshot import SnapshotEntry, decode_snapshot, encode_snapshot

logger = logging.getLogger("compactlog.storage.producer_state")

#: Batches remembered per producer for duplicate detection (``ProducerStateEntry``).
NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` on Kafka's sequence ring (0 follows 2147483647)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last: int, first: int) -> bool:
    return first == last + 1 or (first == 0 and last == INT32_MAX)


class BatchMetadata(NamedTuple):
    """What a producer's entry remembers of one of its data batches."""

    last_seq: int
    last_offset: int
    offset_delta: int  # last offset - first offset
    timestamp: int  # the batch's max timestamp

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """One producer's state: epoch, last batches, last timestamp, transaction fields."""

    __slots__ = (
        "_batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = -1,
        last_timestamp: int = NO_TIMESTAMP,
        current_txn_first_offset: int | None = None,
        batches: Iterable[BatchMetadata] = (),
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self._batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
            f"batches={list(self._batches)}, last_timestamp={self.last_timestamp}, "
            f"coordinator_epoch={self.coordinator_epoch}, "
            f"current_txn_first_offset={self.current_txn_first_offset})"
        )

    @property
    def batches(self) -> tuple[BatchMetadata, ...]:
        """The remembered batches, oldest first."""
        return tuple(self._batches)

    def is_empty(self) -> bool:
        return not self._batches

    @property
    def first_seq(self) -> int:
        return self._batches[0].first_seq if self._batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self._batches[-1].last_seq if self._batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self._batches[-1].last_offset if self._batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self._batches[-1].offset_delta if self._batches else 0

    def without_batches(self) -> ProducerStateEntry:
        """A copy with the same epoch, timestamps and transaction fields and no batches."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        """A different epoch forgets the batches of the old one."""
        if self.producer_epoch != epoch:
            self._batches.clear()
            self.producer_epoch = epoch
            return True
        return False

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.maybe_update_producer_epoch(epoch)
        self._batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, other: ProducerStateEntry) -> None:
        """Take over an append's result (Kafka's ``update(ProducerStateEntry)``)."""
        self.maybe_update_producer_epoch(other.producer_epoch)
        self._batches.extend(other._batches)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def end_transaction(self, epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        """A transaction marker: epoch, coordinator epoch and timestamp; no transaction open."""
        self.maybe_update_producer_epoch(epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    def find_duplicate_batch(
        self, epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        """The remembered batch with exactly this epoch and sequence range, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self._batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None


class ProducerBatch(NamedTuple):
    """The facts producer state needs of one batch with a producer id."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool
    #: For a transaction marker (ABORT or COMMIT): (control type, coordinator epoch, record
    #: timestamp); None for data batches and other control batches (an empty one, emptied by
    #: cleaning, or another control type, which carries no producer state).
    marker: tuple[int, int, int] | None = None


def producer_batch(header: BatchHeader, data: bytes | bytearray | memoryview) -> ProducerBatch:
    """The :class:`ProducerBatch` of a whole batch (``data``) whose header is ``header``."""
    marker = None
    if header.is_control and header.records_count > 0:
        record = RecordBatch(bytes(data)).records()[0]
        control_type = decode_control_key(record.key)
        if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            marker = (int(control_type), decode_end_txn_marker(record.value), record.timestamp)
    return ProducerBatch(
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.last_sequence,
        header.base_offset,
        header.last_offset,
        header.max_timestamp,
        header.is_transactional,
        header.is_control,
        marker,
    )


def producer_batches(data: bytes | bytearray | memoryview) -> list[ProducerBatch]:
    """The batches with a producer id among the whole, valid batches of ``data``."""
    found = []
    position = 0
    view = memoryview(data)
    while position < len(view):
        header = read_header(view, position)
        size = header.batch_length + LOG_OVERHEAD
        if header.has_producer_id:
            found.append(producer_batch(header, view[position : position + size]))
        position += size
    return found


class _ProducerAppend:
    """The checks and the new state of one producer over one append (``ProducerAppendInfo``)."""

    def __init__(
        self, producer_id: int, current: ProducerStateEntry | None, from_client: bool, name: str
    ) -> None:
        self.producer_id = producer_id
        self.current = current if current is not None else ProducerStateEntry(producer_id)
        self.from_client = from_client
        self.name = name
        self.updated = self.current.without_batches()

    def append(self, batch: ProducerBatch) -> None:
        if batch.is_control:
            if batch.marker is not None:
                self._append_marker(batch)
            return  # emptied by cleaning, or not a transaction marker
        self._check_epoch(batch.producer_epoch, batch.base_offset)
        if self.from_client:
            self._check_sequence(batch.producer_epoch, batch.base_sequence, batch.base_offset)
        updated = self.updated
        updated.add_batch(
            batch.producer_epoch,
            batch.last_sequence,
            batch.last_offset,
            batch.last_offset - batch.base_offset,
            batch.max_timestamp,
        )
        if updated.current_txn_first_offset is None and batch.is_transactional:
            updated.current_txn_first_offset = batch.base_offset
        # Kafka refuses a non-transactional batch inside an open transaction; client
        # transactions are refused before this point, and the log's own data is taken as is.

    def _append_marker(self, batch: ProducerBatch) -> None:
        assert batch.marker is not None
        _, coordinator_epoch, timestamp = batch.marker
        self._check_epoch(batch.producer_epoch, batch.base_offset)
        self.updated.end_transaction(batch.producer_epoch, coordinator_epoch, timestamp)

    def _check_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            message = (
                f"Epoch of producer {self.producer_id} at offset {offset} in {self.name} is "
                f"{epoch}, which is smaller than the last seen epoch "
                f"{self.updated.producer_epoch}"
            )
            if self.from_client:
                raise InvalidProducerEpochError(message)
            logger.warning("%s", message)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated, self.current
        if epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in partition {self.name}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {updated.producer_epoch} (current producer "
                    "epoch)"
                )
            return
        if not updated.is_empty():
            last = updated.last_seq
        elif epoch == current.producer_epoch:
            last = current.last_seq
        else:
            last = NO_SEQUENCE
        # Without a known epoch (all of the producer's data was removed) any sequence goes.
        if current.producer_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last, first_seq):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in partition {self.name}: {first_seq} (incoming seq. number), "
                f"{last} (current end sequence number)"
            )


class ProducerAppend(NamedTuple):
    """The outcome of checking an append: the producers' new state, or the earlier batch that
    the append duplicates (then nothing is to be written)."""

    updates: tuple[_ProducerAppend, ...] = ()
    duplicate: BatchMetadata | None = None


class ProducerState(NamedTuple):
    """One active producer, as Kafka's DescribeProducers reports it (plus its last offset)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int  # -1 when the producer has no data batch (only markers)
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1 without an ongoing transaction


class LastRecord(NamedTuple):
    """What the cleaner needs of an active producer (Kafka's ``LastRecord``)."""

    last_data_offset: int | None
    producer_epoch: int


class SnapshotFile(NamedTuple):
    offset: int
    path: str


class ProducerStateManager:
    """The producer state of one partition and its ``.snapshot`` files.

    Creating one does no I/O; the loader calls :func:`rebuild_producer_state`. With
    ``writes_snapshots=False`` it never writes a snapshot (the state of a log opened as a view,
    which would otherwise replace the real state on disk with its own, empty one). Every method
    runs under the log's lock.
    """

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        name: str,
        *,
        producer_id_expiration_ms: int,
        writes_snapshots: bool = True,
    ) -> None:
        self.fs = fs
        self.dir = directory
        self.name = name
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.writes_snapshots = writes_snapshots
        self._producers: dict[int, ProducerStateEntry] = {}
        self._snapshots: dict[int, str] = {}  # offset -> path
        self.map_end_offset = 0
        self._last_snap_offset = 0

    # --- the state ------------------------------------------------------------------------------
    def is_empty(self) -> bool:
        return not self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def active_producers(self) -> dict[int, ProducerStateEntry]:
        """The entries by producer id (the live objects: read, do not change)."""
        return dict(self._producers)

    def producer_states(self) -> list[ProducerState]:
        return [
            ProducerState(
                pid,
                e.producer_epoch,
                e.last_seq,
                e.last_data_offset,
                e.last_timestamp,
                e.coordinator_epoch,
                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
            )
            for pid, e in sorted(self._producers.items())
        ]

    def is_expired(self, entry: ProducerStateEntry, now: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def last_records_of_active_producers(self, now: int | None = None) -> dict[int, LastRecord]:
        """Each producer's last data offset (None if it wrote only markers) and epoch; with
        ``now``, producers expired by then are left out (as if the periodic check had run)."""
        return {
            pid: LastRecord(
                e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch
            )
            for pid, e in self._producers.items()
            if now is None or not self.is_expired(e, now)
        }

    def remove_expired_producers(self, now: int) -> int:
        """Kafka's periodic ``removeExpiredProducers``; returns how many were removed."""
        expired = [pid for pid, e in self._producers.items() if self.is_expired(e, now)]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def prepare_append(
        self, batches: Sequence[ProducerBatch], *, from_client: bool
    ) -> ProducerAppend:
        """Check the producer batches of one append (``analyzeAndValidateProducerState``).

        Raises ``InvalidProducerEpochError``/``OutOfOrderSequenceError`` for a client append
        that breaks its producer's sequence; changes nothing until :meth:`update`.
        """
        updates: dict[int, _ProducerAppend] = {}
        for batch in batches:
            pid = batch.producer_id
            if from_client:
                entry = self._producers.get(pid)
                if entry is not None:
                    duplicate = entry.find_duplicate_batch(
                        batch.producer_epoch, batch.base_sequence, batch.last_sequence
                    )
                    if duplicate is not None:
                        return ProducerAppend(duplicate=duplicate)
            info = updates.get(pid)
            if info is None:
                info = updates[pid] = _ProducerAppend(
                    pid, self._producers.get(pid), from_client, self.name
                )
            info.append(batch)
        return ProducerAppend(tuple(updates.values()))

    def update(self, append: ProducerAppend) -> None:
        """Apply a checked append once its batches are written."""
        for info in append.updates:
            current = self._producers.get(info.producer_id)
            if current is None:
                self._producers[info.producer_id] = info.updated
            else:
                current.update(info.updated)

    def load_entry(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self.map_end_offset = max(self.map_end_offset, log_start_offset)
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = log_start_offset if latest is None else latest

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and delete every snapshot (the log's data was lost)."""
        self._producers.clear()
        for snapshot_offset in list(self._snapshots):
            self._remove_and_delete_snapshot(snapshot_offset)
        self._last_snap_offset = 0
        self.map_end_offset = offset

    # --- snapshots ------------------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots, default=None)

    def load_snapshots(self) -> None:
        """Find the ``.snapshot`` files in the log's directory."""
        self._snapshots = dict(_list_snapshot_files(self.fs, self.dir))

    def take_snapshot(self, *, sync: bool = True) -> str | None:
        """Write a snapshot at ``map_end_offset`` unless the last one is there already;
        returns its path (None if none was needed)."""
        if self.map_end_offset <= self._last_snap_offset or not self.writes_snapshots:
            return None
        path = self.snapshot_path(self.map_end_offset)
        write_snapshot(self.fs, path, self._producers.values(), sync=sync)
        logger.debug(
            "%s: wrote producer snapshot at offset %d with %d producer ids",
            self.name,
            self.map_end_offset,
            len(self._producers),
        )
        self._snapshots[self.map_end_offset] = path
        self._last_snap_offset = self.map_end_offset
        return path

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> str | None:
        """Forget the snapshot at ``offset`` and rename it ``.deleted``; returns the new path
        (None if there was none)."""
        path = self._snapshots.pop(offset, None)
        if path is None or not self.fs.exists(path):
            return None
        target = path + DELETED_SUFFIX
        self.fs.rename(path, target)
        return target

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            self.fs.remove(path)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots that belong to no segment, except the newest one when it lies
        above every segment's base offset (written at the log end by a clean close)."""
        bases = set(segment_base_offsets)
        self.load_snapshots()
        stray: int | None = None
        for offset in sorted(self._snapshots):
            if offset in bases:
                continue
            if stray is not None:
                self._remove_and_delete_snapshot(stray)
            stray = offset
        if stray is not None and bases and stray < max(bases):
            self._remove_and_delete_snapshot(stray)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now: int) -> None:
        """Keep the snapshots inside ``(log_start_offset, log_end_offset]`` and load the latest
        readable one (Kafka's ``truncateAndReload`` at load)."""
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_and_delete_snapshot(offset)
        if log_end_offset != self.map_end_offset:
            self._producers.clear()
            self._load_from_snapshot(log_start_offset, now)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int, now: int) -> None:
        while True:
            latest = self.latest_snapshot_offset()
            if latest is None:
                self._last_snap_offset = self.map_end_offset = log_start_offset
                return
            path = self._snapshots[latest]
            try:
                entries = read_snapshot(self.fs, path)
            except CorruptSnapshotError as exc:
                logger.warning("%s: failed to load producer snapshot %s: %s", self.name, path, exc)
                self._remove_and_delete_snapshot(latest)
                continue
            for entry in entries:
                if not self.is_expired(entry, now):
                    self.load_entry(entry)
            self._last_snap_offset = self.map_end_offset = latest
            return


def _list_snapshot_files(fs: FileSystem, directory: str) -> Iterator[SnapshotFile]:
    for name in fs.listdir(directory):
        head, _, rest = name.partition(".")
        if rest == SNAPSHOT_SUFFIX[1:] and len(head) == 20 and head.isdigit():
            yield SnapshotFile(int(head), os.path.join(directory, name))


def write_snapshot(
    fs: FileSystem, path: str, entries: Iterable[ProducerStateEntry], *, sync: bool
) -> None:
    """Write the snapshot file ``path`` (replacing any file there)."""
    rows = [
        SnapshotEntry(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
        for e in sorted(entries, key=lambda e: e.producer_id)
    ]
    data = encode_snapshot(rows)
    handle = fs.open(path, create=True)
    try:
        if handle.size():
            handle.truncate(0)
        handle.write_at(0, data)
        if sync:
            handle.sync()
    finally:
        handle.close()


def read_snapshot(fs: FileSystem, path: str) -> list[ProducerStateEntry]:
    """The producer entries of a snapshot file (Kafka's ``readSnapshot``)."""
    entries = []
    for row in decode_snapshot(fs.read_file(path), path):
        batches = (
            [BatchMetadata(row.last_sequence, row.last_offset, row.offset_delta, row.timestamp)]
            if row.last_offset >= 0
            else []
        )
        entries.append(
            ProducerStateEntry(
                row.producer_id,
                row.epoch,
                row.coordinator_epoch,
                row.timestamp,
                row.current_txn_first_offset if row.current_txn_first_offset >= 0 else None,
                batches,
            )
        )
    return entries


class _Segment(Protocol):
    """What replaying needs of a segment (:class:`compactlog.storage.segment.LogSegment`)."""

    @property
    def base_offset(self) -> int: ...

    def batches(
        self, start_position: int = 0, *, skip_damage: bool = False
    ) -> Iterator[_FileBatch]: ...

    def translate_offset(self, offset: int) -> _FileBatch | None: ...


class _FileBatch(Protocol):
    @property
    def position(self) -> int: ...

    @property
    def header(self) -> BatchHeader: ...

    @property
    def data(self) -> memoryview: ...


def rebuild_producer_state(
    state: ProducerStateManager,
    segments: Sequence[_Segment],
    log_start_offset: int,
    last_offset: int,
    now: int,
    *,
    reload_from_clean_shutdown: bool,
) -> None:
    """Bring ``state`` to ``last_offset`` from its snapshots and the log (Kafka's
    ``UnifiedLog.rebuildProducerState``); see the module docstring."""
    to_snapshot: list[int] = []
    if segments:
        if len(segments) > 1:
            to_snapshot.append(segments[-2].base_offset)
        to_snapshot.append(segments[-1].base_offset)
    to_snapshot.append(last_offset)
    if state.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        # A log written before producer state existed: snapshots at the last segments and the
        # log end so that the next load need not scan it either.
        for offset in to_snapshot:
            state.update_map_end_offset(offset)
            state.take_snapshot()
        return
    empty_before = state.is_empty() and state.map_end_offset >= last_offset
    state.truncate_and_reload(log_start_offset, last_offset, now)
    if last_offset > state.map_end_offset and not empty_before:
        for segment in _segments_holding(segments, state.map_end_offset, last_offset):
            start = max(segment.base_offset, state.map_end_offset, log_start_offset)
            state.update_map_end_offset(start)
            if segment.base_offset in to_snapshot:
                state.take_snapshot()
            _replay(state, segment, start, last_offset)
    state.update_map_end_offset(last_offset)
    state.take_snapshot()


def _segments_holding(segments: Sequence[_Segment], start: int, end: int) -> list[_Segment]:
    """The segments that hold offsets of ``[start, end)``: from the one whose base offset is
    the greatest at or below ``start`` (or the first) to the last one starting below ``end``."""
    first = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= start:
            first = i
    return [s for s in segments[first:] if s.base_offset < end]


# Batches replayed per state update: bounds the memory of a replay over a large segment (the
# result is the same as one update per segment).
_REPLAY_BATCHES = 4096


def _replay(state: ProducerStateManager, segment: _Segment, start: int, end: int) -> None:
    """Apply the batches of ``segment`` from the one holding ``start`` to the last one ending
    below ``end``, as the log's own (unchecked) appends."""
    batches: list[ProducerBatch] = []
    try:
        first = segment.translate_offset(start)
        if first is None:
            return
        # Damage left in place (a sealed segment after a clean shutdown) is stepped over: the
        # producers' batches after it are still the log's.
        for batch in segment.batches(first.position, skip_damage=True):
            header = batch.header
            if header.last_offset >= end:
                break
            if header.has_producer_id:
                try:
                    batches.append(producer_batch(header, batch.data))
                except CorruptRecordError as exc:
                    logger.warning("%s: skipping an unreadable marker: %s", state.name, exc)
                if len(batches) >= _REPLAY_BATCHES:
                    state.update(state.prepare_append(batches, from_client=False))
                    batches = []
    except CorruptRecordError as exc:  # the start offset lies in damage left in place
        logger.warning("%s: producer state replay stopped: %s", state.name, exc)
    if batches:
        state.update(state.prepare_append(batches, from_client=False))
