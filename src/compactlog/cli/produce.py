"""``produce``: lines of stdin to records, like kcat -P."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click

from compactlog.cli.common import (
    COMPRESSIONS,
    EXIT_DATA_ERROR,
    EXIT_UNREACHABLE,
    CliError,
    check_local_topic,
    check_topic_name,
    open_store,
)
from compactlog.cli.kcat_format import FormatError, to_bytes, unescape
from compactlog.cli.remote import KafkaException, Remote, cli_error, remote_of

Parsed = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def _escaped(value: str | None, what: str) -> bytes | None:
    if value is None:
        return None
    try:
        return unescape(value)
    except FormatError as exc:
        raise click.BadParameter(str(exc), param_hint=what) from exc


def _parse_headers(items: Sequence[str]) -> tuple[tuple[str, bytes | None], ...]:
    headers = []
    for item in items:
        name, sep, value = item.partition("=")
        if not name:
            raise click.BadParameter(
                f"{item!r}: expected NAME=VALUE or NAME", param_hint="--header"
            )
        headers.append((name, to_bytes(value) if sep else None))
    return tuple(headers)


def _input_lines() -> Iterator[bytes]:
    for line in sys.stdin.buffer:
        yield line[:-1] if line.endswith(b"\n") else line


@click.command()
@click.argument("topic", callback=check_topic_name)
@click.option(
    "--key-separator",
    "-K",
    metavar="SEP",
    help="Split each line at the first SEP into key and value; a line without SEP has a null "
    "key. Escapes such as \\t work. Default: no key.",
)
@click.option(
    "--null-marker",
    "-Z",
    metavar="M",
    help="A value equal to M is produced as null (a tombstone).",
)
@click.option("--partition", "-p", type=click.IntRange(min=0), help="Partition to append to.")
@click.option(
    "--timestamp",
    # A record timestamp is a non-negative int64 (Kafka's producer refuses negative ones).
    type=click.IntRange(min=0, max=2**63 - 1),
    metavar="MS",
    help="Record timestamp in epoch milliseconds, 0 to 2^63-1 (default: now).",
)
@click.option(
    "--compression",
    type=click.Choice(COMPRESSIONS),
    default="none",
    show_default=True,
    help="Codec of the batches (needs --partition).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Records per batch with --partition.",
)
@click.option(
    "--header", "-H", "header_items", multiple=True, metavar="NAME=VALUE",
    help="A header on every record (NAME alone: a null value).",
)  # fmt: skip
@click.option(
    "--print-offsets", "-v", is_flag=True, help='Print "partition offset" for every record.'
)
@click.pass_context
def produce(
    ctx: click.Context,
    topic: str,
    key_separator: str | None,
    null_marker: str | None,
    partition: int | None,
    timestamp: int | None,
    compression: str,
    batch_size: int,
    header_items: Sequence[str],
    print_offsets: bool,
) -> None:
    """Append the lines of stdin to TOPIC, one record per line (like kcat -P).

    Only the trailing newline of a line is removed. Without --partition each record goes where
    Kafka's default partitioner sends it (murmur2 of the key, round-robin for null keys), one
    batch per record; with --partition, records are appended in batches of --batch-size.

    \b
    Example:
      printf 'grape=$2.69\\ngrape=null\\n' | compactlog produce fruit-prices -K = -Z null

    With --bootstrap-server the records go through Kafka's producer (librdkafka, acks=all);
    without --partition its partitioner is murmur2 for keyed records (as Kafka's) and random
    for null keys, and it batches records itself.

    Exit codes: 0 success, 2 bad option or topic name, 3 unknown topic, rejected record (a null
    key on a compacted topic) or storage error, 5 broker not reached. Records appended before an
    error stay appended.
    """
    separator = _escaped(key_separator, "--key-separator")
    if separator == b"":
        raise click.BadParameter("must not be empty", param_hint="--key-separator")
    null_value = _escaped(null_marker, "--null-marker")
    headers = _parse_headers(header_items)
    if compression != "none" and partition is None:
        raise click.UsageError(
            "--compression needs --partition: without one, records are produced one at a time "
            "through the partitioner, which takes no codec"
        )

    def parse(line: bytes) -> Parsed:
        key: bytes | None = None
        value: bytes | None = line
        if separator is not None:
            head, sep, tail = line.partition(separator)
            if sep:
                key, value = head, tail
        if null_value is not None and value == null_value:
            value = None
        return key, value, headers

    out = sys.stdout
    remote = remote_of(ctx)
    if remote is not None:
        acked = _produce_remote(remote, topic, partition, timestamp, compression, batch_size, parse)
        if print_offsets:
            out.write("".join(f"{p} {o}\n" for p, o in acked))
        return
    with open_store(ctx) as store:
        check_local_topic(store, topic)
        if partition is None:
            for line in _input_lines():
                key, value, hdrs = parse(line)
                where, offset = store.produce(topic, key, value, hdrs, timestamp=timestamp)
                if print_offsets:
                    out.write(f"{where} {offset}\n")
            return
        store.log(topic, partition)  # unknown topic or partition: fail before reading stdin
        batch: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]] = []

        def flush() -> None:
            first = store.append(
                topic, partition, batch, timestamp=timestamp, compression=compression
            )
            if print_offsets:
                out.write("".join(f"{partition} {first + i}\n" for i in range(len(batch))))
            batch.clear()

        for line in _input_lines():
            batch.append(parse(line))
            if len(batch) >= batch_size:
                flush()
        if batch:
            flush()


def _produce_remote(
    remote: Remote,
    topic: str,
    partition: int | None,
    timestamp: int | None,
    compression: str,
    batch_size: int,
    parse: Callable[[bytes], Parsed],
) -> list[tuple[int, int]]:
    """Every line through Kafka's producer; returns (partition, offset) of each record in
    input order once all are acknowledged."""
    count = remote.partitions(topic)
    if partition is not None and partition >= count:
        raise CliError(
            f"topic {topic!r} has no partition {partition} (UNKNOWN_TOPIC_OR_PARTITION)",
            EXIT_DATA_ERROR,
        )
    producer = remote.producer(
        **{
            "acks": "all",
            "partitioner": "murmur2_random",
            "compression.type": compression,
            "batch.num.messages": batch_size,
            "linger.ms": 5,
            "message.timeout.ms": int(remote.timeout * 1000) + 5000,
        }
    )
    acked: dict[int, tuple[int, int]] = {}
    failures: list[Any] = []

    def delivered(index: int) -> Callable[[Any, Any], None]:
        def report(error: Any, msg: Any) -> None:
            if error is not None:
                failures.append(error)
            else:
                acked[index] = (msg.partition(), msg.offset())

        return report

    extra: dict[str, Any] = {} if partition is None else {"partition": partition}
    if timestamp is not None:
        extra["timestamp"] = timestamp
    try:
        for index, line in enumerate(_input_lines()):
            key, value, headers = parse(line)
            while True:
                try:
                    producer.produce(
                        topic,
                        value=value,
                        key=key,
                        headers=list(headers) or None,
                        on_delivery=delivered(index),
                        **extra,
                    )
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
            producer.poll(0)
            if failures:
                break
        left = producer.flush(remote.timeout + 5)
    except KafkaException as exc:
        raise cli_error(exc.args[0], remote.bootstrap, topic) from exc
    if failures:
        raise cli_error(failures[0], remote.bootstrap, topic)
    if left:
        raise CliError(
            f"{topic}: {left} records not acknowledged by {remote.bootstrap} in time",
            EXIT_UNREACHABLE,
        )
    return [acked[index] for index in sorted(acked)]
