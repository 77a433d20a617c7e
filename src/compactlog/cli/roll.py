"""``roll``: start a new active segment now, so that the records before it become cleanable.

Kafka has no tool or request for this (a segment rolls on ``segment.bytes``, ``segment.ms`` or
an index filling up); compactlog rolls a stopped data directory through the store, and a running
``compactlog serve`` through its HTTP admin routes (:mod:`compactlog.broker.admin`), as Redpanda
offers operator actions on its admin API.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import click

from compactlog.cli.common import (
    EXIT_DATA_ERROR,
    EXIT_USAGE,
    CliError,
    State,
    check_topic_name,
    library_error,
    open_store,
)
from compactlog.errors import CompactlogError, StorageError, UnknownTopicOrPartitionError

#: An admin call is one local file operation on the broker: a few seconds is plenty.
ADMIN_TIMEOUT_S = 10.0

#: HTTP statuses of the admin routes that mean "you asked for something wrong".
_USAGE_STATUSES = (400, 403, 404, 405)


def _roll_local(ctx: click.Context, topic: str, partition: int | None) -> list[dict[str, Any]]:
    results = []
    with contextlib.ExitStack() as stack:
        try:
            store = stack.enter_context(open_store(ctx))
        except StorageError as exc:
            hint = ""
            if "in use" in str(exc):
                hint = "; to roll on a running broker, give --admin-url http://HOST:PORT"
            raise CliError(f"{library_error(exc).message}{hint}", EXIT_DATA_ERROR) from exc
        try:
            if topic not in store.topics():
                raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
            count = store.partitions(topic)
            if partition is not None and not 0 <= partition < count:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} has no partition {partition} (it has {count})"
                )
            for p in range(count) if partition is None else [partition]:
                rolled = store.roll(topic, p)
                end = store.log_end_offset(topic, p)
                results.append(
                    {"topic": topic, "partition": p, "rolled": rolled, "log_end_offset": end}
                )
        except UnknownTopicOrPartitionError as exc:
            raise CliError(f"{exc} (UNKNOWN_TOPIC_OR_PARTITION)", EXIT_USAGE) from exc
        except CompactlogError as exc:
            raise library_error(exc) from exc
    return results


def _roll_remote(admin_url: str, topic: str, partition: int | None) -> list[dict[str, Any]]:
    parsed = urllib.parse.urlsplit(admin_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise CliError(f"--admin-url {admin_url!r}: expected http://HOST:PORT", EXIT_USAGE)
    quoted = urllib.parse.quote(topic, safe="")
    path = f"/v1/topics/{quoted}/roll"
    if partition is not None:
        path = f"/v1/topics/{quoted}/partitions/{partition}/roll"
    url = admin_url.rstrip("/") + path
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=ADMIN_TIMEOUT_S) as response:
            doc = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            body = exc.read()
        try:
            error = json.loads(body)
            message = f"{error['message']} ({error['error']})"
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {exc.code} from {url}"
        code = EXIT_USAGE if exc.code in _USAGE_STATUSES else EXIT_DATA_ERROR
        raise CliError(message, code) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(
            f"cannot reach the broker's admin routes at {admin_url}: {reason} (is "
            "'compactlog serve --metrics HOST:PORT' running there?)",
            EXIT_DATA_ERROR,
        ) from exc
    except ValueError as exc:
        raise CliError(f"{url} did not answer JSON: {exc}", EXIT_DATA_ERROR) from exc
    partitions: list[dict[str, Any]] = doc["partitions"]
    return partitions


@click.command()
@click.argument("topic", callback=check_topic_name)
@click.option(
    "-p", "--partition", type=click.IntRange(min=0), help="Only this partition (default: all)."
)
@click.option(
    "--admin-url",
    metavar="URL",
    envvar="COMPACTLOG_ADMIN_URL",
    help="Roll on a running broker through its admin routes: the http://HOST:PORT of "
    "'compactlog serve --metrics HOST:PORT'. Default: $COMPACTLOG_ADMIN_URL; without it, the "
    "stopped --data-dir is rolled.",
)
@click.pass_context
def roll(ctx: click.Context, topic: str, partition: int | None, admin_url: str | None) -> None:
    """Roll the active segment of TOPIC's partitions: a new, empty active segment starts at the
    log end offset (Kafka's UnifiedLog.roll), so the records written so far become cleanable.

    The log cleaner never touches the active segment; a topic that is written slowly keeps its
    records there until segment.bytes or segment.ms rolls it. Kafka has no command or request
    to roll a segment: on a stopped data directory this command rolls through the store, and on
    a running 'compactlog serve' through its HTTP admin routes (--admin-url). A partition whose
    active segment is empty is left as it is.

    \b
    Example:
      compactlog --data-dir /var/lib/compactlog roll fruit-prices
      compactlog roll fruit-prices -p 0 --admin-url http://127.0.0.1:9308

    Exit codes: 0 success, 2 unknown topic or partition, bad option, or the admin routes
    refused the client, 3 storage error or the broker cannot be reached.
    """
    state: State = ctx.obj
    if admin_url is not None:
        results = _roll_remote(admin_url, topic, partition)
    elif state.bootstrap_server and not state.data_dir:
        raise CliError(
            "Kafka has no request to roll a segment, so roll cannot go through "
            "--bootstrap-server: give the broker's admin routes instead (--admin-url "
            "http://HOST:PORT, the address of 'compactlog serve --metrics')",
            EXIT_USAGE,
        )
    else:
        results = _roll_local(ctx, topic, partition)
    for r in results:
        name = f"{r['topic']}-{r['partition']}"
        if r["rolled"]:
            click.echo(f"{name}: rolled; the new active segment starts at {r['log_end_offset']}")
        else:
            click.echo(
                f"{name}: not rolled; the active segment is empty (it starts at the log end "
                f"offset {r['log_end_offset']})"
            )
