"""One topic's effective config: :class:`LogConfig`, and its DescribeConfigs rows.

:class:`LogConfig` merges a topic's overrides over a :class:`BrokerConfig`'s topic defaults,
validates the result as a whole (:mod:`compactlog.storage.config.rules`) and answers
DescribeConfigs with one :class:`ConfigEntry` per topic config. The package docstring
(:mod:`compactlog.storage.config`) tells the resolution order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from compactlog.errors import ConfigError
from compactlog.storage.config.broker_config import BrokerConfig, ConfigSynonym, _default_broker
from compactlog.storage.config.defs import (
    LONG_MAX,
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigType,
    ConfigValue,
    RawValue,
    _unknown_topic_config,
)
from compactlog.storage.config.rules import _check_topic_rules
from compactlog.storage.config.values import parse_value, render_value

_EMPTY: Final[Mapping[str, RawValue]] = MappingProxyType({})
_EMPTY_STR: Final[Mapping[str, str]] = MappingProxyType({})


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
