"""Config APIs: DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Topic configs are validated by the store (:mod:`compactlog.storage.config`); a refusal is
answered with Kafka's own sentence where the store knows it (``ConfigError.kafka_message``, so
that ``kafka-configs`` prints what it prints against Kafka 4.4) and otherwise with the store's.
Nothing is applied unless the whole resource is valid; ``validate_only`` changes nothing.

* DescribeConfigs v1-v4: a topic (type 2) lists every topic config, defaults included, in name
  order, with its source (1 topic override, 3 cluster-wide dynamic default, 4 store-wide
  setting, 5 default), ``read_only`` false (kafka-python's ``alter_configs()`` checks that first,
  spec 1.4 item 6), when asked its synonyms, and from v3 its type and documentation. Keys that
  name no config are left out. The broker (type 4, named by its node id) lists every broker
  setting, read-only (there are no dynamic broker configs) except ``min.insync.replicas``; the
  name "" lists the cluster-wide dynamic defaults (``BrokerSettings.cluster_defaults``, which
  Kafka 4.4's controller creates at once). Kafka 4.4 sends an empty error message, not a null
  one, with every result of a known type; so do we.
* AlterConfigs v0-v2 replaces the topic's whole set of overrides; IncrementalAlterConfigs v0-v1
  applies SET, DELETE, APPEND and SUBTRACT per key (APPEND/SUBTRACT on list configs such as
  ``cleanup.policy``, starting from the override or the default; a DELETE of a name that is no
  topic config is ignored, as Kafka ignores it). Checked in Kafka's order: the resource type, a
  key given twice and a null value (INVALID_REQUEST), the topic (UNKNOWN_TOPIC_OR_PARTITION), the
  values (INVALID_CONFIG). Broker resources are refused with INVALID_REQUEST: compactlog's broker
  settings are static (Kafka would store a dynamic config).

Authorization (with ``authorizer.class.name`` set): each API first checks what Kafka 4.4's
``KafkaApis`` / ``ControllerApis`` check for it, through :mod:`compactlog.broker.access`, and
answers a refusal field for field as Kafka does (tests/kafka/test_acls_vs_kafka.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from compactlog import errors as codes
from compactlog.broker.access import authorize
from compactlog.broker.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from compactlog.broker.context import BrokerContext, Peer
from compactlog.errors import (
    CompactlogError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)
from compactlog.protocol import Request, Struct
from compactlog.protocol.messages import (
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)
from compactlog.storage.config import CONFIG_TYPE_IDS, TOPIC_CONFIGS, ConfigSource, LogConfig

__all__ = [
    "DescribedConfig",
    "client_message",
    "handle_alter_configs",
    "handle_describe_configs",
    "handle_incremental_alter_configs",
    "topic_configs",
    "unknown_topic",
]

logger = logging.getLogger("compactlog.broker")

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OPERATIONS = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}
#: Kafka's ConfigType id of a config whose type it does not say (broker settings here).
_UNKNOWN_TYPE = 0


def client_message(exc: CompactlogError) -> str:
    """What a client is told about ``exc``: Kafka's sentence when we know it, else ours."""
    kafka_message = getattr(exc, "kafka_message", None)
    return kafka_message if kafka_message is not None else str(exc)


def unknown_topic(name: str) -> UnknownTopicOrPartitionError:
    """Kafka's refusal of a config change or description for a topic that does not exist."""
    return UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")


@dataclass(frozen=True)
class DescribedConfig:
    """One config of a resource as DescribeConfigs and CreateTopics v5+ report it."""

    name: str
    value: str | None
    source: int
    synonyms: tuple[tuple[str, str | None, int], ...]
    read_only: bool
    config_type: int
    documentation: str | None


def topic_configs(ctx: BrokerContext, config: LogConfig) -> list[DescribedConfig]:
    """Every topic config of ``config`` with its source and synonyms, as Kafka 4.4 reports them:
    the cluster-wide dynamic defaults come after a topic override and before the store-wide
    settings."""
    cluster = ctx.settings.cluster_defaults
    described = []
    for entry in config.describe_entries():
        synonyms = [(s.name, s.value, int(s.source)) for s in entry.synonyms]
        if entry.name in cluster:
            at = 1 if entry.source == ConfigSource.TOPIC_CONFIG else 0
            dynamic = (
                entry.name,
                cluster[entry.name],
                int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            )
            synonyms.insert(at, dynamic)
        value = entry.value
        if entry.name in cluster and entry.source != ConfigSource.TOPIC_CONFIG:
            value = cluster[entry.name]
        described.append(
            DescribedConfig(
                name=entry.name,
                value=value,
                source=synonyms[0][2] if synonyms else int(ConfigSource.DEFAULT_CONFIG),
                synonyms=tuple(synonyms),
                read_only=entry.read_only,
                config_type=CONFIG_TYPE_IDS[entry.type],
                documentation=entry.documentation,
            )
        )
    return described


def _broker_configs(ctx: BrokerContext, name: str) -> list[DescribedConfig]:
    cluster = ctx.settings.cluster_defaults
    dynamic = int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    if name == "":  # the cluster-wide dynamic defaults
        return [
            DescribedConfig(
                key, value, dynamic, ((key, value, dynamic),), False, _UNKNOWN_TYPE, None
            )
            for key, value in sorted(cluster.items())
        ]
    if name != str(ctx.node_id):
        raise InvalidRequestError(
            f"Unexpected broker id, expected {ctx.node_id} or empty string, but received {name}"
        )
    described = []
    for row in ctx.settings.describe():
        synonyms = [(row.name, row.value, int(row.source))]
        value, read_only = row.value, True
        if row.name in cluster:
            synonyms.insert(0, (row.name, cluster[row.name], dynamic))
            value, read_only = cluster[row.name], False
        described.append(
            DescribedConfig(
                row.name,
                value,
                synonyms[0][2],
                tuple(synonyms),
                read_only,
                _UNKNOWN_TYPE,
                row.documentation,
            )
        )
    return described


def _describe_resource(ctx: BrokerContext, resource: Struct) -> list[DescribedConfig]:
    name = resource.resource_name
    if resource.resource_type == TOPIC_RESOURCE:
        if name not in ctx.store.topics():
            raise UnknownTopicOrPartitionError("")  # Kafka 4.4 sends an empty message
        return topic_configs(ctx, ctx.store.topic_config(name))
    if resource.resource_type == BROKER_RESOURCE:
        if name and not name.isdigit():
            raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}")
        return _broker_configs(ctx, name)
    raise InvalidRequestError(f"Unknown resource type {resource.resource_type}")


def _describe_result(
    described: Sequence[DescribedConfig], keys: set[str] | None, synonyms: bool, docs: bool
) -> list[Struct]:
    entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    return [
        entry(
            name=c.name,
            value=c.value,
            read_only=c.read_only,
            config_source=c.source,
            is_sensitive=False,
            synonyms=[{"name": n, "value": v, "source": s} for n, v, s in c.synonyms]
            if synonyms
            else [],
            config_type=c.config_type,
            documentation=c.documentation if docs else None,
        )
        for c in described
        if keys is None or c.name in keys
    ]


#: Config resource types (BROKER_LOGGER, CLIENT_METRICS and GROUP beside TOPIC and BROKER) and
#: what Kafka authorizes each against, with the error of a denial.
_BROKER_LOGGER_RESOURCE, _CLIENT_METRICS_RESOURCE, _GROUP_RESOURCE = 8, 16, 32
_AUTHORIZED_AS: dict[int, tuple[ResourceType, int, str]] = {
    TOPIC_RESOURCE: (ResourceType.TOPIC, codes.TOPIC_AUTHORIZATION_FAILED,
                     "Topic authorization failed."),
    BROKER_RESOURCE: (ResourceType.CLUSTER, codes.CLUSTER_AUTHORIZATION_FAILED,
                      "Cluster authorization failed."),
    _BROKER_LOGGER_RESOURCE: (ResourceType.CLUSTER, codes.CLUSTER_AUTHORIZATION_FAILED,
                              "Cluster authorization failed."),
    _CLIENT_METRICS_RESOURCE: (ResourceType.CLUSTER, codes.CLUSTER_AUTHORIZATION_FAILED,
                               "Cluster authorization failed."),
    _GROUP_RESOURCE: (ResourceType.GROUP, codes.GROUP_AUTHORIZATION_FAILED,
                      "Group authorization failed."),
}  # fmt: skip


def _denied(
    ctx: BrokerContext, request: Request, peer: Peer, resource: Struct, operation: AclOperation
) -> tuple[int, str | None] | None:
    """The error of a config resource ``peer`` may not describe or alter, or None (Kafka's
    ``ConfigHelper`` and ``ControllerApis.authorizeAlterResource``). A type Kafka does not
    know is left to the handler's own refusal."""
    kind = _AUTHORIZED_AS.get(resource.resource_type)
    if kind is None:
        return None
    resource_type, error, message = kind
    name = CLUSTER_NAME if resource_type == ResourceType.CLUSTER else str(resource.resource_name)
    if authorize(ctx, request, peer, operation, resource_type, name):
        return None
    if operation == AclOperation.ALTER_CONFIGS and resource.resource_type in (
        BROKER_RESOURCE, _BROKER_LOGGER_RESOURCE,
    ):  # fmt: skip
        # Kafka's broker refuses these itself (ConfigAdminManager.preprocess), with no message.
        return error, None
    return error, message


async def handle_describe_configs(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    results = []
    for resource in req.resources:
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        error, message, configs = codes.NONE, "", []
        denied = _denied(ctx, request, peer, resource, AclOperation.DESCRIBE_CONFIGS)
        if denied is not None:
            results.append(
                {
                    "error_code": denied[0],
                    "error_message": denied[1],
                    "resource_type": resource.resource_type,
                    "resource_name": resource.resource_name,
                    "configs": [],
                }
            )
            continue
        try:
            described = _describe_resource(ctx, resource)
            configs = _describe_result(
                described, keys, req.include_synonyms, req.include_documentation
            )
        except CompactlogError as exc:
            error, message = exc.error_code, client_message(exc)
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
def _check_resource(ctx: BrokerContext, resource: Struct, incremental: bool) -> str:
    if resource.resource_type == BROKER_RESOURCE:
        raise InvalidRequestError(
            "broker configs are static in compactlog: restart the broker with --config "
            "NAME=VALUE to change them"
        )
    if resource.resource_type != TOPIC_RESOURCE:
        raise InvalidRequestError(f"Unknown resource type {resource.resource_type}")
    keys = [c.name for c in resource.configs]
    if len(set(keys)) != len(keys):
        raise InvalidRequestError("Error due to duplicate config keys")
    for config in resource.configs:
        if config.value is None and not (incremental and config.config_operation == OP_DELETE):
            raise InvalidRequestError(f"Null value not supported for : {config.name}")
    name = str(resource.resource_name)
    if name not in ctx.store.topics():
        raise unknown_topic(name)
    return name


def _alter(ctx: BrokerContext, resource: Struct, validate_only: bool) -> None:
    name = _check_resource(ctx, resource, incremental=False)
    new = {config.name: config.value for config in resource.configs}
    current = ctx.store.topic_config(name)
    delete = [key for key in current.overrides if key not in new]
    current.altered(new, delete)  # validates; raises ConfigError
    if not validate_only:
        ctx.store.alter_config(name, set=new, delete=delete)
        logger.info("replaced the configs of topic %s: %s", name, new)


def _deletes_nothing(ctx: BrokerContext, resource: Struct) -> bool:
    """Whether ``resource`` only deletes dynamic configs of this broker (``kafka-reassign-partitions
    --verify`` clears its replication throttles that way): this broker has none, so Kafka would
    accept it and change nothing. The cluster-wide default (resource name "") is not this."""
    return (
        resource.resource_type == BROKER_RESOURCE
        and str(resource.resource_name) == str(ctx.node_id)
        and bool(resource.configs)
        and all(config.config_operation == OP_DELETE for config in resource.configs)
    )


def _incremental_alter(ctx: BrokerContext, resource: Struct, validate_only: bool) -> None:
    if _deletes_nothing(ctx, resource):
        return
    name = _check_resource(ctx, resource, incremental=True)
    sets: dict[str, str] = {}
    deletes: list[str] = []
    appends: dict[str, str] = {}
    subtracts: dict[str, str] = {}
    for config in resource.configs:
        op = config.config_operation
        if op not in _OPERATIONS:
            raise InvalidRequestError(f"Unknown config operation {op} for {config.name}")
        if op == OP_DELETE:
            if config.name in TOPIC_CONFIGS:  # Kafka ignores the deletion of an unknown name
                deletes.append(config.name)
            continue
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


def _alter_responses(
    ctx: BrokerContext, request: Request, peer: Peer, incremental: bool
) -> list[dict[str, object]]:
    req = request.body
    responses: list[dict[str, object]] = []
    for resource in req.resources:
        error, message = codes.NONE, None
        denied = _denied(ctx, request, peer, resource, AclOperation.ALTER_CONFIGS)
        try:
            if denied is not None:
                error, message = denied
            elif incremental:
                _incremental_alter(ctx, resource, bool(req.validate_only))
            else:
                _alter(ctx, resource, bool(req.validate_only))
        except CompactlogError as exc:
            error, message = exc.error_code, client_message(exc)
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
    responses = _alter_responses(ctx, request, peer, incremental=False)
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def handle_incremental_alter_configs(
    ctx: BrokerContext, request: Request, peer: Peer
) -> Struct:
    responses = _alter_responses(ctx, request, peer, incremental=True)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
