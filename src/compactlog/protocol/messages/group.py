"""The classic group protocol: JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14),
DescribeGroups (15), ListGroups (16), DeleteGroups (42), and the group's offsets: OffsetCommit
(8), OffsetFetch (9), OffsetDelete (47, only v0, never flexible).

The subscription and assignment blobs (``metadata``, ``assignment``) are opaque bytes to the
broker: the leader client computes the assignment.

DescribeGroups v5 and ListGroups v3 are the first flexible versions; ListGroups v4 filters by
state and returns it, v5 filters by group type (KIP-848) and returns it; DescribeGroups v6
answers a group that does not exist with GROUP_ID_NOT_FOUND and a message (KIP-1043) where
earlier versions describe it as a "Dead" group without an error.
"""

from __future__ import annotations

from compactlog.protocol.compiler import Message
from compactlog.protocol.schema import (
    BOOL,
    BYTES,
    INT16,
    INT32,
    INT64,
    STRING,
    ArrayOf,
    field,
    struct_array,
)

JOIN_GROUP_REQUEST = Message(
    "JoinGroupRequest",
    11,
    "0-5",
    flexible="none",
    fields=[
        field("group_id", STRING),
        field("session_timeout_ms", INT32),
        field("rebalance_timeout_ms", INT32, "1+", default=-1),
        field("member_id", STRING),
        field("group_instance_id", STRING, "5+", nullable="5+", default=None),
        field("protocol_type", STRING),
        struct_array(
            "protocols",
            "JoinGroupRequestProtocol",
            [field("name", STRING), field("metadata", BYTES)],
        ),
    ],
)

JOIN_GROUP_RESPONSE = Message(
    "JoinGroupResponse",
    11,
    "0-5",
    flexible="none",
    fields=[
        field("throttle_time_ms", INT32, "2+"),
        field("error_code", INT16),
        field("generation_id", INT32, default=-1),
        field("protocol_name", STRING),
        field("leader", STRING),
        field("member_id", STRING),
        struct_array(
            "members",
            "JoinGroupResponseMember",
            [
                field("member_id", STRING),
                field("group_instance_id", STRING, "5+", nullable="5+", default=None),
                field("metadata", BYTES),
            ],
        ),
    ],
)

HEARTBEAT_REQUEST = Message(
    "HeartbeatRequest",
    12,
    "0-1",
    flexible="none",
    fields=[field("group_id", STRING), field("generation_id", INT32), field("member_id", STRING)],
)

HEARTBEAT_RESPONSE = Message(
    "HeartbeatResponse",
    12,
    "0-1",
    flexible="none",
    fields=[field("throttle_time_ms", INT32, "1+"), field("error_code", INT16)],
)

LEAVE_GROUP_REQUEST = Message(
    "LeaveGroupRequest",
    13,
    "0-1",
    flexible="none",
    fields=[field("group_id", STRING), field("member_id", STRING)],
)

LEAVE_GROUP_RESPONSE = Message(
    "LeaveGroupResponse",
    13,
    "0-1",
    flexible="none",
    fields=[field("throttle_time_ms", INT32, "1+"), field("error_code", INT16)],
)

SYNC_GROUP_REQUEST = Message(
    "SyncGroupRequest",
    14,
    "0-3",
    flexible="none",
    fields=[
        field("group_id", STRING),
        field("generation_id", INT32),
        field("member_id", STRING),
        field("group_instance_id", STRING, "3+", nullable="3+", default=None),
        struct_array(  # filled by the leader only
            "assignments",
            "SyncGroupRequestAssignment",
            [field("member_id", STRING), field("assignment", BYTES)],
        ),
    ],
)

SYNC_GROUP_RESPONSE = Message(
    "SyncGroupResponse",
    14,
    "0-3",
    flexible="none",
    fields=[
        field("throttle_time_ms", INT32, "1+"),
        field("error_code", INT16),
        field("assignment", BYTES),
    ],
)

DESCRIBE_GROUPS_REQUEST = Message(
    "DescribeGroupsRequest",
    15,
    "0-6",
    flexible="5+",
    fields=[
        field("groups", ArrayOf(STRING)),
        field("include_authorized_operations", BOOL, "3+"),
    ],
)

DESCRIBE_GROUPS_RESPONSE = Message(
    "DescribeGroupsResponse",
    15,
    "0-6",
    flexible="5+",
    fields=[
        field("throttle_time_ms", INT32, "1+"),
        struct_array(
            "groups",
            "DescribedGroup",
            [
                field("error_code", INT16),
                # v6+: GROUP_ID_NOT_FOUND, with this message, for a group that does not exist
                field("error_message", STRING, "6+", nullable="6+", default=None),
                field("group_id", STRING),
                field("group_state", STRING),
                field("protocol_type", STRING),
                field("protocol_data", STRING),
                struct_array(
                    "members",
                    "DescribedGroupMember",
                    [
                        field("member_id", STRING),
                        field("group_instance_id", STRING, "4+", nullable="4+", default=None),
                        field("client_id", STRING),
                        field("client_host", STRING),
                        field("member_metadata", BYTES),
                        field("member_assignment", BYTES),
                    ],
                ),
                # INT32_MIN: "not requested"
                field("authorized_operations", INT32, "3+", default=-(2**31)),
            ],
        ),
    ],
)

LIST_GROUPS_REQUEST = Message(
    "ListGroupsRequest",
    16,
    "0-5",
    flexible="3+",
    fields=[
        # empty: no filter; otherwise only groups in one of these states (v4+) or of one of
        # these types (v5+: "classic", "consumer", "share", "streams"), case-insensitive
        field("states_filter", ArrayOf(STRING), "4+"),
        field("types_filter", ArrayOf(STRING), "5+"),
    ],
)

LIST_GROUPS_RESPONSE = Message(
    "ListGroupsResponse",
    16,
    "0-5",
    flexible="3+",
    fields=[
        field("throttle_time_ms", INT32, "1+"),
        field("error_code", INT16),
        struct_array(
            "groups",
            "ListedGroup",
            [
                field("group_id", STRING),
                field("protocol_type", STRING),
                field("group_state", STRING, "4+"),
                field("group_type", STRING, "5+"),
            ],
        ),
    ],
)

OFFSET_COMMIT_REQUEST = Message(
    "OffsetCommitRequest",
    8,
    "2-3",
    flexible="none",
    fields=[
        field("group_id", STRING),
        field("generation_id_or_member_epoch", INT32, default=-1),  # -1: standalone commit
        field("member_id", STRING),
        field("retention_time_ms", INT64, default=-1),  # -1: the broker's default
        struct_array(
            "topics",
            "OffsetCommitRequestTopic",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "OffsetCommitRequestPartition",
                    [
                        field("partition_index", INT32),
                        field("committed_offset", INT64),
                        field("committed_metadata", STRING, nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)

OFFSET_COMMIT_RESPONSE = Message(
    "OffsetCommitResponse",
    8,
    "2-3",
    flexible="none",
    fields=[
        field("throttle_time_ms", INT32, "3+"),
        struct_array(
            "topics",
            "OffsetCommitResponseTopic",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "OffsetCommitResponsePartition",
                    [field("partition_index", INT32), field("error_code", INT16)],
                ),
            ],
        ),
    ],
)

OFFSET_FETCH_REQUEST = Message(
    "OffsetFetchRequest",
    9,
    "1-3",
    flexible="none",
    fields=[
        field("group_id", STRING),
        struct_array(  # null = every partition the group committed (v2+)
            "topics",
            "OffsetFetchRequestTopic",
            [field("name", STRING), field("partition_indexes", ArrayOf(INT32))],
            nullable="2+",
        ),
    ],
)

OFFSET_FETCH_RESPONSE = Message(
    "OffsetFetchResponse",
    9,
    "1-3",
    flexible="none",
    fields=[
        field("throttle_time_ms", INT32, "3+"),
        struct_array(
            "topics",
            "OffsetFetchResponseTopic",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "OffsetFetchResponsePartition",
                    [
                        field("partition_index", INT32),
                        field("committed_offset", INT64, default=-1),  # -1: no commit
                        field("metadata", STRING, nullable="0+"),
                        field("error_code", INT16),
                    ],
                ),
            ],
        ),
        field("error_code", INT16, "2+"),
    ],
)

DELETE_GROUPS_REQUEST = Message(
    "DeleteGroupsRequest",
    42,
    "0-2",
    flexible="2+",
    fields=[field("groups_names", ArrayOf(STRING))],
)

DELETE_GROUPS_RESPONSE = Message(
    "DeleteGroupsResponse",
    42,
    "0-2",
    flexible="2+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "results",
            "DeletableGroupResult",
            [field("group_id", STRING), field("error_code", INT16)],
        ),
    ],
)

OFFSET_DELETE_REQUEST = Message(
    "OffsetDeleteRequest",
    47,
    "0",
    flexible="none",
    fields=[
        field("group_id", STRING),
        struct_array(
            "topics",
            "OffsetDeleteRequestTopic",
            [
                field("name", STRING),
                struct_array(
                    "partitions", "OffsetDeleteRequestPartition", [field("partition_index", INT32)]
                ),
            ],
        ),
    ],
)

OFFSET_DELETE_RESPONSE = Message(
    "OffsetDeleteResponse",
    47,
    "0",
    flexible="none",
    fields=[
        field("error_code", INT16),
        field("throttle_time_ms", INT32),
        struct_array(
            "topics",
            "OffsetDeleteResponseTopic",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "OffsetDeleteResponsePartition",
                    [field("partition_index", INT32), field("error_code", INT16)],
                ),
            ],
        ),
    ],
)

JoinGroupRequest = JOIN_GROUP_REQUEST.cls
JoinGroupResponse = JOIN_GROUP_RESPONSE.cls
HeartbeatRequest = HEARTBEAT_REQUEST.cls
HeartbeatResponse = HEARTBEAT_RESPONSE.cls
LeaveGroupRequest = LEAVE_GROUP_REQUEST.cls
LeaveGroupResponse = LEAVE_GROUP_RESPONSE.cls
SyncGroupRequest = SYNC_GROUP_REQUEST.cls
SyncGroupResponse = SYNC_GROUP_RESPONSE.cls
DescribeGroupsRequest = DESCRIBE_GROUPS_REQUEST.cls
DescribeGroupsResponse = DESCRIBE_GROUPS_RESPONSE.cls
ListGroupsRequest = LIST_GROUPS_REQUEST.cls
ListGroupsResponse = LIST_GROUPS_RESPONSE.cls
DeleteGroupsRequest = DELETE_GROUPS_REQUEST.cls
DeleteGroupsResponse = DELETE_GROUPS_RESPONSE.cls
OffsetCommitRequest = OFFSET_COMMIT_REQUEST.cls
OffsetCommitResponse = OFFSET_COMMIT_RESPONSE.cls
OffsetFetchRequest = OFFSET_FETCH_REQUEST.cls
OffsetFetchResponse = OFFSET_FETCH_RESPONSE.cls
OffsetDeleteRequest = OFFSET_DELETE_REQUEST.cls
OffsetDeleteResponse = OFFSET_DELETE_RESPONSE.cls
