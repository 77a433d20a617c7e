"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe
(69), flexible in every version, as Kafka 4.4 declares them.

ConsumerGroupHeartbeat v1 adds ``subscribed_topic_regex``; librdkafka speaks only v1.
ConsumerGroupDescribe v1 adds each member's ``member_type`` (-1 unknown, 0 classic, 1 consumer).
Assignments name topics by topic id (a UUID), as Metadata v10+ reports them. The response's
``assignment`` is a nullable struct: null when the assignment did not change.
"""

from __future__ import annotations

from compactlog.protocol.compiler import Message
from compactlog.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    UUID,
    ArrayOf,
    StructDef,
    field,
    struct_array,
)

#: ``authorized_operations`` when they were not asked for.
OPERATIONS_NOT_REQUESTED = -(2**31)

CONSUMER_GROUP_HEARTBEAT_REQUEST = Message(
    "ConsumerGroupHeartbeatRequest",
    68,
    "0-1",
    flexible="0+",
    fields=[
        field("group_id", STRING),
        field("member_id", STRING),
        # 0 to join, -1 to leave, -2 for a static member that will come back
        field("member_epoch", INT32),
        field("instance_id", STRING, nullable="0+", default=None),
        field("rack_id", STRING, nullable="0+", default=None),
        field("rebalance_timeout_ms", INT32, default=-1),  # -1: unchanged
        # null in every field below: unchanged since the last heartbeat
        field("subscribed_topic_names", ArrayOf(STRING), nullable="0+", default=None),
        field("subscribed_topic_regex", STRING, "1+", nullable="1+", default=None),
        field("server_assignor", STRING, nullable="0+", default=None),
        struct_array(
            "topic_partitions",
            "TopicPartitions",
            [field("topic_id", UUID), field("partitions", ArrayOf(INT32))],
            nullable="0+",
            default=None,
        ),
    ],
)

_HEARTBEAT_ASSIGNMENT = StructDef(
    "Assignment",
    [
        struct_array(
            "topic_partitions",
            "TopicPartitions",
            [field("topic_id", UUID), field("partitions", ArrayOf(INT32))],
        )
    ],
)

CONSUMER_GROUP_HEARTBEAT_RESPONSE = Message(
    "ConsumerGroupHeartbeatResponse",
    68,
    "0-1",
    flexible="0+",
    fields=[
        field("throttle_time_ms", INT32),
        field("error_code", INT16),
        field("error_message", STRING, nullable="0+", default=None),
        field("member_id", STRING, nullable="0+", default=None),
        field("member_epoch", INT32),
        field("heartbeat_interval_ms", INT32),
        field("assignment", _HEARTBEAT_ASSIGNMENT, nullable="0+", default=None),
    ],
)

CONSUMER_GROUP_DESCRIBE_REQUEST = Message(
    "ConsumerGroupDescribeRequest",
    69,
    "0-1",
    flexible="0+",
    fields=[
        field("group_ids", ArrayOf(STRING)),
        field("include_authorized_operations", BOOL),
    ],
)


_DESCRIBED_ASSIGNMENT = StructDef(
    "Assignment",
    [
        struct_array(
            "topic_partitions",
            "TopicPartitions",
            [
                field("topic_id", UUID),
                field("topic_name", STRING),
                field("partitions", ArrayOf(INT32)),
            ],
        )
    ],
)


CONSUMER_GROUP_DESCRIBE_RESPONSE = Message(
    "ConsumerGroupDescribeResponse",
    69,
    "0-1",
    flexible="0+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "groups",
            "DescribedGroup",
            [
                field("error_code", INT16),
                field("error_message", STRING, nullable="0+", default=None),
                field("group_id", STRING),
                field("group_state", STRING),
                field("group_epoch", INT32),
                field("assignment_epoch", INT32),
                field("assignor_name", STRING),
                struct_array(
                    "members",
                    "Member",
                    [
                        field("member_id", STRING),
                        field("instance_id", STRING, nullable="0+", default=None),
                        field("rack_id", STRING, nullable="0+", default=None),
                        field("member_epoch", INT32),
                        field("client_id", STRING),
                        field("client_host", STRING),
                        field("subscribed_topic_names", ArrayOf(STRING)),
                        field("subscribed_topic_regex", STRING, nullable="0+", default=None),
                        field("assignment", _DESCRIBED_ASSIGNMENT),
                        field("target_assignment", _DESCRIBED_ASSIGNMENT),
                        field("member_type", INT8, "1+", default=-1),
                    ],
                ),
                field("authorized_operations", INT32, default=OPERATIONS_NOT_REQUESTED),
            ],
        ),
    ],
)

ConsumerGroupHeartbeatRequest = CONSUMER_GROUP_HEARTBEAT_REQUEST.cls
ConsumerGroupHeartbeatResponse = CONSUMER_GROUP_HEARTBEAT_RESPONSE.cls
ConsumerGroupDescribeRequest = CONSUMER_GROUP_DESCRIBE_REQUEST.cls
ConsumerGroupDescribeResponse = CONSUMER_GROUP_DESCRIBE_RESPONSE.cls
