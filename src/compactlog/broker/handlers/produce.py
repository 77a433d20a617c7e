"""Produce (0) and InitProducerId (22).

Produce v3-v8 (v0-v2 never get here: the connection closes on them, as Kafka 4.0 does). Per
partition, in Kafka's order (``KafkaApis.handleProduceRequest``, ``ProduceRequest.validateRecords``,
``ReplicaManager.appendRecords``):

1. acks outside {-1, 0, 1}: INVALID_REQUIRED_ACKS (21) for every partition;
2. a transactional id, or a transactional batch: INVALID_TXN_STATE (48), Kafka's answer to a
   transactional write to a partition that was never added to a transaction (KIP-890; Kafka's
   message is "Partition was not added to the transaction") - with no transaction coordinator
   here none ever is. It is not retriable, so the send fails at once with a transactional-state
   error, rather than TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which would send users looking at
   ACLs;
3. an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (3), no auto-creation; a topic name
   Kafka could never have created is INVALID_TOPIC_EXCEPTION (17), which producers do not retry
   (reliability spec R18; Kafka itself answers 3 whatever the name);
4. the records must be exactly one batch of magic 2: otherwise INVALID_RECORD (87), and zstd
   below v7 is UNSUPPORTED_COMPRESSION_TYPE (76); truncated framing is CORRUPT_MESSAGE (2);
5. the store validates and appends (``Store.append_batch_info``); its errors carry the code:
   MESSAGE_TOO_LARGE (10) above ``max.message.bytes``, CORRUPT_MESSAGE (2), INVALID_RECORD (87)
   for a keyless record on a compacted topic (nothing is appended), INVALID_TIMESTAMP (32),
   OUT_OF_ORDER_SEQUENCE_NUMBER (45), INVALID_PRODUCER_EPOCH (47), KAFKA_STORAGE_ERROR (56).
   From v8 the keyless records are named (``record_errors``: index and Kafka's message, with
   Kafka's summary in ``error_message`` and the log start offset), as Kafka 4.4 names them;
   Kafka's Java producer raises that message.

A retry of one of an idempotent producer's last five batches is answered as Kafka answers it:
no error, with the offsets (and timestamp) the batch got the first time, nothing appended.

acks=0: no response at all; if a partition failed, the connection is closed instead, which is
how Kafka tells a fire-and-forget producer that something went wrong. acks=-1 and 1 are the same
on a single node: the append is complete when it returns. (Durability follows the topic's
``flush.messages``/``flush.ms``, as in Kafka; ``log.flush.interval.messages=1`` fsyncs before
every acknowledgement.)

InitProducerId v0-v1 without a transactional id allocates a new producer id (unique for the
data directory, see :mod:`compactlog.broker.node_state`) with epoch 0. A transactional id is
refused with UNSUPPORTED_VERSION (35), the refusal the reliability spec names: compactlog has no
transaction coordinator, and the client reports "unsupported version" for its
``init_transactions()`` instead of a coordinator that never answers (kafka-python fails at
once). The refusal is logged. An empty transactional id is INVALID_REQUEST (42), as in Kafka.

Authorization (with ``authorizer.class.name`` set): each API first checks what Kafka 4.4's
``KafkaApis`` / ``ControllerApis`` check for it, through :mod:`compactlog.broker.access`, and
answers a refusal field for field as Kafka does (tests/kafka/test_acls_vs_kafka.py).
"""

from __future__ import annotations

import logging
import struct

from compactlog import errors as codes
from compactlog.broker.access import authorize, authorize_cluster, filter_authorized
from compactlog.broker.authorizer import AclOperation, ResourceType
from compactlog.broker.context import BrokerContext, CloseConnection, Peer
from compactlog.broker.refusals import produce_refusal_level, refusal_line
from compactlog.errors import (
    CompactlogError,
    InvalidRecordError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from compactlog.protocol import Request, Struct, error_name
from compactlog.protocol.messages import InitProducerIdResponse, ProduceResponse
from compactlog.records import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    Compression,
)
from compactlog.storage.topic_names import validate_topic_name

__all__ = ["check_produce_records", "handle_init_producer_id", "handle_produce"]

logger = logging.getLogger("compactlog.broker")

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
#: Produce v7 is the first that may carry zstd (KIP-110).
_ZSTD_MIN_PRODUCE_VERSION = 7
VALID_ACKS = (-1, 0, 1)


class _RecordsRefused(Exception):
    """One partition's records refused before they reach the store, with the Kafka error code.

    Not a :class:`~compactlog.errors.CompactlogError`, unlike the topic handlers' ``_Refused``:
    the produce path logs it apart from the store's errors."""

    def __init__(self, error_code: int, reason: str) -> None:
        super().__init__(reason)
        self.error_code = error_code


def check_produce_records(records: bytes | None, version: int) -> None:
    """Kafka's ``ProduceRequest.validateRecords`` (and the transactional refusal): raises
    ``_RecordsRefused`` with the partition's error code."""
    if not records:
        raise _RecordsRefused(
            codes.INVALID_RECORD,
            f"Produce requests with version {version} must contain exactly one record batch "
            "per partition, not none",
        )
    if len(records) < RECORD_BATCH_OVERHEAD:
        raise _RecordsRefused(
            codes.CORRUPT_MESSAGE, f"{len(records)} bytes of records are not a whole batch"
        )
    if records[MAGIC_OFFSET] != MAGIC_V2:
        raise _RecordsRefused(
            codes.INVALID_RECORD,
            f"Produce requests with version {version} are only allowed to contain record "
            f"batches with magic version 2, not {records[MAGIC_OFFSET]}",
        )
    size = LOG_OVERHEAD + _INT32.unpack_from(records, BATCH_LENGTH_OFFSET)[0]
    if size < RECORD_BATCH_OVERHEAD or size > len(records):
        raise _RecordsRefused(
            codes.CORRUPT_MESSAGE,
            f"the batch claims {size} bytes but {len(records)} were sent",
        )
    if size < len(records):
        raise _RecordsRefused(
            codes.INVALID_RECORD,
            f"Produce requests with version {version} are only allowed to contain exactly one "
            "record batch per partition",
        )
    attributes = _INT16.unpack_from(records, ATTRIBUTES_OFFSET)[0]
    if attributes & TRANSACTIONAL_FLAG_MASK:
        raise _RecordsRefused(
            codes.INVALID_TXN_STATE,
            "Partition was not added to the transaction (compactlog has no transactions)",
        )
    codec = attributes & COMPRESSION_CODEC_MASK
    if codec == Compression.ZSTD and version < _ZSTD_MIN_PRODUCE_VERSION:
        raise _RecordsRefused(
            codes.UNSUPPORTED_COMPRESSION_TYPE,
            f"zstd needs Produce v{_ZSTD_MIN_PRODUCE_VERSION} or later, not v{version}",
        )


def _partition_error(index: int, error_code: int) -> Struct:
    return ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
        index=index, error_code=error_code, base_offset=-1, log_append_time_ms=-1,
        log_start_offset=-1,
    )  # fmt: skip


def _record_errors(index: int, exc: InvalidRecordError, log_start_offset: int) -> Struct:
    """Records the log refused, as Kafka's LogValidator reports them (v8+, KIP-467): each one's
    index and message, a summary of the first three, and the log start offset."""
    shown = ", ".join(
        f"RecordError(batchIndex={i}, message='{message}')" for i, message in exc.record_errors[:3]
    )
    return ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
        index=index,
        error_code=exc.error_code,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=log_start_offset,
        record_errors=[
            {"batch_index": i, "batch_index_error_message": message}
            for i, message in exc.record_errors
        ],
        error_message=(
            f"One or more records have been rejected due to {len(exc.record_errors)} record "
            f"errors in total, and only showing the first three errors at most: [{shown}]"
        ),
    )


def _log_refused(
    ctx: BrokerContext,
    request: Request,
    peer: Peer,
    where: str,
    code: int,
    reason: str,
    level: int | None = None,
) -> None:
    """The refusal's line, at Kafka's level (:mod:`compactlog.broker.refusals`)."""
    line = refusal_line(
        "Produce", request.header.correlation_id, peer.client_id, peer.host, peer.port,
        where, code, reason,
    )  # fmt: skip
    ctx.refusal_log.log(produce_refusal_level(code) if level is None else level, "%s", line)


def _produce_partition(
    ctx: BrokerContext,
    request: Request,
    peer: Peer,
    topic: str,
    index: int,
    records: bytes | None,
) -> Struct:
    store = ctx.store
    metrics = ctx.metrics
    version = request.api_version
    where = f" on partition {topic}-{index}"
    try:
        try:
            log = store.log(topic, index)
        except UnknownTopicOrPartitionError:
            validate_topic_name(topic)  # INVALID_TOPIC_EXCEPTION for a name no topic can have
            raise
        check_produce_records(records, version)
        assert records is not None
        info = store.append_batch_info(topic, index, records)
    except _RecordsRefused as exc:
        _log_refused(ctx, request, peer, where, exc.error_code, str(exc))
        metrics.failed_produce_partitions += 1
        return _partition_error(index, exc.error_code)
    except CompactlogError as exc:
        level = logging.WARNING if isinstance(exc, StorageError) else None
        _log_refused(ctx, request, peer, where, exc.error_code, str(exc), level)
        metrics.failed_produce_partitions += 1
        if isinstance(exc, InvalidRecordError) and exc.record_errors:
            return _record_errors(index, exc, log.log_start_offset)
        return _partition_error(index, exc.error_code)
    if not info.duplicate:
        metrics.bytes_in += len(info.data)
        metrics.messages_in += info.record_count
        ctx.waiters.notify(topic, index)
    return ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
        index=index,
        error_code=codes.NONE,
        base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time,
        log_start_offset=log.log_start_offset,
    )


async def handle_produce(ctx: BrokerContext, request: Request, peer: Peer) -> Struct | None:
    req = request.body
    refusal: int | None = None
    if req.acks not in VALID_ACKS:
        refusal = codes.INVALID_REQUIRED_ACKS
    elif req.transactional_id is not None:
        # Kafka authorizes the transactional id before anything else (KafkaApis): an
        # unauthorized one fails every partition with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
        if authorize(
            ctx, request, peer, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
            req.transactional_id,
        ):  # fmt: skip
            refusal = codes.INVALID_TXN_STATE
        else:
            refusal = codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    writable = filter_authorized(
        ctx, request, peer, AclOperation.WRITE, ResourceType.TOPIC,
        (t.name for t in req.topic_data),
    )  # fmt: skip
    responses = []
    for topic in req.topic_data:
        partitions = []
        for data in topic.partition_data:
            if refusal is None and topic.name not in writable:
                ctx.metrics.failed_produce_partitions += 1
                where = f" on partition {topic.name}-{data.index}"
                _log_refused(
                    ctx, request, peer, where, codes.TOPIC_AUTHORIZATION_FAILED,
                    f"{peer.principal} may not WRITE to topic {topic.name}", logging.INFO,
                )  # fmt: skip
                partitions.append(_partition_error(data.index, codes.TOPIC_AUTHORIZATION_FAILED))
            elif refusal is not None:
                ctx.metrics.failed_produce_partitions += 1
                where = f" on partition {topic.name}-{data.index}"
                if refusal == codes.INVALID_REQUIRED_ACKS:
                    reason = f"acks={req.acks}: must be -1, 0 or 1"
                elif refusal == codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                    reason = f"{peer.principal} may not WRITE transactional id"
                else:
                    reason = "a transactional id: compactlog has no transactions"
                _log_refused(ctx, request, peer, where, refusal, reason)
                partitions.append(_partition_error(data.index, refusal))
            else:
                partitions.append(
                    _produce_partition(ctx, request, peer, topic.name, data.index, data.records)
                )
        responses.append({"name": topic.name, "partition_responses": partitions})
    if req.acks == 0:
        failed = [
            f"{topic['name']}-{p.index}: {error_name(p.error_code)}"
            for topic in responses
            for p in topic["partition_responses"]
            if p.error_code != codes.NONE
        ]
        if failed:
            raise CloseConnection(f"acks=0 produce failed ({', '.join(failed)})")
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)


async def handle_init_producer_id(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    if req.transactional_id is not None and not authorize(
        ctx, request, peer, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
        req.transactional_id,
    ):  # fmt: skip
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1, producer_epoch=-1,
        )  # fmt: skip
    if (
        req.transactional_id is None
        and ctx.authorizer is not None
        and not authorize_cluster(ctx, request, peer, AclOperation.IDEMPOTENT_WRITE,
                                  log_if_denied=False)
        and not ctx.authorizer.authorize_by_resource_type(
            peer.principal, peer.host, AclOperation.WRITE, ResourceType.TOPIC
        )
    ):  # fmt: skip
        # Kafka: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
            producer_id=-1, producer_epoch=-1,
        )  # fmt: skip
    if req.transactional_id is not None:
        if req.transactional_id == "":
            error = codes.INVALID_REQUEST
        else:
            error = codes.UNSUPPORTED_VERSION
            logger.info(
                "refused InitProducerId for transactional id %r from %s: compactlog does not "
                "support transactions",
                req.transactional_id,
                peer.client_id,
            )
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1
        )
    try:
        producer_id = ctx.producer_ids.next_id()
    except CompactlogError as exc:
        logger.warning("allocating a producer id failed: %s", exc)
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=exc.error_code, producer_id=-1, producer_epoch=-1
        )
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=codes.NONE, producer_id=producer_id, producer_epoch=0
    )
