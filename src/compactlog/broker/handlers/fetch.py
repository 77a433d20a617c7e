"""Fetch (1) and ListOffsets (2): reading partitions, and finding offsets in them (spec 5.1).

Fetch v4-v11, per partition in request order (``ReplicaManager.readFromLocalLog``):

* unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; an offset below the log start offset or
  above the log end offset: OFFSET_OUT_OF_RANGE. Errors carry *empty* records, never null
  (librdkafka loops on a null record set, spec 1.4 item 3), and -1 for the high watermark, last
  stable offset and log start offset, as Kafka sends them;
* otherwise whole batches from the one holding the offset (the first batch whose last offset is
  at or after it): it may start before the offset, or hold no record at it at all when
  compaction removed it; empty batches are returned as they are, so clients advance past gaps
  with each batch's last offset delta;
* the high watermark is the log end offset and the last stable offset equals it (no
  transactions; librdkafka's read_committed consumers stop at a wrong LSO, spec 1.4 item 4);
  ``aborted_transactions`` is an empty list under read_committed and null under
  read_uncommitted, as Kafka sends it;
* sizes: each partition gets at most ``partition_max_bytes`` and the whole response at most
  ``max_bytes`` (capped by ``fetch.max.bytes``), except that the first batch of the first
  partition with data is returned whole whatever its size (KIP-74). A response never carries a
  partial batch.

Long polling: when no partition has an error and fewer than ``min_bytes`` are available, the
request waits up to ``max_wait_ms`` for appends to the partitions it reads (a Produce wakes it)
and then reads again. Only this connection waits: the others are served meanwhile, and its own
later requests queue behind it, as Kafka's per-connection ordering requires.

Fetch sessions (v7+, KIP-227) are not kept: a full fetch (epoch 0 or -1) is answered with
session id 0, which tells the client no session was created, so it keeps sending full fetches;
an incremental fetch (epoch > 0) gets FETCH_SESSION_ID_NOT_FOUND, on which clients start over.

ListOffsets v1-v11, as Kafka 4.4 answers (measured): -2 (earliest) and -4 (earliest local, v8+:
there is no tiered storage) are the log start offset, -1 the high watermark (the last stable
offset, which is the same here), all with timestamp -1; -3 (v7+) the first record holding the
largest timestamp, with that timestamp; -5 (latest tiered, v9+) and -6 (earliest pending upload,
v11+) offset -1; any other timestamp T the first offset whose record timestamp is >= T, with
that timestamp. Nothing found: offset and timestamp -1. A special timestamp older than the
version that introduced it, or one below -6, is UNSUPPORTED_VERSION. From v4 the answer carries
the leader epoch of the offset (0, the only epoch; -1 with offset -1) and the request's current
leader epoch is checked as Fetch checks it. A partition asked twice is INVALID_REQUEST.

Authorization (with ``authorizer.class.name`` set): each API first checks what Kafka 4.4's
``KafkaApis`` / ``ControllerApis`` check for it, through :mod:`compactlog.broker.access`, and
answers a refusal field for field as Kafka does (tests/kafka/test_acls_vs_kafka.py).
"""

from __future__ import annotations

import asyncio
import logging
import struct

from compactlog import errors as codes
from compactlog.broker.access import filter_authorized
from compactlog.broker.authorizer import AclOperation, ResourceType
from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.handlers.metadata import LEADER_EPOCH
from compactlog.errors import CompactlogError, CorruptRecordError, StorageError
from compactlog.protocol import Request, Struct, error_name
from compactlog.protocol.messages import FetchResponse, ListOffsetsResponse
from compactlog.records import BATCH_LENGTH_OFFSET, LOG_OVERHEAD, RECORDS_COUNT_OFFSET

__all__ = ["handle_fetch", "handle_list_offsets"]

logger = logging.getLogger("compactlog.broker")

#: Kafka's FETCH_SESSION_ID_NOT_FOUND: an incremental fetch for a session we do not have.
FETCH_SESSION_ID_NOT_FOUND = 70
READ_COMMITTED = 1
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
#: The ListOffsets version that introduced each special timestamp below -2.
_SPECIAL_TIMESTAMP_VERSIONS = {
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}

_INT32 = struct.Struct(">i")


def _count_records(data: bytes) -> int:
    """Records in whole batches (from their headers' recordsCount)."""
    count, pos, end = 0, 0, len(data)
    while pos + LOG_OVERHEAD <= end:
        size = LOG_OVERHEAD + _INT32.unpack_from(data, pos + BATCH_LENGTH_OFFSET)[0]
        if pos + RECORDS_COUNT_OFFSET + 4 <= end:
            count += _INT32.unpack_from(data, pos + RECORDS_COUNT_OFFSET)[0]
        pos += max(size, LOG_OVERHEAD)
    return count


def _leader_epoch_error(current_leader_epoch: int) -> int:
    """Kafka's check of a request's current leader epoch (-1: the client does not know it; any
    other value, negative ones included, is compared with ours)."""
    if current_leader_epoch in (-1, LEADER_EPOCH):
        return codes.NONE
    return (
        codes.UNKNOWN_LEADER_EPOCH
        if current_leader_epoch > LEADER_EPOCH
        else codes.FENCED_LEADER_EPOCH
    )


class _Read:
    """The result of one pass over the requested partitions."""

    def __init__(self) -> None:
        self.topics: list[dict[str, object]] = []
        self.bytes = 0
        self.errors = 0
        #: Partitions of topics the peer may not read (answered at once, but no reason to
        #: stop waiting for the others, as in Kafka).
        self.denied = 0
        self.chunks: list[bytes] = []


def _error_partition(index: int, error_code: int) -> Struct:
    return FetchResponse.FetchableTopicResponse.PartitionData(
        partition_index=index, error_code=error_code, high_watermark=-1,
        last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None, records=b"",
    )  # fmt: skip


def _read_once(ctx: BrokerContext, req: Struct, max_bytes: int, readable: set[str]) -> _Read:
    result = _Read()
    remaining = max_bytes
    min_one_batch = True  # KIP-74: until a partition returned data
    committed = req.isolation_level == READ_COMMITTED
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            if topic.topic not in readable:
                # Kafka answers a refused partition with an empty (not null) list of aborted
                # transactions, unlike its other errors (measured against Kafka 4.4).
                partitions.append(
                    FetchResponse.FetchableTopicResponse.PartitionData(
                        partition_index=p.partition, error_code=codes.TOPIC_AUTHORIZATION_FAILED,
                        high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                        aborted_transactions=[], records=b"",
                    )
                )  # fmt: skip
                result.denied += 1
                continue
            error = _leader_epoch_error(p.current_leader_epoch)
            if error != codes.NONE:
                partitions.append(_error_partition(p.partition, error))
                result.errors += 1
                continue
            try:
                log = ctx.store.log(topic.topic, p.partition)
                data = log.read(
                    p.fetch_offset,
                    max(0, min(p.partition_max_bytes, remaining)),
                    min_one_batch=min_one_batch,
                )
            except CompactlogError as exc:
                if isinstance(exc, StorageError | CorruptRecordError):
                    logger.warning("fetch from %s-%d failed: %s", topic.topic, p.partition, exc)
                partitions.append(_error_partition(p.partition, exc.error_code))
                result.errors += 1
                continue
            if data:
                min_one_batch = False
                remaining = max(0, remaining - len(data))
                result.bytes += len(data)
                result.chunks.append(data)
            high_watermark = log.high_watermark
            partitions.append(
                FetchResponse.FetchableTopicResponse.PartitionData(
                    partition_index=p.partition,
                    error_code=codes.NONE,
                    high_watermark=high_watermark,
                    last_stable_offset=high_watermark,
                    log_start_offset=log.log_start_offset,
                    aborted_transactions=[] if committed else None,
                    preferred_read_replica=-1,
                    records=data,
                )
            )
        result.topics.append({"topic": topic.topic, "partitions": partitions})
    return result


def _fetched_partitions(req: Struct) -> list[tuple[str, int]]:
    return [(t.topic, p.partition) for t in req.topics for p in t.partitions]


async def handle_fetch(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    metrics = ctx.metrics
    if req.session_epoch not in (0, -1):
        return FetchResponse(
            throttle_time_ms=0, error_code=FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[]
        )
    max_bytes = max(0, min(req.max_bytes, ctx.settings.limits.fetch_max_bytes))
    min_bytes = min(req.min_bytes, max_bytes)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
    partitions = _fetched_partitions(req)
    readable = filter_authorized(
        ctx, request, peer, AclOperation.READ, ResourceType.TOPIC, (t.topic for t in req.topics)
    )
    while True:
        result = _read_once(ctx, req, max_bytes, readable)
        remaining_s = deadline - loop.time()
        if (
            result.errors
            or result.bytes >= min_bytes
            or remaining_s <= 0
            or not partitions
            or result.denied == len(partitions)
            or ctx.stopping
        ):
            break
        await ctx.waiters.wait(partitions, remaining_s)
    metrics.bytes_out += result.bytes
    metrics.failed_fetch_partitions += result.errors + result.denied
    metrics.fetch_records += sum(_count_records(chunk) for chunk in result.chunks)
    return FetchResponse(
        throttle_time_ms=0, error_code=codes.NONE, session_id=0, responses=result.topics
    )


def _list_offset(ctx: BrokerContext, topic: str, p: Struct, version: int) -> Struct:
    entry = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    partition, timestamp = p.partition_index, p.timestamp
    try:
        log = ctx.store.log(topic, partition)
    except CompactlogError as exc:
        logger.debug("ListOffsets %s-%d: %s (%s)", topic, partition, exc,
                     error_name(exc.error_code))  # fmt: skip
        return entry(partition_index=partition, error_code=exc.error_code)
    error = _leader_epoch_error(p.current_leader_epoch)
    introduced = _SPECIAL_TIMESTAMP_VERSIONS.get(timestamp, 2**15)  # 2**15: no version
    if error == codes.NONE and timestamp < EARLIEST_TIMESTAMP and version < introduced:
        error = codes.UNSUPPORTED_VERSION
    if error != codes.NONE:
        return entry(partition_index=partition, error_code=error)
    found: tuple[int, int] | None
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        found = (log.log_start_offset, -1)
    elif timestamp == LATEST_TIMESTAMP:
        found = (log.high_watermark, -1)
    elif timestamp == MAX_TIMESTAMP:
        found = log.offset_of_max_timestamp()
    elif timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        found = None  # no tiered storage
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None:
        return entry(partition_index=partition, error_code=codes.NONE)
    offset, found_timestamp = found
    return entry(
        partition_index=partition,
        error_code=codes.NONE,
        timestamp=found_timestamp,
        offset=offset,
        leader_epoch=LEADER_EPOCH,
    )


def _list_offsets_topic(ctx: BrokerContext, topic: Struct, version: int) -> dict[str, object]:
    counts: dict[int, int] = {}
    for p in topic.partitions:
        counts[p.partition_index] = counts.get(p.partition_index, 0) + 1
    entry = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    partitions = []
    for p in topic.partitions:
        count = counts.pop(p.partition_index, 0)
        if count == 1:
            partitions.append(_list_offset(ctx, topic.name, p, version))
        elif count > 1:  # asked twice: one INVALID_REQUEST for it, as Kafka answers
            partitions.append(
                entry(partition_index=p.partition_index, error_code=codes.INVALID_REQUEST)
            )
    return {"name": topic.name, "partitions": partitions}


async def handle_list_offsets(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    described = filter_authorized(
        ctx, request, peer, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics)
    )
    entry = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    return ListOffsetsResponse(
        throttle_time_ms=0,
        topics=[
            _list_offsets_topic(ctx, topic, request.api_version)
            if topic.name in described
            else {
                "name": topic.name,
                "partitions": [
                    entry(
                        partition_index=p.partition_index,
                        error_code=codes.TOPIC_AUTHORIZATION_FAILED,
                    )
                    for p in topic.partitions
                ],
            }
            for topic in req.topics
        ],
    )
