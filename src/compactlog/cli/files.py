"""``dump-log``, ``log-dirs`` and ``verify``: looking at the files (kafka-dump-log,
kafka-log-dirs, and a checker Kafka does not have)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence

import click
from rich.console import Console
from rich.table import Table

from compactlog.cli.common import (
    EXIT_PROBLEMS_FOUND,
    EXIT_USAGE,
    CliError,
    library_error,
    one_line,
    open_files,
    state,
)
from compactlog.errors import CompactlogError
from compactlog.storage.inspect import (
    LIVE_ATTEMPTS,
    LOG_SUFFIX,
    Log,
    dump_log_file,
    live_retry_delay,
    lock_holder,
    partition_dir_name,
    verify_data_dir,
)
from compactlog.storage.readonly import ReadOnlyDataDir


@click.command("dump-log")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=str)
)
@click.option(
    "--print-data-log/--no-print-data-log",
    default=True,
    show_default=True,
    help="Print every record (metadata, key and payload), not only the batches.",
)
@click.pass_context
def dump_log(ctx: click.Context, files: Sequence[str], print_data_log: bool) -> None:
    """Print log segments, indexes and checkpoint files (like kafka-dump-log --print-data-log).

    Works on .log, .index, .timeindex and .txnindex files (also with a .deleted, .cleaned or
    .swap suffix), on producer-state .snapshot files and on offset checkpoint files. Needs no
    data directory and changes nothing.
    Damage (a torn tail, a CRC mismatch, an index entry that points at no batch, ...) is
    reported as one error line naming the byte position, after everything readable is printed;
    the remaining files are still dumped.

    \b
    Example:
      compactlog dump-log /data/fruit-prices-0/00000000000000000000.log
      compactlog dump-log --no-print-data-log /data/fruit-prices-0/*.index

    Exit codes: 0 success, 2 a file of another kind, 3 a damaged or unreadable file.
    """
    out = sys.stdout
    failed: list[CliError] = []
    for path in files:
        out.write(f"Dumping {path}\n")
        try:
            for line in dump_log_file(path, print_data_log=print_data_log):
                out.write(line + "\n")
        except CompactlogError as exc:
            out.flush()
            if state(ctx).verbose:
                traceback.print_exc(file=sys.stderr)
            error = library_error(exc)
            error.show()
            failed.append(error)
    out.flush()
    if failed:
        ctx.exit(max(error.exit_code for error in failed))


def _live_log(files: ReadOnlyDataDir, topic: str, partition: int) -> Log | None:
    """The partition's log, read-only; None when it has no segment file. While a process holds
    the directory, the broker may be replacing segments (the cleaner's swap, retention): a
    segment that vanished between the listing and the opening is looked for again."""
    attempts = LIVE_ATTEMPTS if lock_holder(files.path) is not None else 1
    for attempt in range(attempts):
        try:
            return files.log(topic, partition)
        except CompactlogError:
            if attempt < attempts - 1:
                time.sleep(live_retry_delay(attempt))
                continue
            directory = os.path.join(files.path, partition_dir_name(topic, partition))
            with contextlib.suppress(OSError):
                if not any(n.endswith(LOG_SUFFIX) for n in os.listdir(directory)):
                    return None
            raise
    return None


@click.command("log-dirs")
@click.option("--json", "as_json", is_flag=True, help="kafka-log-dirs' JSON instead of a table.")
@click.pass_context
def log_dirs(ctx: click.Context, as_json: bool) -> None:
    """Size of every partition in the data directory, and the total (like kafka-log-dirs
    --describe, whose JSON layout --json follows).

    Reads the files without the lock and writes nothing, so it also works while a broker
    (compactlog serve) holds the directory: figures as of the moment each partition is read.

    \b
    Example:
      compactlog log-dirs
      compactlog log-dirs --json | jq '.brokers[0].logDirs[0].partitions'

    Exit codes: 0 success, 2 no data directory, 3 storage error.
    """
    rows = []
    with open_files(ctx) as files:
        for topic in files.topics():
            for partition in range(files.partitions(topic)):
                log = _live_log(files, topic, partition)
                if log is None:  # no segment file yet: the store creates one at open
                    rows.append((f"{topic}-{partition}", 0, 0, 0, 0))
                    continue
                segments = log.segments()
                rows.append(
                    (
                        f"{topic}-{partition}",
                        sum(s.size for s in segments),
                        len(segments),
                        log.log_start_offset,
                        log.log_end_offset,
                    )
                )
        path = files.path
    if as_json:
        doc = {
            "version": 1,
            "brokers": [
                {
                    "broker": 0,
                    "logDirs": [
                        {
                            "logDir": path,
                            "error": None,
                            "partitions": [
                                {"partition": name, "size": size, "offsetLag": 0, "isFuture": False}
                                for name, size, *_ in rows
                            ],
                        }
                    ],
                }
            ],
        }
        click.echo(json.dumps(doc))
        return
    table = Table(title=f"Log dir {path}")
    for column in ("Partition", "Size (bytes)", "Segments", "LogStartOffset", "LogEndOffset"):
        table.add_column(column, justify="left" if column == "Partition" else "right")
    for name, size, count, start, end in rows:
        table.add_row(name, str(size), str(count), str(start), str(end))
    table.add_section()
    table.add_row("Total", str(sum(r[1] for r in rows)), str(sum(r[2] for r in rows)), "", "")
    Console(file=sys.stdout, soft_wrap=True).print(table)


@click.command()
@click.option("--notes/--no-notes", default=True, show_default=True, help="Print notes too.")
@click.pass_context
def verify(ctx: click.Context, notes: bool) -> None:
    """Check every partition of the data directory without changing it: framing and CRC of
    every batch, offsets increasing within and across segments, torn tails, the offset and
    time indexes against the log, and the checkpoints against the logs.

    Each problem is printed as "<path>: position N: <what>", then a summary line. Notes
    (foreign files, leftovers the loader cleans up, an unclean shutdown) are not problems.
    No store is opened and no lock taken, so nothing is recovered or rewritten, and it works
    on a directory a broker holds: the active segments' pre-allocated index space is then
    expected (one note). After a crash (no clean-shutdown marker) the last segment's
    pre-allocated index space is a note: the next open rebuilds those indexes. A Kafka log
    directory's own files and its KRaft metadata log (__cluster_metadata-0) are left alone.

    \b
    Example:
      compactlog --data-dir /var/lib/compactlog verify

    Exit codes: 0 no problems, 1 problems found, 2 no data directory, 3 it cannot be read.
    """
    path = state(ctx).require_data_dir()
    if not os.path.isdir(path):
        raise CliError(f"the data directory {path} does not exist", EXIT_USAGE)
    report = verify_data_dir(path)
    for problem in report.problems:
        click.echo(one_line(str(problem)))
    if notes:
        for note in report.notes:
            click.echo(f"note: {one_line(str(note))}")
    click.echo(report.summary())
    if not report.ok:
        ctx.exit(EXIT_PROBLEMS_FOUND)
