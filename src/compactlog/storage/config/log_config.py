"""The effective configs: :class:`BrokerConfig` for the store, :class:`LogConfig` for one topic.

:class:`BrokerConfig` validates the store-wide settings and resolves every topic config's default
from its broker synonyms; :class:`LogConfig` merges a topic's overrides over those defaults and
answers DescribeConfigs (:class:`ConfigEntry`, :class:`ConfigSynonym`). The rules across configs
(KafkaConfig's start-up checks, ``LogConfig.validateValues`` and the tiered-storage checks) run on
the whole effective config. The package docstring (:mod:`compactlog.storage.config`) tells the
resolution order.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from compactlog.errors import ConfigError
from compactlog.storage.config.defs import (
    BROKER_CONFIGS,
    INT_MAX,
    LONG_MAX,
    MS_PER_HOUR,
    MS_PER_MINUTE,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigSource,
    ConfigType,
    ConfigValue,
    RawValue,
    _show,
    _unknown_broker_config,
    _unknown_topic_config,
    canonical_metadata_version,
)
from compactlog.storage.config.values import (
    _invalid,
    parse_value,
    render_value,
)

#: Each cleaner thread needs more than this much dedupe memory (KafkaConfig's start-up check).
MIN_DEDUPE_BUFFER_PER_THREAD: Final = 1024 * 1024

_EMPTY: Final[Mapping[str, RawValue]] = MappingProxyType({})
_EMPTY_STR: Final[Mapping[str, str]] = MappingProxyType({})


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
    producer_id_expiration_check_interval_ms: int
    initial_task_delay_ms: int
    segment_delete_delay_ms: int
    remote_storage_system_enable: bool
    offset_map_type: str

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
        "producer_id_expiration_check_interval_ms": "producer.id.expiration.check.interval.ms",
        "initial_task_delay_ms": "log.initial.task.delay.ms",
        "segment_delete_delay_ms": "log.segment.delete.delay.ms",
        "remote_storage_system_enable": "remote.log.storage.system.enable",
        "offset_map_type": "compactlog.cleaner.offset.map",
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
        """Kafka's DescribeConfigs synonym list for a topic config without override.

        As in Kafka (``ConfigHelper.configSynonyms``), the list starts at the first entry of the
        *primary* broker setting: entries of lower-priority settings before it are dropped, so a
        config whose primary setting has no default and is not set (``retention.ms``, whose
        ``log.retention.ms`` is unset while ``log.retention.hours`` supplies the value) has no
        synonyms and reports DEFAULT_CONFIG, even when a lower setting was given explicitly.
        """
        definition = TOPIC_CONFIGS[topic_config]
        found: list[ConfigSynonym] = []
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
        primary = definition.synonym
        for i, entry in enumerate(found):
            if entry.name == primary:
                return found[i:]
        return []

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
                operation = "APPEND" if name in append else "SUBTRACT"
                raise ConfigError(
                    f"Cannot append to or subtract from {name}: it is not a list",
                    kafka_message=(
                        f"Can't {operation} to key {name} because its type is not LIST."
                    ),
                )
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
