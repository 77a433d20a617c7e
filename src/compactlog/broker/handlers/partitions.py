"""Partition APIs: CreatePartitions (37), ElectLeaders (43), AlterPartitionReassignments (45),
DescribeProducers (61).

Answers are Kafka 4.4's controller's, with its messages, because Kafka's tools print them.

* CreatePartitions v0-v3: a name given twice is INVALID_REQUEST ("Duplicate topic name."),
  answered before the others as Kafka's controller answers it. Each topic is then checked in
  the order of Kafka's ``ReplicationControlManager.createPartitions``: the topic exists
  (UNKNOWN_TOPIC_OR_PARTITION, no message), the count grows it (INVALID_PARTITIONS: "Topic
  already has N partition(s)." or "... would not be an increase."; partitions are never
  removed), and explicit assignments, if given, are one per new partition and each names
  exactly this node once (the only registered broker; every partition has one replica):
  INVALID_REPLICA_ASSIGNMENT otherwise. On one node an assignment that passes places the
  partition where it would go anyway, so it is accepted. ``validate_only`` runs every check
  and creates nothing. More than ``MAX_RECORDS_PER_USER_OP`` (10,000) new partitions in one
  topic is POLICY_VIOLATION ("Unable to perform excessively large batch operation."), as Kafka's
  controller refuses to write that many records for one request.
  ``__consumer_offsets`` does not grow while this broker serves the group APIs
  (POLICY_VIOLATION): the coordinator maps each group to a partition by the partition count
  it started with, and a new count would send a group's later commits to another partition
  than its earlier ones.
  New partitions are created empty on disk, in the topic catalog and in Metadata at once;
  clients that refresh their metadata send keyed records to ``murmur2(key) % count``.
* DescribeProducers v0 (``kafka-transactions describe-producers``): the active idempotent
  producers of each partition, from its log's producer state (the state Kafka keeps in its
  ``.snapshot`` files): producer id, epoch, last sequence, last timestamp; coordinator epoch
  and current transaction start offset are -1, as there are no transactions. An invalid topic
  name is INVALID_TOPIC_EXCEPTION with ``Topic.validate``'s message; an unknown topic is
  UNKNOWN_TOPIC_OR_PARTITION with the code's message for every partition asked; an unknown
  partition of a known topic UNKNOWN_TOPIC_OR_PARTITION without a message (Kafka's replica
  manager's answer); an offline log KAFKA_STORAGE_ERROR.
* ElectLeaders v0-v2: on one node every partition's only replica is its leader and its
  preferred leader, so an election is never needed: ELECTION_NOT_NEEDED ("Leader election not
  needed for topic partition.") for each partition asked, preferred or unclean, as Kafka 4.4's
  controller answers; UNKNOWN_TOPIC_OR_PARTITION ("No such topic as t", "No such partition as
  t-9") for what does not exist; null partitions (every partition) leaves out the partitions
  that need no election, so each topic is listed with none. An unknown election type is
  INVALID_REQUEST ("Unknown election type 5") for the whole request (top-level from v1, and for
  each partition asked).
* AlterPartitionReassignments v0-v1: the only replica set a single node can have is
  ``[this node]``, so a reassignment to it is accepted and changes nothing; any other target is
  INVALID_REPLICA_ASSIGNMENT with the controller's message (an empty list, a broker named twice,
  a broker that is not registered); cancelling (null replicas) is NO_REASSIGNMENT_IN_PROGRESS;
  unknown topics and partitions UNKNOWN_TOPIC_OR_PARTITION with Kafka's messages. Nothing is
  ever in progress, so ListPartitionReassignments (:mod:`.cluster`) lists nothing.

Authorization (with ``authorizer.class.name`` set): each API first checks what Kafka 4.4's
``KafkaApis`` / ``ControllerApis`` check for it, through :mod:`compactlog.broker.access`, and
answers a refusal field for field as Kafka does (tests/kafka/test_acls_vs_kafka.py).
"""

from __future__ import annotations

import logging

from compactlog import errors as codes
from compactlog.broker.access import authorize, authorize_cluster, filter_authorized
from compactlog.broker.authorizer import AclOperation, ResourceType
from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.coordinator.offsets_topic import OFFSETS_TOPIC
from compactlog.broker.handlers.topics import check_topic_name
from compactlog.errors import CompactlogError, InvalidPartitionsError
from compactlog.protocol import Request, Struct
from compactlog.protocol.messages import (
    AlterPartitionReassignmentsResponse,
    CreatePartitionsResponse,
    DescribeProducersResponse,
    ElectLeadersResponse,
)
from compactlog.storage.store import MAX_RECORDS_PER_USER_OP

__all__ = [
    "handle_alter_partition_reassignments",
    "handle_create_partitions",
    "handle_describe_producers",
    "handle_elect_leaders",
]

logger = logging.getLogger("compactlog.broker")

#: The replicas of every partition: there is one node.
REPLICATION_FACTOR = 1


class _Refused(Exception):
    """A refusal of one topic with a Kafka error code and message (None: the client prints
    the code's own message)."""

    def __init__(self, error_code: int, message: str | None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _check_assignments(ctx: BrokerContext, topic: Struct, current: int) -> None:
    additional = topic.count - current
    if len(topic.assignments) != additional:
        raise _Refused(
            codes.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(topic.assignments)} assignment(s) were specified.",
        )
    for assignment in topic.assignments:
        brokers = sorted(assignment.broker_ids)
        if not brokers:
            raise _Refused(
                codes.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.",
            )
        previous = None
        for broker in brokers:
            if broker != ctx.node_id:
                raise _Refused(
                    codes.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker}, but no such "
                    "broker is registered.",
                )
            if broker == previous:
                raise _Refused(
                    codes.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker} more than once.",
                )
            previous = broker
        if len(brokers) != REPLICATION_FACTOR:
            raise _Refused(
                codes.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes a partition with {len(brokers)} "
                "replica(s), but this is not consistent with previous partitions, which have "
                f"{REPLICATION_FACTOR} replica(s).",
            )


def _grow(ctx: BrokerContext, topic: Struct, validate_only: bool) -> None:
    """Checks ``topic`` as Kafka's controller does and, unless ``validate_only``, grows it."""
    store = ctx.store
    name = topic.name
    if name not in store.topics():
        raise _Refused(codes.UNKNOWN_TOPIC_OR_PARTITION, None)
    current = store.partitions(name)
    if topic.count == current:
        raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
    if topic.count < current:
        raise InvalidPartitionsError(
            f"The topic {name} currently has {current} partition(s); {topic.count} would not "
            "be an increase."
        )
    if topic.count - current > MAX_RECORDS_PER_USER_OP:  # one PartitionRecord each
        raise _Refused(
            codes.POLICY_VIOLATION, "Unable to perform excessively large batch operation."
        )
    if topic.assignments is not None:
        _check_assignments(ctx, topic, current)
    if name == OFFSETS_TOPIC and ctx.groups_enabled:
        raise _Refused(
            codes.POLICY_VIOLATION,
            f"{OFFSETS_TOPIC} cannot grow while the group coordinator uses it: groups are "
            f"mapped to its {current} partition(s)",
        )
    if validate_only:
        return
    store.create_partitions(name, topic.count)
    logger.info("grew topic %s from %d to %d partition(s)", name, current, topic.count)


def _result(name: str, error_code: int, message: str | None) -> Struct:
    return CreatePartitionsResponse.CreatePartitionsTopicResult(
        name=name, error_code=error_code, error_message=message
    )


async def handle_create_partitions(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    seen: set[str] = set()
    duplicated: set[str] = set()
    for topic in req.topics:
        (duplicated if topic.name in seen else seen).add(topic.name)
    results = [
        _result(name, codes.INVALID_REQUEST, "Duplicate topic name.")
        for name in dict.fromkeys(t.name for t in req.topics if t.name in duplicated)
    ]
    alterable = filter_authorized(
        ctx, request, peer, AclOperation.ALTER, ResourceType.TOPIC,
        (t.name for t in req.topics if t.name not in duplicated),
    )  # fmt: skip
    done: set[str] = set()
    for topic in req.topics:
        if topic.name in duplicated or topic.name in done:
            continue
        done.add(topic.name)
        if topic.name not in alterable:
            results.append(_result(topic.name, codes.TOPIC_AUTHORIZATION_FAILED, None))
            continue
        try:
            _grow(ctx, topic, bool(req.validate_only))
        except _Refused as exc:
            results.append(_result(topic.name, exc.error_code, exc.message))
            continue
        except CompactlogError as exc:
            results.append(_result(topic.name, exc.error_code, str(exc)))
            continue
        results.append(_result(topic.name, codes.NONE, None))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


# --- DescribeProducers -------------------------------------------------------------------------
#: Kafka's ``Errors.UNKNOWN_TOPIC_OR_PARTITION.message()``.
_UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


#: Kafka's ``Errors.TOPIC_AUTHORIZATION_FAILED.message()`` and its cluster counterpart.
_TOPIC_DENIED = "Topic authorization failed."
_CLUSTER_DENIED = "Cluster authorization failed."


def _topic_error(ctx: BrokerContext, name: str) -> tuple[int, str] | None:
    try:
        check_topic_name(name)
    except CompactlogError as exc:
        return exc.error_code, str(exc)
    if name not in ctx.store.topics():
        return codes.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC_MESSAGE
    return None


def _producers(ctx: BrokerContext, name: str, partition: int) -> dict[str, object]:
    answer: dict[str, object] = {"partition_index": partition, "active_producers": []}
    try:
        states = ctx.store.producer_state(name, partition)
    except CompactlogError as exc:
        return {**answer, "error_code": exc.error_code, "error_message": None}
    producers = [
        {
            "producer_id": s.producer_id,
            "producer_epoch": s.producer_epoch,
            "last_sequence": s.last_sequence,
            "last_timestamp": s.last_timestamp,
            "coordinator_epoch": -1,
            "current_txn_start_offset": -1,
        }
        for s in states
    ]
    return {
        **answer,
        "error_code": codes.NONE,
        "error_message": None,
        "active_producers": producers,
    }


async def handle_describe_producers(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    topics = []
    for t in request.body.topics:
        error = _topic_error(ctx, t.name)
        if (error is None or error[0] == codes.UNKNOWN_TOPIC_OR_PARTITION) and not authorize(
            ctx, request, peer, AclOperation.READ, ResourceType.TOPIC, t.name
        ):  # Kafka: the name's validity, then READ on the topic, then its existence
            error = (codes.TOPIC_AUTHORIZATION_FAILED, _TOPIC_DENIED)
        partitions = [
            _producers(ctx, t.name, index)
            if error is None
            else {
                "partition_index": index,
                "error_code": error[0],
                "error_message": error[1],
                "active_producers": [],
            }
            for index in t.partition_indexes
        ]
        topics.append({"name": t.name, "partitions": partitions})
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


# --- ElectLeaders ------------------------------------------------------------------------------
#: Kafka's ``ElectionType``: 0 preferred, 1 unclean.
ELECTION_TYPES = (0, 1)
#: Kafka's ``Errors.ELECTION_NOT_NEEDED.message()``.
_ELECTION_NOT_NEEDED = "Leader election not needed for topic partition."


def _election(ctx: BrokerContext, topic: str, partition: int) -> tuple[int, str]:
    """Kafka's controller's ``electLeader`` on one node: (error code, message)."""
    store = ctx.store
    if topic not in store.topics():
        return codes.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    if not 0 <= partition < store.partitions(topic):
        return codes.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    return codes.ELECTION_NOT_NEEDED, _ELECTION_NOT_NEEDED


async def handle_elect_leaders(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    election_type = req.election_type if request.api_version >= 1 else 0
    asked = req.topic_partitions
    if not authorize_cluster(ctx, request, peer, AclOperation.ALTER):
        denied = codes.CLUSTER_AUTHORIZATION_FAILED
        return ElectLeadersResponse(
            throttle_time_ms=0,
            error_code=denied,
            replica_election_results=[
                {
                    "topic": t.topic,
                    "partition_result": [
                        {"partition_id": p, "error_code": denied, "error_message": _CLUSTER_DENIED}
                        for p in t.partitions
                    ],
                }
                for t in asked or ()
            ],
        )
    if election_type not in ELECTION_TYPES:
        message = f"Unknown election type {election_type}"
        results = [
            {
                "topic": t.topic,
                "partition_result": [
                    {
                        "partition_id": p,
                        "error_code": codes.INVALID_REQUEST,
                        "error_message": message,
                    }
                    for p in t.partitions
                ],
            }
            for t in asked or ()
        ]
        return ElectLeadersResponse(
            throttle_time_ms=0, error_code=codes.INVALID_REQUEST, replica_election_results=results
        )
    if asked is None:
        # Every partition: those that need no election (all of them, here) are left out.
        results = [{"topic": name, "partition_result": []} for name in ctx.store.topics()]
    else:
        results = []
        for t in asked:
            answers = []
            for p in t.partitions:
                error, message = _election(ctx, t.topic, p)
                answers.append({"partition_id": p, "error_code": error, "error_message": message})
            results.append({"topic": t.topic, "partition_result": answers})
    return ElectLeadersResponse(
        throttle_time_ms=0, error_code=codes.NONE, replica_election_results=results
    )


# --- AlterPartitionReassignments ---------------------------------------------------------------
#: Kafka's ``Errors.NO_REASSIGNMENT_IN_PROGRESS.message()``.
_NO_REASSIGNMENT = "No partition reassignment is in progress."


def _reassignment(ctx: BrokerContext, topic: str, target: Struct) -> tuple[int, str | None]:
    """Kafka's controller's ``alterPartitionReassignment`` on one node: (error code, message)."""
    store = ctx.store
    partition = target.partition_index
    if topic not in store.topics():
        return codes.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    if not 0 <= partition < store.partitions(topic):
        return (
            codes.UNKNOWN_TOPIC_OR_PARTITION,
            f"Unable to find partition {topic}:{partition}.",
        )
    if target.replicas is None:
        return codes.NO_REASSIGNMENT_IN_PROGRESS, _NO_REASSIGNMENT
    brokers = sorted(target.replicas)
    if not brokers:
        return (
            codes.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    previous = None
    for broker in brokers:
        if broker != ctx.node_id:
            return (
                codes.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker}, but no such broker "
                "is registered.",
            )
        if broker == previous:
            return (
                codes.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker} more than once.",
            )
        previous = broker
    return codes.NONE, None  # [this node]: where the partition already is


async def handle_alter_partition_reassignments(
    ctx: BrokerContext, request: Request, peer: Peer
) -> Struct:
    req = request.body
    if not authorize_cluster(ctx, request, peer, AclOperation.ALTER):
        denied = codes.CLUSTER_AUTHORIZATION_FAILED
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0,
            allow_replication_factor_change=True,
            error_code=denied,
            error_message=_CLUSTER_DENIED,
            responses=[
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": target.partition_index,
                            "error_code": denied,
                            "error_message": _CLUSTER_DENIED,
                        }
                        for target in t.partitions
                    ],
                }
                for t in req.topics
            ],
        )
    responses = []
    for t in req.topics:
        partitions = []
        for target in t.partitions:
            error, message = _reassignment(ctx, t.name, target)
            if error != codes.NONE:
                logger.info(
                    "refused the reassignment of %s-%d to %s: %s",
                    t.name, target.partition_index, target.replicas, codes.error_name(error),
                )  # fmt: skip
            partitions.append(
                {
                    "partition_index": target.partition_index,
                    "error_code": error,
                    "error_message": message,
                }
            )
        responses.append({"name": t.name, "partitions": partitions})
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        allow_replication_factor_change=req.allow_replication_factor_change
        if request.api_version >= 1
        else True,
        error_code=codes.NONE,
        error_message=None,
        responses=responses,
    )
