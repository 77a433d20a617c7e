"""What admin tools ask about the cluster: DescribeLogDirs (35), ListPartitionReassignments (46),
DescribeCluster (60) and DescribeTopicPartitions (75).

These APIs were born flexible or nearly so: DescribeLogDirs is flexible from v2 (v3 adds a
top-level error code, v4 the log directory's total and usable bytes, v5 whether it is cordoned);
the other three are flexible in every version. DescribeCluster v1 adds the endpoint type (1 =
brokers, 2 = controllers), v2 fenced brokers. DescribeTopicPartitions (KIP-966) pages through
the partitions of many topics: the request's ``cursor`` says where to start, the response's
``next_cursor`` where the next page starts (null: nothing left), and it reports each
partition's eligible leader replicas; both cursors are nullable single structs.
"""

from __future__ import annotations

from compactlog.protocol.compiler import Message
from compactlog.protocol.messages.metadata import OPERATIONS_NOT_REQUESTED
from compactlog.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    ArrayOf,
    StructDef,
    field,
    struct_array,
)

DESCRIBE_LOG_DIRS_REQUEST = Message(
    "DescribeLogDirsRequest",
    35,
    "1-5",
    flexible="2+",
    fields=[
        struct_array(  # null: every partition of every log directory
            "topics",
            "DescribableLogDirTopic",
            [field("topic", STRING), field("partitions", ArrayOf(INT32))],
            nullable="0+",
        ),
    ],
)

DESCRIBE_LOG_DIRS_RESPONSE = Message(
    "DescribeLogDirsResponse",
    35,
    "1-5",
    flexible="2+",
    fields=[
        field("throttle_time_ms", INT32),
        field("error_code", INT16, "3+"),
        struct_array(
            "results",
            "DescribeLogDirsResult",
            [
                field("error_code", INT16),
                field("log_dir", STRING),
                struct_array(
                    "topics",
                    "DescribeLogDirsTopic",
                    [
                        field("name", STRING),
                        struct_array(
                            "partitions",
                            "DescribeLogDirsPartition",
                            [
                                field("partition_index", INT32),
                                field("partition_size", INT64),
                                field("offset_lag", INT64),
                                field("is_future_key", BOOL),
                            ],
                        ),
                    ],
                ),
                field("total_bytes", INT64, "4+", default=-1),
                field("usable_bytes", INT64, "4+", default=-1),
                field("is_cordoned", BOOL, "5+"),
            ],
        ),
    ],
)

LIST_PARTITION_REASSIGNMENTS_REQUEST = Message(
    "ListPartitionReassignmentsRequest",
    46,
    "0",
    flexible="0+",
    fields=[
        field("timeout_ms", INT32, default=60000),
        struct_array(  # null: every reassignment in progress
            "topics",
            "ListPartitionReassignmentsTopics",
            [field("name", STRING), field("partition_indexes", ArrayOf(INT32))],
            nullable="0+",
            default=None,
        ),
    ],
)

LIST_PARTITION_REASSIGNMENTS_RESPONSE = Message(
    "ListPartitionReassignmentsResponse",
    46,
    "0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", INT32),
        field("error_code", INT16),
        field("error_message", STRING, nullable="0+", default=None),
        struct_array(
            "topics",
            "OngoingTopicReassignment",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "OngoingPartitionReassignment",
                    [
                        field("partition_index", INT32),
                        field("replicas", ArrayOf(INT32)),
                        field("adding_replicas", ArrayOf(INT32)),
                        field("removing_replicas", ArrayOf(INT32)),
                    ],
                ),
            ],
        ),
    ],
)

#: The endpoints DescribeCluster v1+ may be asked about.
ENDPOINT_TYPE_BROKERS = 1
ENDPOINT_TYPE_CONTROLLERS = 2

DESCRIBE_CLUSTER_REQUEST = Message(
    "DescribeClusterRequest",
    60,
    "0-2",
    flexible="0+",
    fields=[
        field("include_cluster_authorized_operations", BOOL),
        field("endpoint_type", INT8, "1+", default=ENDPOINT_TYPE_BROKERS),
        field("include_fenced_brokers", BOOL, "2+"),
    ],
)

DESCRIBE_CLUSTER_RESPONSE = Message(
    "DescribeClusterResponse",
    60,
    "0-2",
    flexible="0+",
    fields=[
        field("throttle_time_ms", INT32),
        field("error_code", INT16),
        field("error_message", STRING, nullable="0+", default=None),
        field("endpoint_type", INT8, "1+", default=ENDPOINT_TYPE_BROKERS),
        field("cluster_id", STRING),
        field("controller_id", INT32, default=-1),
        struct_array(
            "brokers",
            "DescribeClusterBroker",
            [
                field("broker_id", INT32),
                field("host", STRING),
                field("port", INT32),
                field("rack", STRING, nullable="0+", default=None),
                field("is_fenced", BOOL, "2+"),
            ],
        ),
        field("cluster_authorized_operations", INT32, default=OPERATIONS_NOT_REQUESTED),
    ],
)


def _cursor(name: str) -> StructDef:
    return StructDef(name, [field("topic_name", STRING), field("partition_index", INT32)])


DESCRIBE_TOPIC_PARTITIONS_REQUEST = Message(
    "DescribeTopicPartitionsRequest",
    75,
    "0",
    flexible="0+",
    fields=[
        struct_array("topics", "TopicRequest", [field("name", STRING)]),
        field("response_partition_limit", INT32, default=2000),
        field("cursor", _cursor("Cursor"), nullable="0+", default=None),
    ],
)

DESCRIBE_TOPIC_PARTITIONS_RESPONSE = Message(
    "DescribeTopicPartitionsResponse",
    75,
    "0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "topics",
            "DescribeTopicPartitionsResponseTopic",
            [
                field("error_code", INT16),
                field("name", STRING, nullable="0+"),
                field("topic_id", UUID),
                field("is_internal", BOOL),
                struct_array(
                    "partitions",
                    "DescribeTopicPartitionsResponsePartition",
                    [
                        field("error_code", INT16),
                        field("partition_index", INT32),
                        field("leader_id", INT32),
                        field("leader_epoch", INT32, default=-1),
                        field("replica_nodes", ArrayOf(INT32)),
                        field("isr_nodes", ArrayOf(INT32)),
                        field(
                            "eligible_leader_replicas",
                            ArrayOf(INT32),
                            nullable="0+",
                            default=None,
                        ),
                        field("last_known_elr", ArrayOf(INT32), nullable="0+", default=None),
                        field("offline_replicas", ArrayOf(INT32)),
                    ],
                ),
                field("topic_authorized_operations", INT32, default=OPERATIONS_NOT_REQUESTED),
            ],
        ),
        field("next_cursor", _cursor("Cursor"), nullable="0+", default=None),
    ],
)

DescribeLogDirsRequest = DESCRIBE_LOG_DIRS_REQUEST.cls
DescribeLogDirsResponse = DESCRIBE_LOG_DIRS_RESPONSE.cls
ListPartitionReassignmentsRequest = LIST_PARTITION_REASSIGNMENTS_REQUEST.cls
ListPartitionReassignmentsResponse = LIST_PARTITION_REASSIGNMENTS_RESPONSE.cls
DescribeClusterRequest = DESCRIBE_CLUSTER_REQUEST.cls
DescribeClusterResponse = DESCRIBE_CLUSTER_RESPONSE.cls
DescribeTopicPartitionsRequest = DESCRIBE_TOPIC_PARTITIONS_REQUEST.cls
DescribeTopicPartitionsResponse = DESCRIBE_TOPIC_PARTITIONS_RESPONSE.cls
