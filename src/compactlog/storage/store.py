"""The store: the topics and partitions of one data directory.

A :class:`Store` opens a data directory (its files are described in
:mod:`compactlog.storage.datadir`), loads every partition's :class:`~compactlog.storage.log.Log`,
and owns the topic lifecycle (create, delete, configs), the partition lookup, the append and read
facade over the logs, retention of ``delete`` topics, and the offset checkpoints. It runs no
thread and knows no cleaner: :class:`compactlog.log_manager.LogManager` (Kafka's name) sits above
it with the log cleaner and the scheduler of the periodic tasks.

Kafka keeps topic metadata in its controller; compactlog keeps it in ``compactlog-topics.json``,
written atomically, and each partition directory keeps a copy of its topic's entry
(``compactlog-topic.json``, written when the topic is created, its config altered, or at open
when it differs), so that no single file holds the only record of a topic's configs. A topic the
file lacks is restored from those copies with a warning; a partition directory whose topic has
neither is ignored with a warning (the leftover of an interrupted deletion, which removes the
copies first, or not ours), and a create of that topic renames it aside with Kafka's stray name
(``<topic>-<partition>.<uuid>-stray``) rather than delete it. When the file is missing (a Kafka
broker's log directory), the topics are adopted: with their Kafka configs and ids from Kafka's
KRaft metadata log ``__cluster_metadata-0`` when there is one, else from the copies, else with
retention disabled; on later opens the file is merged with that metadata log. The rules are the
theory of operation of :mod:`compactlog.storage.topic_catalog`. The metadata log is never
loaded as a topic, and the store writes nothing in it; of a Kafka log directory's other files it
reads ``meta.properties``, and leaves it, ``replication-offset-checkpoint``,
``leader-epoch-checkpoint`` and an existing ``partition.metadata`` as they are. Checkpoint
entries of partition directories the store does not load are written back unchanged.

Opening: the clean-shutdown marker is read and removed at once (a crash while loading is then an
unclean stop), checkpoints are read, and every partition is loaded by
:func:`compactlog.storage.loader.load_log`. A missing or malformed checkpoint reads as empty, as in
Kafka's ``LogManager.loadLogs``, with a warning naming the file: a recovery point of 0, which after
a clean shutdown (the marker was there) recovers nothing and otherwise recovers every log from
its first segment; a log start offset at the first segment's base offset. (Kafka's
``cleaner-offset-checkpoint`` rule, an unreadable file logged and read as empty, is the cleaner
manager's.) A failed open removes the partition directories it created.

Closing: every log is flushed and its files trimmed, the checkpoints are written, then the marker.

I/O errors (disk full, EIO): an append or roll that fails is undone and raises
:class:`~compactlog.errors.StorageError` (see :mod:`compactlog.storage.log`); a log that could not
undo one, or whose fsync failed, is offline: its writes are refused, the background tasks skip
it, :meth:`Store.flush` raises naming it, and :meth:`Store.close` closes it without writing to it
and leaves the clean-shutdown marker out, so that the next open recovers it from its files. A
failed write of a checkpoint or of the topics file leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import numbers
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, NamedTuple, Protocol

from compactlog.errors import (
    CompactlogError,
    CorruptRecordError,
    InvalidArgumentError,
    InvalidPartitionsError,
    InvalidRecordError,
    MalformedCheckpointError,
    PolicyViolationError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from compactlog.records import Compression, Record, build_batch, decode_columns
from compactlog.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from compactlog.storage.config import BrokerConfig, LogConfig
from compactlog.storage.datadir import (
    CLEAN_SHUTDOWN_FILE,
    NO_BROKER_EPOCH,
    DataDirLock,
    PartitionJobs,
    clean_shutdown_marker,
    read_broker_epoch,
)
from compactlog.storage.file_records import FileBatch
from compactlog.storage.fs import FileSystem, OsFileSystem, refuse_uri, write_file_atomically
from compactlog.storage.kraft_metadata import METADATA_DIR
from compactlog.storage.loader import LoadStats, load_log
from compactlog.storage.log import Log
from compactlog.storage.partitioner import partition_for_key
from compactlog.storage.producer_state import ProducerState
from compactlog.storage.topic_catalog import (
    PARTITION_CATALOG_FILE,
    PARTITION_METADATA_FILE,
    TOPICS_FILE,
    TopicInfo,
    load_catalog,
    new_topic_id,
    partition_metadata_text,
    remove_partition_copy,
    write_partition_copy,
    write_topics_file,
)
from compactlog.storage.topic_names import (
    check_collision,
    is_valid_topic_name,
    parse_partition_dir_name,
    parse_special_dir_name,
    partition_dir_name,
    special_dir_name,
    validate_topic_name,
)
from compactlog.storage.validator import ValidatedAppend

logger = logging.getLogger("compactlog.storage")

Clock = Callable[[], int]


class PartitionRemovalListener(Protocol):
    """Told around the removal of a partition (a topic deletion): the log cleaner implements
    it, and :class:`~compactlog.log_manager.LogManager` registers it with
    :meth:`Store.add_removal_listener`, so that no cleaning of a partition runs while its files
    go (Kafka's ``LogManager.asyncDelete`` aborts the cleaning the same way)."""

    def abort_and_pause(self, topic: str, partition: int) -> None:
        """Before: stop any cleaning of the partition and keep it from starting again."""

    def forget_partition(self, topic: str, partition: int) -> None:
        """After: drop every state kept for the partition."""


RecordInput = (
    tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]
)


#: Kafka's controller writes at most this many metadata records for one request
#: (``QuorumController.MAX_RECORDS_PER_USER_OP``): a topic creation writes one record for the
#: topic, one per partition and one per config override, and a request that would write more
#: fails as a whole with POLICY_VIOLATION, before anything is created.
MAX_RECORDS_PER_USER_OP = 10_000
#: The most partitions one creation can give a topic (one of the records is the topic's own).
#: It also bounds what a creation costs here: a directory and four files per partition.
MAX_PARTITIONS_PER_CREATE = MAX_RECORDS_PER_USER_OP - 1

#: Files a partition keeps open at least (its active segment's .log, .index and .timeindex).
FILES_PER_PARTITION = 3
#: Descriptors left for everything else (connections, checkpoints, the cleaner's files) when a
#: creation checks that its partitions' files fit under the limit of open files.
_SPARE_FILES = 256

_BYTES_LIKE = (bytes, bytearray, memoryview)


def _open_files_limit() -> int | None:
    """The soft limit of open files (``ulimit -n``), or None where there is none to read."""
    try:
        import resource  # noqa: PLC0415 - POSIX only

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _type_name(value: object) -> str:
    return type(value).__name__


def _check_int(name: str, value: object, *, optional: bool = False) -> None:
    """``value`` must be an int (not a bool, which is one to Python), or None if optional."""
    if optional and value is None:
        return
    # numbers.Integral: numpy's integers are not ints but are integers (offsets from arrays).
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        wanted = "an int or None" if optional else "an int"
        raise InvalidArgumentError(f"{name} must be {wanted}, not {_type_name(value)} {value!r}")


def _check_str(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{name} must be a str, not {_type_name(value)} {value!r}")


def _check_bytes(name: str, value: object, *, optional: bool = True) -> None:
    if (optional and value is None) or isinstance(value, _BYTES_LIKE):
        return
    wanted = "bytes or None" if optional else "bytes"
    raise InvalidArgumentError(f"{name} must be {wanted}, not {_type_name(value)} {_short(value)}")


def _check_mapping(name: str, value: object) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"{name} must be a mapping of config names to values or None, not "
            f"{_type_name(value)} {_short(value)}"
        )


def _check_headers(name: str, headers: object) -> None:
    if headers is None:
        return
    if isinstance(headers, (str, *_BYTES_LIKE)) or not isinstance(headers, Sequence):
        raise InvalidArgumentError(
            f"{name} must be a sequence of (str, bytes or None) pairs, not "
            f"{_type_name(headers)} {_short(headers)}"
        )
    for i, header in enumerate(headers):
        if not isinstance(header, tuple | list) or len(header) != 2:
            raise InvalidArgumentError(
                f"{name}[{i}] must be a (str, bytes or None) pair, not {_short(header)}"
            )
        _check_str(f"{name}[{i}] key", header[0])
        _check_bytes(f"{name}[{i}] value", header[1])


def _check_records(records: object) -> None:
    if isinstance(records, (str, *_BYTES_LIKE)) or not isinstance(records, Sequence):
        raise InvalidArgumentError(
            f"records must be a sequence of (key, value) or (key, value, headers) tuples, not "
            f"{_type_name(records)} {_short(records)}"
        )
    for i, record in enumerate(records):
        if not isinstance(record, tuple | list) or len(record) not in (2, 3):
            raise InvalidArgumentError(
                f"records[{i}] must be a (key, value) or (key, value, headers) tuple, not "
                f"{_short(record)}"
            )
        _check_bytes(f"records[{i}] key", record[0])
        _check_bytes(f"records[{i}] value", record[1])
        if len(record) == 3:
            _check_headers(f"records[{i}] headers", record[2])


def _check_compression(compression: object) -> None:
    if not isinstance(compression, str | Compression):
        raise InvalidArgumentError(
            "compression must be a codec name (none, gzip, snappy, lz4, zstd) or a "
            f"Compression, not {_type_name(compression)} {_short(compression)}"
        )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def system_clock() -> int:
    """Wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


class SegmentInfo(NamedTuple):
    """A snapshot of one segment's identity and size."""

    base_offset: int
    size: int
    path: str


class Store:
    """Topics and partitions in one data directory. Use :meth:`Store.open`."""

    def __init__(
        self,
        path: str,
        *,
        clock: Clock,
        broker: BrokerConfig,
        fs: FileSystem,
        rng: random.Random,
    ) -> None:
        self.path = os.path.abspath(path)
        self.clock = clock
        self.broker = broker
        self.fs = fs
        self.rng = rng
        self._lock = threading.RLock()
        self._topics: dict[str, TopicInfo] = {}
        self._configs: dict[str, LogConfig] = {}
        self._logs: dict[tuple[str, int], Log] = {}
        self._round_robin: dict[str, Iterator[int]] = {}
        self._dir_lock: DataDirLock | None = None
        self._owns_lock = False
        self._closed = False
        self._closing = False  # close() waits for the lock: a creation in progress stops early
        self._removal_listeners: list[PartitionRemovalListener] = []
        #: The partition directories the open in progress created (removed if it fails).
        self._created: list[str] = []
        self.had_clean_shutdown = False
        #: The broker epoch of a Kafka clean-shutdown marker found at open (see the docstring).
        self._broker_epoch = NO_BROKER_EPOCH
        self.load_stats: dict[tuple[str, int], LoadStats] = {}
        #: Checkpoint entries of partitions not loaded: (recovery points, log start offsets).
        self._carried: tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]] = ({}, {})
        self.recovery_point_checkpoint = OffsetCheckpointFile(
            fs, self.path, RECOVERY_POINT_CHECKPOINT
        )
        self.log_start_offset_checkpoint = OffsetCheckpointFile(
            fs, self.path, LOG_START_OFFSET_CHECKPOINT
        )
        self.cleaner_offset_checkpoint = OffsetCheckpointFile(
            fs, self.path, CLEANER_OFFSET_CHECKPOINT
        )

    # --- opening and closing ----------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        clock: Clock | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        fs: FileSystem | None = None,
        rng: random.Random | None = None,
        dir_lock: DataDirLock | None = None,
    ) -> Store:
        """Open (creating if needed) the data directory ``path`` and recover its logs.

        ``clock`` returns epoch milliseconds and drives every time decision (default: the wall
        clock). ``config`` holds broker settings by Kafka's names. ``dir_lock``: the
        directory's lock, already held by the caller, who keeps it after the store closes (a job
        that works on the files between two openings); by default the store takes and releases
        the lock. The store has no cleaner and runs no thread: open a
        :class:`~compactlog.log_manager.LogManager` for those.
        """
        if not isinstance(path, str | os.PathLike):
            raise InvalidArgumentError(
                f"path must be a str or os.PathLike, not {_type_name(path)} {_short(path)}"
            )
        if clock is not None and not callable(clock):
            raise InvalidArgumentError(
                f"clock must be a callable returning epoch milliseconds or None, not "
                f"{_type_name(clock)} {_short(clock)}"
            )
        refuse_uri(path, "opening a store (to write, compact or serve it)")
        _check_mapping("config", config)
        broker = BrokerConfig.from_dict(dict(config or {}))
        store = cls(
            os.fspath(path),
            clock=clock or system_clock,
            broker=broker,
            fs=fs or OsFileSystem(),
            rng=rng or random.Random(),
        )
        store._dir_lock = dir_lock
        store._open()
        return store

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _acquire_dir_lock(self) -> None:
        if self._dir_lock is None:
            self._dir_lock = DataDirLock(self.path)
            self._owns_lock = True
        elif not self._dir_lock.held or self._dir_lock.path != self.path:
            raise StorageError(f"the lock given for {self.path} is not held on that directory")
        if self._owns_lock:
            self._dir_lock.acquire()

    def _open(self) -> None:
        fs = self.fs
        if fs.exists(self.path) and not fs.is_dir(self.path):
            raise StorageError(f"the data directory {self.path} is not a directory")
        fs.makedirs(self.path)
        self._acquire_dir_lock()
        try:
            PartitionJobs(self.path).check_idle()
            marker = os.path.join(self.path, CLEAN_SHUTDOWN_FILE)
            self.had_clean_shutdown = fs.exists(marker)
            if self.had_clean_shutdown:
                self._broker_epoch = read_broker_epoch(fs.read_file(marker))
                fs.remove(marker)
                fs.sync_dir(self.path)
            recovery_points = self._read_checkpoint(
                self.recovery_point_checkpoint,
                "the clean-shutdown marker was present, so no log is recovered"
                if self.had_clean_shutdown
                else "no clean-shutdown marker, so every log is recovered from its first segment",
            )
            start_offsets = self._read_checkpoint(
                self.log_start_offset_checkpoint,
                "every log starts at the base offset of its first segment",
            )
            self._load_topics()
            for name, info in sorted(self._topics.items()):
                for partition in range(info.partitions):
                    self._load_partition(
                        name,
                        partition,
                        recovery_points.get((name, partition)),
                        start_offsets.get((name, partition)),
                    )
            self._warn_foreign_entries()
            self._carried = (
                self._not_loaded(recovery_points),
                self._not_loaded(start_offsets),
            )
        except BaseException:
            for log in self._logs.values():  # the partitions loaded before the failure
                log.close_without_flush()
            self._remove_created()
            self._release()
            raise
        finally:
            self._created = []

    def _read_checkpoint(
        self, checkpoint: OffsetCheckpointFile, consequence: str
    ) -> dict[tuple[str, int], int]:
        """The checkpoint's entries; a malformed one reads as empty, as Kafka's
        ``LogManager.loadLogs`` reads it (recovery points 0, log start offsets the first
        segment's base offset), with a warning naming the file and ``consequence``. The file
        is rewritten whole at the next checkpoint."""
        try:
            return checkpoint.read()
        except MalformedCheckpointError as exc:
            logger.warning("ignoring %s: %s; %s", checkpoint.path, exc, consequence)
            return {}

    def _remove_created(self) -> None:
        """After a failed open: remove the partition directories that open created (new
        partitions hold nothing yet), so that a failed open leaves the data directory as it
        found it."""
        for directory in reversed(self._created):
            try:
                if self.fs.exists(directory):
                    _remove_tree(self.fs, directory)
            except (OSError, CompactlogError) as exc:
                logger.warning("cannot remove %s after the failed open: %s", directory, exc)
        if self._created:
            with contextlib.suppress(OSError, CompactlogError):
                self.fs.sync_dir(self.path)

    def _load_partition(
        self,
        topic: str,
        partition: int,
        recovery_point: int | None,
        log_start: int | None,
        *,
        full_recovery: bool = False,
        info: TopicInfo | None = None,
        into: dict[tuple[str, int], Log] | None = None,
    ) -> Log:
        """Load (or create) one partition's log into ``into`` (default: the store's logs).
        ``info``: its topic's entry, when the topic is not published yet."""
        info = info if info is not None else self._topics[topic]
        directory = os.path.join(self.path, partition_dir_name(topic, partition))
        new = not self.fs.exists(directory)
        if new:
            self._created.append(directory)
        log, stats = load_log(
            self.fs,
            directory,
            topic,
            partition,
            self._configs[topic],
            self.clock,
            had_clean_shutdown=(self.had_clean_shutdown or new) and not full_recovery,
            recovery_point=recovery_point,
            log_start_offset=log_start,
            rng=self.rng,
            producer_id_expiration_ms=self.broker.producer_id_expiration_ms,
        )
        (self._logs if into is None else into)[(topic, partition)] = log
        if new or not self.fs.exists(os.path.join(directory, PARTITION_METADATA_FILE)):
            self._write_partition_metadata(directory, info.topic_id)
        write_partition_copy(self.fs, directory, info)
        if new:
            # The partition directory is an entry of the data directory: until that is fsynced
            # a power cut can take the directory, and every record fsynced in it, away.
            self.fs.sync_dir(self.path)
        self.load_stats[(topic, partition)] = stats
        return log

    def _write_partition_metadata(self, directory: str, topic_id: str) -> None:
        write_file_atomically(
            self.fs,
            os.path.join(directory, PARTITION_METADATA_FILE),
            partition_metadata_text(topic_id),
        )

    def _warn_foreign_entries(self) -> None:
        for name in self.fs.listdir(self.path):
            full = os.path.join(self.path, name)
            if not self.fs.is_dir(full):
                continue
            parsed = parse_partition_dir_name(name)
            if parsed is None and name.startswith("."):
                continue  # a tool's own hidden directory (the Spark sink's staging and journal)
            if name == METADATA_DIR:
                continue  # Kafka's KRaft metadata log: read for the catalog, never loaded
            special = parse_special_dir_name(name)
            if special is not None and special[2] == "stray":
                logger.warning(
                    "keeping %s: a stray partition directory set aside, not loaded", full
                )
            elif parsed is not None and parsed[0] not in self._topics:
                logger.warning(
                    "ignoring %s: its topic is not in %s and the directory has no %s to restore "
                    "it from (a create of %s renames it aside as a -stray directory)",
                    full, TOPICS_FILE, PARTITION_CATALOG_FILE, parsed[0],
                )  # fmt: skip
            elif parsed is None:
                logger.warning("ignoring %s: not a partition of a known topic", full)
            elif parsed[1] >= self._topics[parsed[0]].partitions:
                logger.warning("ignoring %s: the topic has fewer partitions", full)

    # --- topic metadata -----------------------------------------------------------------------
    def _load_topics(self) -> None:
        """The catalog (:func:`~compactlog.storage.topic_catalog.load_catalog`): the catalog
        file, or what is adopted without one, merged with Kafka's metadata log if present."""
        topics, changed = load_catalog(self.fs, self.path, self.broker)
        for name, info in topics.items():
            try:
                self._configs[name] = LogConfig.create(info.overrides, self.broker)
            except CompactlogError as exc:
                raise StorageError(
                    f"{os.path.join(self.path, TOPICS_FILE)} is damaged (topic {name!r}: {exc}); "
                    "refusing to open rather than guess which topics exist"
                ) from exc
            self._topics[name] = info
        if changed:
            self._save_topics()

    def _save_topics(self) -> None:
        write_topics_file(self.fs, self.path, self._topics)

    # --- topics -----------------------------------------------------------------------------
    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, Any] | None = None
    ) -> None:
        """Create a topic with ``partitions`` partitions (at most
        :data:`MAX_PARTITIONS_PER_CREATE`) and per-topic config overrides."""
        _check_str("name", name)
        validate_topic_name(name)
        if isinstance(partitions, bool) or not isinstance(partitions, numbers.Integral):
            raise InvalidArgumentError(
                f"partitions of topic {name!r} must be an int, not "
                f"{_type_name(partitions)} {partitions!r}"
            )
        partitions = int(partitions)  # a numpy integer would not go into the catalog's JSON
        if partitions < 1:
            raise InvalidPartitionsError(
                f"number of partitions must be at least 1, got {partitions}"
            )
        if partitions > MAX_PARTITIONS_PER_CREATE:
            raise InvalidPartitionsError(
                f"topic {name!r} cannot be created with {partitions} partitions: at most "
                f"{MAX_PARTITIONS_PER_CREATE} in one creation (Kafka's controller writes at most "
                f"{MAX_RECORDS_PER_USER_OP} metadata records per request)"
            )
        _check_mapping("config", config)
        limit = _open_files_limit()
        needed = FILES_PER_PARTITION * (len(self._logs) + partitions) + _SPARE_FILES
        if limit is not None and needed > limit:
            raise InvalidPartitionsError(
                f"topic {name!r} cannot be created with {partitions} partitions: with the "
                f"{len(self._logs)} partitions open, the store would keep at least "
                f"{needed - _SPARE_FILES} files open, and the limit of open files (ulimit -n) is "
                f"{limit} ({_SPARE_FILES} are kept for connections and other files)"
            )
        log_config = LogConfig.create(dict(config or {}), self.broker)
        with self._lock:
            self._check_open()
            if name in self._topics:
                raise TopicExistsError(f"topic {name!r} already exists")
            check_collision(name, self._topics)
            for partition in range(partitions):
                self._set_aside_stray(name, partition)
            info = TopicInfo(name, partitions, new_topic_id(), log_config.overrides)
            # The catalog file lists the topic first (a crash after it: the next open creates
            # the missing partitions), but the topic is published in memory only with all its
            # partitions loaded, so that a reader in another thread (the broker creates topics
            # off its event loop) never sees a topic whose logs are not there yet.
            write_topics_file(self.fs, self.path, {**self._topics, name: info})
            self._configs[name] = log_config
            loaded: dict[tuple[str, int], Log] = {}
            try:
                for partition in range(partitions):
                    if self._closing:
                        self._stop_creating(name, len(loaded), partitions)
                        break
                    self._load_partition(name, partition, None, None, info=info, into=loaded)
            finally:
                self._created = []
                self._logs.update(loaded)
                self._topics[name] = info

    @staticmethod
    def _stop_creating(name: str, loaded: int, partitions: int) -> None:
        logger.warning(
            "the store is closing: topic %s has %d of its %d partitions loaded; the catalog "
            "lists all %d, and the next open creates the others",
            name, loaded, partitions, partitions,
        )  # fmt: skip

    def create_partitions(self, name: str, count: int) -> None:
        """Grow topic ``name`` to ``count`` partitions (Kafka's CreatePartitions). Partitions are
        never removed: a ``count`` that is not larger than the current one raises
        :class:`InvalidPartitionsError`, with Kafka's messages. The existing partitions and
        their records are untouched; keyed records produced afterwards go to
        ``murmur2(key) % count``, as with Kafka."""
        _check_str("name", name)
        if isinstance(count, bool) or not isinstance(count, numbers.Integral):
            raise InvalidArgumentError(
                f"partition count of topic {name!r} must be an int, not "
                f"{_type_name(count)} {count!r}"
            )
        count = int(count)
        with self._lock:
            self._check_open()
            info = self._topic(name)
            current = info.partitions
            if count == current:
                raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
            if count < current:
                raise InvalidPartitionsError(
                    f"The topic {name} currently has {current} partition(s); {count} would not "
                    "be an increase."
                )
            added = count - current
            if added > MAX_RECORDS_PER_USER_OP:
                raise PolicyViolationError("Unable to perform excessively large batch operation.")
            limit = _open_files_limit()
            needed = FILES_PER_PARTITION * (len(self._logs) + added) + _SPARE_FILES
            if limit is not None and needed > limit:
                raise InvalidPartitionsError(
                    f"topic {name!r} cannot grow to {count} partitions: with the "
                    f"{len(self._logs)} partitions open, the store would keep at least "
                    f"{needed - _SPARE_FILES} files open, and the limit of open files "
                    f"(ulimit -n) is {limit}"
                )
            for partition in range(current, count):
                self._set_aside_stray(name, partition)
            grown = info._replace(partitions=count)
            # Published with the new partitions loaded, as create_topic does.
            write_topics_file(self.fs, self.path, {**self._topics, name: grown})
            loaded: dict[tuple[str, int], Log] = {}
            try:
                for partition in range(current, count):
                    if self._closing:
                        self._stop_creating(name, current + len(loaded), count)
                        break
                    self._load_partition(name, partition, None, None, info=grown, into=loaded)
            finally:
                self._created = []
                self._logs.update(loaded)
                self._topics[name] = grown
                self._round_robin.pop(name, None)
            # The old partitions' copies of the catalog entry learn the new count too.
            for partition in range(current):
                write_partition_copy(
                    self.fs,
                    os.path.join(self.path, partition_dir_name(name, partition)),
                    grown,
                )

    def _set_aside_stray(self, name: str, partition: int) -> None:
        """Before creating ``name``: a directory of that partition that the catalog does not
        know (a leftover, or a directory copied in) is renamed aside with Kafka's stray name
        (``<topic>-<partition>.<uuid>-stray``, as Kafka 3.7+ does with a log it does not own)
        and kept; the new topic gets a fresh directory."""
        old = os.path.join(self.path, partition_dir_name(name, partition))
        if not self.fs.exists(old):
            return
        stray = os.path.join(
            self.path, special_dir_name(name, partition, "stray", uuid.uuid4().hex)
        )
        self.fs.rename(old, stray)
        self.fs.sync_dir(self.path)
        logger.warning(
            "%s is not a partition of a known topic: renamed it to %s (kept, not loaded) before "
            "creating %s; to get its records back, delete the new topic and rename the directory "
            "back to %s, or copy its records with `compactlog consume`",
            old, stray, name, os.path.basename(old),
        )  # fmt: skip

    def delete_topic(self, name: str) -> None:
        """Delete a topic and all its data (an in-progress cleaning of it is aborted first)."""
        info = self._topic(name)
        for partition in range(info.partitions):
            for listener in self._removal_listeners:
                listener.abort_and_pause(name, partition)
        with self._lock:
            self._check_open()
            info = self._topic(name)
            # The copies go first: a crash before the catalog is saved leaves the topic in it
            # (its copies are written again at the next open), a crash after leaves directories
            # that nothing restores (they are ignored, and renamed aside by a later create).
            for partition in range(info.partitions):
                remove_partition_copy(
                    self.fs, os.path.join(self.path, partition_dir_name(name, partition))
                )
            config = self._configs.pop(name)
            del self._topics[name]
            try:
                self._save_topics()
            except StorageError:
                self._topics[name], self._configs[name] = info, config  # as in the file
                raise
            for partition in range(info.partitions):
                log = self._logs.pop((name, partition), None)
                if log is not None:
                    log.delete()
                self.load_stats.pop((name, partition), None)
                for listener in self._removal_listeners:
                    listener.forget_partition(name, partition)
            self.fs.sync_dir(self.path)

    def topics(self) -> list[str]:
        return sorted(self._topics)

    def topic_info(self, name: str) -> TopicInfo:
        return self._topic(name)

    def partitions(self, name: str) -> int:
        return self._topic(name).partitions

    def _topic(self, name: str) -> TopicInfo:
        _check_str("topic name", name)
        try:
            return self._topics[name]
        except KeyError:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}") from None

    def topic_config(self, name: str) -> LogConfig:
        self._topic(name)
        return self._configs[name]

    def describe_config(self, name: str) -> dict[str, str]:
        """Every topic config of ``name`` with its effective value, as Kafka describes it."""
        return self.topic_config(name).describe()

    def alter_config(
        self,
        name: str,
        set: Mapping[str, Any] | None = None,
        delete: Iterable[str] = (),
    ) -> None:
        """Set and delete topic config overrides; they take effect at once (Kafka's dynamic
        configs)."""
        _check_mapping("set", set)
        if isinstance(delete, str | bytes) or not isinstance(delete, Iterable):
            raise InvalidArgumentError(
                f"delete must be an iterable of config names, not {_type_name(delete)} "
                f"{_short(delete)}"
            )
        delete = list(delete)
        for i, config_name in enumerate(delete):
            _check_str(f"delete[{i}]", config_name)
        with self._lock:
            self._check_open()
            info = self._topic(name)
            config = self._configs[name].altered(dict(set or {}), list(delete))
            old_config = self._configs[name]
            self._topics[name] = info._replace(overrides=config.overrides)
            self._configs[name] = config
            try:
                self._save_topics()
            except StorageError:
                self._topics[name], self._configs[name] = info, old_config  # as in the file
                raise
            for partition in range(info.partitions):
                self._logs[(name, partition)].update_config(config)
                write_partition_copy(
                    self.fs,
                    os.path.join(self.path, partition_dir_name(name, partition)),
                    self._topics[name],
                )

    # --- logs -------------------------------------------------------------------------------
    def log(self, topic: str, partition: int) -> Log:
        """The :class:`Log` of a partition."""
        _check_str("topic", topic)
        _check_int("partition", partition)
        self._check_open()
        try:
            return self._logs[(topic, partition)]
        except KeyError:
            self._topic(topic)
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {partition}"
            ) from None

    def logs(self) -> dict[tuple[str, int], Log]:
        return dict(self._logs)

    def salvage(self, topic: str, partition: int) -> LoadStats:
        """Re-read every batch of a partition, move each damaged range to a quarantine file and
        keep every valid batch with its offset (``compactlog salvage``).

        This is the operator's answer to damage the store found and left in place (a WARN at
        open names it; reads that reach it fail): the partition is closed and loaded again
        with a recovery of every segment from its first offset, which quarantines and cuts
        damage exactly as recovery after an unclean shutdown does. Returns what that load did
        (``quarantined``: the ranges now in quarantine). Run it while no cleaning of the
        partition is in progress (the CLI opens the data directory alone).
        """
        with self._lock:
            old = self.log(topic, partition)
            log_start = old.log_start_offset
            old.close()
            del self._logs[(topic, partition)]
            self._load_partition(topic, partition, 0, log_start, full_recovery=True)
            return self.load_stats[(topic, partition)]

    def _check_open(self) -> None:
        if self._closed:
            raise CompactlogError("the store is closed")

    # --- appends ------------------------------------------------------------------------------
    def append(
        self,
        topic: str,
        partition: int,
        records: Sequence[RecordInput],
        timestamp: int | None = None,
        compression: str | Compression = "none",
    ) -> int:
        """Append ``records`` as one batch; returns the offset of the first record."""
        log = self.log(topic, partition)
        _check_records(records)
        _check_int("timestamp", timestamp, optional=True)
        _check_compression(compression)
        if not records:
            raise InvalidRecordError("an append needs at least one record")
        if log.config.compact and any(record[0] is None for record in records):
            i = next(i for i, record in enumerate(records) if record[0] is None)
            raise InvalidRecordError(
                "Compacted topic cannot accept message without key in topic partition "
                f"{log.name}. (record {i} of the batch)"
            )
        codec = (
            compression
            if isinstance(compression, Compression)
            else Compression.from_name(compression)
        )
        ts = self.clock() if timestamp is None else timestamp
        batch = build_batch(records, timestamps=ts, compression=codec)
        return log.append(batch, verify_crc=False, keys_checked=True).first_offset

    def append_batch(
        self, topic: str, partition: int, data: bytes, *, from_client: bool = True
    ) -> int:
        """Append raw record batches (as a producer sends them); returns the first offset (of
        the earlier batch, for an idempotent producer's retry: see :meth:`append_batch_info`)."""
        _check_bytes("data", data, optional=False)
        return self.log(topic, partition).append(data, from_client=from_client).first_offset

    def append_batch_info(
        self, topic: str, partition: int, data: bytes, *, from_client: bool = True
    ) -> ValidatedAppend:
        """:meth:`append_batch` with everything a produce response needs: first and last
        offset, log append time, and ``duplicate`` when the batch was an idempotent producer's
        retry of a batch already in the log (then those are the earlier batch's, as Kafka
        answers, with no error).

        Idempotent batches are checked against the partition's producer state: an old epoch
        raises ``InvalidProducerEpochError`` (47), a sequence gap ``OutOfOrderSequenceError``
        (45); transactional batches raise ``InvalidRequestError`` (42).
        """
        _check_bytes("data", data, optional=False)
        return self.log(topic, partition).append(data, from_client=from_client)

    def producer_state(self, topic: str, partition: int) -> list[ProducerState]:
        """The idempotent producers the partition knows (id, epoch, last sequence, last offset,
        last timestamp, ...), by producer id."""
        return self.log(topic, partition).producer_state()

    def remove_expired_producers(self, now: int | None = None) -> int:
        """Forget, in every partition, the producers idle for ``producer.id.expiration.ms``
        (the periodic task runs this); returns how many were removed."""
        _check_int("now", now, optional=True)
        now = self.clock() if now is None else now
        return sum(log.remove_expired_producers(now) for log in list(self._logs.values()))

    def produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        timestamp: int | None = None,
        partition: int | None = None,
        compression: str | Compression = "none",
    ) -> tuple[int, int]:
        """Append one record where Kafka's default partitioner sends it; ``(partition, offset)``.

        Keyed records go to ``murmur2(key) % partitions`` as from the Java client. Keyless
        records go round-robin over the partitions.
        """
        _check_str("topic", topic)
        _check_bytes("key", key)
        _check_bytes("value", value)
        _check_headers("headers", headers)
        _check_int("timestamp", timestamp, optional=True)
        _check_int("partition", partition, optional=True)
        _check_compression(compression)
        count = self.partitions(topic)
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, count)
            else:
                with self._lock:
                    cycle = self._round_robin.setdefault(topic, itertools.cycle(range(count)))
                    partition = next(cycle)
        record: RecordInput = (key, value, tuple(headers or ()))
        return partition, self.append(
            topic, partition, [record], timestamp=timestamp, compression=compression
        )

    def roll(self, topic: str, partition: int) -> bool:
        """Start a new active segment at the log end offset, as Kafka's ``UnifiedLog.roll``, so
        that the records of the one before it become cleanable. False when the active segment
        is empty: it already starts at the log end offset, and nothing changes."""
        log = self.log(topic, partition)
        before = log.local_log.active_segment
        return log.roll() is not before

    # --- reads --------------------------------------------------------------------------------
    def read(self, topic: str, partition: int, offset: int = 0) -> Iterator[Record]:
        """Records with offsets >= ``offset`` in offset order (control records are skipped).

        Offsets removed by compaction read as the next remaining record. An offset below the log
        start offset or above the log end offset raises ``OffsetOutOfRangeError`` at once.
        """
        _check_int("offset", offset)
        log = self.log(topic, partition)
        batches = log.iter_batches(offset)
        return _records_from(batches, offset, log.name)

    def log_start_offset(self, topic: str, partition: int) -> int:
        return self.log(topic, partition).log_start_offset

    def log_end_offset(self, topic: str, partition: int) -> int:
        return self.log(topic, partition).log_end_offset

    def segments(self, topic: str, partition: int) -> list[SegmentInfo]:
        return [
            SegmentInfo(s.base_offset, s.size, s.log_path)
            for s in self.log(topic, partition).segments()
        ]

    # --- retention ----------------------------------------------------------------------------
    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Raise the log start offset (Kafka's DeleteRecords); returns the new log start offset."""
        _check_int("before_offset", before_offset)
        log = self.log(topic, partition)
        result = log.delete_records(before_offset)
        self.write_log_start_offset_checkpoint()
        return result

    def run_retention(self, now: int | None = None) -> int:
        """One run of Kafka's periodic retention task over ``delete``-only topics.

        Compacted topics (``compact`` and ``compact,delete``) get their retention from the
        cleaner, as in Kafka. Returns the number of segments deleted.
        """
        _check_int("now", now, optional=True)
        with self._lock:
            self._check_open()
            logs = [
                log for log in self._logs.values() if not log.config.compact and log.offline is None
            ]
        deleted = 0
        for log in logs:
            deleted += log.delete_old_segments(now)
        if deleted:
            self.write_log_start_offset_checkpoint()
        return deleted

    # --- durability ---------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync every log and write the recovery-point checkpoint.

        An offline log, or one whose fsync fails now (it goes offline), does not stop the
        others: they are flushed and the checkpoint written, then a :class:`StorageError`
        names every log that is not durable."""
        failed: list[StorageError] = []
        for log in list(self._logs.values()):
            try:
                log.flush()
            except StorageError as exc:
                failed.append(exc)
        self.write_recovery_point_checkpoint()
        if failed:
            raise StorageError(
                f"{len(failed)} log(s) of {self.path} could not be flushed: "
                + "; ".join(str(exc) for exc in failed)
            ) from failed[0]

    def offline_logs(self) -> dict[tuple[str, int], StorageError]:
        """The logs that refuse writes since an I/O error they could not undo, and why."""
        return {
            key: log.offline for key, log in list(self._logs.items()) if log.offline is not None
        }

    def write_recovery_point_checkpoint(self) -> None:
        with self._lock:
            entries = {k: log.recovery_point for k, log in self._logs.items()}
        self.recovery_point_checkpoint.write({**self._carried[0], **entries})

    def write_log_start_offset_checkpoint(self) -> None:
        with self._lock:
            entries = {k: log.log_start_offset for k, log in self._logs.items()}
        self.log_start_offset_checkpoint.write({**self._carried[1], **entries})

    def _not_loaded(self, entries: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The checkpoint entries of partition directories this store does not load (another
        tool's, or a topic it does not know): kept as they are, so that Kafka, opening the
        directory again, finds its recovery points and log start offsets."""
        return {
            tp: offset
            for tp, offset in entries.items()
            if tp not in self._logs
            and is_valid_topic_name(tp[0])
            and tp[1] >= 0
            and self.fs.is_dir(os.path.join(self.path, f"{tp[0]}-{tp[1]}"))
        }

    def begin_close(self) -> None:
        """Announce :meth:`close`: a topic creation in progress (in another thread) stops after
        the partition it is loading; the catalog already lists the whole topic, and the next
        open creates the partitions not loaded. Everything else goes on until :meth:`close`."""
        self._closing = True

    def close(self) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown marker."""
        if self._closed:
            return
        self._closing = True
        with self._lock:
            try:
                failed: list[StorageError] = []
                for log in self._logs.values():
                    try:
                        log.close()
                    except StorageError as exc:  # the log is offline and closed now
                        failed.append(exc)
                self.write_recovery_point_checkpoint()
                self.write_log_start_offset_checkpoint()
                offline = self.offline_logs()
                if failed or offline:
                    for key, reason in offline.items():
                        logger.warning(
                            "%s: no clean-shutdown marker written, %s-%d is offline (%s); the "
                            "next open recovers it from its files",
                            self.path, key[0], key[1], reason,
                        )  # fmt: skip
                    if failed:
                        raise StorageError(
                            f"closing {self.path} failed: " + "; ".join(map(str, failed))
                        ) from failed[0]
                    return
                marker = os.path.join(self.path, CLEAN_SHUTDOWN_FILE)
                handle = self.fs.open(marker, create=True)
                try:
                    handle.truncate(0)
                    handle.write_at(0, clean_shutdown_marker(self._broker_epoch))
                    handle.sync()
                finally:
                    handle.close()
                self.fs.sync_dir(self.path)
            finally:
                self._closed = True
                self._release()

    def abandon(self) -> None:
        """Drop the store without a clean shutdown (tests: what a crash leaves on disk)."""
        for log in self._logs.values():
            log.close_without_flush()
        self._closed = True
        self._release()

    def _release(self) -> None:
        if self._owns_lock and self._dir_lock is not None:
            self._dir_lock.release()

    def flush_due_logs(self) -> None:
        """Flush the logs whose ``flush.ms`` has passed (Kafka's periodic flush task)."""
        now = self.clock()
        failed: list[StorageError] = []
        for log in list(self._logs.values()):
            try:
                log.flush_if_due(now)  # an offline log is skipped
            except StorageError as exc:  # that log went offline; the others are flushed
                failed.append(exc)
        if failed:
            raise StorageError("; ".join(map(str, failed))) from failed[0]

    def remove_deleted_files(self) -> None:
        """Remove the ``.deleted`` files whose ``file.delete.delay.ms`` has passed."""
        now = self.clock()
        failed: list[StorageError] = []
        for log in list(self._logs.values()):
            if log.offline is not None:
                continue  # its files stay as they are until the store is reopened
            try:
                log.flush_pending()
                log.remove_deleted_files(now)
            except StorageError as exc:
                failed.append(exc)
        if failed:
            raise StorageError("; ".join(map(str, failed))) from failed[0]

    def add_removal_listener(self, listener: PartitionRemovalListener) -> None:
        """Tell ``listener`` before and after a partition is removed (see the protocol)."""
        self._removal_listeners.append(listener)


def _remove_tree(fs: FileSystem, path: str) -> None:
    for name in fs.listdir(path):
        full = os.path.join(path, name)
        if fs.is_dir(full):
            _remove_tree(fs, full)
        else:
            fs.remove(full)
    fs.rmdir(path)


# Batches are decoded in runs of up to this many bytes: one decode_columns call per run keeps
# the per-batch Python work out of the record loop without holding much memory.
_DECODE_RUN_BYTES = 1 << 20


def _records_from(batches: Iterator[FileBatch], offset: int, name: str) -> Iterator[Record]:
    """The records of ``batches``, decoded a run of about 1 MiB at a time; a damaged batch
    (raised by the walk, or failing to decode) comes after every record before it."""
    run: list[memoryview] = []
    run_bytes = 0
    try:
        for batch in batches:
            header = batch.header
            if header.is_control or header.records_count == 0:
                continue  # consumers never see control records
            run.append(batch.data)
            run_bytes += len(batch.data)
            if run_bytes >= _DECODE_RUN_BYTES:
                yield from _decode_run(run, offset, name)
                run, run_bytes = [], 0
    except CorruptRecordError:
        if run:
            yield from _decode_run(run, offset, name)
        raise
    if run:
        yield from _decode_run(run, offset, name)


def _decode_run(run: list[memoryview], offset: int, name: str) -> Iterator[Record]:
    data = run[0] if len(run) == 1 else b"".join(run)
    try:
        records = decode_columns(data).to_records()
    except CorruptRecordError as exc:
        if len(run) > 1:  # the batches before the bad one are delivered first
            for batch in run:
                yield from _decode_run([batch], offset, name)
        raise CorruptRecordError(f"{name}: {exc}") from exc
    if records and records[0].offset < offset:
        records = [r for r in records if r.offset >= offset]
    yield from records
