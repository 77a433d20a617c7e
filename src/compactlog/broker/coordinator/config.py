"""The group coordinator's settings by their Kafka names, with Kafka's defaults (Kafka's
``GroupCoordinatorConfig``): read from the broker's properties by
:mod:`compactlog.broker.settings`, handed to :class:`~.service.GroupCoordinator`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compactlog.broker.coordinator.offsets_topic import (
    DEFAULT_OFFSETS_TOPIC_PARTITIONS,
    DEFAULT_OFFSETS_TOPIC_SEGMENT_BYTES,
)
from compactlog.errors import ConfigError


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """The coordinator's settings, Kafka's defaults (``GroupCoordinatorConfig``)."""

    #: ``group.min.session.timeout.ms``: a shorter session means more false expiries.
    group_min_session_timeout_ms: int = 6000
    #: ``group.max.session.timeout.ms``: a longer one means dead consumers are noticed late.
    group_max_session_timeout_ms: int = 1_800_000
    #: ``group.initial.rebalance.delay.ms``: how long a new group waits for more members.
    group_initial_rebalance_delay_ms: int = 3000
    #: ``group.max.size``.
    group_max_size: int = 2**31 - 1
    #: ``offset.metadata.max.bytes`` (counted, like Kafka, in UTF-16 code units).
    offset_metadata_max_bytes: int = 4096
    #: ``offsets.retention.minutes``: seven days.
    offsets_retention_minutes: int = 7 * 24 * 60
    #: ``offsets.retention.check.interval.ms``.
    offsets_retention_check_interval_ms: int = 600_000
    #: ``offsets.topic.num.partitions`` (used only when the topic is created).
    offsets_topic_num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS
    #: ``offsets.topic.segment.bytes``.
    offsets_topic_segment_bytes: int = DEFAULT_OFFSETS_TOPIC_SEGMENT_BYTES
    #: Kafka's fixed ``CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS``: a new member's parked JoinGroup
    #: is dropped after five minutes, so that clients that gave up do not pile up.
    new_member_join_timeout_ms: int = 300_000
    #: ``group.consumer.session.timeout.ms``: a KIP-848 member silent this long is fenced.
    group_consumer_session_timeout_ms: int = 45_000
    #: ``group.consumer.heartbeat.interval.ms``: how often KIP-848 members heartbeat.
    group_consumer_heartbeat_interval_ms: int = 5000
    #: ``group.consumer.max.size``.
    group_consumer_max_size: int = 2**31 - 1
    #: ``group.consumer.assignors``: the server-side assignors; the first is the default.
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    #: ``group.consumer.migration.policy`` (Kafka's default; see :mod:`.service` for what
    #: compactlog does with non-empty groups).
    group_consumer_migration_policy: str = "bidirectional"

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> GroupCoordinatorConfig:
        """Read the settings above by their Kafka names; other names are not ours and ignored."""
        values: dict[str, Any] = {}
        if "group.consumer.assignors" in props:
            values["group_consumer_assignors"] = _assignors(props["group.consumer.assignors"])
        if "group.consumer.migration.policy" in props:
            policy = str(props["group.consumer.migration.policy"]).strip().lower()
            if policy not in MIGRATION_POLICIES:
                raw = props["group.consumer.migration.policy"]
                raise ConfigError(
                    "group.consumer.migration.policy must be one of "
                    f"{', '.join(MIGRATION_POLICIES)}, got {raw!r}"
                )
            values["group_consumer_migration_policy"] = policy
        for name, field in _PROPERTY_NAMES.items():
            if name in props:
                try:
                    values[field] = int(props[name])
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"{name} must be an integer, got {props[name]!r}") from exc
        config = cls(**values)
        if config.group_min_session_timeout_ms > config.group_max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
        if config.group_consumer_heartbeat_interval_ms >= config.group_consumer_session_timeout_ms:
            raise ConfigError(
                "group.consumer.heartbeat.interval.ms must be less than "
                "group.consumer.session.timeout.ms"
            )
        if config.group_consumer_heartbeat_interval_ms < 1:
            raise ConfigError("group.consumer.heartbeat.interval.ms must be at least 1")
        if config.group_consumer_max_size < 1:
            raise ConfigError("group.consumer.max.size must be at least 1")
        if config.offsets_topic_num_partitions < 1:
            raise ConfigError("offsets.topic.num.partitions must be at least 1")
        return config


_PROPERTY_NAMES = {
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.max.size": "group_max_size",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offsets.topic.segment.bytes": "offsets_topic_segment_bytes",
    "group.consumer.session.timeout.ms": "group_consumer_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "group_consumer_heartbeat_interval_ms",
    "group.consumer.max.size": "group_consumer_max_size",
}

#: ``group.consumer.migration.policy`` values (Kafka's ``ConsumerGroupMigrationPolicy``).
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
#: The server-side assignors compactlog has (:mod:`.assignors`).
KNOWN_ASSIGNORS = ("uniform", "range")


def _assignors(raw: Any) -> tuple[str, ...]:
    names = raw.split(",") if isinstance(raw, str) else list(raw)
    assignors = tuple(str(n).strip() for n in names if str(n).strip())
    if not assignors:
        raise ConfigError("group.consumer.assignors must name at least one assignor")
    for name in assignors:
        if name not in KNOWN_ASSIGNORS:
            raise ConfigError(
                f"group.consumer.assignors: unknown assignor {name!r} (known: "
                f"{', '.join(KNOWN_ASSIGNORS)}; Kafka's class names are not accepted)"
            )
    return assignors
