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

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> GroupCoordinatorConfig:
        """Read the settings above by their Kafka names; other names are not ours and ignored."""
        values: dict[str, int] = {}
        for name, field in _PROPERTY_NAMES.items():
            if name in props:
                try:
                    values[field] = int(props[name])
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"{name} must be an integer, got {props[name]!r}") from exc
        config = cls(**values)
        if config.group_min_session_timeout_ms > config.group_max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
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
}
