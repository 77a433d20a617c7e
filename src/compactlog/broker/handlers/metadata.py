"""ApiVersions (18) and Metadata (3): which versions we speak, and where the partitions are.

ApiVersions v0-v2 lists :func:`advertised_versions`: the protocol's ``ADVERTISED`` table (spec
1.5; Produce announced from v0 for old librdkafka, v0-v2 refused by the connection as Kafka 4.0
does), minus the group APIs when the broker runs without its group coordinator. A request above
v2 never reaches this handler: the connection answers it with the v0 error body (spec 1.1).

Metadata v1-v13 describes one node (``node.id``, the advertised host and port), a cluster id
that stays the same for the data directory, that node as controller, and for each topic asked
(all of them for a null list) its topic id (v10+) and every partition with that node as leader,
replica and in-sync replica, leader epoch 0 (v7+) and no offline replica (v5+). A topic that does
not exist is created on the spot when the request allows it (``allow_auto_topic_creation``,
always true before v4) and ``auto.create.topics.enable`` is true, with ``num.partitions``
partitions and default configs; Kafka 4.4 answers that first request UNKNOWN_TOPIC_OR_PARTITION
while its controller creates the topic, but here the topic is ready at once, so it is described
right away. Otherwise UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for a name Kafka
would refuse. Internal topics are never auto-created.

Topics may be asked for by id (v12+, a null name): as in Kafka, once one topic of the request
has an id the names are ignored, and an id that names no topic is UNKNOWN_TOPIC_ID with a null
name. Authorized operations (v8+) are every operation without an authorizer, as Kafka answers;
with one, what the peer may do. With an authorizer, topics are checked as Kafka's
``handleTopicMetadataRequest`` checks them (see :func:`handle_metadata`).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid

from compactlog import errors as codes
from compactlog.broker.access import authorize_cluster, authorized_operations, filter_authorized
from compactlog.broker.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.coordinator.offsets_topic import OFFSETS_TOPIC
from compactlog.errors import CompactlogError, InvalidTopicError, TopicExistsError
from compactlog.protocol import ADVERTISED, ApiKey, Request, Struct
from compactlog.protocol.messages import ApiVersionsResponse, MetadataResponse
from compactlog.protocol.messages.metadata import OPERATIONS_NOT_REQUESTED
from compactlog.protocol.schema import ZERO_UUID
from compactlog.storage.topic_names import validate_topic_name
from compactlog.storage.validator import LEADER_EPOCH  # the epoch written into every batch

__all__ = [
    "CLUSTER_OPERATIONS",
    "GROUP_API_KEYS",
    "INTERNAL_TOPICS",
    "LEADER_EPOCH",
    "TOPIC_OPERATIONS",
    "advertised_versions",
    "handle_api_versions",
    "handle_metadata",
    "topic_ids",
    "topic_uuid",
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
        ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE,
    }
)
#: Kafka's internal topics: flagged ``is_internal`` in Metadata, never auto-created.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})
#: What Kafka answers, without an authorizer, when asked for a topic's authorized operations:
#: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS and ALTER_CONFIGS (bit = code).
TOPIC_OPERATIONS = 3576
#: The same for the cluster (Kafka 4.4 answers 8096).
CLUSTER_OPERATIONS = 8096


def topic_uuid(topic_id: str) -> uuid.UUID:
    """The store's topic id (Kafka's ``Uuid.toString``: URL-safe base64, no padding) as the
    protocol's ``uuid.UUID``."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


def topic_ids(ctx: BrokerContext) -> dict[uuid.UUID, str]:
    """Every topic of the store by its id."""
    store = ctx.store
    return {topic_uuid(store.topic_info(name).topic_id): name for name in store.topics()}


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


def _topic_entry(ctx: BrokerContext, name: str, operations: int) -> Struct:
    info = ctx.store.topic_info(name)
    node = ctx.node_id
    return MetadataResponse.MetadataResponseTopic(
        error_code=codes.NONE,
        name=name,
        topic_id=topic_uuid(info.topic_id),
        is_internal=name in INTERNAL_TOPICS,
        partitions=[
            {
                "error_code": codes.NONE,
                "partition_index": p,
                "leader_id": node,
                "leader_epoch": LEADER_EPOCH,
                "replica_nodes": [node],
                "isr_nodes": [node],
                "offline_replicas": [],
            }
            for p in range(info.partitions)
        ],
        topic_authorized_operations=operations,
    )


def _error_entry(name: str | None, error_code: int, topic_id: uuid.UUID = ZERO_UUID) -> Struct:
    return MetadataResponse.MetadataResponseTopic(
        error_code=error_code,
        name=name,
        topic_id=topic_id,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[],
    )


async def _missing_topic(
    ctx: BrokerContext, name: str, allow_auto_create: bool, operations: int
) -> Struct:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _error_entry(name, codes.INVALID_TOPIC_EXCEPTION)
    if not allow_auto_create or name in INTERNAL_TOPICS:
        return _error_entry(name, codes.UNKNOWN_TOPIC_OR_PARTITION)
    partitions = ctx.settings.num_partitions
    try:
        # Off the event loop: creating a partition writes and fsyncs several files (tens of
        # milliseconds on a busy disk), which every other connection would wait behind. The
        # store publishes the topic only with all its partitions loaded.
        await asyncio.to_thread(ctx.store.create_topic, name, partitions)
    except TopicExistsError:  # another request created it meanwhile
        return _topic_entry(ctx, name, operations)
    except CompactlogError as exc:
        logger.info("auto-creating topic %r failed: %s", name, exc)
        return _error_entry(name, exc.error_code)
    logger.info("auto-created topic %s with %d partition(s)", name, partitions)
    return _topic_entry(ctx, name, operations)


def _topics_by_id(ctx: BrokerContext, ids: list[uuid.UUID], operations: int) -> list[Struct]:
    known = topic_ids(ctx)
    return [
        _topic_entry(ctx, known[i], operations)
        if i in known
        else _error_entry(None, codes.UNKNOWN_TOPIC_ID, i)
        for i in dict.fromkeys(ids)
    ]


async def handle_metadata(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    operations = (
        TOPIC_OPERATIONS if req.include_topic_authorized_operations else OPERATIONS_NOT_REQUESTED
    )
    denied: list[Struct] = []
    if req.topics is not None and any(t.topic_id != ZERO_UUID for t in req.topics):
        topics = _topics_by_id(ctx, [t.topic_id for t in req.topics], operations)
        if ctx.authorizer is not None:
            # Topic ids are not secret: an unauthorized one is TOPIC_AUTHORIZATION_FAILED with
            # its id and no name, as Kafka answers.
            names = [t.name for t in topics if t.error_code == codes.NONE]
            allowed = filter_authorized(
                ctx, request, peer, AclOperation.DESCRIBE, ResourceType.TOPIC, names
            )
            denied = [
                _error_entry(None, codes.TOPIC_AUTHORIZATION_FAILED, t.topic_id)
                for t in topics
                if t.error_code == codes.NONE and t.name not in allowed
            ]
            topics = [t for t in topics if t.error_code != codes.NONE or t.name in allowed]
    else:
        existing = set(ctx.store.topics())
        all_topics = req.topics is None
        if all_topics:
            names = sorted(existing)
        else:
            names = list(dict.fromkeys(t.name or "" for t in req.topics))
        allow_auto_create = bool(req.allow_auto_topic_creation) and (
            ctx.settings.auto_create_topics_enable
        )
        if ctx.authorizer is not None:
            # Kafka's order: DESCRIBE on each topic (an all-topics request leaves the others out,
            # a named one answers TOPIC_AUTHORIZATION_FAILED without saying whether it exists),
            # then CREATE on the cluster or the topic for the ones to auto-create.
            allowed = filter_authorized(
                ctx, request, peer, AclOperation.DESCRIBE, ResourceType.TOPIC, names,
                log_if_denied=not all_topics,
            )  # fmt: skip
            if not all_topics:
                denied = [
                    _error_entry(n, codes.TOPIC_AUTHORIZATION_FAILED)
                    for n in names
                    if n not in allowed
                ]
            names = [n for n in names if n in allowed]
            missing = [n for n in names if n not in existing]
            if (
                allow_auto_create
                and missing
                and not authorize_cluster(
                    ctx, request, peer, AclOperation.CREATE, log_if_denied=False
                )
            ):
                creatable = filter_authorized(
                    ctx, request, peer, AclOperation.CREATE, ResourceType.TOPIC, missing
                )
                denied = [
                    _error_entry(n, codes.TOPIC_AUTHORIZATION_FAILED)
                    for n in missing
                    if n not in creatable
                ] + denied
                names = [n for n in names if n in existing or n in creatable]
        topics = [
            _topic_entry(ctx, name, operations)
            if name in existing
            else await _missing_topic(ctx, name, allow_auto_create, operations)
            for name in names
        ]
    host, port = ctx.advertised_address()
    if ctx.authorizer is not None and req.include_topic_authorized_operations:
        for t in topics:
            bits = authorized_operations(ctx, peer, ResourceType.TOPIC, t.name or "")
            setattr(t, "topic_authorized_operations", bits)  # noqa: B010 - a schema field
    cluster_operations = OPERATIONS_NOT_REQUESTED
    if req.include_cluster_authorized_operations:
        cluster_operations = CLUSTER_OPERATIONS
        if ctx.authorizer is not None:
            cluster_operations = (
                authorized_operations(ctx, peer, ResourceType.CLUSTER, CLUSTER_NAME)
                if authorize_cluster(ctx, request, peer, AclOperation.DESCRIBE)
                else 0
            )
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[{"node_id": ctx.node_id, "host": host, "port": port, "rack": None}],
        cluster_id=ctx.cluster_id,
        controller_id=ctx.node_id,
        topics=topics + denied,
        cluster_authorized_operations=cluster_operations,
        error_code=codes.NONE,
    )
