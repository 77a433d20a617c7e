"""API keys, and the versions we implement (:data:`SUPPORTED`) and advertise (:data:`ADVERTISED`).

The ranges are the minimal set of spec section 1.5, which all four target clients (kafka-python,
confluent-kafka, kcat with librdkafka 2.0.2, aiokafka) were measured to work with. Their lower
bounds are as low as they are because librdkafka before 2.11.1 enables features only when the
advertised range *contains* particular versions (spec 1.4 item 1); their upper bounds are where
the weakest client stops, so no client sends a flexible version. ``ADVERTISED`` differs from
``SUPPORTED`` in one place: Produce is advertised from v0 because old librdkafka only compresses
with gzip/snappy/lz4 when Produce v0 is advertised (spec 1.4 item 2), while v0-v2 requests are
refused, as Apache Kafka 4.0 does.
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
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    INCREMENTAL_ALTER_CONFIGS = 44
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_CLUSTER = 60
    DESCRIBE_TOPIC_PARTITIONS = 75


# Kafka's message names (the PascalCase of its schema files), by key.
API_NAMES: dict[int, str] = {
    key.value: "".join(part.capitalize() for part in key.name.split("_")) for key in ApiKey
}
API_KEYS: dict[str, int] = {name: key for key, name in API_NAMES.items()}

# (min, max) version implemented per API key: decode_request accepts exactly these.
SUPPORTED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 7),
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 3),
    ApiKey.METADATA: (1, 4),
    ApiKey.OFFSET_COMMIT: (2, 3),
    ApiKey.OFFSET_FETCH: (1, 3),
    ApiKey.FIND_COORDINATOR: (0, 1),
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 1),
    ApiKey.LEAVE_GROUP: (0, 1),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 4),
    ApiKey.LIST_GROUPS: (0, 2),
    ApiKey.API_VERSIONS: (0, 2),
    ApiKey.CREATE_TOPICS: (2, 3),
    ApiKey.DELETE_TOPICS: (1, 3),
    ApiKey.DELETE_RECORDS: (0, 1),
    ApiKey.INIT_PRODUCER_ID: (0, 1),
    ApiKey.DESCRIBE_CONFIGS: (1, 2),
    ApiKey.ALTER_CONFIGS: (0, 1),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 0),
}

# What ApiVersions advertises: SUPPORTED, except Produce from v0 (see the module docstring).
ADVERTISED: dict[int, tuple[int, int]] = {**SUPPORTED, ApiKey.PRODUCE: (0, 7)}
