"""The main job: the data pipeline end to end on Spark.

1. **generate** an entity topic (the Zendesk-style workload: every ticket, skewed updates,
   tombstones, then a full republication) into a fresh data directory;
2. **report** it (records, bytes, keys, superseded records, dirty ratio, the passes Kafka's
   128 MiB dedupe buffer would need) and keep the report as the "before";
3. **clean** it on Spark in one pass, printing the cleaner's summary line per partition;
4. **snapshot** the latest value of every key as a Parquet table;
5. **report** again and draw the before/after chart;

then check the result (every superseded record gone, the snapshot holds exactly the live keys
the workload left, no more) and say where the report, the chart and the snapshot are.
``compactlog --data-dir DIR spark pipeline --out OUT`` runs it; ``scripts/main.sh`` runs it on
``demo-data``/``demo-out``. On a terminal, each step shows a progress bar of its Spark tasks on
standard error while it runs (:mod:`._progress`; ``--quiet`` turns them off).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from compactlog.errors import ConfigError, PipelineError
from compactlog.spark._progress import SparkProgress
from compactlog.spark.compact import compact
from compactlog.spark.report import (
    PartitionReport,
    partition_report,
    render_table,
    write_chart,
    write_json,
)
from compactlog.spark.snapshot import snapshot
from compactlog.spark.workload import PhaseProgress, WorkloadSpec, expected_state, generate
from compactlog.storage.store import Store
from compactlog.storage.topic_catalog import TOPICS_FILE

STEPS = 5


@dataclass(frozen=True)
class PipelineSpec:
    """What the main job generates and how it cleans it."""

    data_dir: str
    out_dir: str
    topic: str = "tickets"
    keys: int = 100_000
    value_bytes: int = 512
    updates: int = 200_000
    skew: float = 1.1
    tombstone_fraction: float = 0.05
    partitions: int = 4
    mode: str = "one-pass"
    fresh: bool = False

    def workload(self) -> WorkloadSpec:
        return WorkloadSpec(
            topic=self.topic,
            keys=self.keys,
            value_bytes=self.value_bytes,
            distribution="skewed",
            skew=self.skew,
            updates=self.updates,
            tombstone_fraction=self.tombstone_fraction,
            republish=True,
            partitions=self.partitions,
            seed=4,
            topic_config={
                "cleanup.policy": "compact",
                "segment.bytes": str(8 << 20),
                "min.cleanable.dirty.ratio": "0.5",
            },
        )


@dataclass
class PipelineResult:
    before: list[PartitionReport]
    after: list[PartitionReport]
    snapshot_rows: int
    live_keys: int
    files: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def run(
    spark: Any, spec: PipelineSpec, console: Any, progress_console: Any = None
) -> PipelineResult:
    """Run the pipeline on ``spark``, telling ``console`` (a ``rich`` console) as it goes, with
    progress bars of each step's Spark tasks on ``progress_console`` (None: no bars)."""
    workload = spec.workload()  # a bad spec fails here, before anything is touched
    _prepare_dirs(spec)
    say = _Steps(console, SparkProgress(spark, progress_console))
    timings: dict[str, float] = {}

    with say.step("generate", f"publishing the {spec.topic} workload", timings):
        expected = expected_state(workload)
        console.print(
            f"  {spec.keys:,} keys of {spec.value_bytes} B, {spec.updates:,} skewed updates, "
            f"{workload.tombstones:,} tombstones, then every live key again; "
            f"{sum(expected.records.values()):,} records into {spec.partitions} partitions"
        )
        generate(spark, spec.data_dir, workload, progress=_phase_printer(console))
        # Kafka never cleans the active segment; a roll (what segment.ms does in time) makes the
        # whole topic cleanable, so that the check below can ask for no superseded record.
        with Store.open(spec.data_dir) as store:
            for partition in range(spec.partitions):
                store.roll(spec.topic, partition)
        console.print("  rolled the active segments: the whole topic is cleanable")

    files = {
        "before": os.path.join(spec.out_dir, "report-before.json"),
        "report": os.path.join(spec.out_dir, "report-after.json"),
        "chart": os.path.join(spec.out_dir, "report.png"),
        "snapshot": os.path.join(spec.out_dir, "snapshot"),
    }
    with say.step("report", "the topic before cleaning", timings):
        before = partition_report(spark, spec.data_dir, spec.topic)
        console.print(render_table(before, "before cleaning"))
        write_json(before, files["before"])
        passes = max(r.passes_needed for r in before)
        console.print(
            f"  Kafka's cleaner, with its default 128 MiB buffer ({before[0].keys_per_pass:,} "
            f"keys per pass), would need {passes} pass(es) for the largest partition."
        )

    with say.step("clean", f"cleaning on Spark ({spec.mode})", timings):
        result = compact(spark, spec.data_dir, spec.topic, mode=spec.mode, progress=_lines(console))
        if result.failed:
            raise PipelineError(
                "; ".join(f"{o.name} was not cleaned: {o.error}" for o in result.failed)
            )

    with say.step("snapshot", "the latest value of every key, as Parquet", timings):
        snap = snapshot(spark, spec.data_dir, spec.topic, files["snapshot"])
        console.print(f"  {snap.rows:,} rows in {snap.version_path}")

    with say.step("report", "the topic after cleaning, and the chart", timings):
        after = partition_report(spark, spec.data_dir, spec.topic)
        console.print(render_table(after, "after cleaning"))
        write_json(after, files["report"])
        write_chart(after, files["chart"], before=before, title=f"{spec.topic}: before and after")

    _check(before, after, snap.rows, expected.live_keys)
    console.print(
        f"[bold green]OK[/]: {snap.rows:,} live keys in the snapshot, as the workload left "
        f"them; {sum(r.superseded for r in before):,} superseded records before cleaning, "
        f"none after; {sum(r.bytes for r in before) / 1e6:,.1f} MB -> "
        f"{sum(r.bytes for r in after) / 1e6:,.1f} MB."
    )
    for name, label in (
        ("report", "report (JSON)"),
        ("before", "report before"),
        ("chart", "chart (PNG)"),
        ("snapshot", "snapshot (Parquet)"),
    ):
        console.print(f"  {label + ':':<20} {files[name]}")
    console.print(f"  {'data directory:':<20} {spec.data_dir}")
    return PipelineResult(before, after, snap.rows, expected.live_keys, files, timings)


def _check(
    before: list[PartitionReport], after: list[PartitionReport], rows: int, live_keys: int
) -> None:
    problems = []
    if rows != live_keys:
        problems.append(f"the snapshot has {rows:,} rows, the workload left {live_keys:,} keys")
    left = sum(r.superseded for r in after)
    if left:
        problems.append(f"{left:,} superseded records are left after cleaning")
    if sum(r.distinct_keys for r in after) != sum(r.distinct_keys for r in before):
        problems.append("cleaning changed the number of distinct keys")
    if problems:
        raise PipelineError("; ".join(problems))


def _prepare_dirs(spec: PipelineSpec) -> None:
    """Start from empty directories; with ``fresh``, remove what an earlier run left (only a
    compactlog data directory and an output directory of this pipeline)."""
    for path, marker in ((spec.data_dir, TOPICS_FILE), (spec.out_dir, "report.png")):
        if not os.path.exists(path):
            continue
        if not os.path.isdir(path):
            raise ConfigError(f"{path} exists and is not a directory")
        if not os.listdir(path):
            continue
        ours = os.path.exists(os.path.join(path, marker)) or (
            path == spec.out_dir and os.path.exists(os.path.join(path, "snapshot"))
        )
        if not spec.fresh or not ours:
            raise ConfigError(
                f"{path} is not empty; the pipeline starts from scratch (--fresh removes the "
                "directories of an earlier run)"
            )
        shutil.rmtree(path)
    os.makedirs(spec.out_dir, exist_ok=True)


class _Steps:
    def __init__(self, console: Any, progress: SparkProgress) -> None:
        self.console = console
        self.progress = progress
        self.number = 0

    @contextlib.contextmanager
    def step(self, name: str, title: str, timings: dict[str, float]) -> Iterator[None]:
        """A step: its rule, a progress bar of its Spark tasks while it runs, its time."""
        self.number += 1
        self.console.rule(f"[bold][{self.number}/{STEPS}] {name}: {title}", align="left")
        started = time.monotonic()
        with self.progress.phase(f"[{self.number}/{STEPS}] {name}"):
            yield
        seconds = time.monotonic() - started
        timings[name] = timings.get(name, 0.0) + seconds
        self.console.print(f"  [dim]done in {seconds:.1f} s[/]")


def _phase_printer(console: Any) -> Callable[[PhaseProgress], None]:
    def show(event: PhaseProgress) -> None:
        if event.done:
            console.print(
                f"  {event.phase:<11} {event.records:>10,} records in {event.seconds:5.1f} s"
            )

    return show


def _lines(console: Any) -> Callable[[str], None]:
    def show(message: str) -> None:
        for line in message.strip("\n").splitlines():
            console.print(line.replace("\t", "  "), highlight=False, markup=False)

    return show
