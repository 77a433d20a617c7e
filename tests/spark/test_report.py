"""The per-partition report: every figure equals one computed independently in Python from the
store's records and the data directory's files, before and after a cleaning; the cleaner-side
figures also equal ``cleaner-status``'s; the chart is a PNG of the documented size.

Spark work: two reports (one aggregation job each) and one window job, over one module-scoped
data directory.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from compactlog.cleaner.explain import cleaner_status
from compactlog.errors import (
    CompactlogError,
    ReportFileError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from compactlog.spark._gaps import Piece, gaps_by_window, join_pieces
from compactlog.spark._report_chart import chart_size
from compactlog.spark.report import (
    TABLE_WIDTH,
    OffsetGap,
    PartitionReport,
    partition_report,
    read_json,
    render_table,
    write_chart,
    write_json,
)
from compactlog.storage.store import Store
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed

NOW = 1_700_000_000_000
#: The smallest dedupe buffer Kafka accepts (more than 1 MiB per cleaner thread).
TINY_BUFFER = 1024 * 1024 + 1
#: Keys per pass by Kafka's formula: floor(floor(buffer / 24-byte entry) * 0.9 load factor).
TINY_KEYS_PER_PASS = math.floor((TINY_BUFFER // 24) * 0.9)
DEFAULT_KEYS_PER_PASS = math.floor((128 * 1024 * 1024 // 24) * 0.9)
WIDE_KEYS = 45_000
BROKER = {"log.cleaner.dedupe.buffer.size": TINY_BUFFER}


def _hot_run(partition: int) -> int:
    """How many times partition ``partition`` of ``t`` updates the key ``hot`` in a row."""
    return 30 - 5 * partition


def _fill_t(store: Store, partition: int) -> None:
    """One record per batch, timestamp NOW + 1000 x offset: a0..a9, ``hot`` x run, b0..b19,
    tombstone of a3, updates of a0..a2, tombstone of b7 (about two segments); then c0..c4 in a
    new active segment, which cleaning never reaches."""
    rows: list[tuple[bytes, bytes | None]] = [(b"a%d" % i, b"v0") for i in range(10)]
    rows += [(b"hot", b"h%d" % i) for i in range(_hot_run(partition))]
    rows += [(b"b%d" % i, b"v0") for i in range(20)]
    rows += [(b"a3", None)] + [(b"a%d" % i, b"v1") for i in range(3)] + [(b"b7", None)]
    for offset, row in enumerate(rows):
        store.append("t", partition, [row], timestamp=NOW + 1000 * offset)
    store.roll("t", partition)
    for i in range(5):
        store.append("t", partition, [(b"c%d" % i, b"v0")], timestamp=NOW + 1000 * len(rows) + i)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``t``: compacted, 3 partitions of small segments; ``events``: delete policy, keyless
    records and tombstones; ``wide``: compacted, more distinct dirty keys than one pass of
    the tiny buffer maps."""
    path = tmp_path_factory.mktemp("report")
    with open_managed(path, ManualClock(NOW), BROKER) as store:
        store.create_topic("t", 3, {"cleanup.policy": "compact", "segment.bytes": 2048})
        for p in range(3):
            _fill_t(store, p)
        store.create_topic("events", 1)
        for i in range(40):
            rows: list[Any] = [(None, b"keyless"), (b"e%d" % (i % 7), b"x"), (b"gone", None)]
            store.append("events", 0, rows, timestamp=NOW + i)
        store.create_topic("wide", 1, {"cleanup.policy": "compact"})
        # One pass's worth of keys twice, then the rest: the repeats start a second pass that
        # fills up again, so the cleaner needs 3 passes where ceil(distinct / per pass) is 2.
        blocks = [(0, TINY_KEYS_PER_PASS), (0, TINY_KEYS_PER_PASS), (TINY_KEYS_PER_PASS, WIDE_KEYS)]
        for lo, hi in blocks:
            for start in range(lo, hi, 1000):
                rows = [(b"w%06d" % k, b"") for k in range(start, min(start + 1000, hi))]
                store.append("wide", 0, rows, timestamp=NOW)
        store.roll("wide", 0)
        store.append("wide", 0, [(b"w000000", b"again")], timestamp=NOW)
    return path


# --------------------------------------------------------------------------------------------
# The oracle: plain Python over store.read and the files


def _checkpoint(path: Path, name: str) -> dict[tuple[str, int], int]:
    try:
        lines = (path / name).read_text().splitlines()
    except FileNotFoundError:
        return {}
    entries = {}
    for line in lines[2:]:
        topic, partition, offset = line.split()
        entries[(topic, int(partition))] = int(offset)
    return entries


def _last_gap(records: list[Any], start: int) -> OffsetGap | None:
    """Seed 000's definition, record by record: the last record whose offset is not the one
    after the previous record's (the log start offset - 1 before the first record)."""
    gap: OffsetGap | None = None
    previous = start - 1
    for i, r in enumerate(records):
        if r.offset > previous + 1:
            gap = OffsetGap(previous, r.offset, r.timestamp, len(records) - i - 1)
        previous = r.offset
    return gap


def _expected(
    store: Store, path: Path, topic: str, partition: int, keys_per_pass: int
) -> PartitionReport:
    config = store.topic_config(topic)
    start = store.log_start_offset(topic, partition)
    records = list(store.read(topic, partition, start))
    latest: dict[bytes, int] = {}
    for r in records:
        if r.key is not None:
            latest[r.key] = r.offset
    keyed = [r for r in records if r.key is not None]

    segments = sorted(
        (int(os.path.basename(f)[:20]), os.path.getsize(f))
        for f in glob.glob(str(path / f"{topic}-{partition}" / "*.log"))
    )
    fdo = _checkpoint(path, "cleaner-offset-checkpoint").get((topic, partition), start)
    fuo = segments[-1][0]  # the active segment (no min.compaction.lag.ms, no transactions)
    holding_fdo = max(base for base, _ in segments if base <= fdo)
    clean = sum(size for base, size in segments if base < fdo)
    cleanable = sum(size for base, size in segments if holding_fdo <= base < fuo)
    dirty = [r.key for r in keyed if fdo <= r.offset < fuo] if config.compact else []
    passes, mapped = (1 if dirty else 0), set[bytes | None]()
    for key in dirty:  # Kafka's map: full at keys_per_pass, tested before every put
        if len(mapped) >= keys_per_pass:
            passes, mapped = passes + 1, set[bytes | None]()
        mapped.add(key)
    return PartitionReport(
        topic=topic,
        partition=partition,
        cleanup_policy="compact" if config.compact else "delete",
        records=len(records),
        bytes=sum(size for _, size in segments),
        distinct_keys=len(latest),
        superseded=sum(1 for r in keyed if latest[r.key] != r.offset),
        tombstones=sum(1 for r in keyed if r.value is None),
        keyless=len(records) - len(keyed),
        log_start_offset=start,
        log_end_offset=store.log_end_offset(topic, partition),
        first_dirty_offset=fdo,
        first_uncleanable_offset=fuo,
        clean_bytes=clean,
        cleanable_bytes=cleanable,
        dirty_ratio=cleanable / (clean + cleanable) if clean + cleanable else 0.0,
        min_cleanable_dirty_ratio=0.5,
        dirty_keys=len(set(dirty)),
        keys_per_pass=keys_per_pass,
        passes_needed=passes,
        last_gap=_last_gap(records, start),
    )


def _expected_all(
    store: Store, path: Path, keys_per_pass: int, topics: list[str]
) -> list[PartitionReport]:
    return [
        _expected(store, path, topic, p, keys_per_pass)
        for topic in topics
        for p in range(store.partitions(topic))
    ]


def _agrees_with_cleaner_status(store: Store, reports: list[PartitionReport], now: int) -> None:
    """The cleaner-side figures are the ones ``cleaner-status`` shows for the same store."""
    by_name = {r.name: r for r in reports}
    for topic in {r.topic for r in reports}:
        for s in cleaner_status(manager_of(store).cleaner, topic, now):
            r = by_name[f"{s.topic}-{s.partition}"]
            assert (r.first_dirty_offset, r.first_uncleanable_offset) == (
                s.first_dirty_offset,
                s.first_uncleanable_offset,
            )
            assert (r.clean_bytes, r.cleanable_bytes, r.dirty_ratio) == (
                s.clean_bytes,
                s.cleanable_bytes,
                s.dirty_ratio,
            )
            assert (r.dirty_keys, r.keys_per_pass, r.passes_needed) == (
                s.dirty_keys,
                s.keys_per_pass,
                s.passes_needed,
            )


def _files(path: Path) -> dict[str, tuple[int, int]]:
    """Every file with its size and modification time."""
    stats = {f: f.stat() for f in path.rglob("*") if f.is_file()}
    return {str(f): (s.st_size, s.st_mtime_ns) for f, s in stats.items()}


@dataclasses.dataclass
class Run:
    before: list[PartitionReport]
    before_expected: list[PartitionReport]
    after: list[PartitionReport]
    after_expected: list[PartitionReport]


@pytest.fixture(scope="module")
def run(spark: Any, data: Path) -> Iterator[Run]:
    """Report the whole directory (tiny buffer), clean ``t``, report ``t`` again (default
    buffer) while the store is still open, i.e. while it holds the directory lock."""
    files = _files(data)
    before = partition_report(spark, data, dedupe_buffer_size=TINY_BUFFER, now=NOW)
    assert _files(data) == files, "the report changed the data directory"
    with open_managed(data, ManualClock(NOW), BROKER) as store:
        before_expected = _expected_all(store, data, TINY_KEYS_PER_PASS, ["events", "t", "wide"])
        _agrees_with_cleaner_status(store, before, NOW)
        for p in range(3):
            manager_of(store).clean_log("t", p)
        after = partition_report(spark, data, "t", now=NOW)
        after_expected = _expected_all(store, data, DEFAULT_KEYS_PER_PASS, ["t"])
    yield Run(before, before_expected, after, after_expected)


# --------------------------------------------------------------------------------------------
# Figures


def test_every_figure_equals_an_independent_computation(run: Run) -> None:
    assert run.before == run.before_expected
    assert [r.name for r in run.before] == ["events-0", "t-0", "t-1", "t-2", "wide-0"]
    events = run.before[0]
    assert (events.records, events.keyless, events.distinct_keys, events.tombstones) == (
        120,
        40,
        8,
        40,
    )
    assert events.superseded == 80 - 8
    t0 = run.before[1]
    assert t0.superseded == 29 + 5 and t0.tombstones == 2 and t0.last_gap is None
    assert t0.first_dirty_offset == 0 and t0.dirty_ratio == 1.0  # never cleaned: all dirty


def test_cleaning_drops_superseded_and_dirty_ratio_and_leaves_the_gap(run: Run) -> None:
    assert run.after == run.after_expected
    before = {r.name: r for r in run.before}
    for p, after in enumerate(run.after):
        old = before[after.name]
        assert after.superseded == 0 < old.superseded
        assert after.records == old.records - old.superseded
        assert after.tombstones == 2  # kept until their delete horizon
        assert after.dirty_ratio == 0.0 < old.dirty_ratio
        assert after.first_dirty_offset == after.first_uncleanable_offset > 0
        assert after.bytes < old.bytes
        # The last record that went is b7 (its tombstone came later): the last gap is from b6
        # to b8, with b8's time, and the rest of the partition after it.
        b8 = 10 + _hot_run(p) + 8
        assert after.last_gap == OffsetGap(
            b8 - 2, b8, NOW + 1000 * b8, after.log_end_offset - 1 - b8
        )
        assert after.last_gap.missing == 1


def test_the_last_gap_is_joined_from_several_tasks(data: Path, run: Run) -> None:
    """The source reads each segment in its own task: the pieces of several tasks were joined on
    the driver, the last gap inside a piece after the gaps of earlier ones (a0..a3, ``hot``)."""
    for after in run.after:
        assert len(list((data / after.name).glob("*.log"))) > 1
        gap = after.last_gap
        assert gap is not None and gap.next_offset > 10 + _hot_run(after.partition)


def test_passes_needed_with_a_tiny_dedupe_buffer(run: Run) -> None:
    wide = run.before[-1]
    assert wide.keys_per_pass == TINY_KEYS_PER_PASS == 39_321
    assert wide.dirty_keys == WIDE_KEYS  # the record in the active segment is not dirty
    assert math.ceil(WIDE_KEYS / TINY_KEYS_PER_PASS) == 2
    assert wide.passes_needed == 3  # the repeats make a pass of their own
    assert wide.superseded == TINY_KEYS_PER_PASS + 1
    assert {r.passes_needed for r in run.before if r.topic == "t"} == {1}
    assert run.before[0].passes_needed == 0  # delete policy: never mapped
    assert {r.keys_per_pass for r in run.after} == {DEFAULT_KEYS_PER_PASS}


def test_the_window_fallback_finds_the_same_gaps(spark: Any, data: Path, run: Run) -> None:
    rows = (
        spark.read.format("compactlog")
        .option("subscribe", "t")
        .load(str(data))
        .select("topic", "partition", "offset", "timestamp")
    )
    expected = {(r.topic, r.partition): r.last_gap for r in run.after}
    found = gaps_by_window(rows, {tp: 0 for tp in expected})
    assert {tp: found.get(tp) for tp in expected} == expected
    # The gap before the first record counts, from the log start offset.
    first = spark.createDataFrame(
        [("t", 0, 5, 9, 0)], "topic STRING, partition INT, offset BIGINT, o2 BIGINT, ms BIGINT"
    ).selectExpr("topic", "partition", "offset", "timestamp_millis(ms) AS timestamp")
    assert gaps_by_window(first, {("t", 0): 2}) == {("t", 0): OffsetGap(1, 5, 0, 0)}
    assert gaps_by_window(first, {("t", 0): 5}) == {}


def test_pieces_join_in_offset_order() -> None:
    def piece(first: int, last: int, gap_previous: int = -1, gap_next: int = -1) -> Piece:
        ms = gap_next * 10 if gap_next >= 0 else -1
        return Piece("t", 0, first, first * 10, last, True, gap_previous, gap_next, ms)

    starts = {("t", 0): 0}
    # Read by three tasks, in any order: the last gap is inside the last piece ...
    pieces = [piece(20, 30, 21, 24), piece(0, 10, 2, 4), piece(16, 18)]
    assert join_pieces(pieces, starts) == {("t", 0): OffsetGap(21, 24, 240, 6)}
    # ... or between two pieces, however large the earlier gaps were.
    pieces = [piece(0, 10, 2, 9), piece(12, 18)]
    assert join_pieces(pieces, starts) == {("t", 0): OffsetGap(10, 12, 120, 6)}
    assert join_pieces([piece(0, 10), piece(11, 18)], starts) == {("t", 0): None}
    # The gap before the first record, from the log start offset (0 when not given).
    assert join_pieces([piece(3, 10)], starts) == {("t", 0): OffsetGap(-1, 3, 30, 7)}
    assert join_pieces([piece(3, 10)], {}) == {("t", 0): OffsetGap(-1, 3, 30, 7)}
    assert join_pieces([piece(3, 10)], {("t", 0): 3}) == {("t", 0): None}
    assert join_pieces([piece(5, 10)], {("t", 0): 3}) == {("t", 0): OffsetGap(2, 5, 50, 5)}
    # Overlapping or unordered pieces cannot be joined: the window decides.
    assert join_pieces([piece(0, 10), piece(5, 18)], starts) is None
    assert join_pieces([dataclasses.replace(piece(0, 10), ordered=False)], starts) is None


def test_unknown_topic_and_missing_directory(spark: Any, data: Path, tmp_path: Path) -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match=r"unknown topic 'nope'.*events, t"):
        partition_report(spark, data, "nope")
    assert issubclass(UnknownTopicOrPartitionError, CompactlogError)
    with pytest.raises(StorageError, match="does not exist"):
        partition_report(spark, tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    assert partition_report(spark, tmp_path / "empty") == []


# --------------------------------------------------------------------------------------------
# Output


def test_chart_is_a_png_of_the_documented_size(run: Run, tmp_path: Path) -> None:
    from matplotlib import image

    before_t = [r for r in run.before if r.topic == "t"]
    compared = tmp_path / "compared.png"
    assert write_chart(run.after, compared, before=before_t) == (1000, 900)
    many = [dataclasses.replace(run.before[1], partition=p) for p in range(12)]
    wide = tmp_path / "wide.png"
    assert write_chart(many, wide) == chart_size(12, comparing=False) == (1400, 900)
    for path, (width, height) in ((compared, (1000, 900)), (wide, (1400, 900))):
        raw = path.read_bytes()
        assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 1000
        assert image.imread(path).shape[:2] == (height, width)


def test_json_round_trip_and_table(run: Run, tmp_path: Path) -> None:
    from rich.console import Console

    path = tmp_path / "report.json"
    write_json(run.before, path)
    assert read_json(path) == run.before
    doc = json.loads(path.read_text())
    assert doc["version"] == 2 and doc["partitions"][1]["last_gap"] is None
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ReportFileError, match="not a compactlog report"):
        read_json(tmp_path / "bad.json")
    # A version 1 report (the largest gap, another figure) still reads, without its gap.
    for entry in doc["partitions"]:
        entry["largest_gap"] = entry.pop("last_gap")
    (tmp_path / "v1.json").write_text(json.dumps({**doc, "version": 1}))
    assert read_json(tmp_path / "v1.json") == [
        dataclasses.replace(r, last_gap=None) for r in run.before
    ]

    console = Console(record=True, width=220)
    console.print(render_table(run.after, "after"))
    text = console.export_text()
    gap = run.after[0].last_gap
    assert gap is not None
    row = next(line for line in text.splitlines() if line.strip().startswith("t-0"))
    # The cleaner's first dirty offset, then the last gap: where, how many missing, records
    # after it, and its time (ISO-8601 UTC).
    cells = row.split()
    assert cells[8:12] == ["65", "48", "1", "21"]
    assert gap.next_offset == 48 and cells[12] == "2023-11-14T22:14:08Z"

    # The figures of a large partition (10 M records, 10 GB) fit the documented width, none cut.
    big = dataclasses.replace(
        run.after[0],
        records=9_999_999,
        bytes=9_999_999_999,
        distinct_keys=9_999_999,
        superseded=9_999_999,
        tombstones=999_999,
        first_dirty_offset=99_999_999,
        last_gap=OffsetGap(90_000_000, 99_999_999, NOW, 9_999_999),
    )
    console = Console(record=True, width=TABLE_WIDTH)
    console.print(render_table([big]))
    row = next(line for line in console.export_text().splitlines() if "t-0" in line)
    assert row.split()[1:] == [
        "9,999,999", "9,999,999,999", "9,999,999", "9,999,999", "999,999", "0.000",
        "0", "99,999,999", "99,999,999", "9,999,998", "9,999,999", "2023-11-14T22:13:20Z",
    ]  # fmt: skip
