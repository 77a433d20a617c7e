"""Topic APIs: CreateTopics (19), DeleteTopics (20), DeleteRecords (21).

Errors carry Kafka 4.4's messages (measured against a Kafka 4.4 broker), because Kafka's tools
print them.

* CreateTopics v2-v7: one result per distinct name (a name given twice: INVALID_REQUEST,
  "Duplicate topic name."). Checked in the order Kafka 4.4's controller checks: the name
  (INVALID_TOPIC_EXCEPTION, also for a '.'/'_' collision), existence (TOPIC_ALREADY_EXISTS), the
  configs (INVALID_CONFIG; a key given twice is not an error, the last value counts), then either
  the replica assignments (partitions and replication factor must then be -1; each list
  non-empty, without repeats, naming this node; partitions numbered 0..n-1:
  INVALID_REQUEST or INVALID_REPLICA_ASSIGNMENT) or the partition count (>= 1, or -1 for
  ``num.partitions``: INVALID_PARTITIONS) and the replication factor (1, or -1 for the default,
  which is 1 on one node: INVALID_REPLICATION_FACTOR). -1 is accepted in every version, as Kafka
  accepts it; clients send it from v4 on (KIP-464). From v5 a created (or validated) topic is
  answered with its partition count, replication factor and every config with its source
  (``topic_config_error_code`` stays 0); from v7 with its topic id (a fresh random one for
  ``validate_only``, as Kafka does). Errors get -1, -1, no configs and the zero id.
  A request whose valid topics would make Kafka's controller write more than
  ``MAX_RECORDS_PER_USER_OP`` (10,000) metadata records (one per topic, per partition and per
  config) fails as a whole, before anything is created or placed: every topic gets
  POLICY_VIOLATION, "Unable to perform excessively large batch operation.", as from Kafka 4.4.
  This is what keeps ``num_partitions=2**31-1`` from occupying the broker.
* DeleteTopics v1-v6: UNKNOWN_TOPIC_OR_PARTITION for a name that is no topic, UNKNOWN_TOPIC_ID
  for an id (v6) that is none; from v5 with Kafka's message of the code. A name given twice is
  INVALID_REQUEST; ``__consumer_offsets`` is refused with POLICY_VIOLATION while the group
  coordinator runs on it.
* DeleteRecords v0-v2: offset -1 means the high watermark; above the high watermark:
  OFFSET_OUT_OF_RANGE; a topic whose ``cleanup.policy`` lacks ``delete``: POLICY_VIOLATION.
  ``low_watermark`` is the new log start offset.

Authorization (with ``authorizer.class.name`` set): each API first checks what Kafka 4.4's
``KafkaApis`` / ``ControllerApis`` check for it, through :mod:`compactlog.broker.access`, and
answers a refusal field for field as Kafka does (tests/kafka/test_acls_vs_kafka.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable

from compactlog import errors as codes
from compactlog.broker.access import authorize_cluster, filter_authorized
from compactlog.broker.authorizer import AclOperation, ResourceType
from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.coordinator.offsets_topic import OFFSETS_TOPIC
from compactlog.broker.handlers.configs import client_message, topic_configs
from compactlog.broker.handlers.metadata import topic_ids, topic_uuid
from compactlog.errors import (
    CompactlogError,
    ConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    InvalidTopicError,
    TopicExistsError,
)
from compactlog.protocol import Request, Struct
from compactlog.protocol.messages import (
    CreateTopicsResponse,
    DeleteRecordsResponse,
    DeleteTopicsResponse,
)
from compactlog.protocol.schema import ZERO_UUID
from compactlog.storage.config import LogConfig
from compactlog.storage.store import MAX_RECORDS_PER_USER_OP
from compactlog.storage.topic_names import (
    MAX_TOPIC_NAME_LENGTH,
    is_valid_topic_name,
    topic_collides,
)

__all__ = [
    "check_topic_name",
    "handle_create_topics",
    "handle_delete_records",
    "handle_delete_topics",
]

logger = logging.getLogger("compactlog.broker")

#: The replication factor of every topic, and the default for -1 (Kafka's
#: ``default.replication.factor``): there is one node.
REPLICATION_FACTOR = 1
#: Errors.message() of the codes DeleteTopics v5+ reports, as Kafka sends them.
_DELETE_MESSAGES = {
    codes.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    codes.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
    codes.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
}


class _Refused(CompactlogError):
    """A refusal with an explicit Kafka error code (for codes without an error class)."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def _duplicates(names: Iterable[str | None]) -> set[str | None]:
    seen: set[str | None] = set()
    repeated: set[str | None] = set()
    for name in names:
        (repeated if name in seen else seen).add(name)
    return repeated


# --- CreateTopics ------------------------------------------------------------------------------
def _check_name(name: str, existing: list[str]) -> None:
    """Kafka's topic name checks, with its messages (``Topic.validate`` and the controller)."""
    check_topic_name(name)
    if name in existing:
        raise TopicExistsError(f"Topic '{name}' already exists.")
    for other in existing:
        if topic_collides(name, other):
            raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")


def check_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``, with its messages: raises :class:`InvalidTopicError`."""
    if not is_valid_topic_name(name):
        if name == "":
            problem = "the empty string is not allowed"
        elif name in (".", ".."):
            problem = f"'{name}' is not allowed"
        elif len(name) > MAX_TOPIC_NAME_LENGTH:
            problem = (
                f"the length of '{name}' is longer than the max allowed length "
                f"{MAX_TOPIC_NAME_LENGTH}"
            )
        else:
            problem = (
                f"'{name}' contains one or more characters other than ASCII alphanumerics, "
                "'.', '_' and '-'"
            )
        raise InvalidTopicError(f"Topic name is invalid: {problem}")


def _topic_configs(topic: Struct) -> dict[str, str]:
    configs: dict[str, str] = {}
    for entry in topic.configs:
        if entry.value is None:
            raise ConfigError(f"Null value not supported for topic configs: {entry.name}")
        configs[entry.name] = entry.value  # a repeated key: the last one counts, as in Kafka
    return configs


def _assigned_partitions(ctx: BrokerContext, topic: Struct) -> int:
    if topic.num_partitions != -1:
        raise InvalidRequestError(
            "A manual partition assignment was specified, but numPartitions was not set to -1."
        )
    if topic.replication_factor != -1:
        raise InvalidRequestError(
            "A manual partition assignment was specified, but replication factor was not set to -1."
        )
    for a in topic.assignments:
        brokers = list(a.broker_ids)
        if not brokers:
            raise _Refused(
                codes.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.",
            )
        for broker in brokers:
            if brokers.count(broker) > 1:
                raise _Refused(
                    codes.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker} more than once.",
                )
            if broker != ctx.node_id:
                raise _Refused(
                    codes.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker}, but no such "
                    "broker is registered.",
                )
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        raise _Refused(
            codes.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    return len(indexes)


def _partition_count(ctx: BrokerContext, topic: Struct) -> int:
    if topic.assignments:
        return _assigned_partitions(ctx, topic)
    partitions = int(topic.num_partitions)
    if partitions == -1:
        partitions = ctx.settings.num_partitions
    elif partitions < 1:
        raise InvalidPartitionsError(
            "Number of partitions was set to an invalid non-positive value."
        )
    rf = int(topic.replication_factor)
    if rf == 0 or rf < -1:
        raise _Refused(
            codes.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if rf > REPLICATION_FACTOR:
        raise _Refused(
            codes.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {rf} time(s): The target replication factor of "
            f"{rf} cannot be reached because only 1 broker(s) are registered or some brokers "
            "have all their log directories cordoned.",
        )
    return partitions


def _metadata_records(ctx: BrokerContext, topic: Struct) -> int:
    """The metadata records Kafka's controller would write for ``topic`` (0 if it fails a
    check, as a refused topic writes none): its TopicRecord, one PartitionRecord per partition,
    one ConfigRecord per distinct config."""
    try:
        _check_name(topic.name, ctx.store.topics())
        configs = _topic_configs(topic)
        LogConfig.create(configs, ctx.store.broker)
        return 1 + _partition_count(ctx, topic) + len(configs)
    except CompactlogError:
        return 0


async def _create_topic(
    ctx: BrokerContext, topic: Struct, validate_only: bool
) -> tuple[int, LogConfig, uuid.UUID]:
    """Checks and (unless ``validate_only``) creates; returns the partition count, the config and
    the topic id."""
    store = ctx.store
    name = topic.name
    _check_name(name, store.topics())
    configs = _topic_configs(topic)
    config = LogConfig.create(configs, store.broker)
    partitions = _partition_count(ctx, topic)
    if validate_only:
        return partitions, config, uuid.uuid4()
    # Off the event loop, as Metadata's auto-creation (see handlers.metadata._missing_topic).
    await asyncio.to_thread(store.create_topic, name, partitions, configs)
    logger.info("created topic %s with %d partition(s)", name, partitions)
    return partitions, store.topic_config(name), topic_uuid(store.topic_info(name).topic_id)


def _created(
    ctx: BrokerContext,
    name: str,
    created: tuple[int, LogConfig, uuid.UUID],
    describable: bool = True,
) -> Struct:
    """The result of a created topic; its configs only for a peer that may describe them
    (else ``topic_config_error_code`` TOPIC_AUTHORIZATION_FAILED, as Kafka's controller)."""
    partitions, config, topic_id = created
    if not describable:
        return CreateTopicsResponse.CreatableTopicResult(
            name=name, topic_id=topic_id, error_code=codes.NONE, error_message=None,
            num_partitions=partitions, replication_factor=REPLICATION_FACTOR, configs=[],
            topic_config_error_code=codes.TOPIC_AUTHORIZATION_FAILED,
        )  # fmt: skip
    return CreateTopicsResponse.CreatableTopicResult(
        name=name,
        topic_id=topic_id,
        error_code=codes.NONE,
        error_message=None,
        num_partitions=partitions,
        replication_factor=REPLICATION_FACTOR,
        configs=[
            {
                "name": c.name,
                "value": c.value,
                "read_only": c.read_only,
                "config_source": c.source,
                "is_sensitive": False,
            }
            for c in topic_configs(ctx, config)
        ],
    )


def _failed(name: str, error_code: int, message: str) -> Struct:
    return CreateTopicsResponse.CreatableTopicResult(
        name=name, error_code=error_code, error_message=message, configs=[]
    )


def _create_authorized(
    ctx: BrokerContext, request: Request, peer: Peer, names: list[str]
) -> tuple[set[str], set[str]]:
    """Which topics ``peer`` may create (CREATE on the cluster, or on the topic) and describe
    the configs of (DESCRIBE_CONFIGS), as Kafka's ``ControllerApis.createTopics`` asks."""
    if ctx.authorizer is None:
        return set(names), set(names)
    if authorize_cluster(ctx, request, peer, AclOperation.CREATE, log_if_denied=False):
        creatable = set(names)
    else:
        creatable = filter_authorized(
            ctx, request, peer, AclOperation.CREATE, ResourceType.TOPIC, names
        )
    describable = filter_authorized(
        ctx, request, peer, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names,
        log_if_denied=False,
    )  # fmt: skip
    return creatable, describable


async def handle_create_topics(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    duplicated = _duplicates(t.name for t in req.topics)
    unique = {t.name: t for t in req.topics if t.name not in duplicated}
    creatable, describable = _create_authorized(ctx, request, peer, list(unique))
    unique = {name: t for name, t in unique.items() if name in creatable}
    records = sum(_metadata_records(ctx, topic) for topic in unique.values())
    if records > MAX_RECORDS_PER_USER_OP:
        logger.info(
            "refused CreateTopics of %d topic(s) from %s: %d metadata records, more than %d",
            len(unique), peer.client_id or f"{peer.host}:{peer.port}", records,
            MAX_RECORDS_PER_USER_OP,
        )  # fmt: skip
        message = "Unable to perform excessively large batch operation."
        refused = [
            _failed(name, codes.POLICY_VIOLATION, message)
            if name in creatable or name in duplicated
            else _failed(name, codes.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            for name in dict.fromkeys(t.name for t in req.topics)
        ]
        return CreateTopicsResponse(throttle_time_ms=0, topics=refused)
    results = []
    done: set[str] = set()
    for topic in req.topics:
        if topic.name in done:
            continue
        done.add(topic.name)
        if topic.name in duplicated:
            results.append(_failed(topic.name, codes.INVALID_REQUEST, "Duplicate topic name."))
            continue
        if topic.name not in creatable:
            results.append(
                _failed(topic.name, codes.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            )
            continue
        try:
            created = await _create_topic(ctx, topic, bool(req.validate_only))
        except CompactlogError as exc:
            results.append(_failed(topic.name, exc.error_code, client_message(exc)))
            continue
        results.append(_created(ctx, topic.name, created, topic.name in describable))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


# --- DeleteTopics ------------------------------------------------------------------------------
def _delete_topic(ctx: BrokerContext, name: str) -> int:
    store = ctx.store
    if name == OFFSETS_TOPIC and ctx.groups is not None:
        logger.info("refused to delete %s: the group coordinator keeps its state there", name)
        return codes.POLICY_VIOLATION
    try:
        partitions = store.partitions(name)
        store.delete_topic(name)
    except CompactlogError as exc:
        return exc.error_code
    logger.info("deleted topic %s", name)
    for partition in range(partitions):
        ctx.waiters.notify(name, partition)  # waiting fetches answer UNKNOWN_TOPIC_OR_PARTITION
    return codes.NONE


def _deletion(
    ctx: BrokerContext, name: str | None, topic_id: uuid.UUID, error: int | None, version: int
) -> dict[str, object]:
    if error is None:
        if name is None:
            name = topic_ids(ctx).get(topic_id)
            error = codes.UNKNOWN_TOPIC_ID if name is None else None
        elif name in ctx.store.topics():
            topic_id = topic_uuid(ctx.store.topic_info(name).topic_id)
        if error is None:
            assert name is not None
            error = _delete_topic(ctx, name)
    message = None
    if version >= 5 and error != codes.NONE:
        message = _DELETE_MESSAGES.get(error, f"{codes.error_name(error)}")
    return {"name": name, "topic_id": topic_id, "error_code": error, "error_message": message}


def _delete_authorized(
    ctx: BrokerContext, request: Request, peer: Peer, names: list[str]
) -> tuple[set[str], set[str]]:
    """Which topics ``peer`` may describe and delete (DELETE on the cluster allows both), as
    Kafka's ``ControllerApis.deleteTopics`` asks."""
    names = [n for n in names if n]
    if ctx.authorizer is None or authorize_cluster(
        ctx, request, peer, AclOperation.DELETE, log_if_denied=False
    ):
        return set(names), set(names)
    return (
        filter_authorized(ctx, request, peer, AclOperation.DESCRIBE, ResourceType.TOPIC, names),
        filter_authorized(ctx, request, peer, AclOperation.DELETE, ResourceType.TOPIC, names),
    )


async def handle_delete_topics(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    version = request.api_version
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in req.topic_names]
    duplicated = _duplicates(name for name, _ in wanted if name is not None)
    by_id = topic_ids(ctx) if any(i != ZERO_UUID for _, i in wanted) else {}
    describable, deletable = _delete_authorized(
        ctx, request, peer,
        [name if name is not None else by_id.get(i, "") for name, i in wanted],
    )  # fmt: skip
    responses = []
    done: set[tuple[str | None, uuid.UUID]] = set()
    for name, topic_id in wanted:
        if (name, topic_id) in done:
            continue
        done.add((name, topic_id))
        error = codes.INVALID_REQUEST if name is not None and name in duplicated else None
        if error is None and name is not None and topic_id == ZERO_UUID:
            # By name: not describable hides whether it exists; then existence, then DELETE.
            if name not in describable or (name in ctx.store.topics() and name not in deletable):
                error = codes.TOPIC_AUTHORIZATION_FAILED
        elif error is None and name is None and topic_id in by_id:
            resolved = by_id[topic_id]
            if resolved not in deletable:
                # Ids are not secret, names are: the name only to a peer that may describe it.
                name = resolved if resolved in describable else None
                error = codes.TOPIC_AUTHORIZATION_FAILED
        responses.append(_deletion(ctx, name, topic_id, error, version))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=responses)


# --- DeleteRecords -----------------------------------------------------------------------------
def _delete_records(ctx: BrokerContext, topic: str, partition: int, offset: int) -> Struct:
    entry = DeleteRecordsResponse.DeleteRecordsTopicResult.DeleteRecordsPartitionResult
    try:
        if offset == -1:
            offset = ctx.store.log(topic, partition).high_watermark
        low_watermark = ctx.store.delete_records(topic, partition, offset)
    except CompactlogError as exc:
        logger.debug("DeleteRecords %s-%d to %d: %s", topic, partition, offset, exc)
        return entry(partition_index=partition, low_watermark=-1, error_code=exc.error_code)
    return entry(partition_index=partition, low_watermark=low_watermark, error_code=codes.NONE)


async def handle_delete_records(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    topics = request.body.topics
    deletable = filter_authorized(
        ctx, request, peer, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in topics)
    )
    entry = DeleteRecordsResponse.DeleteRecordsTopicResult.DeleteRecordsPartitionResult
    return DeleteRecordsResponse(
        throttle_time_ms=0,
        topics=[
            {
                "name": t.name,
                "partitions": [
                    _delete_records(ctx, t.name, p.partition_index, p.offset)
                    if t.name in deletable
                    else entry(
                        partition_index=p.partition_index,
                        low_watermark=-1,
                        error_code=codes.TOPIC_AUTHORIZATION_FAILED,
                    )
                    for p in t.partitions
                ],
            }
            for t in topics
        ],
    )
