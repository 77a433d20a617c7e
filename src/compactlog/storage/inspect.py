"""Read-only inspection of log files and data directories: Kafka's ``DumpLogSegments`` and a
``verify`` that checks everything a reader relies on.

Nothing here writes, renames or locks: files are opened ``O_RDONLY`` and no
:class:`~compactlog.storage.store.Store` is opened (opening one recovers, which writes). A damaged
data directory is reported as it is on disk, which is what a user needs before deciding whether to
let the loader repair it.

Theory of operation of :func:`verify_data_dir`:

* **Data directory.** ``compactlog-topics.json`` must parse (a damaged one makes the store refuse
  to open); the offset checkpoints must follow Kafka's text format; every partition of every
  topic must have its directory. Directories and files that are not ours are *notes*, never
  problems: the store ignores them too.
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
removes them, but until then the directory is not what a clean shutdown leaves.
"""

from __future__ import annotations

import json
import os
import re
import struct
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from compactlog.errors import CompactlogError, CorruptRecordError, StorageError
from compactlog.records import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    NO_SEQUENCE,
    BatchHeader,
    Compression,
    ControlRecordType,
    RecordBatch,
    TimestampType,
    compute_crc,
    decode_control_key,
    decode_end_txn_marker,
)
from compactlog.records.batch import HEADER_STRUCT
from compactlog.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    MalformedCheckpointError,
    parse_checkpoint,
)
from compactlog.storage.file_records import MIN_BATCH_LENGTH_FIELD
from compactlog.storage.index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE
from compactlog.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
)
from compactlog.storage.store import (
    CLEAN_SHUTDOWN_FILE,
    LOCK_FILE,
    PARTITION_METADATA_FILE,
    TOPICS_FILE,
)
from compactlog.storage.topic_names import parse_partition_dir_name, parse_special_dir_name

#: Bytes read from a ``.log`` file at a time; a batch larger than this is read whole.
READ_CHUNK: Final = 4 << 20
#: Decompressed size allowed per batch when dumping records. Kafka's default max.message.bytes
#: is about 1 MiB; 256 MiB leaves room for topics that raise it while keeping a damaged (or
#: hostile) batch that claims gigabytes from exhausting memory.
MAX_DECOMPRESSED_PER_BATCH: Final = 256 << 20
#: Problems reported per file before the rest are only counted (a zero-filled 10 MiB index has
#: 1.3 million bad entries; one line per entry helps nobody).
MAX_PROBLEMS_PER_FILE: Final = 10
#: Kafka's ``AbortedTxn.TOTAL_SIZE``: version, producer id, first, last and last stable offset.
TXN_ENTRY_SIZE: Final = 34
#: Leader epoch meaning "unknown" (Kafka's NO_PARTITION_LEADER_EPOCH).
NO_EPOCH: Final = -1

CHECKPOINT_FILES: Final = frozenset(
    {
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        CLEANER_OFFSET_CHECKPOINT,
        "replication-offset-checkpoint",
    }
)
_STATE_SUFFIXES: Final = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_SEGMENT_FILE: Final = re.compile(r"([0-9]{20})(\.[a-z]+)")
_KNOWN_PARTITION_FILES: Final = frozenset({PARTITION_METADATA_FILE, "leader-epoch-checkpoint"})

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")


class UnsupportedFileError(CompactlogError):
    """A file that ``dump_log_file`` cannot read (not a log, index or checkpoint file)."""


# --------------------------------------------------------------------------------------------
# Read-only file access


class _ReadOnlyFile:
    """A file opened ``O_RDONLY``: positional reads only, so inspection can never write."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY)
            self.size = os.fstat(self._fd).st_size
        except OSError as exc:
            raise StorageError(f"cannot open {path}: {exc.strerror or exc}") from exc

    def read_at(self, position: int, size: int) -> bytes:
        try:
            return os.pread(self._fd, size, position)
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc.strerror or exc}") from exc

    def read_all(self) -> bytes:
        return self.read_at(0, self.size)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> _ReadOnlyFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _file_offset(path: str) -> int | None:
    """The base offset a segment file name starts with (``None`` if it does not)."""
    match = _SEGMENT_FILE.match(os.path.basename(path))
    return int(match.group(1)) if match else None


def _kind(path: str) -> str:
    """``.log``, ``.index``, ... for a segment file (state suffixes ignored), else its name."""
    name = os.path.basename(path)
    for suffix in _STATE_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX):
        if name.endswith(suffix):
            return suffix
    return name


# --------------------------------------------------------------------------------------------
# Walking the batches of a .log file


@dataclass
class _WalkEnd:
    """Where and why a walk over a ``.log`` file stopped."""

    position: int = 0
    #: None: the data ended exactly at the end of the file.
    problem: str | None = None
    torn: bool = False


@dataclass(frozen=True)
class _Batch:
    position: int
    header: BatchHeader
    data: memoryview


def _walk(file: _ReadOnlyFile, end: _WalkEnd) -> Iterator[_Batch]:
    """Every framed batch of ``file``; ``end`` says where the walk stopped and why.

    Framing (spec 1.6): the 17 bytes up to the magic must be present, the length field at least
    14, the whole batch present, the magic 2 and batchLength at least 49. Anything after the
    first failure is unreachable for a reader, so the walk stops there.
    """
    size = file.size
    position = 0
    chunk = b""
    chunk_start = 0
    while True:
        end.position = position
        remaining = size - position
        if remaining == 0:
            return
        if remaining < HEADER_SIZE_UP_TO_MAGIC:
            end.torn = True
            end.problem = (
                f"torn tail: {remaining} bytes after the last complete batch, too few for a "
                "batch header"
            )
            return
        offset = position - chunk_start
        if offset < 0 or offset + HEADER_SIZE_UP_TO_MAGIC > len(chunk):
            chunk, chunk_start, offset = (
                file.read_at(position, min(READ_CHUNK, remaining)),
                position,
                0,
            )
        _, length = _OFFSET_AND_LENGTH.unpack_from(chunk, offset)
        if length < MIN_BATCH_LENGTH_FIELD:
            end.problem = (
                f"record size {length} is smaller than the minimum record overhead "
                f"({MIN_BATCH_LENGTH_FIELD}); {remaining} bytes from here are unreadable"
            )
            return
        total = length + LOG_OVERHEAD
        if total > remaining:
            end.torn = True
            end.problem = (
                f"torn tail: the batch here claims {total} bytes but only {remaining} remain "
                "(a partial write, or a damaged length field)"
            )
            return
        magic = chunk[offset + HEADER_SIZE_UP_TO_MAGIC - 1]
        if magic != MAGIC_V2:
            end.problem = f"unsupported magic {magic} (only {MAGIC_V2} is written since Kafka 0.11)"
            return
        if length < MIN_BATCH_LENGTH:
            end.problem = (
                f"batchLength {length} is less than the v2 minimum {MIN_BATCH_LENGTH}; "
                f"{remaining} bytes from here are unreadable"
            )
            return
        if offset + total > len(chunk):
            chunk = file.read_at(position, max(total, min(READ_CHUNK, remaining)))
            chunk_start, offset = position, 0
        data = memoryview(chunk)[offset : offset + total]
        header = BatchHeader._make(HEADER_STRUCT.unpack_from(data))
        yield _Batch(position, header, data)
        position += total


def _crc_problem(batch: _Batch) -> str | None:
    computed = compute_crc(batch.data, 0, len(batch.data))
    if computed == batch.header.crc:
        return None
    return (
        f"CRC mismatch in the batch at base offset {batch.header.base_offset}: stored "
        f"{batch.header.crc} (0x{batch.header.crc:08x}), computed {computed} (0x{computed:08x})"
    )


def _header_problem(header: BatchHeader) -> str | None:
    """Header numbers no writer produces (fields the CRC covers, so normally a CRC failure too)."""
    if header.records_count < 0:
        return f"negative recordsCount {header.records_count}"
    if header.last_offset_delta < 0:
        return f"negative lastOffsetDelta {header.last_offset_delta}"
    if header.records_count > header.last_offset_delta + 1:
        return (
            f"recordsCount {header.records_count} exceeds the {header.last_offset_delta + 1} "
            "offsets the batch spans"
        )
    return None


# --------------------------------------------------------------------------------------------
# dump-log: Kafka's DumpLogSegments output


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _codec_name(header: BatchHeader) -> str:
    codec_id = header.attributes & 0x07
    try:
        return Compression.from_id(codec_id).kafka_name
    except CompactlogError:
        return f"unknown({codec_id})"


def _timestamp_type_name(header: BatchHeader) -> str:
    return (
        "LogAppendTime" if header.timestamp_type is TimestampType.LOG_APPEND_TIME else "CreateTime"
    )


def _batch_line(batch: _Batch, valid: bool) -> str:
    """Kafka's ``printBatchLevel`` for a v2 batch, field for field."""
    h = batch.header
    horizon = h.delete_horizon_ms
    horizon_text = "OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_java_bool(h.is_transactional)} "
        f"isControl: {_java_bool(h.is_control)} deleteHorizonMs: {horizon_text} "
        f"position: {batch.position} {_timestamp_type_name(h)}: {h.max_timestamp} "
        f"size: {h.size_in_bytes} magic: {h.magic} compresscodec: {_codec_name(h)} "
        f"crc: {h.crc} isvalid: {_java_bool(valid)}"
    )


def _text(data: bytes) -> str:
    """Kafka's StringDecoder: UTF-8, malformed input replaced."""
    return data.decode("utf-8", "replace")


def _record_sequence(header: BatchHeader, offset: int) -> int:
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    sequence = header.base_sequence + (offset - header.base_offset)
    return sequence - 2**31 if sequence > 2**31 - 1 else sequence


def _control_text(key: bytes | None, value: bytes | None) -> str:
    try:
        kind = decode_control_key(key)
        if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            assert isinstance(kind, ControlRecordType)
            epoch = decode_end_txn_marker(value)
            return f" endTxnMarker: {kind.name} coordinatorEpoch: {epoch}"
        if isinstance(kind, ControlRecordType):
            return f" controlType: {kind.name}({int(kind)})"
        return f" controlType: UNKNOWN({kind})"
    except CorruptRecordError as exc:
        return f" controlType: invalid ({exc})"


def _record_lines(batch: _Batch, print_data: bool) -> Iterator[str]:
    """Kafka's ``dumpBatchRecords``: metadata of every record, then key and payload."""
    header = batch.header
    records = RecordBatch(batch.data).records(MAX_DECOMPRESSED_PER_BATCH, verify_crc=False)
    type_name = _timestamp_type_name(header)
    for record in records:
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        header_keys = ",".join(name for name, _ in record.headers)
        line = (
            f"| offset: {record.offset} {type_name}: {record.timestamp} keySize: {key_size} "
            f"valueSize: {value_size} sequence: {_record_sequence(header, record.offset)} "
            f"headerKeys: [{header_keys}]"
        )
        if header.is_control:
            line += _control_text(record.key, record.value)
        elif print_data:
            if record.key is not None:
                line += f" key: {_text(record.key)}"
            if record.value is not None:
                line += f" payload: {_text(record.value)}"
        yield line


def _dump_log(path: str, print_data: bool) -> Iterator[str]:
    base = _file_offset(path)
    if base is not None:
        yield f"Log starting offset: {base}"
    problems: list[str] = []
    end = _WalkEnd()
    with _ReadOnlyFile(path) as file:
        for batch in _walk(file, end):
            problem = _crc_problem(batch) or _header_problem(batch.header)
            yield _batch_line(batch, problem is None)
            if problem is not None:
                problems.append(f"position {batch.position}: {problem}")
            if not print_data:
                continue
            try:
                yield from _record_lines(batch, print_data)
            except CorruptRecordError as exc:
                problems.append(f"position {batch.position}: records cannot be decoded: {exc}")
        if end.problem is not None and end.torn:
            # Kafka's printTrailingBytes.
            name = os.path.basename(path)
            yield f"Found {file.size - end.position} invalid bytes at the end of {name}"
    if end.problem is not None:
        problems.append(f"position {end.position}: {end.problem}")
    _raise_problems(path, problems, CorruptRecordError)


def _raise_problems(path: str, problems: list[str], error: type[CompactlogError]) -> None:
    if not problems:
        return
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    raise error(f"{path}: {problems[0]}{more}")


def _read_entries(path: str, entry: struct.Struct) -> tuple[Iterator[tuple[Any, ...]], int]:
    """The whole entries of an index file (a partial last entry is ignored, as Kafka does)."""
    with _ReadOnlyFile(path) as file:
        raw = file.read_all()
    whole = len(raw) - len(raw) % entry.size
    return entry.iter_unpack(raw[:whole]), len(raw)


def _read_index_entries(path: str, entry: struct.Struct) -> tuple[list[tuple[int, int]], int]:
    """Offset or time index entries as pairs, and the file length."""
    entries, length = _read_entries(path, entry)
    return [(a, b) for a, b in entries], length


def _neighbour(path: str, suffix: str) -> str | None:
    base = _file_offset(path)
    if base is None:
        return None
    candidate = os.path.join(os.path.dirname(path), f"{base:020d}{suffix}")
    return candidate if os.path.isfile(candidate) else None


def _dump_offset_index(path: str) -> Iterator[str]:
    base = _file_offset(path) or 0
    entries, length = _read_index_entries(path, _OFFSET_ENTRY)
    if not entries:
        yield f"{path} is empty."
    for i, (relative, position) in enumerate(entries):
        if i > 0 and relative == 0:
            break  # Kafka stops at the first zero entry of a sparse (pre-allocated) file
        yield f"offset: {base + relative} position: {position}"
    log_path = _neighbour(path, LOG_SUFFIX)
    scan = _scan_segment(log_path, base) if log_path else None
    problems = [
        p.message if p.position is None else f"position {p.position}: {p.message}"
        for p in _check_offset_index(path, base, entries, length, scan)
    ]
    _raise_problems(path, problems, CompactlogError)


def _dump_time_index(path: str) -> Iterator[str]:
    base = _file_offset(path) or 0
    entries, length = _read_index_entries(path, _TIME_ENTRY)
    if not entries:
        yield f"{path} is empty."
    for i, (timestamp, relative) in enumerate(entries):
        if i > 0 and relative == 0:
            break
        yield f"timestamp: {timestamp} offset: {base + relative}"
    log_path = _neighbour(path, LOG_SUFFIX)
    scan = _scan_segment(log_path, base) if log_path else None
    problems = [
        p.message if p.position is None else f"position {p.position}: {p.message}"
        for p in _check_time_index(path, base, entries, length, scan)
    ]
    _raise_problems(path, problems, CompactlogError)


def _dump_txn_index(path: str) -> Iterator[str]:
    entries, length = _read_entries(path, _TXN_ENTRY)
    for version, producer_id, first, last, last_stable in entries:
        yield (
            f"version: {version} producerId: {producer_id} firstOffset: {first} "
            f"lastOffset: {last} lastStableOffset: {last_stable}"
        )
    if length % TXN_ENTRY_SIZE:
        _raise_problems(
            path, [f"length {length} is not a multiple of {TXN_ENTRY_SIZE}"], CompactlogError
        )


def _dump_checkpoint(path: str) -> Iterator[str]:
    with _ReadOnlyFile(path) as file:
        raw = file.read_all()
    try:
        entries = parse_checkpoint(raw, path)
    except MalformedCheckpointError as exc:
        raise CompactlogError(str(exc)) from exc
    for (topic, partition), offset in sorted(entries.items()):
        yield f"topic: {topic} partition: {partition} offset: {offset}"


def dump_log_file(path: str, *, print_data_log: bool = True) -> Iterator[str]:
    """The contents of one file as Kafka's ``kafka-dump-log --print-data-log`` shows them.

    ``.log`` files: one line per batch (Kafka's field names and order), then, with
    ``print_data_log``, one ``| offset: ...`` line per record with its key and payload.
    ``.index``: ``offset: X position: Y``; ``.timeindex``: ``timestamp: X offset: Y``;
    ``.txnindex`` entries; offset checkpoint files: ``topic: T partition: P offset: O``.
    Files with a ``.deleted``, ``.cleaned`` or ``.swap`` suffix are read by their inner suffix.

    The lines of whatever can be read are yielded first; then damage (a framing failure, a
    torn tail, a CRC mismatch, undecodable records, an inconsistent index) raises one
    :class:`~compactlog.errors.CompactlogError` naming the file and the byte position of the
    first problem. A file of another kind raises :class:`UnsupportedFileError`.
    """
    kind = _kind(path)
    if not os.path.isfile(path):
        raise StorageError(f"{path}: no such file")
    if kind == LOG_SUFFIX:
        return _dump_log(path, print_data_log)
    if kind == INDEX_SUFFIX:
        return _dump_offset_index(path)
    if kind == TIME_INDEX_SUFFIX:
        return _dump_time_index(path)
    if kind == TXN_INDEX_SUFFIX:
        return _dump_txn_index(path)
    if kind in CHECKPOINT_FILES:
        return _dump_checkpoint(path)
    raise UnsupportedFileError(
        f"{path}: not a file dump-log reads (.log, .index, .timeindex, .txnindex or an offset "
        "checkpoint)"
    )


# --------------------------------------------------------------------------------------------
# verify


@dataclass(frozen=True)
class Problem:
    """One finding: the file, the byte position in it (if any) and what is wrong."""

    path: str
    position: int | None
    message: str

    def __str__(self) -> str:
        if self.position is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}: position {self.position}: {self.message}"


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

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        verdict = "OK" if self.ok else f"{len(self.problems)} problem(s)"
        return (
            f"{verdict}: {self.partitions} partition(s), {self.segments} segment(s), "
            f"{self.batches} batch(es), {self.bytes} bytes checked in {self.data_dir}; "
            f"{len(self.notes)} note(s)"
        )


class _FileProblems:
    """Collects the problems of one file, keeping the first MAX_PROBLEMS_PER_FILE."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[Problem] = []
        self.dropped = 0

    def add(self, position: int | None, message: str) -> None:
        if len(self.items) < MAX_PROBLEMS_PER_FILE:
            self.items.append(Problem(self.path, position, message))
        else:
            self.dropped += 1

    def done(self) -> list[Problem]:
        if self.dropped:
            self.items.append(
                Problem(self.path, None, f"... and {self.dropped} more problem(s) in this file")
            )
        return self.items


@dataclass
class _SegmentScan:
    """The batches of one ``.log`` file that framing lets a reader reach."""

    path: str
    base_offset: int
    size: int = 0
    #: End of the last framed batch: where a reader stops.
    valid_end: int = 0
    positions: array[int] = field(default_factory=lambda: array("q"))
    last_offsets: array[int] = field(default_factory=lambda: array("q"))
    max_timestamps: array[int] = field(default_factory=lambda: array("q"))
    first_base_offset: int | None = None
    first_epoch: int = NO_EPOCH
    last_epoch: int = NO_EPOCH
    problems: list[Problem] = field(default_factory=list)

    @property
    def next_offset(self) -> int:
        """The offset after the last framed batch (the base offset for an empty segment)."""
        return self.last_offsets[-1] + 1 if self.last_offsets else self.base_offset

    def batch_at(self, position: int) -> int | None:
        """Index of the batch starting exactly at ``position``."""
        i = bisect_left(self.positions, position)
        if i < len(self.positions) and self.positions[i] == position:
            return i
        return None


def _scan_segment(
    path: str, base_offset: int, previous_next_offset: int | None = None
) -> _SegmentScan:
    """Walk one segment and check every batch and its offsets (see the module docstring)."""
    scan = _SegmentScan(path, base_offset)
    found = _FileProblems(path)
    end = _WalkEnd()
    with _ReadOnlyFile(path) as file:
        scan.size = file.size
        expected = (
            base_offset if previous_next_offset is None else max(base_offset, previous_next_offset)
        )
        previous_last: int | None = None
        for batch in _walk(file, end):
            h = batch.header
            problem = _crc_problem(batch) or _header_problem(h)
            if problem is not None:
                found.add(batch.position, problem)
            if h.base_offset < expected or (
                previous_last is not None and h.base_offset <= previous_last
            ):
                before = (
                    f"the previous batch's last offset {previous_last}"
                    if previous_last is not None
                    else f"the segment's base offset {base_offset}"
                    if expected == base_offset
                    else f"the previous segment's next offset {expected}"
                )
                found.add(batch.position, f"base offset {h.base_offset} is not after {before}")
            if not 0 <= h.last_offset - base_offset <= MAX_RELATIVE_OFFSET:
                found.add(
                    batch.position,
                    f"last offset {h.last_offset} is outside the segment's relative-offset range "
                    f"[{base_offset}, {base_offset + MAX_RELATIVE_OFFSET}]",
                )
            epoch = h.partition_leader_epoch
            if epoch < NO_EPOCH:
                found.add(batch.position, f"invalid partition leader epoch {epoch}")
            elif epoch != NO_EPOCH:
                if epoch < scan.last_epoch:
                    found.add(
                        batch.position,
                        f"partition leader epoch {epoch} is below the previous batch's "
                        f"{scan.last_epoch} (epochs never decrease in a log)",
                    )
                if scan.first_epoch == NO_EPOCH:
                    scan.first_epoch = epoch
                scan.last_epoch = max(scan.last_epoch, epoch)
            if scan.first_base_offset is None:
                scan.first_base_offset = h.base_offset
            # Kept non-decreasing so that index checks can bisect even in a damaged segment
            # (offsets that go backwards are reported above).
            previous_last = (
                h.last_offset if previous_last is None else max(previous_last, h.last_offset)
            )
            scan.positions.append(batch.position)
            scan.last_offsets.append(previous_last)
            scan.max_timestamps.append(h.max_timestamp)
        scan.valid_end = end.position
    if end.problem is not None:
        found.add(end.position, end.problem)
    scan.problems = found.done()
    return scan


def _zero_tail(entries: list[tuple[int, int]]) -> int:
    """How many entries at the end are all zero (pre-allocated or zero-filled space)."""
    n = len(entries)
    while n > 0 and entries[n - 1] == (0, 0):
        n -= 1
    return len(entries) - n


def _check_offset_index(
    path: str,
    base: int,
    entries: list[tuple[int, int]],
    length: int,
    scan: _SegmentScan | None,
) -> list[Problem]:
    found = _FileProblems(path)
    if length % OFFSET_ENTRY_SIZE:
        found.add(None, f"length {length} is not a multiple of the entry size {OFFSET_ENTRY_SIZE}")
    zeros = _zero_tail(entries)
    if zeros:
        first = len(entries) - zeros
        found.add(
            first * OFFSET_ENTRY_SIZE,
            f"entries {first}-{len(entries) - 1} are zero: pre-allocated space never trimmed "
            "(the store did not close cleanly) or zero-filled damage",
        )
        entries = entries[:first]
    previous_offset, previous_position = base - 1, 0
    boundaries: list[int | None] = []
    for i, (relative, position) in enumerate(entries):
        offset = base + relative
        at = i * OFFSET_ENTRY_SIZE
        if relative < 0:
            found.add(at, f"entry {i}: relative offset {relative} is negative")
        if position <= 0:
            found.add(at, f"entry {i}: position {position} (Kafka never indexes position 0)")
        elif offset <= previous_offset or position <= previous_position:
            found.add(
                at,
                f"entry {i} (offset {offset}, position {position}) is not after "
                f"(offset {previous_offset}, position {previous_position})",
            )
        previous_offset, previous_position = (
            max(offset, previous_offset),
            max(position, previous_position),
        )
        boundaries.append(scan.batch_at(position) if scan is not None else None)
    if scan is None:
        return found.done()
    for i, (relative, position) in enumerate(entries):
        offset, at, k = base + relative, i * OFFSET_ENTRY_SIZE, boundaries[i]
        if position <= 0:
            continue
        if position >= scan.valid_end:
            found.add(
                at,
                f"entry {i} (offset {offset}) points at position {position}, past the last "
                f"readable batch (which ends at {scan.valid_end})",
            )
            continue
        if k is None:
            found.add(
                at, f"entry {i} (offset {offset}) points at position {position}, not at a batch"
            )
            continue
        limit = len(scan.positions)
        for later in boundaries[i + 1 :]:
            if later is not None and later > k:
                limit = later
                break
        j = bisect_left(scan.last_offsets, offset, k, limit)
        if j >= limit or scan.last_offsets[j] != offset:
            found.add(
                at,
                f"entry {i} (offset {offset}, position {position}): the batch there ends at "
                f"offset {scan.last_offsets[k]} and no batch before the next entry ends at "
                f"{offset}",
            )
    return found.done()


def _check_time_index(
    path: str,
    base: int,
    entries: list[tuple[int, int]],
    length: int,
    scan: _SegmentScan | None,
) -> list[Problem]:
    found = _FileProblems(path)
    if length % TIME_ENTRY_SIZE:
        found.add(None, f"length {length} is not a multiple of the entry size {TIME_ENTRY_SIZE}")
    zeros = _zero_tail(entries)
    if zeros:
        first = len(entries) - zeros
        found.add(
            first * TIME_ENTRY_SIZE,
            f"entries {first}-{len(entries) - 1} are zero: pre-allocated space never trimmed "
            "(the store did not close cleanly) or zero-filled damage",
        )
        entries = entries[:first]
    previous_ts, previous_offset = -1, base
    for i, (timestamp, relative) in enumerate(entries):
        offset = base + relative
        at = i * TIME_ENTRY_SIZE
        if timestamp <= previous_ts or offset < previous_offset:
            found.add(
                at,
                f"entry {i} (timestamp {timestamp}, offset {offset}) is not after (timestamp "
                f"{previous_ts}, offset {previous_offset})",
            )
        previous_ts, previous_offset = max(timestamp, previous_ts), max(offset, previous_offset)
        if scan is None:
            continue
        if not base <= offset < scan.next_offset:
            found.add(
                at,
                f"entry {i}: offset {offset} is outside the segment's offsets "
                f"[{base}, {scan.next_offset})",
            )
            continue
        j = bisect_left(scan.last_offsets, offset)
        if j >= len(scan.last_offsets) or scan.last_offsets[j] != offset:
            found.add(at, f"entry {i}: offset {offset} is not the last offset of a batch")
        elif scan.max_timestamps[j] != timestamp:
            found.add(
                at,
                f"entry {i}: timestamp {timestamp} differs from the max timestamp "
                f"{scan.max_timestamps[j]} of the batch ending at offset {offset}",
            )
    return found.done()


def _verify_index(
    report: VerifyReport, path: str, kind: str, base: int, scan: _SegmentScan
) -> None:
    if not os.path.isfile(path):
        report.problems.append(
            Problem(path, None, "missing (the loader rebuilds it from the .log file)")
        )
        return
    try:
        if kind == INDEX_SUFFIX:
            entries, length = _read_index_entries(path, _OFFSET_ENTRY)
            report.problems += _check_offset_index(path, base, entries, length, scan)
        else:
            entries, length = _read_index_entries(path, _TIME_ENTRY)
            report.problems += _check_time_index(path, base, entries, length, scan)
    except StorageError as exc:
        report.problems.append(Problem(path, None, str(exc)))


def _verify_partition(report: VerifyReport, directory: str) -> int | None:
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
            continue
        elif name.endswith(_STATE_SUFFIXES) and _SEGMENT_FILE.match(name):
            report.notes.append(
                Problem(full, None, "leftover of a cleaner swap or deletion; the loader handles it")
            )
        elif name in _KNOWN_PARTITION_FILES:
            continue
        else:
            report.notes.append(Problem(full, None, "foreign file, ignored"))
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
        _verify_index(report, prefix + INDEX_SUFFIX, INDEX_SUFFIX, base, scan)
        _verify_index(report, prefix + TIME_INDEX_SUFFIX, TIME_INDEX_SUFFIX, base, scan)
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


def _read_topics(report: VerifyReport, root: str) -> dict[str, tuple[int, str]] | None:
    """``{topic: (partitions, topic id)}`` from compactlog-topics.json; None if absent or bad."""
    path = os.path.join(root, TOPICS_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with _ReadOnlyFile(path) as file:
            doc = json.loads(file.read_all().decode("utf-8"))
        topics = {}
        for name, entry in doc["topics"].items():
            partitions = int(entry["partitions"])
            if partitions < 1:
                raise ValueError(f"topic {name!r} has {partitions} partitions")
            topics[str(name)] = (partitions, str(entry["topic_id"]))
            dict(entry["config"])
        return topics
    except (ValueError, KeyError, TypeError, AttributeError, StorageError) as exc:
        report.problems.append(
            Problem(path, None, f"damaged, the store refuses to open the data directory: {exc}")
        )
        return None


def _read_checkpoint(report: VerifyReport, root: str, name: str) -> dict[tuple[str, int], int]:
    path = os.path.join(root, name)
    if not os.path.isfile(path):
        return {}
    try:
        with _ReadOnlyFile(path) as file:
            return parse_checkpoint(file.read_all(), name)
    except (MalformedCheckpointError, StorageError) as exc:
        report.problems.append(
            Problem(path, None, f"malformed ({exc}); the store would recover every log")
        )
        return {}


def _check_topic_id(report: VerifyReport, directory: str, topic_id: str) -> None:
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
        report.notes.append(
            Problem(path, None, f"topic id differs from {topic_id} in {TOPICS_FILE}")
        )


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
    clean_shutdown = os.path.exists(os.path.join(root, CLEAN_SHUTDOWN_FILE))
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
            ):
                report.notes.append(Problem(full, None, "foreign file, ignored"))
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
            report.notes.append(
                Problem(full, None, f"not a partition of a topic in {TOPICS_FILE}, ignored")
            )
            continue
        partition_dirs[parsed] = full
    if topics is None and partition_dirs and not os.path.isfile(os.path.join(root, TOPICS_FILE)):
        report.notes.append(
            Problem(
                root,
                None,
                f"no {TOPICS_FILE}: the store adopts these partitions with default configs",
            )
        )
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
    if not clean_shutdown and (partition_dirs or topics):
        report.notes.append(
            Problem(
                root, None, f"no {CLEAN_SHUTDOWN_FILE}: the next open recovers unflushed segments"
            )
        )
    for key, directory in sorted(partition_dirs.items()):
        if topics is not None:
            _check_topic_id(report, directory, topics[key[0]][1])
        end = _verify_partition(report, directory)
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
    "Problem",
    "UnsupportedFileError",
    "VerifyReport",
    "dump_log_file",
    "verify_data_dir",
]
