"""``spark ...``: the data pipeline's jobs on Apache Spark (the ``compactlog[spark]`` extra).

Each command starts a local Spark session (``--master``, default ``local[*]``) unless run under
``spark-submit``, where the session it finds is used."""

from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Any

import click

from compactlog.cli.clean import NOW_HELP
from compactlog.cli.common import (
    EXIT_DATA_ERROR,
    EXIT_USAGE,
    CliError,
    check_topic_name,
    state,
)


def _broker_settings(values: tuple[str, ...]) -> dict[str, str]:
    settings = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise CliError(f"--config wants NAME=VALUE, not {item!r}", EXIT_USAGE)
        settings[name.strip()] = value.strip()
    return settings


def session(master: str, driver_memory: str) -> Any:
    """A Spark session: the running one (``spark-submit``), or a new local one."""
    if importlib.util.find_spec("pyspark") is None:
        raise CliError(
            "the spark commands need PySpark: pip install 'compactlog[spark]'", EXIT_USAGE
        )
    if shutil.which("java") is None:
        raise CliError("the spark commands need Java 17 or 21 on PATH", EXIT_USAGE)
    from pyspark.sql import SparkSession  # noqa: PLC0415 - the extra is optional

    from compactlog.spark import local_session, register  # noqa: PLC0415

    active = SparkSession.getActiveSession()
    if active is None and "PYSPARK_GATEWAY_PORT" in os.environ:
        # Under spark-submit: its --master and --conf settings make the session.
        active = SparkSession.builder.appName("compactlog").getOrCreate()
    if active is not None:
        register(active)
        return active
    return local_session(master, "compactlog", driver_memory=driver_memory)


MASTER = click.option(
    "--master",
    default="local[*]",
    show_default=True,
    help="Spark master for a new session (ignored under spark-submit).",
)
DRIVER_MEMORY = click.option(
    "--driver-memory", default="2g", show_default=True, help="spark.driver.memory."
)
QUIET = click.option(
    "--quiet",
    is_flag=True,
    help="No progress bars (they are drawn on standard error, and only on a terminal).",
)


def _progress(spark: Any, quiet: bool) -> Any:
    """Progress bars of the command's Spark tasks (none with --quiet or off a terminal)."""
    from compactlog.spark._progress import SparkProgress, progress_console  # noqa: PLC0415

    return SparkProgress(spark, progress_console(quiet))


@click.group("spark")
def spark_group() -> None:
    """The data pipeline on Apache Spark: compaction, snapshot, report, workload.

    Every command starts a local Spark session (--master) unless run under spark-submit.

    \b
    Example:
      compactlog --data-dir data spark compact entities --mode one-pass

    Exit codes: 0 success, 2 bad option or topic name, or no PySpark/Java, 3 storage or data
    error.
    """


@spark_group.command("compact")
@click.argument("topic", callback=check_topic_name)
@click.option(
    "--mode",
    type=click.Choice(["per-partition", "one-pass"]),
    default="per-partition",
    show_default=True,
    help="per-partition: Kafka's cleaner in one task per partition (byte-identical to "
    "'compactlog clean'); one-pass: Spark finds every key's latest offset, then one rewrite "
    "cleans the whole dirty range whatever the number of keys.",
)
@click.option(
    "--partition", "partitions", type=int, multiple=True, help="Only this partition (repeat)."
)
@click.option(
    "--config",
    "settings",
    multiple=True,
    metavar="NAME=VALUE",
    help="A broker setting, e.g. log.cleaner.dedupe.buffer.size=134217728 (repeat).",
)
@click.option("--now", type=int, help=NOW_HELP)
@MASTER
@DRIVER_MEMORY
@QUIET
@click.pass_context
def compact_command(
    ctx: click.Context,
    topic: str,
    mode: str,
    partitions: tuple[int, ...],
    settings: tuple[str, ...],
    now: int | None,
    master: str,
    driver_memory: str,
    quiet: bool,
) -> int:
    """Clean TOPIC's partitions on Spark, printing the cleaner's summary lines.

    The job holds the data directory's lock throughout: stop a broker or any other process
    using the directory first. The cleaning range of each partition is the one 'compactlog
    clean --partition' would clean (no dirty-ratio threshold, never the active segment).

    \b
    Example:
      compactlog --data-dir data spark compact entities --mode one-pass

    Exit codes: 0 success, 2 bad option or topic name, or no PySpark/Java, 3 not compacted,
    unknown topic, directory in use, or a partition failed to clean.
    """
    path = state(ctx).require_data_dir()
    broker = _broker_settings(settings)
    spark = session(master, driver_memory)
    from compactlog.spark.compact import compact  # noqa: PLC0415

    with _progress(spark, quiet).phase(f"compact {topic}"):
        result = compact(
            spark,
            path,
            topic,
            mode=mode,
            partitions=list(partitions) or None,
            now=now,
            broker_config=broker,
            progress=_echo,
        )
    click.echo(
        f"{topic}: {len(result.cleaned)} partition(s) cleaned, {len(result.failed)} failed, "
        f"in {result.elapsed_secs:.1f} s"
    )
    if result.failed:
        raise CliError("; ".join(f"{o.name}: {o.error}" for o in result.failed), EXIT_DATA_ERROR)
    return 0


def _echo(message: str) -> None:
    for line in message.strip("\n").splitlines():
        click.echo(line)


@spark_group.command("snapshot")
@click.argument("topic", callback=check_topic_name)
@click.argument("output_dir", type=click.Path(path_type=str))
@click.option("--full", is_flag=True, help="Rebuild from the log instead of refreshing.")
@click.option("--headers", is_flag=True, help="Keep each record's headers in the table.")
@click.option(
    "--format",
    "table_format",
    type=click.Choice(["parquet", "delta"]),
    default="parquet",
    show_default=True,
    help="parquet: version-N directories and a _current pointer; delta: a Delta Lake table "
    "refreshed by MERGE (needs the deltalake package).",
)
@MASTER
@DRIVER_MEMORY
@click.pass_context
def snapshot_command(
    ctx: click.Context,
    topic: str,
    output_dir: str,
    full: bool,
    headers: bool,
    table_format: str,
    master: str,
    driver_memory: str,
) -> None:
    """Write or refresh the latest-value-per-key Parquet table of TOPIC in OUTPUT_DIR.

    One row per key and partition (tombstones applied), with its offset and timestamp,
    partitioned by topic and partition. A refresh reads only the records after the previous
    snapshot's offsets; the switch to a new version is atomic.

    With --format delta the table is a Delta Lake table that delta-rs, DuckDB and other Delta
    readers open without Spark; each refresh is one MERGE commit holding the offsets read.

    \b
    Example:
      compactlog --data-dir data spark snapshot entities tables/entities
      compactlog --data-dir data spark snapshot entities delta/entities --format delta

    Exit codes: 0 success, 2 bad option or topic name, or no PySpark/Java, 3 unknown topic,
    unusable output directory, or a storage error.
    """
    path = state(ctx).require_data_dir()
    if table_format == "delta" and importlib.util.find_spec("deltalake") is None:
        raise CliError(
            "--format delta needs the deltalake package: pip install 'compactlog[spark]'",
            EXIT_USAGE,
        )
    spark = session(master, driver_memory)
    if table_format == "delta":
        from compactlog.spark.delta_snapshot import snapshot_delta  # noqa: PLC0415

        r = snapshot_delta(spark, path, topic, output_dir, full=full, headers=headers)
    else:
        from compactlog.spark.snapshot import snapshot  # noqa: PLC0415

        r = snapshot(spark, path, topic, output_dir, full=full, headers=headers)
    if r.unchanged:
        how = "unchanged (nothing new)"
    else:
        how = "incremental" if r.incremental else f"full ({r.reason})"
    click.echo(
        f"{topic}: {r.rows} rows, {r.records_read} records read, {how}, "
        f"{r.version_path} in {r.elapsed_secs:.1f} s"
    )


@spark_group.command("report")
@click.argument("topic", required=False, callback=check_topic_name)
@click.option("--chart", type=click.Path(dir_okay=False, path_type=str), help="Draw a PNG here.")
@click.option(
    "--before",
    type=click.Path(exists=True, dir_okay=False, path_type=str),
    help="A report saved with --json earlier: the chart shows it beside this one.",
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False, path_type=str), help="Save as JSON."
)
@click.option(
    "--dedupe-buffer-size",
    type=click.IntRange(min=1),
    help="The buffer the passes are counted for. Default: log.cleaner.dedupe.buffer.size "
    "(128 MiB).",
)
@click.option(
    "--storage-option",
    "storage_option",
    multiple=True,
    metavar="NAME=VALUE",
    help="For a --data-dir s3://, hdfs:// or file:// URI: fs.s3.endpoint, fs.s3.region, "
    "fs.s3.accessKey, ... (docs/spark.md); repeatable. Default: the AWS_* variables.",
)
@MASTER
@DRIVER_MEMORY
@QUIET
@click.pass_context
def report_command(
    ctx: click.Context,
    topic: str | None,
    chart: str | None,
    before: str | None,
    json_path: str | None,
    dedupe_buffer_size: int | None,
    storage_option: tuple[str, ...],
    master: str,
    driver_memory: str,
    quiet: bool,
) -> None:
    """Per partition of TOPIC (default: every topic): records, bytes, distinct keys,
    superseded records, tombstones, dirty ratio, the cleaner passes a dedupe buffer needs, the
    cleaner's first dirty offset and, beside it, the last offset gap (seed 000's "last
    compaction") with its time and the records after it. Reads the files without opening the
    store.

    \b
    Example:
      compactlog --data-dir data spark report entities --json before.json
      compactlog --data-dir data spark report entities --before before.json --chart after.png

    Exit codes: 0 success, 2 bad option or topic name, or no PySpark/Java, 3 unknown topic,
    unreadable --before file, or a storage error.
    """
    path = state(ctx).require_data_dir()
    storage = {}
    for item in storage_option:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise CliError(f"--storage-option must be NAME=VALUE, not {item!r}", EXIT_USAGE)
        storage[name.strip()] = value
    spark = session(master, driver_memory)
    from compactlog.spark.report import (  # noqa: PLC0415
        partition_report,
        print_report,
        read_json,
        write_chart,
        write_json,
    )

    earlier = read_json(before) if before else None
    with _progress(spark, quiet).phase(f"report {topic or path}"):
        reports = partition_report(
            spark, path, topic, dedupe_buffer_size=dedupe_buffer_size, storage_options=storage
        )
    print_report(reports, title=f"compaction report of {topic or path}")
    if json_path:
        write_json(reports, json_path)
        click.echo(f"report saved to {json_path}")
    if chart:
        width, height = write_chart(reports, chart, before=earlier)
        click.echo(f"chart drawn to {chart} ({width}x{height} pixels)")


@spark_group.command("workload")
@click.argument("topic", callback=check_topic_name)
@click.option("--keys", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--value-bytes", type=click.IntRange(min=1), default=1024, show_default=True)
@click.option("--updates", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--distribution", type=click.Choice(["uniform", "skewed"]), default="uniform", show_default=True
)
@click.option("--skew", type=float, default=1.0, show_default=True, help="Zipf-like exponent.")
@click.option("--tombstone-fraction", type=float, default=0.0, show_default=True)
@click.option("--republish", is_flag=True, help="Publish every live key again at the end.")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--config",
    "settings",
    multiple=True,
    metavar="NAME=VALUE",
    help="A config of the topic when it is created (repeat). Default: cleanup.policy=compact.",
)
@MASTER
@DRIVER_MEMORY
@click.pass_context
def workload_command(
    ctx: click.Context,
    topic: str,
    keys: int,
    value_bytes: int,
    updates: int,
    distribution: str,
    skew: float,
    tombstone_fraction: float,
    republish: bool,
    partitions: int,
    seed: int,
    settings: tuple[str, ...],
    master: str,
    driver_memory: str,
) -> None:
    """Publish an entity workload into TOPIC with Spark, in parallel and deterministically:
    every key once, then updates, tombstones, and optionally every live key again.

    \b
    Example:
      compactlog --data-dir data spark workload tickets --keys 200000 --updates 200000 \\
          --distribution skewed --tombstone-fraction 0.05 --republish --partitions 6

    Exit codes: 0 success, 2 bad option, topic name or workload, or no PySpark/Java, 3 a
    storage error.
    """
    path = state(ctx).require_data_dir()
    from compactlog.spark.workload import PhaseProgress, WorkloadSpec  # noqa: PLC0415

    spec = WorkloadSpec(
        topic=topic,
        keys=keys,
        value_bytes=value_bytes,
        distribution=distribution,
        skew=skew,
        updates=updates,
        tombstone_fraction=tombstone_fraction,
        republish=republish,
        partitions=partitions,
        seed=seed,
        topic_config=_broker_settings(settings) or {"cleanup.policy": "compact"},
    )
    spark = session(master, driver_memory)
    from compactlog.spark.workload import generate  # noqa: PLC0415

    def show(event: PhaseProgress) -> None:
        if event.done:
            click.echo(f"{event.phase}: {event.records} records in {event.seconds:.1f} s")

    result = generate(spark, path, spec, progress=show)
    click.echo(
        f"{topic}: {result.records} records, {result.live_keys} live keys, "
        f"{result.tombstones} tombstones, in {result.seconds:.1f} s"
    )


@spark_group.command("pipeline")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=str),
    required=True,
    help="Where the report, the chart and the snapshot go.",
)
@click.option("--topic", default="tickets", show_default=True, callback=check_topic_name)
@click.option("--keys", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--updates", type=click.IntRange(min=0), default=200_000, show_default=True)
@click.option("--value-bytes", type=click.IntRange(min=1), default=512, show_default=True)
@click.option("--partitions", type=click.IntRange(min=1), default=4, show_default=True)
@click.option(
    "--mode",
    type=click.Choice(["per-partition", "one-pass"]),
    default="one-pass",
    show_default=True,
)
@click.option("--fresh", is_flag=True, help="Remove the directories of an earlier run first.")
@MASTER
@DRIVER_MEMORY
@QUIET
@click.pass_context
def pipeline_command(
    ctx: click.Context,
    out_dir: str,
    topic: str,
    keys: int,
    updates: int,
    value_bytes: int,
    partitions: int,
    mode: str,
    fresh: bool,
    master: str,
    driver_memory: str,
    quiet: bool,
) -> None:
    """The main job, end to end: generate an entity topic and republish it, clean it on Spark
    (the cleaner's summary lines shown), snapshot it as Parquet, report it before and after
    with a chart, and check the result. The data directory must be new (or --fresh). On a
    terminal, each step draws a progress bar of its Spark tasks on standard error (--quiet: none).

    \b
    Example:
      compactlog --data-dir demo-data spark pipeline --out demo-out --fresh

    Exit codes: 0 success, 2 bad option or a non-empty directory, or no PySpark/Java, 3 a
    storage error or a failed check of the result.
    """
    path = state(ctx).require_data_dir()
    from rich.console import Console  # noqa: PLC0415

    from compactlog.spark._progress import progress_console  # noqa: PLC0415
    from compactlog.spark.pipeline import PipelineSpec, run  # noqa: PLC0415
    from compactlog.spark.report import TABLE_WIDTH  # noqa: PLC0415

    spec = PipelineSpec(
        data_dir=os.path.abspath(path),
        out_dir=os.path.abspath(out_dir),
        topic=topic,
        keys=keys,
        updates=updates,
        value_bytes=value_bytes,
        partitions=partitions,
        mode=mode,
        fresh=fresh,
    )
    console = Console()
    console = Console(width=max(console.width, TABLE_WIDTH), highlight=False)
    console.print(f"starting Spark ({master})")
    spark = session(master, driver_memory)
    run(spark, spec, console, progress_console(quiet))
