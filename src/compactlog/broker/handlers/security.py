"""SaslHandshake (17) and SaslAuthenticate (36) outside authentication, and the SCRAM credential
APIs DescribeUserScramCredentials (50) and AlterUserScramCredentials (51).

The SASL exchange itself is the connection's authenticator's
(:mod:`compactlog.broker.security.authenticator`); a SaslHandshake or SaslAuthenticate that
reaches a handler came on a listener without SASL, and is answered ILLEGAL_SASL_STATE as
Kafka's request handler answers it.

The credential APIs follow Kafka's controller (``ScramControlManager``) and metadata image
(``ScramImage``): per user, a deletion or upsertion twice in one request is DUPLICATE_RESOURCE,
an empty name or fewer than 4096 / more than 16384 iterations UNACCEPTABLE_CREDENTIAL, an
unknown mechanism UNSUPPORTED_SASL_MECHANISM, deleting what does not exist RESOURCE_NOT_FOUND;
the accepted changes are written together (:class:`ScramCredentials`), so a request is applied
whole or, on an I/O error, not at all.

DescribeClientQuotas (48) answers no entries: compactlog has no client quotas (kafka-configs
asks for them before it describes users' SCRAM credentials). Its filter is checked as Kafka
checks it.

Authorization, as Kafka's ``KafkaApis`` and ``ControllerApis``: DescribeUserScramCredentials
needs DESCRIBE on the cluster, AlterUserScramCredentials ALTER on the cluster,
DescribeClientQuotas DESCRIBE_CONFIGS on the cluster; each is checked before the request is
looked at, and a denial is CLUSTER_AUTHORIZATION_FAILED shaped as Kafka's ``getErrorResponse``
shapes it (below). SaslHandshake and SaslAuthenticate are never authorized.
"""

from __future__ import annotations

import logging

from compactlog import errors as codes
from compactlog.broker.access import authorize_cluster
from compactlog.broker.authorizer import AclOperation
from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.security.scram import MAX_ITERATIONS, MECHANISM_BY_TYPE, ScramCredential
from compactlog.errors import CompactlogError
from compactlog.protocol import Request, Struct
from compactlog.protocol.messages.security import (
    AlterUserScramCredentialsResponse,
    DescribeClientQuotasResponse,
    DescribeUserScramCredentialsResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)

__all__ = [
    "handle_alter_user_scram_credentials",
    "handle_describe_client_quotas",
    "handle_describe_user_scram_credentials",
    "handle_sasl_authenticate",
    "handle_sasl_handshake",
]

logger = logging.getLogger("compactlog.broker")

RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93

# Kafka's controller names its internal request object in this message; compactlog answers the
# words the other cluster-level denials use.
_CLUSTER_DENIED = "Cluster authorization failed."


async def handle_sasl_handshake(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    return SaslHandshakeResponse(error_code=codes.ILLEGAL_SASL_STATE, mechanisms=[])


async def handle_sasl_authenticate(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    return SaslAuthenticateResponse(
        error_code=codes.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
    )


async def handle_describe_user_scram_credentials(
    ctx: BrokerContext, request: Request, peer: Peer
) -> Struct:
    assert ctx.scram is not None
    asked = request.body.users
    if not authorize_cluster(ctx, request, peer, AclOperation.DESCRIBE):
        # Kafka's error response: the top-level code without a message (it is the code's
        # default), and one result per user asked, with the code but no user name.
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0,
            error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            results=[
                {
                    "user": "",
                    "error_code": codes.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": None,
                    "credential_infos": [],
                }
                for _ in asked or ()
            ],
        )
    known = ctx.scram.users()
    counts: dict[str, int] = {}
    if not asked:
        counts = dict.fromkeys(sorted(known), 1)
    else:
        for user in asked:
            counts[user.name] = counts.get(user.name, 0) + 1
    results = []
    for user, count in counts.items():
        result = {
            "user": user,
            "error_code": codes.NONE,
            "error_message": None,
            "credential_infos": [],
        }
        if count > 1:
            result["error_code"] = DUPLICATE_RESOURCE
            result["error_message"] = (
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}"
            )
        elif user not in known:
            result["error_code"] = RESOURCE_NOT_FOUND
            result["error_message"] = (
                f"Attempt to describe a user credential that does not exist: {user}"
            )
        else:
            result["credential_infos"] = [
                {"mechanism": MECHANISM_BY_TYPE_NAME[name], "iterations": c.iterations}
                for name, c in sorted(
                    known[user].items(), key=lambda kv: MECHANISM_BY_TYPE_NAME[kv[0]]
                )
            ]
        results.append(result)
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=codes.NONE, error_message=None, results=results
    )


MECHANISM_BY_TYPE_NAME = {m.name: t for t, m in MECHANISM_BY_TYPE.items()}


def _check(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_BY_TYPE:
        return codes.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


async def handle_alter_user_scram_credentials(
    ctx: BrokerContext, request: Request, peer: Peer
) -> Struct:
    scram = ctx.scram
    assert scram is not None
    body = request.body
    if not authorize_cluster(ctx, request, peer, AclOperation.ALTER):
        # Kafka's error response: each user named once, in order, nothing changed.
        names = sorted({*(d.name for d in body.deletions), *(u.name for u in body.upsertions)})
        return AlterUserScramCredentialsResponse(
            throttle_time_ms=0,
            results=[
                {
                    "user": name,
                    "error_code": codes.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": _CLUSTER_DENIED,
                }
                for name in names
            ],
        )
    errors: dict[str, tuple[int, str]] = {}
    deletions: dict[str, Struct] = {}
    upserts: dict[str, Struct] = {}
    duplicate = (
        DUPLICATE_RESOURCE,
        "A user credential cannot be altered twice in the same request",
    )
    for deletion in body.deletions:
        name = deletion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None:
            errors[name] = duplicate
            continue
        problem = _check(name, deletion.mechanism)
        if problem is None and scram.get(name, MECHANISM_BY_TYPE[deletion.mechanism].name) is None:
            problem = RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        if problem is not None:
            errors[name] = problem
        else:
            deletions[name] = deletion
    for upsertion in body.upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upserts.pop(name, None) is not None:
            errors[name] = duplicate
            continue
        problem = _check(name, upsertion.mechanism)
        if (
            problem is None
            and upsertion.iterations < MECHANISM_BY_TYPE[upsertion.mechanism].min_iterations
        ):
            problem = UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        elif problem is None and upsertion.iterations > MAX_ITERATIONS:
            problem = UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if problem is not None:
            errors[name] = problem
        else:
            upserts[name] = upsertion
    removed = [(d.name, MECHANISM_BY_TYPE[d.mechanism].name) for d in deletions.values()]
    added: list[tuple[str, str, ScramCredential]] = []
    for u in upserts.values():
        mechanism = MECHANISM_BY_TYPE[u.mechanism]
        added.append(
            (
                u.name,
                mechanism.name,
                mechanism.credential(bytes(u.salted_password), bytes(u.salt), u.iterations),
            )
        )
    results = []
    if removed or added:
        try:
            scram.apply(removed, added)
        except CompactlogError as exc:
            logger.error("writing the SCRAM credentials failed: %s", exc)
            for name in [*deletions, *upserts]:
                errors[name] = (exc.error_code, str(exc))
            deletions.clear()
            upserts.clear()
        else:
            logger.info(
                "SCRAM credentials: %d deleted, %d added or changed (by %s from %s)",
                len(removed), len(added), peer.principal, peer.host,
            )  # fmt: skip
    for name in [*deletions, *upserts]:
        results.append({"user": name, "error_code": codes.NONE, "error_message": None})
    for name, (code, message) in errors.items():
        results.append({"user": name, "error_code": code, "error_message": message})
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


_QUOTA_ENTITY_TYPES = ("user", "client-id", "ip")


def _quota_filter_error(components: list[Struct]) -> tuple[int, str] | None:
    """Kafka's checks of a DescribeClientQuotas filter (``ClientQuotasImage.describe``)."""
    exact: set[str] = set()
    typed: set[str] = set()
    for c in components:
        if not c.entity_type:
            return codes.INVALID_REQUEST, "Invalid empty entity type."
        if c.entity_type in exact or c.entity_type in typed:
            return codes.INVALID_REQUEST, (
                f"Entity type {c.entity_type} cannot appear more than once in the filter."
            )
        if c.entity_type not in _QUOTA_ENTITY_TYPES:
            return codes.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}"
        if c.match_type == 0:
            if c.match is None:
                return codes.INVALID_REQUEST, (
                    "Request specified MATCH_TYPE_EXACT, but set match string to null."
                )
            exact.add(c.entity_type)
        elif c.match_type in (1, 2):
            if c.match is not None:
                kind = "MATCH_TYPE_DEFAULT" if c.match_type == 1 else "MATCH_TYPE_SPECIFIED"
                return codes.INVALID_REQUEST, (
                    f"Request specified {kind}, but also specified a match string."
                )
            (exact if c.match_type == 1 else typed).add(c.entity_type)
        else:
            return codes.INVALID_REQUEST, f"Unknown match type {c.match_type}"
    named = exact | typed
    if "ip" in named and ("user" in named or "client-id" in named):
        return codes.INVALID_REQUEST, (
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component."
        )
    return None


async def handle_describe_client_quotas(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    """No quotas can be set on compactlog: a valid filter matches no entity."""
    if not authorize_cluster(ctx, request, peer, AclOperation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(
            throttle_time_ms=0,
            error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            entries=None,
        )
    problem = _quota_filter_error(request.body.components)
    if problem is not None:
        return DescribeClientQuotasResponse(
            throttle_time_ms=0, error_code=problem[0], error_message=problem[1], entries=None
        )
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=codes.NONE, error_message=None, entries=[]
    )
