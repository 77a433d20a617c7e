"""The cleaner's bulk path (regions, the compiled filter, latest-offset marks, the helper
thread) writes exactly what the record-by-record path writes, and reads segments in Kafka's
chunks, buffer growth included."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.offset_map import CompactOffsetMap, OffsetMap, SkimpyOffsetMap
from compactlog.cleaner.reads import CleanerBuffers, kafka_chunks
from compactlog.errors import CorruptRecordError
from compactlog.records import Compression, build_batch
from compactlog.storage.store import Store
from tests.conftest import ManualClock

T = "t"
BROKER = {"log.cleaner.dedupe.buffer.size": 2 << 20}
CODECS = ["none", "none", "none", "gzip", "lz4"]

batch_strategy = st.tuples(
    st.lists(
        st.tuples(st.integers(0, 12), st.booleans(), st.integers(0, 600)), min_size=1, max_size=8
    ),
    st.sampled_from(CODECS),
    st.booleans(),  # roll after it
    st.sampled_from([None, None, 7, 8]),  # an idempotent producer's batch (its last is kept)
)


def _files(directory: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name in sorted(os.listdir(os.path.join(directory, f"{T}-0"))):
        if name.endswith((".log", ".index", ".timeindex")):
            with open(os.path.join(directory, f"{T}-0", name), "rb") as f:
                out[name] = f.read()
    return out


def _clean_twice(directory: str, make: Callable[[ManualClock], Cleaner], now: int) -> None:
    """A full round (as many passes as the map needs) at ``now``, another after the horizon."""
    clock = ManualClock(now)
    store = Store.open(directory, clock, config=BROKER)
    try:
        log = store.log(T, 0)
        fuo = log.active_segment.base_offset
        cleaner = make(clock)
        for when in (now, now + 5_000):
            fdo = 0
            while fdo < fuo:
                end, _ = cleaner.clean(log, fdo, fuo, when)
                assert end > fdo
                fdo = end
    finally:
        store.close()


class _NoSpareSkimpy(SkimpyOffsetMap):
    spare_bytes = 0  # type: ignore[assignment]  # nothing for decoded regions: decode twice


class _NoSpareCompact(CompactOffsetMap):
    spare_bytes = 0  # type: ignore[assignment]


def _map(kind: str, slots: int, spare: bool = True) -> OffsetMap:
    if kind == "kafka":
        return (SkimpyOffsetMap if spare else _NoSpareSkimpy)(24 * slots)
    return (CompactOffsetMap if spare else _NoSpareCompact)(16 * slots)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    batches=st.lists(batch_strategy, min_size=1, max_size=25),
    segment_bytes=st.sampled_from([6000, 12_000, 100_000]),
    read_buffer=st.sampled_from([300, 1024, 262_144]),
    region=st.sampled_from([1, 2500, 8 << 20]),
    kind=st.sampled_from(["kafka", "compact"]),
    # Small maps take several passes; a large one takes one, with a table sized for the dirty
    # offsets and the rest of its memory holding the map pass's decoded regions for the copy.
    slots=st.sampled_from([6, 50, 100_000]),
)
def test_the_bulk_path_writes_what_the_record_by_record_path_writes(
    batches: list[tuple[list[tuple[int, bool, int]], str, bool, int | None]],
    segment_bytes: int,
    read_buffer: int,
    region: int,
    kind: str,
    slots: int,
) -> None:
    root = tempfile.mkdtemp(prefix="region-path-")
    try:
        now = 1_700_000_000_000
        base = os.path.join(root, "a")
        store = Store.open(base, ManualClock(now), config=BROKER)
        store.create_topic(
            T,
            1,
            {
                "cleanup.policy": "compact",
                "segment.bytes": segment_bytes,
                "delete.retention.ms": 1_000,
            },
        )
        sequences = {7: 0, 8: 0}
        for i, (records, codec, roll, producer) in enumerate(batches):
            rows = [
                (b"k%d" % k, None if tomb else bytes([65 + i % 26]) * size)
                for k, tomb, size in records
            ]
            if producer is None:
                store.append(T, 0, rows, compression=codec, timestamp=now - 10_000 + i)
            else:
                raw = build_batch(
                    rows,
                    timestamps=now - 10_000 + i,
                    compression=Compression.from_name(codec),
                    producer_id=producer,
                    producer_epoch=0,
                    base_sequence=sequences[producer],
                )
                store.append_batch(T, 0, raw)
                sequences[producer] += len(rows)
            if roll:
                store.roll(T, 0)
        store.roll(T, 0)
        store.close()
        buffers = CleanerBuffers(read_buffer, 1_048_588, region)
        variants: dict[str, Callable[[ManualClock], Cleaner]] = {
            "numba": lambda clock: Cleaner(0, _map(kind, slots), buffers=buffers, clock=clock),
            "python": lambda clock: Cleaner(
                0, _map(kind, slots), buffers=buffers, clock=clock, kernel="python"
            ),
        }

        def reference(clock: ManualClock) -> Cleaner:
            offset_map = _map(kind, slots, spare=False)
            offset_map.track_latest = lambda start, end: None  # type: ignore[method-assign]
            return Cleaner(0, offset_map, buffers=buffers, clock=clock, fast_path=False)

        variants["reference"] = reference
        results: dict[str, dict[str, bytes]] = {}
        for name, make in variants.items():
            directory = os.path.join(root, name)
            shutil.copytree(base, directory)
            _clean_twice(directory, make, now)
            results[name] = _files(directory)
        assert results["numba"] == results["reference"]
        assert results["python"] == results["reference"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- Kafka's read chunks ------------------------------------------------------------------------


def _segment(sizes: list[int]) -> memoryview:
    """Batches whose records sections are about ``sizes`` bytes, back to back."""
    parts = [build_batch([(b"k", b"x" * size)], base_offset=i) for i, size in enumerate(sizes)]
    return memoryview(b"".join(parts))


def _lengths(view: memoryview) -> list[int]:
    out, p = [], 0
    while p < len(view):
        size = int.from_bytes(view[p + 8 : p + 12], "big") + 12
        out.append(size)
        p += size
    return out


_BOTH_KERNELS = pytest.mark.parametrize("kernel", ["python", "numba"])


@_BOTH_KERNELS
def test_chunks_can_start_mid_segment(kernel: str) -> None:
    # The map pass starts at the first dirty offset's position, inside a segment.
    view = _segment([100] * 6)
    sizes = _lengths(view)
    start = 2 * sizes[0]
    buffers = CleanerBuffers(2 * sizes[0] + 5, 1_048_588)
    chunks = kafka_chunks(view, start, buffers, 1_048_588, "seg", kernel)
    assert chunks == [(start, start + 2 * sizes[0]), (start + 2 * sizes[0], len(view))]


@_BOTH_KERNELS
def test_a_batch_length_too_short_for_a_record_is_corrupt(kernel: str) -> None:
    raw = bytearray(_segment([100, 100]))
    second = _lengths(memoryview(bytes(raw)))[0]
    raw[second + 8 : second + 12] = (13).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match=f"batch at position {second} claims 25 bytes"):
        kafka_chunks(memoryview(bytes(raw)), 0, CleanerBuffers(), 1_048_588, "seg", kernel)


@_BOTH_KERNELS
def test_chunks_take_the_whole_batches_that_fit_the_read_buffer(kernel: str) -> None:
    view = _segment([100] * 10)
    size = _lengths(view)[0]
    buffers = CleanerBuffers(3 * size + 5, 1_048_588)
    chunks = kafka_chunks(view, 0, buffers, 1_048_588, "seg", kernel)
    assert [(e - s) // size for s, e in chunks] == [3, 3, 3, 1]
    assert chunks[0][0] == 0 and chunks[-1][1] == len(view)


@_BOTH_KERNELS
def test_a_grown_buffer_stays_grown_for_the_rest_of_the_segment(kernel: str) -> None:
    # 1 KiB buffer; a 1.5 KiB batch doubles it to 2 KiB (min(2 * capacity, max.message.bytes
    # or message.max.bytes)), and the following small batches are read 2 KiB at a time.
    view = _segment([1500, 300, 300, 300, 300, 300, 300, 300])
    sizes = _lengths(view)
    chunks = kafka_chunks(view, 0, CleanerBuffers(1024, 1_048_588), 1_048_588, "seg", kernel)
    # The re-read with 2 KiB takes the big batch and the small one after it.
    assert sizes[0] + sizes[1] <= 2048 < sizes[0] + sizes[1] + sizes[2]
    assert chunks[0] == (0, sizes[0] + sizes[1])
    second = chunks[1][1] - chunks[1][0]
    assert 1024 < second <= 2048
    assert second == sum(sizes[2 : 2 + 2048 // sizes[2]])


@_BOTH_KERNELS
def test_the_buffer_grows_to_the_batch_size_beyond_max_message_bytes(kernel: str) -> None:
    # capacity >= max.message.bytes (and message.max.bytes): Kafka grows to the batch's size.
    view = _segment([5000, 10])
    sizes = _lengths(view)
    chunks = kafka_chunks(view, 0, CleanerBuffers(1024, 1024), 1024, "seg", kernel)
    assert chunks == [(0, sizes[0]), (sizes[0], sizes[0] + sizes[1])]


@_BOTH_KERNELS
def test_a_batch_claiming_more_than_the_segment_holds_is_corrupt(kernel: str) -> None:
    raw = bytearray(_segment([100]))
    raw[8:12] = (10_000).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="claims"):
        kafka_chunks(memoryview(bytes(raw)), 0, CleanerBuffers(), 1_048_588, "seg", kernel)


@_BOTH_KERNELS
def test_trailing_bytes_shorter_than_a_batch_header_are_corrupt(kernel: str) -> None:
    view = memoryview(bytes(_segment([100])) + b"\0" * 5)
    with pytest.raises(CorruptRecordError, match="trailing"):
        kafka_chunks(view, 0, CleanerBuffers(), 1_048_588, "seg", kernel)
