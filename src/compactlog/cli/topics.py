"""``topics`` and ``configs``: kafka-topics and kafka-configs over the store."""

from __future__ import annotations

import os
from collections.abc import Sequence

import click

from compactlog.cli.common import (
    EXIT_USAGE,
    CliError,
    check_local_topic,
    check_topic_name,
    library_error,
    open_store,
    open_view,
)
from compactlog.cli.remote import remote_of
from compactlog.errors import ConfigError, StorageError
from compactlog.storage.config import ConfigSource, parse_config_assignments
from compactlog.storage.fs import ReadOnlyFileSystem
from compactlog.storage.readonly import ReadOnlyDataDir
from compactlog.storage.topic_catalog import read_topics_file
from compactlog.storage.topic_names import partition_dir_name


@click.group()
def topics() -> None:
    """Create, list, describe and delete topics (like kafka-topics).

    \b
    Example:
      compactlog topics create orders --partitions 3 --config retention.ms=86400000
      compactlog topics list
      compactlog topics describe orders
      compactlog topics delete orders

    Exit codes: 0 success, 2 bad topic name, partition count or config, 3 storage error.
    """


def _parse_assignments(items: Sequence[str]) -> dict[str, str]:
    try:
        return parse_config_assignments(items)
    except ConfigError as exc:
        raise library_error(exc) from exc


@topics.command("create")
@click.argument("name", callback=check_topic_name)
@click.option(
    "--partitions",
    default=1,
    show_default=True,
    type=int,
    help="Partition count.",
)
@click.option(
    "--config", "configs", multiple=True, metavar="NAME=VALUE", help="A topic config override."
)
@click.pass_context
def topics_create(ctx: click.Context, name: str, partitions: int, configs: Sequence[str]) -> None:
    """Create topic NAME, making the data directory if needed.

    Topic names are 1-249 characters of [a-zA-Z0-9._-], not "." or ".."; a name that collides
    with an existing one once "." and "_" are treated alike is refused. A name starting with
    "-" must follow "--". A topic gets at most 9999 partitions, as from one Kafka CreateTopics
    (Kafka's controller writes at most 10000 records per request), and no more than the limit of
    open files allows (three per partition).

    \b
    Example:
      compactlog topics create fruit-prices --partitions 1 --config cleanup.policy=compact
      compactlog topics create -- -odd-name

    Exit codes: 0 created, 2 bad name, partition count or config, 3 exists or storage error.
    """
    overrides = _parse_assignments(configs)
    remote = remote_of(ctx)
    if remote is not None:
        remote.create_topic(name, partitions, overrides)
    else:
        with open_store(ctx, create=True) as store:
            store.create_topic(name, partitions, overrides)
    click.echo(f"Created topic {name}.")


@topics.command("list")
@click.pass_context
def topics_list(ctx: click.Context) -> None:
    """List the topics, one per line.

    \b
    Example:
      compactlog topics list

    Exit codes: 0 success, 2 no data directory, 3 storage error, 5 broker not reached.
    """
    remote = remote_of(ctx)
    if remote is not None:
        names = list(remote.topics())
    else:
        with open_view(ctx) as view:
            names = view.topics()
    for name in names:
        click.echo(name)


def _config_text(overrides: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))


def _local_topic_id(path: str, topic: str) -> str:
    """The topic's ID from the topics file, or from its first partition's partition.metadata
    (a Kafka log dir); "-" when neither has one."""
    fs = ReadOnlyFileSystem()
    try:
        catalog = read_topics_file(fs, path)
    except StorageError:
        catalog = None
    if catalog is not None and topic in catalog:
        return catalog[topic].topic_id
    metadata = os.path.join(path, partition_dir_name(topic, 0), "partition.metadata")
    try:
        with open(metadata, encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "topic_id":
                    return value.strip()
    except (OSError, UnicodeDecodeError):
        pass
    return "-"


def _local_offsets(view: ReadOnlyDataDir, topic: str, partition: int) -> tuple[int, int]:
    try:
        log = view.log(topic, partition)
    except StorageError:
        return 0, 0  # no segment file yet: an empty partition
    return log.log_start_offset, log.log_end_offset


def _describe_lines(
    topic: str, topic_id: str, overrides: dict[str, str], offsets: dict[int, tuple[int, int]]
) -> list[str]:
    lines = [
        f"Topic: {topic}\tTopicId: {topic_id}\tPartitionCount: {len(offsets)}\t"
        f"Configs: {_config_text(overrides)}"
    ]
    for partition, (start, end) in sorted(offsets.items()):
        lines.append(
            f"\tTopic: {topic}\tPartition: {partition}\t"
            f"LogStartOffset: {start}\tLogEndOffset: {end}"
        )
    return lines


@topics.command("describe")
@click.argument("name", required=False, callback=check_topic_name)
@click.pass_context
def topics_describe(ctx: click.Context, name: str | None) -> None:
    """Describe topic NAME (or every topic): the topic ID, partition count and config overrides,
    and each partition's log start and end offsets (kafka-topics --describe layout). The same
    lines in both modes; `log-dirs` shows segments and sizes.

    \b
    Example:
      compactlog topics describe fruit-prices

    Exit codes: 0 success, 2 bad topic name, 3 unknown topic or storage error, 5 broker not
    reached.
    """
    remote = remote_of(ctx)
    if remote is not None:
        known = remote.topics()
        if name is not None:
            remote.partitions(name)
        for topic in [name] if name is not None else list(known):
            offsets = remote.offsets(topic, range(known[topic]))
            lines = _describe_lines(topic, remote.topic_id(topic), remote.overrides(topic), offsets)
            click.echo("\n".join(lines))
        return
    with open_view(ctx, name) as view:
        for topic in [name] if name is not None else view.topics():
            overrides = view.topic_config(topic).overrides
            offsets = {p: _local_offsets(view, topic, p) for p in range(view.partitions(topic))}
            topic_id = _local_topic_id(view.path, topic)
            click.echo("\n".join(_describe_lines(topic, topic_id, dict(overrides), offsets)))


@topics.command("delete")
@click.argument("name", callback=check_topic_name)
@click.pass_context
def topics_delete(ctx: click.Context, name: str) -> None:
    """Delete topic NAME and all its data.

    \b
    Example:
      compactlog topics delete fruit-prices

    Exit codes: 0 deleted, 2 bad topic name, 3 unknown topic or storage error, 5 broker not
    reached.
    """
    remote = remote_of(ctx)
    if remote is not None:
        remote.delete_topic(name)
    else:
        with open_store(ctx) as store:
            check_local_topic(store, name)
            store.delete_topic(name)
    click.echo(f"Deleted topic {name}.")


@click.group()
def configs() -> None:
    """Describe and alter topic configs (like kafka-configs --entity-type topics).

    \b
    Example:
      compactlog configs describe fruit-prices
      compactlog configs alter fruit-prices --set min.cleanable.dirty.ratio=0.1 --delete segment.ms

    Exit codes: 0 success, 2 unknown config or bad value, 3 unknown topic or storage error.
    """


def _source_name(source: ConfigSource) -> str:
    # Kafka's admin client calls a topic override DYNAMIC_TOPIC_CONFIG.
    return "DYNAMIC_TOPIC_CONFIG" if source is ConfigSource.TOPIC_CONFIG else source.name


def _synonym_text(source: str, name: str, value: str | None) -> str:
    return f"{source}:{name}={value}"


@configs.command("describe")
@click.argument("topic", callback=check_topic_name)
@click.pass_context
def configs_describe(ctx: click.Context, topic: str) -> None:
    """Every effective config of TOPIC with its synonyms, as kafka-configs --describe --all
    prints it; an override is the one whose first synonym is DYNAMIC_TOPIC_CONFIG, and is
    marked "(override)".

    \b
    Example:
      compactlog configs describe fruit-prices

    Exit codes: 0 success, 2 bad topic name, 3 unknown topic or storage error, 5 broker not
    reached.
    """
    lines = []
    remote = remote_of(ctx)
    if remote is not None:
        for c in remote.describe_configs(topic):
            synonyms = ", ".join(_synonym_text(*s) for s in c.synonyms)
            marker = " (override)" if c.source == "DYNAMIC_TOPIC_CONFIG" else ""
            lines.append(
                f"  {c.name}={c.value} sensitive={str(c.is_sensitive).lower()} "
                f"synonyms={{{synonyms}}}{marker}"
            )
    else:
        with open_view(ctx, topic) as view:
            entries = view.topic_config(topic).describe_entries()
        for entry in entries:
            synonyms = ", ".join(
                _synonym_text(_source_name(s.source), s.name, s.value) for s in entry.synonyms
            )
            marker = " (override)" if entry.source is ConfigSource.TOPIC_CONFIG else ""
            lines.append(
                f"  {entry.name}={entry.value} sensitive={str(entry.is_sensitive).lower()} "
                f"synonyms={{{synonyms}}}{marker}"
            )
    click.echo(f"All configs for topic {topic} are:")
    for line in lines:
        click.echo(line)


def split_config_list(text: str) -> list[str]:
    """Kafka's ``--add-config`` list: ``a=1,b=2`` -> ``["a=1", "b=2"]``; a value in brackets
    is a list whose commas stay (``cleanup.policy=[compact,delete]`` -> the value
    ``compact,delete``), as kafka-configs reads it."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "[":
            depth += 1
            if depth == 1:
                continue
        elif char == "]" and depth:
            depth -= 1
            if depth == 0:
                continue
        elif char == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        current.append(char)
    if depth:
        raise CliError(f"--add-config {text!r}: a '[' is not closed", EXIT_USAGE)
    items.append("".join(current))
    for item in items:
        if "=" not in item or not item.split("=", 1)[0].strip():
            raise CliError(
                f"--add-config {text!r}: {item!r} is not NAME=VALUE (a list value goes in "
                "brackets: cleanup.policy=[compact,delete])",
                EXIT_USAGE,
            )
    return items


@configs.command("alter")
@click.argument("topic", callback=check_topic_name)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Set an override.")
@click.option(
    "--add-config",
    "add_configs",
    multiple=True,
    metavar="A=1,B=[X,Y]",
    help="Set overrides, Kafka's comma list (a list value in brackets).",
)
@click.option(
    "--delete",
    "deletes",
    multiple=True,
    metavar="NAME",
    help="Remove an override (back to the default).",
)
@click.option(
    "--delete-config",
    "delete_configs",
    multiple=True,
    metavar="A,B",
    help="Remove overrides, Kafka's comma list.",
)
@click.pass_context
def configs_alter(
    ctx: click.Context,
    topic: str,
    sets: Sequence[str],
    add_configs: Sequence[str],
    deletes: Sequence[str],
    delete_configs: Sequence[str],
) -> None:
    """Set and delete config overrides of TOPIC; they take effect at once.

    --set and --delete take one config each (a --set value keeps its commas);
    --add-config and --delete-config take Kafka's comma lists as kafka-configs does.

    \b
    Example:
      compactlog configs alter fruit-prices --set cleanup.policy=compact,delete \\
          --delete retention.ms
      compactlog configs alter fruit-prices \\
          --add-config 'cleanup.policy=[compact,delete],min.cleanable.dirty.ratio=0.1' \\
          --delete-config segment.ms,retention.ms

    Exit codes: 0 success, 2 nothing to do, bad topic name, unknown config or bad value, 3
    unknown topic or storage error, 5 broker not reached.
    """
    items = [*sets, *(item for text in add_configs for item in split_config_list(text))]
    removed = [*deletes, *(n.strip() for text in delete_configs for n in text.split(","))]
    if any(not name for name in removed):
        raise CliError("--delete-config: an empty config name", EXIT_USAGE)
    if not items and not removed:
        raise click.UsageError(
            "give at least one --set/--add-config NAME=VALUE or --delete/--delete-config NAME"
        )
    assignments = _parse_assignments(items)
    remote = remote_of(ctx)
    if remote is not None:
        remote.alter_configs(topic, {k: str(v) for k, v in assignments.items()}, removed)
    else:
        with open_store(ctx) as store:
            check_local_topic(store, topic)
            store.alter_config(topic, set=assignments, delete=removed)
    click.echo(f"Completed updating config for topic {topic}.")
