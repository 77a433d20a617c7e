"""Opening a partition directory and recovering it (Kafka's ``LogLoader``, spec 1.5).

Theory of operation, in the order the steps run:

1. **Temporaries.** Files ending in ``.deleted`` are removed. ``.cleaned`` files are collected
   (remembering the smallest offset among them) and so are ``.swap`` files. A ``.swap`` whose
   offset is >= the smallest ``.cleaned`` offset belongs to a swap that never finished its
   ``.cleaned`` -> ``.swap`` renames and is removed; then every ``.cleaned`` file is removed.
2. **Finishing swaps.** The remaining ``.swap`` log files cover an offset range
   ``[min base, max next offset)``; every regular file whose name offset falls in that range is
   an original the swap replaces and is removed, then the ``.swap`` suffix is dropped. A crash at
   any point of the cleaner's swap therefore ends either before it (originals kept) or after it
   (the cleaned segments kept), never with both or neither. Beyond Kafka, a ``<base>.swaprange``
   file written before the swap widens that range to the whole group it replaces, so originals
   whose records were all compacted away (beyond the new segment's last offset) go too.
3. **Segments.** Index files without a ``.log`` are orphans and removed. Each ``.log`` is opened
   and checked cheaply: its indexes (:meth:`OffsetIndex.check`/:meth:`TimeIndex.check`: a
   length that is not whole entries, entries out of order or past the log; the last entries
   must point at real batches) and its tail (the batches after the last index entry must end
   exactly at the file's end). Kafka only rebuilds missing indexes here and trusts the rest
   after a clean shutdown. A segment that fails a check is re-read whole
   (:meth:`LogSegment.rebuild_indexes`) and its indexes rebuilt over its valid batches. Damage
   found that way is never cut from a sealed segment after a clean shutdown: the bytes stay
   where they are, readers that reach them get an error naming the file and position, the
   cleaner leaves the partition alone, and the WARN says to run ``compactlog salvage``. The
   active segment's damaged tail is quarantined and cut (appends must not land behind
   garbage). A tail of zeros is cut without a copy only in a pre-allocated segment
   (``preallocate=true``), where it is unused space; elsewhere zeros replaced written bytes
   and are quarantined like any damage, so that the offsets they held are reported.
4. **Recovery** after an unclean stop (no ``.kafka_cleanshutdown`` marker): from the segment
   holding the recovery point to the end, every batch is re-checked (framing, CRC, offsets).
   Kafka truncates at the first invalid batch and deletes every later segment, because a
   replica re-fetches them; a single node has no replica, so compactlog *salvages*: each damaged
   range is first copied to a quarantine file (:mod:`.quarantine`, fsynced), then cut, and every
   valid batch after it, in that segment and in the later ones, is kept with its offsets (an
   offset gap remains, as after compaction).
5. **Offsets.** If the data ends below the checkpointed log start offset, every segment goes (the
   data was lost, and the producer snapshots with it); a log with no segment gets an empty one at
   the log start offset. The log start offset is ``max(checkpoint, first segment base)``; the
   recovery point is the LEO after a clean stop, else ``min(checkpoint, LEO)``.
6. **Producer state** (:func:`compactlog.storage.producer_state.rebuild_producer_state`):
   snapshots that belong to no segment are removed (except the newest, when it lies above every
   segment: a clean close wrote it at the log end), then the state is read from the latest
   snapshot in ``(log start offset, LEO]`` (a corrupt one is deleted and the next older one
   tried) and the batches after it are replayed. Recovery has already cut the log at its last
   valid batch, so a snapshot beyond the recovered end is dropped and a crash at any point gives
   the state a clean run over the surviving batches would have.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from compactlog.errors import CompactlogError, CorruptIndexError
from compactlog.storage.config import LogConfig
from compactlog.storage.fs import FileSystem
from compactlog.storage.local_log import LocalLog, segment_settings
from compactlog.storage.log import DEFAULT_PRODUCER_ID_EXPIRATION_MS, Log
from compactlog.storage.producer_state import ProducerStateManager, rebuild_producer_state
from compactlog.storage.quarantine import QuarantinedRange, quarantine_range
from compactlog.storage.salvage import DamagedRange, salvage_walk
from compactlog.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SALVAGED_SUFFIX,
    SNAPSHOT_SUFFIX,
    SWAP_RANGE_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    SegmentSettings,
    draw_roll_jitter,
    offset_from_filename,
)

logger = logging.getLogger("compactlog.storage.loader")

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


@dataclass
class LoadStats:
    """What loading did, for logs, tests and the recovery counter of R6."""

    segments_loaded: int = 0
    segments_recovered: int = 0
    bytes_truncated: int = 0
    segments_deleted: int = 0
    indexes_rebuilt: int = 0
    temporaries_removed: int = 0
    swaps_completed: int = 0
    messages: list[str] = field(default_factory=list)
    #: Damaged ranges copied to quarantine files (and then cut from their segment).
    quarantined: list[QuarantinedRange] = field(default_factory=list)
    #: Damaged ranges left in place in sealed segments after a clean shutdown: (file, range).
    damaged_in_place: list[tuple[str, DamagedRange]] = field(default_factory=list)


def _starts_with_offset(name: str) -> bool:
    head = name.split(".", 1)[0]
    return len(head) == 20 and head.isdigit()


def _remove_temporaries_and_complete_swaps(
    fs: FileSystem, directory: str, stats: LoadStats
) -> None:
    names = fs.listdir(directory)
    cleaned: list[str] = []
    swaps: list[str] = []
    ranges: dict[int, int] = {}  # swap base offset -> end of the range it replaces
    for name in names:
        path = os.path.join(directory, name)
        if not _starts_with_offset(name):
            continue
        if name.endswith(SWAP_RANGE_SUFFIX + ".tmp"):
            fs.remove(path)  # a range file whose atomic write never finished
            continue
        if name.endswith(SWAP_RANGE_SUFFIX):
            # Written atomically, so it is whole or absent; garbage is ignored.
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                ranges[offset_from_filename(name)] = int(fs.read_file(path).decode().strip())
            fs.remove(path)
            continue
        if name.endswith((DELETED_SUFFIX, SALVAGED_SUFFIX)):
            fs.remove(path)
            stats.temporaries_removed += 1
        elif name.endswith(CLEANED_SUFFIX):
            cleaned.append(name)
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(name)
    min_cleaned = min((offset_from_filename(n) for n in cleaned), default=2**63 - 1)
    valid_swaps: list[str] = []
    for name in swaps:
        if offset_from_filename(name) >= min_cleaned:
            fs.remove(os.path.join(directory, name))
            stats.temporaries_removed += 1
        else:
            valid_swaps.append(name)
    for name in cleaned:
        fs.remove(os.path.join(directory, name))
        stats.temporaries_removed += 1
    if not valid_swaps:
        return
    # The range the valid swap segments replace.
    min_swap, max_swap = 2**63 - 1, -1
    for name in valid_swaps:
        if not name[: -len(SWAP_SUFFIX)].endswith(LOG_SUFFIX):
            continue
        base = offset_from_filename(name)
        segment = LogSegment(
            fs,
            directory,
            base,
            _SWAP_SETTINGS,
            now_ms=0,
            suffix=SWAP_SUFFIX,
            create=False,
        )
        try:
            segment.load_indexes()
            next_offset = _next_offset_by_scan(segment)
        finally:
            segment.close_handles()
        min_swap = min(min_swap, base)
        max_swap = max(max_swap, next_offset, ranges.get(base, -1))
    for name in fs.listdir(directory):
        if not _starts_with_offset(name) or name.endswith(SWAP_SUFFIX):
            continue
        if min_swap <= offset_from_filename(name) < max_swap:
            fs.remove(os.path.join(directory, name))
    for name in valid_swaps:
        fs.rename(os.path.join(directory, name), os.path.join(directory, name[: -len(SWAP_SUFFIX)]))
        stats.swaps_completed += 1
    fs.sync_dir(directory)


def _next_offset_by_scan(segment: LogSegment) -> int:
    next_offset = segment.base_offset
    try:
        for batch in segment.batches():
            next_offset = batch.header.next_offset
    except CompactlogError:
        pass
    return next_offset


# Settings to open a .swap segment read-only while finishing a swap (nothing is appended).
_SWAP_SETTINGS = SegmentSettings(
    index_interval_bytes=4096,
    segment_index_bytes=10485760,
    preallocate=False,
    segment_bytes=2**31 - 1,
)


def _open_segments(
    fs: FileSystem,
    directory: str,
    config: LogConfig,
    now_ms: int,
    rng: random.Random,
    stats: LoadStats,
    recover_from: int | None,
) -> list[LogSegment]:
    """Open every segment; check the indexes of those that recovery will not re-read anyway.

    ``recover_from`` is the recovery point after an unclean stop (None after a clean one): the
    segment holding it and all later ones are rebuilt by recovery, so checking them here would
    only report their untrimmed, pre-allocated indexes as damage.
    """
    names = fs.listdir(directory)
    logs = {
        offset_from_filename(n) for n in names if _starts_with_offset(n) and n.endswith(LOG_SUFFIX)
    }
    for name in names:
        if _starts_with_offset(name) and name.endswith(_INDEX_SUFFIXES):
            if offset_from_filename(name) not in logs:
                logger.info("removing orphaned index file %s", os.path.join(directory, name))
                fs.remove(os.path.join(directory, name))
                stats.temporaries_removed += 1
        elif _starts_with_offset(name) and name.endswith(SNAPSHOT_SUFFIX):
            continue
    settings = segment_settings(config)
    segments: list[LogSegment] = []
    bases = sorted(logs)
    first_recovered = 2**63 - 1
    if recover_from is not None and bases:
        first_recovered = max((b for b in bases if b <= recover_from), default=bases[0])
    for i, base in enumerate(bases):
        end_offset = bases[i + 1] if i + 1 < len(bases) else None
        prefix = os.path.join(directory, f"{base:020d}")
        index_missing = not fs.exists(prefix + INDEX_SUFFIX)
        jitter = draw_roll_jitter(config.segment_jitter_ms, config.segment_ms, rng)
        segment = LogSegment(
            fs, directory, base, settings, now_ms=now_ms, roll_jitter_ms=jitter, create=False
        )
        segments.append(segment)
        stats.segments_loaded += 1
        segment.load_indexes()
        if base >= first_recovered:
            continue  # recovery re-reads it whole
        problem = (
            "the offset index is missing" if index_missing else _cheap_check(segment, end_offset)
        )
        if problem is None:
            continue
        logger.warning("%s: rebuilding the indexes from the log: %s", segment.log_path, problem)
        stats.messages.append(f"{segment.log_path}: {problem}")
        stats.indexes_rebuilt += 1
        damaged = segment.rebuild_indexes(end_offset)
        if not damaged:
            continue
        if base == bases[-1]:
            # The active segment: appends must not land behind damage at its tail.
            tail = [d for d in damaged if d.tail]
            _quarantine_and_cut(segment, tail, now_ms, stats, end_offset)
            damaged = [d for d in damaged if not d.tail]
        elif settings.preallocate:
            zeros = [d for d in damaged if d.tail and d.zeros]
            _quarantine_and_cut(segment, zeros, now_ms, stats, end_offset)
            damaged = [d for d in damaged if not (d.tail and d.zeros)]
        for d in damaged:
            stats.damaged_in_place.append((segment.log_path, d))
            logger.warning(
                "%s: bytes %d..%d are damaged (%s; offsets from %d%s); they are kept in place "
                "after this clean shutdown: reads that reach them fail, the cleaner skips this "
                "partition, and `compactlog salvage` moves them to quarantine and keeps every "
                "valid batch",
                segment.log_path,
                d.start,
                d.end,
                d.reason,
                d.first_offset,
                "" if d.next_valid_offset is None else f" to {d.next_valid_offset - 1}",
            )
    return segments


def _cheap_check(segment: LogSegment, end_offset: int | None) -> str | None:
    """What is wrong with a segment, as far as its indexes and its tail show (None: nothing)."""
    try:
        segment.offset_index.check(segment.size)
        segment.time_index.check(2**63 - 1)
        _check_last_index_entry(segment)
    except CorruptIndexError as exc:
        return str(exc)
    return _tail_problem(segment, end_offset)


def _tail_problem(segment: LogSegment, end_offset: int | None) -> str | None:
    """The batches after the last offset-index entry (a few KiB) must be valid (framing, CRC,
    offsets) and end exactly at the file's end."""
    last_indexed, _ = segment.offset_index.last_entry()
    position = segment.indexed_position(last_indexed)
    for item in salvage_walk(
        segment.log, segment.base_offset, position, segment.log.size(), end_offset=end_offset
    ):
        if isinstance(item, DamagedRange):
            return f"the tail is damaged at position {item.start}: {item.reason}"
    return None


def _quarantine_and_cut(
    segment: LogSegment,
    damaged: list[DamagedRange],
    now_ms: int,
    stats: LoadStats,
    end_offset: int | None = None,
) -> None:
    """Copy every damaged range that holds written bytes to quarantine, then cut them all."""
    if not damaged:
        return
    for d in damaged:
        if d.zeros and d.tail and segment.settings.preallocate:
            logger.info(
                "%s: dropping %d zero bytes at %d..%d (pre-allocated or never written)",
                segment.log_path,
                d.size,
                d.start,
                d.end,
            )
            continue
        kept = quarantine_range(segment.fs, segment.log, segment.log_path, d, now_ms)
        stats.quarantined.append(kept)
        logger.warning(
            "%s: bytes %d..%d are damaged (%s); offsets %s; copied to %s and cut from the "
            "segment; every valid batch after them is kept",
            segment.log_path,
            d.start,
            d.end,
            d.reason,
            kept.offsets,
            kept.path,
        )
    cut = segment.cut_damage(damaged, end_offset)
    stats.bytes_truncated += cut
    stats.messages.append(f"cut {cut} damaged bytes from {segment.log_path}")


def _check_last_index_entry(segment: LogSegment) -> None:
    """The last entries must be real.

    Kafka keys an append's entry by its largest offset at the position where the append
    starts. That offset is a batch's last offset, or, in a segment the cleaner wrote, the
    largest kept record offset of a rebuilt batch (inside that batch's range). So the batch at
    the entry's position must start at or before the entry's offset, and some batch from there
    on must hold the offset within its [base, last] range. For the time index, the batch ending
    at the entry's offset must carry the entry's timestamp as its max timestamp.
    """
    _check_last_time_entry(segment)
    if segment.offset_index.entries() == 0:
        return
    offset, position = segment.offset_index.last_entry()
    try:
        for batch in segment.batches(position):
            header = batch.header
            if header.base_offset > offset:
                break
            if header.last_offset >= offset:
                return
    except CompactlogError as exc:
        raise CorruptIndexError(
            f"{segment.offset_index.path}: last entry unreadable: {exc}"
        ) from exc
    raise CorruptIndexError(
        f"{segment.offset_index.path}: last entry ({offset}, {position}) does not point at the "
        f"start of an append holding offset {offset}"
    )


def _check_last_time_entry(segment: LogSegment) -> None:
    if segment.time_index.entries() == 0:
        return
    timestamp, offset = segment.time_index.last_entry()
    try:
        batch = segment.translate_offset(offset)
    except CompactlogError as exc:
        raise CorruptIndexError(f"{segment.time_index.path}: last entry unreadable: {exc}") from exc
    if (
        batch is None
        or batch.header.last_offset != offset
        or batch.header.max_timestamp != timestamp
    ):
        raise CorruptIndexError(
            f"{segment.time_index.path}: last entry ({timestamp}, {offset}) does not match a batch"
        )


def load_log(
    fs: FileSystem,
    directory: str,
    topic: str,
    partition: int,
    config: LogConfig,
    clock: Callable[[], int],
    *,
    had_clean_shutdown: bool,
    recovery_point: int | None,
    log_start_offset: int | None,
    rng: random.Random | None = None,
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
) -> tuple[Log, LoadStats]:
    """Open (creating if needed) and recover the log in ``directory``; ``clock`` also decides
    which producers of a snapshot have expired."""
    rng = rng or random.Random()
    stats = LoadStats()
    fs.makedirs(directory)
    now = clock()
    _remove_temporaries_and_complete_swaps(fs, directory, stats)
    recovery = 0 if recovery_point is None else recovery_point
    segments = _open_segments(
        fs, directory, config, now, rng, stats, None if had_clean_shutdown else recovery
    )
    opened = segments
    try:
        if segments and not had_clean_shutdown:
            _recover_unflushed(segments, recovery, now, stats)

        data_lost = (
            bool(segments)
            and log_start_offset is not None
            and segments[-1].read_next_offset() < log_start_offset
        )
        producer_state = ProducerStateManager(
            fs,
            directory,
            f"{topic}-{partition}",
            producer_id_expiration_ms=producer_id_expiration_ms,
        )
        if data_lost:
            logger.warning(
                "%s: data ends below the checkpointed log start offset %s; deleting all segments",
                directory,
                log_start_offset,
            )
            for segment in segments:
                segment.delete_files()
                stats.segments_deleted += 1
            segments = []
            producer_state.load_snapshots()
            producer_state.truncate_fully_and_start_at(log_start_offset or 0)
        if not segments:
            base = log_start_offset or 0
            jitter = draw_roll_jitter(config.segment_jitter_ms, config.segment_ms, rng)
            segments = [
                LogSegment(
                    fs, directory, base, segment_settings(config), now_ms=now, roll_jitter_ms=jitter
                )
            ]
        next_offset = segments[-1].read_next_offset()
        start = max(log_start_offset or 0, segments[0].base_offset)
        start = min(start, next_offset)
        recovered_point = next_offset if had_clean_shutdown else min(recovery, next_offset)
        producer_state.remove_stray_snapshots(s.base_offset for s in segments)
        rebuild_producer_state(
            producer_state,
            segments,
            start,
            next_offset,
            now,
            reload_from_clean_shutdown=had_clean_shutdown,
        )
        for segment in segments[:-1]:
            segment.on_become_inactive()
            segment.release_index_handles()
        segments[-1].make_active()
        local_log = LocalLog(
            fs,
            directory,
            topic,
            partition,
            config,
            clock,
            segments,
            recovery_point=recovered_point,
            rng=rng,
        )
        log = Log(local_log, log_start_offset=start, producer_state=producer_state)
        return log, stats
    except BaseException:
        for segment in opened:  # a failed load leaves no file open
            segment.close_handles()
        raise


def _recover_unflushed(
    segments: list[LogSegment], recovery_point: int, now_ms: int, stats: LoadStats
) -> None:
    start = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= recovery_point:
            start = i
    for i in range(start, len(segments)):
        segment = segments[i]
        end_offset = segments[i + 1].base_offset if i + 1 < len(segments) else None
        stats.segments_recovered += 1
        damaged = segment.rebuild_indexes(end_offset)
        _quarantine_and_cut(segment, damaged, now_ms, stats, end_offset)
