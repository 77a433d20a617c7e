"""``salvage`` and ``quarantine``: what the operator does about damaged bytes.

The store never truncates damaged bytes away unseen: recovery copies them to quarantine files
beside their partition before it cuts them, and damage found in a sealed segment after a clean
shutdown stays in place (reads that reach it fail) until ``salvage`` moves it to quarantine.
``quarantine`` lists, shows and (only when asked by name) deletes those files.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

import click
from rich.console import Console
from rich.table import Table

from compactlog.cli.common import (
    EXIT_USAGE,
    CliError,
    check_topic_name,
    library_error,
    open_store,
    state,
)
from compactlog.errors import CompactlogError
from compactlog.records import decode_columns, is_crc_valid
from compactlog.storage.file_records import WalkEnd, iter_file_batches
from compactlog.storage.fs import OsFileSystem
from compactlog.storage.quarantine import (
    METADATA_SUFFIX,
    QuarantinedRange,
    delete_quarantined,
    list_data_dir,
    list_quarantined,
)


@click.command()
@click.argument("topic", callback=check_topic_name)
@click.option(
    "-p", "--partition", "partitions", type=int, multiple=True, help="Only this partition "
    "(repeatable; default: every partition of the topic).",
)  # fmt: skip
@click.pass_context
def salvage(ctx: click.Context, topic: str, partitions: Sequence[int]) -> None:
    """Move every damaged byte range of a topic's partitions to quarantine and keep every
    valid batch with its offset.

    Every batch of every segment is re-read (framing, CRC, offsets). Each damaged range is
    copied to a quarantine file beside its segment (fsynced) and then cut; the valid batches
    after it stay, with their offsets (an offset gap remains where the damage was). This is
    what recovery after an unclean shutdown does on its own; after a clean shutdown the store
    leaves damage it finds in place and says so, and this command is the next step. Needs the
    data directory to itself (stop the broker first).

    \b
    Example:
      compactlog salvage fruit-prices -p 0
      compactlog quarantine list

    Exit codes: 0 success (also when nothing was damaged), 2 bad usage, 3 unknown topic or
    partition, or a storage error.
    """
    with open_store(ctx) as store:
        chosen = list(partitions) if partitions else list(range(store.partitions(topic)))
        for partition in chosen:
            try:
                stats = store.salvage(topic, partition)
            except CompactlogError as exc:
                raise library_error(exc) from exc
            if not stats.quarantined and not stats.bytes_truncated:
                click.echo(f"{topic}-{partition}: no damage found")
                continue
            for kept in stats.quarantined:
                click.echo(
                    f"{topic}-{partition}: {kept.log_file} bytes {kept.start}..{kept.end} "
                    f"({kept.size} bytes, offsets {kept.offsets}; {kept.reason}) moved to "
                    f"{kept.path}"
                )
            click.echo(
                f"{topic}-{partition}: cut {stats.bytes_truncated} damaged bytes "
                f"({len(stats.quarantined)} range(s) kept in quarantine); log end offset "
                f"{store.log_end_offset(topic, partition)}"
            )


@click.group()
def quarantine() -> None:
    """List, show and delete the damaged byte ranges kept in quarantine files.

    Recovery and ``salvage`` never cut damaged bytes without first copying them to
    ``<segment>.log.corrupt-<position>`` beside the segment (with a ``.json`` file saying
    where they came from and why). They stay until deleted here, by name.

    \b
    Example:
      compactlog quarantine list
      compactlog quarantine show /data/t-0/00000000000000000000.log.corrupt-360

    Exit codes: 0 success, 2 bad usage.
    """


def _data_dir(ctx: click.Context) -> str:
    path = state(ctx).require_data_dir()
    if not os.path.isdir(path):
        raise CliError(f"the data directory {path} does not exist", EXIT_USAGE)
    return path


def _range_json(partition: str, q: QuarantinedRange) -> dict[str, object]:
    return {
        "partition": partition,
        "path": q.path,
        "logFile": q.log_file,
        "start": q.start,
        "end": q.end,
        "size": q.size,
        "offsets": q.offsets,
        "reason": q.reason,
        "quarantinedMs": q.quarantined_ms,
    }


@quarantine.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
@click.pass_context
def quarantine_list(ctx: click.Context, as_json: bool) -> None:
    """Every quarantine file of the data directory. Reads file names and metadata only, takes
    no lock and changes nothing (a broker may hold the directory).

    \b
    Example:
      compactlog quarantine list

    Exit codes: 0 success, 2 no data directory.
    """
    found = list_data_dir(OsFileSystem(), _data_dir(ctx))
    if as_json:
        click.echo(json.dumps([_range_json(p, q) for p, ranges in found.items() for q in ranges]))
        return
    if not found:
        click.echo("no quarantined ranges")
        return
    table = Table()
    for column in ("Partition", "Segment", "Bytes", "Offsets", "Reason", "File"):
        table.add_column(column)
    for partition, ranges in found.items():
        for q in ranges:
            table.add_row(
                partition,
                q.log_file,
                f"{q.start}..{q.end} ({q.size})",
                q.offsets,
                q.reason,
                os.path.basename(q.path),
            )
    Console(file=sys.stdout, soft_wrap=True).print(table)


def _find(path: str) -> QuarantinedRange:
    directory = os.path.dirname(os.path.abspath(path))
    for q in list_quarantined(OsFileSystem(), directory):
        if os.path.abspath(q.path) == os.path.abspath(path):
            return q
    raise CliError(f"{path} is not a quarantine file (see `compactlog quarantine list`)", 2)


@quarantine.command("show")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=str))
def quarantine_show(path: str) -> None:
    """What a quarantine file holds: where it came from, why, and every batch in it that
    still frames (with its offsets and whether its CRC matches), so that records can be
    recovered by hand.

    \b
    Example:
      compactlog quarantine show /data/t-0/00000000000000000000.log.corrupt-360

    Exit codes: 0 success, 2 not a quarantine file.
    """
    q = _find(path)
    click.echo(f"file: {q.path}")
    click.echo(f"from: {q.log_file} bytes {q.start}..{q.end} ({q.size} bytes)")
    click.echo(f"offsets: {q.offsets}")
    click.echo(f"reason: {q.reason}")
    fs = OsFileSystem()
    handle = fs.open(q.path)
    try:
        walk = WalkEnd()
        framed = 0
        for batch in iter_file_batches(handle, 0, None, stop=walk):
            framed += 1
            header = batch.header
            crc = "CRC ok" if is_crc_valid(batch.data) else "CRC mismatch"
            try:
                records = len(decode_columns(batch.data, verify_crc=False).to_records())
                decoded = f"{records} record(s) decode"
            except CompactlogError as exc:
                decoded = f"records unreadable: {exc}"
            click.echo(
                f"batch at {batch.position}: offsets {header.base_offset}..{header.last_offset}, "
                f"{crc}, {decoded}"
            )
        if walk.problem is not None:
            click.echo(f"unframed bytes from {walk.position}: {walk.problem}")
        if not framed:
            click.echo("no batch frames in these bytes")
    finally:
        handle.close()


@quarantine.command("delete")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=str))
@click.option("--yes", is_flag=True, help="Really delete (the bytes are gone for good).")
def quarantine_delete(paths: Sequence[str], yes: bool) -> None:
    """Delete quarantine files (and their metadata), each named explicitly.

    \b
    Example:
      compactlog quarantine delete --yes /data/t-0/00000000000000000000.log.corrupt-360

    Exit codes: 0 success, 2 a path that is not a quarantine file, or no --yes.
    """
    ranges = [_find(p) for p in paths]
    if not yes:
        raise CliError(
            f"deleting {len(ranges)} quarantine file(s) loses their bytes for good; add --yes",
            EXIT_USAGE,
        )
    fs = OsFileSystem()
    for q in ranges:
        delete_quarantined(fs, q.path)
        click.echo(f"deleted {q.path} (and {os.path.basename(q.path)}{METADATA_SUFFIX})")
