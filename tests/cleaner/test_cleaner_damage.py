"""The cleaner and damaged segments: it never writes a cleaned segment that drops a record it
could not read.

Two partitions of a compacted topic get the same history: three segments of one-record batches,
a cleaning (the clean section), three more segments (the dirty section) and an active segment.
Then one batch of partition 0 is damaged on disk, while the store is open (so that what the
loader does with damage at open plays no part): a flipped byte that the CRC covers, in the dirty
section or in the last segment of the clean section (a later group than the first, so that a
cleaner checking group by group would already have swapped the first), or a header field the
CRC does not cover (the magic byte, the base offset, the length). Checked:

* the cleaning of partition 0 fails with an error naming the segment file and the position; its
  files are byte for byte as before (hashed), no ``.cleaned`` or ``.swap`` file exists;
* partition 1 is cleaned in the same run (the iterations of one ``LogManager.clean`` loop);
* the failure is retried after a growing back-off, never before it, with the attempt count in
  the result; after ``compactlog.cleaner.max.attempts`` failures the partition is uncleanable
  with the reason, and ``uncleanable-partitions-count`` says 1.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog.cleaner.service import CleanResult
from compactlog.errors import CorruptRecordError
from compactlog.log_manager import LogManager
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import close_managed, manager_of, open_managed

TOPIC = "t"
BAD = (TOPIC, 0)
GOOD = (TOPIC, 1)
BACKOFF_MS = 1000
BROKER = {
    "log.cleaner.dedupe.buffer.size": 2 * 1024 * 1024,
    "log.cleaner.backoff.ms": BACKOFF_MS,
    "compactlog.cleaner.max.attempts": 3,
}
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": 1200,
    "min.cleanable.dirty.ratio": 0.01,
    "segment.index.bytes": 4096,
    "index.interval.bytes": 128,
}
KEYS = 6


def batch_positions(path: str) -> list[int]:
    data = Path(path).read_bytes()
    positions, p = [], 0
    while p + 12 <= len(data):
        positions.append(p)
        p += 12 + struct.unpack_from(">i", data, p + 8)[0]
    return positions


def partition_hash(data: Path, partition: int) -> dict[str, str]:
    directory = data / f"{TOPIC}-{partition}"
    return {
        name: hashlib.sha256((directory / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(directory))
    }


def temporary_files(data: Path, partition: int) -> list[str]:
    names = os.listdir(data / f"{TOPIC}-{partition}")
    return sorted(n for n in names if n.endswith((".cleaned", ".swap")))


def write_segments(store: Store, start: int, count: int) -> None:
    for partition in (0, 1):
        for s in range(count):
            for i in range(12):
                n = start + s * 12 + i
                store.append(TOPIC, partition, [(b"k%d" % (n % KEYS), b"value-%05d" % n)])
            store.roll(TOPIC, partition)


def clean_until_idle(manager: LogManager, now: int) -> list[CleanResult]:
    results = []
    for _ in range(10):
        result = manager.clean(now)
        results.append(result)
        if result.cleaned is None:
            return results
    raise AssertionError(f"the cleaner never went idle: {results}")


@pytest.fixture
def damaged_store(tmp_path: Path, clock: ManualClock) -> Iterator[tuple[Store, Path]]:
    data = tmp_path / "data"
    store = open_managed(data, clock=clock, config=BROKER)
    store.create_topic(TOPIC, 2, TOPIC_CONFIG)
    write_segments(store, 0, 3)
    clean_until_idle(manager_of(store), clock.now)
    write_segments(store, 1000, 3)
    store.append(TOPIC, 0, [(b"active", b"a")])
    store.append(TOPIC, 1, [(b"active", b"a")])
    yield store, data
    close_managed(store)


def damage(store: Store, where: str) -> tuple[str, int]:
    """Damage one batch of partition 0; returns (segment file, position)."""
    checkpoint = manager_of(store).cleaner.manager.checkpoints()[BAD]
    segments = store.segments(*BAD)[:-1]  # not the active segment
    clean = [s for s in segments if s.base_offset < checkpoint]
    dirty = [s for s in segments if s.base_offset >= checkpoint]
    assert len(clean) >= 2 and len(dirty) >= 2, (clean, dirty)
    segment = clean[-1] if where.startswith("clean") else dirty[-1]
    positions = batch_positions(segment.path)
    p = positions[1]
    with open(segment.path, "r+b") as f:
        raw = bytearray(f.read())
        if where in ("dirty", "clean"):
            raw[p + 61 + 3] ^= 0x10  # inside the first record: covered by the CRC
        elif where == "dirty-magic":
            raw[p + 16] = 0xFF
        elif where == "clean-base-offset":
            raw[p : p + 8] = raw[positions[0] : positions[0] + 8]  # repeats the previous one
        elif where == "dirty-length":
            (length,) = struct.unpack_from(">i", raw, p + 8)
            struct.pack_into(">i", raw, p + 8, length - 4)
        else:  # pragma: no cover
            raise AssertionError(where)
        f.seek(0)
        f.write(raw)
    return segment.path, p


@pytest.mark.parametrize(
    "where", ["dirty", "clean", "dirty-magic", "clean-base-offset", "dirty-length"]
)
def test_damaged_batch_is_never_cleaned_away(
    damaged_store: tuple[Store, Path], clock: ManualClock, where: str
) -> None:
    store, data = damaged_store
    manager = manager_of(store)
    path, position = damage(store, where)
    before = partition_hash(data, 0)
    good_end = manager.cleaner.manager.checkpoints()[GOOD]

    # One run: partition 0 fails (and backs off), partition 1 is cleaned.
    results = clean_until_idle(manager, clock.now)
    failed = [r for r in results if BAD in r.failures]
    assert len(failed) == 1, results
    failure = failed[0].failures[BAD]
    assert failure.attempts == 1 and failure.io_errors == 0
    assert os.path.basename(path) in failure.reason and f"position {position}" in failure.reason
    assert failure.reason.startswith("CorruptRecordError"), failure.reason
    assert any(r.cleaned == GOOD and not r.failures for r in results), results
    assert manager.cleaner.manager.checkpoints()[GOOD] > good_end
    assert partition_hash(data, 0) == before and temporary_files(data, 0) == []

    # Not retried during the back-off; retried after it, the back-off doubling.
    assert clean_until_idle(manager, clock.now + BACKOFF_MS - 1)[0].cleaned is None
    clock.advance(BACKOFF_MS)
    second = manager.clean(clock.now)
    assert second.cleaned == BAD and second.failures[BAD].attempts == 2
    assert second.failures[BAD].retry_at_ms == clock.now + 2 * BACKOFF_MS
    assert manager.clean(clock.now + 2 * BACKOFF_MS - 1).cleaned is None
    clock.advance(2 * BACKOFF_MS)
    third = manager.clean(clock.now)
    assert third.cleaned == BAD and BAD not in third.failures
    reason = third.uncleanable[BAD]
    assert "(failed 3 attempts)" in reason and f"position {position}" in reason, reason
    assert manager.cleaner.gauges()["uncleanable-partitions-count"] == 1
    assert manager.cleaner.gauges()["compactlog-cleaner-retrying-partitions"] == 0

    # Uncleanable: never selected again; the bytes never changed.
    clock.advance(100 * BACKOFF_MS)
    assert clean_until_idle(manager, clock.now)[0].cleaned is None
    assert partition_hash(data, 0) == before and temporary_files(data, 0) == []


def test_cleaner_raises_corrupt_record_error_naming_file_and_position(
    damaged_store: tuple[Store, Path], clock: ManualClock
) -> None:
    """The cleaning itself (``clean_log``, on request) raises nothing to the caller but reports
    the CorruptRecordError; the Cleaner underneath raises it."""
    store, data = damaged_store
    path, position = damage(store, "clean")
    manager = manager_of(store)
    log = store.log(*BAD)
    checkpoint = manager.cleaner.manager.checkpoints()[BAD]
    cleaner = manager.cleaner._cleaners[0]
    before = partition_hash(data, 0)
    with pytest.raises(CorruptRecordError, match=rf"{os.path.basename(path)}.*position {position}"):
        cleaner.clean(log, checkpoint, store.segments(*BAD)[-1].base_offset, clock.now)
    assert partition_hash(data, 0) == before and temporary_files(data, 0) == []


def test_success_forgets_failures(damaged_store: tuple[Store, Path], clock: ManualClock) -> None:
    """A partition that fails, then cleans (the damaged bytes were repaired), starts counting
    afresh."""
    store, _ = damaged_store
    manager = manager_of(store)
    path, position = damage(store, "dirty")
    original = None
    with open(path, "rb") as f:
        original = f.read()
    clean_until_idle(manager, clock.now)
    assert BAD in manager.cleaner.manager.failures()
    # Repair: flip the byte back.
    raw = bytearray(original)
    raw[position + 61 + 3] ^= 0x10
    Path(path).write_bytes(raw)
    clock.advance(BACKOFF_MS)
    result = manager.clean(clock.now)
    assert result.cleaned == BAD and not result.failures and not result.uncleanable, result
    assert manager.cleaner.manager.failures() == {}
