"""The authorization checks handlers make (Kafka's ``AuthHelper``), and the audit line of every
denial.

Each check names the request, the peer (its principal and host), the operation and the
resource. Without an authorizer every check passes, as in Kafka. A denial the client asked for
explicitly (``log_if_denied``) is logged at INFO the way Kafka's ``kafka.authorizer.logger``
writes it ("Principal = User:bob is Denied operation = READ from host = 10.0.0.7 on resource =
Topic:LITERAL:orders for request = Fetch with resourceRefCount = 1 based on rule DefaultDeny")
through the broker's rate-limited refusal log; checks that only filter (Metadata for all topics,
ListGroups, authorized-operation bit fields) are not logged, as Kafka logs them at TRACE only.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

from compactlog.broker.authorizer import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorized_operations_bits,
)
from compactlog.broker.context import BrokerContext, Peer
from compactlog.protocol import API_NAMES, Request

__all__ = [
    "authorize",
    "authorize_cluster",
    "authorized_operations",
    "filter_authorized",
]

_TYPE_LABELS = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}


def authorize(
    ctx: BrokerContext,
    request: Request,
    peer: Peer,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    log_if_denied: bool = True,
    ref_count: int = 1,
) -> bool:
    """Whether ``peer`` may do ``operation`` on the LITERAL resource ``name``."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    decision = authorizer.decide(peer.principal, peer.host, operation, resource_type, name)
    if not decision.allowed and log_if_denied:
        ctx.refusal_log.log(
            logging.INFO,
            "Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s "
            "for request = %s with resourceRefCount = %d based on rule %s",
            peer.principal, operation.name, peer.host, _TYPE_LABELS[resource_type],
            _printable(name), API_NAMES.get(request.header.api_key, "?"), ref_count,
            decision.rule,
        )  # fmt: skip
    return decision.allowed


def authorize_cluster(
    ctx: BrokerContext,
    request: Request,
    peer: Peer,
    operation: AclOperation,
    *,
    log_if_denied: bool = True,
) -> bool:
    """``operation`` on the one CLUSTER resource (``kafka-cluster``)."""
    return authorize(
        ctx, request, peer, operation, ResourceType.CLUSTER, CLUSTER_NAME,
        log_if_denied=log_if_denied,
    )  # fmt: skip


def filter_authorized(
    ctx: BrokerContext,
    request: Request,
    peer: Peer,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    *,
    log_if_denied: bool = True,
) -> set[str]:
    """The names of ``names`` that ``peer`` may do ``operation`` on (each asked once, with the
    number of times the request names it, as Kafka's ``filterByAuthorized``)."""
    counts = Counter(names)
    if ctx.authorizer is None:
        return set(counts)
    return {
        name
        for name, count in counts.items()
        if authorize(
            ctx,
            request,
            peer,
            operation,
            resource_type,
            name,
            log_if_denied=log_if_denied,
            ref_count=count,
        )
    }


def authorized_operations(
    ctx: BrokerContext, peer: Peer, resource_type: ResourceType, name: str
) -> int:
    """The ``*_authorized_operations`` bit field of one resource for ``peer``."""
    return authorized_operations_bits(
        ctx.authorizer, peer.principal, peer.host, resource_type, name
    )


def _printable(name: str) -> str:
    # A name comes from the client: a newline in it must not forge a log line.
    return name.encode("unicode_escape").decode("ascii") if not name.isprintable() else name
