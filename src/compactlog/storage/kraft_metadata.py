"""Kafka's KRaft metadata log, read for its topic catalog (names, ids, partitions, configs).

A Kafka 3.x/4.x log directory that hosts a controller holds the cluster's metadata as a log of
its own, ``__cluster_metadata-0``. It is not a topic: Kafka's ``LogManager`` skips it, and so does
compactlog, which only ever *reads* it (files are opened ``O_RDONLY``) to learn the topics whose
partition directories sit beside it. :mod:`compactlog.storage.topic_catalog` decides what the
store does with what this module reads.

Layout of the metadata log directory (what Kafka 4.4 writes)::

    __cluster_metadata-0/
      00000000000000000000-0000000000.checkpoint   snapshot: <end offset>-<epoch>.checkpoint
      00000000000000000000.log                     segments, as any log (.index, .timeindex)
      00000000000000000156.snapshot                producer state (empty)
      quorum-state  leader-epoch-checkpoint  partition.metadata

Theory of operation of :func:`read_kraft_metadata`:

* **Where to start.** The snapshot with the largest end offset (files ending ``.checkpoint``
  exactly; ``.checkpoint.part`` and ``.checkpoint.deleted`` are Kafka's temporaries) holds the
  whole state below its end offset. Its file is a sequence of record batches, as a ``.log``.
  Then the log segments from that offset on are replayed; records below it are skipped. Without
  a snapshot the log is replayed from its first segment.
* **Batches.** Control batches (snapshot header and footer, leader changes, voter sets) carry no
  metadata and are skipped. The walk stops at the first batch that is torn or fails its CRC, as
  Kafka's recovery would truncate there.
* **Records.** Each record value is a frame: unsigned varints *frame version* (1), *api key* and
  *record version*, then the record in the flexible-version message encoding (compact strings,
  16-byte UUIDs, tagged fields at the end). Only these are decoded, by their leading fields,
  which every known version shares:

  ==  ======================  ====================================================
  2   TopicRecord             Name (compact string), TopicId (uuid)
  3   PartitionRecord         PartitionId (int32), TopicId (uuid)
  4   ConfigRecord            ResourceType (int8: 2 topic, 4 broker), ResourceName,
                              Name (compact strings), Value (nullable: null deletes)
  9   RemoveTopicRecord       TopicId (uuid); the topic's configs go with it
  23  BeginTransactionRecord  records up to the matching end are applied together
  24  EndTransactionRecord
  25  AbortTransactionRecord  the records since the begin are dropped
  ==  ======================  ====================================================

  Every other record type is skipped. A metadata transaction still open where the log ends is
  not applied (Kafka's loader would wait for its end).
* **What is not known here.** Records past the quorum's high watermark (which Kafka does not
  store) are read like the others. Kafka's static broker settings (``server.properties``) are not
  in the log; dynamic ones (``kafka-configs --entity-type brokers``) are: the cluster-wide
  default (resource name ``""``) and each broker's own (resource name = its ``node.id``, read from
  ``meta.properties``).

Every malformed number or length raises :class:`~compactlog.errors.CorruptRecordError` naming the
file, the offset and the field.
"""

from __future__ import annotations

import base64
import os
import re
import struct
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from compactlog.errors import CorruptRecordError, StorageError
from compactlog.records import compute_crc, decode_columns
from compactlog.records.varint import decode_unsigned_varint
from compactlog.storage.file_records import FileBatch, iter_file_batches
from compactlog.storage.fs import FileSystem, ReadOnlyFileSystem

#: Kafka's ``Topic.CLUSTER_METADATA_TOPIC_NAME`` and the directory of its only partition.
METADATA_TOPIC: Final = "__cluster_metadata"
METADATA_DIR: Final = f"{METADATA_TOPIC}-0"
META_PROPERTIES: Final = "meta.properties"

#: ``<20-digit end offset>-<10-digit epoch>.checkpoint`` (Kafka's ``Snapshots`` file names).
_SNAPSHOT_NAME: Final = re.compile(r"([0-9]{20})-([0-9]{10})\.checkpoint")
_SEGMENT_NAME: Final = re.compile(r"([0-9]{20})\.log")

#: The only frame version Kafka writes (``AbstractApiMessageSerde``); 0 was KRaft's 2.8 preview.
FRAME_VERSION: Final = 1

TOPIC_RECORD: Final = 2
PARTITION_RECORD: Final = 3
CONFIG_RECORD: Final = 4
REMOVE_TOPIC_RECORD: Final = 9
BEGIN_TRANSACTION_RECORD: Final = 23
END_TRANSACTION_RECORD: Final = 24
ABORT_TRANSACTION_RECORD: Final = 25

#: ``ConfigResource.Type`` ids.
TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4

_INT32: Final = struct.Struct(">i")
_UUID_SIZE: Final = 16


def render_uuid(raw: bytes) -> str:
    """A 16-byte UUID as Kafka renders ``Uuid``: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


#: The ids Kafka's ``Uuid.randomUuid`` never hands out: zero and one (the metadata topic's id).
_RESERVED_UUIDS: Final = frozenset({bytes(16), bytes(15) + b"\x01"})


def random_uuid() -> str:
    """A new cluster or topic id, drawn as Kafka's ``Uuid.randomUuid`` draws one.

    Kafka redraws until the rendering has no ``-``: an id such as ``-Xk...`` given to a
    command-line tool (``kafka-storage format -t``) would be read as an option. It also skips the
    reserved ids.
    """
    while True:
        raw = uuid.uuid4().bytes
        text = render_uuid(raw)
        if "-" not in text and raw not in _RESERVED_UUIDS:
            return text


@dataclass(frozen=True)
class KraftTopic:
    """A topic as Kafka's metadata describes it."""

    name: str
    topic_id: str
    partitions: int
    #: The topic's config overrides (ConfigRecords of the topic resource).
    configs: Mapping[str, str]


@dataclass(frozen=True)
class KraftMetadata:
    """The topic catalog of a KRaft metadata log (see the module docstring)."""

    #: The metadata log directory.
    path: str
    topics: Mapping[str, KraftTopic]
    #: Dynamic broker configs by resource name: ``""`` the cluster-wide default, else a node id.
    broker_configs: Mapping[str, Mapping[str, str]]
    #: ``node.id`` from the log directory's ``meta.properties`` (None when absent).
    node_id: int | None
    #: The snapshot read first, ``(end offset, epoch)``; None when there was none.
    snapshot: tuple[int, int] | None
    #: The offset after the last record replayed.
    end_offset: int

    def dynamic_broker_configs(self) -> dict[str, str]:
        """The dynamic broker configs that apply to this node: its own over the cluster's."""
        merged = dict(self.broker_configs.get("", {}))
        if self.node_id is not None:
            merged.update(self.broker_configs.get(str(self.node_id), {}))
        return merged


# --------------------------------------------------------------------------------------------
# Decoding one record value


class _Reader:
    """Reads the flexible-version fields of one metadata record; every failure is corrupt."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.pos = 0
        self.where = where

    def _fail(self, what: str) -> CorruptRecordError:
        return CorruptRecordError(f"{self.where}: {what} at byte {self.pos} of the record value")

    def uvarint(self, what: str) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.data, self.pos)
        except CorruptRecordError as exc:
            raise self._fail(f"bad {what} ({exc})") from exc
        return value

    def int8(self, what: str) -> int:
        if self.pos + 1 > len(self.data):
            raise self._fail(f"truncated {what}")
        value = self.data[self.pos]
        self.pos += 1
        return value - 256 if value > 127 else value

    def int32(self, what: str) -> int:
        if self.pos + 4 > len(self.data):
            raise self._fail(f"truncated {what}")
        (value,) = _INT32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def uuid(self, what: str) -> bytes:
        if self.pos + _UUID_SIZE > len(self.data):
            raise self._fail(f"truncated {what}")
        value = self.data[self.pos : self.pos + _UUID_SIZE]
        self.pos += _UUID_SIZE
        return value

    def compact_string(self, what: str, *, nullable: bool = False) -> str | None:
        length = self.uvarint(f"{what} length") - 1
        if length < 0:
            if nullable:
                return None
            raise self._fail(f"null {what}, which is not nullable")
        if self.pos + length > len(self.data):
            raise self._fail(f"{what} of {length} bytes past the end")
        raw = self.data[self.pos : self.pos + length]
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._fail(f"{what} is not UTF-8") from exc

    def string(self, what: str) -> str:
        value = self.compact_string(what)
        assert value is not None
        return value


@dataclass
class _State:
    """The catalog being replayed: topics by id, configs by resource."""

    names: dict[bytes, str] = field(default_factory=dict)
    partitions: dict[bytes, set[int]] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Changes of the open metadata transaction (None: no transaction open).
    pending: list[Callable[[], None]] | None = None

    def apply(self, change: Callable[[], None]) -> None:
        if self.pending is None:
            change()
        else:
            self.pending.append(change)

    def add_topic(self, name: str, topic_id: bytes) -> None:
        self.names[topic_id] = name
        self.partitions.setdefault(topic_id, set())

    def add_partition(self, topic_id: bytes, partition: int) -> None:
        if topic_id in self.names:
            self.partitions[topic_id].add(partition)

    def remove_topic(self, topic_id: bytes) -> None:
        name = self.names.pop(topic_id, None)
        self.partitions.pop(topic_id, None)
        if name is not None:
            self.topic_configs.pop(name, None)

    def set_config(self, resource_type: int, resource: str, name: str, value: str | None) -> None:
        table = self.topic_configs if resource_type == TOPIC_RESOURCE else self.broker_configs
        configs = table.setdefault(resource, {})
        if value is None:
            configs.pop(name, None)
        else:
            configs[name] = value


def _replay_record(state: _State, value: bytes, where: str) -> None:
    r = _Reader(value, where)
    frame = r.uvarint("frame version")
    if frame != FRAME_VERSION:
        raise CorruptRecordError(
            f"{where}: frame version {frame}; only {FRAME_VERSION} is known (0 was the KRaft "
            "preview of Kafka 2.8)"
        )
    api_key = r.uvarint("record type")
    r.uvarint("record version")
    if api_key == TOPIC_RECORD:
        name = r.string("topic name")
        topic_id = r.uuid("topic id")
        state.apply(lambda: state.add_topic(name, topic_id))
    elif api_key == PARTITION_RECORD:
        partition = r.int32("partition id")
        topic_id = r.uuid("topic id")
        if partition < 0:
            raise CorruptRecordError(f"{where}: negative partition id {partition}")
        state.apply(lambda: state.add_partition(topic_id, partition))
    elif api_key == CONFIG_RECORD:
        resource_type = r.int8("resource type")
        resource = r.string("resource name")
        config = r.string("config name")
        config_value = r.compact_string("config value", nullable=True)
        if resource_type in (TOPIC_RESOURCE, BROKER_RESOURCE):
            state.apply(lambda: state.set_config(resource_type, resource, config, config_value))
    elif api_key == REMOVE_TOPIC_RECORD:
        topic_id = r.uuid("topic id")
        state.apply(lambda: state.remove_topic(topic_id))
    elif api_key == BEGIN_TRANSACTION_RECORD:
        state.pending = []
    elif api_key == END_TRANSACTION_RECORD:
        pending, state.pending = state.pending or [], None
        for change in pending:
            change()
    elif api_key == ABORT_TRANSACTION_RECORD:
        state.pending = None


# --------------------------------------------------------------------------------------------
# Walking the files


def _replay_file(fs: FileSystem, path: str, state: _State, start_offset: int) -> int:
    """Replay the records at offsets >= ``start_offset``; returns the offset after the last
    batch read (``start_offset`` when none was)."""
    end = start_offset
    handle = fs.open(path)
    try:
        for batch in _valid_batches(iter_file_batches(handle)):
            header = batch.header
            if header.last_offset < start_offset:
                continue
            end = max(end, header.next_offset)
            if header.is_control or header.records_count == 0:
                continue
            for record in decode_columns(batch.data, verify_crc=False).to_records():
                if record.offset < start_offset or record.value is None:
                    continue
                _replay_record(state, record.value, f"{path}: offset {record.offset}")
    finally:
        handle.close()
    return end


def _valid_batches(batches: Iterator[FileBatch]) -> Iterator[FileBatch]:
    """The batches up to the first unreadable one: bad framing or a CRC that does not match
    (Kafka's recovery would truncate the log there)."""
    try:
        for batch in batches:
            if compute_crc(batch.data, 0, len(batch.data)) != batch.header.crc:
                return
            yield batch
    except CorruptRecordError:
        return


def _snapshots(names: list[str]) -> list[tuple[int, int, str]]:
    found = []
    for name in names:
        match = _SNAPSHOT_NAME.fullmatch(name)
        if match is not None:
            found.append((int(match.group(1)), int(match.group(2)), name))
    return sorted(found)


def _segments(names: list[str]) -> list[tuple[int, str]]:
    return sorted(
        (int(match.group(1)), name)
        for name in names
        if (match := _SEGMENT_NAME.fullmatch(name)) is not None
    )


def read_node_id(fs: FileSystem, data_dir: str) -> int | None:
    """``node.id`` of ``meta.properties`` (a Java properties file), None if absent or unset."""
    path = os.path.join(data_dir, META_PROPERTIES)
    if not fs.exists(path):
        return None
    for line in fs.read_file(path).decode("latin-1").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.strip() == "node.id":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def has_metadata_log(fs: FileSystem, data_dir: str) -> bool:
    """Whether ``data_dir`` holds Kafka's metadata log directory."""
    return fs.is_dir(os.path.join(data_dir, METADATA_DIR))


def read_kraft_metadata(data_dir: str, fs: FileSystem | None = None) -> KraftMetadata | None:
    """The topic catalog of the metadata log in ``data_dir``; None when there is no metadata
    log, or it holds neither a snapshot nor a segment.

    Reads only, through ``fs`` (default: the real filesystem opened ``O_RDONLY``). Raises
    :class:`~compactlog.errors.CompactlogError` (a :class:`CorruptRecordError` for a record
    that cannot be decoded, a :class:`~compactlog.errors.StorageError` for a file that cannot
    be read).
    """
    fs = fs or ReadOnlyFileSystem()
    directory = os.path.join(data_dir, METADATA_DIR)
    if not fs.is_dir(directory):
        return None
    names = fs.listdir(directory)
    snapshots = _snapshots(names)
    segments = _segments(names)
    if not snapshots and not segments:
        return None
    first = segments[0][0] if segments else 0
    if (snapshots[-1][0] if snapshots else 0) < first:
        raise StorageError(
            f"{directory}: the log starts at offset {first} but no snapshot reaches it; the "
            "metadata below that offset is missing"
        )
    state = _State()
    snapshot: tuple[int, int] | None = None
    start = 0
    if snapshots:
        end_offset, epoch, name = snapshots[-1]
        snapshot = (end_offset, epoch)
        _replay_file(fs, os.path.join(directory, name), state, 0)
        state.pending = None  # a snapshot is whole; nothing in it stays open
        start = end_offset
    end = start
    for i, (base, name) in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1][0] <= start:
            continue  # every record of this segment is below the snapshot
        end = max(end, _replay_file(fs, os.path.join(directory, name), state, max(start, base)))
    topics = {}
    for topic_id, name in state.names.items():
        partitions = state.partitions.get(topic_id, set())
        topics[name] = KraftTopic(
            name,
            render_uuid(topic_id),
            max(partitions) + 1 if partitions else 0,
            dict(state.topic_configs.get(name, {})),
        )
    return KraftMetadata(
        path=directory,
        topics=dict(sorted(topics.items())),
        broker_configs={k: dict(v) for k, v in state.broker_configs.items()},
        node_id=read_node_id(fs, data_dir),
        snapshot=snapshot,
        end_offset=end,
    )


__all__ = [
    "METADATA_DIR",
    "METADATA_TOPIC",
    "KraftMetadata",
    "KraftTopic",
    "has_metadata_log",
    "read_kraft_metadata",
    "read_node_id",
    "render_uuid",
]
