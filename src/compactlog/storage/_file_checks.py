"""What ``dump-log`` and ``verify`` share: a file opened ``O_RDONLY``, the one batch walk
(:func:`~compactlog.storage.file_records.iter_file_batches`) with its stop recorded, the CRC and
header checks of a batch, and the entries of index files.

Nothing here writes, renames or locks, so inspection works on a read-only copy and leaves a
damaged data directory as it is on disk.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from typing import Any, Final

from compactlog.errors import StorageError
from compactlog.records import (
    BatchHeader,
    compute_crc,
)
from compactlog.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)
from compactlog.storage.file_records import FileBatch, WalkEnd, iter_file_batches
from compactlog.storage.segment import CLEANED_SUFFIX, DELETED_SUFFIX, SALVAGED_SUFFIX, SWAP_SUFFIX

#: Bytes read from a ``.log`` file at a time; a batch larger than this is read whole.
READ_CHUNK: Final = 4 << 20
#: Kafka's ``AbortedTxn.TOTAL_SIZE``: version, producer id, first, last and last stable offset.
TXN_ENTRY_SIZE: Final = 34

CHECKPOINT_FILES: Final = frozenset(
    {
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        CLEANER_OFFSET_CHECKPOINT,
        "replication-offset-checkpoint",
    }
)
_STATE_SUFFIXES: Final = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, SALVAGED_SUFFIX)
_SEGMENT_FILE: Final = re.compile(r"([0-9]{20})(\.[a-z]+)")

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


# --------------------------------------------------------------------------------------------
# Read-only file access


class _ReadOnlyFile:
    """A file opened ``O_RDONLY``: positional reads only, so inspection can never write."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY)
            self._size = os.fstat(self._fd).st_size
        except OSError as exc:
            raise StorageError(f"cannot open {path}: {exc.strerror or exc}") from exc

    def read_at(self, position: int, size: int) -> bytes:
        try:
            return os.pread(self._fd, size, position)
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc.strerror or exc}") from exc

    def size(self) -> int:
        """The file's length when it was opened."""
        return self._size

    def read_all(self) -> bytes:
        return self.read_at(0, self._size)

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


# --------------------------------------------------------------------------------------------
# Is a process holding the data directory?

#: The data directory's lock file (``compactlog.storage.datadir.LOCK_FILE``, a module of this
#: layer, which this one may not import; a test keeps the two equal).
DATA_DIR_LOCK_FILE: Final = ".lock"
_PROC_LOCKS: Final = "/proc/locks"


def lock_holder(data_dir: str) -> int | None:
    """The id of the process that holds ``data_dir``'s lock (a broker, the CLI or a job has the
    directory open), or None: no lock file, nobody holds it, or no ``/proc/locks`` to tell.

    Read from ``/proc/locks`` (Linux): trying the lock instead would take it for a moment, and a
    broker starting at that moment would find its directory "in use"."""
    try:
        st = os.stat(os.path.join(data_dir, DATA_DIR_LOCK_FILE))
        with open(_PROC_LOCKS, encoding="ascii", errors="replace") as f:
            table = f.read()
    except OSError:
        return None
    wanted = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in table.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:10281017 0 EOF"; a waiter's line has "->".
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK" or "->" in fields:
            continue
        device = fields[5].split(":")
        try:
            if (
                len(device) == 3
                and (int(device[0], 16), int(device[1], 16), int(device[2])) == wanted
            ):
                return int(fields[4])
        except ValueError:
            continue
    return None


#: A file of a live directory that shows a problem is read again this many times in all, after
#: :func:`live_retry_delay`: the broker may be appending, rolling (a new segment's indexes being
#: sized, the old one's trimmed) or cleaning while it is read, and what is only in passing is
#: gone on a later look. The looks span 0.75 s at most.
LIVE_ATTEMPTS: Final = 5
LIVE_RETRY_S: Final = 0.05


def live_retry_delay(attempt: int) -> float:
    """Seconds before look ``attempt + 1``: 0.05, 0.1, 0.2, 0.4."""
    return float(LIVE_RETRY_S * 2**attempt)


def in_live_dir(path: str) -> bool:
    """Whether ``path``, a file of a partition directory, is in a data directory a process
    holds (:func:`lock_holder`)."""
    partition_dir = os.path.dirname(os.path.abspath(path))
    return lock_holder(os.path.dirname(partition_dir)) is not None


def is_live_active_segment_file(path: str) -> bool:
    """Whether ``path`` (a segment's ``.log`` or index file) belongs to the last segment of its
    partition directory while a process holds the data directory: the active segment, being
    appended to, whose indexes Kafka and compactlog pre-allocate (``segment.index.bytes``),
    zero-filled beyond their entries."""
    base = _file_offset(path)
    partition_dir = os.path.dirname(os.path.abspath(path))
    if base is None or not in_live_dir(path):
        return False
    try:
        names = os.listdir(partition_dir)
    except OSError:
        return False
    bases = [_file_offset(n) for n in names if n.endswith(".log")]
    return base == max((b for b in bases if b is not None), default=None)


# --------------------------------------------------------------------------------------------
# Walking the batches of a .log file: the one walk, with its stop recorded


def _walk(file: _ReadOnlyFile, end: WalkEnd) -> Iterator[FileBatch]:
    """Every framed batch of ``file`` (:func:`~compactlog.storage.file_records.iter_file_batches`
    with a :class:`WalkEnd`): ``end`` says where the walk stopped and why. Anything after the
    first failure is unreachable for a reader, so the walk stops there."""
    return iter_file_batches(file, chunk_size=READ_CHUNK, stop=end)


def _crc_problem(batch: FileBatch) -> str | None:
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
# Index files


def _read_entries(path: str, entry: struct.Struct) -> tuple[Iterator[tuple[Any, ...]], int]:
    """The whole entries of an index file (a partial last entry is ignored, as Kafka does)."""
    with _ReadOnlyFile(path) as file:
        raw = file.read_all()
    whole = len(raw) - len(raw) % entry.size
    return entry.iter_unpack(raw[:whole]), len(raw)


def _read_index_entries(path: str, entry: struct.Struct) -> tuple[list[tuple[int, int]], int, int]:
    """Offset or time index entries as pairs, up to the all-zero entries at the end; the file
    length; and how many all-zero entries end it. A pre-allocated index holds a million of
    those: counted from the bytes, never unpacked one by one."""
    with _ReadOnlyFile(path) as file:
        raw = file.read_all()
    whole = len(raw) - len(raw) % entry.size
    used = len(raw[:whole].rstrip(b"\0"))
    used += -used % entry.size  # up to the end of the entry holding the last non-zero byte
    entries = [(a, b) for a, b in entry.iter_unpack(raw[:used])]
    return entries, len(raw), (whole - used) // entry.size
