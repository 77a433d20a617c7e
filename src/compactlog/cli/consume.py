"""``consume``: records to stdout through a kcat format string, like kcat -C -e."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from compactlog.cli.common import binary_stdout, check_topic_name, open_store
from compactlog.cli.kcat_format import FormatError, Message, parse_format
from compactlog.storage.store import Store


@dataclass(frozen=True)
class OffsetSpec:
    """Where consuming starts: kcat's -o values."""

    kind: str  # "earliest", "latest", "absolute", "relative" (from the end), "timestamp"
    value: int = 0

    def resolve(self, store: Store, topic: str, partition: int) -> int:
        start = store.log_start_offset(topic, partition)
        end = store.log_end_offset(topic, partition)
        if self.kind == "earliest":
            return start
        if self.kind == "latest":
            return end
        if self.kind == "relative":
            return max(start, end - self.value)
        if self.kind == "timestamp":
            found = store.log(topic, partition).offset_for_timestamp(self.value)
            return end if found is None else max(start, found[0])
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
            number = int(text)
        except ValueError:
            self.fail(
                f"{text!r} is not an offset: use N, -N (from the end), earliest, latest or s@MS",
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


@click.command()
@click.argument("topic", callback=check_topic_name)
@click.option(
    "--partition", "-p", "partitions", multiple=True, type=click.IntRange(min=0),
    help="Partition to read (repeatable). Default: all, in partition order.",
)  # fmt: skip
@click.option(
    "--offset",
    "-o",
    type=OffsetParam(),
    default="earliest",
    show_default=True,
    help="Start offset: N, -N (N before the end), earliest|beginning, latest|end, s@MS (first "
    "record with a timestamp >= MS).",
)
@click.option(
    "--max-messages", "-c", type=click.IntRange(min=0), help="Stop after this many records."
)
@click.option(
    "--format",
    "-f",
    "fmt",
    type=FormatParam(),
    default="%s\\n",
    show_default=True,
    help="kcat format: %t topic, %p partition, %o offset, %k key, %s value, %T timestamp, "
    "%h headers, %K/%S key/value length (-1 for null), %R binary value length, %%; escapes "
    "\\n \\t \\r \\\\ \\xNN.",
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
    offset: OffsetSpec,
    max_messages: int | None,
    fmt: str,
    null_string: str,
) -> None:
    """Print the records of TOPIC to stdout with a kcat format string (like kcat -C -e).

    Output is written as raw bytes; keys and values are not decoded.

    \b
    Example:
      compactlog consume fruit-prices --format '%o\\t%k\\t%s\\n'
      compactlog consume fruit-prices -p 0 -o -10 -f 'key %k (%K bytes) at %T: %s\\n'

    Exit codes: 0 success, 2 bad topic name, --offset or format string, 3 unknown topic or
    partition, an offset out of range, or a storage or data error.
    """
    try:
        formatter = parse_format(fmt, null_string)
    except FormatError as exc:
        raise click.BadParameter(str(exc), param_hint="--null-string") from exc
    out = binary_stdout()
    printed = 0
    with open_store(ctx) as store:
        chosen = list(partitions) if partitions else list(range(store.partitions(topic)))
        for partition in chosen:
            if max_messages is not None and printed >= max_messages:
                break
            start = offset.resolve(store, topic, partition)
            for record in store.read(topic, partition, start):
                if max_messages is not None and printed >= max_messages:
                    break
                out.write(
                    formatter.format(
                        Message(
                            topic,
                            partition,
                            record.offset,
                            record.timestamp,
                            record.key,
                            record.value,
                            record.headers,
                        )
                    )
                )
                printed += 1
    out.flush()
