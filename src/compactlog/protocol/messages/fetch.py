"""Fetch (key 1) and ListOffsets (key 2): reading a partition, and finding offsets in it.

Fetch v4 is the first with ``isolation_level``, ``last_stable_offset`` and aborted
transactions (record batch v2); v5 adds log start offsets, v7 incremental fetch sessions
(KIP-227), v9 the current leader epoch, v11 the rack of the consumer (KIP-392). The response's
``records`` stays raw bytes and defaults to empty, never null: librdkafka loops on a null
record set in an error partition (spec 1.4 item 3).

ListOffsets v2 adds the isolation level, v4 the current leader epoch (KIP-320) and the leader
epoch of the offset found, v6 is flexible, v7-v9 and v11 only allow new special timestamps
(max timestamp, earliest local, latest tiered, earliest pending upload), v10 adds a timeout.
"""

from __future__ import annotations

from compactlog.protocol.compiler import Message
from compactlog.protocol.schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    ArrayOf,
    field,
    struct_array,
)

FETCH_REQUEST = Message(
    "FetchRequest",
    1,
    "4-11",
    flexible="none",
    fields=[
        field("replica_id", INT32, default=-1),  # -1 for a consumer
        field("max_wait_ms", INT32),
        field("min_bytes", INT32),
        field("max_bytes", INT32, "3+", default=0x7FFF_FFFF),
        field("isolation_level", INT8, "4+"),  # 0 read_uncommitted, 1 read_committed
        field("session_id", INT32, "7+"),
        field("session_epoch", INT32, "7+", default=-1),
        struct_array(
            "topics",
            "FetchTopic",
            [
                field("topic", STRING),
                struct_array(
                    "partitions",
                    "FetchPartition",
                    [
                        field("partition", INT32),
                        field("current_leader_epoch", INT32, "9+", default=-1),
                        field("fetch_offset", INT64),
                        field("log_start_offset", INT64, "5+", default=-1),  # followers only
                        field("partition_max_bytes", INT32),
                    ],
                ),
            ],
        ),
        struct_array(
            "forgotten_topics_data",
            "ForgottenTopic",
            [field("topic", STRING), field("partitions", ArrayOf(INT32))],
            "7+",
        ),
        field("rack_id", STRING, "11+"),
    ],
)

FETCH_RESPONSE = Message(
    "FetchResponse",
    1,
    "4-11",
    flexible="none",
    fields=[
        field("throttle_time_ms", INT32, "1+"),
        field("error_code", INT16, "7+"),
        field("session_id", INT32, "7+"),
        struct_array(
            "responses",
            "FetchableTopicResponse",
            [
                field("topic", STRING),
                struct_array(
                    "partitions",
                    "PartitionData",
                    [
                        field("partition_index", INT32),
                        field("error_code", INT16),
                        field("high_watermark", INT64),
                        field("last_stable_offset", INT64, "4+", default=-1),
                        field("log_start_offset", INT64, "5+", default=-1),
                        struct_array(
                            "aborted_transactions",
                            "AbortedTransaction",
                            [field("producer_id", INT64), field("first_offset", INT64)],
                            "4+",
                            nullable="4+",
                            default=None,
                        ),
                        field("preferred_read_replica", INT32, "11+", default=-1),
                        field("records", RECORDS, nullable="0+", default=b""),
                    ],
                ),
            ],
        ),
    ],
)

LIST_OFFSETS_REQUEST = Message(
    "ListOffsetsRequest",
    2,
    "1-11",
    flexible="6+",
    fields=[
        field("replica_id", INT32),
        field("isolation_level", INT8, "2+"),
        struct_array(
            "topics",
            "ListOffsetsTopic",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "ListOffsetsPartition",
                    [
                        field("partition_index", INT32),
                        field("current_leader_epoch", INT32, "4+", default=-1),
                        # -1 latest, -2 earliest, -3 max timestamp (v7+), -4 earliest local
                        # (v8+), -5 latest tiered (v9+), -6 earliest pending upload (v11+),
                        # otherwise a time in ms
                        field("timestamp", INT64),
                    ],
                ),
            ],
        ),
        field("timeout_ms", INT32, "10+"),
    ],
)

LIST_OFFSETS_RESPONSE = Message(
    "ListOffsetsResponse",
    2,
    "1-11",
    flexible="6+",
    fields=[
        field("throttle_time_ms", INT32, "2+"),
        struct_array(
            "topics",
            "ListOffsetsTopicResponse",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "ListOffsetsPartitionResponse",
                    [
                        field("partition_index", INT32),
                        field("error_code", INT16),
                        field("timestamp", INT64, default=-1),
                        field("offset", INT64, default=-1),
                        field("leader_epoch", INT32, "4+", default=-1),
                    ],
                ),
            ],
        ),
    ],
)

FetchRequest = FETCH_REQUEST.cls
FetchResponse = FETCH_RESPONSE.cls
ListOffsetsRequest = LIST_OFFSETS_REQUEST.cls
ListOffsetsResponse = LIST_OFFSETS_RESPONSE.cls
