"""Progress bars for long Spark work: the tasks done of the jobs a phase runs, with their rate.

    progress = SparkProgress(spark, progress_console(quiet=False))
    with progress.phase("report"):
        partition_report(spark, "data", "tickets")

Theory of operation: a phase runs its Spark jobs in a job group of its own (a thread-local
property of the driver thread that submits them: PySpark pins a Python thread to a JVM thread).
A daemon thread polls Spark's status tracker a few times a second for the group's jobs, their
stages and the stages' task counts, and draws one ``rich`` bar: tasks done of the tasks known so
far (a job's later stages are known once it is submitted; a stage Spark skips, because an
earlier job left its shuffle output, counts only while its job runs), tasks per second, the
running job and stage, and the time spent. The group, description and the thread stop when the
phase ends, whatever way it ends, and the driver thread's earlier job group comes back.

Bars go to standard error, and only to a terminal: a pipe, a file, a test runner, or
``--quiet`` get none (:func:`progress_console` returns None, and every phase is a no-op), so
captured output stays the same line-oriented text it was.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

#: Seconds between two looks at the status tracker: often enough for a bar, cheap for the JVM.
POLL_SECS = 0.25

_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def progress_console(quiet: bool = False) -> Any:
    """A ``rich`` console on standard error for progress bars, or None: with ``quiet``, or when
    standard error is not a terminal (rich's test, which ``FORCE_COLOR``/``TTY_COMPATIBLE``
    override)."""
    if quiet:
        return None
    from rich.console import Console  # noqa: PLC0415 - the spark extra's dependency

    console = Console(stderr=True)
    return console if console.is_terminal else None


class SparkProgress:
    """Bars for the phases of a job on ``spark``, drawn on ``console`` (None: no bars)."""

    def __init__(self, spark: Any, console: Any, poll_secs: float = POLL_SECS) -> None:
        self.spark = spark
        self.console = console
        self.poll_secs = poll_secs

    @contextlib.contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """Show the progress of the Spark jobs run inside the block, as ``label``."""
        if self.console is None:
            yield
            return
        from rich.progress import (  # noqa: PLC0415
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        sc = self.spark.sparkContext
        saved = {name: sc.getLocalProperty(name) for name in _GROUP_PROPERTIES}
        group = f"compactlog-{uuid.uuid4().hex[:12]}"
        sc.setJobGroup(group, f"compactlog: {label}", interruptOnCancel=False)
        bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("tasks, {task.fields[rate]} tasks/s, {task.fields[where]}"),
            TimeElapsedColumn(),
            console=self.console,
            redirect_stdout=True,
            redirect_stderr=True,
        )
        task = bar.add_task(label, total=None, rate="-", where="waiting for Spark")
        started = time.monotonic()
        stop = threading.Event()
        tracker = sc.statusTracker()

        def update() -> None:
            done, total, where = _tasks(tracker, group)
            elapsed = time.monotonic() - started
            rate = f"{done / elapsed:,.1f}" if elapsed > 0 else "-"
            bar.update(task, completed=done, total=total or None, rate=rate, where=where)

        def poll() -> None:
            while not stop.wait(self.poll_secs):
                with contextlib.suppress(Exception):  # a tracker call racing the job's end
                    update()

        poller = threading.Thread(target=poll, name=f"progress {label}", daemon=True)
        with bar:
            poller.start()
            try:
                yield
            finally:
                stop.set()
                poller.join()
                with contextlib.suppress(Exception):
                    update()  # the last figures, once the jobs are over
                for name, value in saved.items():
                    sc.setLocalProperty(name, value)


def _tasks(tracker: Any, group: str) -> tuple[int, int, str]:
    """Tasks done and known of the group's jobs, and where the work is (job and stage).

    A stage counts once, however many of the group's jobs name it (a job that reuses an
    earlier job's shuffle names its stage again). A stage Spark skips never starts: in a
    finished job, only the tasks that ran count; in a running one, a stage that has not started
    while a stage created after it has (a child runs only after its parents) is a skipped one
    and does not count either."""
    counted: dict[int, tuple[int, int]] = {}  # stage id: tasks done, tasks known
    where = "waiting for Spark"
    for job_id in sorted(tracker.getJobIdsForGroup(group)):
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        running = job.status == "RUNNING"
        where = f"job {job_id}" if running else f"job {job_id} {job.status.lower()}"
        stages = [(sid, tracker.getStageInfo(sid)) for sid in job.stageIds]
        stages = [(sid, info) for sid, info in stages if info is not None]
        begun = [
            sid
            for sid, info in stages
            if info.numActiveTasks or info.numCompletedTasks or info.numFailedTasks
        ]
        latest_begun = max(begun, default=-1)
        for sid, info in stages:
            if running and (sid in begun or sid > latest_begun):
                counted[sid] = (info.numCompletedTasks, info.numTasks)
            elif sid not in counted:
                counted[sid] = (info.numCompletedTasks, info.numCompletedTasks)
            if info.numActiveTasks:
                where = f"job {job_id}, stage {sid}"
    done = sum(d for d, _ in counted.values())
    total = sum(t for _, t in counted.values())
    return done, total, where
