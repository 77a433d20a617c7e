"""How one cleaning round overlaps its work: the copy phase reuses the regions the map pass
decoded, and a group is swapped in only once the next one is written (its fsyncs run in the
meantime). Neither may change a byte of the result, and a failure in a later group must leave
the log as it was."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from compactlog.cleaner import cleaner as cleaner_module
from tests.conftest import ManualClock
from tests.managed import manager_of, open_managed
from tests.support.faultfs import FaultInjectingFileSystem

T = "t"
NOW = 1_700_000_000_000
BROKER = {"log.cleaner.dedupe.buffer.size": 2 << 20}
CODECS = ["none", "none", "gzip", "none", "lz4"]


def _build(directory: Path) -> None:
    """Six rolled segments of keyed updates (some compressed), so that one clean rewrites
    several groups and the map pass decodes every segment."""
    with open_managed(directory, ManualClock(NOW), config=BROKER) as store:
        store.create_topic(
            T, 1, {"cleanup.policy": "compact", "segment.bytes": 6000, "delete.retention.ms": 0}
        )
        for i in range(60):
            # Every segment keeps some records (unique keys) and loses others (hot keys).
            keys = [b"hot%d" % j if (i + j) % 3 == 0 else b"k%d-%d" % (i, j) for j in range(4)]
            rows = [(key, b"v%d-%d" % (i, j) * 20) for j, key in enumerate(keys)]
            store.append(T, 0, rows, compression=CODECS[i % len(CODECS)], timestamp=NOW + i)
            if i % 10 == 9:
                store.roll(T, 0)
        store.roll(T, 0)


def _files(directory: Path) -> dict[str, bytes]:
    part = directory / f"{T}-0"
    return {p.name: p.read_bytes() for p in sorted(part.iterdir()) if p.is_file()}


def _records(directory: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    with open_managed(directory, ManualClock(NOW), config=BROKER) as store:
        return [(r.offset, r.key, r.value) for r in store.read(T, 0, 0)]


def _clean(directory: Path, **open_args: Any) -> Any:
    with open_managed(directory, ManualClock(NOW), config=BROKER, **open_args) as store:
        return manager_of(store).clean_log(T, 0)


def test_the_copy_phase_reuses_the_map_pass_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _build(tmp_path / "base")
    shutil.copytree(tmp_path / "base", tmp_path / "again")
    decodes: list[int] = []
    prepare = cleaner_module.prepare_copy_region

    def counted(*args: Any) -> Any:
        decodes.append(args[1])
        return prepare(*args)

    monkeypatch.setattr(cleaner_module, "prepare_copy_region", counted)
    result = _clean(tmp_path / "base")
    assert result.stats.groups >= 2
    # The whole log was dirty and fits the map's spare memory: nothing is decoded twice.
    assert decodes == []

    monkeypatch.setattr(cleaner_module.DecodedRegions, "keep", lambda *args: None)
    _clean(tmp_path / "again")
    assert len(decodes) >= result.stats.segments_read
    assert _files(tmp_path / "base") == _files(tmp_path / "again")


def test_regions_beyond_the_spare_memory_are_decoded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _build(tmp_path / "base")
    shutil.copytree(tmp_path / "base", tmp_path / "again")
    _clean(tmp_path / "again")
    budgets: list[int] = []
    regions = cleaner_module.DecodedRegions

    def small(budget: int = 0) -> Any:
        budgets.append(budget)
        return regions(min(budget, 3000))  # room for a region or two

    monkeypatch.setattr(cleaner_module, "DecodedRegions", small)
    _clean(tmp_path / "base")
    assert max(budgets) > 1 << 20  # the table of a 2 MiB map is sized for a few hundred keys
    assert _files(tmp_path / "base") == _files(tmp_path / "again")


def test_a_failure_while_writing_a_later_group_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    _build(tmp_path / "base")
    shutil.copytree(tmp_path / "base", tmp_path / "clean")
    _clean(tmp_path / "clean")
    before_files, before_records = _files(tmp_path / "base"), _records(tmp_path / "base")

    fs = FaultInjectingFileSystem()
    cleaned: list[str] = []

    def second_cleaned_segment(number: int, op: str, path: str) -> bool:
        if path.endswith(".log.cleaned") and path not in cleaned:
            cleaned.append(path)
        # The first write into the second group's .cleaned log, the first group's still
        # unswapped while that group is written.
        return op in ("write_at", "append") and len(cleaned) >= 2 and path == cleaned[1]

    fs.fail_when(second_cleaned_segment, errno.ENOSPC)
    result = _clean(tmp_path / "base", fs=fs)
    assert (T, 0) in result.uncleanable
    assert "No space left" in result.uncleanable[T, 0] or "ENOSPC" in result.uncleanable[T, 0]
    leftovers = [
        n for n in os.listdir(tmp_path / "base" / f"{T}-0") if n.endswith((".cleaned", ".swap"))
    ]
    assert leftovers == []
    assert _files(tmp_path / "base") == before_files  # the first group was not swapped in
    assert _records(tmp_path / "base") == before_records

    # Space freed: the next clean writes exactly what an undisturbed one wrote.
    _clean(tmp_path / "base")
    assert _files(tmp_path / "base") == _files(tmp_path / "clean")
