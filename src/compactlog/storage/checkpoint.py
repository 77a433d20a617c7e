"""Offset checkpoint files, in Kafka's text format (spec 1.4).

``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``cleaner-offset-checkpoint`` all look like this::

    0                  <- format version, always 0
    2                  <- number of entry lines
    orders 3 4182      <- "<topic> <partition> <offset>"
    payments 0 77

Writes go through :func:`~compactlog.storage.fs.write_file_atomically` (``.tmp``, fsync, rename,
directory fsync), so a reader sees the old content or the new content, never a mixture.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from compactlog.errors import MalformedCheckpointError
from compactlog.storage.fs import FileSystem, write_file_atomically

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]


_INT = re.compile(r"[+-]?[0-9]+")


def format_checkpoint(entries: Mapping[TopicPartition, int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    for (topic, partition), offset in entries.items():
        if not topic or any(c.isspace() for c in topic):
            raise ValueError(f"topic {topic!r} cannot be written to a checkpoint file")
        lines.append(f"{topic} {partition} {offset}")
    return ("\n".join(lines) + "\n").encode()


def _parse_int(text: str, bits: int, what: str, name: str, line: str) -> int:
    if not _INT.fullmatch(text):
        raise MalformedCheckpointError(f"{name}: malformed {what} in line {line!r}")
    value = int(text)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise MalformedCheckpointError(f"{name}: {what} out of range in line {line!r}")
    return value


def parse_checkpoint(data: bytes, name: str = "checkpoint") -> dict[TopicPartition, int]:
    """Parse a checkpoint with Kafka's rules: an empty file, or one without a count line, has no
    entries; anything else that is not exactly the format raises."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedCheckpointError(f"{name}: not UTF-8 text") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    if not lines:
        return {}
    version = lines[0].strip()
    if version != str(CHECKPOINT_VERSION):
        raise MalformedCheckpointError(f"{name}: unrecognised version {version!r}")
    if len(lines) < 2:
        return {}
    expected = _parse_int(lines[1].strip(), 32, "entry count", name, lines[1])
    entries: dict[TopicPartition, int] = {}
    body = lines[2:]
    for line in body:
        fields = line.split()
        if len(fields) != 3:
            raise MalformedCheckpointError(f"{name}: malformed line {line!r}")
        partition = _parse_int(fields[1], 32, "partition", name, line)
        entries[(fields[0], partition)] = _parse_int(fields[2], 64, "offset", name, line)
    if len(body) != expected:
        raise MalformedCheckpointError(f"{name}: expected {expected} entries but found {len(body)}")
    return entries


class OffsetCheckpointFile:
    """One checkpoint file in a log directory."""

    def __init__(self, fs: FileSystem, directory: str, name: str) -> None:
        self.fs = fs
        self.name = name
        self.path = os.path.join(directory, name)

    def read(self) -> dict[TopicPartition, int]:
        """The entries; a missing file reads as empty. Malformed content raises."""
        if not self.fs.exists(self.path):
            return {}
        return parse_checkpoint(self.fs.read_file(self.path), self.name)

    def write(self, entries: Mapping[TopicPartition, int]) -> None:
        write_file_atomically(self.fs, self.path, format_checkpoint(entries))
