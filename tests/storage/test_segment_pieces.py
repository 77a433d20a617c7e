"""``LogSegment.append_pieces``: one write, and the bookkeeping of one append per piece."""

from __future__ import annotations

import struct
from pathlib import Path

from compactlog.records import build_batch
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.segment import LogSegment, SegmentSettings

SETTINGS = SegmentSettings(
    index_interval_bytes=100,
    segment_index_bytes=10 * 1024,
    preallocate=False,
    segment_bytes=1 << 20,
)


def _segment(directory: Path) -> LogSegment:
    directory.mkdir()
    return LogSegment(OsFileSystem(), str(directory), 0, SETTINGS, now_ms=0)


def test_pieces_index_exactly_as_separate_appends(tmp_path: Path) -> None:
    batches = [
        build_batch([(b"k%d" % i, b"v" * (i * 7))], base_offset=i, timestamps=1000 - 3 * i + i * i)
        for i in range(40)
    ]
    pieces = [(i, 1000 - 3 * i + i * i, i, len(b)) for i, b in enumerate(batches)]
    one_by_one = _segment(tmp_path / "appends")
    for (offset, ts, ts_offset, _), batch in zip(pieces, batches, strict=True):
        one_by_one.append(offset, ts, ts_offset, batch)
    together = _segment(tmp_path / "pieces")
    together.append_pieces(b"".join(batches[:25]), pieces[:25])
    together.append_pieces(b"".join(batches[25:]), pieces[25:])
    for segment in (one_by_one, together):
        segment.flush()
        segment.close()
    assert one_by_one.offset_index.entries() > 5  # the interval is small: many entries
    for name in (
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    ):
        a = (tmp_path / "appends" / name).read_bytes()
        b = (tmp_path / "pieces" / name).read_bytes()
        assert a == b, name
    # And the files hold what the segment holds in memory (appends are batched too).
    index = (tmp_path / "pieces" / "00000000000000000000.index").read_bytes()
    assert [(rel, pos) for rel, pos in struct.iter_unpack(">ii", index)] == [
        (offset, position) for offset, position in together.offset_index.items()
    ]
    times = (tmp_path / "pieces" / "00000000000000000000.timeindex").read_bytes()
    assert len(times) > 12 and [ts for ts, _ in struct.iter_unpack(">qi", times)] == sorted(
        {ts for ts, _ in struct.iter_unpack(">qi", times)}
    )
