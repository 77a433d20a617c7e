"""Finding 7 of issue 17: a sparse 512 MiB ``.index`` took 8.6 s and 2.5 GB to open. An index
file longer than ``segment.index.bytes`` allows is now damage found without reading it, and the
index is rebuilt from its log; every record stays readable with its offset."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from compactlog.errors import CorruptIndexError
from compactlog.records import RECORD_BATCH_OVERHEAD
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.index import OFFSET_ENTRY_SIZE, OffsetIndex, TimeIndex
from compactlog.storage.store import Store

CLOCK = 1_700_000_000_000
SPARSE = 512 * 2**20
DEFAULT_INDEX_BYTES = 10 * 2**20


class ReadsRecorded(OsFileSystem):
    """The filesystem, noting the size of every whole-file read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, int]] = []

    def read_file(self, path: str) -> bytes:
        data = super().read_file(path)
        self.reads.append((path, len(data)))
        return data


def make_store(data: Path, config: dict[str, object] | None = None) -> None:
    """30 one-record batches in a sealed segment, one more in the active one, closed cleanly."""
    with Store.open(data, clock=lambda: CLOCK) as store:
        store.create_topic(
            "t", 1, {"cleanup.policy": "compact", "index.interval.bytes": 100, **(config or {})}
        )
        for i in range(30):
            store.append("t", 0, [(b"k%d" % (i % 7), b"v%d" % i)], timestamp=CLOCK + i)
        store.roll("t", 0)
        store.append("t", 0, [(b"k0", b"last")], timestamp=CLOCK + 30)


def reopen_and_read(data: Path) -> tuple[list[tuple[int, bytes | None]], ReadsRecorded, float]:
    fs = ReadsRecorded()
    started = time.monotonic()
    with Store.open(data, clock=lambda: CLOCK, fs=fs) as store:
        elapsed = time.monotonic() - started
        records = [(r.offset, r.value) for r in store.read("t", 0)]
    return records, fs, elapsed


EXPECTED = [(i, b"v%d" % i) for i in range(30)] + [(30, b"last")]


@pytest.mark.parametrize(
    ("segment", "suffix"),
    [(0, ".index"), (0, ".timeindex"), (30, ".index"), (30, ".timeindex")],
    ids=["sealed-index", "sealed-timeindex", "active-index", "active-timeindex"],
)
def test_a_sparse_huge_index_is_rebuilt_without_being_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, segment: int, suffix: str
) -> None:
    data = tmp_path / "data"
    make_store(data)
    path = data / "t-0" / f"{segment:020d}{suffix}"
    os.truncate(path, SPARSE)  # a sparse file: 512 MiB long, no blocks
    with caplog.at_level(logging.WARNING, logger="compactlog.storage"):
        records, fs, elapsed = reopen_and_read(data)
    assert records == EXPECTED
    assert elapsed < 5, elapsed  # 8.6 s before, on a fast machine
    assert max(size for _, size in fs.reads) < DEFAULT_INDEX_BYTES
    assert str(path) not in [p for p, size in fs.reads if size > 4096]
    assert path.stat().st_size < 4096  # rebuilt and trimmed
    assert f"{SPARSE} bytes, longer than the" in caplog.text
    assert "segment.index.bytes" in caplog.text and str(path) in caplog.text
    # The rebuilt index is good: the next open finds nothing to rebuild.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="compactlog.storage"):
        assert reopen_and_read(data)[0] == EXPECTED
    assert "rebuilding" not in caplog.text


def test_the_bound_is_the_topics_segment_index_bytes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    make_store(data, {"segment.index.bytes": 4096})
    path = data / "t-0" / f"{0:020d}.index"
    os.truncate(path, 4096 + OFFSET_ENTRY_SIZE)  # one entry more than 4096 B holds
    with caplog.at_level(logging.WARNING, logger="compactlog.storage"):
        records, _, _ = reopen_and_read(data)
    assert records == EXPECTED
    assert "4104 bytes, longer than the 4096 bytes (512 entries)" in caplog.text


def test_an_index_up_to_the_bound_is_read(tmp_path: Path) -> None:
    fs = OsFileSystem()
    path = str(tmp_path / "x.index")
    index = OffsetIndex(fs, path, 100, 64)
    index.append(101, 61)
    index.append(105, 200)
    index.preallocate()  # 64 bytes: exactly the bound
    index.close()
    loaded = OffsetIndex(fs, path, 100, 64)
    loaded.load()
    assert loaded.entries() == 8  # the pre-allocated zeros count, as in Kafka
    with pytest.raises(CorruptIndexError, match="is not after"):
        loaded.check(1000)
    smaller_bound = OffsetIndex(fs, path, 100, 56)
    smaller_bound.load()
    assert smaller_bound.entries() == 0
    with pytest.raises(CorruptIndexError, match="64 bytes, longer than the 56 bytes"):
        smaller_bound.check(1000)
    time_index = TimeIndex(fs, path, 100, 48)  # 64 B is 5 entries of 12 B and some: over 48
    time_index.load()
    with pytest.raises(CorruptIndexError, match="longer than the 48 bytes"):
        time_index.check(1000)
    smaller_bound.trim()  # the file is cut, and the index is sound again
    assert os.path.getsize(path) == 0
    smaller_bound.check(1000)
    smaller_bound.close()


def test_more_entries_than_the_log_holds_batches_is_damage(tmp_path: Path) -> None:
    fs = OsFileSystem()
    path = str(tmp_path / "y.index")
    index = OffsetIndex(fs, path, 0, 1 << 20)
    for i in range(1, 6):
        index.append(i, i)  # in order, inside a 5 B log... of 5 batches
    index.trim()
    index.close()
    loaded = OffsetIndex(fs, path, 0, 1 << 20)
    loaded.load()
    with pytest.raises(CorruptIndexError, match="room for batches"):
        loaded.check(4 * RECORD_BATCH_OVERHEAD)
    loaded.check(6 * RECORD_BATCH_OVERHEAD)
