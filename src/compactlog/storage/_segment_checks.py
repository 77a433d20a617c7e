"""The checks of one segment and its indexes, shared by ``verify`` and ``dump-log``: the walk
over a ``.log`` file with its offset and epoch checks (:func:`_scan_segment`), and the offset
and time index checks against that walk. What is checked, and why, is the theory of operation
in :mod:`compactlog.storage.verify`.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Final

from compactlog.storage._file_checks import (
    _crc_problem,
    _header_problem,
    _ReadOnlyFile,
    _walk,
)
from compactlog.storage.file_records import WalkEnd
from compactlog.storage.index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE
from compactlog.storage.salvage import MAX_RELATIVE_OFFSET

#: Problems reported per file before the rest are only counted (a zero-filled 10 MiB index has
#: 1.3 million bad entries; one line per entry helps nobody).
MAX_PROBLEMS_PER_FILE: Final = 10
#: Leader epoch meaning "unknown" (Kafka's NO_PARTITION_LEADER_EPOCH).
NO_EPOCH: Final = -1


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
    """Walk one segment and check every batch and its offsets (see the theory of operation in
    :mod:`compactlog.storage.verify`)."""
    scan = _SegmentScan(path, base_offset)
    found = _FileProblems(path)
    end = WalkEnd()
    with _ReadOnlyFile(path) as file:
        scan.size = file.size()
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


def _check_length_and_zero_tail(
    found: _FileProblems,
    entries: list[tuple[int, int]],
    length: int,
    entry_size: int,
    zero_entries: int,
    zero_tail: list[Problem] | None,
) -> list[tuple[int, int]]:
    """The checks both index kinds share: the file holds a whole number of entries, and no
    zero entries at its end (``zero_entries`` more after ``entries``, as
    :func:`~compactlog.storage._file_checks._read_index_entries` counts them; reported in
    ``zero_tail`` instead when it is a list: a crashed writer's pre-allocated space). Returns
    the entries before the zero tail, the ones to check further."""
    if length % entry_size:
        found.add(None, f"length {length} is not a multiple of the entry size {entry_size}")
    zeros = _zero_tail(entries)
    total = len(entries) + zero_entries
    zeros += zero_entries
    if zeros:
        first = total - zeros
        message = (
            f"entries {first}-{total - 1} are zero: pre-allocated space never trimmed "
            "(the store did not close cleanly) or zero-filled damage"
        )
        if zero_tail is None:
            found.add(first * entry_size, message)
        else:
            zero_tail.append(Problem(found.path, first * entry_size, message))
        entries = entries[:first]
    return entries


def _check_offset_index(
    path: str,
    base: int,
    entries: list[tuple[int, int]],
    length: int,
    scan: _SegmentScan | None,
    zero_entries: int = 0,
    zero_tail: list[Problem] | None = None,
) -> list[Problem]:
    found = _FileProblems(path)
    entries = _check_length_and_zero_tail(
        found, entries, length, OFFSET_ENTRY_SIZE, zero_entries, zero_tail
    )
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
    zero_entries: int = 0,
    zero_tail: list[Problem] | None = None,
) -> list[Problem]:
    found = _FileProblems(path)
    entries = _check_length_and_zero_tail(
        found, entries, length, TIME_ENTRY_SIZE, zero_entries, zero_tail
    )
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
