"""ApiVersions (18) and Metadata (3): which versions we speak, and where the partitions are.

ApiVersions v0-v2 lists :func:`advertised_versions`: the protocol's ``ADVERTISED`` table (spec
1.5; Produce announced from v0 for old librdkafka, v0-v2 refused by the connection as Kafka 4.0
does), minus the group APIs when the broker runs without its group coordinator. A request above
v2 never reaches this handler: the connection answers it with the v0 error body (spec 1.1).

Metadata v1-v4 describes one node (id 0, the advertised host and port), a cluster id that stays
the same for the data directory, node 0 as controller, and for each topic asked (all of them for
a null list) every partition with leader 0, replicas [0] and isr [0]. A topic that does not
exist is created on the spot when the request allows it (``allow_auto_topic_creation``, always
true before v4) and ``auto.create.topics.enable`` is true, with ``num.partitions`` partitions and
default configs; Kafka then answers LEADER_NOT_AVAILABLE until the leader is elected, but here the
topic is ready at once, so it is described right away. Otherwise UNKNOWN_TOPIC_OR_PARTITION, or
INVALID_TOPIC_EXCEPTION for a name Kafka would refuse. Internal topics are never auto-created.
"""

from __future__ import annotations

import logging

from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.offsets_topic import OFFSETS_TOPIC
from compactlog.errors import CompactlogError, InvalidTopicError
from compactlog.protocol import ADVERTISED, ApiKey, Request, Struct, codes
from compactlog.protocol.messages import ApiVersionsResponse, MetadataResponse
from compactlog.storage.topic_names import validate_topic_name

__all__ = [
    "GROUP_API_KEYS",
    "INTERNAL_TOPICS",
    "advertised_versions",
    "handle_api_versions",
    "handle_metadata",
]

logger = logging.getLogger("compactlog.broker")

#: The APIs served by the group coordinator (not advertised when it is not running).
GROUP_API_KEYS = frozenset(
    {
        ApiKey.FIND_COORDINATOR,
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.LIST_GROUPS,
        ApiKey.DESCRIBE_GROUPS,
    }
)
#: Kafka's internal topics: flagged ``is_internal`` in Metadata, never auto-created.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})


def advertised_versions(groups_enabled: bool) -> dict[int, tuple[int, int]]:
    """(min, max) per API key that ApiVersions announces."""
    return {
        key: versions
        for key, versions in ADVERTISED.items()
        if groups_enabled or key not in GROUP_API_KEYS
    }


def api_versions_body(groups_enabled: bool, error_code: int = codes.NONE) -> Struct:
    entry = ApiVersionsResponse.ApiVersion
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[
            entry(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(advertised_versions(groups_enabled).items())
        ],
        throttle_time_ms=0,
    )


async def handle_api_versions(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    return api_versions_body(ctx.groups_enabled)


def _topic_entry(ctx: BrokerContext, name: str) -> Struct:
    partitions = ctx.store.partitions(name)
    node = ctx.node_id
    return MetadataResponse.MetadataResponseTopic(
        error_code=codes.NONE,
        name=name,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[
            {
                "error_code": codes.NONE,
                "partition_index": p,
                "leader_id": node,
                "replica_nodes": [node],
                "isr_nodes": [node],
            }
            for p in range(partitions)
        ],
    )


def _error_entry(name: str, error_code: int) -> Struct:
    return MetadataResponse.MetadataResponseTopic(
        error_code=error_code, name=name, is_internal=name in INTERNAL_TOPICS, partitions=[]
    )


def _missing_topic(ctx: BrokerContext, name: str, allow_auto_create: bool) -> Struct:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _error_entry(name, codes.INVALID_TOPIC_EXCEPTION)
    if not allow_auto_create or name in INTERNAL_TOPICS:
        return _error_entry(name, codes.UNKNOWN_TOPIC_OR_PARTITION)
    partitions = ctx.settings.num_partitions
    try:
        ctx.store.create_topic(name, partitions)
    except CompactlogError as exc:
        logger.info("auto-creating topic %r failed: %s", name, exc)
        return _error_entry(name, exc.error_code)
    logger.info("auto-created topic %s with %d partition(s)", name, partitions)
    return _topic_entry(ctx, name)


async def handle_metadata(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    existing = set(ctx.store.topics())
    if req.topics is None:
        names = sorted(existing)
    else:
        names = list(dict.fromkeys(t.name for t in req.topics))
    allow_auto_create = bool(req.allow_auto_topic_creation) and (
        ctx.settings.auto_create_topics_enable
    )
    topics = [
        _topic_entry(ctx, name)
        if name in existing
        else _missing_topic(ctx, name, allow_auto_create)
        for name in names
    ]
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[{"node_id": ctx.node_id, "host": ctx.host, "port": ctx.port, "rack": None}],
        cluster_id=ctx.cluster_id,
        controller_id=ctx.node_id,
        topics=topics,
    )
