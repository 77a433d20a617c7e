"""Walking a ``.log`` file past damage: every valid batch, and the damaged byte ranges between.

:func:`~compactlog.storage.file_records.iter_file_batches` frames batches and stops at the first
byte that is not a batch. Recovery and ``compactlog salvage`` need more: after a damaged batch
there may be thousands of intact ones, and on a single node they are the only copy of
acknowledged records. :func:`salvage_walk` therefore checks each batch fully (framing, magic 2,
CRC-32C, offsets above the previous batch and within the segment's 32-bit relative range) and,
at the first one that fails, searches forward for the next position where a batch passes every
check, reports the bytes in between as a :class:`DamagedRange`, and goes on from there.

A candidate is accepted only if all of these hold, so random bytes almost never pass (the CRC
alone leaves a chance of 2^-32 per candidate that already has a plausible offset and length):

* the magic byte (position + 16) is 2;
* the base offset is at least the next offset after the last valid batch, and the last offset
  lies within ``[segment base, segment base + 2^31 - 1]``;
* the length field gives a size of at least 61 bytes that fits before the end of the range;
* the stored CRC-32C matches the bytes it covers.

Damage that runs to the end of the range is a *tail*; when every byte of it is zero it is
pre-allocated space (``preallocate=true``) or a write whose data never reached the disk, holds
nothing anyone wrote, and is reported with ``zeros=True`` so that callers need not keep it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np

from compactlog.records import (
    LOG_OVERHEAD,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    compute_crc,
)
from compactlog.records.batch_header import CRC_STRUCT
from compactlog.storage.file_records import FileBatch, ReadableFile, WalkEnd, iter_file_batches

#: The largest offset a segment can hold relative to its base (Kafka's relative offsets are 32-bit).
MAX_RELATIVE_OFFSET: Final = 2**31 - 1
_MAGIC_POSITION: Final = 16
_CRC_POSITION: Final = 17
_LAST_DELTA_POSITION: Final = 23
_HEAD = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
#: Bytes searched per read while looking for the next valid batch.
_SEARCH_CHUNK: Final = 8 << 20


@dataclass(frozen=True)
class DamagedRange:
    """Bytes ``[start, end)`` of a ``.log`` file that hold no valid batch."""

    start: int
    end: int
    #: Why the batch at ``start`` was refused (framing, magic, CRC or offsets).
    reason: str
    #: The offset the next valid batch would have to start at or after (the damaged bytes held
    #: offsets from here, up to the next valid batch's base offset when there is one).
    first_offset: int
    #: The next valid batch's base offset (None: the damage runs to the end of the range).
    next_valid_offset: int | None
    #: Every byte of the range is zero (pre-allocated space, or data that never reached the disk).
    zeros: bool = False

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def tail(self) -> bool:
        return self.next_valid_offset is None


def _problem(
    batch: FileBatch, next_offset: int, base_offset: int, end_offset: int | None
) -> str | None:
    """Why a framed batch is not valid here, or None."""
    data, header = batch.data, batch.header
    if len(data) < RECORD_BATCH_OVERHEAD:
        return f"batch size {len(data)} is below the v2 minimum {RECORD_BATCH_OVERHEAD}"
    stored = CRC_STRUCT.unpack_from(data, _CRC_POSITION)[0]
    computed = compute_crc(data, 0, len(data))
    if stored != computed:
        return f"CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"
    if header.base_offset < next_offset:
        return f"base offset {header.base_offset} goes back below {next_offset}"
    if not 0 <= header.last_offset - base_offset <= MAX_RELATIVE_OFFSET:
        return (
            f"last offset {header.last_offset} is outside the segment's range from base offset "
            f"{base_offset}"
        )
    if header.last_offset < header.base_offset:
        return f"last offset {header.last_offset} is below base offset {header.base_offset}"
    if end_offset is not None and header.last_offset >= end_offset:
        return f"last offset {header.last_offset} reaches the next segment's base {end_offset}"
    return None


def salvage_walk(
    handle: ReadableFile,
    base_offset: int,
    start: int = 0,
    end: int | None = None,
    *,
    next_offset: int | None = None,
    end_offset: int | None = None,
) -> Iterator[FileBatch | DamagedRange]:
    """Every valid batch of ``[start, end)`` in file order, with a :class:`DamagedRange` for
    each stretch of bytes between them that holds none (see the module docstring).

    ``base_offset`` is the segment's; ``next_offset`` the smallest base offset a batch at
    ``start`` may have (the segment's base offset by default); ``end_offset``, when known (the
    next segment's base offset), bounds every batch's last offset.

    The base offset is the one field outside the CRC that a reader trusts, so a batch is only
    handed out once the batch after it agrees. When the batch after goes back below its next
    offset, one of the two base offsets is damaged: the batch's own when the batch after follows
    on exactly from it as it would be had it started where its predecessor ended (its offset
    count, ``lastOffsetDelta``, is CRC-covered), otherwise the later one's.
    """
    limit = handle.size() if end is None else end
    position = start
    confirmed = base_offset if next_offset is None else next_offset
    pending: FileBatch | None = None
    while position < limit:
        walk = WalkEnd()
        reason: str | None = None
        for batch in iter_file_batches(handle, position, limit, stop=walk):
            header = batch.header
            reason = _problem(batch, confirmed, base_offset, end_offset)
            if reason is None and pending is not None:
                if header.base_offset >= pending.header.next_offset:
                    yield pending
                    confirmed = pending.header.next_offset
                elif header.base_offset != confirmed + (
                    pending.header.last_offset - pending.header.base_offset + 1
                ):
                    # This batch would not follow on from the batch before even if that one
                    # started where its predecessor ended (its offset count is CRC-covered):
                    # this batch's own base offset is the damaged field.
                    reason = (
                        f"base offset {header.base_offset} goes back below "
                        f"{pending.header.next_offset}"
                    )
                else:
                    yield DamagedRange(
                        pending.position,
                        batch.position,
                        f"base offset {pending.header.base_offset} does not fit between its "
                        f"neighbours (the batch before ends at {confirmed - 1}, the batch "
                        f"after starts at {header.base_offset})",
                        confirmed,
                        header.base_offset,
                    )
            if reason is not None:
                if pending is not None:
                    yield pending
                    confirmed = pending.header.next_offset
                    pending = None
                    reason = _problem(batch, confirmed, base_offset, end_offset)
                if reason is not None:
                    position = batch.position
                    break
            pending = batch
            position = batch.position + len(batch.data)
        else:
            if pending is not None:
                yield pending
                confirmed = pending.header.next_offset
                pending = None
            if walk.problem is None:
                return
            position, reason = walk.position, walk.problem
        found = _next_valid(handle, position + 1, limit, confirmed, base_offset)
        if found is None:
            yield DamagedRange(
                position, limit, reason, confirmed, None, _all_zero(handle, position, limit)
            )
            return
        found_position, found_base = found
        yield DamagedRange(position, found_position, reason, confirmed, found_base)
        position = found_position


def _next_valid(
    handle: ReadableFile, start: int, end: int, next_offset: int, base_offset: int
) -> tuple[int, int] | None:
    """(position, base offset) of the first position in ``[start, end)`` where a valid batch
    starts, or None."""
    position = start
    while end - position >= RECORD_BATCH_OVERHEAD:
        chunk = handle.read_at(position, min(_SEARCH_CHUNK, end - position))
        for candidate in _candidates(chunk, next_offset, base_offset):
            at = position + candidate
            _, length = _HEAD.unpack_from(chunk, candidate)
            size = length + LOG_OVERHEAD
            if at + size > end:
                continue
            if candidate + size <= len(chunk):
                data = chunk[candidate : candidate + size]
            else:
                data = handle.read_at(at, size)
            stored = CRC_STRUCT.unpack_from(data, _CRC_POSITION)[0]
            if stored != compute_crc(data, 0, size):
                continue
            first = _HEAD.unpack_from(data, 0)[0]
            last = first + _LAST_DELTA.unpack_from(data, _LAST_DELTA_POSITION)[0]
            if first <= last <= base_offset + MAX_RELATIVE_OFFSET:
                return at, first
        # Candidates may start in the last RECORD_BATCH_OVERHEAD - 1 bytes of this chunk with
        # their header cut off: the next read starts there again.
        if position + len(chunk) >= end:
            return None
        position += len(chunk) - (RECORD_BATCH_OVERHEAD - 1)
    return None


def _candidates(chunk: bytes, next_offset: int, base_offset: int) -> list[int]:
    """Positions in ``chunk`` whose header fields are plausible (magic 2, base offset and
    length in range), in order; the CRC is the caller's to check."""
    data = np.frombuffer(chunk, np.uint8)
    n = len(data) - RECORD_BATCH_OVERHEAD + 1
    if n <= 0:
        return []
    positions = np.flatnonzero(data[_MAGIC_POSITION : _MAGIC_POSITION + n] == MAGIC_V2)
    if not len(positions):
        return []
    base = np.zeros(len(positions), np.uint64)
    for k in range(8):
        base = (base << np.uint64(8)) | data[positions + k].astype(np.uint64)
    length = np.zeros(len(positions), np.uint64)
    for k in range(8, 12):
        length = (length << np.uint64(8)) | data[positions + k].astype(np.uint64)
    low = np.uint64(max(next_offset, 0))
    high = np.uint64(base_offset + MAX_RELATIVE_OFFSET)
    ok = (base >= low) & (base <= high)
    ok &= (length >= np.uint64(RECORD_BATCH_OVERHEAD - LOG_OVERHEAD)) & (length < np.uint64(2**31))
    return [int(p) for p in positions[ok]]


def _all_zero(handle: ReadableFile, start: int, end: int) -> bool:
    position = start
    while position < end:
        chunk = handle.read_at(position, min(_SEARCH_CHUNK, end - position))
        if not chunk or np.frombuffer(chunk, np.uint8).any():
            return False
        position += len(chunk)
    return True
