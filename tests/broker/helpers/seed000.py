"""Seed 000's "last compaction" script (``tests/broker/seed000/last-compaction.sh``), run as
published, its output parsed, and the figures it should print computed from a store's records.

The script is a byte-for-byte copy of ``../shared/seed-scripts/last-compaction.sh`` (the seed's
published text with two mechanical fixes, explained at its top); :data:`PUBLISHED_SHA256`
pins it, so an edit to it fails ``test_the_script_is_the_published_one``.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).parents[1] / "seed000" / "last-compaction.sh"
PUBLISHED_SHA256 = "a0defc62e4eca08d03259010b7686f31efbd7f3a3f4b774ef76dd08d9491bfaf"

#: The first timestamp the fixtures write (2023-11-14T22:13:20Z), one second per record after it.
T0 = 1_700_000_000_000


@dataclass(frozen=True)
class LastCompaction:
    """The script's six lines. With no gap, gawk prints empty gap figures (None here), the time
    of epoch 0, and every row as "contiguous"."""

    gap_offset: int | None
    gap_row: int | None
    gap_time: str
    last_offset: int | None
    last_row: int | None
    contiguous: int


def run_script(bootstrap: str, topic: str, partition: int = 0) -> LastCompaction:
    """Run the script (gawk's strftime in UTC) and parse what it prints."""
    done = subprocess.run(
        ["bash", str(SCRIPT), bootstrap, topic, str(partition)],
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "TZ": "UTC"},
    )
    assert done.returncode == 0, done.stderr.decode()
    fields = {}
    for line in done.stdout.decode().splitlines():
        name, _, value = line.partition(":  ")
        fields[name] = value.strip()
    assert list(fields) == [
        "last gap offset",
        "last gap row",
        "last gap time",
        "last offset",
        "last row",
        "contiguous ~dirty since gap",
    ], done.stdout.decode()

    def number(name: str) -> int | None:
        return int(fields[name]) if fields[name] else None

    return LastCompaction(
        number("last gap offset"),
        number("last gap row"),
        fields["last gap time"],
        number("last offset"),
        number("last row"),
        int(fields["contiguous ~dirty since gap"]),
    )


def expected(records: Sequence[Any], log_start_offset: int = 0) -> LastCompaction:
    """What the script should print for ``records`` (with ``offset`` and ``timestamp``), by the
    seed's definition: the last record whose offset is not the one after the previous record's
    (the first record counts when it is above the log start offset)."""
    gap_offset = gap_row = gap_ms = None
    previous = log_start_offset - 1
    for row, r in enumerate(records, 1):
        if r.offset > previous + 1:
            gap_offset, gap_row, gap_ms = r.offset, row, r.timestamp
        previous = r.offset
    return LastCompaction(
        gap_offset,
        gap_row,
        seconds_iso(0 if gap_ms is None else gap_ms),
        records[-1].offset if records else None,
        len(records) or None,
        len(records) - (gap_row or 0),
    )


def seconds_iso(ms: int) -> str:
    """The script's time format: the first 10 digits of the ms timestamp as UTC seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(str(ms)[:10])))


def fill(store: Any, topic: str) -> None:
    """Two partitions, one record per batch, timestamps a second apart from :data:`T0`.

    * 0: fruit prices, a run of lime updates and later updates of other keys: after cleaning,
      gaps all through the log; the last one is near its end, the largest is not.
    * 1: 400 keys written four times, the last round a full republication (as the main job's
      workload): cleaning keeps the last round only, a 75% reduction whose one gap is before
      the first surviving record.
    """
    store.create_topic(topic, 2, {"cleanup.policy": "compact"})
    rows = [b"cherry:3.00", b"grape:2.69", b"lime:0.49", b"apple:1.10", b"banana:0.25"]
    rows += [b"lime:0.%d" % (50 + i) for i in range(7)]  # a run of lime updates ...
    rows += [b"grape:2.79", b"lime:1.59"]  # ... all superseded by the last one
    rows += [b"apple:1.20", b"pear:0.99", b"grape:2.89", b"kiwi:0.30", b"fig:2.00", b"pear:1.01"]
    for i, row in enumerate(rows):
        key, _, value = row.partition(b":")
        store.append(topic, 0, [(key, value)], timestamp=T0 + 1000 * i)
    for i in range(1600):
        key = b"ticket-%03d" % (i % 400)
        store.append(topic, 1, [(key, b"v%d" % (i // 400))], timestamp=T0 + 1000 * i)
