"""The store-wide settings: :class:`BrokerConfig`, and the topic defaults its synonyms imply.

:meth:`BrokerConfig.from_dict` validates Kafka broker config names and values, runs the broker
start-up rules (:mod:`compactlog.storage.config.rules`) and resolves every topic config's default
from its broker synonyms (step 2 of the order in :mod:`compactlog.storage.config`).
:class:`ConfigSynonym` is one entry of the DescribeConfigs synonym list it answers for a topic
config without override.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from compactlog.errors import ConfigError
from compactlog.storage.config.defs import (
    BROKER_CONFIGS,
    INT_MAX,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigSource,
    ConfigValue,
    RawValue,
    _show,
    _unknown_broker_config,
    canonical_metadata_version,
)
from compactlog.storage.config.rules import _check_broker_rules, _check_topic_rules
from compactlog.storage.config.values import parse_value, render_value


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
