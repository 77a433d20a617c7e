"""Progress bars of Spark work: drawn on a terminal while the jobs run, with task counts and a
rate; none with --quiet or when standard error is not a terminal; the driver thread's job group
is given back."""

from __future__ import annotations

import io
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from rich.console import Console

from compactlog.spark._progress import SparkProgress, progress_console
from compactlog.spark.report import partition_report
from tests.managed import open_managed


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=160), out


def _plain(text: str) -> str:
    """Without the terminal's colour and cursor sequences."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_a_phase_draws_its_tasks_while_the_job_runs(spark: Any) -> None:
    console, out = _terminal()
    sc = spark.sparkContext
    sc.setJobGroup("callers-group", "the caller's")
    seen: list[str] = []

    def slow(rows: Any) -> Any:
        time.sleep(0.3)
        return rows

    watcher = threading.Event()

    def watch() -> None:  # what the bar shows while the job runs
        while not watcher.wait(0.1):
            seen.append(_plain(out.getvalue()))

    thread = threading.Thread(target=watch)
    thread.start()
    try:
        with SparkProgress(spark, console, poll_secs=0.05).phase("count"):
            assert sc.parallelize(range(8), 8).mapPartitions(slow).count() == 8
    finally:
        watcher.set()
        thread.join()
    text = _plain(out.getvalue())
    assert re.search(r"count .*8/8 tasks, [\d.]+ tasks/s, job \d+ succeeded", text), text
    # Drawn before the end: some frame showed fewer than 8 tasks done.
    assert any(re.search(r"[0-7]/8 tasks", frame) for frame in seen), seen[-1:]
    assert sc.getLocalProperty("spark.jobGroup.id") == "callers-group"
    sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def test_a_stage_two_jobs_share_counts_once(spark: Any) -> None:
    """The second job reuses the first one's shuffle: its map stage is skipped, and named by
    both jobs; the bar counts the 4 map tasks, 2 reduce tasks and 2 more reduce tasks once."""
    console, out = _terminal()
    sc = spark.sparkContext
    with SparkProgress(spark, console, poll_secs=0.05).phase("shuffle"):
        sums = sc.parallelize(range(100), 4).map(lambda x: (x % 3, 1)).reduceByKey(int.__add__, 2)
        assert sums.count() == 3
        assert sorted(sums.collect()) == [(0, 34), (1, 33), (2, 33)]
    assert re.search(r"shuffle .*8/8 tasks", _plain(out.getvalue()).splitlines()[-1])
    sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def test_the_report_step_is_not_silent(spark: Any, tmp_path: Path) -> None:
    with open_managed(tmp_path) as store:
        store.create_topic("t", 2, {"cleanup.policy": "compact"})
        for p in range(2):
            store.append("t", p, [(b"k%d" % i, b"v") for i in range(100)])
    console, out = _terminal()
    with SparkProgress(spark, console).phase("report"):
        partition_report(spark, tmp_path, "t")
    match = re.findall(r"report .*?(\d+)/(\d+) tasks", _plain(out.getvalue()))
    assert match and match[-1][0] == match[-1][1] != "0"


def test_no_bars_with_quiet_or_off_a_terminal(monkeypatch: pytest.MonkeyPatch, spark: Any) -> None:
    # pytest captures standard error: not a terminal.
    assert progress_console() is None
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich's way to say "this is a terminal"
    console = progress_console()
    assert console is not None and console.file is sys.stderr
    assert progress_console(quiet=True) is None
    # A phase without a console runs the work and touches nothing.
    before = spark.sparkContext.getLocalProperty("spark.jobGroup.id")
    with SparkProgress(spark, None).phase("quiet"):
        assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") == before
