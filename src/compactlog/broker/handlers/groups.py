"""FindCoordinator (10) and the classic group APIs, over the sans-I/O
:class:`~compactlog.broker.coordinator.service.GroupCoordinator`.

The coordinator does the group logic; these handlers only copy fields between the wire format
and its calls. JoinGroup and SyncGroup may be answered later (when the other members have
joined, when the leader's assignment arrives, or when a deadline passes): the coordinator returns
a :class:`~compactlog.broker.coordinator.delayed.Pending`, which the handler bridges to an
asyncio future and awaits. Meanwhile other connections are served; this connection's later
requests wait, as in Kafka. After every call the broker's coordinator timer is re-armed for the
next deadline.

* FindCoordinator v0-v1: this node for a group (key type 0) and for a transactional id (type 1,
  so that a transactional producer gets the clear refusal of InitProducerId rather than retrying
  a coordinator lookup until it times out); other key types: INVALID_REQUEST. The first lookup
  of a group loads the coordinator, creating ``__consumer_offsets`` (Kafka creates it on first
  use too); ListGroups and DescribeGroups before that see no groups.
* LeaveGroup v0-v1 has one error for its one member: the member's error when the request as a
  whole succeeded (Kafka's conversion for versions before v3).
* ListGroups v0-v5 filters by state (v4+) and by type (v5+: every group here is "classic");
  DescribeGroups v0-v6 describes a group that does not exist as "Dead", with GROUP_ID_NOT_FOUND
  and Kafka's "Group <id> not found." from v6 on.
* DeleteGroups v0-v2 deletes Empty groups (their offsets too): NON_EMPTY_GROUP for a group with
  members, GROUP_ID_NOT_FOUND for one that does not exist.
* OffsetCommit v2-v3: a partition of a topic that does not exist is answered
  UNKNOWN_TOPIC_OR_PARTITION by the handler, as Kafka's request handler does; the others go to the
  coordinator. OffsetFetch v1 has no top-level error: a group error is put on every partition.

Authorization (with ``authorizer.class.name`` set): each API first checks what Kafka 4.4's
``KafkaApis`` / ``ControllerApis`` check for it, through :mod:`compactlog.broker.access`, and
answers a refusal field for field as Kafka does (tests/kafka/test_acls_vs_kafka.py).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TypeVar

from compactlog import errors as codes
from compactlog.broker.access import (
    authorize,
    authorize_cluster,
    authorized_operations,
    filter_authorized,
)
from compactlog.broker.authorizer import AclOperation, ResourceType
from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.coordinator.api import DescribedGroup, ListedGroup, PartitionResult
from compactlog.broker.coordinator.classic_group import GroupState
from compactlog.broker.coordinator.delayed import Pending
from compactlog.errors import CompactlogError
from compactlog.protocol import Request, Struct
from compactlog.protocol.messages import (
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    FindCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)

__all__ = [
    "handle_delete_groups",
    "handle_describe_groups",
    "handle_find_coordinator",
    "handle_heartbeat",
    "handle_join_group",
    "handle_leave_group",
    "handle_list_groups",
    "handle_offset_commit",
    "handle_offset_delete",
    "handle_offset_fetch",
    "handle_sync_group",
]

logger = logging.getLogger("compactlog.broker")

T = TypeVar("T")

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


async def _result(ctx: BrokerContext, pending: Pending[T]) -> T:
    """The response of a possibly delayed JoinGroup or SyncGroup."""
    ctx.on_group_request()
    if pending.done:
        return pending.result()
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def complete(result: T) -> None:
        if not future.done():
            future.set_result(result)

    pending.add_done_callback(complete)
    return await future


def _client_host(peer: Peer) -> str:
    return f"/{peer.host}"  # Java's InetAddress.toString(), as Kafka reports it


async def handle_find_coordinator(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    if req.key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        return FindCoordinatorResponse(
            throttle_time_ms=0, error_code=codes.INVALID_REQUEST,
            error_message=f"unknown coordinator key type {req.key_type}", node_id=-1, host="",
            port=-1,
        )  # fmt: skip
    denied = None
    if req.key_type == GROUP_KEY_TYPE and not authorize(
        ctx, request, peer, AclOperation.DESCRIBE, ResourceType.GROUP, req.key
    ):
        denied = (codes.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    elif req.key_type == TRANSACTION_KEY_TYPE and not authorize(
        ctx, request, peer, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, req.key
    ):
        denied = (
            codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "Transactional Id authorization failed.",
        )
    if denied is not None:
        return FindCoordinatorResponse(
            throttle_time_ms=0, error_code=denied[0], error_message=denied[1], node_id=-1,
            host="", port=-1,
        )  # fmt: skip
    if req.key_type == GROUP_KEY_TYPE:
        try:
            ctx.coordinator()  # creates __consumer_offsets on first use, as Kafka does
        except CompactlogError as exc:
            logger.warning("loading the group coordinator failed: %s", exc)
            return FindCoordinatorResponse(
                throttle_time_ms=0, error_code=codes.COORDINATOR_NOT_AVAILABLE,
                error_message=str(exc), node_id=-1, host="", port=-1,
            )  # fmt: skip
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=codes.NONE, error_message=None, node_id=ctx.node_id,
        host=ctx.advertised_address()[0], port=ctx.advertised_address()[1],
    )  # fmt: skip


def _may_read_group(ctx: BrokerContext, request: Request, peer: Peer) -> bool:
    """READ on the request's group: what JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
    OffsetCommit need (GROUP_AUTHORIZATION_FAILED otherwise)."""
    return authorize(
        ctx, request, peer, AclOperation.READ, ResourceType.GROUP, request.body.group_id
    )


async def handle_join_group(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    if not _may_read_group(ctx, request, peer):
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED, generation_id=-1,
            protocol_name="", leader="", member_id="", members=[],
        )  # fmt: skip
    pending = ctx.coordinator().join_group(
        req.group_id,
        req.member_id,
        req.group_instance_id,
        peer.client_id,
        _client_host(peer),
        req.protocol_type,
        [(p.name, p.metadata) for p in req.protocols],
        req.session_timeout_ms,
        req.rebalance_timeout_ms,
        require_known_member_id=request.api_version >= 4,
    )
    result = await _result(ctx, pending)
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_name=result.protocol_name or "",
        leader=result.leader,
        member_id=result.member_id,
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in result.members
        ],
    )


async def handle_sync_group(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    if not _may_read_group(ctx, request, peer):
        return SyncGroupResponse(
            throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED, assignment=b""
        )
    pending = ctx.coordinator().sync_group(
        req.group_id,
        req.generation_id,
        req.member_id,
        [(a.member_id, a.assignment) for a in req.assignments],
        group_instance_id=req.group_instance_id,
    )
    result = await _result(ctx, pending)
    return SyncGroupResponse(
        throttle_time_ms=0, error_code=result.error_code, assignment=result.assignment
    )


async def handle_heartbeat(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    if not _may_read_group(ctx, request, peer):
        return HeartbeatResponse(throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED)
    error = ctx.coordinator().heartbeat(req.group_id, req.generation_id, req.member_id)
    ctx.on_group_request()
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


async def handle_leave_group(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    if not _may_read_group(ctx, request, peer):
        return LeaveGroupResponse(throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED)
    result = ctx.coordinator().leave_group(req.group_id, [(req.member_id, None)])
    ctx.on_group_request()
    error = result.error_code
    if error == codes.NONE and result.members:
        error = result.members[0].error_code
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error)


async def handle_offset_commit(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    errors: dict[tuple[str, int], int] = {}
    if not _may_read_group(ctx, request, peer):
        errors = {
            (t.name, p.partition_index): codes.GROUP_AUTHORIZATION_FAILED
            for t in req.topics
            for p in t.partitions
        }
    else:
        readable = filter_authorized(
            ctx, request, peer, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics)
        )
        known = set(ctx.store.topics())
        for t in req.topics:
            if t.name not in readable:
                for p in t.partitions:
                    errors[(t.name, p.partition_index)] = codes.TOPIC_AUTHORIZATION_FAILED
        offsets = [
            (t.name, p.partition_index, p.committed_offset, -1, p.committed_metadata)
            for t in req.topics
            if t.name in known and t.name in readable
            for p in t.partitions
        ]
        results = ctx.coordinator().commit_offsets(
            req.group_id, req.generation_id_or_member_epoch, req.member_id,
            req.retention_time_ms, offsets,
        )  # fmt: skip
        ctx.on_group_request()
        errors.update({(r.topic, r.partition): r.error_code for r in results})
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": errors.get(
                            (t.name, p.partition_index), codes.UNKNOWN_TOPIC_OR_PARTITION
                        ),
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    )


async def handle_offset_fetch(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    top_level = request.api_version >= 2
    by_topic: dict[str, list[dict[str, object]]] = {}
    if not authorize(ctx, request, peer, AclOperation.DESCRIBE, ResourceType.GROUP, req.group_id):
        error = codes.GROUP_AUTHORIZATION_FAILED
        if not top_level:  # v1 has no top-level error: on every partition asked for
            for t in req.topics or ():
                by_topic[t.name] = [
                    {"partition_index": p, "committed_offset": -1, "metadata": "",
                     "error_code": error}
                    for p in t.partition_indexes
                ]  # fmt: skip
        return OffsetFetchResponse(
            throttle_time_ms=0,
            topics=[{"name": name, "partitions": parts} for name, parts in by_topic.items()],
            error_code=error,
        )
    # Offsets of topics the peer may not describe are not shown: left out of an all-topics
    # fetch, TOPIC_AUTHORIZATION_FAILED for topics asked by name (after the group's answer).
    describable = filter_authorized(
        ctx, request, peer, AclOperation.DESCRIBE, ResourceType.TOPIC,
        (t.name for t in req.topics or ()),
    )  # fmt: skip
    wanted = (
        None
        if req.topics is None
        else [(t.name, p) for t in req.topics if t.name in describable for p in t.partition_indexes]
    )
    result = ctx.coordinator().fetch_offsets(req.group_id, wanted)
    ctx.on_group_request()
    if req.topics is None and ctx.authorizer is not None:
        shown = filter_authorized(
            ctx, request, peer, AclOperation.DESCRIBE, ResourceType.TOPIC,
            (p.topic for p in result.partitions), log_if_denied=True,
        )  # fmt: skip
        result = replace(result, partitions=tuple(p for p in result.partitions if p.topic in shown))
    if not top_level and result.error_code != codes.NONE and not result.partitions:
        for topic, partition in wanted or ():
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": -1, "metadata": "",
                 "error_code": result.error_code}
            )  # fmt: skip
    for p in result.partitions:
        error = p.error_code
        if not top_level and error == codes.NONE:
            error = result.error_code
        by_topic.setdefault(p.topic, []).append(
            {
                "partition_index": p.partition,
                "committed_offset": p.offset,
                "metadata": p.metadata,
                "error_code": error,
            }
        )
    if result.error_code == codes.NONE or not top_level:
        for t in req.topics or ():
            if t.name not in describable:
                by_topic[t.name] = [
                    {"partition_index": p, "committed_offset": -1, "metadata": "",
                     "error_code": codes.TOPIC_AUTHORIZATION_FAILED}
                    for p in t.partition_indexes
                ]  # fmt: skip
    return OffsetFetchResponse(
        throttle_time_ms=0,
        topics=[{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        error_code=result.error_code,
    )


async def handle_list_groups(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    req = request.body
    # Before the first group request there is no __consumer_offsets and so no group.
    groups: list[ListedGroup] = (
        [] if ctx.groups is None else ctx.groups.list_groups(req.states_filter)
    )
    types = {t.lower() for t in req.types_filter}
    ctx.on_group_request()
    if ctx.authorizer is not None and not authorize_cluster(
        ctx, request, peer, AclOperation.DESCRIBE, log_if_denied=False
    ):  # Kafka: DESCRIBE on the cluster lists every group, else the groups one may describe
        visible = filter_authorized(
            ctx, request, peer, AclOperation.DESCRIBE, ResourceType.GROUP,
            (g.group_id for g in groups), log_if_denied=False,
        )  # fmt: skip
        groups = [g for g in groups if g.group_id in visible]
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        groups=[
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
            for g in groups
            if not types or g.group_type in types
        ],
    )


async def handle_describe_groups(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    asked = list(request.body.groups)
    allowed = filter_authorized(
        ctx, request, peer, AclOperation.DESCRIBE, ResourceType.GROUP, asked
    )
    names = [name for name in asked if name in allowed]
    described = (
        [DescribedGroup(codes.NONE, name, GroupState.DEAD.value) for name in names]
        if ctx.groups is None
        else ctx.groups.describe_groups(names)
    )
    ctx.on_group_request()
    denied = [
        {"error_code": codes.GROUP_AUTHORIZATION_FAILED, "error_message": None, "group_id": name,
         "group_state": "", "protocol_type": "", "protocol_data": "", "members": []}
        for name in asked
        if name not in allowed
    ]  # fmt: skip
    with_operations = bool(request.body.include_authorized_operations)
    # v6+ (KIP-1043): a group that does not exist is an error, not an empty "Dead" group.
    not_found = request.api_version >= 6
    return DescribeGroupsResponse(
        throttle_time_ms=0,
        groups=[
            {
                "error_code": codes.GROUP_ID_NOT_FOUND
                if not_found and g.state == GroupState.DEAD.value
                else g.error_code,
                "error_message": f"Group {g.group_id} not found."
                if not_found and g.state == GroupState.DEAD.value
                else None,
                "group_id": g.group_id,
                "group_state": g.state,
                "protocol_type": g.protocol_type,
                "protocol_data": g.protocol_data,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in g.members
                ],
                "authorized_operations": authorized_operations(
                    ctx, peer, ResourceType.GROUP, g.group_id
                )
                if with_operations and g.error_code == codes.NONE
                else -(2**31),
            }
            for g in described
        ]
        + denied,
    )


async def handle_delete_groups(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    asked = list(dict.fromkeys(request.body.groups_names))
    allowed = filter_authorized(ctx, request, peer, AclOperation.DELETE, ResourceType.GROUP, asked)
    names = [name for name in asked if name in allowed]
    # Before the first group request there is no __consumer_offsets and so no group.
    errors = (
        {name: codes.GROUP_ID_NOT_FOUND for name in names}
        if ctx.groups is None
        else {g.group_id: g.error_code for g in ctx.groups.delete_groups(names)}
    )
    ctx.on_group_request()
    for name, error in errors.items():
        if error == codes.NONE:
            logger.info("deleted group %s", name)
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[{"group_id": name, "error_code": errors[name]} for name in names]
        + [
            {"group_id": name, "error_code": codes.GROUP_AUTHORIZATION_FAILED}
            for name in asked
            if name not in allowed
        ],
    )


async def handle_offset_delete(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    """OffsetDelete v0 (``kafka-consumer-groups --delete-offsets``), as Kafka's request handler
    and classic group coordinator answer it: partitions of unknown topics get
    UNKNOWN_TOPIC_OR_PARTITION from the handler, the rest go to the coordinator; a group error
    (INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or a failed write) replaces the
    whole answer, as Kafka's ``OffsetDeleteResponse.Builder.merge`` does."""
    req = request.body
    if not authorize(ctx, request, peer, AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return OffsetDeleteResponse(
            error_code=codes.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[]
        )
    readable = filter_authorized(
        ctx, request, peer, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics)
    )
    store = ctx.store
    known = set(store.topics())
    unknown: dict[str, list[int]] = {}
    unauthorized: dict[str, list[int]] = {}
    wanted: list[tuple[str, int]] = []
    for t in req.topics:
        for p in t.partitions:
            index = p.partition_index
            if t.name not in readable:
                unauthorized.setdefault(t.name, []).append(index)
            elif t.name in known and 0 <= index < store.partitions(t.name):
                wanted.append((t.name, index))
            else:
                unknown.setdefault(t.name, []).append(index)
    results: list[PartitionResult] = []
    if not req.group_id:
        error = codes.INVALID_GROUP_ID
    elif ctx.groups is None:  # before the first group request there is no group at all
        error = codes.GROUP_ID_NOT_FOUND
    else:
        error, results = ctx.groups.delete_offsets(req.group_id, wanted)
        ctx.on_group_request()
    if error != codes.NONE:
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
    by_topic: dict[str, list[dict[str, int]]] = {}
    for name, indexes in unauthorized.items():
        by_topic[name] = [
            {"partition_index": i, "error_code": codes.TOPIC_AUTHORIZATION_FAILED} for i in indexes
        ]
    for name, indexes in unknown.items():
        by_topic[name] = [
            {"partition_index": i, "error_code": codes.UNKNOWN_TOPIC_OR_PARTITION} for i in indexes
        ]
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            {"partition_index": r.partition, "error_code": r.error_code}
        )
        if r.error_code == codes.NONE:
            logger.info(
                "deleted the offset of %s-%d of group %s", r.topic, r.partition, req.group_id
            )
    return OffsetDeleteResponse(
        error_code=codes.NONE,
        throttle_time_ms=0,
        topics=[{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    )
