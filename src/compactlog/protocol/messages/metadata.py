"""Metadata (key 3) and FindCoordinator (key 10): where topics, partitions and groups live.

Metadata v5 adds offline replicas, v7 leader epochs, v8 authorized operations (KIP-430), v9 is
the first flexible version, v10 adds topic ids (KIP-516), v11 drops the cluster's authorized
operations, v12 lets a request name topics by id only (a null name), v13 adds a top-level error
code.
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
    field,
    struct_array,
)

#: Kafka's "authorized operations not requested" (Integer.MIN_VALUE).
OPERATIONS_NOT_REQUESTED = -(2**31)

METADATA_REQUEST = Message(
    "MetadataRequest",
    3,
    "1-13",
    flexible="9+",
    fields=[
        # null = all topics (v1+); an empty list = none
        struct_array(
            "topics",
            "MetadataRequestTopic",
            [
                field("topic_id", UUID, "10+"),
                field("name", STRING, nullable="10+"),  # null: asked by id (v12+)
            ],
            nullable="1+",
        ),
        field("allow_auto_topic_creation", BOOL, "4+", default=True),
        field("include_cluster_authorized_operations", BOOL, "8-10"),
        field("include_topic_authorized_operations", BOOL, "8+"),
    ],
)

METADATA_RESPONSE = Message(
    "MetadataResponse",
    3,
    "1-13",
    flexible="9+",
    fields=[
        field("throttle_time_ms", INT32, "3+"),
        struct_array(
            "brokers",
            "MetadataResponseBroker",
            [
                field("node_id", INT32),
                field("host", STRING),
                field("port", INT32),
                field("rack", STRING, "1+", nullable="1+", default=None),
            ],
        ),
        field("cluster_id", STRING, "2+", nullable="2+", default=None),
        field("controller_id", INT32, "1+", default=-1),
        struct_array(
            "topics",
            "MetadataResponseTopic",
            [
                field("error_code", INT16),
                field("name", STRING, nullable="12+"),  # null: an unknown id (v12+)
                field("topic_id", UUID, "10+"),
                field("is_internal", BOOL, "1+"),
                struct_array(
                    "partitions",
                    "MetadataResponsePartition",
                    [
                        field("error_code", INT16),
                        field("partition_index", INT32),
                        field("leader_id", INT32),
                        field("leader_epoch", INT32, "7+", default=-1),
                        field("replica_nodes", ArrayOf(INT32)),
                        field("isr_nodes", ArrayOf(INT32)),
                        field("offline_replicas", ArrayOf(INT32), "5+"),
                    ],
                ),
                field("topic_authorized_operations", INT32, "8+", default=OPERATIONS_NOT_REQUESTED),
            ],
        ),
        field("cluster_authorized_operations", INT32, "8-10", default=OPERATIONS_NOT_REQUESTED),
        field("error_code", INT16, "13+"),
    ],
)

FIND_COORDINATOR_REQUEST = Message(
    "FindCoordinatorRequest",
    10,
    "0-1",
    flexible="none",
    fields=[
        field("key", STRING),
        field("key_type", INT8, "1+"),  # 0 group, 1 transaction
    ],
)

FIND_COORDINATOR_RESPONSE = Message(
    "FindCoordinatorResponse",
    10,
    "0-1",
    flexible="none",
    fields=[
        field("throttle_time_ms", INT32, "1+"),
        field("error_code", INT16),
        field("error_message", STRING, "1+", nullable="1+", default=None),
        field("node_id", INT32),
        field("host", STRING),
        field("port", INT32),
    ],
)

MetadataRequest = METADATA_REQUEST.cls
MetadataResponse = METADATA_RESPONSE.cls
FindCoordinatorRequest = FIND_COORDINATOR_REQUEST.cls
FindCoordinatorResponse = FIND_COORDINATOR_RESPONSE.cls
