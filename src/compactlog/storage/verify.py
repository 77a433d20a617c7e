"""Read-only verification of a data directory: a ``verify`` that checks everything a reader
relies on.

Nothing here writes, renames or locks: files are opened ``O_RDONLY`` and no
:class:`~compactlog.storage.store.Store` is opened (opening one recovers, which writes). A damaged
data directory is reported as it is on disk, which is what a user needs before deciding whether to
let the loader repair it.

Theory of operation of :func:`verify_data_dir`:

* **Data directory.** ``compactlog-topics.json`` must parse (a damaged one makes the store refuse
  to open); the offset checkpoints must follow Kafka's text format; every partition of every
  topic must have its directory. Directories and files that are not ours are *notes*, never
  problems: the store ignores them too. A Kafka log directory's own files (``meta.properties``,
  ``bootstrap.checkpoint``, ``replication-offset-checkpoint``) pass without a note, and its KRaft
  metadata log ``__cluster_metadata-0`` is not a topic: it is only read, for the catalog the
  store would adopt without ``compactlog-topics.json`` (unreadable, it is a problem, since the
  store then refuses to open), and gets one note.
* **Segments** (``<20 digits>.log``), walked batch by batch with Kafka's framing rules (spec
  1.6). A length field below 14, a magic other than 2 or a batchLength below 49 stops the walk
  (*framing*); bytes after the last complete batch are a *torn tail*; a batch whose CRC-32C does
  not match is *corrupt* and the walk goes on from its end, since its length still frames it.
  Offsets must increase strictly from batch to batch and from segment to segment, every batch
  must lie in its segment's relative-offset range ``[base, base + 2^31 - 1]`` and below the next
  segment's base offset, and partition leader epochs (outside the CRC) must not decrease.
* **Offset index** (``.index``): a whole number of 8-byte entries, offsets and positions strictly
  increasing, no entry at position 0 (Kafka never indexes the first append of a segment, so such
  an entry is zero-filled or pre-allocated space), every position a batch boundary, and every
  offset the last offset of a batch between its position and the next entry's (an append of
  several batches is indexed by its largest offset at its first batch, spec 2.7).
* **Time index** (``.timeindex``): a whole number of 12-byte entries, timestamps strictly
  increasing, offsets not decreasing, and each entry ``(T, O)`` naming a batch of the segment
  whose last offset is ``O`` and whose max timestamp is ``T`` (spec 2.8).
* **Offsets against checkpoints**: a checkpointed log start offset or recovery point above the
  log end offset means data that was acknowledged is gone; after a clean shutdown the recovery
  point equals the log end offset exactly, which also catches a changed base offset in the last
  batch (a field the CRC does not cover).

Missing index files and orphaned ones (no ``.log``) are problems as well: the loader rebuilds or
removes them, but until then the directory is not what a clean shutdown leaves. One exception:
without the clean-shutdown marker, the last segment of a partition is the one a crashed writer
(compactlog or Kafka) had active, and its pre-allocated index space is a note (the loader
rebuilds that segment's indexes anyway), as long as the entries before it pass every check.
While a process holds the directory's lock (a running broker: read from ``/proc/locks``, without
taking the lock), the last segment of every partition is its active segment, whose index space
is pre-allocated as Kafka does (``segment.index.bytes``): its zero tail is expected, covered by
one note for the directory, and the missing clean-shutdown marker is no news. The broker may
also be appending, rolling or cleaning while the files are read (seen under load: a time index
caught while being sized, 1 look in 20), so a live partition with problems is looked at again,
up to ``LIVE_ATTEMPTS`` times in 0.75 s, and reported as the first clean look or the last one.
A look that found a listed file gone (the cleaner swapped or retention deleted a segment while
it was read) does not count against those; after ``REPLACED_LOOKS`` looks the vanished files are
a note ("replaced while being read"), not a problem.

The segment and index checks live in :mod:`compactlog.storage._segment_checks`, where
``dump-log`` uses them too; the read-only file access and the batch walk in
:mod:`compactlog.storage._file_checks`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Final

from compactlog.errors import CompactlogError, MalformedCheckpointError, StorageError
from compactlog.storage._file_checks import (
    _OFFSET_ENTRY,
    _SEGMENT_FILE,
    _STATE_SUFFIXES,
    _TIME_ENTRY,
    CHECKPOINT_FILES,
    LIVE_ATTEMPTS,
    TXN_ENTRY_SIZE,
    _read_index_entries,
    _ReadOnlyFile,
    live_retry_delay,
    lock_holder,
)
from compactlog.storage._segment_checks import (
    NO_EPOCH,
    Problem,
    _check_offset_index,
    _check_time_index,
    _scan_segment,
    _SegmentScan,
)
from compactlog.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    parse_checkpoint,
)
from compactlog.storage.config import BrokerConfig, LogConfig
from compactlog.storage.datadir import CLEAN_SHUTDOWN_FILE, LOCK_FILE
from compactlog.storage.fs import OsFileSystem, ReadOnlyFileSystem
from compactlog.storage.kraft_metadata import (
    META_PROPERTIES,
    METADATA_DIR,
    KraftMetadata,
    has_metadata_log,
    read_kraft_metadata,
)
from compactlog.storage.producer_snapshot import decode_snapshot
from compactlog.storage.quarantine import is_quarantine_file, list_quarantined
from compactlog.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
)
from compactlog.storage.topic_catalog import (
    PARTITION_CATALOG_FILE,
    PARTITION_METADATA_FILE,
    TOPICS_FILE,
    is_kafka_log_dir,
    read_topics_file,
)
from compactlog.storage.topic_names import parse_partition_dir_name, parse_special_dir_name

_KNOWN_PARTITION_FILES: Final = frozenset(
    {PARTITION_METADATA_FILE, PARTITION_CATALOG_FILE, "leader-epoch-checkpoint"}
)
#: Files of a Kafka log directory's root that the store leaves alone (and so does verify).
_KAFKA_ROOT_FILES: Final = frozenset({META_PROPERTIES, "bootstrap.checkpoint"})
#: What the broker keeps beside the store (compactlog.broker.node_state and
#: compactlog.broker.security.scram name them): known, not foreign.
_BROKER_ROOT_FILES: Final = frozenset(
    {"compactlog-producer-ids.json", "compactlog-scram-credentials.json"}
)
#: The broker's ACLs (:mod:`compactlog.broker.acl_store`): named here so that the scan of a data
#: directory knows the file (the broker sits above storage and cannot be asked).
ACLS_FILE: Final = "compactlog-acls.json"


@dataclass
class VerifyReport:
    """What :func:`verify_data_dir` found. ``problems`` make a data directory fail; ``notes``
    (foreign files, leftovers the loader cleans up) do not."""

    data_dir: str
    problems: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    bytes: int = 0
    #: Damaged byte ranges kept in quarantine files (notes: the log itself is whole).
    quarantined: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        verdict = "OK" if self.ok else f"{len(self.problems)} problem(s)"
        return (
            f"{verdict}: {self.partitions} partition(s), {self.segments} segment(s), "
            f"{self.batches} batch(es), {self.bytes} bytes checked in {self.data_dir}; "
            f"{len(self.notes)} note(s)"
            + (f"; {self.quarantined} quarantined range(s)" if self.quarantined else "")
        )


def _verify_index(
    report: VerifyReport,
    path: str,
    kind: str,
    base: int,
    scan: _SegmentScan,
    *,
    active_after_crash: bool = False,
    live: bool = False,
) -> None:
    if not os.path.isfile(path):
        report.problems.append(
            Problem(path, None, "missing (the loader rebuilds it from the .log file)")
        )
        return
    try:
        zero_tail: list[Problem] | None = [] if active_after_crash or live else None
        if kind == INDEX_SUFFIX:
            entries, length, zeros = _read_index_entries(path, _OFFSET_ENTRY)
            problems = _check_offset_index(path, base, entries, length, scan, zeros, zero_tail)
        else:
            entries, length, zeros = _read_index_entries(path, _TIME_ENTRY)
            problems = _check_time_index(path, base, entries, length, scan, zeros, zero_tail)
        report.problems += problems
        for note in () if live else zero_tail or ():  # live: the root's note covers them
            report.notes.append(
                Problem(
                    note.path,
                    note.position,
                    note.message + "; the last segment after an unclean stop, whose indexes "
                    "the loader rebuilds",
                )
            )
    except StorageError as exc:
        report.problems.append(Problem(path, None, str(exc)))


def _verify_partition(
    report: VerifyReport, directory: str, *, clean_shutdown: bool = True, live: bool = False
) -> int | None:
    """Check one partition directory; returns its log end offset (None if unreadable)."""
    report.partitions += 1
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        report.problems.append(Problem(directory, None, f"cannot list: {exc.strerror or exc}"))
        return None
    logs: list[int] = []
    others: dict[int, list[str]] = {}
    for name in names:
        full = os.path.join(directory, name)
        match = _SEGMENT_FILE.fullmatch(name)
        if match is not None and match.group(2) == LOG_SUFFIX:
            logs.append(int(match.group(1)))
        elif match is not None and match.group(2) in (
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            TXN_INDEX_SUFFIX,
        ):
            others.setdefault(int(match.group(1)), []).append(name)
        elif match is not None and match.group(2) == SNAPSHOT_SUFFIX:
            _verify_snapshot(report, full)
        elif name.endswith(_STATE_SUFFIXES) and _SEGMENT_FILE.match(name):
            report.notes.append(
                Problem(
                    full,
                    None,
                    "leftover of a cleaner swap, a deletion or a salvage; the loader handles it",
                )
            )
        elif name in _KNOWN_PARTITION_FILES or is_quarantine_file(name):
            continue
        else:
            report.notes.append(Problem(full, None, "foreign file, ignored"))
    for kept in list_quarantined(ReadOnlyFileSystem(), directory):
        report.quarantined += 1
        report.notes.append(
            Problem(
                kept.path,
                None,
                f"quarantined: bytes {kept.start}..{kept.end} of {kept.log_file} "
                f"({kept.size} bytes, offsets {kept.offsets}; {kept.reason}); see "
                "`compactlog quarantine`",
            )
        )
    for base, orphans in sorted(others.items()):
        if base not in logs:
            for name in orphans:
                report.problems.append(
                    Problem(
                        os.path.join(directory, name), None, "orphaned index: no matching .log file"
                    )
                )
    previous: _SegmentScan | None = None
    for base in logs:
        prefix = os.path.join(directory, f"{base:020d}")
        try:
            scan = _scan_segment(
                prefix + LOG_SUFFIX, base, previous.next_offset if previous else None
            )
        except StorageError as exc:
            report.problems.append(Problem(prefix + LOG_SUFFIX, None, str(exc)))
            previous = None
            continue
        report.segments += 1
        report.batches += len(scan.positions)
        report.bytes += scan.size
        report.problems += scan.problems
        if previous is not None:
            if previous.last_offsets and previous.last_offsets[-1] >= base:
                report.problems.append(
                    Problem(
                        previous.path,
                        previous.positions[-1],
                        f"last offset {previous.last_offsets[-1]} reaches into the next segment, "
                        f"whose base offset is {base}",
                    )
                )
            if scan.first_epoch != NO_EPOCH and scan.first_epoch < previous.last_epoch:
                report.problems.append(
                    Problem(
                        scan.path,
                        0,
                        f"partition leader epoch {scan.first_epoch} is below the previous "
                        f"segment's {previous.last_epoch}",
                    )
                )
            scan.last_epoch = max(scan.last_epoch, previous.last_epoch)
        active = base == logs[-1]
        crashed_active = not clean_shutdown and active
        for kind in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            _verify_index(
                report,
                prefix + kind,
                kind,
                base,
                scan,
                active_after_crash=crashed_active,
                live=live and active,
            )
        txn = prefix + TXN_INDEX_SUFFIX
        if os.path.isfile(txn) and os.path.getsize(txn) % TXN_ENTRY_SIZE:
            report.problems.append(
                Problem(txn, None, f"length is not a multiple of the entry size {TXN_ENTRY_SIZE}")
            )
        previous = scan
    if not logs:
        report.notes.append(
            Problem(directory, None, "no segment (the loader creates an empty one)")
        )
        return None
    return previous.next_offset if previous is not None else None


def _verify_settled(
    report: VerifyReport, directory: str, clean_shutdown: bool, *, live: bool
) -> int | None:
    """:func:`_verify_partition`; while a process holds the directory, a partition is reported
    as its first look without problems shows it, or as the last look if none was clean (see
    :data:`LIVE_ATTEMPTS`)."""
    attempts = LIVE_ATTEMPTS if live else 1
    attempt = looks = 0
    while True:
        trial = VerifyReport(report.data_dir)
        end = _verify_partition(trial, directory, clean_shutdown=clean_shutdown, live=live)
        looks += 1
        replaced = live and _replaced_while_read(trial)
        if not trial.problems or looks == REPLACED_LOOKS:
            break
        if not replaced:
            attempt += 1
            if attempt >= attempts:
                break
        time.sleep(live_retry_delay(min(attempt, attempts - 1)) if not replaced else 0.05)
    if replaced and trial.problems:
        gone = [p for p in trial.problems if not os.path.exists(p.path)]
        trial.problems = [p for p in trial.problems if os.path.exists(p.path)]
        trial.notes += [
            Problem(
                p.path,
                None,
                f"replaced while being read, on each of {looks} looks (the broker is cleaning "
                "or deleting this partition's segments): not checked this time",
            )
            for p in gone
        ]
    report.problems += trial.problems
    report.notes += trial.notes
    report.partitions += trial.partitions
    report.segments += trial.segments
    report.batches += trial.batches
    report.bytes += trial.bytes
    report.quarantined += trial.quarantined
    return end


#: A live partition whose look found a file gone (a segment the cleaner or retention replaced
#: after the listing) is looked at again without counting the look against
#: :data:`LIVE_ATTEMPTS`, this many looks in all: under constant cleaning every look may overlap
#: a swap, which is activity, not damage.
REPLACED_LOOKS: Final = 40


def _replaced_while_read(trial: VerifyReport) -> bool:
    """Whether a problem of this look names a file that no longer exists."""
    return any(not os.path.exists(p.path) for p in trial.problems)


def _read_topics(report: VerifyReport, root: str) -> dict[str, tuple[int, str]] | None:
    """``{topic: (partitions, topic id)}`` from compactlog-topics.json; None if absent or bad."""
    path = os.path.join(root, TOPICS_FILE)
    if not os.path.isfile(path):
        return None
    try:
        catalog = read_topics_file(ReadOnlyFileSystem(), root)
        for name, info in (catalog or {}).items():
            try:
                LogConfig.create(info.overrides, BrokerConfig.from_dict())
            except CompactlogError as exc:
                raise StorageError(f"topic {name!r}: {exc}") from exc
    except (StorageError, OSError) as exc:
        cause = exc.__cause__ or exc  # the parser's own words, without the store's sentence
        report.problems.append(
            Problem(
                path,
                None,
                f"damaged ({cause}); the store keeps it aside as {TOPICS_FILE}.corrupt-N and "
                "rebuilds the catalog from the partition directories' copies",
            )
        )
        return None
    return None if catalog is None else {n: (i.partitions, i.topic_id) for n, i in catalog.items()}


def _verify_snapshot(report: VerifyReport, path: str) -> None:
    try:
        with _ReadOnlyFile(path) as file:
            decode_snapshot(file.read_all(), path)
    except CompactlogError as exc:
        report.problems.append(
            Problem(
                path,
                None,
                f"{exc}; the loader deletes it and rebuilds the producer state from the log",
            )
        )


def _read_checkpoint(report: VerifyReport, root: str, name: str) -> dict[tuple[str, int], int]:
    path = os.path.join(root, name)
    if not os.path.isfile(path):
        return {}
    try:
        with _ReadOnlyFile(path) as file:
            return parse_checkpoint(file.read_all(), name)
    except (MalformedCheckpointError, StorageError) as exc:
        report.problems.append(
            Problem(path, None, f"malformed ({exc}); the store reads it as empty, with a warning")
        )
        return {}


def _check_topic_id(report: VerifyReport, directory: str, topic_id: str, source: str) -> None:
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    if not os.path.isfile(path):
        return
    try:
        with _ReadOnlyFile(path) as file:
            text = file.read_all().decode("utf-8", "replace")
    except StorageError as exc:
        report.notes.append(Problem(path, None, str(exc)))
        return
    if f"topic_id: {topic_id}" not in text:
        report.notes.append(Problem(path, None, f"topic id differs from {topic_id} in {source}"))


def _read_metadata(report: VerifyReport, root: str, *, required: bool) -> KraftMetadata | None:
    """Kafka's metadata log, as the store reads it for its catalog."""
    if not has_metadata_log(OsFileSystem(), root):
        return None
    try:
        return read_kraft_metadata(root)
    except CompactlogError as exc:
        (report.problems if required else report.notes).append(
            Problem(
                os.path.join(root, METADATA_DIR),
                None,
                f"Kafka's metadata log cannot be read ({exc}); "
                + (
                    f"with no {TOPICS_FILE} the store refuses to open"
                    if required
                    else f"the store uses {TOPICS_FILE} as it is"
                ),
            )
        )
        return None


def _adoption_note(
    root: str, metadata: KraftMetadata | None, dirs: dict[tuple[str, int], str]
) -> str:
    topics = {topic for topic, _ in dirs}
    if metadata is None:
        note = (
            f"no {TOPICS_FILE}: the store restores these topics from their partitions' "
            f"{PARTITION_CATALOG_FILE}, else adopts them with retention disabled"
        )
        if is_kafka_log_dir(OsFileSystem(), root):
            note += (
                f" (a Kafka log directory without Kafka's metadata log {METADATA_DIR}: its "
                "topics' configs, compaction included, are unknown)"
            )
        return note
    known = sorted(t for t in topics if t in metadata.topics)
    unknown = sorted(topics - set(known))
    note = (
        f"no {TOPICS_FILE}: the store adopts {len(known)} topic(s) from Kafka's metadata log "
        "with their configs and topic ids"
    )
    if unknown:
        note += (
            f", and {', '.join(unknown)} (unknown to it) from their {PARTITION_CATALOG_FILE}, "
            "else with retention disabled"
        )
    return note


def verify_data_dir(path: str) -> VerifyReport:
    """Check every partition of the data directory ``path`` without changing anything in it.

    See the module docstring for the checks. Raises :class:`~compactlog.errors.StorageError`
    only when ``path`` itself cannot be listed; everything else ends up in the report.
    """
    root = os.path.abspath(path)
    report = VerifyReport(root)
    if not os.path.isdir(root):
        raise StorageError(f"{root} is not a directory")
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise StorageError(f"cannot list {root}: {exc.strerror or exc}") from exc
    topics = _read_topics(report, root)
    metadata = _read_metadata(report, root, required=topics is None)
    clean_shutdown = os.path.exists(os.path.join(root, CLEAN_SHUTDOWN_FILE))
    holder = lock_holder(root)
    if holder is not None:
        report.notes.append(
            Problem(
                root,
                None,
                f"held by process {holder} (a running broker, CLI command or job): read as it "
                "is now, without the lock; its active segments' pre-allocated index space "
                "(segment.index.bytes, zero-filled beyond the entries) is expected",
            )
        )
    recovery_points = _read_checkpoint(report, root, RECOVERY_POINT_CHECKPOINT)
    start_offsets = _read_checkpoint(report, root, LOG_START_OFFSET_CHECKPOINT)
    _read_checkpoint(report, root, CLEANER_OFFSET_CHECKPOINT)
    partition_dirs: dict[tuple[str, int], str] = {}
    for name in names:
        full = os.path.join(root, name)
        if not os.path.isdir(full):
            if name not in CHECKPOINT_FILES and name not in (
                TOPICS_FILE,
                LOCK_FILE,
                CLEAN_SHUTDOWN_FILE,
                ACLS_FILE,
                *_KAFKA_ROOT_FILES,
                *_BROKER_ROOT_FILES,
            ):
                report.notes.append(Problem(full, None, "foreign file, ignored"))
            continue
        if name == METADATA_DIR:
            report.notes.append(
                Problem(
                    full,
                    None,
                    "Kafka's KRaft metadata log: not a topic; read for the topic catalog, "
                    "neither loaded nor checked",
                )
            )
            continue
        parsed = parse_partition_dir_name(name)
        if parsed is None:
            special = parse_special_dir_name(name)
            what = (
                f"a partition directory marked -{special[2]}"
                if special
                else "not a partition directory"
            )
            report.notes.append(Problem(full, None, f"{what}, ignored"))
            continue
        if topics is not None and (parsed[0] not in topics or parsed[1] >= topics[parsed[0]][0]):
            kafka_knows = metadata is not None and parsed[0] in metadata.topics
            report.notes.append(
                Problem(
                    full,
                    None,
                    f"not a partition of a topic in {TOPICS_FILE}, "
                    + (
                        "but Kafka's metadata log knows it: the store adopts it at its next open"
                        if kafka_knows
                        else "ignored"
                    ),
                )
            )
            continue
        partition_dirs[parsed] = full
    if topics is None and partition_dirs and not os.path.isfile(os.path.join(root, TOPICS_FILE)):
        report.notes.append(Problem(root, None, _adoption_note(root, metadata, partition_dirs)))
    for topic, (count, _) in sorted((topics or {}).items()):
        for partition in range(count):
            if (topic, partition) not in partition_dirs:
                report.problems.append(
                    Problem(
                        os.path.join(root, f"{topic}-{partition}"),
                        None,
                        "partition directory missing",
                    )
                )
    if not clean_shutdown and holder is None and (partition_dirs or topics):
        report.notes.append(
            Problem(
                root, None, f"no {CLEAN_SHUTDOWN_FILE}: the next open recovers unflushed segments"
            )
        )
    for key, directory in sorted(partition_dirs.items()):
        if topics is not None:
            _check_topic_id(report, directory, topics[key[0]][1], TOPICS_FILE)
        elif metadata is not None and key[0] in metadata.topics:
            _check_topic_id(
                report, directory, metadata.topics[key[0]].topic_id, "Kafka's metadata log"
            )
        end = _verify_settled(report, directory, clean_shutdown, live=holder is not None)
        if end is None:
            continue
        start = start_offsets.get(key)
        if start is not None and start > end:
            report.problems.append(
                Problem(
                    os.path.join(root, LOG_START_OFFSET_CHECKPOINT),
                    None,
                    f"{key[0]}-{key[1]}: log start offset {start} is above the log end "
                    f"offset {end}",
                )
            )
        point = recovery_points.get(key)
        if point is not None and (point > end or (clean_shutdown and point != end)):
            report.problems.append(
                Problem(
                    os.path.join(root, RECOVERY_POINT_CHECKPOINT),
                    None,
                    f"{key[0]}-{key[1]}: recovery point {point} but the log ends at {end}"
                    + (" after a clean shutdown" if clean_shutdown and point < end else ""),
                )
            )
    return report


__all__ = [
    "ACLS_FILE",
    "Problem",
    "VerifyReport",
    "verify_data_dir",
]
