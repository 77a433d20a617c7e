"""Admin APIs: CreateTopics (19), DeleteTopics (20), DeleteRecords (21), DescribeConfigs (32),
AlterConfigs (33), IncrementalAlterConfigs (44).

Topic configs are validated by the store (:mod:`compactlog.storage.config`): an unknown name or a
bad value is INVALID_CONFIG (40) with the store's sentence in ``error_message``, and nothing is
applied. ``validate_only`` runs every check and changes nothing.

* CreateTopics v2-v3: one result per distinct name (a name given twice: INVALID_REQUEST). Checked
  in Kafka's order: the name (INVALID_TOPIC_EXCEPTION, also for a '.'/'_' collision), existence
  (TOPIC_ALREADY_EXISTS), replica assignments (with them, partitions and replication factor must
  be -1, partitions numbered 0..n-1 and every replica list [0]: INVALID_REQUEST or
  INVALID_REPLICA_ASSIGNMENT), the partition count (>= 1: INVALID_PARTITIONS; -1 for "the
  default" needs v4), the replication factor (1 on a single node: INVALID_REPLICATION_FACTOR;
  -1 needs v4, KIP-464), then the configs.
* DeleteTopics v1-v3: UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist; a name given
  twice is INVALID_REQUEST; ``__consumer_offsets`` is refused with POLICY_VIOLATION while the
  group coordinator runs on it.
* DeleteRecords v0-v1: offset -1 means the high watermark; above the high watermark:
  OFFSET_OUT_OF_RANGE; a topic whose ``cleanup.policy`` lacks ``delete``: POLICY_VIOLATION.
  ``low_watermark`` is the new log start offset.
* DescribeConfigs v1-v2: a topic (type 2) lists every topic config, defaults included, with its
  source (1 topic override, 4 store-wide setting, 5 default), ``read_only`` false (kafka-python's
  ``alter_configs()`` checks that first, spec 1.4 item 6) and, when asked, its synonyms. The
  broker (type 4, name "0") lists every broker setting, read-only (there are no dynamic broker
  configs); the name "" (the cluster-wide dynamic defaults) lists none.
* AlterConfigs v0-v1 replaces the topic's whole set of overrides; IncrementalAlterConfigs v0
  applies SET, DELETE, APPEND and SUBTRACT per key (APPEND/SUBTRACT on list configs such as
  ``cleanup.policy``, starting from the override or the default). A key given twice in one
  resource is INVALID_REQUEST. Broker resources are refused with INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.offsets_topic import OFFSETS_TOPIC
from compactlog.errors import (
    CompactlogError,
    ConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    TopicExistsError,
)
from compactlog.protocol import Request, Struct, codes
from compactlog.protocol.messages import (
    AlterConfigsResponse,
    CreateTopicsResponse,
    DeleteRecordsResponse,
    DeleteTopicsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)
from compactlog.storage.config import ConfigSource, LogConfig
from compactlog.storage.topic_names import check_collision, validate_topic_name

__all__ = [
    "handle_alter_configs",
    "handle_create_topics",
    "handle_delete_records",
    "handle_delete_topics",
    "handle_describe_configs",
    "handle_incremental_alter_configs",
]

logger = logging.getLogger("compactlog.broker")

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OPERATIONS = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


class _Refused(CompactlogError):
    """A refusal with an explicit Kafka error code (for codes without an error class)."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def _duplicates(names: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    repeated: set[str] = set()
    for name in names:
        (repeated if name in seen else seen).add(name)
    return repeated


# --- CreateTopics ------------------------------------------------------------------------------
def _topic_configs(entries: Sequence[Struct]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for entry in entries:
        if entry.value is None:
            raise ConfigError(f"Null value not supported for topic configs: {entry.name}")
        if entry.name in configs:
            raise InvalidRequestError(f"Duplicate config key {entry.name}")
        configs[entry.name] = entry.value
    return configs


def _partition_count(ctx: BrokerContext, topic: Struct, version: int) -> int:
    node = ctx.node_id
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise InvalidRequestError(
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time."
            )
        indexes = sorted(a.partition_index for a in topic.assignments)
        if indexes != list(range(len(indexes))):
            raise _Refused(
                codes.INVALID_REPLICA_ASSIGNMENT,
                f"partitions must be numbered 0..{len(indexes) - 1}, got {indexes}",
            )
        for a in topic.assignments:
            if list(a.broker_ids) != [node]:
                raise _Refused(
                    codes.INVALID_REPLICA_ASSIGNMENT,
                    f"partition {a.partition_index} is assigned to brokers {list(a.broker_ids)}; "
                    f"this cluster has only broker {node}",
                )
        return len(indexes)
    if topic.num_partitions == -1 or topic.num_partitions < 1:
        detail = (
            " (-1, the broker default, needs CreateTopics v4)" if topic.num_partitions == -1 else ""
        )
        raise InvalidPartitionsError(
            f"Number of partitions was set to an invalid value {topic.num_partitions}{detail}"
        )
    rf = topic.replication_factor
    if rf == -1:
        raise _Refused(
            codes.INVALID_REPLICATION_FACTOR,
            f"replication factor -1 (the broker default) needs CreateTopics v4, not v{version}",
        )
    if rf < 1:
        raise _Refused(
            codes.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if rf > 1:
        raise _Refused(
            codes.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {rf} time(s): The target replication factor of "
            f"{rf} cannot be reached because only 1 broker(s) are registered.",
        )
    return int(topic.num_partitions)


def _create_topic(ctx: BrokerContext, topic: Struct, version: int, validate_only: bool) -> None:
    store = ctx.store
    name = topic.name
    validate_topic_name(name)
    if name in store.topics():
        raise TopicExistsError(f"Topic '{name}' already exists.")
    check_collision(name, store.topics())
    partitions = _partition_count(ctx, topic, version)
    configs = _topic_configs(topic.configs)
    if validate_only:
        LogConfig.create(configs, store.broker)
        return
    store.create_topic(name, partitions, configs)
    logger.info("created topic %s with %d partition(s)", name, partitions)


async def handle_create_topics(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    duplicated = _duplicates(t.name for t in req.topics)
    results = []
    done: set[str] = set()
    for topic in req.topics:
        if topic.name in done:
            continue
        done.add(topic.name)
        error, message = codes.NONE, None
        if topic.name in duplicated:
            error = codes.INVALID_REQUEST
            message = (
                "Create topics request from client "
                f"`{peer.client_id}` contains multiple entries for the topic {topic.name}."
            )
        else:
            try:
                _create_topic(ctx, topic, request.api_version, bool(req.validate_only))
            except CompactlogError as exc:
                error, message = exc.error_code, str(exc)
        results.append({"name": topic.name, "error_code": error, "error_message": message})
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


async def handle_delete_topics(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    names = list(request.body.topic_names)
    duplicated = _duplicates(names)
    responses = [
        {
            "name": name,
            "error_code": codes.INVALID_REQUEST if name in duplicated else _delete_topic(ctx, name),
        }
        for name in dict.fromkeys(names)
    ]
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
    return DeleteRecordsResponse(
        throttle_time_ms=0,
        topics=[
            {
                "name": t.name,
                "partitions": [
                    _delete_records(ctx, t.name, p.partition_index, p.offset) for p in t.partitions
                ],
            }
            for t in request.body.topics
        ],
    )


# --- DescribeConfigs ---------------------------------------------------------------------------
def _describe_topic(
    ctx: BrokerContext, name: str, keys: set[str] | None, synonyms: bool
) -> list[Struct]:
    result = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    configs = []
    for entry in ctx.store.topic_config(name).describe_entries():
        if keys is not None and entry.name not in keys:
            continue
        configs.append(
            result(
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=int(entry.source),
                is_sensitive=entry.is_sensitive,
                synonyms=[
                    {"name": s.name, "value": s.value, "source": int(s.source)}
                    for s in entry.synonyms
                ]
                if synonyms
                else [],
            )
        )
    return configs


def _describe_broker(
    ctx: BrokerContext, name: str, keys: set[str] | None, synonyms: bool
) -> list[Struct]:
    if name == "":
        return []  # the cluster-wide dynamic defaults: there are none
    if name != str(ctx.node_id):
        raise InvalidRequestError(
            f"Unexpected broker id, expected {ctx.node_id}, but received {name}"
        )
    result = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    return [
        result(
            name=row.name,
            value=row.value,
            read_only=True,
            config_source=int(row.source),
            is_sensitive=False,
            synonyms=[{"name": row.name, "value": row.value, "source": int(row.source)}]
            if synonyms and row.source != ConfigSource.DEFAULT_CONFIG
            else [],
        )
        for row in ctx.settings.describe()
        if keys is None or row.name in keys
    ]


async def handle_describe_configs(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    results = []
    for resource in req.resources:
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        error, message, configs = codes.NONE, None, []
        try:
            if resource.resource_type == TOPIC_RESOURCE:
                configs = _describe_topic(ctx, resource.resource_name, keys, req.include_synonyms)
            elif resource.resource_type == BROKER_RESOURCE:
                configs = _describe_broker(ctx, resource.resource_name, keys, req.include_synonyms)
            else:
                raise InvalidRequestError(
                    f"resource type {resource.resource_type} is not supported (2 topic, 4 broker)"
                )
        except CompactlogError as exc:
            error, message = exc.error_code, str(exc)
        results.append(
            {
                "error_code": error,
                "error_message": message,
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
                "configs": configs,
            }
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


# --- AlterConfigs and IncrementalAlterConfigs --------------------------------------------------
def _check_resource(ctx: BrokerContext, resource: Struct) -> str:
    if resource.resource_type == BROKER_RESOURCE:
        raise InvalidRequestError(
            "broker configs are static in compactlog: restart the broker with --config "
            "NAME=VALUE to change them"
        )
    if resource.resource_type != TOPIC_RESOURCE:
        raise InvalidRequestError(f"resource type {resource.resource_type} is not supported")
    keys = [c.name for c in resource.configs]
    duplicated = _duplicates(keys)
    if duplicated:
        raise InvalidRequestError(f"Error due to duplicate config keys: {sorted(duplicated)}")
    name = str(resource.resource_name)
    ctx.store.topic_config(name)  # an unknown topic: UNKNOWN_TOPIC_OR_PARTITION
    return name


def _alter(ctx: BrokerContext, resource: Struct, validate_only: bool) -> None:
    name = _check_resource(ctx, resource)
    new: dict[str, str] = {}
    for config in resource.configs:
        if config.value is None:
            raise ConfigError(f"Null value not supported for : {config.name}")
        new[config.name] = config.value
    current = ctx.store.topic_config(name)
    delete = [key for key in current.overrides if key not in new]
    current.altered(new, delete)  # validates; raises ConfigError
    if not validate_only:
        ctx.store.alter_config(name, set=new, delete=delete)
        logger.info("replaced the configs of topic %s: %s", name, new)


def _incremental_alter(ctx: BrokerContext, resource: Struct, validate_only: bool) -> None:
    name = _check_resource(ctx, resource)
    sets: dict[str, str] = {}
    deletes: list[str] = []
    appends: dict[str, str] = {}
    subtracts: dict[str, str] = {}
    for config in resource.configs:
        op = config.config_operation
        if op not in _OPERATIONS:
            raise InvalidRequestError(f"Unknown config operation {op} for {config.name}")
        if op == OP_DELETE:
            deletes.append(config.name)
            continue
        if config.value is None:
            raise ConfigError(f"Null value not supported for {_OPERATIONS[op]} of {config.name}")
        {OP_SET: sets, OP_APPEND: appends, OP_SUBTRACT: subtracts}[op][config.name] = config.value
    altered = ctx.store.topic_config(name).altered(
        sets, deletes, append=appends, subtract=subtracts
    )
    if validate_only:
        return
    # APPEND and SUBTRACT are applied to the store as SETs of the list they produced.
    lists = {key: altered.overrides[key] for key in (*appends, *subtracts)}
    ctx.store.alter_config(name, set={**sets, **lists}, delete=deletes)
    logger.info("altered the configs of topic %s", name)


def _alter_responses(ctx: BrokerContext, req: Struct, incremental: bool) -> list[dict[str, object]]:
    responses: list[dict[str, object]] = []
    for resource in req.resources:
        error, message = codes.NONE, None
        try:
            if incremental:
                _incremental_alter(ctx, resource, bool(req.validate_only))
            else:
                _alter(ctx, resource, bool(req.validate_only))
        except CompactlogError as exc:
            error, message = exc.error_code, str(exc)
        responses.append(
            {
                "error_code": error,
                "error_message": message,
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
            }
        )
    return responses


async def handle_alter_configs(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    responses = _alter_responses(ctx, request.body, incremental=False)
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def handle_incremental_alter_configs(
    ctx: BrokerContext, request: Request, peer: Peer
) -> Struct:
    responses = _alter_responses(ctx, request.body, incremental=True)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
