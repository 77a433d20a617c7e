"""``groups``: consumer groups as kafka-consumer-groups shows and changes them.

Network mode (``--bootstrap-server``) asks the group coordinator through Kafka's admin client:
``list``, ``describe`` (committed offset, log end offset and lag per partition, with the member
that holds it), ``reset-offsets`` (refused while the group has members, as Kafka refuses it) and
``delete``. On a data directory, ``list`` and ``describe`` read the coordinator's own records in
``__consumer_offsets`` read-only (no lock, nothing written; a broker may hold the directory):
the last commit of each partition and the group's last stored membership, as a coordinator
loads them; changing a group needs its coordinator, so ``reset-offsets`` and ``delete`` need
``--bootstrap-server``.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import click

from compactlog.broker.coordinator.offsets_topic import (
    OFFSETS_TOPIC,
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from compactlog.cli.common import (
    EXIT_DATA_ERROR,
    EXIT_USAGE,
    CliError,
    check_topic_name,
    open_view,
)
from compactlog.cli.consume import log_records
from compactlog.cli.remote import (
    OffsetSpec,
    Remote,
    TopicPartition,
    cli_error,
    kafka,
    remote_of,
)
from compactlog.errors import CompactlogError, StorageError
from compactlog.storage.readonly import ReadOnlyDataDir


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class Group:
    """What describe shows of a group, from either source."""

    group_id: str
    state: str
    members: list[Member]
    committed: dict[tuple[str, int], int]


@click.group()
def groups() -> None:
    """List, describe, reset and delete consumer groups (like kafka-consumer-groups).

    \b
    Example:
      compactlog --bootstrap-server localhost:9092 groups list
      compactlog --bootstrap-server localhost:9092 groups describe billing
      compactlog --bootstrap-server localhost:9092 groups reset-offsets billing \\
          --topic orders --to-earliest --execute
      compactlog --data-dir /var/lib/compactlog groups describe billing

    Exit codes: 0 success, 2 bad usage (reset-offsets or delete without --bootstrap-server),
    3 unknown group, a group with members, or a broker or storage error, 5 broker not reached.
    """


# --------------------------------------------------------------------------------------------
# The coordinator's records, read from a directory


def _assignment(data: bytes) -> list[tuple[str, int]]:
    """Kafka's ConsumerProtocolAssignment (version, [topic, [partition]], user data); [] for
    anything else (another protocol type, or bytes this reader does not follow)."""
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out = []
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", data, pos)
            topic = data[pos + 2 : pos + 2 + length].decode("utf-8")
            pos += 2 + length
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for p in struct.unpack_from(f">{max(n, 0)}i", data, pos):
                out.append((topic, int(p)))
            pos += 4 * max(n, 0)
        return out
    except (struct.error, UnicodeDecodeError):
        return []


def _local_groups(view: ReadOnlyDataDir) -> dict[str, Group]:
    """Replays ``__consumer_offsets`` as the coordinator loads it: the last record of each key
    wins, a tombstone removes it."""
    if OFFSETS_TOPIC not in view.topics():
        return {}
    commits: dict[tuple[str, str, int], int] = {}
    metadata: dict[str, Any] = {}
    for partition in range(view.partitions(OFFSETS_TOPIC)):
        try:
            log = view.log(OFFSETS_TOPIC, partition)
        except StorageError:
            continue
        for message, _ in log_records(log, OFFSETS_TOPIC, partition, log.log_start_offset):
            if message.key is None:
                continue
            try:
                key = decode_key(message.key)
                if isinstance(key, OffsetCommitKey):
                    where = (key.group, key.topic, key.partition)
                    if message.value is None:
                        commits.pop(where, None)
                    else:
                        commits[where] = decode_offset_commit_value(message.value).offset
                elif isinstance(key, GroupMetadataKey):
                    if message.value is None:
                        metadata.pop(key.group, None)
                        for where in [w for w in commits if w[0] == key.group]:
                            del commits[where]
                    else:
                        metadata[key.group] = decode_group_metadata_value(message.value)
            except CompactlogError:
                continue  # a record of a kind this reader does not know: the coordinator's
    found: dict[str, Group] = {}
    for name in sorted({g for g, _, _ in commits} | set(metadata)):
        value = metadata.get(name)
        members = [
            Member(m.member_id, m.client_id, m.client_host, _assignment(m.assignment))
            for m in (value.members if value is not None else ())
        ]
        committed = {(t, p): o for (g, t, p), o in commits.items() if g == name}
        state = "Stable" if members else "Empty"
        found[name] = Group(name, state, members, committed)
    return found


# --------------------------------------------------------------------------------------------
# The coordinator, through the admin client


def _remote_group_ids(remote: Remote) -> list[str]:
    remote.topics()  # fails at once (exit 5) when the broker cannot be reached
    listed = remote.result(remote.admin.list_consumer_groups(request_timeout=remote.timeout))
    if listed.errors:  # a coordinator that did not answer: its groups would be missing
        error = listed.errors[0]
        raise cli_error(getattr(error, "args", [error])[0], remote.bootstrap, "groups list")
    return sorted(g.group_id for g in listed.valid)


def _remote_group(remote: Remote, group_id: str) -> Group:
    futures = remote.admin.describe_consumer_groups([group_id], request_timeout=remote.timeout)
    described = remote.result(futures[group_id], f"group {group_id!r}")
    state = _state_name(described.state)
    members = [
        Member(
            m.member_id,
            m.client_id,
            m.host,
            [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or [])],
        )
        for m in described.members
    ]
    request = [kafka.ConsumerGroupTopicPartitions(group_id)]
    futures = remote.admin.list_consumer_group_offsets(request, request_timeout=remote.timeout)
    offsets = remote.result(futures[group_id], f"group {group_id!r}")
    committed = {
        (tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions if tp.offset >= 0
    }
    if state in ("Dead", "Unknown") and not committed and not members:
        raise _no_group(group_id)
    return Group(group_id, state, members, committed)


def _state_name(state: Any) -> str:
    # librdkafka's ConsumerGroupState names (STABLE, EMPTY, ...) in Kafka's spelling.
    name = str(getattr(state, "name", state))
    return {
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
    }.get(name, name.capitalize())


def _no_group(group_id: str) -> CliError:
    return CliError(
        f"consumer group {group_id!r} does not exist (GROUP_ID_NOT_FOUND)", EXIT_DATA_ERROR
    )


# --------------------------------------------------------------------------------------------
# Output, the same in both modes


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell and separated by a space (the last one unpadded),
    as kafka-consumer-groups aligns them."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        " ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=False)) + " " + row[-1]
        for row in rows
    ]


def _describe_rows(group: Group, log_ends: dict[tuple[str, int], int]) -> list[list[str]]:
    holder = {tp: m for m in group.members for tp in m.partitions}
    rows = [
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    ]
    for topic, partition in sorted(set(group.committed) | set(holder)):
        current = group.committed.get((topic, partition))
        end = log_ends.get((topic, partition))
        member = holder.get((topic, partition))
        lag = "-" if current is None or end is None else str(max(end - current, 0))
        rows.append(
            [
                group.group_id,
                topic,
                str(partition),
                "-" if current is None else str(current),
                "-" if end is None else str(end),
                lag,
                member.member_id if member else "-",
                member.host if member else "-",
                member.client_id if member else "-",
            ]
        )
    return rows


# --------------------------------------------------------------------------------------------
# Commands


@groups.command("list")
@click.pass_context
def groups_list(ctx: click.Context) -> None:
    """List the consumer groups, one per line.

    \b
    Example:
      compactlog --bootstrap-server localhost:9092 groups list

    Exit codes: 0 success, 3 broker or storage error, 5 broker not reached.
    """
    remote = remote_of(ctx)
    if remote is not None:
        names = _remote_group_ids(remote)
    else:
        with open_view(ctx) as view:
            names = list(_local_groups(view))
    for name in names:
        click.echo(name)


@groups.command("describe")
@click.argument("group_id", metavar="GROUP")
@click.pass_context
def groups_describe(ctx: click.Context, group_id: str) -> None:
    """Each partition GROUP has committed or is assigned: CURRENT-OFFSET (the committed
    offset), LOG-END-OFFSET, LAG (their difference) and the member holding it (CONSUMER-ID,
    HOST, CLIENT-ID; "-" for none), as kafka-consumer-groups --describe prints them.

    \b
    Example:
      compactlog --bootstrap-server localhost:9092 groups describe billing

    Exit codes: 0 success, 3 unknown group, broker or storage error, 5 broker not reached.
    """
    remote = remote_of(ctx)
    log_ends: dict[tuple[str, int], int] = {}
    if remote is not None:
        group = _remote_group(remote, group_id)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in set(group.committed) | {
            tp for m in group.members for tp in m.partitions
        }:
            by_topic.setdefault(topic, []).append(partition)
        for topic, partitions in by_topic.items():
            ends = remote.list_offsets(topic, partitions, OffsetSpec.latest())
            log_ends.update({(topic, p): o for p, o in ends.items()})
    else:
        with open_view(ctx) as view:
            found = _local_groups(view)
            if group_id not in found:
                raise _no_group(group_id)
            group = found[group_id]
            for topic, partition in set(group.committed) | {
                tp for m in group.members for tp in m.partitions
            }:
                with contextlib.suppress(CompactlogError):  # a deleted topic: "-"
                    log_ends[(topic, partition)] = view.log(topic, partition).log_end_offset
    if not group.members:
        click.echo(f"Consumer group '{group_id}' has no active members.")
    click.echo("\n".join(_table(_describe_rows(group, log_ends))))


def _parse_datetime(text: str) -> int:
    """Kafka's --to-datetime (ISO 8601, e.g. 2024-01-31T12:00:00.000, a zone optional: UTC
    without one) -> epoch milliseconds."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"--to-datetime {text!r}: expected an ISO date-time such as "
            "2024-01-31T12:00:00.000 (UTC unless a zone such as +02:00 follows)",
            EXIT_USAGE,
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


@groups.command("reset-offsets")
@click.argument("group_id", metavar="GROUP")
@click.option(
    "--topic",
    "topic_spec",
    required=True,
    metavar="TOPIC[:P,P...]",
    help="The topic to reset: all its partitions, or those listed after a colon (Kafka's form).",
)
@click.option("--to-earliest", is_flag=True, help="To each partition's log start offset.")
@click.option("--to-latest", is_flag=True, help="To each partition's log end offset.")
@click.option("--to-offset", type=click.IntRange(min=0), help="To this offset (clamped).")
@click.option("--to-datetime", metavar="ISO", help="To the first offset at or after this time.")
@click.option("--dry-run", is_flag=True, help="Show the new offsets only (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@click.pass_context
def groups_reset_offsets(
    ctx: click.Context,
    group_id: str,
    topic_spec: str,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    dry_run: bool,
    execute: bool,
) -> None:
    """Set GROUP's committed offsets for every partition of --topic, as
    kafka-consumer-groups --reset-offsets does: refused while the group has active members;
    --to-offset beyond a partition's bounds is clamped to them, and --to-datetime after the
    last record gives the log end offset. Without --execute nothing is changed (a dry run).

    \b
    Example:
      compactlog --bootstrap-server localhost:9092 groups reset-offsets billing \\
          --topic orders --to-datetime 2024-01-31T12:00:00 --execute

    Exit codes: 0 success, 2 bad usage (one --to-* option is needed; --dry-run with --execute;
    no --bootstrap-server), 3 unknown group or topic, a group with members, a broker error,
    5 broker not reached.
    """
    chosen = [to_earliest, to_latest, to_offset is not None, to_datetime is not None]
    if sum(chosen) != 1:
        raise CliError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime",
            EXIT_USAGE,
        )
    if dry_run and execute:
        raise CliError("give --dry-run or --execute, not both", EXIT_USAGE)
    remote = _needs_remote(ctx, "reset-offsets")
    topic, listed = _topic_partitions(topic_spec)
    count = remote.partitions(topic)
    partitions = list(range(count)) if listed is None else listed
    for p in partitions:
        if p >= count:
            raise CliError(
                f"topic {topic!r} has no partition {p} (UNKNOWN_TOPIC_OR_PARTITION)",
                EXIT_DATA_ERROR,
            )
    group = _remote_group_or_new(remote, group_id)
    if group.state not in ("Empty", "Dead", "Unknown") or group.members:
        raise CliError(
            f"assignments can only be reset if the group {group_id!r} is inactive, but the "
            f"current state is {group.state} (stop its consumers first)",
            EXIT_DATA_ERROR,
        )
    bounds = remote.offsets(topic, partitions)
    if to_earliest:
        new = {p: bounds[p][0] for p in partitions}
    elif to_latest:
        new = {p: bounds[p][1] for p in partitions}
    elif to_offset is not None:
        new = {p: min(max(to_offset, bounds[p][0]), bounds[p][1]) for p in partitions}
    else:
        assert to_datetime is not None
        ms = _parse_datetime(to_datetime)
        found = remote.list_offsets(topic, partitions, OffsetSpec.for_timestamp(ms))
        new = {p: found[p] if found[p] >= 0 else bounds[p][1] for p in partitions}
    if execute:
        request = kafka.ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(topic, p, o) for p, o in sorted(new.items())]
        )
        futures = remote.admin.alter_consumer_group_offsets(
            [request], request_timeout=remote.timeout
        )
        remote.result(futures[group_id], f"group {group_id!r}")
    else:
        click.echo(
            "No offsets were changed: this is a dry run (add --execute to commit them).",
            err=True,
        )
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[group_id, topic, str(p), str(o)] for p, o in sorted(new.items())]
    click.echo("\n".join(_table(rows)))


def _topic_partitions(spec: str) -> tuple[str, list[int] | None]:
    """Kafka's ``--topic`` value: ``TOPIC`` (every partition) or ``TOPIC:0,2``."""
    topic, sep, rest = spec.partition(":")
    check_topic_name(click.get_current_context(), click.Option(["--topic"]), topic)
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in rest.split(",")})
    except ValueError:
        partitions = [-1]
    if not partitions or partitions[0] < 0:
        raise CliError(
            f"--topic {spec!r}: expected TOPIC or TOPIC:P,P... with partition numbers", EXIT_USAGE
        )
    return topic, partitions


def _remote_group_or_new(remote: Remote, group_id: str) -> Group:
    """The group, or an empty one: Kafka resets the offsets of a group that does not exist yet
    (it is created by the commit)."""
    try:
        return _remote_group(remote, group_id)
    except CliError as exc:
        if "GROUP_ID_NOT_FOUND" not in exc.message:
            raise
        return Group(group_id, "Dead", [], {})


@groups.command("delete")
@click.argument("group_id", metavar="GROUP")
@click.pass_context
def groups_delete(ctx: click.Context, group_id: str) -> None:
    """Delete GROUP and its committed offsets (refused by the coordinator while it has
    members: NON_EMPTY_GROUP).

    \b
    Example:
      compactlog --bootstrap-server localhost:9092 groups delete billing

    Exit codes: 0 deleted, 2 no --bootstrap-server, 3 unknown or non-empty group or broker
    error, 5 broker not reached.
    """
    remote = _needs_remote(ctx, "delete")
    futures = remote.admin.delete_consumer_groups([group_id], request_timeout=remote.timeout)
    remote.result(futures[group_id], f"group {group_id!r}")
    click.echo(f"Deletion of requested consumer groups ('{group_id}') was successful.")


def _needs_remote(ctx: click.Context, what: str) -> Remote:
    remote = remote_of(ctx)
    if remote is None:
        raise CliError(
            f"groups {what} changes a group through its coordinator: give --bootstrap-server "
            "HOST:PORT (a stopped directory has none)",
            EXIT_USAGE,
        )
    return remote
