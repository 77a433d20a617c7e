"""The report's gap column is seed 000's "last compaction": the same figures as the seed's
script (run unchanged with kcat against ``compactlog serve``), read by the report from the
directory the broker holds, beside the cleaner's own answer (the first dirty offset)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from compactlog.spark.report import partition_report, render_table
from tests.broker.helpers.clients import needs_gawk, needs_kcat
from tests.broker.helpers.seed000 import LastCompaction, fill, run_script, seconds_iso
from tests.broker.helpers.server import CliBroker
from tests.managed import manager_of, open_managed

pytestmark = [pytest.mark.broker, needs_kcat, needs_gawk]

TOPIC = "fruit-prices"


def test_the_report_shows_what_the_seed_script_prints(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with open_managed(data) as store:
        fill(store, TOPIC)
        for p in range(2):
            store.roll(TOPIC, p)
            manager_of(store).clean_log(TOPIC, p)
    serve = CliBroker(data, {}, tmp_path / "serve.log").start()
    try:
        seed = [run_script(serve.bootstrap, TOPIC, p) for p in range(2)]
        reports = partition_report(spark, data, TOPIC)  # the broker holds the directory
    finally:
        serve.stop()
    for r, s in zip(reports, seed, strict=True):
        gap = r.last_gap
        assert gap is not None
        assert s.gap_row is not None and s.last_row is not None
        figures = LastCompaction(
            gap.next_offset,
            r.records - gap.records_after,  # the gap's row: the rows after it come last
            seconds_iso(gap.timestamp_ms),
            gap.next_offset + gap.records_after,  # contiguous after the gap
            r.records,
            gap.records_after,
        )
        assert figures == s
        # The cleaner's answer beside it: everything below its first dirty offset is clean.
        assert r.first_dirty_offset == r.log_end_offset > gap.next_offset
    # After a 75% reduction the one gap is before the first surviving record.
    assert reports[1].last_gap is not None and reports[1].last_gap.previous_offset == -1
    assert reports[1].records == 400 and reports[1].last_gap.missing == 1200

    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(render_table(reports))
    row = next(line for line in console.export_text().splitlines() if "fruit-prices-1" in line)
    # first dirty 1,600; last gap at 1,200 with 1,200 missing before it and 399 records after.
    assert row.split()[8:12] == ["1,600", "1,200", "1,200", "399"]
