"""``dump-log``: one log, index, producer snapshot or checkpoint file as Kafka's ``DumpLogSegments``
(``kafka-dump-log --print-data-log``) shows it.

Nothing here writes, renames or locks: files are opened ``O_RDONLY``. The lines of whatever can
be read come first, then one error for the damage found; an index is checked against its
``.log`` with the checks ``verify`` runs (:mod:`compactlog.storage._segment_checks`).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator
from typing import Final

from compactlog.errors import (
    CompactlogError,
    CorruptRecordError,
    MalformedCheckpointError,
    StorageError,
    UnsupportedFileError,
)
from compactlog.records import (
    NO_SEQUENCE,
    BatchHeader,
    Compression,
    ControlRecordType,
    RecordBatch,
    TimestampType,
    decode_control_key,
    decode_end_txn_marker,
)
from compactlog.storage._file_checks import (
    _OFFSET_ENTRY,
    _STATE_SUFFIXES,
    _TIME_ENTRY,
    CHECKPOINT_FILES,
    LIVE_ATTEMPTS,
    TXN_ENTRY_SIZE,
    _crc_problem,
    _file_offset,
    _header_problem,
    _read_entries,
    _read_index_entries,
    _ReadOnlyFile,
    _walk,
    in_live_dir,
    is_live_active_segment_file,
    live_retry_delay,
)
from compactlog.storage._segment_checks import (
    Problem,
    _check_offset_index,
    _check_time_index,
    _scan_segment,
)
from compactlog.storage.checkpoint import parse_checkpoint
from compactlog.storage.file_records import FileBatch, WalkEnd
from compactlog.storage.producer_snapshot import decode_snapshot
from compactlog.storage.producer_state import decrement_sequence
from compactlog.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
)

#: Decompressed size allowed per batch when dumping records. Kafka's default max.message.bytes
#: is about 1 MiB; 256 MiB leaves room for topics that raise it while keeping a damaged (or
#: hostile) batch that claims gigabytes from exhausting memory.
MAX_DECOMPRESSED_PER_BATCH: Final = 256 << 20

_TXN_ENTRY = struct.Struct(">hqqqq")


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


def _batch_line(batch: FileBatch, valid: bool) -> str:
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


def _record_lines(batch: FileBatch, print_data: bool) -> Iterator[str]:
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


def _settled(dump: Callable[[str], Iterator[str]], path: str) -> Iterator[str]:
    """``dump(path)``; in a live directory, a dump that finds a problem is taken again (up to
    ``LIVE_ATTEMPTS`` looks) before the problem counts: the broker may be rolling or trimming the
    file while it is read. Only the last look streams its lines; the others are held back."""
    if in_live_dir(path):
        for attempt in range(LIVE_ATTEMPTS - 1):
            try:
                lines = list(dump(path))
            except CompactlogError:
                time.sleep(live_retry_delay(attempt))
                continue
            yield from lines
            return
    yield from dump(path)


def _dump_log(path: str, print_data: bool) -> Iterator[str]:
    base = _file_offset(path)
    if base is not None:
        yield f"Log starting offset: {base}"
    problems: list[str] = []
    end = WalkEnd()
    # A live broker's active segment may end in a batch being written: a reader stops there.
    appending = is_live_active_segment_file(path)
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
        if end.problem is not None and end.torn and appending:
            end.problem = None  # the batch being written, not a torn tail
        if end.problem is not None and end.torn:
            # Kafka's printTrailingBytes.
            name = os.path.basename(path)
            yield f"Found {file.size() - end.position} invalid bytes at the end of {name}"
    if end.problem is not None:
        problems.append(f"position {end.position}: {end.problem}")
    _raise_problems(path, problems, CorruptRecordError)


def _raise_problems(path: str, problems: list[str], error: type[CompactlogError]) -> None:
    if not problems:
        return
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    raise error(f"{path}: {problems[0]}{more}")


def _neighbour(path: str, suffix: str) -> str | None:
    base = _file_offset(path)
    if base is None:
        return None
    candidate = os.path.join(os.path.dirname(path), f"{base:020d}{suffix}")
    return candidate if os.path.isfile(candidate) else None


def _zero_tail(path: str) -> list[Problem] | None:
    """Where the zero entries ending an index go: a live active segment's pre-allocated space is
    expected (set aside, not reported); anywhere else they are a problem (None)."""
    return [] if is_live_active_segment_file(path) else None


def _dump_offset_index(path: str) -> Iterator[str]:
    base = _file_offset(path) or 0
    entries, length, zeros = _read_index_entries(path, _OFFSET_ENTRY)
    if not entries and not zeros:
        yield f"{path} is empty."
    for i, (relative, position) in enumerate(entries or [(0, 0)][:zeros]):
        if i > 0 and relative == 0:
            break  # Kafka stops at the first zero entry of a sparse (pre-allocated) file
        yield f"offset: {base + relative} position: {position}"
    log_path = _neighbour(path, LOG_SUFFIX)
    scan = _scan_segment(log_path, base) if log_path else None
    problems = [
        p.message if p.position is None else f"position {p.position}: {p.message}"
        for p in _check_offset_index(path, base, entries, length, scan, zeros, _zero_tail(path))
    ]
    _raise_problems(path, problems, CompactlogError)


def _dump_time_index(path: str) -> Iterator[str]:
    base = _file_offset(path) or 0
    entries, length, zeros = _read_index_entries(path, _TIME_ENTRY)
    # Unlike the offset index, Kafka's tool prints nothing at all for an empty time index.
    for i, (timestamp, relative) in enumerate(entries or [(0, 0)][:zeros]):
        if i > 0 and relative == 0:
            break
        yield f"timestamp: {timestamp} offset: {base + relative}"
    log_path = _neighbour(path, LOG_SUFFIX)
    scan = _scan_segment(log_path, base) if log_path else None
    problems = [
        p.message if p.position is None else f"position {p.position}: {p.message}"
        for p in _check_time_index(path, base, entries, length, scan, zeros, _zero_tail(path))
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


def _dump_producer_snapshot(path: str) -> Iterator[str]:
    """Kafka's ``dumpProducerIdSnapshot``: one line per producer (``currentTxnFirstOffset`` as
    Java prints an ``OptionalLong``; the last batch's fields only when it has one)."""
    with _ReadOnlyFile(path) as file:
        raw = file.read_all()
    for e in decode_snapshot(raw, path):
        txn = (
            "OptionalLong.empty"
            if e.current_txn_first_offset < 0
            else f"OptionalLong[{e.current_txn_first_offset}]"
        )
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.epoch} "
            f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: {txn} "
            f"lastTimestamp: {e.timestamp} "
        )
        if e.last_offset >= 0:
            line += (
                f"firstSequence: {decrement_sequence(e.last_sequence, e.offset_delta)} "
                f"lastSequence: {e.last_sequence} lastOffset: {e.last_offset} "
                f"offsetDelta: {e.offset_delta} timestamp: {e.timestamp}"
            )
        yield line


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
    ``.txnindex`` entries; ``.snapshot`` (producer state): one ``producerId: ...`` line per
    producer; offset checkpoint files: ``topic: T partition: P offset: O``.
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
        return _settled(_dump_offset_index, path)
    if kind == TIME_INDEX_SUFFIX:
        return _settled(_dump_time_index, path)
    if kind == TXN_INDEX_SUFFIX:
        return _dump_txn_index(path)
    if kind == SNAPSHOT_SUFFIX:
        return _dump_producer_snapshot(path)
    if kind in CHECKPOINT_FILES:
        return _dump_checkpoint(path)
    raise UnsupportedFileError(
        f"{path}: not a file dump-log reads (.log, .index, .timeindex, .txnindex, .snapshot or "
        "an offset checkpoint)"
    )


__all__ = [
    "UnsupportedFileError",
    "dump_log_file",
]
