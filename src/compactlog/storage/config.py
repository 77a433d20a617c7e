"""Topic and broker configuration, with Kafka 3.9's names, types, defaults and valid values.

Theory of operation
-------------------

Kafka keeps two layers of log settings (spec section 7):

* **Topic configs** (``segment.bytes``, ``cleanup.policy``, ...): set per topic as *overrides*.
  :data:`TOPIC_CONFIGS` lists every one Kafka 3.9 documents, each with its type, static default,
  validator and the broker settings ("synonyms") that supply its default.
* **Broker configs** (``log.segment.bytes``, ``log.cleaner.threads``, ...): set once for the whole
  store (``Store.open(config={...})``). :data:`BROKER_CONFIGS` lists the ones compactlog accepts:
  the cleaner and scheduler settings plus every synonym of a topic config.

The value of a topic config for one topic is resolved like Kafka's ``LogConfig.fromProps`` over
``KafkaConfig.extractLogConfigMap``:

1. the topic's own override, if it sets one;
2. else the first broker synonym that has a value, converted to milliseconds where the synonym
   counts hours or minutes (``segment.ms`` <- ``log.roll.ms`` <- ``log.roll.hours``;
   ``retention.ms`` <- ``log.retention.ms`` <- ``.minutes`` <- ``.hours``, where any negative
   result means -1; ``flush.ms`` <- ``log.flush.interval.ms`` <-
   ``log.flush.scheduler.interval.ms``);
3. else the topic config's static default.

Values arrive as strings (CLI, wire protocol) or as Python values (library callers). Parsing follows
Kafka's ``ConfigDef.parseType``: strings are trimmed of ASCII control characters and spaces,
booleans are ``true``/``false`` in any case, ``int`` must fit 32 bits and ``long`` 64 bits, lists
are comma separated (empty string = empty list), and enumerated strings (``compression.type``,
``message.timestamp.type``, ``cleanup.policy`` elements) are matched **case-sensitively**, as
Kafka's ``ValidString``/``ValidList`` do. Cross-field rules run on the whole effective config:
``min.compaction.lag.ms <= max.compaction.lag.ms`` and the tiered-storage rules of
``LogConfig.validateTopicLogConfigValues``. Every refusal is a :class:`ConfigError` naming the
config, the value and the reason; nothing is partially applied.

Rendering (:meth:`LogConfig.describe`) follows Kafka's DescribeConfigs, which prints the parsed Java
value: ``true``/``false``, decimal integers, doubles as ``Double.toString`` (``0.5``, ``1.0E-4``,
``1.7976931348623157E308``) and lists joined with ``,`` in the order given.

Deliberate differences from Kafka: a double that parses as NaN is refused (Kafka accepts it and
then never cleans by ratio), integers must be ASCII digits, and altering or deleting an unknown
topic config name is refused (Kafka's controller ignores deletes of unknown names).
"""

from __future__ import annotations

import functools
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
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

#: Each cleaner thread needs more than this much dedupe memory (KafkaConfig's start-up check).
MIN_DEDUPE_BUFFER_PER_THREAD: Final = 1024 * 1024

_EMPTY: Final[Mapping[str, RawValue]] = MappingProxyType({})
_EMPTY_STR: Final[Mapping[str, str]] = MappingProxyType({})


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


class Validator(ABC):
    """A rule on a parsed value; :meth:`problem` says what is wrong, or ``None``."""

    @abstractmethod
    def problem(self, value: ConfigValue) -> str | None: ...

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


# --------------------------------------------------------------------------------------------
# Parsing and rendering
# --------------------------------------------------------------------------------------------

# java.lang.String.trim() removes every char <= U+0020, not Unicode whitespace.
_JAVA_TRIM: Final = "".join(chr(c) for c in range(0x21))
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_DECIMAL_DOUBLE: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")
_HEX_DOUBLE: Final = re.compile(
    r"([+-]?)(0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)
# Java's \s is ASCII whitespace only, unlike Python's.
_LIST_SEPARATOR: Final = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def _show(value: object) -> str:
    """A value for an error message: as typed when plain, else escaped (NUL, look-alikes)."""
    if isinstance(value, str):
        if value and value.isascii() and value.isprintable() and value.strip() == value:
            return value
        return ascii(value)
    if isinstance(value, tuple | list):
        return ascii(",".join(str(v) for v in value))
    return ascii(value)


def _invalid(name: str, value: object, reason: str) -> ConfigError:
    return ConfigError(f"Invalid value {_show(value)} for config {name}: {reason}")


def _parse_java_double(text: str) -> float | None:
    """``Double.parseDouble`` of already-trimmed text, or ``None`` if Java would refuse it."""
    body = text[1:] if text[:1] in "+-" else text
    negative = text.startswith("-")
    if body == "Infinity":
        return -math.inf if negative else math.inf
    if body == "NaN":
        return math.nan
    if _DECIMAL_DOUBLE.fullmatch(text):
        return float(text.rstrip("fFdD"))
    hex_match = _HEX_DOUBLE.fullmatch(text)
    if hex_match:
        try:
            magnitude = float.fromhex(hex_match.group(2))
        except OverflowError:
            magnitude = math.inf
        return -magnitude if hex_match.group(1) == "-" else magnitude
    return None


def _parse_typed(name: str, config_type: ConfigType, raw: object) -> ConfigValue:
    text = raw.strip(_JAVA_TRIM) if isinstance(raw, str) else None
    if config_type == "boolean":
        if isinstance(raw, bool):
            return raw
        if text is not None and text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise _invalid(name, raw, "expected true or false")
    if config_type in ("int", "long"):
        bits, low, high = (
            (32, INT_MIN, INT_MAX) if config_type == "int" else (64, LONG_MIN, LONG_MAX)
        )
        if isinstance(raw, int) and not isinstance(raw, bool):
            number = raw
        elif text is not None and _INTEGER.fullmatch(text):
            number = int(text)
        elif text is not None:
            raise _invalid(name, raw, f"not a {bits}-bit integer")
        else:
            raise _invalid(name, raw, f"expected a {bits}-bit integer, got {type(raw).__name__}")
        if not low <= number <= high:
            raise _invalid(name, raw, f"does not fit in a {bits}-bit integer")
        return number
    if config_type == "double":
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            try:
                double = float(raw)
            except OverflowError:
                raise _invalid(name, raw, "too large for a double") from None
        elif text is not None:
            parsed = _parse_java_double(text)
            if parsed is None:
                raise _invalid(name, raw, "not a number")
            double = parsed
        else:
            raise _invalid(name, raw, f"expected a number, got {type(raw).__name__}")
        if math.isnan(double):
            raise _invalid(name, raw, "NaN is not accepted")
        return double
    if config_type == "string":
        if text is None:
            raise _invalid(name, raw, f"expected a string, got {type(raw).__name__}")
        return text
    # list
    if text is not None:
        return () if text == "" else tuple(_LIST_SEPARATOR.split(text))
    if isinstance(raw, list | tuple) and all(isinstance(e, str) for e in raw):
        return tuple(e.strip(_JAVA_TRIM) for e in raw)
    raise _invalid(name, raw, "expected a comma-separated list")


def parse_value(definition: ConfigDef, raw: object) -> ConfigValue:
    """Parse and validate one value for ``definition``; :class:`ConfigError` if unacceptable."""
    if raw is None:
        raise ConfigError(f"Invalid value null for config {definition.name}: a value is required")
    value = _parse_typed(definition.name, definition.type, raw)
    if definition.validator is not None:
        reason = definition.validator.problem(value)
        if reason is not None:
            raise _invalid(definition.name, raw, reason)
    return value


def _java_digits(magnitude: float) -> tuple[str, int]:
    """Significant digits and decimal exponent (of the first digit) that Java prints.

    Like Python's ``repr``, Java (JDK 19+) picks the shortest decimal that reads back as the same
    double, the closest one among those. One difference: when a single digit suffices, Java still
    considers two-digit decimals and prints the closest (``Double.MIN_VALUE`` is ``4.9E-324``, not
    ``5.0E-324``).
    """
    shortest = Decimal(repr(magnitude)).normalize()
    _, digit_tuple, exponent = shortest.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    if len(digits) == 1:
        exact = Decimal(magnitude)
        two = exact.quantize(Decimal(1).scaleb(exact.adjusted() - 1), rounding=ROUND_HALF_EVEN)
        if float(two) == magnitude:
            candidate = two.normalize()
            _, digit_tuple, exponent = candidate.as_tuple()
            assert isinstance(exponent, int)
            digits = "".join(map(str, digit_tuple))
    return digits, exponent + len(digits) - 1


def java_double_to_string(value: float) -> str:
    """``Double.toString``: plain between 1e-3 and 1e7, else ``d.dddE<exp>``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits, exponent = _java_digits(abs(value))
    if 1e-3 <= abs(value) < 1e7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1 :] or "0"
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def render_value(config_type: ConfigType, value: ConfigValue) -> str:
    """A parsed value as Kafka's DescribeConfigs prints it (``ConfigDef.convertToString``)."""
    if config_type == "boolean":
        return "true" if value else "false"
    if config_type == "double":
        assert isinstance(value, float | int)
        return java_double_to_string(float(value))
    if config_type == "list":
        assert isinstance(value, tuple)
        return ",".join(value)
    return str(value)


def parse_config_assignments(items: Iterable[str]) -> dict[str, str]:
    """CLI ``NAME=VALUE`` strings -> ``{name: value}``; the value may itself contain ``=``."""
    result: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"Invalid config assignment {_show(item)}: expected NAME=VALUE")
        if name in result:
            raise ConfigError(f"Config {_show(name)} is assigned more than once")
        result[name] = value
    return result


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


# --------------------------------------------------------------------------------------------
# Broker config
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigSynonym:
    """One entry of a DescribeConfigs synonym list: where a value could come from."""

    name: str
    value: str
    source: ConfigSource


class BrokerConfig:
    """The validated store-wide settings, and the topic defaults they imply.

    Build with :meth:`from_dict`; instances are immutable.
    """

    cleaner_enable: bool
    cleaner_threads: int
    dedupe_buffer_size: int
    #: ``log.cleaner.io.buffer.load.factor``: the offset map's load factor, despite its name.
    io_buffer_load_factor: float
    io_buffer_size: int
    io_max_bytes_per_second: float
    cleaner_backoff_ms: int
    message_max_bytes: int
    retention_check_interval_ms: int
    recovery_point_checkpoint_interval_ms: int
    log_start_offset_checkpoint_interval_ms: int
    flush_scheduler_interval_ms: int
    num_recovery_threads_per_data_dir: int
    producer_id_expiration_ms: int
    initial_task_delay_ms: int
    segment_delete_delay_ms: int
    remote_storage_system_enable: bool

    _ACCESSORS: Final = {
        "cleaner_enable": "log.cleaner.enable",
        "cleaner_threads": "log.cleaner.threads",
        "dedupe_buffer_size": "log.cleaner.dedupe.buffer.size",
        "io_buffer_load_factor": "log.cleaner.io.buffer.load.factor",
        "io_buffer_size": "log.cleaner.io.buffer.size",
        "io_max_bytes_per_second": "log.cleaner.io.max.bytes.per.second",
        "cleaner_backoff_ms": "log.cleaner.backoff.ms",
        "message_max_bytes": "message.max.bytes",
        "retention_check_interval_ms": "log.retention.check.interval.ms",
        "recovery_point_checkpoint_interval_ms": "log.flush.offset.checkpoint.interval.ms",
        "log_start_offset_checkpoint_interval_ms": "log.flush.start.offset.checkpoint.interval.ms",
        "flush_scheduler_interval_ms": "log.flush.scheduler.interval.ms",
        "num_recovery_threads_per_data_dir": "num.recovery.threads.per.data.dir",
        "producer_id_expiration_ms": "producer.id.expiration.ms",
        "initial_task_delay_ms": "log.initial.task.delay.ms",
        "segment_delete_delay_ms": "log.segment.delete.delay.ms",
        "remote_storage_system_enable": "remote.log.storage.system.enable",
    }

    def __init__(
        self,
        values: Mapping[str, ConfigValue | None],
        explicit: frozenset[str],
        topic_defaults: Mapping[str, ConfigValue],
        topic_default_from: Mapping[str, str | None],
    ) -> None:
        """Internal: use :meth:`from_dict`."""
        setattr_ = object.__setattr__
        setattr_(self, "_values", MappingProxyType(dict(values)))
        setattr_(self, "_explicit", explicit)
        setattr_(self, "_topic_defaults", MappingProxyType(dict(topic_defaults)))
        setattr_(self, "_topic_default_from", MappingProxyType(dict(topic_default_from)))
        for attribute, name in self._ACCESSORS.items():
            setattr_(self, attribute, values[name])

    _values: Mapping[str, ConfigValue | None]
    _explicit: frozenset[str]
    _topic_defaults: Mapping[str, ConfigValue]
    _topic_default_from: Mapping[str, str | None]

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("BrokerConfig is immutable")

    @classmethod
    def from_dict(cls, mapping: Mapping[str, RawValue] | None = None) -> BrokerConfig:
        """Validate ``mapping`` (Kafka broker config names) and resolve the topic defaults."""
        mapping = mapping or {}
        for name in mapping:
            if name not in BROKER_CONFIGS:
                raise _unknown_broker_config(name)
        values: dict[str, ConfigValue | None] = {}
        for name, definition in BROKER_CONFIGS.items():
            values[name] = (
                parse_value(definition, mapping[name]) if name in mapping else definition.default
            )
        _check_broker_rules(values)
        defaults: dict[str, ConfigValue] = {}
        default_from: dict[str, str | None] = {}
        for name, definition in TOPIC_CONFIGS.items():
            value, synonym = _resolve_topic_default(definition, values)
            if synonym is not None and definition.validator is not None:
                # Kafka validates the derived defaults when it builds a LogConfig from them.
                reason = definition.validator.problem(value)
                if reason is not None:
                    raise ConfigError(
                        f"Invalid value {_show(mapping.get(synonym, values[synonym]))} for config "
                        f"{synonym}: as the default of {name} the value {reason}"
                    )
            defaults[name] = value
            default_from[name] = synonym if synonym in mapping else None
        _check_topic_rules(
            defaults,
            {},
            remote_system=bool(values["remote.log.storage.system.enable"]),
            store_wide=True,
        )
        return cls(values, frozenset(mapping), defaults, default_from)

    def get(self, name: str) -> ConfigValue | None:
        """The value of broker config ``name`` (``None`` for unset settings without a default)."""
        if name not in BROKER_CONFIGS:
            raise _unknown_broker_config(name)
        return self._values[name]

    def is_set(self, name: str) -> bool:
        """Whether ``name`` was given explicitly (rather than left at its default)."""
        return name in self._explicit

    def topic_defaults(self) -> dict[str, ConfigValue]:
        """Every topic config's default under these broker settings (lists are tuples)."""
        return dict(self._topic_defaults)

    def topic_default_source(self, name: str) -> tuple[ConfigSource, str | None]:
        """Where topic config ``name``'s default comes from, and the broker setting that set it."""
        synonym = self._topic_default_from[name]
        if synonym is None:
            return ConfigSource.DEFAULT_CONFIG, None
        return ConfigSource.STATIC_BROKER_CONFIG, synonym

    def synonyms_of(self, topic_config: str) -> list[ConfigSynonym]:
        """Kafka's DescribeConfigs synonym list for a topic config without override."""
        definition = TOPIC_CONFIGS[topic_config]
        found = []
        for synonym in definition.synonyms:
            if synonym.name in self._explicit:
                value = self._values[synonym.name]
                assert value is not None
                broker_type = BROKER_CONFIGS[synonym.name].type
                rendered = render_value(broker_type, value)
                found.append(
                    ConfigSynonym(synonym.name, rendered, ConfigSource.STATIC_BROKER_CONFIG)
                )
        for synonym in definition.synonyms:
            broker_def = BROKER_CONFIGS[synonym.name]
            if broker_def.default is not None:
                rendered = render_value(broker_def.type, broker_def.default)
                found.append(ConfigSynonym(synonym.name, rendered, ConfigSource.DEFAULT_CONFIG))
        return found

    @property
    def dedupe_buffer_size_per_thread(self) -> int:
        """Offset-map memory of one cleaner thread: an equal share, capped at 2**31 - 1."""
        return min(self.dedupe_buffer_size // max(self.cleaner_threads, 1), INT_MAX)

    @property
    def io_buffer_size_per_thread(self) -> int:
        """Size of each of a cleaner thread's two I/O buffers (read and write)."""
        return self.io_buffer_size // max(self.cleaner_threads, 1) // 2

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BrokerConfig) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __repr__(self) -> str:
        explicit = {n: self._values[n] for n in sorted(self._explicit)}
        return f"BrokerConfig.from_dict({explicit!r})"


@functools.cache
def _default_broker() -> BrokerConfig:
    return BrokerConfig.from_dict()


def _resolve_topic_default(
    definition: ConfigDef, broker_values: Mapping[str, ConfigValue | None]
) -> tuple[ConfigValue, str | None]:
    """(default, synonym that supplied it) following Kafka's synonym order and unit conversion."""
    for synonym in definition.synonyms:
        value = broker_values[synonym.name]
        if value is None:
            continue
        if synonym.to_ms != 1:
            assert isinstance(value, int)
            value = value * synonym.to_ms
        if definition.name == "retention.ms":
            assert isinstance(value, int)
            value = -1 if value < 0 else value  # KafkaConfig.logRetentionTimeMillis
        elif definition.name == "message.format.version":
            assert isinstance(value, str)
            value = canonical_metadata_version(value) or value
        return value, synonym.name
    assert definition.default is not None
    return definition.default, None


def _effective_broker(
    values: Mapping[str, ConfigValue | None], names: Sequence[tuple[str, int]]
) -> tuple[int, str]:
    for name, to_ms in names:
        value = values[name]
        if value is not None:
            assert isinstance(value, int)
            return value * to_ms, name
    raise AssertionError("the last synonym always has a default")


def _check_broker_rules(values: Mapping[str, ConfigValue | None]) -> None:
    """KafkaConfig's start-up checks that span settings."""
    roll_ms, roll_name = _effective_broker(
        values, [("log.roll.ms", 1), ("log.roll.hours", MS_PER_HOUR)]
    )
    if roll_ms < 1:
        raise _invalid(roll_name, values[roll_name], "the segment roll time must be at least 1 ms")
    jitter_ms, jitter_name = _effective_broker(
        values, [("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", MS_PER_HOUR)]
    )
    if jitter_ms < 0:
        raise _invalid(jitter_name, values[jitter_name], "the roll jitter must not be negative")
    retention_ms, retention_name = _effective_broker(
        values,
        [("log.retention.ms", 1), ("log.retention.minutes", MS_PER_MINUTE),
         ("log.retention.hours", MS_PER_HOUR)],
    )  # fmt: skip
    if retention_ms == 0:
        raise _invalid(
            retention_name, values[retention_name],
            "the retention time must be unlimited (negative) or at least 1 ms",
        )  # fmt: skip
    threads = values["log.cleaner.threads"]
    dedupe = values["log.cleaner.dedupe.buffer.size"]
    assert isinstance(threads, int) and isinstance(dedupe, int)
    if threads == 0:
        raise _invalid(
            "log.cleaner.threads", 0,
            "must be at least 1 because the dedupe buffer is shared among the threads "
            "(disable the cleaner with log.cleaner.enable=false instead)",
        )  # fmt: skip
    per_thread = dedupe // threads if dedupe >= 0 else -1  # Java's truncating division
    if per_thread <= MIN_DEDUPE_BUFFER_PER_THREAD:
        raise _invalid(
            "log.cleaner.dedupe.buffer.size", dedupe,
            f"each of the {threads} cleaner thread(s) needs more than 1 MiB "
            f"({MIN_DEDUPE_BUFFER_PER_THREAD} bytes) of it",
        )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Topic config
# --------------------------------------------------------------------------------------------


def _check_topic_rules(
    values: Mapping[str, ConfigValue],
    existing_overrides: Mapping[str, str],
    *,
    remote_system: bool,
    store_wide: bool = False,
) -> None:
    """Rules across configs (LogConfig.validateValues and the tiered-storage checks)."""
    min_lag = values["min.compaction.lag.ms"]
    max_lag = values["max.compaction.lag.ms"]
    assert isinstance(min_lag, int) and isinstance(max_lag, int)
    if min_lag > max_lag:
        raise ConfigError(
            f"Conflicting configs: min.compaction.lag.ms ({min_lag}) is greater than "
            f"max.compaction.lag.ms ({max_lag})"
        )
    if store_wide:
        if remote_system:
            _check_local_retention(values)
        return
    if values["remote.storage.enable"]:
        if not remote_system:
            raise ConfigError(
                "remote.storage.enable=true is refused: tiered storage is disabled in this store "
                "(remote.log.storage.system.enable=false)"
            )
        policy = values["cleanup.policy"]
        assert isinstance(policy, tuple)
        if "compact" in policy:
            raise ConfigError(
                "remote.storage.enable=true cannot be combined with cleanup.policy containing "
                "compact: remote log storage does not support compacted topics"
            )
        _check_local_retention(values)
        if values["remote.log.copy.disable"]:
            for local, total in (
                ("local.retention.bytes", "retention.bytes"),
                ("local.retention.ms", "retention.ms"),
            ):
                if values[local] != -2 and values[local] != values[total]:
                    raise ConfigError(
                        f"With remote.log.copy.disable=true, {local} ({values[local]}) must equal "
                        f"{total} ({values[total]}), since nothing more is copied to remote storage"
                    )
    else:
        was_enabled = existing_overrides.get("remote.storage.enable", "false").lower() == "true"
        if was_enabled and not values["remote.log.delete.on.disable"]:
            raise ConfigError(
                "remote.storage.enable cannot be turned off while keeping the remote data: "
                "set remote.log.delete.on.disable=true to delete it, or keep "
                "remote.storage.enable=true with remote.log.copy.disable=true to keep it read-only"
            )


def _check_local_retention(values: Mapping[str, ConfigValue]) -> None:
    """A tiered log's local limits must not exceed its total limits (-2 = "use the total")."""
    for local, total in (
        ("local.retention.bytes", "retention.bytes"),
        ("local.retention.ms", "retention.ms"),
    ):
        local_value, total_value = values[local], values[total]
        assert isinstance(local_value, int) and isinstance(total_value, int)
        # Kafka skips the check when the total is unlimited: retention.bytes <= -1 or
        # retention.ms == -1 (the only negative retention.ms it accepts).
        if total_value <= -1 or local_value == -2:
            continue
        if local_value == -1:
            raise _invalid(
                local, local_value, f"must not be -1 (unlimited) while {total} is {total_value}"
            )
        if local_value > total_value:
            raise _invalid(local, local_value, f"must not be more than {total} ({total_value})")


@dataclass(frozen=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer for a topic."""

    name: str
    value: str
    source: ConfigSource
    type: ConfigType
    synonyms: tuple[ConfigSynonym, ...]
    documentation: str
    read_only: bool = False
    is_sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


class LogConfig:
    """The immutable effective config of one topic: overrides merged over the broker defaults.

    Build with :meth:`create`; change with :meth:`altered`, which returns a new instance.
    """

    cleanup_policy: frozenset[str]
    compact: bool
    delete: bool
    segment_bytes: int
    segment_ms: int
    segment_jitter_ms: int
    segment_index_bytes: int
    index_interval_bytes: int
    retention_bytes: int
    retention_ms: int
    delete_retention_ms: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    min_cleanable_dirty_ratio: float
    file_delete_delay_ms: int
    max_message_bytes: int
    preallocate: bool
    compression_type: str
    message_timestamp_type: str
    #: Effective: message.timestamp.difference.max.ms where the before/after limit is left at
    #: its default (Kafka 3.x transition rule).
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int
    flush_messages: int
    flush_ms: int
    remote_storage_enable: bool
    broker: BrokerConfig

    _values: Mapping[str, ConfigValue]
    _overrides: Mapping[str, str]

    _INT_ATTRIBUTES: Final = {
        "segment_bytes": "segment.bytes",
        "segment_ms": "segment.ms",
        "segment_jitter_ms": "segment.jitter.ms",
        "segment_index_bytes": "segment.index.bytes",
        "index_interval_bytes": "index.interval.bytes",
        "retention_bytes": "retention.bytes",
        "retention_ms": "retention.ms",
        "delete_retention_ms": "delete.retention.ms",
        "min_compaction_lag_ms": "min.compaction.lag.ms",
        "max_compaction_lag_ms": "max.compaction.lag.ms",
        "file_delete_delay_ms": "file.delete.delay.ms",
        "max_message_bytes": "max.message.bytes",
        "flush_messages": "flush.messages",
        "flush_ms": "flush.ms",
    }

    def __init__(
        self, values: Mapping[str, ConfigValue], overrides: Mapping[str, str], broker: BrokerConfig
    ) -> None:
        """Internal: use :meth:`create` (this constructor does not validate)."""
        setattr_ = object.__setattr__
        setattr_(self, "_values", MappingProxyType(dict(values)))
        setattr_(self, "_overrides", MappingProxyType(dict(overrides)))
        setattr_(self, "broker", broker)
        for attribute, name in self._INT_ATTRIBUTES.items():
            setattr_(self, attribute, values[name])
        policy = values["cleanup.policy"]
        assert isinstance(policy, tuple)
        setattr_(self, "cleanup_policy", frozenset(policy))
        setattr_(self, "compact", "compact" in policy)
        setattr_(self, "delete", "delete" in policy)
        ratio = values["min.cleanable.dirty.ratio"]
        assert isinstance(ratio, float | int)
        setattr_(self, "min_cleanable_dirty_ratio", float(ratio))
        setattr_(self, "preallocate", values["preallocate"])
        setattr_(self, "compression_type", values["compression.type"])
        setattr_(self, "message_timestamp_type", values["message.timestamp.type"])
        setattr_(self, "remote_storage_enable", values["remote.storage.enable"])
        difference = values["message.timestamp.difference.max.ms"]
        for attribute, name in (
            ("message_timestamp_before_max_ms", "message.timestamp.before.max.ms"),
            ("message_timestamp_after_max_ms", "message.timestamp.after.max.ms"),
        ):
            setattr_(self, attribute, values[name] if values[name] != LONG_MAX else difference)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("LogConfig is immutable")

    @classmethod
    def create(
        cls, overrides: Mapping[str, RawValue] = _EMPTY, broker: BrokerConfig | None = None
    ) -> LogConfig:
        """Validate topic ``overrides`` and merge them over ``broker``'s topic defaults."""
        return cls._build(overrides, broker or _default_broker(), existing=_EMPTY_STR)

    @classmethod
    def _build(
        cls, overrides: Mapping[str, RawValue], broker: BrokerConfig, existing: Mapping[str, str]
    ) -> LogConfig:
        for name in overrides:
            if name not in TOPIC_CONFIGS:
                raise _unknown_topic_config(name)
        values = broker.topic_defaults()
        normalised: dict[str, str] = {}
        # Definition (alphabetical) order, so the same bad input always reports the same error.
        for name, definition in TOPIC_CONFIGS.items():
            if name in overrides:
                value = parse_value(definition, overrides[name])
                values[name] = value
                normalised[name] = render_value(definition.type, value)
        _check_topic_rules(values, existing, remote_system=broker.remote_storage_system_enable)
        return cls(values, normalised, broker)

    def altered(
        self,
        set: Mapping[str, RawValue] = _EMPTY,  # Kafka's operation name
        delete: Iterable[str] = (),
        *,
        append: Mapping[str, str] = _EMPTY_STR,
        subtract: Mapping[str, str] = _EMPTY_STR,
    ) -> LogConfig:
        """Kafka's incremental alter: SET, DELETE (back to the default), APPEND, SUBTRACT.

        The result is validated as a whole; on any error nothing changes (``self`` is immutable
        anyway) and :class:`ConfigError` says why. A name may appear in one operation only.
        APPEND/SUBTRACT work on list configs, starting from the topic's override or, without
        one, from the config's static default (as Kafka's controller does).
        """
        delete = list(delete)
        seen: dict[str, str] = {}
        for operation, names in (
            ("set", list(set)), ("delete", delete),
            ("append", list(append)), ("subtract", list(subtract)),
        ):  # fmt: skip
            for name in names:
                if name not in TOPIC_CONFIGS:
                    raise _unknown_topic_config(name)
                if name in seen:
                    raise ConfigError(
                        f"Config {name} appears in both {seen[name]} and {operation}; "
                        "give each config one operation"
                    )
                seen[name] = operation
        new: dict[str, RawValue] = dict(self._overrides)
        new.update(set)
        for name in delete:
            new.pop(name, None)
        for name, items in (*append.items(), *subtract.items()):
            definition = TOPIC_CONFIGS[name]
            if definition.type != "list":
                raise ConfigError(f"Cannot append to or subtract from {name}: it is not a list")
            current = self._overrides.get(name)
            if current is None:
                assert isinstance(definition.default, tuple)
                current = render_value("list", definition.default)
            elements = [e for e in current.split(",") if e]
            for item in items.split(","):
                if name in append and item not in elements:
                    elements.append(item)
                elif name in subtract and item in elements:
                    elements.remove(item)
            new[name] = ",".join(elements)
        return self._build(new, self.broker, existing=self._overrides)

    @property
    def overrides(self) -> dict[str, str]:
        """What the topic sets explicitly, rendered in Kafka's normal form."""
        return dict(self._overrides)

    def get(self, name: str) -> ConfigValue:
        """The effective parsed value of topic config ``name`` (lists are tuples)."""
        if name not in TOPIC_CONFIGS:
            raise _unknown_topic_config(name)
        return self._values[name]

    def value_string(self, name: str) -> str:
        return render_value(TOPIC_CONFIGS[name].type, self.get(name))

    def describe(self) -> dict[str, str]:
        """Every topic config name -> its effective value as Kafka's DescribeConfigs prints it."""
        return {name: self.value_string(name) for name in TOPIC_CONFIGS}

    def source(self, name: str) -> ConfigSource:
        """TOPIC_CONFIG (override), STATIC_BROKER_CONFIG (store setting) or DEFAULT_CONFIG."""
        if name not in TOPIC_CONFIGS:
            raise _unknown_topic_config(name)
        if name in self._overrides:
            return ConfigSource.TOPIC_CONFIG
        return self.broker.topic_default_source(name)[0]

    def is_default(self, name: str) -> bool:
        """True when neither the topic nor a store setting chose the value (Kafka's isDefault)."""
        return self.source(name) == ConfigSource.DEFAULT_CONFIG

    def describe_entries(self) -> list[ConfigEntry]:
        """The full DescribeConfigs view: value, source, synonyms and documentation per config."""
        entries = []
        for name, definition in TOPIC_CONFIGS.items():
            value = self.value_string(name)
            synonyms = self.broker.synonyms_of(name)
            if name in self._overrides:
                synonyms.insert(0, ConfigSynonym(name, value, ConfigSource.TOPIC_CONFIG))
            source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
            entries.append(
                ConfigEntry(name, value, source, definition.type, tuple(synonyms), definition.doc)
            )
        return entries

    @property
    def max_segment_ms(self) -> int:
        """Roll age: segment.ms, capped by max.compaction.lag.ms for compacted topics (spec 3)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        """Length a new segment file is created with: segment.bytes when preallocating."""
        return self.segment_bytes if self.preallocate else 0

    @property
    def compression_level(self) -> int | None:
        """The configured level of the topic's codec; None when the codec has no level here."""
        level_config = f"compression.{self.compression_type}.level"
        if level_config not in TOPIC_CONFIGS:
            return None
        level = self._values[level_config]
        assert isinstance(level, int)
        return level

    @property
    def local_retention_ms(self) -> int:
        value = self._values["local.retention.ms"]
        assert isinstance(value, int)
        return self.retention_ms if value == -2 else value

    @property
    def local_retention_bytes(self) -> int:
        value = self._values["local.retention.bytes"]
        assert isinstance(value, int)
        return self.retention_bytes if value == -2 else value

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, LogConfig)
            and self._values == other._values
            and self._overrides == other._overrides
        )

    def __hash__(self) -> int:
        return hash((tuple(self._values.items()), tuple(self._overrides.items())))

    def __repr__(self) -> str:
        return f"LogConfig(overrides={dict(self._overrides)!r})"
