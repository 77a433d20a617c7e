"""What the cleaner would do with a log, and why: per-partition status and the story of one key.

Read-only: nothing here writes a checkpoint, marks a partition or starts a cleaning. Both
functions look at the log as the next cleaner iteration at ``now`` would (spec 4 and 5):

* the range is :func:`~compactlog.cleaner.manager.log_to_clean` of the partition's cleaner
  checkpoint: first dirty offset (FDO), first uncleanable offset (FUO), clean and cleanable
  bytes and the dirty ratio; eligibility is :func:`~compactlog.cleaner.manager.is_eligible`
  plus the candidate rules of the selection (compacted, idle, not uncleanable, not empty);
* one pass of the cleaner maps ``keys_per_pass`` keys: ``floor(floor(buffer / threads /
  entry size) * load factor)``, the map's ``max_desired_size``. The next cleaning's map stops at
  the first keyed record it meets when the map is that full (spec 5.2), so records of
  ``[FDO, that offset)`` are covered and the rest wait for later passes. ``passes_needed``
  replays those passes over the dirty range: a key that recurs after a pass boundary is mapped
  again by the next pass, so it can exceed ``ceil(distinct dirty keys / keys_per_pass)``;
* a record is removed by a cleaning that rewrites its segment while the map holds a later
  offset of its key; a tombstone that is the latest of its key by the first cleaning at or after
  its batch's delete horizon, which the first cleaning that rewrites the batch stamps as
  ``now + delete.retention.ms`` (spec 5.4, 5.5). A cleaning only runs when something is dirty.

Records are read with the bulk decoder a run of batches at a time; distinct keys are counted in
a set of key bytes, so memory grows with the number of distinct dirty keys.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from compactlog.cleaner.manager import (
    REASON_HIGH_WATERMARK,
    REASON_MIN_COMPACTION_LAG,
    LogCleanerManager,
    LogToClean,
    is_eligible,
    log_to_clean,
)
from compactlog.cleaner.offset_map import CompactOffsetMap, SkimpyOffsetMap
from compactlog.cleaner.service import LogCleaner
from compactlog.errors import CorruptRecordError
from compactlog.records import RecordColumns, decode_columns
from compactlog.storage.config import BrokerConfig
from compactlog.storage.log import Log
from compactlog.storage.partitioner import partition_for_key
from compactlog.storage.readonly import ReadOnlyDataDir
from compactlog.storage.segment import LogSegment
from compactlog.storage.store import Store

#: Batches are decoded in runs of about this many bytes (one decode call per run).
_RUN_BYTES = 1 << 20

#: ``KeyRecordExplanation.verdict`` values.
VERDICT_LATEST = "latest"  # the newest value of its key: never removed by cleaning
VERDICT_REMOVABLE = "removable now"  # the next cleaning of the log drops it
VERDICT_WAITING = "waiting"  # removable later (a horizon, a lag, a roll, another pass)
VERDICT_NOT_COMPACTED = "not compacted"  # cleanup.policy=delete: only retention removes it


def format_ms(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds, e.g. 2023-11-14T22:13:20.000Z."""
    try:
        moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def keys_per_pass(broker: BrokerConfig) -> int:
    """Keys one cleaner pass can map: the offset map's ``max_desired_size`` for this config."""
    memory = broker.dedupe_buffer_size_per_thread
    compact = broker.offset_map_type == "compact"
    entry = CompactOffsetMap.entry_size if compact else SkimpyOffsetMap.entry_size
    return int((memory // entry) * broker.io_buffer_load_factor)


def key_partition(store: Store | ReadOnlyDataDir, topic: str, key: bytes) -> int:
    """The partition Kafka's default partitioner sends ``key`` to."""
    return partition_for_key(key, store.partitions(topic))


# --------------------------------------------------------------------------------------------
# What the answers read: a live cleaner's store and states, or the files alone


class _Source:
    """The logs, the cleaner checkpoint and the cleaner states the answers read.

    Over a :class:`LogCleaner` (a store open in this process) the states are the cleaner's: a
    partition in progress or paused, the uncleanable marks. Over a
    :class:`~compactlog.storage.readonly.ReadOnlyDataDir` (the CLI's commands: no lock, nothing
    written, a broker may hold the directory) only the files speak: no state, no mark, since
    those live in the memory of the process that cleans.
    """

    def __init__(self, source: LogCleaner | ReadOnlyDataDir) -> None:
        if isinstance(source, LogCleaner):
            store = source.store
            self.broker, self.clock = store.broker, store.clock
            self.topics, self.partitions, self.log = store.topics, store.partitions, store.log
            self.manager: LogCleanerManager | None = source.manager
        else:
            self.broker, self.clock = source.broker, source.clock
            self.topics, self.partitions, self.log = source.topics, source.partitions, source.log
            self.manager = None
            self._checkpoints = source.cleaner_checkpoints()

    def checkpoint(self, tp: tuple[str, int]) -> int | None:
        if self.manager is None:
            return self._checkpoints.get(tp)
        return self.manager.checkpoints().get(tp)

    def state(self, tp: tuple[str, int]) -> str | None:
        return None if self.manager is None else self.manager.state(tp)

    def uncleanable(self, tp: tuple[str, int]) -> str | None:
        return None if self.manager is None else self.manager.uncleanable_partitions().get(tp)


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class TombstoneStatus:
    """A tombstone in the log and where it stands."""

    offset: int
    key: bytes
    timestamp: int
    segment_base_offset: int
    #: The delete horizon of its batch, or None: no cleaning has rewritten the batch yet.
    delete_horizon_ms: int | None
    horizon_passed: bool
    #: The next record of the same key, if any (then the tombstone goes without a horizon).
    superseded_by: int | None


@dataclass(frozen=True)
class PartitionStatus:
    """One partition as the next cleaner iteration at ``now`` sees it."""

    topic: str
    partition: int
    now: int
    cleanup_policy: str
    log_start_offset: int
    log_end_offset: int
    active_segment_base_offset: int
    #: The partition's entry in cleaner-offset-checkpoint (None: no entry).
    checkpoint: int | None
    first_dirty_offset: int
    first_uncleanable_offset: int
    #: What ends the cleanable range: "active segment", "min.compaction.lag.ms",
    #: "high watermark", or None when nothing is dirty.
    bounded_by: str | None
    #: With ``bounded_by == "min.compaction.lag.ms"``: when the segment at the FUO ages out.
    min_lag_until_ms: int | None
    clean_bytes: int
    cleanable_bytes: int
    total_bytes: int
    dirty_ratio: float
    min_cleanable_dirty_ratio: float
    eligible: bool
    #: Why a cleaner iteration would not pick it (empty when eligible).
    why_not: list[str]
    needs_compaction_now: bool
    compaction_delay_ms: int
    cleaning_state: str | None
    uncleanable: str | None
    dirty_keys: int
    keys_per_pass: int
    passes_needed: int
    #: The next cleaning maps the keyed records of [FDO, this offset): the FUO when the dirty
    #: keys fit in one pass. (Its checkpoint can be a little lower when keyless records or
    #: markers precede this offset.)
    next_map_end_offset: int
    tombstones: list[TombstoneStatus] = field(default_factory=list)


@dataclass(frozen=True)
class KeyRecordExplanation:
    """One stored record of a key, and what keeps it in the log."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes
    value: bytes | None
    segment_base_offset: int
    in_active_segment: bool
    #: The delete horizon of the record's batch (None: not stamped).
    delete_horizon_ms: int | None
    verdict: str
    #: The next record of the same key, if any.
    superseded_by: int | None
    #: The earliest time a cleaning can remove it, when a time is what it waits for.
    removable_after_ms: int | None
    reason: str

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


# --------------------------------------------------------------------------------------------
# Reading


def _runs(log: Log, start: int, end: int | None = None) -> Iterator[RecordColumns]:
    """The data records from ``start`` (whole batches: earlier offsets may come first) up to
    ``end``, decoded a run at a time. Control batches are left out."""
    if start >= (log.log_end_offset if end is None else min(end, log.log_end_offset)):
        return
    run: list[bytes] = []
    size = 0
    for batch in log.iter_batches(start, end):
        header = batch.header
        if header.is_control or header.records_count == 0:
            continue
        run.append(bytes(batch.data))
        size += len(batch.data)
        if size >= _RUN_BYTES:
            yield _decode(log, run)
            run, size = [], 0
    if run:
        yield _decode(log, run)


def _decode(log: Log, run: list[bytes]) -> RecordColumns:
    try:
        return decode_columns(b"".join(run))
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"{log.name}: {exc}") from exc


def _keys(columns: RecordColumns, index: np.ndarray) -> list[bytes]:
    data = columns.data
    return [
        bytes(data[p : p + n])
        for p, n in zip(
            columns.key_pos[index].tolist(), columns.key_len[index].tolist(), strict=True
        )
    ]


class _DirtyKeys:
    """Distinct keys of ``[FDO, FUO)``, and the passes the cleaner needs for them, replayed: a
    pass's map stops at the first keyed record met while it holds ``max_keys`` keys (spec 5.2:
    the fullness test comes before every put, an update of a mapped key included), and the next
    pass starts its empty map at that record. ``map_end`` is where the first pass stops."""

    def __init__(self, first_dirty: int, first_uncleanable: int, max_keys: int) -> None:
        self.start = first_dirty
        self.end = first_uncleanable
        self.max_keys = max_keys
        self.keys: set[bytes] = set()
        self.pass_keys: set[bytes] = set()  # the map of the pass being replayed
        self.pass_starts: list[int] = []  # offset of each pass's first keyed record

    @property
    def map_end(self) -> int:
        return self.pass_starts[1] if len(self.pass_starts) > 1 else self.end

    @property
    def passes(self) -> int:
        return len(self.pass_starts)

    def add(self, columns: RecordColumns) -> None:
        offsets = columns.offsets
        index = np.nonzero((offsets >= self.start) & (offsets < self.end) & (columns.key_len >= 0))[
            0
        ]
        if not len(index):
            return
        keys = _keys(columns, index)
        self.keys.update(keys)
        if not self.pass_starts:
            self.pass_starts.append(int(offsets[index[0]]))
        if len(self.pass_keys) + len(keys) <= self.max_keys:  # the run cannot fill the map
            self.pass_keys.update(keys)
            return
        for i, key in enumerate(keys):
            if len(self.pass_keys) >= self.max_keys:
                self.pass_starts.append(int(offsets[index[i]]))
                self.pass_keys = set()
            self.pass_keys.add(key)


def _dirty_keys(log: Log, first_dirty: int, first_uncleanable: int, max_keys: int) -> _DirtyKeys:
    found = _DirtyKeys(first_dirty, first_uncleanable, max_keys)
    for columns in _runs(log, first_dirty, first_uncleanable):
        found.add(columns)
    return found


def _next_map_end(log: Log, first_dirty: int, first_uncleanable: int, max_keys: int) -> int:
    """Where the next cleaning's map stops; the record count bounds the keys, so a dirty range
    with at most ``max_keys`` records needs no decoding."""
    if first_dirty >= first_uncleanable:
        return first_uncleanable
    records = sum(b.header.records_count for b in log.iter_batches(first_dirty, first_uncleanable))
    if records <= max_keys:
        return first_uncleanable
    return _dirty_keys(log, first_dirty, first_uncleanable, max_keys).map_end


# --------------------------------------------------------------------------------------------
# The range and the verdict of the selection


@dataclass
class _View:
    """A log with its candidate range at ``now``, eligibility and reasons."""

    log: Log
    now: int
    checkpoint: int | None
    candidate: LogToClean
    segments: list[LogSegment]
    state: str | None
    uncleanable: str | None
    min_lag_until_ms: int | None
    eligible: bool = False
    why_not: list[str] = field(default_factory=list)

    @property
    def fdo(self) -> int:
        return self.candidate.first_dirty_offset

    @property
    def fuo(self) -> int:
        return self.candidate.first_uncleanable_offset

    @property
    def min_lag(self) -> int:
        return max(self.log.config.min_compaction_lag_ms, 0)

    def segment_for(self, offset: int) -> LogSegment:
        bases = [s.base_offset for s in self.segments]
        return self.segments[max(bisect.bisect_right(bases, offset) - 1, 0)]

    def beyond(self, offset: int) -> tuple[str, int | None]:
        """Why ``offset`` (>= FUO) cannot be cleaned yet, and until when if time decides."""
        segment = self.segment_for(offset)
        if segment is self.segments[-1]:
            return (
                f"inside the active segment (base offset {segment.base_offset}), which is never "
                "cleaned until it rolls",
                None,
            )
        if offset >= self.log.high_watermark:
            return "above the high watermark", None
        if self.min_lag > 0:
            start = self.segments.index(self.segment_for(self.fuo))
            stop = self.segments.index(segment)
            until = max(
                s.largest_timestamp() + self.min_lag for s in self.segments[start : stop + 1]
            )
            if until > self.now:
                return f"inside min.compaction.lag.ms until {format_ms(until)}", until
        return f"beyond the first uncleanable offset {self.fuo}", None

    def next_cleaning(self) -> str:
        """Whether a cleaner iteration would clean this log now."""
        if self.eligible:
            return f"the log is eligible now ({self.eligible_because()})"
        return (
            f"no cleaner iteration picks the log yet ({'; '.join(self.why_not)}); "
            f"'compactlog clean {self.log.topic}' cleans it anyway"
        )

    def eligible_because(self) -> str:
        c = self.candidate
        minimum = self.log.config.min_cleanable_dirty_ratio
        if c.cleanable_ratio > minimum:
            return f"dirty ratio {c.cleanable_ratio:.3f} > min.cleanable.dirty.ratio {minimum}"
        return f"max.compaction.lag.ms expired {c.compaction_delay_ms} ms ago"


def _min_lag_until(log: Log, candidate: LogToClean, segments: list[LogSegment]) -> int | None:
    if candidate.uncleanable_reason != REASON_MIN_COMPACTION_LAG:
        return None
    bases = [s.base_offset for s in segments]
    i = bisect.bisect_right(bases, candidate.first_uncleanable_offset) - 1
    return segments[i].largest_timestamp() + max(log.config.min_compaction_lag_ms, 0)


def _why_not(view: _View) -> list[str]:
    log, c = view.log, view.candidate
    config = log.config
    if not config.compact:
        return ["cleanup.policy=delete: the cleaner only cleans compacted logs"]
    reasons = []
    if view.uncleanable is not None:
        reasons.append(f"marked uncleanable: {view.uncleanable}")
    if view.state is not None:
        reasons.append(f"cleaning state {view.state}")
    if c.cleanable_bytes == 0:
        reasons.append(f"nothing cleanable: {_nothing_cleanable(view)}")
    elif not is_eligible(c):
        reasons.append(
            f"dirty ratio {c.cleanable_ratio:.3f} <= min.cleanable.dirty.ratio "
            f"{config.min_cleanable_dirty_ratio}"
        )
    return reasons


def _nothing_cleanable(view: _View) -> str:
    log, c = view.log, view.candidate
    if log.size() == 0:
        return "the log is empty"
    if c.first_dirty_offset >= log.log_end_offset:
        return (
            f"nothing is dirty (the first dirty offset is the log end offset {log.log_end_offset})"
        )
    if c.uncleanable_reason == REASON_MIN_COMPACTION_LAG:
        until = view.min_lag_until_ms
        return (
            f"the dirty segments are inside min.compaction.lag.ms "
            f"({log.config.min_compaction_lag_ms} ms): segment {c.first_uncleanable_offset} has a "
            f"younger record" + ("" if until is None else f" until {format_ms(until)}")
        )
    if c.uncleanable_reason == REASON_HIGH_WATERMARK:
        return "the dirty records are above the high watermark"
    return (
        "the dirty records are all in the active segment (base offset "
        f"{log.active_segment.base_offset}), which is never cleaned; "
        + roll_hint(log.topic, log.partition, log.config.segment_ms, log.config.segment_bytes)
    )


def roll_hint(topic: str, partition: int, segment_ms: int, segment_bytes: int) -> str:
    """How to make records in the active segment cleanable."""
    return (
        f"to make them cleanable, roll it ('compactlog roll {topic} -p {partition}'; add "
        "--admin-url while a broker runs) or let the log roll by itself: by time "
        f"(segment.ms, now {segment_ms}) or by size (segment.bytes, now {segment_bytes})"
    )


def _view(source: _Source, topic: str, partition: int, now: int) -> _View:
    tp = (topic, partition)
    log = source.log(topic, partition)
    checkpoint = source.checkpoint(tp)
    candidate = log_to_clean(tp, log, checkpoint, now)
    segments = log.segments()
    view = _View(
        log=log,
        now=now,
        checkpoint=checkpoint,
        candidate=candidate,
        segments=segments,
        state=source.state(tp),
        uncleanable=source.uncleanable(tp),
        min_lag_until_ms=_min_lag_until(log, candidate, segments),
    )
    view.why_not = _why_not(view)
    view.eligible = not view.why_not
    return view


def next_cleaning_range(
    cleaner: LogCleaner | ReadOnlyDataDir, topic: str, partition: int, now: int | None = None
) -> LogToClean:
    """The range and byte counts the next cleaning of this partition at ``now`` would use.

    Read-only: unlike the selection, a checkpoint outside the log is not rewritten.
    """
    source = _Source(cleaner)
    now = source.clock() if now is None else now
    checkpoint = source.checkpoint((topic, partition))
    return log_to_clean((topic, partition), source.log(topic, partition), checkpoint, now)


# --------------------------------------------------------------------------------------------
# cleaner-status


def cleaner_status(
    cleaner: LogCleaner | ReadOnlyDataDir, topic: str | None = None, now: int | None = None
) -> list[PartitionStatus]:
    """Every partition of ``topic`` (or of every topic) as the next cleaner iteration sees it:
    of a live cleaner (with its states and uncleanable marks), or of the files alone."""
    source = _Source(cleaner)
    now = source.clock() if now is None else now
    max_keys = keys_per_pass(source.broker)
    topics = [topic] if topic is not None else source.topics()
    statuses = []
    for name in topics:
        for partition in range(source.partitions(name)):
            statuses.append(_status(_view(source, name, partition, now), max_keys))
    return statuses


def _policy(log: Log) -> str:
    config = log.config
    return ",".join(p for p, on in (("compact", config.compact), ("delete", config.delete)) if on)


def _status(view: _View, max_keys: int) -> PartitionStatus:
    log, c = view.log, view.candidate
    dirty = _DirtyKeys(c.first_dirty_offset, c.first_uncleanable_offset, max_keys)
    tombstones: list[TombstoneStatus] = []
    if log.config.compact:
        tombstones = _scan(view, dirty)
    return PartitionStatus(
        topic=log.topic,
        partition=log.partition,
        now=view.now,
        cleanup_policy=_policy(log),
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        active_segment_base_offset=view.segments[-1].base_offset,
        checkpoint=view.checkpoint,
        first_dirty_offset=c.first_dirty_offset,
        first_uncleanable_offset=c.first_uncleanable_offset,
        bounded_by=c.uncleanable_reason,
        min_lag_until_ms=view.min_lag_until_ms,
        clean_bytes=c.clean_bytes,
        cleanable_bytes=c.cleanable_bytes,
        total_bytes=c.total_bytes,
        dirty_ratio=c.cleanable_ratio,
        min_cleanable_dirty_ratio=log.config.min_cleanable_dirty_ratio,
        eligible=view.eligible,
        why_not=view.why_not,
        needs_compaction_now=c.needs_compaction_now,
        compaction_delay_ms=c.compaction_delay_ms,
        cleaning_state=view.state,
        uncleanable=view.uncleanable,
        dirty_keys=len(dirty.keys),
        keys_per_pass=max_keys,
        passes_needed=dirty.passes,
        next_map_end_offset=dirty.map_end,
        tombstones=tombstones,
    )


def _scan(view: _View, dirty: _DirtyKeys) -> list[TombstoneStatus]:
    """One read of the whole log: the tombstones (and what supersedes them) and the dirty keys."""
    log, now = view.log, view.now
    found: list[TombstoneStatus] = []
    pending: dict[bytes, int] = {}  # key -> index in found of its latest tombstone so far
    for columns in _runs(log, log.log_start_offset):
        dirty.add(columns)
        keyed = columns.key_len >= 0
        tombstone = keyed & (columns.value_len < 0)
        if not pending and not tombstone.any():
            continue
        # Only records whose key length matches a tombstone's can supersede one; they are
        # walked in offset order, so each supersedes the tombstone of its key before it.
        lengths = np.union1d(
            np.fromiter({len(k) for k in pending}, np.int64), columns.key_len[tombstone]
        )
        index = np.nonzero(keyed & np.isin(columns.key_len, lengths))[0]
        for i, key in zip(index.tolist(), _keys(columns, index), strict=True):
            offset = int(columns.offsets[i])
            at = pending.pop(key, None)
            if at is not None:
                found[at] = dataclasses.replace(found[at], superseded_by=offset)
            if columns.value_len[i] < 0:
                horizon = columns.batch_headers[int(columns.batch_index[i])].delete_horizon_ms
                pending[key] = len(found)
                found.append(
                    TombstoneStatus(
                        offset=offset,
                        key=key,
                        timestamp=int(columns.timestamps[i]),
                        segment_base_offset=view.segment_for(offset).base_offset,
                        delete_horizon_ms=horizon,
                        horizon_passed=horizon is not None and now >= horizon,
                        superseded_by=None,
                    )
                )
    return found


# --------------------------------------------------------------------------------------------
# explain


@dataclass(frozen=True)
class _Stored:
    offset: int
    timestamp: int
    value: bytes | None
    horizon: int | None


def _records_of(log: Log, key: bytes) -> list[_Stored]:
    wanted = np.frombuffer(key, np.uint8)
    found = []
    for columns in _runs(log, log.log_start_offset):
        index = np.nonzero(columns.key_len == len(key))[0]
        if len(key) and len(index):
            data = np.frombuffer(columns.data, np.uint8)
            window = columns.key_pos[index][:, None] + np.arange(len(key))
            index = index[(data[window] == wanted).all(axis=1)]
        for i in index.tolist():
            value_len = int(columns.value_len[i])
            pos = int(columns.value_pos[i])
            found.append(
                _Stored(
                    offset=int(columns.offsets[i]),
                    timestamp=int(columns.timestamps[i]),
                    value=None if value_len < 0 else bytes(columns.data[pos : pos + value_len]),
                    horizon=columns.batch_headers[int(columns.batch_index[i])].delete_horizon_ms,
                )
            )
    return found


def explain_key(
    cleaner: LogCleaner | ReadOnlyDataDir,
    topic: str,
    key: bytes,
    partition: int | None = None,
    now: int | None = None,
) -> list[KeyRecordExplanation]:
    """Every stored record of ``key`` in ``partition`` (default: the one Kafka's partitioner
    picks for the key), oldest first, each with what keeps it in the log and when it goes."""
    source = _Source(cleaner)
    now = source.clock() if now is None else now
    if partition is None:
        partition = partition_for_key(key, source.partitions(topic))
    view = _view(source, topic, partition, now)
    stored = _records_of(view.log, key)
    if not stored:
        return []
    map_end = (
        _next_map_end(view.log, view.fdo, view.fuo, keys_per_pass(source.broker))
        if view.log.config.compact
        else view.fuo
    )
    explained = []
    for i, record in enumerate(stored):
        later = [r.offset for r in stored[i + 1 :]]
        verdict, after, reason = _explain(view, record, later, map_end)
        segment = view.segment_for(record.offset)
        explained.append(
            KeyRecordExplanation(
                topic=topic,
                partition=partition,
                offset=record.offset,
                timestamp=record.timestamp,
                key=key,
                value=record.value,
                segment_base_offset=segment.base_offset,
                in_active_segment=segment is view.segments[-1],
                delete_horizon_ms=record.horizon,
                verdict=verdict,
                superseded_by=later[0] if later else None,
                removable_after_ms=after,
                reason=reason,
            )
        )
    return explained


def _explain(
    view: _View, record: _Stored, later: list[int], map_end: int
) -> tuple[str, int | None, str]:
    config = view.log.config
    if not config.compact:
        return (
            VERDICT_NOT_COMPACTED,
            None,
            "cleanup.policy=delete: the cleaner never removes records of this log; retention "
            "deletes it with its segment",
        )
    if not later:
        if record.value is not None:
            note = (
                "; retention may still delete its segment (cleanup.policy=compact,delete)"
                if config.delete
                else ""
            )
            return (
                VERDICT_LATEST,
                None,
                f"latest value: cleaning keeps the newest record of a key{note}",
            )
        return _tombstone(view, record, map_end, "")
    superseded = f"superseded by offset {later[0]}"
    mapped = [o for o in later if view.fdo <= o < map_end]
    if mapped:
        return (
            VERDICT_REMOVABLE,
            None,
            f"removable now: {superseded}; the next cleaning drops it (its map of the dirty "
            f"section [{view.fdo}, {map_end}) holds offset {mapped[-1]} of this key); "
            f"{view.next_cleaning()}",
        )
    in_range = [o for o in later if view.fdo <= o < view.fuo]
    if in_range:
        text = (
            f"{superseded}, but the next cleaning's map ends at offset {map_end} (the dirty keys "
            f"need more than one pass of the dedupe buffer; first dirty offset {view.fdo}, "
            f"first uncleanable {view.fuo}): a later pass whose map reaches offset "
            f"{in_range[0]} removes it"
        )
        after = None
    else:
        beyond = [o for o in later if o >= view.fuo]
        if beyond:
            why, after = view.beyond(beyond[0])
            text = (
                f"{superseded}, but beyond the first uncleanable offset {view.fuo}: offset "
                f"{beyond[0]} is {why}; removable at the first cleaning whose map reaches it "
                f"(the first dirty offset is {view.fdo})"
            )
        else:
            text = (
                f"{superseded}, in the clean section (below the first dirty offset {view.fdo}): "
                "the cleaner maps only the dirty section, so it stays until a later record of "
                "the key is appended and cleaned"
            )
            after = None
    if record.value is None:
        verdict, t_after, t_reason = _tombstone(view, record, map_end, text + "; as a tombstone: ")
        if verdict == VERDICT_REMOVABLE or (
            t_after is not None and (after is None or t_after < after)
        ):
            return verdict, t_after, t_reason
    return VERDICT_WAITING, after, text


def _tombstone(
    view: _View, record: _Stored, map_end: int, prefix: str
) -> tuple[str, int | None, str]:
    """A tombstone that no mapped later record removes: the delete horizon decides."""
    retention = view.log.config.delete_retention_ms
    segment = view.segment_for(record.offset)
    rewritten = segment.base_offset < map_end and view.fdo < view.fuo
    horizon = record.horizon
    if horizon is not None:
        if view.now >= horizon:
            if view.fdo >= view.fuo:
                when = (
                    "but a cleaning runs only when the log has dirty data, and nothing is "
                    f"cleanable now ([{view.fdo}, {view.fuo}) is empty)"
                )
            else:
                when = view.next_cleaning()
            return (
                VERDICT_REMOVABLE,
                horizon,
                f"{prefix}removable now: tombstone past its delete horizon {format_ms(horizon)}; "
                f"the next cleaning drops it; {when}",
            )
        return (
            VERDICT_WAITING,
            horizon,
            f"{prefix}tombstone: kept until its delete horizon {format_ms(horizon)} (set by the "
            f"cleaning at {format_ms(horizon - retention)}, delete.retention.ms={retention}); "
            "removable at the first cleaning after that",
        )
    stamp = view.now + retention
    if rewritten:
        return (
            VERDICT_WAITING,
            stamp,
            f"{prefix}tombstone not yet stamped: the next cleaning stamps its delete horizon "
            f"now + delete.retention.ms = {format_ms(stamp)}, and the first cleaning after that "
            f"removes it; {view.next_cleaning()}",
        )
    if record.offset >= view.fuo:
        why, _ = view.beyond(record.offset)
        where = f"it is {why}"
    else:
        where = f"the next cleaning's map ends at offset {map_end}"
    return (
        VERDICT_WAITING,
        None,
        f"{prefix}tombstone not yet stamped, and the next cleaning does not reach it ({where}): "
        "the first cleaning that rewrites its batch stamps its delete horizon (that cleaning's "
        "time + delete.retention.ms)",
    )
