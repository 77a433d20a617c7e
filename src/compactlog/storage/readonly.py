"""A data directory's logs as the store would load them, without the store: read-only, unlocked.

:meth:`Store.open <compactlog.storage.store.Store.open>` takes the directory's lock and recovers
every log (it completes swaps, rebuilds indexes, truncates torn tails), so a report cannot use it
while a broker, the CLI or a Spark job has the directory open, and must not change a directory
it only looks at. This is the storage layer's read-only mode: it builds the store's own
objects, a :class:`~compactlog.storage.log.Log` of real
:class:`~compactlog.storage.segment.LogSegment`\\ s, over
:class:`~compactlog.storage.fs.ReadOnlyFileSystem`: files are opened ``O_RDONLY`` and every
change raises. The cleaner manager's functions then compute the cleanable range and dirty ratio
from the same objects, by the same code, as for a store.

What it reads, as the store would at open: ``compactlog-topics.json`` (topics, partition counts,
config overrides; without it, what the store would adopt: the topics of Kafka's metadata log with
their configs, other partition directories with default configs), ``log-start-offset-checkpoint``
and ``cleaner-offset-checkpoint``, and the ``.log`` files
(plus the time indexes of the inactive segments, for ``min.compaction.lag.ms``). Temporaries of
an interrupted cleaning (``.cleaned``, ``.swap``, ``.deleted``) are ignored: the originals count,
as the Spark source reads them. A store that is open writes its log-start-offset checkpoint only
now and then, so a log start moved by retention or DeleteRecords may show a little late; and with
``preallocate=true`` the open store's active segment file counts at its pre-allocated length.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from compactlog.errors import CompactlogError, MalformedCheckpointError, StorageError
from compactlog.storage.checkpoint import parse_checkpoint
from compactlog.storage.config import BrokerConfig, LogConfig
from compactlog.storage.fs import ReadOnlyFileSystem
from compactlog.storage.local_log import LocalLog, segment_settings
from compactlog.storage.log import Log
from compactlog.storage.segment import LOG_SUFFIX, LogSegment
from compactlog.storage.topic_catalog import TOPICS_FILE, adopt_catalog, read_topics_file
from compactlog.storage.topic_names import partition_dir_name


@dataclass(frozen=True)
class TopicEntry:
    """A topic as the store knows it."""

    name: str
    partitions: int
    config: LogConfig


def read_topics(data_dir: str, broker: BrokerConfig) -> dict[str, TopicEntry]:
    """The store's topics with their effective configs (overrides over ``broker``'s defaults)."""
    if not os.path.isdir(data_dir):
        raise StorageError(f"the data directory {data_dir} does not exist")
    catalog = read_topics_file(ReadOnlyFileSystem(), data_dir)
    if catalog is None:
        return _adopted_topics(data_dir, broker)
    topics = {}
    for name, info in catalog.items():
        try:
            config = LogConfig.create(info.overrides, broker)
        except CompactlogError as exc:
            raise StorageError(
                f"{os.path.join(data_dir, TOPICS_FILE)} is damaged (topic {name!r}: {exc}); "
                "cannot tell which topics exist"
            ) from exc
        topics[name] = TopicEntry(name, info.partitions, config)
    return topics


def _adopted_topics(data_dir: str, broker: BrokerConfig) -> dict[str, TopicEntry]:
    """No topics file (a Kafka broker's log directory): what the store would adopt, the topics
    of Kafka's metadata log with their configs, other partition directories with defaults."""
    adopted = adopt_catalog(ReadOnlyFileSystem(), data_dir, broker, announce=False)
    return {
        name: TopicEntry(name, info.partitions, LogConfig.create(info.overrides, broker))
        for name, info in sorted(adopted.items())
    }


def read_checkpoint(data_dir: str, name: str) -> dict[tuple[str, int], int]:
    """A checkpoint file's entries; missing or malformed reads as empty, as the store reads it."""
    try:
        with open(os.path.join(data_dir, name), "rb") as f:
            return parse_checkpoint(f.read(), name)
    except (FileNotFoundError, MalformedCheckpointError):
        return {}


@contextmanager
def read_only_log(
    data_dir: str,
    topic: str,
    partition: int,
    config: LogConfig,
    log_start_checkpoint: int | None,
    now: int,
) -> Iterator[Log | None]:
    """The partition's log as the store would load it after a clean shutdown (None: it has no
    segment file yet); its file handles are closed on exit."""
    directory = os.path.join(data_dir, partition_dir_name(topic, partition))
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        names = []
    bases = sorted(
        int(name[: -len(LOG_SUFFIX)])
        for name in names
        if name.endswith(LOG_SUFFIX) and len(name) == 20 + len(LOG_SUFFIX) and name[:20].isdigit()
    )
    if not bases:
        yield None
        return
    fs = ReadOnlyFileSystem()
    settings = segment_settings(config)
    segments: list[LogSegment] = []
    try:
        for base in bases:
            segment = LogSegment(fs, directory, base, settings, now_ms=now, create=False)
            segments.append(segment)
        for segment in segments[:-1]:
            # The largest timestamp (min.compaction.lag.ms) comes from the time index. The
            # active segment's index may be pre-allocated by an open store: it is not read, and
            # its end is found by scanning its batches.
            segment.time_index.load()
        next_offset = segments[-1].read_next_offset()
        start = min(max(log_start_checkpoint or 0, segments[0].base_offset), next_offset)
        local_log = LocalLog(
            fs,
            directory,
            topic,
            partition,
            config,
            lambda: now,
            segments,
            recovery_point=next_offset,
            rng=random.Random(0),
        )
        log = Log(local_log, log_start_offset=start)
        yield log
    finally:
        for segment in segments:
            segment.close_handles()
