"""API keys, and the versions we implement (:data:`SUPPORTED`) and advertise (:data:`ADVERTISED`).

The lower bounds are the minimal set of spec section 1.5: librdkafka before 2.11.1 enables
features only when the advertised range *contains* particular versions (spec 1.4 item 1).

The upper bounds are of two kinds. The produce, fetch and group APIs stop where the weakest of
the four Python-side clients stops (spec 1.5), so those clients send no flexible version of
them; Kafka's Java clients then use the same versions, which serve them fully. Produce goes to
v8, still not flexible, because only v8 tells a client which records were refused and why
(KIP-467: "Compacted topic cannot accept message without key"). The admin APIs
go as far as Kafka 4.4's own tools and Admin client go against Kafka 4.4, because there the
versions decide what the tools print: CreateTopics v4+ (default partitions and replication
factor) to v7 (topic ids), Metadata v10+ (topic ids) to v13, ListOffsets v7+ (max timestamp)
to v11, DescribeConfigs v3-v4, DescribeGroups v6 (GROUP_ID_NOT_FOUND), ListGroups v5 (type
filters), DeleteGroups v0-v2, DeleteTopics v6, DeleteRecords v2, AlterConfigs v2,
IncrementalAlterConfigs v1, CreatePartitions v0-v3, OffsetDelete v0 (its only version),
ElectLeaders v0-v2, and six APIs that exist only in flexible versions: DescribeCluster,
DescribeTopicPartitions, ListPartitionReassignments, DescribeLogDirs, DescribeProducers (v0, its
only version) and AlterPartitionReassignments v0-v1.
kafka-python, librdkafka 2.16 and aiokafka use
the higher versions too where they know them; every one is checked against kafka-python's
schemas and with those clients.

``ADVERTISED`` differs from ``SUPPORTED`` in one place: Produce is advertised from v0 because old
librdkafka only compresses with gzip/snappy/lz4 when Produce v0 is advertised (spec 1.4 item 2),
while v0-v2 requests are refused, as Apache Kafka 4.0 does.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ADVERTISED", "API_KEYS", "API_NAMES", "SUPPORTED", "ApiKey"]


class ApiKey(IntEnum):
    """The API keys compactlog implements (Kafka's numbers)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TOPIC_PARTITIONS = 75
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLIENT_QUOTAS = 48


# Kafka's message names (the PascalCase of its schema files), by key.
API_NAMES: dict[int, str] = {
    key.value: "".join(part.capitalize() for part in key.name.split("_")) for key in ApiKey
}
API_KEYS: dict[str, int] = {name: key for key, name in API_NAMES.items()}

# (min, max) version implemented per API key: decode_request accepts exactly these.
SUPPORTED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 8),
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 11),
    ApiKey.METADATA: (1, 13),
    ApiKey.OFFSET_COMMIT: (2, 3),
    ApiKey.OFFSET_FETCH: (1, 3),
    ApiKey.FIND_COORDINATOR: (0, 1),
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 1),
    ApiKey.LEAVE_GROUP: (0, 1),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 2),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 1),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
}

# What ApiVersions advertises: SUPPORTED, except Produce from v0 (see the module docstring).
ADVERTISED: dict[int, tuple[int, int]] = {**SUPPORTED, ApiKey.PRODUCE: (0, 8)}
