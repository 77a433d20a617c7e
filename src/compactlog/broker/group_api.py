"""What the group coordinator takes and returns: configs and result types (the error codes are
Kafka's, from :mod:`compactlog.protocol.codes`).

The results mirror the fields of Kafka's responses (JoinGroup, SyncGroup, LeaveGroup,
OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups) as plain dataclasses, so
the request handlers only copy fields into the wire format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from compactlog.broker.offsets_topic import (
    DEFAULT_OFFSETS_TOPIC_PARTITIONS,
    DEFAULT_OFFSETS_TOPIC_SEGMENT_BYTES,
)
from compactlog.errors import ConfigError
from compactlog.protocol.codes import (
    COORDINATOR_NOT_AVAILABLE,
    KAFKA_STORAGE_ERROR,
    MESSAGE_TOO_LARGE,
    NONE,
    NOT_COORDINATOR,
    RECORD_LIST_TOO_LARGE,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
)

if TYPE_CHECKING:
    from compactlog.broker.classic_group import ClassicGroup
    from compactlog.broker.delayed import Timer

#: ``JoinGroupRequest.UNKNOWN_MEMBER_ID``: the member id of a member that has none yet.
NO_MEMBER_ID = ""
#: A generation (or OffsetFetch offset) that is not there.
NO_GENERATION = -1
NO_OFFSET = -1


def append_error_to_response_error(code: int) -> int:
    """What a failed write to ``__consumer_offsets`` tells the client
    (``GroupMetadataManager.appendGroupMetadataErrorToResponseError``)."""
    if code == UNKNOWN_TOPIC_OR_PARTITION:
        return COORDINATOR_NOT_AVAILABLE
    if code == KAFKA_STORAGE_ERROR:
        return NOT_COORDINATOR
    if code in (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE):
        return UNKNOWN_SERVER_ERROR
    return code


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


# --- results ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class JoinGroupMember:
    """One member as the leader's JoinGroup response lists it."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResult:
    error_code: int
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = NO_MEMBER_ID
    skip_assignment: bool = False
    member_id: str = NO_MEMBER_ID
    #: Every member with its metadata for the chosen protocol: the leader's response only.
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True)
class SyncGroupResult:
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class MemberIdentity(NamedTuple):
    """A member named in a LeaveGroup request (v3+ may name several, or name one by instance)."""

    member_id: str
    group_instance_id: str | None = None


class MemberResult(NamedTuple):
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass(frozen=True)
class LeaveGroupResult:
    error_code: int
    members: tuple[MemberResult, ...] = ()


class OffsetCommitPartition(NamedTuple):
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class PartitionResult(NamedTuple):
    topic: str
    partition: int
    error_code: int


class OffsetFetchPartition(NamedTuple):
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error_code: int = NONE


@dataclass(frozen=True)
class OffsetFetchResult:
    error_code: int
    partitions: tuple[OffsetFetchPartition, ...] = ()


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    #: The subscription for the chosen protocol; empty unless the group is Stable.
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    error_code: int
    group_id: str
    state: str
    protocol_type: str = ""
    #: The chosen protocol; empty unless the group is Stable.
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()


class GroupError(NamedTuple):
    group_id: str
    error_code: int


# --- what the managers need from the coordinator -----------------------------------------
class Record(NamedTuple):
    """A ``__consumer_offsets`` record to write: key and value bytes (None: a tombstone)."""

    key: bytes
    value: bytes | None


class CoordinatorRuntime(Protocol):
    """The coordinator as its two managers see it (Kafka's coordinator runtime and shard)."""

    config: GroupCoordinatorConfig
    groups: dict[str, ClassicGroup]
    timer: Timer

    @property
    def now(self) -> int: ...

    def append(self, group_id: str, records: Sequence[Record]) -> int:
        """Write ``records`` to the group's partition as one batch; returns an error code."""
        ...

    def get_or_create_group(self, group_id: str) -> ClassicGroup: ...

    def remove_group(self, group_id: str) -> None: ...
