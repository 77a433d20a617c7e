"""Produce (key 0), InitProducerId (key 22) and DescribeProducers (key 61, only v0, flexible).

Produce v3-v8 share one request layout (v7 only allows zstd inside the records); v0-v2 lack
``transactional_id``; v8's response says which records of a refused batch were wrong and why
(KIP-467), which Kafka's clients put into the exception they raise. v0-v2 are compiled too,
so that a broker which advertises them (as librdkafka before 2.11.1 needs, spec 1.4 item 2)
but refuses them can still encode a reply in the client's version. ``records`` stays the raw
bytes of the record batches.
"""

from __future__ import annotations

from compactlog.protocol.compiler import Message
from compactlog.protocol.schema import (
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    ArrayOf,
    field,
    struct_array,
)

PRODUCE_REQUEST = Message(
    "ProduceRequest",
    0,
    "0-8",
    flexible="none",
    fields=[
        field("transactional_id", STRING, "3+", nullable="3+", default=None),
        field("acks", INT16),
        field("timeout_ms", INT32),
        struct_array(
            "topic_data",
            "TopicProduceData",
            [
                field("name", STRING),
                struct_array(
                    "partition_data",
                    "PartitionProduceData",
                    [field("index", INT32), field("records", RECORDS, nullable="0+")],
                ),
            ],
        ),
    ],
)

PRODUCE_RESPONSE = Message(
    "ProduceResponse",
    0,
    "0-8",
    flexible="none",
    fields=[
        struct_array(
            "responses",
            "TopicProduceResponse",
            [
                field("name", STRING),
                struct_array(
                    "partition_responses",
                    "PartitionProduceResponse",
                    [
                        field("index", INT32),
                        field("error_code", INT16),
                        field("base_offset", INT64),
                        # -1 unless the topic uses LogAppendTime
                        field("log_append_time_ms", INT64, "2+", default=-1),
                        field("log_start_offset", INT64, "5+", default=-1),
                        # v8+ (KIP-467): which records of the batch were refused, and why
                        struct_array(
                            "record_errors",
                            "BatchIndexAndErrorMessage",
                            [
                                field("batch_index", INT32),
                                field(
                                    "batch_index_error_message", STRING, nullable="8+", default=None
                                ),
                            ],
                            "8+",
                        ),
                        field("error_message", STRING, "8+", nullable="8+", default=None),
                    ],
                ),
            ],
        ),
        field("throttle_time_ms", INT32, "1+"),
    ],
)

INIT_PRODUCER_ID_REQUEST = Message(
    "InitProducerIdRequest",
    22,
    "0-1",
    flexible="none",
    fields=[
        # null for an idempotent (not transactional) producer
        field("transactional_id", STRING, nullable="0+", default=None),
        field("transaction_timeout_ms", INT32),
    ],
)

INIT_PRODUCER_ID_RESPONSE = Message(
    "InitProducerIdResponse",
    22,
    "0-1",
    flexible="none",
    fields=[
        field("throttle_time_ms", INT32),
        field("error_code", INT16),
        field("producer_id", INT64, default=-1),
        field("producer_epoch", INT16),
    ],
)

DESCRIBE_PRODUCERS_REQUEST = Message(
    "DescribeProducersRequest",
    61,
    "0",
    flexible="0+",
    fields=[
        struct_array(
            "topics",
            "TopicRequest",
            [field("name", STRING), field("partition_indexes", ArrayOf(INT32))],
        ),
    ],
)

DESCRIBE_PRODUCERS_RESPONSE = Message(
    "DescribeProducersResponse",
    61,
    "0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "topics",
            "TopicResponse",
            [
                field("name", STRING),
                struct_array(
                    "partitions",
                    "PartitionResponse",
                    [
                        field("partition_index", INT32),
                        field("error_code", INT16),
                        field("error_message", STRING, nullable="0+", default=None),
                        struct_array(
                            "active_producers",
                            "ProducerState",
                            [
                                field("producer_id", INT64),
                                field("producer_epoch", INT32),
                                field("last_sequence", INT32, default=-1),
                                field("last_timestamp", INT64, default=-1),
                                field("coordinator_epoch", INT32),
                                field("current_txn_start_offset", INT64, default=-1),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
)

ProduceRequest = PRODUCE_REQUEST.cls
ProduceResponse = PRODUCE_RESPONSE.cls
InitProducerIdRequest = INIT_PRODUCER_ID_REQUEST.cls
InitProducerIdResponse = INIT_PRODUCER_ID_RESPONSE.cls
DescribeProducersRequest = DESCRIBE_PRODUCERS_REQUEST.cls
DescribeProducersResponse = DESCRIBE_PRODUCERS_RESPONSE.cls
