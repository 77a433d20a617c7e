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
config overrides; topics it lacks whose partition directories keep a copy of their entry,
``compactlog-topic.json``; without it, what the store would adopt: the topics of Kafka's metadata
log with their configs, other partition directories from their copies, or with retention
disabled), ``log-start-offset-checkpoint``
and ``cleaner-offset-checkpoint``, and the ``.log`` files
(plus the time indexes of the inactive segments, for ``min.compaction.lag.ms``). Temporaries of
an interrupted cleaning (``.cleaned``, ``.swap``, ``.deleted``) are ignored: the originals count,
as the Spark source reads them. A store that is open writes its log-start-offset checkpoint only
now and then, so a log start moved by retention or DeleteRecords may show a little late; and with
``preallocate=true`` the open store's active segment file counts at its pre-allocated length.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from compactlog.errors import (
    CompactlogError,
    MalformedCheckpointError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from compactlog.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    parse_checkpoint,
)
from compactlog.storage.config import BrokerConfig, LogConfig
from compactlog.storage.fs import FileSystem, ReadOnlyFileSystem
from compactlog.storage.local_log import LocalLog, segment_settings
from compactlog.storage.log import Log
from compactlog.storage.segment import LOG_SUFFIX, LogSegment
from compactlog.storage.topic_catalog import (
    TOPICS_FILE,
    adopt_catalog,
    read_topics_file,
    restore_missing,
)
from compactlog.storage.topic_names import partition_dir_name

logger = logging.getLogger("compactlog.storage")


@dataclass(frozen=True)
class TopicEntry:
    """A topic as the store knows it."""

    name: str
    partitions: int
    config: LogConfig


def read_topics(
    data_dir: str, broker: BrokerConfig, fs: FileSystem | None = None
) -> dict[str, TopicEntry]:
    """The store's topics with their effective configs (overrides over ``broker``'s defaults).
    ``fs``: the filesystem that holds ``data_dir`` (default: the local one, read-only)."""
    fs = fs or ReadOnlyFileSystem()
    if not fs.is_dir(data_dir):
        raise StorageError(f"the data directory {data_dir} does not exist")
    try:
        catalog = read_topics_file(fs, data_dir)
    except StorageError as exc:
        # What the store does at open: the damaged file is set aside and the catalog rebuilt
        # from the partition directories' copies.
        logger.warning("%s; reading the partition directories' copies instead", exc)
        catalog = None
    if catalog is None:
        return _adopted_topics(data_dir, broker, fs)
    # Topics the file lacks but whose partition directories keep a copy of their entry: the
    # store restores them at open.
    restore_missing(fs, data_dir, catalog, announce=False)
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


def _adopted_topics(data_dir: str, broker: BrokerConfig, fs: FileSystem) -> dict[str, TopicEntry]:
    """No topics file (a Kafka broker's log directory): what the store would adopt, the topics
    of Kafka's metadata log with their configs, other partition directories with defaults."""
    adopted = adopt_catalog(fs, data_dir, broker, announce=False)
    return {
        name: TopicEntry(name, info.partitions, LogConfig.create(info.overrides, broker))
        for name, info in sorted(adopted.items())
    }


def read_checkpoint(
    data_dir: str, name: str, fs: FileSystem | None = None
) -> dict[tuple[str, int], int]:
    """A checkpoint file's entries; missing or malformed reads as empty, as the store reads it."""
    fs = fs or ReadOnlyFileSystem()
    path = os.path.join(data_dir, name)
    try:
        if not fs.exists(path):
            return {}
        return parse_checkpoint(fs.read_file(path), name)
    except MalformedCheckpointError:
        return {}


@contextmanager
def read_only_log(
    data_dir: str,
    topic: str,
    partition: int,
    config: LogConfig,
    log_start_checkpoint: int | None,
    now: int,
    fs: FileSystem | None = None,
) -> Iterator[Log | None]:
    """The partition's log as the store would load it after a clean shutdown (None: it has no
    segment file yet); its file handles are closed on exit. ``fs`` as for :func:`read_topics`."""
    fs = fs or ReadOnlyFileSystem()
    directory = os.path.join(data_dir, partition_dir_name(topic, partition))
    names = fs.listdir(directory) if fs.is_dir(directory) else []
    bases = sorted(
        int(name[: -len(LOG_SUFFIX)])
        for name in names
        if name.endswith(LOG_SUFFIX) and len(name) == 20 + len(LOG_SUFFIX) and name[:20].isdigit()
    )
    if not bases:
        yield None
        return
    settings = segment_settings(config)
    segments: list[LogSegment] = []
    try:
        for base in bases:
            segment = LogSegment(fs, directory, base, settings, now_ms=now, create=False)
            segments.append(segment)
        for segment in segments[:-1]:
            # The largest timestamp (min.compaction.lag.ms, lookups by timestamp) comes from
            # the time index. The active segment's index may be pre-allocated by an open store
            # and lags its appends: it is not read, and the segment's end and largest timestamp
            # are found by scanning its batches (a lookup by timestamp scans it from the start).
            segment.time_index.load()
        segments[-1].limit_to_whole_batches()  # a live broker may be appending to it
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


class ReadOnlyDataDir:
    """A data directory opened to look at, at one instant ``now``: no lock taken, no byte
    written, nothing recovered (the rules are the module's).

    The topics and configs are the store's (``config`` holds broker settings by Kafka's
    names, as :meth:`Store.open <compactlog.storage.store.Store.open>` takes them), the
    checkpoints as on disk, each partition's :class:`Log` as after a clean shutdown, opened on
    first use and closed by :meth:`close`. Works while a broker, the CLI or a job has the
    directory open.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        config: Mapping[str, Any] | None = None,
        now: int | None = None,
    ) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.broker = BrokerConfig.from_dict(dict(config or {}))
        self.now = time.time_ns() // 1_000_000 if now is None else now
        self._topics = read_topics(self.path, self.broker)
        self._log_starts = read_checkpoint(self.path, LOG_START_OFFSET_CHECKPOINT)
        self._logs: dict[tuple[str, int], Log] = {}
        self._handles = ExitStack()

    def __enter__(self) -> ReadOnlyDataDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the files of every log opened so far."""
        self._logs.clear()
        self._handles.close()

    def clock(self) -> int:
        """The instant this view looks at (epoch ms)."""
        return self.now

    def topics(self) -> list[str]:
        return sorted(self._topics)

    def _topic(self, name: str) -> TopicEntry:
        try:
            return self._topics[name]
        except KeyError:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}") from None

    def partitions(self, name: str) -> int:
        return self._topic(name).partitions

    def topic_config(self, name: str) -> LogConfig:
        return self._topic(name).config

    def cleaner_checkpoints(self) -> dict[tuple[str, int], int]:
        """The cleaner's checkpoint as on disk (missing or malformed: empty, as the cleaner
        reads it)."""
        return read_checkpoint(self.path, CLEANER_OFFSET_CHECKPOINT)

    def log(self, topic: str, partition: int) -> Log:
        """The partition's log, read-only; raises :class:`UnknownTopicOrPartitionError` for a
        partition the topic does not have and :class:`StorageError` for one with no segment
        file (the store creates one with the partition)."""
        key = (topic, partition)
        log = self._logs.get(key)
        if log is not None:
            return log
        entry = self._topic(topic)
        if not 0 <= partition < entry.partitions:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
        opened = self._handles.enter_context(
            read_only_log(
                self.path, topic, partition, entry.config, self._log_starts.get(key), self.now
            )
        )
        if opened is None:
            directory = os.path.join(self.path, partition_dir_name(topic, partition))
            raise StorageError(f"{directory} has no segment file")
        self._logs[key] = opened
        return opened
