"""``clean``, ``cleaner-status`` and ``explain``: the log cleaner on demand, and why it does what
it does (over :meth:`LogManager.clean`, :meth:`LogManager.clean_log` and
:mod:`compactlog.cleaner.explain`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from compactlog.cleaner.explain import (
    KeyRecordExplanation,
    PartitionStatus,
    TombstoneStatus,
    cleaner_status,
    explain_key,
    format_ms,
    key_partition,
    next_cleaning_range,
)
from compactlog.cleaner.manager import REASON_ACTIVE_SEGMENT
from compactlog.cleaner.service import CleanResult, LogCleaner
from compactlog.cleaner.stats import delayed_partitions_line, invalid_messages_line
from compactlog.cli.common import (
    EXIT_DATA_ERROR,
    EXIT_PROBLEMS_FOUND,
    EXIT_USAGE,
    CliError,
    check_topic_name,
    open_files,
    open_logs,
)
from compactlog.log_manager import LogManager
from compactlog.storage.segment import LOG_SUFFIX, filename_prefix

#: cleaner-status lists at most this many tombstones per partition in its table (--json: all).
TOMBSTONES_SHOWN = 20

NOW_HELP = "The clock for every time decision, in epoch milliseconds. Default: the current time."


def _text(data: bytes) -> str:
    """Bytes on one line of a terminal: UTF-8, with undecodable bytes and unprintable
    characters (control characters, newlines) escaped as \\xNN, \\uNNNN or \\UNNNNNNNN."""
    text = data.decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _bytes_json(data: bytes | None) -> dict[str, str] | None:
    return None if data is None else {"text": _text(data), "hex": data.hex()}


def _partition_name(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


# --------------------------------------------------------------------------------------------
# clean


def _print_result(cleaner: LogCleaner, result: CleanResult, *, selection: bool) -> None:
    """What one iteration (or one clean_log) did, with Kafka's summary lines."""
    if result.cleaned is not None and result.summary:
        for line in result.summary.strip("\n").splitlines():
            click.echo(line)
        if selection:
            pre = cleaner.manager.last_pre_clean_stats
            if pre is not None and pre.delayed_partitions:
                click.echo(
                    delayed_partitions_line(
                        pre.cleanable_partitions,
                        pre.delayed_partitions,
                        pre.max_compaction_delay_ms,
                    )
                )
        if result.stats is not None and result.stats.invalid_messages:
            click.echo(invalid_messages_line(result.stats.invalid_messages))
    elif result.cleaned is not None and result.aborted:
        click.echo(f"Cleaning of {_partition_name(result.cleaned)} was aborted.")
    for tp, count in sorted(result.segments_deleted.items()):
        click.echo(f"Deleted {count} segment(s) of {_partition_name(tp)} by retention.")
    for tp, reason in sorted(result.uncleanable.items()):
        click.echo(f"Uncleanable partition {_partition_name(tp)}: {reason}")


def _failure(result: CleanResult) -> str | None:
    """The error of a round whose cleaning failed, or None."""
    tp = result.cleaned
    if tp is None or result.summary or result.aborted:
        return None
    reason = result.uncleanable.get(tp)
    if reason is None:  # an I/O error: logged above, the partition is not marked
        return f"cleaning {_partition_name(tp)} failed (see the error logged above)"
    return f"cleaning {_partition_name(tp)} failed: {reason} (marked uncleanable)"


def _clean_store(
    logs: LogManager, now: int | None, until_clean: bool, max_rounds: int
) -> tuple[list[str], bool]:
    """Cleaner iterations (LogManager.clean); returns the failures and whether work was left."""
    failures: list[str] = []
    for round_number in range(1, max_rounds + 1):
        if until_clean:
            click.echo(f"Round {round_number}:")
        result = logs.clean(now)
        _print_result(logs.cleaner, result, selection=True)
        failure = _failure(result)
        if failure is not None:
            failures.append(failure)
        if result.cleaned is None:
            if round_number == 1:
                click.echo(
                    "No log to clean: no compacted log is eligible "
                    "(see 'compactlog cleaner-status')."
                )
            else:
                click.echo(f"Nothing left to clean after {round_number - 1} round(s).")
            return failures, False
        if not until_clean:
            return failures, False
    return failures, True


def _roll_hint(logs: LogManager, topic: str, partition: int, reason: str | None, fuo: int) -> str:
    """How to make the records waiting in the active segment cleanable, if any are."""
    end = logs.store.log_end_offset(topic, partition)
    if reason != REASON_ACTIVE_SEGMENT or end <= fuo:
        return ""
    return (
        f"; offsets {fuo}-{end - 1} wait in the active segment, which is never cleaned: "
        f"'compactlog roll {topic} -p {partition}' makes them cleanable now (on a running "
        "broker: --admin-url), segment.ms or segment.bytes when they roll it"
    )


def _clean_partition(
    logs: LogManager,
    topic: str,
    partition: int,
    now: int | None,
    until_clean: bool,
    max_rounds: int,
) -> tuple[list[str], bool]:
    """LogManager.clean_log of one partition, repeated with --until-clean until the first dirty
    offset reaches the first uncleanable offset; returns the failures and whether work was left."""
    name = f"{topic}-{partition}"
    for round_number in range(1, max_rounds + 1):
        pending = next_cleaning_range(logs.cleaner, topic, partition, now)
        fdo, fuo = pending.first_dirty_offset, pending.first_uncleanable_offset
        if fdo >= fuo:
            bound = f" ({pending.uncleanable_reason})" if pending.uncleanable_reason else ""
            state = "clean" if round_number > 1 else "nothing to clean"
            click.echo(
                f"{name}: {state}: first dirty offset {fdo}, first uncleanable offset {fuo}{bound}"
                + _roll_hint(logs, topic, partition, pending.uncleanable_reason, fuo)
            )
            return [], False
        if until_clean:
            click.echo(f"{name}: round {round_number}: cleaning [{fdo}, {fuo})")
        result = logs.clean_log(topic, partition, now)
        _print_result(logs.cleaner, result, selection=False)
        failure = _failure(result)
        if failure is not None:
            return [failure], False
        if not until_clean:
            return [], False
    pending = next_cleaning_range(logs.cleaner, topic, partition, now)
    return [], pending.first_dirty_offset < pending.first_uncleanable_offset


@click.command()
@click.argument("topic", required=False, callback=check_topic_name)
@click.option(
    "--partition", "-p", "partitions", multiple=True, type=click.IntRange(min=0),
    help="With TOPIC: the partition to clean (repeatable). Default: every partition.",
)  # fmt: skip
@click.option("--now", type=click.IntRange(min=0), metavar="MS", help=NOW_HELP)
@click.option(
    "--until-clean",
    is_flag=True,
    help="Repeat until nothing is left to clean (a dirty section larger than the dedupe "
    "buffer takes several rounds).",
)
@click.option(
    "--max-rounds",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="With --until-clean: stop after this many rounds (per partition with TOPIC).",
)
@click.pass_context
def clean(
    ctx: click.Context,
    topic: str | None,
    partitions: Sequence[int],
    now: int | None,
    until_clean: bool,
    max_rounds: int,
) -> None:
    """Run the log cleaner now.

    Without TOPIC: one cleaner iteration exactly as a Kafka cleaner thread runs it: the
    filthiest eligible compacted log is cleaned (Kafka's summary lines are printed), then
    retention runs on every compacted log, then the uncleanable partitions are listed.

    With TOPIC: each partition (or each --partition) is cleaned whatever its dirty ratio,
    up to its first uncleanable offset (never the active segment, never inside
    min.compaction.lag.ms), without retention. Only compacted topics are cleaned.

    --until-clean repeats: without TOPIC until no log is eligible, with TOPIC until the first
    dirty offset reaches the first uncleanable offset; each round is shown.

    \b
    Example:
      compactlog clean
      compactlog clean fruit-prices --partition 0 --now 1700000000000
      compactlog clean fruit-prices --until-clean --max-rounds 10

    Exit codes: 0 success, 1 --until-clean stopped at --max-rounds with dirty data left, 2 bad
    option or topic name, or TOPIC is not compacted, 3 unknown topic or partition, a cleaning
    that failed (the partition is then uncleanable) or a storage error.
    """
    if partitions and topic is None:
        raise click.UsageError("--partition needs a TOPIC")
    with open_logs(ctx) as logs:
        store = logs.store
        if topic is None:
            failures, unfinished = _clean_store(logs, now, until_clean, max_rounds)
        else:
            config = store.topic_config(topic)
            if not config.compact:
                policy = ",".join(sorted(config.cleanup_policy))
                raise CliError(
                    f"topic {topic} is not compacted (cleanup.policy={policy}): the cleaner "
                    "only cleans compacted topics",
                    EXIT_USAGE,
                )
            chosen = list(partitions) if partitions else list(range(store.partitions(topic)))
            for partition in chosen:
                store.log(topic, partition)  # an unknown partition fails before any cleaning
            failures, unfinished = [], False
            for partition in chosen:
                failed, left = _clean_partition(
                    logs, topic, partition, now, until_clean, max_rounds
                )
                failures += failed
                unfinished = unfinished or left
    if failures:
        raise CliError("; ".join(failures), EXIT_DATA_ERROR)
    if unfinished:
        click.echo(f"warning: stopped after {max_rounds} round(s) with dirty data left", err=True)
        ctx.exit(EXIT_PROBLEMS_FOUND)


# --------------------------------------------------------------------------------------------
# cleaner-status


def _tombstone_json(t: TombstoneStatus) -> dict[str, Any]:
    return {
        "offset": t.offset,
        "key": _bytes_json(t.key),
        "timestamp": t.timestamp,
        "segment_base_offset": t.segment_base_offset,
        "delete_horizon_ms": t.delete_horizon_ms,
        "horizon_passed": t.horizon_passed,
        "superseded_by": t.superseded_by,
    }


def _status_json(s: PartitionStatus) -> dict[str, Any]:
    doc: dict[str, Any] = {
        name: getattr(s, name) for name in s.__dataclass_fields__ if name != "tombstones"
    }
    doc["tombstones"] = [_tombstone_json(t) for t in s.tombstones]
    return doc


def _tombstone_line(t: TombstoneStatus, now: int) -> str:
    where = f"offset {t.offset} key {_text(t.key)}: "
    if t.superseded_by is not None:
        where += f"superseded by offset {t.superseded_by}; "
    if t.delete_horizon_ms is None:
        return where + "horizon: not yet cleaned"
    passed = "passed" if t.horizon_passed else f"passes in {_duration(t.delete_horizon_ms - now)}"
    return where + f"horizon {format_ms(t.delete_horizon_ms)} ({passed})"


def _duration(ms: int) -> str:
    """A positive duration in its largest units, e.g. "1d", "23h 59m 59.999s"."""
    seconds, millis = divmod(max(ms, 0), 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m")) if n]
    if seconds or millis or not parts:
        parts.append(f"{seconds}.{millis:03d}s" if millis else f"{seconds}s")
    return " ".join(parts)


def _status_table(s: PartitionStatus) -> Table:
    table = Table(title=f"{s.topic}-{s.partition}", show_header=False, title_justify="left")
    table.add_column("Field", style="bold", no_wrap=True)
    table.add_column("Value")
    bound = s.bounded_by or "nothing dirty"
    if s.min_lag_until_ms is not None:
        bound += f" until {format_ms(s.min_lag_until_ms)}"
    passes = "pass" if s.passes_needed == 1 else "passes"
    rows = [
        ("cleanup.policy", s.cleanup_policy),
        ("log start / end offset", f"{s.log_start_offset} / {s.log_end_offset}"),
        ("active segment", str(s.active_segment_base_offset)),
        ("cleaner checkpoint", "none" if s.checkpoint is None else str(s.checkpoint)),
        ("first dirty offset", str(s.first_dirty_offset)),
        ("first uncleanable offset", f"{s.first_uncleanable_offset} ({bound})"),
        ("clean bytes", f"{s.clean_bytes:,}"),
        ("cleanable bytes", f"{s.cleanable_bytes:,}"),
        (
            "dirty ratio",
            f"{s.dirty_ratio:.3f} (min.cleanable.dirty.ratio {s.min_cleanable_dirty_ratio})",
        ),
        ("eligible", "yes" if s.eligible else "no: " + "; ".join(s.why_not)),
        (
            "compaction delay",
            f"{s.compaction_delay_ms:,} ms"
            + (" (max.compaction.lag.ms expired)" if s.needs_compaction_now else ""),
        ),
        (
            "dirty keys",
            f"{s.dirty_keys:,}: {s.passes_needed} {passes} of {s.keys_per_pass:,} keys"
            + (
                f" (the next pass maps up to offset {s.next_map_end_offset})"
                if s.next_map_end_offset < s.first_uncleanable_offset
                else ""
            ),
        ),
    ]
    if s.cleaning_state is not None:
        rows.append(("cleaning state", s.cleaning_state))
    if s.uncleanable is not None:
        rows.append(("uncleanable", s.uncleanable))
    shown = [_tombstone_line(t, s.now) for t in s.tombstones[:TOMBSTONES_SHOWN]]
    if len(s.tombstones) > TOMBSTONES_SHOWN:
        shown.append(f"... {len(s.tombstones) - TOMBSTONES_SHOWN} more (--json lists all)")
    rows.append(("tombstones", "\n".join([str(len(s.tombstones)), *shown])))
    for name, value in rows:
        table.add_row(name, value)
    return table


@click.command("cleaner-status")
@click.argument("topic", required=False, callback=check_topic_name)
@click.option("--now", type=click.IntRange(min=0), metavar="MS", help=NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of tables.")
@click.pass_context
def cleaner_status_command(
    ctx: click.Context, topic: str | None, now: int | None, as_json: bool
) -> None:
    """What the next cleaner iteration would do with each partition of TOPIC (or of every
    topic), and why. Changes nothing.

    Per partition: the cleaner checkpoint, the first dirty and first uncleanable offsets (and
    what bounds the latter: the active segment, min.compaction.lag.ms until when, the high
    watermark), clean and cleanable bytes, the dirty ratio, whether the log is eligible and
    why not, the max.compaction.lag.ms delay, the distinct keys of the dirty section and the
    passes of the dedupe buffer they need, and the tombstones with their delete horizons
    ("not yet cleaned" when no cleaning has stamped one). The table lists at most 20
    tombstones per partition; --json lists all, with times in epoch milliseconds.

    \b
    Example:
      compactlog cleaner-status fruit-prices
      compactlog cleaner-status --now 1700000000000 --json | jq '.partitions[].why_not'

    Exit codes: 0 success, 2 bad option or topic name, 3 unknown topic or a storage or data
    error.
    """
    with open_files(ctx) as files:
        at = files.clock() if now is None else now
        statuses = cleaner_status(files, topic, at)
    if as_json:
        doc = {"now": at, "partitions": [_status_json(s) for s in statuses]}
        click.echo(json.dumps(doc))
        return
    console = Console(file=sys.stdout, soft_wrap=True)
    console.print(f"Cleaner status at {format_ms(at)} ({at})", highlight=False)
    for status in statuses:
        console.print(_status_table(status))


# --------------------------------------------------------------------------------------------
# explain


def _key_argument(key: str, key_hex: bool) -> bytes:
    if not key_hex:
        return key.encode("utf-8", "surrogateescape")
    try:
        return bytes.fromhex(key)
    except ValueError as exc:
        raise click.BadParameter(f"{key!r} is not hex: {exc}", param_hint="KEY") from exc


def _record_json(e: KeyRecordExplanation) -> dict[str, Any]:
    return {
        "offset": e.offset,
        "timestamp": e.timestamp,
        "value": _bytes_json(e.value),
        "tombstone": e.is_tombstone,
        "segment_base_offset": e.segment_base_offset,
        "in_active_segment": e.in_active_segment,
        "delete_horizon_ms": e.delete_horizon_ms,
        "verdict": e.verdict,
        "superseded_by": e.superseded_by,
        "removable_after_ms": e.removable_after_ms,
        "reason": e.reason,
    }


@click.command()
@click.argument("topic", callback=check_topic_name)
@click.argument("key")
@click.option(
    "--partition",
    "-p",
    type=click.IntRange(min=0),
    help="Look in this partition. Default: the one Kafka's default partitioner picks for KEY.",
)
@click.option("--key-hex", is_flag=True, help="KEY is hex (for binary keys), e.g. 00ff10.")
@click.option("--now", type=click.IntRange(min=0), metavar="MS", help=NOW_HELP)
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of text.")
@click.pass_context
def explain(
    ctx: click.Context,
    topic: str,
    key: str,
    partition: int | None,
    key_hex: bool,
    now: int | None,
    as_json: bool,
) -> None:
    """Every stored record of KEY in TOPIC and, for each, what keeps it in the log and when it
    becomes removable. Changes nothing.

    For each record: offset, timestamp, value (or tombstone), segment, and the verdict: the
    latest value; removable now (the next cleaning drops it); or waiting, with the reason:
    superseded but beyond the first uncleanable offset (inside the active segment, inside
    min.compaction.lag.ms until a time), beyond what the next pass of the dedupe buffer maps,
    or a tombstone kept until its delete horizon (or not yet stamped: the next cleaning stamps
    now + delete.retention.ms).

    \b
    Example:
      compactlog explain fruit-prices grape
      compactlog explain fruit-prices 00ff10 --key-hex --partition 2 --json

    Exit codes: 0 success (also when the key has no record), 2 bad option, topic name or hex
    key, 3 unknown topic or partition, or a storage or data error.
    """
    raw_key = _key_argument(key, key_hex)
    with open_files(ctx) as files:
        at = files.clock() if now is None else now
        count = files.partitions(topic)
        chosen = key_partition(files, topic, raw_key) if partition is None else partition
        pending = next_cleaning_range(files, topic, chosen, at)
        records = explain_key(files, topic, raw_key, chosen, at)
    source = (
        "--partition"
        if partition is not None
        else f"Kafka's default partitioner: murmur2(key) % {count} partitions"
    )
    if as_json:
        doc = {
            "topic": topic,
            "key": _bytes_json(raw_key),
            "partition": chosen,
            "partition_source": "option" if partition is not None else "partitioner",
            "now": at,
            "first_dirty_offset": pending.first_dirty_offset,
            "first_uncleanable_offset": pending.first_uncleanable_offset,
            "records": [_record_json(e) for e in records],
        }
        click.echo(json.dumps(doc))
        return
    click.echo(f"Key {_text(raw_key)} of {topic}: partition {chosen} ({source})")
    bound = f" ({pending.uncleanable_reason})" if pending.uncleanable_reason else ""
    click.echo(
        f"{topic}-{chosen} at {format_ms(at)}: first dirty offset {pending.first_dirty_offset}, "
        f"first uncleanable offset {pending.first_uncleanable_offset}{bound}"
    )
    if not records:
        click.echo(f"No record of key {_text(raw_key)} in {topic}-{chosen}.")
        return
    for e in records:
        value = "null (tombstone)" if e.value is None else _text(e.value)
        active = " (active)" if e.in_active_segment else ""
        segment = filename_prefix(e.segment_base_offset) + LOG_SUFFIX
        click.echo(
            f"offset {e.offset}  {format_ms(e.timestamp)}  value {value}  segment {segment}{active}"
        )
        click.echo(f"    {e.reason}")
