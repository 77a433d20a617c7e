"""The KIP-848 consumer group APIs, ConsumerGroupHeartbeat (68) v0-v1 and ConsumerGroupDescribe
(69) v0-v1, over the coordinator's :class:`~compactlog.broker.coordinator.consumer_groups.
ConsumerGroupManager` (through :class:`~compactlog.broker.coordinator.service.GroupCoordinator`).

The handlers copy fields: assignments name topics by topic id on the wire and in the
coordinator; ConsumerGroupDescribe adds each topic's name (a topic deleted since is left out,
as Kafka leaves out topics missing from its metadata image). Members are described with
``member_type`` from v1: 1 for a member that speaks the consumer protocol, 0 for a classic
member of the group (see :mod:`~compactlog.broker.coordinator.migration`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from compactlog import errors as codes
from compactlog.broker.access import authorize, authorized_operations, filter_authorized
from compactlog.broker.authorizer import AclOperation, ResourceType
from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.coordinator.assignors import Partitions
from compactlog.protocol import Request, Struct
from compactlog.protocol.messages import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
)

__all__ = ["handle_consumer_group_describe", "handle_consumer_group_heartbeat"]

#: ``ConsumerGroupDescribe`` v1 ``MemberType`` of a member that uses the consumer protocol.
CONSUMER_MEMBER_TYPE = 1
#: ... and of a classic member of a consumer group.
CLASSIC_MEMBER_TYPE = 0


def _client_host(peer: Peer) -> str:
    return f"/{peer.host}"  # Java's InetAddress.toString(), as Kafka reports it


async def handle_consumer_group_heartbeat(
    ctx: BrokerContext, request: Request, peer: Peer
) -> Struct:
    req = request.body
    if not authorize(ctx, request, peer, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0,
            error_code=codes.GROUP_AUTHORIZATION_FAILED,
            error_message=None,
            member_id=None,
            member_epoch=0,
            heartbeat_interval_ms=0,
            assignment=None,
        )
    owned = (
        None
        if req.topic_partitions is None
        else [(t.topic_id, list(t.partitions)) for t in req.topic_partitions]
    )
    result = ctx.coordinator().consumer_group_heartbeat(
        req.group_id,
        req.member_id,
        req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=req.subscribed_topic_names,
        subscribed_topic_regex=req.subscribed_topic_regex,
        server_assignor=req.server_assignor,
        owned=owned,
        client_id=peer.client_id or "",
        client_host=_client_host(peer),
    )
    ctx.on_group_request()
    assignment = (
        None
        if result.assignment is None
        else {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": sorted(partitions)}
                for topic_id, partitions in sorted(result.assignment.items())
            ]
        }
    )
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=result.error_code,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )


def _described(partitions: Partitions, names: Mapping[uuid.UUID, str]) -> dict[str, object]:
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "topic_name": names[topic_id], "partitions": sorted(ps)}
            for topic_id, ps in sorted(partitions.items(), key=lambda kv: names.get(kv[0], ""))
            if topic_id in names
        ]
    }


async def handle_consumer_group_describe(
    ctx: BrokerContext, request: Request, peer: Peer
) -> Struct:
    coordinator = ctx.coordinator()
    asked = list(request.body.group_ids)
    allowed = filter_authorized(
        ctx, request, peer, AclOperation.DESCRIBE, ResourceType.GROUP, asked
    )
    described = coordinator.consumer_group_describe([g for g in asked if g in allowed])
    names = coordinator.topic_names()
    ctx.on_group_request()
    with_operations = bool(request.body.include_authorized_operations)
    denied = [
        {"error_code": codes.GROUP_AUTHORIZATION_FAILED, "error_message": None, "group_id": g,
         "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
         "members": []}
        for g in asked
        if g not in allowed
    ]  # fmt: skip
    return ConsumerGroupDescribeResponse(
        throttle_time_ms=0,
        groups=denied
        + [
            {
                **(
                    {
                        "authorized_operations": authorized_operations(
                            ctx, peer, ResourceType.GROUP, g.group_id
                        )
                    }
                    if with_operations and g.error_code == codes.NONE
                    else {}
                ),
                "error_code": g.error_code,
                "error_message": g.error_message,
                "group_id": g.group_id,
                "group_state": g.state,
                "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch,
                "assignor_name": g.assignor_name,
                "members": [
                    {
                        "member_id": m.member.member_id,
                        "instance_id": m.member.instance_id,
                        "rack_id": m.member.rack_id,
                        "member_epoch": m.member.member_epoch,
                        "client_id": m.member.client_id,
                        "client_host": m.member.client_host,
                        "subscribed_topic_names": list(m.member.subscribed_topic_names),
                        "subscribed_topic_regex": m.member.subscribed_topic_regex,
                        "assignment": _described(m.member.assigned, names),
                        "target_assignment": _described(m.target, names),
                        "member_type": (
                            CONSUMER_MEMBER_TYPE
                            if m.member.classic is None
                            else CLASSIC_MEMBER_TYPE
                        ),
                    }
                    for m in g.members
                ],
            }
            for g in described
        ],
    )
