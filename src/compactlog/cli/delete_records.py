"""``delete-records``: Kafka's kafka-delete-records, on a broker or a stopped directory."""

from __future__ import annotations

import click

from compactlog.cli.common import check_local_topic, check_topic_name, open_store
from compactlog.cli.remote import remote_of

#: Kafka's "the high watermark" in a DeleteRecords request.
HIGH_WATERMARK = -1


@click.command("delete-records")
@click.argument("topic", callback=check_topic_name)
@click.option("--partition", "-p", type=click.IntRange(min=0), required=True, help="The partition.")
@click.option(
    "--offset",
    type=click.IntRange(min=HIGH_WATERMARK),
    required=True,
    help="Delete every record before this offset (the new log start offset); -1: all "
    "records (up to the log end offset).",
)
@click.pass_context
def delete_records(ctx: click.Context, topic: str, partition: int, offset: int) -> None:
    """Delete the records of TOPIC's partition before --offset by moving the log start offset
    up to it, as kafka-delete-records does: reads below it fail from now on, and the segments
    wholly below it are removed. An offset below the log start changes nothing; one above
    the log end offset is refused (OFFSET_OUT_OF_RANGE).

    Works through a broker (--bootstrap-server) or on a stopped data directory (--data-dir;
    the store's lock is taken, so not while a broker holds it).

    \b
    Example:
      compactlog delete-records fruit-prices -p 0 --offset 100
      compactlog --bootstrap-server localhost:9092 delete-records fruit-prices -p 0 --offset -1

    Exit codes: 0 success, 2 bad option or topic name, 3 unknown topic or partition, offset
    out of range, or a broker or storage error, 5 broker not reached.
    """
    remote = remote_of(ctx)
    if remote is not None:
        low_watermark = remote.delete_records(topic, partition, offset)
    else:
        with open_store(ctx) as store:
            check_local_topic(store, topic)
            target = store.log_end_offset(topic, partition) if offset < 0 else offset
            low_watermark = store.delete_records(topic, partition, target)
    click.echo("Executing records delete operation")
    click.echo("Records delete operation completed:")
    click.echo(f"partition: {topic}-{partition}\tlow_watermark: {low_watermark}")
