"""``LogSegment.append``: Kafka 4.4's bookkeeping, one batch at a time, however they arrive.

``append`` runs Kafka's loop in Python; ``append_batches`` (the cleaner's) runs it vectorized
from 32 batches on: both must agree with each other and with the loop written out below.

Kafka 4.4's ``LogSegment.append`` walks the batches of an append: each raises the segment's
largest timestamp (with its last offset), then is indexed if more than ``index.interval.bytes``
were written since the last entry, then counts its bytes. The vectorized implementation must
give exactly what that loop gives, for one append of many batches as for many appends of one.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from compactlog.records import build_batch
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.segment import AppendedBatches, LogSegment, SegmentSettings

FILES = ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex")


def _segment(directory: Path, interval: int) -> LogSegment:
    directory.mkdir()
    settings = SegmentSettings(
        index_interval_bytes=interval,
        segment_index_bytes=10 * 1024,
        preallocate=False,
        segment_bytes=1 << 20,
    )
    return LogSegment(OsFileSystem(), str(directory), 0, settings, now_ms=0)


def _batches(rng: random.Random, count: int) -> list[bytes]:
    out, offset = [], 0
    for _ in range(count):
        n = rng.randint(1, 4)
        ts = [rng.randint(1000, 1100) for _ in range(n)]
        out.append(
            build_batch(
                [(b"k", b"v" * rng.randint(0, 300)) for _ in range(n)],
                base_offset=offset,
                timestamps=ts,
            )
        )
        offset += n + rng.randint(0, 3)  # compaction's gaps
    return out


def kafka_44_bookkeeping(batches: list[bytes], interval: int) -> tuple[list, list]:
    """The reference: Kafka 4.4's loop, batch by batch (offset and time index entries)."""
    offsets, times = [], []
    position, since, max_ts, max_ts_offset = 0, 0, -1, 0
    for batch in batches:
        base, length = struct.unpack_from(">qi", batch)
        (last_delta,) = struct.unpack_from(">i", batch, 23)
        (batch_max_ts,) = struct.unpack_from(">q", batch, 35)
        last = base + last_delta
        if batch_max_ts > max_ts:
            max_ts, max_ts_offset = batch_max_ts, last
        if since > interval:
            offsets.append((last, position))
            if not times or max_ts > times[-1][0]:
                times.append((max_ts, max_ts_offset))
            since = 0
        position += length + 12
        since += length + 12
    return offsets, times


@pytest.mark.parametrize("seed", range(12))
def test_one_append_of_many_batches_indexes_each_batch(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    interval = rng.choice([0, 1, 100, 250, 700, 4096])
    batches = _batches(rng, rng.randint(1, 90))  # both sides of the vectorizing threshold
    one_by_one = _segment(tmp_path / "appends", interval)
    for batch in batches:
        one_by_one.append(batch)
    together = _segment(tmp_path / "together", interval)
    cut = rng.randint(0, len(batches))
    for part in (b"".join(batches[:cut]), b"".join(batches[cut:])):
        # As the cleaner appends a region: many batches, the bookkeeping vectorized.
        together.append_batches(part, AppendedBatches.of(part))
    for segment in (one_by_one, together):
        segment.flush()
        segment.close()
    for name in FILES:
        assert (tmp_path / "appends" / name).read_bytes() == (
            tmp_path / "together" / name
        ).read_bytes(), name
    offsets, times = kafka_44_bookkeeping(batches, interval)
    index = (tmp_path / "together" / FILES[1]).read_bytes()
    assert [(rel, pos) for rel, pos in struct.iter_unpack(">ii", index)] == offsets
    time_index = (tmp_path / "together" / FILES[2]).read_bytes()
    entries = [(ts, rel) for ts, rel in struct.iter_unpack(">qi", time_index)]
    # Closing adds the final (largest timestamp, its offset) entry when it is new.
    assert entries[: len(times)] == times
    assert len(entries) - len(times) in (0, 1)
