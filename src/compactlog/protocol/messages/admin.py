"""Admin APIs: CreateTopics (19), DeleteTopics (20), DeleteRecords (21), DescribeConfigs (32),
AlterConfigs (33), CreatePartitions (37), ElectLeaders (43), IncrementalAlterConfigs (44) and
AlterPartitionReassignments (45).

Resource types in the config APIs: 2 = topic, 4 = broker. Config sources in DescribeConfigs:
1 = dynamic topic config, 3 = dynamic cluster-wide broker default, 4 = static broker config,
5 = default. Incremental operations: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.

Versions: CreateTopics v4 lets partitions and replication factor be -1, "the broker's default"
(KIP-464), v5 (flexible) returns the new topic's partitions, replication factor and configs,
v7 its topic id. DeleteTopics v4 is flexible, v5 adds an error message, v6 names topics by id
or name. DeleteRecords v2, AlterConfigs v2 and IncrementalAlterConfigs v1 are their first
flexible versions with nothing else new. DescribeConfigs v3 adds each config's type and
documentation, v4 is flexible. CreatePartitions v2 is flexible, v3 only marks that a throttled
request gets THROTTLING_QUOTA_EXCEEDED. ElectLeaders v1 adds the election type (0 preferred,
1 unclean) and a top-level error code, v2 is flexible. AlterPartitionReassignments v1 (KIP-860)
adds ``allow_replication_factor_change``.
"""

from __future__ import annotations

from compactlog.protocol.compiler import Message
from compactlog.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    ArrayOf,
    Field,
    field,
    struct_array,
)

CREATE_TOPICS_REQUEST = Message(
    "CreateTopicsRequest",
    19,
    "2-7",
    flexible="5+",
    fields=[
        struct_array(
            "topics",
            "CreatableTopic",
            [
                field("name", STRING),
                field("num_partitions", INT32),
                field("replication_factor", INT16),
                struct_array(
                    "assignments",
                    "CreatableReplicaAssignment",
                    [field("partition_index", INT32), field("broker_ids", ArrayOf(INT32))],
                ),
                struct_array(
                    "configs",
                    "CreatableTopicConfig",
                    [field("name", STRING), field("value", STRING, nullable="0+")],
                ),
            ],
        ),
        field("timeout_ms", INT32, default=60000),
        field("validate_only", BOOL),
    ],
)

CREATE_TOPICS_RESPONSE = Message(
    "CreateTopicsResponse",
    19,
    "2-7",
    flexible="5+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "topics",
            "CreatableTopicResult",
            [
                field("name", STRING),
                field("topic_id", UUID, "7+"),
                field("error_code", INT16),
                field("error_message", STRING, nullable="0+", default=None),
                # why the configs below are missing, if they are (KIP-525)
                field("topic_config_error_code", INT16, "5+", tag=0, tagged="5+"),
                field("num_partitions", INT32, "5+", default=-1),
                field("replication_factor", INT16, "5+", default=-1),
                struct_array(
                    "configs",
                    "CreatableTopicConfigs",
                    [
                        field("name", STRING),
                        field("value", STRING, nullable="5+"),
                        field("read_only", BOOL),
                        field("config_source", INT8, default=-1),
                        field("is_sensitive", BOOL),
                    ],
                    "5+",
                    nullable="5+",
                ),
            ],
        ),
    ],
)

DELETE_TOPICS_REQUEST = Message(
    "DeleteTopicsRequest",
    20,
    "1-6",
    flexible="4+",
    fields=[
        struct_array(
            "topics",
            "DeleteTopicState",
            [
                field("name", STRING, nullable="6+", default=None),  # null: by id
                field("topic_id", UUID),
            ],
            "6+",
        ),
        field("topic_names", ArrayOf(STRING), "0-5"),
        field("timeout_ms", INT32),
    ],
)

DELETE_TOPICS_RESPONSE = Message(
    "DeleteTopicsResponse",
    20,
    "1-6",
    flexible="4+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "responses",
            "DeletableTopicResult",
            [
                field("name", STRING, nullable="6+"),
                field("topic_id", UUID, "6+"),
                field("error_code", INT16),
                field("error_message", STRING, "5+", nullable="5+", default=None),
            ],
        ),
    ],
)

DELETE_RECORDS_REQUEST = Message(
    "DeleteRecordsRequest",
    21,
    "0-2",
    flexible="2+",
    fields=[
        struct_array(
            "topics",
            "DeleteRecordsTopic",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "DeleteRecordsPartition",
                    # offset -1 = the high watermark
                    [field("partition_index", INT32), field("offset", INT64)],
                ),
            ],
        ),
        field("timeout_ms", INT32),
    ],
)

DELETE_RECORDS_RESPONSE = Message(
    "DeleteRecordsResponse",
    21,
    "0-2",
    flexible="2+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "topics",
            "DeleteRecordsTopicResult",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "DeleteRecordsPartitionResult",
                    [
                        field("partition_index", INT32),
                        field("low_watermark", INT64),
                        field("error_code", INT16),
                    ],
                ),
            ],
        ),
    ],
)

DESCRIBE_CONFIGS_REQUEST = Message(
    "DescribeConfigsRequest",
    32,
    "1-4",
    flexible="4+",
    fields=[
        struct_array(
            "resources",
            "DescribeConfigsResource",
            [
                field("resource_type", INT8),
                field("resource_name", STRING),
                # null = every config of the resource
                field("configuration_keys", ArrayOf(STRING), nullable="0+"),
            ],
        ),
        field("include_synonyms", BOOL),
        field("include_documentation", BOOL, "3+"),
    ],
)

DESCRIBE_CONFIGS_RESPONSE = Message(
    "DescribeConfigsResponse",
    32,
    "1-4",
    flexible="4+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "results",
            "DescribeConfigsResult",
            [
                field("error_code", INT16),
                field("error_message", STRING, nullable="0+", default=None),
                field("resource_type", INT8),
                field("resource_name", STRING),
                struct_array(
                    "configs",
                    "DescribeConfigsResourceResult",
                    [
                        field("name", STRING),
                        field("value", STRING, nullable="0+"),
                        field("read_only", BOOL),
                        field("config_source", INT8, default=-1),
                        field("is_sensitive", BOOL),
                        struct_array(
                            "synonyms",
                            "DescribeConfigsSynonym",
                            [
                                field("name", STRING),
                                field("value", STRING, nullable="0+"),
                                field("source", INT8),
                            ],
                        ),
                        field("config_type", INT8, "3+"),  # 0 unknown, 1 boolean, 2 string, ...
                        field("documentation", STRING, "3+", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
)


def _alter_request(
    name: str, api_key: int, versions: str, flexible: str, operation: bool
) -> Message:
    config: list[Field] = [field("name", STRING)]
    if operation:
        config.append(field("config_operation", INT8))  # 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
    config.append(field("value", STRING, nullable="0+"))
    return Message(
        name,
        api_key,
        versions,
        flexible=flexible,
        fields=[
            struct_array(
                "resources",
                "AlterConfigsResource",
                [
                    field("resource_type", INT8),
                    field("resource_name", STRING),
                    struct_array("configs", "AlterableConfig", config),
                ],
            ),
            field("validate_only", BOOL),
        ],
    )


def _alter_response(name: str, api_key: int, versions: str, flexible: str) -> Message:
    return Message(
        name,
        api_key,
        versions,
        flexible=flexible,
        fields=[
            field("throttle_time_ms", INT32),
            struct_array(
                "responses",
                "AlterConfigsResourceResponse",
                [
                    field("error_code", INT16),
                    field("error_message", STRING, nullable="0+", default=None),
                    field("resource_type", INT8),
                    field("resource_name", STRING),
                ],
            ),
        ],
    )


# AlterConfigs replaces a resource's whole dynamic config; IncrementalAlterConfigs (KIP-339)
# changes single keys. The two differ on the wire only by config_operation.
ALTER_CONFIGS_REQUEST = _alter_request("AlterConfigsRequest", 33, "0-2", "2+", operation=False)
ALTER_CONFIGS_RESPONSE = _alter_response("AlterConfigsResponse", 33, "0-2", "2+")
INCREMENTAL_ALTER_CONFIGS_REQUEST = _alter_request(
    "IncrementalAlterConfigsRequest", 44, "0-1", "1+", operation=True
)
INCREMENTAL_ALTER_CONFIGS_RESPONSE = _alter_response(
    "IncrementalAlterConfigsResponse", 44, "0-1", "1+"
)

CreateTopicsRequest = CREATE_TOPICS_REQUEST.cls
CreateTopicsResponse = CREATE_TOPICS_RESPONSE.cls
DeleteTopicsRequest = DELETE_TOPICS_REQUEST.cls
DeleteTopicsResponse = DELETE_TOPICS_RESPONSE.cls
DeleteRecordsRequest = DELETE_RECORDS_REQUEST.cls
DeleteRecordsResponse = DELETE_RECORDS_RESPONSE.cls
DescribeConfigsRequest = DESCRIBE_CONFIGS_REQUEST.cls
DescribeConfigsResponse = DESCRIBE_CONFIGS_RESPONSE.cls
AlterConfigsRequest = ALTER_CONFIGS_REQUEST.cls
AlterConfigsResponse = ALTER_CONFIGS_RESPONSE.cls
IncrementalAlterConfigsRequest = INCREMENTAL_ALTER_CONFIGS_REQUEST.cls
IncrementalAlterConfigsResponse = INCREMENTAL_ALTER_CONFIGS_RESPONSE.cls

CREATE_PARTITIONS_REQUEST = Message(
    "CreatePartitionsRequest",
    37,
    "0-3",
    flexible="2+",
    fields=[
        struct_array(
            "topics",
            "CreatePartitionsTopic",
            [
                field("name", STRING),
                field("count", INT32),  # the new partition count
                struct_array(
                    "assignments",
                    "CreatePartitionsAssignment",
                    [field("broker_ids", ArrayOf(INT32))],
                    nullable="0+",
                    default=None,
                ),
            ],
        ),
        field("timeout_ms", INT32, default=60000),
        field("validate_only", BOOL),
    ],
)

CREATE_PARTITIONS_RESPONSE = Message(
    "CreatePartitionsResponse",
    37,
    "0-3",
    flexible="2+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "results",
            "CreatePartitionsTopicResult",
            [
                field("name", STRING),
                field("error_code", INT16),
                field("error_message", STRING, nullable="0+", default=None),
            ],
        ),
    ],
)

CreatePartitionsRequest = CREATE_PARTITIONS_REQUEST.cls
CreatePartitionsResponse = CREATE_PARTITIONS_RESPONSE.cls

ELECT_LEADERS_REQUEST = Message(
    "ElectLeadersRequest",
    43,
    "0-2",
    flexible="2+",
    fields=[
        field("election_type", INT8, "1+"),  # 0 preferred, 1 unclean; v0 is preferred
        struct_array(  # null: every partition
            "topic_partitions",
            "TopicPartitions",
            [field("topic", STRING), field("partitions", ArrayOf(INT32))],
            nullable="0+",
            default=None,
        ),
        field("timeout_ms", INT32, default=60000),
    ],
)

ELECT_LEADERS_RESPONSE = Message(
    "ElectLeadersResponse",
    43,
    "0-2",
    flexible="2+",
    fields=[
        field("throttle_time_ms", INT32),
        field("error_code", INT16, "1+"),
        struct_array(
            "replica_election_results",
            "ReplicaElectionResult",
            [
                field("topic", STRING),
                struct_array(
                    "partition_result",
                    "PartitionResult",
                    [
                        field("partition_id", INT32),
                        field("error_code", INT16),
                        field("error_message", STRING, nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
)

ALTER_PARTITION_REASSIGNMENTS_REQUEST = Message(
    "AlterPartitionReassignmentsRequest",
    45,
    "0-1",
    flexible="0+",
    fields=[
        field("timeout_ms", INT32, default=60000),
        field("allow_replication_factor_change", BOOL, "1+", default=True),
        struct_array(
            "topics",
            "ReassignableTopic",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "ReassignablePartition",
                    [
                        field("partition_index", INT32),
                        # null: cancel the reassignment in progress
                        field("replicas", ArrayOf(INT32), nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
)

ALTER_PARTITION_REASSIGNMENTS_RESPONSE = Message(
    "AlterPartitionReassignmentsResponse",
    45,
    "0-1",
    flexible="0+",
    fields=[
        field("throttle_time_ms", INT32),
        field("allow_replication_factor_change", BOOL, "1+", default=True),
        field("error_code", INT16),
        field("error_message", STRING, nullable="0+", default=None),
        struct_array(
            "responses",
            "ReassignableTopicResponse",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "ReassignablePartitionResponse",
                    [
                        field("partition_index", INT32),
                        field("error_code", INT16),
                        field("error_message", STRING, nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
)

ElectLeadersRequest = ELECT_LEADERS_REQUEST.cls
ElectLeadersResponse = ELECT_LEADERS_RESPONSE.cls
AlterPartitionReassignmentsRequest = ALTER_PARTITION_REASSIGNMENTS_REQUEST.cls
AlterPartitionReassignmentsResponse = ALTER_PARTITION_REASSIGNMENTS_RESPONSE.cls
