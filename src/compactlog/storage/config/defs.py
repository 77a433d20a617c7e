"""The catalogue of topic and broker configs: Kafka 3.9's names, types, defaults and valid values.

This module is data and the rules on one value at a time. Reading a value from text and printing
it back is :mod:`compactlog.storage.config.values`; the rules across configs are
:mod:`compactlog.storage.config.rules`; resolving defaults and effective values is
:mod:`compactlog.storage.config.broker_config` and :mod:`compactlog.storage.config.log_config`.
The package :mod:`compactlog.storage.config` re-exports every public name defined here.

* The value types (:data:`ConfigType`, :data:`ConfigValue`, :data:`RawValue`), Java's integer
  bounds and the size and time constants the tables use.
* :class:`ConfigSource` and the DescribeConfigs type ids.
* The validators: each checks one parsed value and prints Kafka's "valid values" text.
* :class:`ConfigDef` and :class:`Synonym`, and the tables: :data:`TOPIC_CONFIGS` lists every topic
  config Kafka 3.9 documents, each with its type, static default, validator and the broker
  settings ("synonyms") that supply its default; :data:`BROKER_CONFIGS` lists the broker settings
  compactlog accepts: the cleaner and scheduler settings plus every synonym of a topic config.
  The error for a name that is not in the table asked for says which table it is in.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType
from typing import Final, Literal

from compactlog.errors import ConfigError

ConfigType = Literal["boolean", "int", "long", "double", "string", "list"]
#: A parsed value. Lists are tuples of strings so that parsed configs stay immutable.
ConfigValue = bool | int | float | str | tuple[str, ...]
#: What callers may pass in: Kafka's string form, or the Python value itself.
RawValue = str | bool | int | float | Sequence[str]

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1
#: Java's Double.MAX_VALUE, Kafka's "unlimited" for log.cleaner.io.max.bytes.per.second.
DOUBLE_MAX: Final = 1.7976931348623157e308

MS_PER_MINUTE: Final = 60 * 1000
MS_PER_HOUR: Final = 60 * MS_PER_MINUTE

#: ``LegacyRecord.RECORD_OVERHEAD_V0``: the 3.x lower bound of segment.bytes (4.0 raised it to
#: 1 MiB; we keep the 3.x bound because tests need tiny segments).
MIN_SEGMENT_BYTES: Final = 14
#: 1 MiB + the 12-byte log overhead (offset + size), Kafka's default batch size limit.
DEFAULT_MAX_MESSAGE_BYTES: Final = 1024 * 1024 + 12


class ConfigSource(IntEnum):
    """Where an effective value comes from; Kafka's DescribeConfigs source ids."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


#: DescribeConfigs ``ConfigType`` ids (DescribeConfigsResponse.ConfigType).
CONFIG_TYPE_IDS: Final[Mapping[ConfigType, int]] = MappingProxyType(
    {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
)


# --------------------------------------------------------------------------------------------
# Validators
# --------------------------------------------------------------------------------------------


# Validators word their problems with it; config.values' parse errors show values the same way.
def _show(value: object) -> str:
    """A value for an error message: as typed when plain, else escaped (NUL, look-alikes)."""
    if isinstance(value, str):
        if value and value.isascii() and value.isprintable() and value.strip() == value:
            return value
        return ascii(value)
    if isinstance(value, tuple | list):
        return ascii(",".join(str(v) for v in value))
    return ascii(value)


#: What Kafka's validator says about a value it refuses: the value its message names (the
#: parsed value, or the offending element of a list) and its reason.
KafkaProblem = tuple[ConfigValue, str]


class Validator(ABC):
    """A rule on a parsed value; :meth:`problem` says what is wrong, or ``None``;
    :meth:`kafka_problem` says it as Kafka's validator does."""

    @abstractmethod
    def problem(self, value: ConfigValue) -> str | None: ...

    def kafka_problem(self, name: str, value: ConfigValue) -> KafkaProblem | None:
        """Kafka's wording for a value :meth:`problem` refuses (``None``: not known; the broker
        then sends compactlog's own sentence)."""
        return None

    @abstractmethod
    def describe(self) -> str:
        """The "valid values" text, in the shape Kafka's documentation prints it."""


@dataclass(frozen=True)
class Range(Validator):
    """Inclusive numeric bounds; either may be open."""

    min: int | float | None = None
    max: int | float | None = None

    def problem(self, value: ConfigValue) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "must be a number"
        if self.min is not None and value < self.min:
            return f"must be at least {self.min}"
        if self.max is not None and value > self.max:
            return f"must be at most {self.max}"
        return None

    def kafka_problem(self, name: str, value: ConfigValue) -> KafkaProblem | None:
        assert isinstance(value, int | float)
        if self.min is not None and value < self.min:
            return value, f"Value must be at least {self.min}"
        if self.max is not None and value > self.max:
            return value, f"Value must be no more than {self.max}"
        return None

    def describe(self) -> str:
        if self.max is None:
            return f"[{self.min},...]"
        if self.min is None:
            return f"[...,{self.max}]"
        return f"[{self.min},...,{self.max}]"


def at_least(minimum: int | float) -> Range:
    return Range(min=minimum)


@dataclass(frozen=True)
class OneOf(Validator):
    """A string from a fixed set, compared case-sensitively (Kafka's ``ValidString``)."""

    choices: tuple[str, ...]

    def problem(self, value: ConfigValue) -> str | None:
        if value not in self.choices:
            return f"must be one of {', '.join(self.choices)} (case-sensitive)"
        return None

    def kafka_problem(self, name: str, value: ConfigValue) -> KafkaProblem | None:
        return value, f"String must be one of: {', '.join(self.choices)}"

    def describe(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


@dataclass(frozen=True)
class ListOf(Validator):
    """A list whose every element is from a fixed set (Kafka's ``ValidList``); may be empty."""

    choices: tuple[str, ...]

    def problem(self, value: ConfigValue) -> str | None:
        assert isinstance(value, tuple)
        for element in value:
            if element not in self.choices:
                return (
                    f"element {_show(element)} is not one of "
                    f"{', '.join(self.choices)} (case-sensitive)"
                )
        return None

    def kafka_problem(self, name: str, value: ConfigValue) -> KafkaProblem | None:
        # Kafka's ValidList checks each element with a ValidString, which names the element.
        assert isinstance(value, tuple)
        for element in value:
            if element not in self.choices:
                return element, f"String must be one of: {', '.join(self.choices)}"
        return None

    def describe(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


@dataclass(frozen=True)
class LevelRange(Validator):
    """A codec level: within [min, max], or the codec's "use the library default" marker."""

    min: int
    max: int
    library_default: int | None = None

    def problem(self, value: ConfigValue) -> str | None:
        assert isinstance(value, int)
        if self.min <= value <= self.max or value == self.library_default:
            return None
        extra = "" if self.library_default is None else f" or equal to {self.library_default}"
        return f"must be between {self.min} and {self.max}{extra}"

    def kafka_problem(self, name: str, value: ConfigValue) -> KafkaProblem | None:
        # gzip's level has its own validator in Kafka; the others are plain ranges.
        assert isinstance(value, int)
        if self.library_default is not None:
            return value, (
                f"Value must be between {self.min} and {self.max} "
                f"or equal to {self.library_default}"
            )
        if value < self.min:
            return value, f"Value must be at least {self.min}"
        return value, f"Value must be no more than {self.max}"

    def describe(self) -> str:
        extra = "" if self.library_default is None else f" or {self.library_default}"
        return f"[{self.min},...,{self.max}]{extra}"


_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


@dataclass(frozen=True)
class ThrottledReplicaList(Validator):
    """``*`` alone, or ``partition:broker`` pairs (Kafka's ``ThrottledReplicaListValidator``)."""

    def problem(self, value: ConfigValue) -> str | None:
        assert isinstance(value, tuple)
        items = [element.strip() for element in value]
        if "".join(items) == "*" or all(_THROTTLED_REPLICA.fullmatch(i) for i in items):
            return None
        return "must be '*' or a list of partitionId:brokerId pairs"

    def kafka_problem(self, name: str, value: ConfigValue) -> KafkaProblem | None:
        return value, (
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )

    def describe(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


# Kafka 3.9's MetadataVersion enum in order: (release, sub-version). Only its text matters here:
# message.format.version is deprecated and ignored from inter-broker protocol 3.0 on.
_METADATA_VERSIONS: Final = (
    ("0.8.0", ""), ("0.8.1", ""), ("0.8.2", ""), ("0.9.0", ""),
    ("0.10.0", "IV0"), ("0.10.0", "IV1"), ("0.10.1", "IV0"), ("0.10.1", "IV1"), ("0.10.1", "IV2"),
    ("0.10.2", "IV0"), ("0.11.0", "IV0"), ("0.11.0", "IV1"), ("0.11.0", "IV2"),
    ("1.0", "IV0"), ("1.1", "IV0"), ("2.0", "IV0"), ("2.0", "IV1"),
    ("2.1", "IV0"), ("2.1", "IV1"), ("2.1", "IV2"), ("2.2", "IV0"), ("2.2", "IV1"),
    ("2.3", "IV0"), ("2.3", "IV1"), ("2.4", "IV0"), ("2.4", "IV1"), ("2.5", "IV0"), ("2.6", "IV0"),
    ("2.7", "IV0"), ("2.7", "IV1"), ("2.7", "IV2"), ("2.8", "IV0"), ("2.8", "IV1"),
    ("3.0", "IV0"), ("3.0", "IV1"), ("3.1", "IV0"), ("3.2", "IV0"),
    ("3.3", "IV0"), ("3.3", "IV1"), ("3.3", "IV2"), ("3.3", "IV3"), ("3.4", "IV0"),
    ("3.5", "IV0"), ("3.5", "IV1"), ("3.5", "IV2"), ("3.6", "IV0"), ("3.6", "IV1"), ("3.6", "IV2"),
    ("3.7", "IV0"), ("3.7", "IV1"), ("3.7", "IV2"), ("3.7", "IV3"), ("3.7", "IV4"),
    ("3.8", "IV0"), ("3.9", "IV0"),
    ("4.0", "IV0"), ("4.0", "IV1"),
)  # fmt: skip
_LATEST_PRODUCTION_VERSION: Final = "3.9-IV0"


def _build_version_table() -> dict[str, str]:
    """Accepted version text -> canonical ``release-IVn`` text (MetadataVersion.IBP_VERSIONS)."""
    table: dict[str, str] = {}
    newest_production: dict[str, str] = {}
    production = True
    for release, sub in _METADATA_VERSIONS:
        canonical = f"{release}-{sub}" if sub else release
        table[canonical] = canonical
        if production:
            newest_production[release] = canonical
        if canonical == _LATEST_PRODUCTION_VERSION:
            production = False
    table.update(newest_production)
    return table


_VERSION_TABLE: Final = _build_version_table()


def canonical_metadata_version(text: str) -> str | None:
    """Kafka's ``MetadataVersion.fromVersionString(text).version()``, or ``None`` if unknown.

    Only the leading components count: three for ``0.x`` versions, two otherwise, so ``2.8.1``
    means ``2.8`` (whose newest production sub-version is ``2.8-IV1``).
    """
    parts = text.split(".")
    keep = 3 if text.startswith("0.") else 2
    key = text if len(parts) <= keep else ".".join(parts[:keep])
    return _VERSION_TABLE.get(key)


@dataclass(frozen=True)
class MetadataVersionString(Validator):
    def problem(self, value: ConfigValue) -> str | None:
        assert isinstance(value, str)
        if canonical_metadata_version(value) is None:
            return "is not a Kafka version (for example 0.10.0, 2.8 or 3.0-IV1)"
        return None

    def describe(self) -> str:
        return "a Kafka version such as 0.10.0, 2.8 or 3.0-IV1"


# --------------------------------------------------------------------------------------------
# Definitions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Synonym:
    """A broker setting that supplies a topic config's default; ``to_ms`` converts its unit."""

    name: str
    to_ms: int = 1


@dataclass(frozen=True)
class ConfigDef:
    """One config: Kafka's name, type, default and valid values, with a sentence of our own.

    ``default`` is ``None`` only for broker settings that Kafka leaves unset by default (such as
    ``log.roll.ms``, which then falls back to ``log.roll.hours``). ``synonyms`` are the broker
    settings that supply a topic config's default, highest priority first. ``has_effect`` is false
    for configs that compactlog accepts and describes but never acts on (replication, tiered
    storage, old message formats).
    """

    name: str
    type: ConfigType
    default: ConfigValue | None
    doc: str
    validator: Validator | None = None
    synonyms: tuple[Synonym, ...] = ()
    has_effect: bool = True
    internal: bool = False

    @property
    def synonym(self) -> str | None:
        """The highest-priority broker synonym (Kafka's "Server Default Property")."""
        return self.synonyms[0].name if self.synonyms else None

    def valid_values(self) -> str:
        return "" if self.validator is None else self.validator.describe()


def _syn(*names: str | tuple[str, int]) -> tuple[Synonym, ...]:
    return tuple(Synonym(n) if isinstance(n, str) else Synonym(*n) for n in names)


_COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES: Final = ("CreateTime", "LogAppendTime")
_CLEANUP_POLICIES: Final = ("compact", "delete")

_NO_EFFECT_REPLICATION: Final = " Replication setting: accepted and described, no effect here."
_NO_EFFECT_REMOTE: Final = " Tiered-storage setting: accepted and described, no effect here."

_TOPIC_DEFS: Final = (
    ConfigDef(
        "cleanup.policy", "list", ("delete",),
        "What happens to old segments: 'delete' removes them by retention time and size, "
        "'compact' keeps the latest record of every key; both may be given, or neither.",
        ListOf(_CLEANUP_POLICIES), _syn("log.cleanup.policy"),
    ),
    ConfigDef(
        "compression.type", "string", "producer",
        "Codec the log stores produced batches with; 'producer' keeps each batch's own codec and "
        "'uncompressed' stores them without compression. The cleaner keeps each batch's codec.",
        OneOf(_COMPRESSION_TYPES), _syn("compression.type"),
    ),
    ConfigDef(
        "compression.gzip.level", "int", -1,
        "Level used when compression.type is gzip; -1 means the library's default level.",
        LevelRange(1, 9, -1), _syn("compression.gzip.level"),
    ),
    ConfigDef(
        "compression.lz4.level", "int", 9,
        "Level used when compression.type is lz4.",
        LevelRange(1, 17), _syn("compression.lz4.level"),
    ),
    ConfigDef(
        "compression.zstd.level", "int", 3,
        "Level used when compression.type is zstd (negative levels trade ratio for speed).",
        LevelRange(-131072, 22), _syn("compression.zstd.level"),
    ),
    ConfigDef(
        "delete.retention.ms", "long", 86400000,
        "How long a tombstone or transaction marker survives after the cleaning that first kept "
        "it; the delete horizon stamped into its batch is that cleaning's time plus this.",
        at_least(0), _syn("log.cleaner.delete.retention.ms"),
    ),
    ConfigDef(
        "file.delete.delay.ms", "long", 60000,
        "How long a segment renamed to '.deleted' waits before its files are removed.",
        at_least(0), _syn("log.segment.delete.delay.ms"),
    ),
    ConfigDef(
        "flush.messages", "long", LONG_MAX,
        "Force an fsync after this many appended records; the default leaves flushing to the OS.",
        at_least(1), _syn("log.flush.interval.messages"),
    ),
    ConfigDef(
        "flush.ms", "long", LONG_MAX,
        "Force an fsync when the oldest unflushed data is this old; the default never forces.",
        at_least(0), _syn("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ),
    ConfigDef(
        "follower.replication.throttled.replicas", "list", (),
        "Replicas whose follower-side replication is throttled." + _NO_EFFECT_REPLICATION,
        ThrottledReplicaList(), has_effect=False,
    ),
    ConfigDef(
        "index.interval.bytes", "int", 4096,
        "Bytes of records between two offset-index entries; smaller means denser indexes.",
        at_least(0), _syn("log.index.interval.bytes"),
    ),
    ConfigDef(
        "leader.replication.throttled.replicas", "list", (),
        "Replicas whose leader-side replication is throttled." + _NO_EFFECT_REPLICATION,
        ThrottledReplicaList(), has_effect=False,
    ),
    ConfigDef(
        "local.retention.bytes", "long", -2,
        "Size limit of the local part of a tiered log; -2 means use retention.bytes."
        + _NO_EFFECT_REMOTE,
        at_least(-2), _syn("log.local.retention.bytes"), has_effect=False,
    ),
    ConfigDef(
        "local.retention.ms", "long", -2,
        "Age limit of the local part of a tiered log; -2 means use retention.ms."
        + _NO_EFFECT_REMOTE,
        at_least(-2), _syn("log.local.retention.ms"), has_effect=False,
    ),
    ConfigDef(
        "max.compaction.lag.ms", "long", LONG_MAX,
        "Longest time a record may stay uncompacted: a compacted log whose oldest dirty segment "
        "is older becomes eligible for cleaning, and its active segment rolls by this age.",
        at_least(1), _syn("log.cleaner.max.compaction.lag.ms"),
    ),
    ConfigDef(
        "max.message.bytes", "int", DEFAULT_MAX_MESSAGE_BYTES,
        "Largest record batch the log accepts on produce, after compression.",
        at_least(0), _syn("message.max.bytes"),
    ),
    ConfigDef(
        "message.downconversion.enable", "boolean", True,
        "Whether fetches by clients of old message formats are down-converted; compactlog only "
        "serves the v2 format, so this is accepted and described but has no effect here.",
        None, _syn("log.message.downconversion.enable"), has_effect=False,
    ),
    ConfigDef(
        "message.format.version", "string", "3.0-IV1",
        "Deprecated message format version; Kafka ignores it from protocol 3.0 on and so do we "
        "(accepted and described, no effect here).",
        MetadataVersionString(), _syn("log.message.format.version"), has_effect=False,
    ),
    ConfigDef(
        "message.timestamp.after.max.ms", "long", LONG_MAX,
        "How far in the future a CreateTime record timestamp may be; the default defers to the "
        "deprecated message.timestamp.difference.max.ms.",
        at_least(0), _syn("log.message.timestamp.after.max.ms"),
    ),
    ConfigDef(
        "message.timestamp.before.max.ms", "long", LONG_MAX,
        "How far in the past a CreateTime record timestamp may be; the default defers to the "
        "deprecated message.timestamp.difference.max.ms.",
        at_least(0), _syn("log.message.timestamp.before.max.ms"),
    ),
    ConfigDef(
        "message.timestamp.difference.max.ms", "long", LONG_MAX,
        "Deprecated: the largest allowed distance between a CreateTime record timestamp and the "
        "append time, used where the before/after limits are left at their defaults.",
        at_least(0), _syn("log.message.timestamp.difference.max.ms"),
    ),
    ConfigDef(
        "message.timestamp.type", "string", "CreateTime",
        "Whether record timestamps are the producer's (CreateTime) or the append time "
        "(LogAppendTime).",
        OneOf(_TIMESTAMP_TYPES), _syn("log.message.timestamp.type"),
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio", "double", 0.5,
        "A compacted log is cleaned only when its dirty bytes exceed this fraction of its "
        "cleanable bytes (or max.compaction.lag.ms forces it).",
        Range(0, 1), _syn("log.cleaner.min.cleanable.ratio"),
    ),
    ConfigDef(
        "min.compaction.lag.ms", "long", 0,
        "Shortest time a record stays uncompacted: segments holding younger records are not "
        "cleaned yet. Must not exceed max.compaction.lag.ms.",
        at_least(0), _syn("log.cleaner.min.compaction.lag.ms"),
    ),
    ConfigDef(
        "min.insync.replicas", "int", 1,
        "Replicas that must acknowledge an acks=all write." + _NO_EFFECT_REPLICATION,
        at_least(1), _syn("min.insync.replicas"), has_effect=False,
    ),
    ConfigDef(
        "preallocate", "boolean", False,
        "Create each new segment file at its full segment.bytes size, trimmed when it stops "
        "being active.",
        None, _syn("log.preallocate"),
    ),
    ConfigDef(
        "remote.log.copy.disable", "boolean", False,
        "Stop uploading segments of a tiered topic, keeping the remote data read-only."
        + _NO_EFFECT_REMOTE,
        has_effect=False,
    ),
    ConfigDef(
        "remote.log.delete.on.disable", "boolean", False,
        "Delete the remote data when tiered storage is turned off for the topic."
        + _NO_EFFECT_REMOTE,
        has_effect=False,
    ),
    ConfigDef(
        "remote.storage.enable", "boolean", False,
        "Enable tiered storage for the topic; refused for compacted topics and unless the store "
        "sets remote.log.storage.system.enable." + _NO_EFFECT_REMOTE,
        has_effect=False,
    ),
    ConfigDef(
        "retention.bytes", "long", -1,
        "Size limit of a partition under the 'delete' policy: whole old segments are removed "
        "while the log stays at or above it; negative means no size limit.",
        None, _syn("log.retention.bytes"),
    ),
    ConfigDef(
        "retention.ms", "long", 604800000,
        "Age limit under the 'delete' policy: a segment whose newest record is older is "
        "removed; -1 means no time limit.",
        at_least(-1),
        _syn("log.retention.ms", ("log.retention.minutes", MS_PER_MINUTE),
             ("log.retention.hours", MS_PER_HOUR)),
    ),
    ConfigDef(
        "segment.bytes", "int", 1073741824,
        "Largest size of a segment file; an append that would grow the active segment beyond it "
        "rolls a new segment.",
        at_least(MIN_SEGMENT_BYTES), _syn("log.segment.bytes"),
    ),
    ConfigDef(
        "segment.index.bytes", "int", 10485760,
        "Size the offset and time index files are preallocated to; a full index rolls the "
        "segment.",
        at_least(4), _syn("log.index.size.max.bytes"),
    ),
    ConfigDef(
        "segment.jitter.ms", "long", 0,
        "Largest random amount subtracted from segment.ms per segment, so that many logs do not "
        "roll at the same moment.",
        at_least(0), _syn("log.roll.jitter.ms", ("log.roll.jitter.hours", MS_PER_HOUR)),
    ),
    ConfigDef(
        "segment.ms", "long", 604800000,
        "Age after which a non-empty active segment is rolled even if it is not full.",
        at_least(1), _syn("log.roll.ms", ("log.roll.hours", MS_PER_HOUR)),
    ),
    ConfigDef(
        "unclean.leader.election.enable", "boolean", False,
        "Allow an out-of-sync replica to become leader." + _NO_EFFECT_REPLICATION,
        None, _syn("unclean.leader.election.enable"), has_effect=False,
    ),
)  # fmt: skip

#: Every topic config of Kafka 3.9, by name (sorted).
TOPIC_CONFIGS: Final[Mapping[str, ConfigDef]] = MappingProxyType(
    {d.name: d for d in sorted(_TOPIC_DEFS, key=lambda d: d.name)}
)

_BROKER_ONLY_DEFS: Final = (
    # The cleaner (CleanerConfig).
    ConfigDef("log.cleaner.enable", "boolean", True,
              "Run the log cleaner. When false, compacted topics are neither cleaned nor "
              "trimmed by retention."),
    ConfigDef("log.cleaner.threads", "int", 1,
              "Number of cleaner threads; must be at least 1 in practice, because the dedupe "
              "buffer is divided among them.", at_least(0)),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", 128 * 1024 * 1024,
              "Total memory of the cleaners' offset maps; each thread gets an equal share "
              "(capped at 2 GiB - 1), which must exceed 1 MiB."),
    ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9,
              "Despite the name: how full an offset map may get before a cleaning round stops "
              "adding keys."),
    ConfigDef("log.cleaner.io.buffer.size", "int", 512 * 1024,
              "Total memory of the cleaners' read and write buffers; each thread gets half of "
              "its share for each.", at_least(0)),
    ConfigDef("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX,
              "Throttle on the cleaners' combined read and write rate; the default is unlimited."),
    ConfigDef("log.cleaner.backoff.ms", "long", 15000,
              "How long a cleaner thread sleeps after a pass that found no log to clean.",
              at_least(0)),
    # compactlog's own (not Kafka's): which dedupe map the cleaner threads use.
    ConfigDef("compactlog.cleaner.offset.map", "string", "kafka",
              "The cleaner's offset map: 'kafka' (Kafka's map: MD5 digests, 24 bytes per key, "
              "so passes stop at exactly the same record as Kafka's) or 'compact' (16 bytes per "
              "key: 1.5x the keys per pass in the same buffer).", OneOf(("kafka", "compact"))),
    # compactlog's own (Kafka marks a partition uncleanable at its first failed cleaning).
    ConfigDef("compactlog.cleaner.max.attempts", "int", 3,
              "Cleanings of a partition that may fail in a row (damaged data, a bug) before it "
              "is marked uncleanable until the store is reopened; between attempts the cleaner "
              "backs off log.cleaner.backoff.ms, doubling up to 16 times that. I/O errors (disk "
              "full) back off the same way but do not count.", at_least(1)),
    # Scheduling and checkpoints (ServerLogConfigs).
    ConfigDef("log.retention.check.interval.ms", "long", 300000,
              "How often retention runs over the logs that are not compacted.", at_least(1)),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000,
              "How often the recovery-point checkpoint file is rewritten.", at_least(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000,
              "How often the log-start-offset checkpoint file is rewritten.", at_least(0)),
    ConfigDef("num.recovery.threads.per.data.dir", "int", 1,
              "Threads per log directory that recover logs at start-up and flush them at "
              "shutdown.", at_least(1)),
    ConfigDef("log.initial.task.delay.ms", "long", 30000,
              "Delay before the first run of the periodic log tasks (internal, for tests).",
              at_least(0), internal=True),
    ConfigDef("producer.id.expiration.ms", "int", 86400000,
              "How long an idle producer's state (and the empty batch the cleaner keeps for it) "
              "is retained.", at_least(1)),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", 600000,
              "How often expired producer ids are removed from the partitions' producer state "
              "(internal).", at_least(1), internal=True),
    ConfigDef("remote.log.storage.system.enable", "boolean", False,
              "Whether topics may enable tiered storage at all. compactlog has no remote tier, "
              "so this only changes which topic configs validation accepts.", has_effect=False),
    # Synonyms whose broker form has no topic-config twin of its own, or a different type.
    ConfigDef("log.roll.ms", "long", None,
              "Default segment.ms; when unset, log.roll.hours is used."),
    ConfigDef("log.roll.hours", "int", 168,
              "Default segment.ms in hours, used when log.roll.ms is unset.", at_least(1)),
    ConfigDef("log.roll.jitter.ms", "long", None,
              "Default segment.jitter.ms; when unset, log.roll.jitter.hours is used."),
    ConfigDef("log.roll.jitter.hours", "int", 0,
              "Default segment.jitter.ms in hours, used when log.roll.jitter.ms is unset.",
              at_least(0)),
    ConfigDef("log.retention.ms", "long", None,
              "Default retention.ms; when unset, log.retention.minutes then log.retention.hours "
              "is used. Any negative value means unlimited."),
    ConfigDef("log.retention.minutes", "int", None,
              "Default retention.ms in minutes, used when log.retention.ms is unset."),
    ConfigDef("log.retention.hours", "int", 168,
              "Default retention.ms in hours, used when log.retention.ms and "
              "log.retention.minutes are unset."),
    ConfigDef("log.flush.interval.ms", "long", None,
              "Default flush.ms; when unset, log.flush.scheduler.interval.ms is used."),
    ConfigDef("log.flush.scheduler.interval.ms", "long", LONG_MAX,
              "How often the flusher looks for logs to flush, and the fallback default of "
              "flush.ms."),
)  # fmt: skip


def _broker_defs() -> dict[str, ConfigDef]:
    defs = {d.name: d for d in _BROKER_ONLY_DEFS}
    for topic_def in _TOPIC_DEFS:
        for synonym in topic_def.synonyms:
            if synonym.name in defs:
                continue
            # The broker twin shares the topic config's type, default and valid values.
            defs[synonym.name] = ConfigDef(
                synonym.name,
                topic_def.type,
                topic_def.default,
                f"Store-wide default of the topic config {topic_def.name}. {topic_def.doc}",
                topic_def.validator,
                has_effect=topic_def.has_effect,
            )
    return dict(sorted(defs.items()))


#: The broker settings the store accepts, by name (sorted).
BROKER_CONFIGS: Final[Mapping[str, ConfigDef]] = MappingProxyType(_broker_defs())

_TOPIC_SYNONYM_OF: Final = {s.name: d.name for d in _TOPIC_DEFS for s in d.synonyms}


def _unknown_topic_config(name: str) -> ConfigError:
    hint = ""
    if name in BROKER_CONFIGS:
        twin = _TOPIC_SYNONYM_OF.get(name)
        hint = f" ({name} is a store-wide setting" + (
            f"; the topic config is {twin})" if twin else ")"
        )
    return ConfigError(f"Unknown topic config name: {_show(name)}{hint}")


def _unknown_broker_config(name: str) -> ConfigError:
    hint = ""
    if name in TOPIC_CONFIGS:
        synonym = TOPIC_CONFIGS[name].synonym
        hint = f" ({name} is a topic config" + (
            f"; its store-wide default is {synonym})" if synonym else ")"
        )
    return ConfigError(f"Unknown broker config name: {_show(name)}{hint}")
