"""The topic catalog of a data directory: ``compactlog-topics.json``, and where it comes from
when a store opens a directory without one (a Kafka broker's log directory).

Kafka keeps topic metadata in its controller, as records of the KRaft metadata log
``__cluster_metadata-0`` (read by :mod:`compactlog.storage.kraft_metadata`); compactlog keeps it
in ``compactlog-topics.json``, written atomically::

    {"version": 1, "topics": {"orders": {"partitions": 3, "topic_id": "q7IBI0VSQZ6j7TvYNj0RyA",
                                         "config": {"cleanup.policy": "compact"},
                                         "kraft_config": {"cleanup.policy": "compact"}}}}

``kraft_config`` is present only for topics that came from Kafka's metadata: Kafka's overrides as
of the last time the store read them (the base of the merge below).

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
* **No catalog file otherwise**, and for partition directories whose topic the metadata does
  not know: those topics are adopted with default configs and a new topic id. A Kafka log
  directory (``meta.properties``) whose metadata log lives elsewhere (Kafka's
  ``metadata.log.dir``, another log directory) gets a warning that its configs are unknown.
* **Later opens.** The catalog file is the catalog. When a metadata log is present it is read
  again, and where the two disagree:

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


def read_topics_file(fs: FileSystem, data_dir: str) -> dict[str, TopicInfo] | None:
    """The topics of ``compactlog-topics.json`` (None when there is no such file); a damaged file
    raises :class:`StorageError` rather than let a store guess which topics exist."""
    path = os.path.join(data_dir, TOPICS_FILE)
    if not fs.exists(path):
        return None
    topics: dict[str, TopicInfo] = {}
    try:
        doc = json.loads(fs.read_file(path).decode("utf-8"))
        for name, entry in doc["topics"].items():
            validate_topic_name(name)
            kraft = entry.get("kraft_config")
            info = TopicInfo(
                name,
                int(entry["partitions"]),
                str(entry["topic_id"]),
                {str(k): str(v) for k, v in entry["config"].items()},
                None if kraft is None else {str(k): str(v) for k, v in kraft.items()},
            )
            if info.partitions < 1:
                raise ValueError(f"topic {name!r} has {info.partitions} partitions")
            topics[name] = info
    except (ValueError, KeyError, TypeError, AttributeError, CompactlogError) as exc:
        raise StorageError(
            f"{path} is damaged ({exc}); refusing to open rather than guess which topics exist"
        ) from exc
    return topics


def write_topics_file(fs: FileSystem, data_dir: str, topics: Mapping[str, TopicInfo]) -> None:
    entries: dict[str, object] = {}
    for name, info in sorted(topics.items()):
        entry: dict[str, object] = {
            "partitions": info.partitions,
            "topic_id": info.topic_id,
            "config": info.overrides,
        }
        if info.kraft_config is not None:
            entry["kraft_config"] = info.kraft_config
        entries[name] = entry
    doc = {"version": TOPICS_FILE_VERSION, "topics": entries}
    write_file_atomically(
        fs, os.path.join(data_dir, TOPICS_FILE), json.dumps(doc, indent=2).encode() + b"\n"
    )


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
            if _hosted(topic, dirs):
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
            "topics' configs are unknown here and are adopted as defaults, so a compacted topic "
            "becomes a delete topic; to keep them, copy the metadata log (Kafka's "
            "metadata.log.dir) beside the partition directories before the first open",
            data_dir,
            META_PROPERTIES,
            METADATA_DIR,
        )
    for name, partitions in sorted(dirs.items()):
        if name in topics:
            continue
        count = max(partitions) + 1
        if announce:
            logger.warning("adopting %s with %d partition(s) and default configs", name, count)
        topics[name] = TopicInfo(name, count, new_topic_id(), {})
    return topics


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
    topics = read_topics_file(fs, data_dir)
    if topics is None:
        adopted = adopt_catalog(fs, data_dir, broker)
        return adopted, bool(adopted)
    metadata = _read_metadata(fs, data_dir, required=False)
    if metadata is None:
        return topics, False
    changed = _merge(fs, data_dir, topics, metadata, broker)
    return topics, changed
