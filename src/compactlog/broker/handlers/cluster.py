"""What admin tools ask about the cluster: DescribeLogDirs (35), ListPartitionReassignments (46),
DescribeCluster (60) and DescribeTopicPartitions (75). Kafka 4.4's admin client prefers the last
two to Metadata (``kafka-topics --describe``, ``kafka-get-offsets``); each answer here is what a
single-node Kafka 4.4 broker answers, as measured.

* DescribeCluster v0-v2: this node, the cluster id and this node as controller; brokers never
  fenced. Asked for controllers (endpoint type 2): MISMATCHED_ENDPOINT_TYPE, as a broker answers.
* DescribeTopicPartitions v0 pages through the partitions of the topics asked (every topic for
  an empty list), in name order: at most ``response_partition_limit`` partitions (taken as 1 to
  2000) per response, the ``next_cursor`` naming the first partition left out (or the next topic
  once the limit is used up exactly), null when nothing is left. A cursor naming a topic that is
  not asked for, or a negative partition, makes every topic INVALID_REQUEST. Every partition has
  this node as leader, replica and in-sync replica, leader epoch 0, and empty eligible-leader
  lists: Kafka 4.4 enables ELR (KIP-966), so its lists are empty, not null, and
  ``kafka-topics --describe`` prints ``Elr: `` rather than ``Elr: N/A``.
* ListPartitionReassignments v0: none, ever (one node).
* DescribeLogDirs v1-v5: the data directory, with the size of each partition asked (every
  partition for a null list; partitions that do not exist are left out), no lag, no future
  replica, and from v4 the file system's total and usable bytes.

Authorization (with ``authorizer.class.name`` set): each API first checks what Kafka 4.4's
``KafkaApis`` / ``ControllerApis`` check for it, through :mod:`compactlog.broker.access`, and
answers a refusal field for field as Kafka does (tests/kafka/test_acls_vs_kafka.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from compactlog import errors as codes
from compactlog.broker.access import authorize_cluster, authorized_operations, filter_authorized
from compactlog.broker.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.handlers.metadata import (
    CLUSTER_OPERATIONS,
    INTERNAL_TOPICS,
    LEADER_EPOCH,
    TOPIC_OPERATIONS,
    topic_uuid,
)
from compactlog.protocol import Request, Struct
from compactlog.protocol.messages import (
    DescribeClusterResponse,
    DescribeLogDirsResponse,
    DescribeTopicPartitionsResponse,
    ListPartitionReassignmentsResponse,
)
from compactlog.protocol.messages.cluster import ENDPOINT_TYPE_BROKERS, ENDPOINT_TYPE_CONTROLLERS
from compactlog.protocol.messages.metadata import OPERATIONS_NOT_REQUESTED
from compactlog.storage.topic_names import is_valid_topic_name

__all__ = [
    "handle_describe_cluster",
    "handle_describe_log_dirs",
    "handle_describe_topic_partitions",
    "handle_list_partition_reassignments",
]

#: Kafka's ``max.request.partition.size.limit``: the most partitions one DescribeTopicPartitions
#: response carries, whatever the request asks.
MAX_RESPONSE_PARTITIONS = 2000
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115


# --- DescribeCluster ---------------------------------------------------------------------------
async def handle_describe_cluster(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    if req.endpoint_type != ENDPOINT_TYPE_BROKERS:
        if req.endpoint_type == ENDPOINT_TYPE_CONTROLLERS:
            error, message = (
                MISMATCHED_ENDPOINT_TYPE,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                "of type CONTROLLER",
            )
        else:
            error, message = (
                UNSUPPORTED_ENDPOINT_TYPE,
                (f"Unsupported endpoint type {req.endpoint_type}"),
            )
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=error, error_message=message, cluster_id=""
        )
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        error_message=None,
        endpoint_type=ENDPOINT_TYPE_BROKERS,
        cluster_id=ctx.cluster_id,
        controller_id=ctx.node_id,
        brokers=[
            {
                "broker_id": ctx.node_id,
                "host": ctx.advertised_address()[0],
                "port": ctx.advertised_address()[1],
                "rack": None,
                "is_fenced": False,
            }
        ],
        cluster_authorized_operations=_cluster_operations(ctx, request, peer),
    )


def _cluster_operations(ctx: BrokerContext, request: Request, peer: Peer) -> int:
    """What ``include_cluster_authorized_operations`` asks: every operation without an
    authorizer; with one, the peer's, or 0 without DESCRIBE on the cluster (Kafka's
    ``AuthHelper.computeDescribeClusterResponse``)."""
    if not request.body.include_cluster_authorized_operations:
        return OPERATIONS_NOT_REQUESTED
    if ctx.authorizer is None:
        return CLUSTER_OPERATIONS
    if not authorize_cluster(ctx, request, peer, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, peer, ResourceType.CLUSTER, CLUSTER_NAME)


# --- DescribeTopicPartitions -------------------------------------------------------------------
_Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic


def _topic_error(name: str, error_code: int, operations: int) -> Struct:
    return _Topic(
        error_code=error_code,
        name=name,
        is_internal=False,
        partitions=[],
        topic_authorized_operations=operations,
    )


def _partition(ctx: BrokerContext, index: int) -> dict[str, object]:
    node = ctx.node_id
    return {
        "error_code": codes.NONE,
        "partition_index": index,
        "leader_id": node,
        "leader_epoch": LEADER_EPOCH,
        "replica_nodes": [node],
        "isr_nodes": [node],
        "eligible_leader_replicas": [],
        "last_known_elr": [],
        "offline_replicas": [],
    }


async def handle_describe_topic_partitions(
    ctx: BrokerContext, request: Request, peer: Peer
) -> Struct:
    req = request.body
    store = ctx.store
    existing = set(store.topics())
    names = sorted({t.name for t in req.topics}) if req.topics else sorted(existing)
    cursor = req.cursor
    start, first = 0, 0
    if cursor is not None:
        if cursor.topic_name not in names or cursor.partition_index < 0:
            return DescribeTopicPartitionsResponse(
                throttle_time_ms=0,
                topics=[
                    _topic_error(n, codes.INVALID_REQUEST, OPERATIONS_NOT_REQUESTED) for n in names
                ],
                next_cursor=None,
            )
        start, first = names.index(cursor.topic_name), cursor.partition_index
    # DESCRIBE on each topic from the cursor on: a topic asked by name that may not be
    # described is TOPIC_AUTHORIZATION_FAILED after the others; with no names, left out.
    denied: list[Struct] = []
    if ctx.authorizer is not None:
        allowed = filter_authorized(
            ctx, request, peer, AclOperation.DESCRIBE, ResourceType.TOPIC, names[start:]
        )
        if req.topics:
            denied = [
                _topic_error(n, codes.TOPIC_AUTHORIZATION_FAILED, OPERATIONS_NOT_REQUESTED)
                for n in names[start:]
                if n not in allowed
            ]
        names = names[:start] + [n for n in names[start:] if n in allowed]
    remaining = max(1, min(req.response_partition_limit, MAX_RESPONSE_PARTITIONS))
    topics: list[Struct] = []
    next_cursor = None
    for name in names[start:]:
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": first}
            break
        if name not in existing:
            error = (
                codes.UNKNOWN_TOPIC_OR_PARTITION
                if is_valid_topic_name(name)
                else codes.INVALID_TOPIC_EXCEPTION
            )
            topics.append(_topic_error(name, error, _topic_operations(ctx, peer, name)))
            first = 0
            continue
        info = store.topic_info(name)
        wanted = range(first, info.partitions)
        taken = wanted[:remaining]
        remaining -= len(taken)
        topics.append(
            _Topic(
                error_code=codes.NONE,
                name=name,
                topic_id=topic_uuid(info.topic_id),
                is_internal=name in INTERNAL_TOPICS,
                partitions=[_partition(ctx, p) for p in taken],
                topic_authorized_operations=_topic_operations(ctx, peer, name),
            )
        )
        if len(taken) < len(wanted):
            next_cursor = {"topic_name": name, "partition_index": first + len(taken)}
            break
        first = 0
    return DescribeTopicPartitionsResponse(
        throttle_time_ms=0, topics=topics + denied, next_cursor=next_cursor
    )


def _topic_operations(ctx: BrokerContext, peer: Peer, name: str) -> int:
    if ctx.authorizer is None:
        return TOPIC_OPERATIONS
    return authorized_operations(ctx, peer, ResourceType.TOPIC, name)


# --- ListPartitionReassignments ----------------------------------------------------------------
async def handle_list_partition_reassignments(
    ctx: BrokerContext, request: Request, peer: Peer
) -> Struct:
    if not authorize_cluster(ctx, request, peer, AclOperation.DESCRIBE):
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.",
            topics=[
                {
                    "name": t.name,
                    "partitions": [{"partition_index": p} for p in t.partition_indexes],
                }
                for t in request.body.topics or ()
            ],
        )
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=codes.NONE, error_message=None, topics=[]
    )


# --- DescribeLogDirs ---------------------------------------------------------------------------
def _partitions_asked(ctx: BrokerContext, req: Struct) -> Iterator[tuple[str, list[int]]]:
    store = ctx.store
    if req.topics is None:
        for name in store.topics():
            yield name, list(range(store.partitions(name)))
        return
    existing = set(store.topics())
    for topic in req.topics:
        if topic.topic in existing:
            count = store.partitions(topic.topic)
            yield topic.topic, sorted({p for p in topic.partitions if 0 <= p < count})


async def handle_describe_log_dirs(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    if not authorize_cluster(ctx, request, peer, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=codes.CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    store = ctx.store
    topics = []
    for name, partitions in _partitions_asked(ctx, request.body):
        if partitions:
            topics.append(
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": p,
                            "partition_size": store.log(name, p).size(),
                            "offset_lag": 0,
                            "is_future_key": False,
                        }
                        for p in partitions
                    ],
                }
            )
    disk = os.statvfs(store.path)  # Java's File.getTotalSpace / getUsableSpace
    return DescribeLogDirsResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        results=[
            {
                "error_code": codes.NONE,
                "log_dir": store.path,
                "topics": topics,
                "total_bytes": disk.f_blocks * disk.f_frsize,
                "usable_bytes": disk.f_bavail * disk.f_frsize,
                "is_cordoned": False,
            }
        ],
    )
