"""What the group coordinator returns: result types and what a failed write tells the client (the
error codes are Kafka's, from :mod:`compactlog.errors`; its settings are in :mod:`.config`).

The results mirror the fields of Kafka's responses (JoinGroup, SyncGroup, LeaveGroup,
OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups) as plain dataclasses, so
the request handlers only copy fields into the wire format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from compactlog.errors import (
    COORDINATOR_NOT_AVAILABLE,
    KAFKA_STORAGE_ERROR,
    MESSAGE_TOO_LARGE,
    NONE,
    NOT_COORDINATOR,
    RECORD_LIST_TOO_LARGE,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
)

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
    #: Why a "Dead" group is not there, when not simply because it does not exist (DescribeGroups
    #: v6+ says so: a KIP-848 consumer group "is not a classic group").
    not_found_message: str | None = None


class GroupError(NamedTuple):
    group_id: str
    error_code: int
