"""``topics`` and ``configs``: kafka-topics and kafka-configs over the store."""

from __future__ import annotations

from collections.abc import Sequence

import click

from compactlog.cli.common import check_topic_name, library_error, open_store
from compactlog.errors import ConfigError
from compactlog.storage.config import ConfigSource, parse_config_assignments


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

    Exit codes: 0 success, 2 no data directory, 3 storage error.
    """
    with open_store(ctx) as store:
        for name in store.topics():
            click.echo(name)


def _config_text(overrides: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))


@topics.command("describe")
@click.argument("name", required=False, callback=check_topic_name)
@click.pass_context
def topics_describe(ctx: click.Context, name: str | None) -> None:
    """Describe topic NAME (or every topic): partitions with their log start and end offsets,
    segment count and size, and the config overrides (kafka-topics --describe layout).

    \b
    Example:
      compactlog topics describe fruit-prices

    Exit codes: 0 success, 2 bad topic name, 3 unknown topic or storage error.
    """
    with open_store(ctx) as store:
        names = [name] if name is not None else store.topics()
        for topic in names:
            info = store.topic_info(topic)
            click.echo(
                f"Topic: {topic}\tTopicId: {info.topic_id}\tPartitionCount: {info.partitions}\t"
                f"Configs: {_config_text(info.overrides)}"
            )
            for partition in range(info.partitions):
                segments = store.segments(topic, partition)
                click.echo(
                    f"\tTopic: {topic}\tPartition: {partition}\t"
                    f"LogStartOffset: {store.log_start_offset(topic, partition)}\t"
                    f"LogEndOffset: {store.log_end_offset(topic, partition)}\t"
                    f"Segments: {len(segments)}\tSize: {sum(s.size for s in segments)}"
                )


@topics.command("delete")
@click.argument("name", callback=check_topic_name)
@click.pass_context
def topics_delete(ctx: click.Context, name: str) -> None:
    """Delete topic NAME and all its data.

    \b
    Example:
      compactlog topics delete fruit-prices

    Exit codes: 0 deleted, 2 bad topic name, 3 unknown topic or storage error.
    """
    with open_store(ctx) as store:
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

    Exit codes: 0 success, 2 bad topic name, 3 unknown topic or storage error.
    """
    with open_store(ctx) as store:
        entries = store.topic_config(topic).describe_entries()
    click.echo(f"All configs for topic {topic} are:")
    for entry in entries:
        synonyms = ", ".join(f"{_source_name(s.source)}:{s.name}={s.value}" for s in entry.synonyms)
        marker = " (override)" if entry.source is ConfigSource.TOPIC_CONFIG else ""
        click.echo(
            f"  {entry.name}={entry.value} sensitive={str(entry.is_sensitive).lower()} "
            f"synonyms={{{synonyms}}}{marker}"
        )


@configs.command("alter")
@click.argument("topic", callback=check_topic_name)
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Set an override.")
@click.option(
    "--delete",
    "deletes",
    multiple=True,
    metavar="NAME",
    help="Remove an override (back to the default).",
)
@click.pass_context
def configs_alter(
    ctx: click.Context, topic: str, sets: Sequence[str], deletes: Sequence[str]
) -> None:
    """Set and delete config overrides of TOPIC; they take effect at once.

    \b
    Example:
      compactlog configs alter fruit-prices --set cleanup.policy=compact,delete \\
          --delete retention.ms

    Exit codes: 0 success, 2 nothing to do, bad topic name, unknown config or bad value, 3
    unknown topic or storage error.
    """
    if not sets and not deletes:
        raise click.UsageError("give at least one --set NAME=VALUE or --delete NAME")
    assignments = _parse_assignments(sets)
    with open_store(ctx) as store:
        store.alter_config(topic, set=assignments, delete=list(deletes))
    click.echo(f"Completed updating config for topic {topic}.")
