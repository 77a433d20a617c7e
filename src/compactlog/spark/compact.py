"""Compaction on Spark: a topic's partitions cleaned by Spark tasks.

    result = compact(spark, "data-dir", "orders", mode="one-pass")
    for outcome in result.outcomes:
        print(outcome.summary)               # the cleaner's summary lines

Two modes:

* ``per-partition``: one task per partition runs exactly the in-process cleaner's round (the
  same offset map, sized by ``log.cleaner.dedupe.buffer.size``, and so the same partial rounds
  when a partition has more dirty keys than the map holds); the segments it writes are
  byte-identical to an in-process ``clean_log``'s.
* ``one-pass``: Spark computes the latest offset of every key of each partition's range (a
  ``groupBy(partition, key).max(offset)``: a shuffle, which spills to disk, so no offset-map
  limit), then one task per partition rewrites it with the same retain rules, tombstone
  horizons and crash-safe swap (:class:`~compactlog.cleaner.offline.SurvivorMap`). A partition
  that Kafka's 128 MiB buffer would clean in N passes is clean after one.

What a one-pass job prints. Kafka's summary message describes a round that builds an offset
map and then rewrites; a one-pass job has no such map and no such round, so instead of Kafka's
lines (whose "Indexed 0.0 MB in 0.0 seconds" and "Buffer utilization: 0.0%" would be true of
nothing) it prints, per partition, :func:`one_pass_summary`: the bytes and records of the dirty
range, the survivors Spark found for it, the wall time of the partition's rewrite task, and the
sizes before and after; and for the job, :func:`one_pass_timings`: each phase's wall time on the
driver (planning, the survivors job over every partition at once, the rewrite job, the
checkpoint update) and rates over the bytes each phase read. The survivors job is one shuffle for
all partitions, so its time is the job's, never split by partition.

Either way the job holds the data directory's lock from planning to the checkpoint update, so no
store (a broker, the CLI, the in-process cleaner, the Spark sink's commit) opens the directory
meanwhile, and the in-process cleaner and a job never clean the same partition at once. Tasks
take a lock per partition as well, so a speculative or retried attempt waits for the one still
running. The lock is an ``flock``: on a cluster, the data directory must be shared storage whose
locks all hosts see (a local disk with ``local[*]``, or NFSv4). A killed job leaves the cleaner's
``.cleaned``/``.swap`` files at worst, which the next open recovers, and the cleaner checkpoint
where it was; running the job again finishes the work.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compactlog.cleaner.offline import (
    WORK_DIR,
    PartitionOutcome,
    PartitionPlan,
    clean_partition,
    plan_partitions,
    record_cleaned,
)
from compactlog.cleaner.stats import MB
from compactlog.errors import ConfigError, StorageError
from compactlog.log_manager import LogManager
from compactlog.storage.datadir import DataDirLock, PartitionJobs
from compactlog.storage.fs import refuse_uri

MODES = ("per-partition", "one-pass")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class OnePassFigures:
    """What one partition's part of a one-pass job measured."""

    #: Keys whose latest record the survivors job found in the partition's range.
    survivors: int
    #: Wall time of the partition's rewrite task, from loading the log to closing it.
    task_secs: float


@dataclass
class CompactionResult:
    """What a job did: one outcome per partition planned (uncleanable ranges included)."""

    topic: str
    mode: str
    outcomes: list[PartitionOutcome]
    survivors: int | None = None  # one-pass: keys whose latest record the job kept
    elapsed_secs: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    #: one-pass: each cleaned partition's figures, by partition.
    one_pass: dict[int, OnePassFigures] = field(default_factory=dict)

    @property
    def failed(self) -> list[PartitionOutcome]:
        return [o for o in self.outcomes if o.error is not None]

    @property
    def cleaned(self) -> list[PartitionOutcome]:
        return [o for o in self.outcomes if o.summary]


def compact(
    spark: Any,
    data_dir: str | os.PathLike[str],
    topic: str,
    *,
    mode: str = "per-partition",
    partitions: Sequence[int] | None = None,
    now: int | None = None,
    broker_config: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> CompactionResult:
    """Clean ``topic`` (the given partitions, or all) of ``data_dir`` on ``spark``, as of
    ``now`` (epoch ms; default: the wall clock). ``broker_config`` holds broker settings by
    Kafka's names (``log.cleaner.dedupe.buffer.size``, ...), as ``Store.open`` takes them."""
    if mode not in MODES:
        raise ConfigError(f"unknown compaction mode {mode!r}; expected one of {', '.join(MODES)}")
    say = progress or (lambda message: None)
    refuse_uri(data_dir, "compaction")
    path = os.path.abspath(os.fspath(data_dir))
    if not os.path.isdir(path):
        raise StorageError(f"the data directory {path} does not exist")
    started = time.monotonic()
    phases: dict[str, float] = {}
    job_id = uuid.uuid4().hex
    jobs = PartitionJobs(path)
    with DataDirLock(path) as lock:
        with LogManager.open(path, config=broker_config, dir_lock=lock) as logs:
            plans = plan_partitions(logs.cleaner, topic, job_id, partitions, now, broker_config)
            count = logs.store.partitions(topic)
        _clear_work_dir(path)
        jobs.begin(job_id)  # until a store opens again, the files are the job's
        todo = [p for p in plans if p.cleanable]
        phases["plan"] = time.monotonic() - started
        say(
            f"{topic}: {len(todo)} of {len(plans)} partition(s) have a cleanable range; "
            f"cleaning them on Spark ({mode})"
        )
        survivors: int | None = None
        figures: dict[int, OnePassFigures] = {}
        if not todo:
            outcomes = []
        elif mode == "per-partition":
            outcomes = _per_partition(spark, todo, phases)
        else:
            outcomes, figures = _one_pass(spark, path, topic, count, todo, phases, say)
            survivors = sum(f.survivors for f in figures.values())
        clean_at = time.monotonic()
        with LogManager.open(path, config=broker_config, dir_lock=lock) as logs:
            record_cleaned(logs.cleaner, outcomes)
        phases["record"] = time.monotonic() - clean_at
        _clear_work_dir(path)
    by_partition = {o.partition: o for o in outcomes}
    for plan in plans:  # partitions with nothing to clean keep their range in the result
        by_partition.setdefault(plan.partition, PartitionOutcome.untouched(plan))
    result = CompactionResult(
        topic=topic,
        mode=mode,
        outcomes=[by_partition[p] for p in sorted(by_partition)],
        survivors=survivors,
        elapsed_secs=time.monotonic() - started,
        phases=phases,
        one_pass=figures,
    )
    if mode == "one-pass":
        for outcome in result.outcomes:
            if outcome.partition in figures and outcome.summary:
                outcome.summary = one_pass_summary(outcome, figures[outcome.partition])
    for outcome in result.outcomes:
        if outcome.summary:
            say(outcome.summary)
        if outcome.error:
            say(f"{outcome.name}: not cleaned: {outcome.error}")
    if mode == "one-pass" and todo:
        say(one_pass_timings(result))
    return result


def one_pass_summary(outcome: PartitionOutcome, figures: OnePassFigures) -> str:
    """One partition's lines after a one-pass job (it starts with a newline, as Kafka's
    summary message does): what each figure means is in the module's docstring."""
    stats = outcome.stats
    read_mb, written_mb = stats["bytes_read"] / MB, stats["bytes_written"] / MB
    messages_read, messages_written = int(stats["messages_read"]), int(stats["messages_written"])
    secs = figures.task_secs
    return (
        f"\n\tSpark one-pass compaction cleaned log {outcome.name} "
        f"(dirty section = [{outcome.first_dirty_offset}, {outcome.end_offset}])\n"
        f"\tSurvivors: {figures.survivors:,} keys' latest records, from the job's shuffle "
        f"(no offset map: no buffer, no key limit)\n"
        f"\tRewritten {read_mb:,.1f} MB in {secs:.1f} seconds by its task "
        f"({_rate(read_mb, secs)} MB/sec)\n"
        f"\tStart size: {read_mb:,.1f} MB ({messages_read:,} messages)\n"
        f"\tEnd size: {written_mb:,.1f} MB ({messages_written:,} messages)\n"
        f"\t{_percent_less(written_mb, read_mb)} size reduction "
        f"({_percent_less(messages_written, messages_read)} fewer messages)\n"
    )


def one_pass_timings(result: CompactionResult) -> str:
    """The job's phases, wall time on the driver, and rates over the bytes of the dirty ranges
    (which both Spark jobs read in full)."""
    phases = result.phases
    read_mb = sum(o.stats.get("bytes_read", 0.0) for o in result.cleaned) / MB
    tasks = len(result.one_pass)
    task_secs = sum(f.task_secs for f in result.one_pass.values())
    survivors, rewrite = phases.get("survivors", 0.0), phases.get("rewrite", 0.0)
    return (
        f"{result.topic}: one-pass job in {result.elapsed_secs:.1f} s, {read_mb:,.1f} MB of dirty "
        f"ranges ({_rate(read_mb, result.elapsed_secs)} MB/sec over the job)\n"
        f"\tplan: {phases.get('plan', 0.0):.1f} s (recover the logs, compute the ranges)\n"
        f"\tsurvivors: {survivors:.1f} s, one Spark job over all {tasks} partition(s) "
        f"({_rate(read_mb, survivors)} MB/sec)\n"
        f"\trewrite: {rewrite:.1f} s, {tasks} task(s) taking {task_secs:.1f} task-seconds "
        f"({_rate(read_mb, rewrite)} MB/sec)\n"
        f"\tcheckpoint: {phases.get('record', 0.0):.1f} s\n"
    )


def _rate(mb: float, secs: float) -> str:
    return f"{mb / secs:,.1f}" if secs > 0 else "-"


def _percent_less(after: float, before: float) -> str:
    return f"{100 * (1 - after / before):.1f}%" if before else "-"


def _per_partition(
    spark: Any, plans: list[PartitionPlan], phases: dict[str, float]
) -> list[PartitionOutcome]:
    started = time.monotonic()
    sc = spark.sparkContext
    sc.setJobDescription(f"compactlog: clean {len(plans)} partition(s)")
    outcomes: list[PartitionOutcome] = sc.parallelize(plans, len(plans)).map(_clean_task).collect()
    phases["clean"] = time.monotonic() - started
    return outcomes


def _clean_task(plan: PartitionPlan) -> PartitionOutcome:
    return clean_partition(plan)


def _one_pass(
    spark: Any,
    path: str,
    topic: str,
    count: int,
    plans: list[PartitionPlan],
    phases: dict[str, float],
    say: Progress,
) -> tuple[list[PartitionOutcome], dict[int, OnePassFigures]]:
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark's own idiom

    from compactlog.spark.source import log_reader  # noqa: PLC0415 - needs pyspark

    started = time.monotonic()
    survivors_dir = os.path.join(path, WORK_DIR, f"survivors-{uuid.uuid4().hex}")
    # Each planned partition up to its first uncleanable offset; the others not at all.
    ends = {p.partition: p.first_uncleanable_offset for p in plans}
    ending = {topic: {str(p): ends.get(p, 0) for p in range(count)}}
    records = (
        log_reader(spark)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", json.dumps(ending))
        .load(path)
    )
    latest = (
        records.where(F.col("key").isNotNull())
        .groupBy("partition", "key")
        .agg(F.max("offset").alias("offset"))
        .select("partition", "offset")
    )
    spark.sparkContext.setJobDescription(f"compactlog: latest offset per key of {topic}")
    latest.write.partitionBy("partition").parquet(survivors_dir)
    phases["survivors"] = time.monotonic() - started
    say(
        f"{topic}: latest offset of every key computed in {phases['survivors']:.1f} s "
        f"(one Spark job over {len(plans)} partition(s)); rewriting"
    )

    rewrite_at = time.monotonic()
    sc = spark.sparkContext
    sc.setJobDescription(f"compactlog: rewrite {len(plans)} partition(s) of {topic}")
    jobs = [(plan, survivors_dir) for plan in plans]
    results: list[tuple[PartitionOutcome, OnePassFigures]] = (
        sc.parallelize(jobs, len(jobs)).map(_one_pass_task).collect()
    )
    phases["rewrite"] = time.monotonic() - rewrite_at
    return [o for o, _ in results], {o.partition: f for o, f in results}


def _one_pass_task(job: tuple[PartitionPlan, str]) -> tuple[PartitionOutcome, OnePassFigures]:
    plan, survivors_dir = job
    started = time.monotonic()
    survivors = read_survivors(survivors_dir, plan.partition)
    outcome = clean_partition(plan, survivors)
    return outcome, OnePassFigures(len(survivors), time.monotonic() - started)


def read_survivors(survivors_dir: str, partition: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The sorted surviving offsets of one partition, from the job's Parquet files."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - on the executors

    directory = os.path.join(survivors_dir, f"partition={partition}")
    if not os.path.isdir(directory):
        return np.empty(0, dtype=np.int64)
    parts = [
        pq.read_table(os.path.join(directory, name), columns=["offset"]).column("offset").to_numpy()
        for name in sorted(os.listdir(directory))
        if name.endswith(".parquet")
    ]
    if not parts:
        return np.empty(0, dtype=np.int64)
    return np.sort(np.concatenate(parts).astype(np.int64, copy=False))


def _clear_work_dir(path: str) -> None:
    """Drop what earlier jobs left (the lock is held: no job is running); keep the locks."""
    work = os.path.join(path, WORK_DIR)
    if not os.path.isdir(work):
        return
    for name in os.listdir(work):
        if name not in ("locks", "current"):
            shutil.rmtree(os.path.join(work, name), ignore_errors=True)
