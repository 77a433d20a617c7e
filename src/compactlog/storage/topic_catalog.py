"""The topic catalog of a data directory: ``compactlog-topics.json``, and where it comes from
when a store opens a directory without one (a Kafka broker's log directory).

Kafka keeps topic metadata in its controller, as records of the KRaft metadata log
``__cluster_metadata-0`` (read by :mod:`compactlog.storage.kraft_metadata`); compactlog keeps it
in ``compactlog-topics.json``, written atomically::

    {"version": 1, "topics": {"orders": {"partitions": 3, "topic_id": "q7IBI0VSQZ6j7TvYNj0RyA",
                                         "config": {"cleanup.policy": "compact"},
                                         "kraft_config": {"cleanup.policy": "compact"}}}}

``kraft_config`` is present only for topics that came from Kafka's metadata: Kafka's overrides as
of the last time the store read them (the base of the merge below). A topic has at most
:data:`MAX_PARTITIONS_PER_TOPIC` partitions; a file with more is refused as damaged, before
anything is created.

Each partition directory keeps a copy of its topic's entry, with the topic's name, in
``compactlog-topic.json`` (:data:`PARTITION_CATALOG_FILE`, written atomically by the store), so
that losing the catalog file, or an entry of it, never loses a topic's configs.

Theory of operation of :func:`load_catalog`, run by every :meth:`Store.open
<compactlog.storage.store.Store.open>`:

* **No catalog file, and a metadata log.** Every topic the metadata knows that has a partition
  directory here is adopted with Kafka's topic id, partition count and config overrides, and
  the store says so in one log line. The metadata log itself is not a topic. Kafka's dynamic
  broker defaults (``kafka-configs --entity-type brokers --entity-default``, and this node's
  own) that supply a topic config (``log.cleanup.policy`` for ``cleanup.policy``, ...) and differ
  from compactlog's built-in default become overrides of every adopted topic, since the catalog
  has no broker level: a topic compacted by a cluster-wide default stays compacted. A config
  compactlog does not know, or whose value it refuses, is left out with a warning; the rest are
  kept. Kafka's static ``server.properties`` is not in the log: pass those settings to
  ``Store.open`` as before.
  A topic whose partition directories keep a copy of its entry with Kafka's topic id is taken
  from the copy, merged with the metadata as on a later open (so a ``configs alter`` made
  through compactlog stays).
* **No catalog file otherwise**, and for partition directories whose topic the metadata does
  not know: a topic is restored from its directories' copies (the lowest partition's readable
  one), with a warning. A topic with no copy either is adopted with **retention disabled**
  (:data:`RETENTION_DISABLED`) and the topic id of its ``partition.metadata`` (else a new one),
  with a warning that says how to set its configs: its configs are unknown, and the default
  ``delete`` policy would delete a compacted topic's records dated more than seven days ago at
  the next retention run. Disabled retention keeps every record and the store available (refusing
  to open would take every other topic down with it); ``compact`` is never guessed, since
  compacting a topic that was not compacted would drop records too. A Kafka log directory
  (``meta.properties``) whose metadata log lives elsewhere (Kafka's ``metadata.log.dir``,
  another log directory) gets a warning that its configs are unknown.
* **Later opens.** The catalog file is the catalog. A topic with partition directories here that
  the file lacks is restored from their copies, with a warning (the file is rewritten with it);
  without a copy its directories are ignored. When a metadata log is present it is read again,
  and where the two disagree:

  - a topic the metadata knows, with a partition directory here, that the file lacks (Kafka
    created it since): adopted as above;
  - the same name with another topic id: if the topic's partition directories carry Kafka's
    id in ``partition.metadata``, the data on disk is Kafka's topic (the file's entry was made
    by an older compactlog that adopted it with default configs, or Kafka deleted and recreated
    the topic) and Kafka's entry replaces the file's; otherwise the file's entry stays;
  - the same topic: the partition count is the larger of the two (Kafka only adds partitions);
    a config Kafka changed since the last open (its value differs from ``kraft_config``) takes
    Kafka's value, every other config keeps the file's value (so ``configs alter`` through
    compactlog stays);
  - a topic only the file knows stays: compactlog never drops a topic because Kafka's metadata
    lacks it (compactlog created it, or Kafka deleted it and left the directories).

  A compaction policy therefore changes only by an explicit alteration on one side; a topic the
  metadata knows never falls back to default configs.
* **A metadata log that cannot be read** makes a first open fail (adopting the topics with
  default configs could turn a compacted topic into one that retention deletes); on later opens
  the catalog file is used as it is, with a warning.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
from collections.abc import Mapping
from typing import Final, NamedTuple

from compactlog.errors import CompactlogError, ConfigError, StorageError
from compactlog.storage.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    LogConfig,
    render_value,
)
from compactlog.storage.fs import FileSystem, write_file_atomically
from compactlog.storage.kraft_metadata import (
    META_PROPERTIES,
    METADATA_DIR,
    METADATA_TOPIC,
    KraftMetadata,
    KraftTopic,
    has_metadata_log,
    random_uuid,
    read_kraft_metadata,
    render_uuid,
)
from compactlog.storage.topic_names import (
    parse_partition_dir_name,
    partition_dir_name,
    validate_topic_name,
)

logger = logging.getLogger("compactlog.storage")

TOPICS_FILE: Final = "compactlog-topics.json"
PARTITION_METADATA_FILE: Final = "partition.metadata"
TOPICS_FILE_VERSION: Final = 1
#: The copy of its topic's catalog entry that each partition directory keeps. Kafka's log
#: loader reads only the files it knows by suffix (``.log``, the indexes, ``.snapshot``,
#: ``.deleted``, ``.cleaned``, ``.swap``) and by name (``partition.metadata``,
#: ``leader-epoch-checkpoint``) and leaves any other file alone, and no Kafka file name starts
#: with ``compactlog-``, so a Kafka broker opens the directory as before.
PARTITION_CATALOG_FILE: Final = "compactlog-topic.json"
#: The most partitions a topic may have. Kafka has no per-topic limit, but its controller
#: refuses a single operation that would write more than 10,000 metadata records
#: (``QuorumController.MAX_RECORDS_PER_USER_OP``), and creating a topic writes one record per
#: partition: a topic is created with fewer than 10,000 partitions in one request. A catalog
#: entry above this is damage (``partitions: 10**9`` would make an open create directories until
#: the process runs out of file descriptors), and is refused before anything is created.
MAX_PARTITIONS_PER_TOPIC: Final = 10_000
#: The overrides of a topic adopted with neither a catalog entry, a partition directory copy
#: nor Kafka's metadata: its configs are unknown, so retention is disabled (nothing is deleted
#: by time or size, nothing is compacted away) until an operator sets the topic's real configs.
RETENTION_DISABLED: Final = {"retention.bytes": "-1", "retention.ms": "-1"}

#: Broker settings that supply a topic config's default (``log.cleanup.policy``, ...).
_TOPIC_SYNONYMS: Final = frozenset(s.name for d in TOPIC_CONFIGS.values() for s in d.synonyms)


class TopicInfo(NamedTuple):
    name: str
    partitions: int
    topic_id: str
    overrides: dict[str, str]
    #: Kafka's overrides of the topic when the store last read its metadata log (None: the
    #: topic did not come from Kafka's metadata).
    kraft_config: dict[str, str] | None = None


def is_valid_uuid(text: str) -> bool:
    """Whether ``text`` is a ``Uuid`` as Kafka renders one (22 characters of URL-safe base64)."""
    if len(text) != 22:
        return False
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, binascii.Error):
        return False
    return len(raw) == 16 and render_uuid(raw) == text


def new_topic_id() -> str:
    """A random topic id, drawn and rendered as Kafka draws and renders ``Uuid``."""
    return random_uuid()


def partition_metadata_text(topic_id: str) -> bytes:
    """``partition.metadata`` exactly as Kafka writes it (no final newline)."""
    return f"version: 0\ntopic_id: {topic_id}".encode()


def read_partition_topic_id(fs: FileSystem, directory: str) -> str | None:
    """The topic id in a partition directory's ``partition.metadata`` (None if absent)."""
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    if not fs.exists(path):
        return None
    for line in fs.read_file(path).decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "topic_id":
            return value.strip()
    return None


# --------------------------------------------------------------------------------------------
# The catalog file


def check_partition_count(topic: str, partitions: object, source: str) -> int:
    """``partitions`` if it is an int in 1..:data:`MAX_PARTITIONS_PER_TOPIC`; otherwise
    ``ValueError`` naming ``topic``, ``source`` and the limit."""
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        raise ValueError(f"topic {topic!r} has a partition count {partitions!r} that is no number")
    if partitions < 1:
        raise ValueError(f"topic {topic!r} has {partitions} partitions")
    if partitions > MAX_PARTITIONS_PER_TOPIC:
        raise ValueError(
            f"topic {topic!r} has {partitions} partitions in {source}, more than the limit of "
            f"{MAX_PARTITIONS_PER_TOPIC} per topic (Kafka's controller creates at most that many "
            "in one request)"
        )
    return partitions


def _entry_info(name: str, entry: Mapping[str, object], source: str) -> TopicInfo:
    """A catalog entry (of the topics file or of a partition directory's copy) as a
    :class:`TopicInfo`; a malformed one raises ``ValueError``/``KeyError``/``TypeError``/
    ``AttributeError``/:class:`CompactlogError`."""
    validate_topic_name(name)
    config = entry["config"]
    kraft = entry.get("kraft_config")
    if not isinstance(config, dict) or not (kraft is None or isinstance(kraft, dict)):
        raise ValueError(f"topic {name!r} has a config that is not an object")
    return TopicInfo(
        name,
        check_partition_count(name, entry["partitions"], source),
        str(entry["topic_id"]),
        {str(k): str(v) for k, v in config.items()},
        None if kraft is None else {str(k): str(v) for k, v in kraft.items()},
    )


def _entry_doc(info: TopicInfo) -> dict[str, object]:
    entry: dict[str, object] = {
        "partitions": info.partitions,
        "topic_id": info.topic_id,
        "config": info.overrides,
    }
    if info.kraft_config is not None:
        entry["kraft_config"] = info.kraft_config
    return entry


def set_aside_damaged_topics_file(fs: FileSystem, data_dir: str) -> str:
    """Rename a damaged topics file to ``compactlog-topics.json.corrupt-<n>`` (kept, never
    deleted) so that a new one can be written; returns the new name."""
    path = os.path.join(data_dir, TOPICS_FILE)
    n = 1
    while fs.exists(f"{path}.corrupt-{n}"):
        n += 1
    aside = f"{path}.corrupt-{n}"
    fs.rename(path, aside)
    fs.sync_dir(data_dir)
    return aside


def read_topics_file(fs: FileSystem, data_dir: str) -> dict[str, TopicInfo] | None:
    """The topics of ``compactlog-topics.json`` (None when there is no such file); a damaged file
    raises :class:`StorageError` (:func:`load_catalog` then sets it aside and rebuilds the
    catalog from the partition directories' copies). Partition counts are bounded by
    :data:`MAX_PARTITIONS_PER_TOPIC`."""
    path = os.path.join(data_dir, TOPICS_FILE)
    if not fs.exists(path):
        return None
    topics: dict[str, TopicInfo] = {}
    try:
        doc = json.loads(fs.read_file(path).decode("utf-8"))
        for name, entry in doc["topics"].items():
            topics[name] = _entry_info(name, entry, path)
    except (ValueError, KeyError, TypeError, AttributeError, CompactlogError) as exc:
        raise StorageError(f"{path} is damaged ({exc})") from exc
    return topics


def write_topics_file(fs: FileSystem, data_dir: str, topics: Mapping[str, TopicInfo]) -> None:
    entries = {name: _entry_doc(info) for name, info in sorted(topics.items())}
    doc = {"version": TOPICS_FILE_VERSION, "topics": entries}
    write_file_atomically(
        fs, os.path.join(data_dir, TOPICS_FILE), json.dumps(doc, indent=2).encode() + b"\n"
    )


# --------------------------------------------------------------------------------------------
# The partition directories' copies of their topic's entry


def partition_copy_text(info: TopicInfo) -> bytes:
    """The content of a partition directory's :data:`PARTITION_CATALOG_FILE`: the topic's
    catalog entry, with its name."""
    doc = {"version": TOPICS_FILE_VERSION, "topic": info.name, **_entry_doc(info)}
    return json.dumps(doc, indent=2, sort_keys=True).encode() + b"\n"


def write_partition_copy(fs: FileSystem, directory: str, info: TopicInfo) -> None:
    """Write ``info`` to the partition directory's copy, atomically, unless it is there already."""
    path = os.path.join(directory, PARTITION_CATALOG_FILE)
    text = partition_copy_text(info)
    if fs.exists(path) and fs.read_file(path) == text:
        return
    write_file_atomically(fs, path, text)


def remove_partition_copy(fs: FileSystem, directory: str) -> None:
    """Remove the partition directory's copy (first step of a topic deletion), durably."""
    path = os.path.join(directory, PARTITION_CATALOG_FILE)
    if fs.exists(path):
        fs.remove(path)
        fs.sync_dir(directory)


def read_partition_copy(
    fs: FileSystem, directory: str, topic: str, *, announce: bool = True
) -> TopicInfo | None:
    """The entry of ``topic`` in the partition directory's copy; None when there is none, or
    when it is damaged or names another topic (then with a warning, unless not ``announce``)."""
    path = os.path.join(directory, PARTITION_CATALOG_FILE)
    if not fs.exists(path):
        return None
    try:
        doc = json.loads(fs.read_file(path).decode("utf-8"))
        if doc.get("topic") != topic:
            raise ValueError(f"it is a copy of topic {doc.get('topic')!r}, not of {topic!r}")
        return _entry_info(topic, doc, path)
    except (ValueError, KeyError, TypeError, AttributeError, CompactlogError) as exc:
        if announce:
            logger.warning("ignoring %s: it is damaged (%s)", path, exc)
        return None


def _restored(
    fs: FileSystem, data_dir: str, name: str, partitions: set[int], announce: bool
) -> TopicInfo | None:
    """``name``'s entry as its partition directories' copies hold it (the lowest partition's
    readable copy; a copy that differs from it is reported)."""
    copies = [
        (p, read_partition_copy(fs, os.path.join(data_dir, partition_dir_name(name, p)), name,
                                announce=announce))
        for p in sorted(partitions)
    ]  # fmt: skip
    found = [(p, info) for p, info in copies if info is not None]
    if not found:
        return None
    partition, info = found[0]
    differing = [p for p, other in found[1:] if other != info]
    if differing and announce:
        logger.warning(
            "%s: the copies of its entry in partitions %s differ from partition %d's; using "
            "partition %d's", name, differing, partition, partition,
        )  # fmt: skip
    return info


def _announce_restored(info: TopicInfo, why: str) -> None:
    logger.warning(
        "restoring topic %s from its partition directories' %s (%s): %d partition(s), topic id "
        "%s, configs %s",
        info.name, PARTITION_CATALOG_FILE, why, info.partitions, info.topic_id,
        info.overrides or "(defaults)",
    )  # fmt: skip


def restore_missing(
    fs: FileSystem, data_dir: str, topics: dict[str, TopicInfo], *, announce: bool = True
) -> bool:
    """Add to ``topics`` (the catalog file's) every topic that has partition directories here
    and a copy of its entry in them, but no entry in the file; returns whether any was added.
    Directories without a copy stay out (the store ignores them, and a create of their topic
    renames them aside)."""
    added = False
    for name, partitions in sorted(_partition_dirs(fs, data_dir).items()):
        if name in topics:
            continue
        info = _restored(fs, data_dir, name, partitions, announce)
        if info is None:
            continue
        if announce:
            _announce_restored(info, f"it has no entry in {TOPICS_FILE}")
        topics[name] = info
        added = True
    return added


# --------------------------------------------------------------------------------------------
# Kafka's configs as compactlog overrides


def _usable(configs: Mapping[str, str], broker: BrokerConfig) -> tuple[dict[str, str], list[str]]:
    """The configs compactlog accepts, added one at a time in name order (so a cross-config
    rule drops the later name, never the whole set), and the names left out."""
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for name in sorted(configs, key=lambda n: (n != "cleanup.policy", n)):
        if name not in TOPIC_CONFIGS:
            dropped.append(name)
            continue
        try:
            LogConfig.create({**kept, name: configs[name]}, broker)
        except ConfigError:
            dropped.append(name)
            continue
        kept[name] = configs[name]
    normal = LogConfig.create(kept, broker).overrides  # Kafka's normal form, as the file keeps
    return dict(sorted(normal.items())), dropped


def dynamic_topic_defaults(metadata: KraftMetadata) -> dict[str, str]:
    """The topic configs whose default Kafka's dynamic broker configs change from compactlog's
    built-in one (``log.cleanup.policy=compact`` -> ``cleanup.policy: compact``)."""
    settings: dict[str, str] = {}
    for name, value in sorted(metadata.dynamic_broker_configs().items()):
        if name not in _TOPIC_SYNONYMS or name not in BROKER_CONFIGS:
            continue
        try:
            BrokerConfig.from_dict({**settings, name: value})
        except ConfigError as exc:
            logger.warning("ignoring Kafka's dynamic broker config %s=%s: %s", name, value, exc)
            continue
        settings[name] = value
    builtin = BrokerConfig.from_dict({}).topic_defaults()
    derived = BrokerConfig.from_dict(settings).topic_defaults()
    return {
        name: render_value(TOPIC_CONFIGS[name].type, value)
        for name, value in sorted(derived.items())
        if value != builtin[name]
    }


def kafka_overrides(
    topic: KraftTopic, dynamic: Mapping[str, str], broker: BrokerConfig
) -> tuple[dict[str, str], list[str]]:
    """The overrides that give ``topic`` its Kafka configs in compactlog, and the names left
    out (configs compactlog does not know or refuses)."""
    return _usable({**dynamic, **topic.configs}, broker)


# --------------------------------------------------------------------------------------------
# Adoption and the merge with Kafka's metadata


def _partition_dirs(fs: FileSystem, data_dir: str) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for name in fs.listdir(data_dir):
        parsed = parse_partition_dir_name(name)
        if parsed is None or parsed[0] == METADATA_TOPIC:
            continue
        if fs.is_dir(os.path.join(data_dir, name)):
            found.setdefault(parsed[0], set()).add(parsed[1])
    return found


def _from_kafka(
    topic: KraftTopic, dynamic: Mapping[str, str], broker: BrokerConfig
) -> tuple[TopicInfo, list[str]]:
    overrides, dropped = kafka_overrides(topic, dynamic, broker)
    info = TopicInfo(topic.name, topic.partitions, topic.topic_id, overrides, dict(overrides))
    return info, dropped


def _warn_dropped(name: str, dropped: list[str]) -> None:
    if dropped:
        logger.warning(
            "%s: Kafka's config(s) %s left out (unknown to compactlog or refused by it)",
            name,
            ", ".join(dropped),
        )


def is_kafka_log_dir(fs: FileSystem, data_dir: str) -> bool:
    """Whether Kafka formatted ``data_dir`` (every Kafka log directory has ``meta.properties``)."""
    return fs.exists(os.path.join(data_dir, META_PROPERTIES))


def _hosted(topic: KraftTopic, dirs: Mapping[str, set[int]]) -> bool:
    return topic.partitions > 0 and any(p < topic.partitions for p in dirs.get(topic.name, ()))


def _read_metadata(fs: FileSystem, data_dir: str, *, required: bool) -> KraftMetadata | None:
    if not has_metadata_log(fs, data_dir):
        return None
    try:
        return read_kraft_metadata(data_dir)
    except CompactlogError as exc:
        if required:
            raise StorageError(
                f"cannot read Kafka's metadata log in {data_dir} ({exc}); refusing to adopt its "
                f"topics with default configs (a compacted topic would lose its policy)"
            ) from exc
        logger.warning(
            "cannot read Kafka's metadata log in %s (%s); using %s as it is", data_dir, exc,
            TOPICS_FILE,
        )  # fmt: skip
        return None


def _adopt(
    fs: FileSystem,
    data_dir: str,
    metadata: KraftMetadata | None,
    broker: BrokerConfig,
    announce: bool,
) -> dict[str, TopicInfo]:
    """The catalog of a directory without a catalog file (see the module docstring)."""
    dirs = _partition_dirs(fs, data_dir)
    topics: dict[str, TopicInfo] = {}
    if metadata is not None:
        dynamic = dynamic_topic_defaults(metadata)
        for topic in metadata.topics.values():
            if not _hosted(topic, dirs):
                continue
            copy = _restored(fs, data_dir, topic.name, dirs[topic.name], announce)
            if copy is not None and copy.topic_id == topic.topic_id:
                # The catalog entry as it was, with what Kafka changed since (a later open).
                topics[topic.name] = _merge_configs(copy, topic, dynamic, broker)
                continue
            topics[topic.name], dropped = _from_kafka(topic, dynamic, broker)
            if announce:
                _warn_dropped(topic.name, dropped)
        if topics and announce:
            compacted = sum(LogConfig.create(t.overrides, broker).compact for t in topics.values())
            logger.warning(
                "adopting %d topic(s) (%d compacted) from Kafka's metadata log %s with their "
                "configs and topic ids: %s",
                len(topics),
                compacted,
                metadata.path,
                ", ".join(sorted(topics)),
            )
    if metadata is None and dirs and announce and is_kafka_log_dir(fs, data_dir):
        logger.warning(
            "%s is a Kafka log directory (it has %s) without Kafka's metadata log %s: its "
            "topics' configs are unknown here, so they are adopted with retention disabled; to "
            "keep their configs, copy the metadata log (Kafka's metadata.log.dir) beside the "
            "partition directories before the first open",
            data_dir,
            META_PROPERTIES,
            METADATA_DIR,
        )
    for name, partitions in sorted(dirs.items()):
        if name in topics:
            continue
        copy = _restored(fs, data_dir, name, partitions, announce)
        if copy is not None:
            if announce:
                _announce_restored(copy, f"{TOPICS_FILE} is missing")
            topics[name] = copy
            continue
        topics[name] = _unconfirmed(fs, data_dir, name, partitions, announce)
    return topics


def _unconfirmed(
    fs: FileSystem, data_dir: str, name: str, partitions: set[int], announce: bool
) -> TopicInfo:
    """A topic known only by its partition directories: its configs are unknown, so it is
    adopted with retention disabled (:data:`RETENTION_DISABLED`) rather than with the default
    ``delete`` policy, which would delete a compacted topic's old records at the next retention
    run. The operator confirms its configs with ``configs alter``."""
    highest = max(partitions)
    first = os.path.join(data_dir, partition_dir_name(name, min(partitions)))
    try:
        count = check_partition_count(name, highest + 1, "its partition directories")
    except ValueError as exc:
        raise StorageError(
            f"{os.path.join(data_dir, partition_dir_name(name, highest))}: {exc}; refusing to "
            "adopt it (move the directory away to open the store)"
        ) from exc
    on_disk = read_partition_topic_id(fs, first)
    topic_id = on_disk if on_disk is not None and is_valid_uuid(on_disk) else new_topic_id()
    if announce:
        logger.warning(
            "adopting %s with %d partition(s) and retention disabled (%s): no entry in %s, no "
            "%s in its partition directories and no Kafka metadata say what its configs were; "
            "nothing of it is deleted or compacted until its configs are set, for example "
            "`compactlog configs alter %s --set cleanup.policy=compact --delete retention.ms "
            "--delete retention.bytes` for a compacted topic",
            name, count, ", ".join(f"{k}={v}" for k, v in RETENTION_DISABLED.items()),
            TOPICS_FILE, PARTITION_CATALOG_FILE, name,
        )  # fmt: skip
    return TopicInfo(name, count, topic_id, dict(RETENTION_DISABLED))


def _merge(
    fs: FileSystem,
    data_dir: str,
    topics: dict[str, TopicInfo],
    metadata: KraftMetadata,
    broker: BrokerConfig,
) -> bool:
    """Merge Kafka's metadata into the catalog file's topics (see the module docstring); returns
    whether anything changed."""
    dirs = _partition_dirs(fs, data_dir)
    dynamic = dynamic_topic_defaults(metadata)
    changed = False
    for topic in metadata.topics.values():
        ours = topics.get(topic.name)
        if ours is None:
            if _hosted(topic, dirs):
                topics[topic.name], dropped = _from_kafka(topic, dynamic, broker)
                _warn_dropped(topic.name, dropped)
                logger.warning(
                    "adopting %s from Kafka's metadata log %s (not in %s yet)",
                    topic.name,
                    metadata.path,
                    TOPICS_FILE,
                )
                changed = True
            continue
        if ours.topic_id != topic.topic_id:
            on_disk = {
                read_partition_topic_id(fs, os.path.join(data_dir, partition_dir_name(name, p)))
                for name in (topic.name,)
                for p in sorted(dirs.get(name, ()))
            }
            if topic.topic_id in on_disk and _hosted(topic, dirs):
                topics[topic.name], dropped = _from_kafka(topic, dynamic, broker)
                _warn_dropped(topic.name, dropped)
                logger.warning(
                    "%s: its partition directories belong to Kafka's topic id %s, not %s as in "
                    "%s; taking Kafka's id, partitions and configs",
                    topic.name,
                    topic.topic_id,
                    ours.topic_id,
                    TOPICS_FILE,
                )
                changed = True
            continue
        merged = _merge_configs(ours, topic, dynamic, broker)
        if merged != ours:
            topics[topic.name] = merged
            changed = True
    return changed


def _merge_configs(
    ours: TopicInfo, topic: KraftTopic, dynamic: Mapping[str, str], broker: BrokerConfig
) -> TopicInfo:
    theirs, _ = kafka_overrides(topic, dynamic, broker)
    base = ours.kraft_config or {}
    overrides = dict(ours.overrides)
    taken = []
    for name in sorted(set(base) | set(theirs)):
        if theirs.get(name) == base.get(name) or theirs.get(name) == overrides.get(name):
            continue
        taken.append(f"{name}={theirs.get(name, '(default)')}")
        if name in theirs:
            overrides[name] = theirs[name]
        else:
            overrides.pop(name, None)
    if taken:
        try:
            LogConfig.create(overrides, broker)
        except ConfigError as exc:
            logger.warning(
                "%s: Kafka changed its configs (%s) but together with %s they are refused (%s); "
                "keeping %s",
                ours.name, ", ".join(taken), TOPICS_FILE, exc, TOPICS_FILE,
            )  # fmt: skip
            overrides = dict(ours.overrides)
        else:
            logger.warning(
                "%s: taking the configs Kafka changed since the last open: %s",
                ours.name,
                ", ".join(taken),
            )
    partitions = max(ours.partitions, topic.partitions)
    return ours._replace(partitions=partitions, overrides=overrides, kraft_config=theirs)


def adopt_catalog(
    fs: FileSystem, data_dir: str, broker: BrokerConfig, *, announce: bool = True
) -> dict[str, TopicInfo]:
    """What a store adopts in a directory without a catalog file (reads only; nothing is
    written), logging it unless ``announce`` is false. Raises :class:`StorageError` when
    Kafka's metadata log cannot be read."""
    metadata = _read_metadata(fs, data_dir, required=True)
    return _adopt(fs, data_dir, metadata, broker, announce)


def load_catalog(
    fs: FileSystem, data_dir: str, broker: BrokerConfig
) -> tuple[dict[str, TopicInfo], bool]:
    """The topics of the data directory, and whether the catalog file must be (re)written.

    ``broker`` only validates Kafka's configs (the store's settings decide which values it
    accepts); it does not change what is adopted.
    """
    try:
        topics = read_topics_file(fs, data_dir)
        for name, info in (topics or {}).items():
            try:
                LogConfig.create(info.overrides, broker)
            except CompactlogError as exc:
                raise StorageError(
                    f"{os.path.join(data_dir, TOPICS_FILE)} is damaged (topic {name!r}: {exc})"
                ) from exc
    except StorageError as exc:
        aside = set_aside_damaged_topics_file(fs, data_dir)
        logger.warning(
            "%s; kept the damaged file as %s and rebuilt the catalog from each partition "
            "directory's %s (topics without one keep their data with retention disabled)",
            exc,
            aside,
            PARTITION_CATALOG_FILE,
        )
        topics = None
    if topics is None:
        adopted = adopt_catalog(fs, data_dir, broker)
        return adopted, bool(adopted)
    restored = restore_missing(fs, data_dir, topics)
    metadata = _read_metadata(fs, data_dir, required=False)
    if metadata is None:
        return topics, restored
    changed = _merge(fs, data_dir, topics, metadata, broker)
    return topics, changed or restored
