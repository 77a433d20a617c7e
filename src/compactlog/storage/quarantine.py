"""Quarantine: damaged bytes kept beside their partition instead of being cut away.

When recovery or ``compactlog salvage`` must remove bytes from a ``.log`` file (a torn tail after
an unclean shutdown, a damaged batch anywhere), the bytes are first copied to a quarantine file
in the partition directory, named after the segment and the position they came from::

    00000000000000000000.log.corrupt-360         the bytes [360, 360 + size) of that .log
    00000000000000000000.log.corrupt-360.json    where they came from and why they were cut

Both are written to a temporary name, fsynced and renamed, and the directory is fsynced, all
before the ``.log`` file is changed: a crash in between leaves the damaged bytes in the ``.log``
and (possibly) a second copy here, never neither. If a file of that name already holds other
bytes, the new one gets a ``-2``, ``-3``... suffix; a copy that already holds the same bytes (the
same cut, repeated after a crash) is reused.

Kafka's loader ignores these names (they end neither in ``.log`` nor in an index suffix), so a
Kafka broker opens a directory that has them. Only an operator deletes them
(``compactlog quarantine delete``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Final

from compactlog.errors import StorageError
from compactlog.storage.fs import FileHandle, FileSystem, write_file_atomically
from compactlog.storage.salvage import DamagedRange

QUARANTINE_MARK: Final = ".corrupt-"
METADATA_SUFFIX: Final = ".json"
_COPY_CHUNK: Final = 8 << 20


@dataclass(frozen=True)
class QuarantinedRange:
    """One quarantine file and what its metadata says about it."""

    #: The quarantine file (its metadata is this path plus ``.json``).
    path: str
    #: The ``.log`` file name the bytes were cut from.
    log_file: str
    start: int
    end: int
    reason: str
    #: The first offset the damaged bytes may have held.
    first_offset: int
    #: The base offset of the first valid batch after them (None: they ran to the file's end).
    next_valid_offset: int | None
    quarantined_ms: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def offsets(self) -> str:
        """The offsets the damaged bytes covered, as far as they are known."""
        if self.next_valid_offset is None:
            return f"{self.first_offset} and after"
        if self.next_valid_offset <= self.first_offset:
            return "none"
        return f"{self.first_offset}..{self.next_valid_offset - 1}"


def is_quarantine_file(name: str) -> bool:
    """Whether a partition directory entry is a quarantine file or its metadata."""
    return QUARANTINE_MARK in name


def _same_bytes(fs: FileSystem, path: str, source: FileHandle, start: int, size: int) -> bool:
    if fs.file_size(path) != size:
        return False
    existing = fs.open(path)
    try:
        position = 0
        while position < size:
            n = min(_COPY_CHUNK, size - position)
            if existing.read_at(position, n) != source.read_at(start + position, n):
                return False
            position += n
        return True
    finally:
        existing.close()


def quarantine_range(
    fs: FileSystem, source: FileHandle, log_path: str, damage: DamagedRange, now_ms: int
) -> QuarantinedRange:
    """Copy ``damage``'s bytes of the open ``.log`` file ``source`` to a quarantine file, durably
    (file, metadata and directory fsynced), and return its description."""
    directory, log_file = os.path.split(log_path)
    stem = os.path.join(directory, f"{log_file}{QUARANTINE_MARK}{damage.start}")
    path, n = stem, 1
    while fs.exists(path):
        if _same_bytes(fs, path, source, damage.start, damage.size):
            break
        n += 1
        path = f"{stem}-{n}"
    else:
        tmp = path + ".tmp"
        out = fs.open(tmp, create=True)
        try:
            out.truncate(0)
            position = 0
            while position < damage.size:
                chunk = source.read_at(
                    damage.start + position, min(_COPY_CHUNK, damage.size - position)
                )
                if not chunk:
                    raise StorageError(
                        f"{log_path}: could not read bytes {damage.start + position}.."
                        f"{damage.end} to quarantine them"
                    )
                out.write_at(position, chunk)
                position += len(chunk)
            out.sync()
        finally:
            out.close()
        fs.rename(tmp, path)
    described = QuarantinedRange(
        path,
        log_file,
        damage.start,
        damage.end,
        damage.reason,
        damage.first_offset,
        damage.next_valid_offset,
        now_ms,
    )
    metadata = {k: v for k, v in asdict(described).items() if k != "path"}
    write_file_atomically(
        fs, path + METADATA_SUFFIX, (json.dumps(metadata, indent=2) + "\n").encode()
    )
    return described


def list_quarantined(fs: FileSystem, directory: str) -> list[QuarantinedRange]:
    """The quarantine files of a partition directory, by file then position.

    A quarantine file whose metadata is missing or unreadable is still listed (with what its
    name tells: the ``.log`` file and the start position) so that no kept byte goes unseen.
    """
    found: list[QuarantinedRange] = []
    names = fs.listdir(directory) if fs.is_dir(directory) else []
    for name in names:
        if not is_quarantine_file(name) or name.endswith((METADATA_SUFFIX, ".tmp")):
            continue
        path = os.path.join(directory, name)
        log_file, _, tail = name.partition(QUARANTINE_MARK)
        start = int(tail.split("-", 1)[0]) if tail.split("-", 1)[0].isdigit() else 0
        size = fs.file_size(path)
        try:
            meta = json.loads(fs.read_file(path + METADATA_SUFFIX))
            found.append(
                QuarantinedRange(
                    path,
                    str(meta["log_file"]),
                    int(meta["start"]),
                    int(meta["end"]),
                    str(meta["reason"]),
                    int(meta["first_offset"]),
                    None if meta["next_valid_offset"] is None else int(meta["next_valid_offset"]),
                    int(meta["quarantined_ms"]),
                )
            )
        except (StorageError, OSError, ValueError, KeyError, TypeError):
            found.append(
                QuarantinedRange(
                    path,
                    log_file,
                    start,
                    start + size,
                    "metadata missing or unreadable",
                    -1,
                    None,
                    fs.mtime_ms(path),
                )
            )
    return sorted(found, key=lambda q: (q.log_file, q.start, q.path))


def list_data_dir(fs: FileSystem, path: str) -> dict[str, list[QuarantinedRange]]:
    """The quarantine files of every partition directory of a data directory, by directory
    name (only directories that have some); reads directory listings and metadata only."""
    found: dict[str, list[QuarantinedRange]] = {}
    for name in sorted(fs.listdir(path)):
        directory = os.path.join(path, name)
        if name.startswith(".") or not fs.is_dir(directory):
            continue
        ranges = list_quarantined(fs, directory)
        if ranges:
            found[name] = ranges
    return found


def delete_quarantined(fs: FileSystem, path: str) -> None:
    """Delete a quarantine file and its metadata (an operator's explicit decision)."""
    if not is_quarantine_file(os.path.basename(path)) or path.endswith(METADATA_SUFFIX):
        raise StorageError(f"{path} is not a quarantine file")
    if not fs.exists(path):
        raise StorageError(f"quarantine file {path} does not exist")
    fs.remove(path)
    fs.remove(path + METADATA_SUFFIX)
    fs.sync_dir(os.path.dirname(path) or ".")
