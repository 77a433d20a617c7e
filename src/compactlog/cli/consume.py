"""``consume``: records to stdout through a kcat format string or kcat's ``-J`` JSON, like kcat -C.

Two sources give the same bytes for the same data: a data directory, opened read-only (no lock,
nothing written, so a broker may hold it), and a broker through Kafka's consumer
(``--bootstrap-server``; partitions are assigned, no group is joined and nothing is committed).
Partitions are read one after the other in partition order, each from its start offset to the
log end offset found when its turn comes (kcat -e). With ``--follow`` every chosen partition is
read on and on (kcat without -e): a broker's consumer waits for new records, a directory is
polled; Ctrl-C or SIGTERM ends it with exit code 0.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, BinaryIO

import click

from compactlog.cli.common import (
    EXIT_DATA_ERROR,
    EXIT_USAGE,
    CliError,
    binary_stdout,
    check_topic_name,
    open_view,
)
from compactlog.cli.kcat_format import (
    TIMESTAMP_TYPES,
    FormatError,
    Formatter,
    Message,
    json_envelope,
    parse_format,
)
from compactlog.cli.remote import KafkaError, Remote, TopicPartition, cli_error, remote_of
from compactlog.cli.remote import OffsetSpec as Spec
from compactlog.errors import StorageError
from compactlog.records import decode_columns
from compactlog.storage.log import Log
from compactlog.storage.readonly import ReadOnlyDataDir

#: Records taken from the consumer's queue at a time.
_BATCH = 1000

#: How often --follow looks at a data directory's files again.
FOLLOW_POLL_S = 0.2


@dataclass(frozen=True)
class OffsetSpec:
    """Where consuming starts (kcat's -o values), or for ``end``, the timestamp it stops at."""

    kind: str  # "earliest", "latest", "absolute", "relative" (from the end), "timestamp", "end"
    value: int = 0

    def resolve(self, start: int, end: int, by_timestamp: Callable[[int], int | None]) -> int:
        """The start offset in a log of ``start``..``end``; ``by_timestamp(ms)`` is the first
        offset with a timestamp >= ms (None: none)."""
        if self.kind == "earliest":
            return start
        if self.kind == "latest":
            return end
        if self.kind == "relative":
            return max(start, end - self.value)
        if self.kind == "timestamp":
            found = by_timestamp(self.value)
            return end if found is None else max(start, found)
        return self.value


class OffsetParam(click.ParamType["OffsetSpec"]):
    name = "OFFSET"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, OffsetSpec):
            return value
        text = str(value).strip()
        if text in ("earliest", "beginning"):
            return OffsetSpec("earliest")
        if text in ("latest", "end"):
            return OffsetSpec("latest")
        try:
            if text.startswith("s@"):
                return OffsetSpec("timestamp", int(text[2:]))
            if text.startswith("e@"):
                return OffsetSpec("end", int(text[2:]))
            number = int(text)
        except ValueError:
            self.fail(
                f"{text!r} is not an offset: use N, -N (from the end), earliest, latest, s@MS "
                "or e@MS",
                param,
                ctx,
            )
        return OffsetSpec("relative", -number) if number < 0 else OffsetSpec("absolute", number)


class FormatParam(click.ParamType[str]):
    name = "FORMAT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            parse_format(str(value))
        except FormatError as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


def _out_of_range(topic: str, partition: int, offset: int, start: int, end: int) -> CliError:
    return CliError(
        f"offset {offset} is out of range for {topic}-{partition}: the log holds offsets "
        f"{start} to {end} (OFFSET_OUT_OF_RANGE)",
        EXIT_DATA_ERROR,
    )


class Printer:
    """Writes records as kcat does (-f or -J), counts them, and says when to stop."""

    def __init__(
        self,
        out: BinaryIO,
        formatter: Formatter | None,
        broker: int,
        max_messages: int | None,
        end_timestamp: int | None,
    ) -> None:
        self.out = out
        self.formatter = formatter
        self.broker = broker
        self.max_messages = max_messages
        self.end_timestamp = end_timestamp
        self.printed = 0

    @property
    def done(self) -> bool:
        return self.max_messages is not None and self.printed >= self.max_messages

    def past_end(self, timestamp: int) -> bool:
        """kcat's ``-o e@MS``: a partition stops at its first record with a timestamp >= MS."""
        return self.end_timestamp is not None and timestamp >= self.end_timestamp

    def write(self, message: Message, timestamp_type: int) -> None:
        if self.formatter is None:
            tstype = TIMESTAMP_TYPES.get(timestamp_type, "unknown")
            self.out.write(json_envelope(message, tstype, self.broker))
        else:
            self.out.write(self.formatter.format(message))
        self.printed += 1


class _Stop(Exception):
    """SIGTERM during --follow: stop as Ctrl-C does."""


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM end --follow quietly (exit code 0), as they end kcat."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Stop

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: Ctrl-C only
        previous = None
    try:
        yield
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


# --------------------------------------------------------------------------------------------
# Local mode: the files, read-only


def _node_id(path: str) -> int:
    """``node.id`` of the directory's meta.properties (what kcat's "broker" shows), or -1."""
    try:
        with open(os.path.join(path, "meta.properties"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() == "node.id":
                    return int(value.strip())
    except (OSError, ValueError, UnicodeDecodeError):
        pass
    return -1


def log_records(log: Log, topic: str, partition: int, start: int) -> Iterator[tuple[Message, int]]:
    """The records of ``log`` from offset ``start`` with their batch's timestamp type; control
    records are skipped, as a consumer skips them."""
    for batch in log.iter_batches(start):
        header = batch.header
        if header.is_control or header.records_count == 0:
            continue
        for r in decode_columns(batch.data).to_records():
            if r.offset >= start:
                message = Message(
                    topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers
                )
                yield message, int(header.timestamp_type)


def _local_log(view: ReadOnlyDataDir, topic: str, partition: int) -> Log | None:
    if not 0 <= partition < view.partitions(topic):
        raise CliError(
            f"topic {topic!r} has no partition {partition} (UNKNOWN_TOPIC_OR_PARTITION)",
            EXIT_DATA_ERROR,
        )
    try:
        return view.log(topic, partition)
    except StorageError:
        return None  # no segment file yet: nothing to read


def _by_timestamp(log: Log) -> Callable[[int], int | None]:
    """The first offset with a timestamp >= ms: ``Log.offset_for_timestamp``, as the broker's
    ListOffsets answers ``s@MS`` in network mode (a control record's offset included: the read
    from there skips it)."""

    def find(ms: int) -> int | None:
        found = log.offset_for_timestamp(ms)
        return None if found is None else found[0]

    return find


def _consume_local(
    ctx: click.Context,
    topic: str,
    partitions: Sequence[int],
    start_spec: OffsetSpec,
    printer: Printer,
    follow: bool,
) -> None:
    with open_view(ctx, topic) as view:
        chosen = list(partitions) if partitions else list(range(view.partitions(topic)))
        printer.broker = _node_id(view.path)
        positions: dict[int, int] = {}
        for partition in chosen:
            log = _local_log(view, topic, partition)
            start, end = (0, 0) if log is None else (log.log_start_offset, log.log_end_offset)
            by_ts = _by_timestamp(log) if log is not None else (lambda ms: None)
            offset = start_spec.resolve(start, end, by_ts)
            if not start <= offset <= end:
                raise _out_of_range(topic, partition, offset, start, end)
            positions[partition] = offset
        if not follow:
            _read_local_round(view, topic, chosen, positions, printer)
            return
    stopped: set[int] = set()
    with _stop_on_signals():
        while not printer.done and len(stopped) < len(chosen):
            with open_view(ctx, topic) as view:
                stopped |= _read_local_round(view, topic, chosen, positions, printer)
            printer.out.flush()
            time.sleep(FOLLOW_POLL_S)


def _read_local_round(
    view: ReadOnlyDataDir,
    topic: str,
    chosen: Sequence[int],
    positions: dict[int, int],
    printer: Printer,
) -> set[int]:
    """Read every chosen partition from its position to its end; returns the partitions that
    reached the end timestamp (e@MS)."""
    stopped: set[int] = set()
    for partition in chosen:
        if printer.done:
            break
        if positions[partition] < 0:
            stopped.add(partition)
            continue
        log = _local_log(view, topic, partition)
        if log is None or positions[partition] >= log.log_end_offset:
            continue
        for message, tstype in log_records(log, topic, partition, positions[partition]):
            if printer.done:
                break
            if printer.past_end(message.timestamp):
                positions[partition] = -1
                stopped.add(partition)
                break
            printer.write(message, tstype)
            positions[partition] = message.offset + 1
        else:
            if positions[partition] >= 0:
                positions[partition] = max(positions[partition], log.log_end_offset)
    return stopped


# --------------------------------------------------------------------------------------------
# Network mode: Kafka's consumer, partitions assigned


def _message_of(msg: Any) -> tuple[Message, int]:
    tstype, ts = msg.timestamp()
    headers = tuple((name, value) for name, value in (msg.headers() or []))
    message = Message(
        msg.topic(), msg.partition(), msg.offset(), ts, msg.key(), msg.value(), headers
    )
    return message, tstype - 1  # librdkafka: 1 create time, 2 log append time


def _consume_remote(
    remote: Remote,
    topic: str,
    partitions: Sequence[int],
    start_spec: OffsetSpec,
    printer: Printer,
    follow: bool,
) -> None:

    count = remote.partitions(topic)
    chosen = list(partitions) if partitions else list(range(count))
    for partition in chosen:
        if partition >= count:
            raise CliError(
                f"topic {topic!r} has no partition {partition} (UNKNOWN_TOPIC_OR_PARTITION)",
                EXIT_DATA_ERROR,
            )
    metadata = remote.metadata(topic).topics[topic]
    printer.broker = metadata.partitions[chosen[0]].leader if chosen else -1

    def starts() -> dict[int, int]:
        bounds = remote.offsets(topic, chosen)
        found: dict[int, int] = {}
        by_ts: dict[int, int] = {}
        if start_spec.kind == "timestamp":
            by_ts = remote.list_offsets(topic, chosen, Spec.for_timestamp(start_spec.value))
        for p in chosen:
            start, end = bounds[p]

            def lookup(ms: int, p: int = p) -> int | None:
                offset = by_ts[p]
                return None if offset < 0 else offset

            offset = start_spec.resolve(start, end, lookup)
            if not start <= offset <= end:
                raise _out_of_range(topic, p, offset, start, end)
            found[p] = offset
        return found

    positions = starts()
    consumer = remote.consumer()

    def poll_errors(msg: Any) -> bool:
        """True for a partition's end (EOF); raises for any other error."""
        error = msg.error()
        if error.code() == KafkaError._PARTITION_EOF:
            return True
        raise cli_error(error, remote.bootstrap, f"{topic}-{msg.partition()}")

    if not follow:
        for partition in chosen:
            if printer.done:
                break
            _, end = remote.offsets(topic, [partition])[partition]
            if positions[partition] >= end:
                continue
            consumer.assign([TopicPartition(topic, partition, positions[partition])])
            idle_deadline = time.monotonic() + remote.timeout
            reading = True
            while reading and not printer.done:
                batch = consumer.consume(_BATCH, 0.5)
                if not batch:
                    if time.monotonic() > idle_deadline:
                        raise CliError(
                            f"{topic}-{partition}: no records from the broker at "
                            f"{remote.bootstrap} for {remote.timeout:g} s before offset {end}",
                            EXIT_DATA_ERROR,
                        )
                    continue
                idle_deadline = time.monotonic() + remote.timeout
                for msg in batch:
                    if msg.error() is not None:
                        if poll_errors(msg):
                            reading = False
                            break
                        continue
                    message, tstype = _message_of(msg)
                    if printer.past_end(message.timestamp):
                        reading = False
                        break
                    printer.write(message, tstype)
                    if message.offset + 1 >= end or printer.done:
                        reading = False
                        break
            consumer.unassign()
        return
    consumer.assign([TopicPartition(topic, p, positions[p]) for p in chosen])
    live = set(chosen)
    with _stop_on_signals():
        while live and not printer.done:
            msg = consumer.poll(0.5)
            if msg is None:
                printer.out.flush()
                continue
            if msg.error() is not None:
                poll_errors(msg)
                continue
            if msg.partition() not in live:
                continue
            message, tstype = _message_of(msg)
            if printer.past_end(message.timestamp):
                live.discard(message.partition)
                consumer.incremental_unassign([TopicPartition(topic, message.partition)])
                continue
            printer.write(message, tstype)


# --------------------------------------------------------------------------------------------
# The command


@click.command()
@click.argument("topic", callback=check_topic_name)
@click.option(
    "--partition", "-p", "partitions", multiple=True, type=click.IntRange(min=0),
    help="Partition to read (repeatable). Default: all, in partition order.",
)  # fmt: skip
@click.option(
    "--offset",
    "-o",
    "offsets",
    type=OffsetParam(),
    multiple=True,
    help="Start offset: N, -N (N before the end), earliest|beginning (the default), "
    "latest|end, s@MS (first record with a timestamp >= MS); and, given a second time, e@MS: "
    "stop a partition at its first record with a timestamp >= MS (as kcat's -o).",
)
@click.option(
    "--max-messages", "-c", type=click.IntRange(min=0), help="Stop after this many records."
)
@click.option(
    "--format",
    "-f",
    "fmt",
    type=FormatParam(),
    default=None,
    help="kcat format (default '%s\\n'): %t topic, %p partition, %o offset, %k key, %s value, "
    "%T timestamp, %h headers, %K/%S key/value length (-1 for null), %R binary value length, "
    "%%; escapes \\n \\t \\r \\\\ \\xNN.",
)
@click.option(
    "--json",
    "-J",
    "as_json",
    is_flag=True,
    help="Each record as kcat -J's JSON object (topic, partition, offset, tstype, ts, broker, "
    "headers, key, payload), one per line.",
)
@click.option(
    "--follow",
    "-F",
    is_flag=True,
    help="Keep reading: wait for new records until Ctrl-C or SIGTERM (exit 0), as kcat without -e.",
)
@click.option(
    "--null-string",
    "-Z",
    default="",
    help='What %k and %s print for a null key or value (kcat -Z prints "NULL"). Default: empty.',
)
@click.pass_context
def consume(
    ctx: click.Context,
    topic: str,
    partitions: Sequence[int],
    offsets: Sequence[OffsetSpec],
    max_messages: int | None,
    fmt: str | None,
    as_json: bool,
    follow: bool,
    null_string: str,
) -> None:
    """Print the records of TOPIC to stdout with a kcat format string (like kcat -C -e), or
    as kcat's -J JSON. Reads a data directory read-only (a broker may hold it: nothing is
    locked or written) or, with --bootstrap-server, a broker.

    Output is written as raw bytes; keys and values are not decoded. Partitions are read one
    after the other; with --follow, records are printed as they arrive.

    \b
    Example:
      compactlog consume fruit-prices --format '%o\\t%k\\t%s\\n'
      compactlog consume fruit-prices -p 0 -o -10 -f 'key %k (%K bytes) at %T: %s\\n'
      compactlog --bootstrap-server localhost:9092 consume fruit-prices -J -c 5
      compactlog consume fruit-prices -o s@1700000000000 -o e@1700003600000

    Exit codes: 0 success (also when --follow is stopped by Ctrl-C or SIGTERM), 2 bad topic
    name, --offset or format string, 3 unknown topic or partition, an offset out of range, or a
    storage or data error, 5 broker not reached.
    """
    starts = [o for o in offsets if o.kind != "end"]
    ends = [o for o in offsets if o.kind == "end"]
    if len(starts) > 1 or len(ends) > 1:
        raise CliError("--offset: give at most one start offset and one e@MS", EXIT_USAGE)
    if as_json and fmt is not None:
        raise CliError("give --format or --json, not both", EXIT_USAGE)
    formatter: Formatter | None = None
    if not as_json:
        try:
            formatter = parse_format(fmt if fmt is not None else "%s\\n", null_string)
        except FormatError as exc:
            raise click.BadParameter(str(exc), param_hint="--null-string") from exc
    out = binary_stdout()
    printer = Printer(out, formatter, -1, max_messages, ends[0].value if ends else None)
    start_spec = starts[0] if starts else OffsetSpec("earliest")
    remote = remote_of(ctx)
    try:
        if remote is not None:
            _consume_remote(remote, topic, partitions, start_spec, printer, follow)
        else:
            _consume_local(ctx, topic, partitions, start_spec, printer, follow)
    finally:
        with contextlib.suppress(BrokenPipeError):
            out.flush()
