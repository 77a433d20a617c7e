"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), as Kafka's ``AclApis`` answers them.

* Authorization first: DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls
  ALTER; a denial is CLUSTER_AUTHORIZATION_FAILED for the whole request (DescribeAcls' top-level
  code, every creation's, every filter's).
* Without an authorizer (``authorizer.class.name`` empty): SECURITY_DISABLED (54), with Kafka's
  messages.
* CreateAcls refuses a binding Kafka refuses (unknown or ANY resource type, operation or
  permission; pattern other than LITERAL/PREFIXED; a CLUSTER resource not named
  ``kafka-cluster``; an empty name; a principal that is not ``Type:name``) with INVALID_REQUEST
  for that creation only; creating an existing binding succeeds and changes nothing.
* A filter with an unknown resource type, pattern type, operation or permission is
  INVALID_REQUEST ("Unknown patternFilter." / "Unknown entryFilter.").
* The ACL file is rewritten before a change is answered (:mod:`compactlog.broker.acl_store`).
"""

from __future__ import annotations

from compactlog import errors as codes
from compactlog.broker.access import authorize_cluster
from compactlog.broker.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    StandardAuthorizer,
    binding_refusal,
    from_code,
)
from compactlog.broker.authorizer import AclPermissionType as Perm
from compactlog.broker.authorizer import PatternType as Pattern
from compactlog.broker.authorizer import ResourceType as Resource
from compactlog.broker.context import BrokerContext, CloseConnection, Peer
from compactlog.protocol import Request, Struct
from compactlog.protocol.messages import (
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeAclsResponse,
)

__all__ = ["handle_create_acls", "handle_delete_acls", "handle_describe_acls"]

_NOT_AUTHORIZED = "Cluster authorization failed."
_NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
_NO_AUTHORIZER = "No Authorizer is configured."


def _refuse_unknown(what: str, *codes_: int) -> None:
    """Kafka refuses to parse a request with the code 0 (UNKNOWN) for a resource type, pattern
    type, operation or permission (``CreateAclsRequest.validate`` and its siblings): it closes
    the connection. So does compactlog, saying why."""
    if 0 in codes_:
        raise CloseConnection(f"{what} contains UNKNOWN (0) elements: {codes_}")


def _filter_of(s: Struct) -> AclBindingFilter:
    _refuse_unknown(
        "an ACL filter",
        s.resource_type_filter, s.pattern_type_filter, s.operation, s.permission_type,
    )  # fmt: skip
    return AclBindingFilter.from_codes(
        s.resource_type_filter,
        s.resource_name_filter,
        s.pattern_type_filter,
        s.principal_filter,
        s.host_filter,
        s.operation,
        s.permission_type,
    )


async def handle_describe_acls(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    def error(code: int, message: str) -> Struct:
        return DescribeAclsResponse(
            throttle_time_ms=0, error_code=code, error_message=message, resources=[]
        )

    flt = _filter_of(request.body)
    if not authorize_cluster(ctx, request, peer, AclOperation.DESCRIBE):
        return error(codes.CLUSTER_AUTHORIZATION_FAILED, _NOT_AUTHORIZED)
    if ctx.authorizer is None:
        return error(codes.SECURITY_DISABLED, _NO_AUTHORIZER_DESCRIBE)
    # A code Kafka does not know (but not 0) matches nothing: an empty answer, no error.
    resources: dict[tuple[int, str, int], list[dict[str, object]]] = {}
    for b in ctx.authorizer.acls(flt):
        key = (int(b.resource_type), b.resource_name, int(b.pattern_type))
        resources.setdefault(key, []).append(
            {
                "principal": b.principal,
                "host": b.host,
                "operation": int(b.operation),
                "permission_type": int(b.permission_type),
            }
        )
    return DescribeAclsResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        error_message="",  # Kafka's default, not null
        resources=[
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in resources.items()
        ],
    )


def _save(ctx: BrokerContext, authorizer: StandardAuthorizer) -> None:
    if ctx.acl_file is not None:
        ctx.acl_file.save(authorizer.acls())


async def handle_create_acls(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    creations = request.body.creations
    for c in creations:
        _refuse_unknown(
            "an ACL creation",
            c.resource_type, c.resource_pattern_type, c.operation, c.permission_type,
        )  # fmt: skip

    def every(code: int, message: str) -> Struct:
        return CreateAclsResponse(
            throttle_time_ms=0,
            results=[{"error_code": code, "error_message": message} for _ in creations],
        )

    if not authorize_cluster(ctx, request, peer, AclOperation.ALTER):
        return every(codes.CLUSTER_AUTHORIZATION_FAILED, _NOT_AUTHORIZED)
    authorizer = ctx.authorizer
    if authorizer is None:
        return every(codes.SECURITY_DISABLED, _NO_AUTHORIZER)
    results: list[dict[str, object]] = []
    added: list[AclBinding] = []
    for c in creations:
        binding = AclBinding(
            from_code(Resource, c.resource_type),
            c.resource_name,
            from_code(Pattern, c.resource_pattern_type),
            c.principal,
            c.host,
            from_code(AclOperation, c.operation),
            from_code(Perm, c.permission_type),
        )
        refusal = binding_refusal(binding)
        if refusal is not None:
            results.append({"error_code": refusal[0], "error_message": refusal[1]})
            continue
        if authorizer.add(binding):
            added.append(binding)
        results.append({"error_code": codes.NONE, "error_message": ""})  # Kafka's default
    if added:
        try:
            _save(ctx, authorizer)
        except codes.StorageError as exc:
            # Not stored, not created: take them back so the ACLs in force are the ones on disk.
            for binding in added:
                authorizer.discard(binding)
            return every(codes.KAFKA_STORAGE_ERROR, f"The ACLs were not stored: {exc}")
    return CreateAclsResponse(throttle_time_ms=0, results=results)


async def handle_delete_acls(ctx: BrokerContext, request: Request, peer: Peer) -> Struct:
    filters = request.body.filters

    def every(code: int, message: str) -> Struct:
        return DeleteAclsResponse(
            throttle_time_ms=0,
            filter_results=[
                {"error_code": code, "error_message": message, "matching_acls": []} for _ in filters
            ],
        )

    parsed = [_filter_of(f) for f in filters]  # before authorization, as Kafka parses
    if not authorize_cluster(ctx, request, peer, AclOperation.ALTER):
        return every(codes.CLUSTER_AUTHORIZATION_FAILED, _NOT_AUTHORIZED)
    authorizer = ctx.authorizer
    if authorizer is None:
        return every(codes.SECURITY_DISABLED, _NO_AUTHORIZER)
    results: list[dict[str, object]] = []
    # Every filter is matched against the ACLs as they were before the request (a binding two
    # filters match is reported by both, as Kafka's controller reports it); then all go.
    removed: dict[AclBinding, None] = {}
    for flt in parsed:
        problem = flt.problem()
        if problem is not None:
            results.append(
                {"error_code": codes.INVALID_REQUEST, "error_message": problem, "matching_acls": []}
            )
            continue
        gone = authorizer.acls(flt)
        removed.update(dict.fromkeys(gone))
        results.append(
            {
                "error_code": codes.NONE,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": codes.NONE,
                        "error_message": None,
                        "resource_type": int(b.resource_type),
                        "resource_name": b.resource_name,
                        "pattern_type": int(b.pattern_type),
                        "principal": b.principal,
                        "host": b.host,
                        "operation": int(b.operation),
                        "permission_type": int(b.permission_type),
                    }
                    for b in gone
                ],
            }
        )
    for binding in removed:
        authorizer.discard(binding)
    if removed:
        try:
            _save(ctx, authorizer)
        except codes.StorageError as exc:
            for binding in removed:
                authorizer.add(binding)
            return every(codes.KAFKA_STORAGE_ERROR, f"The ACL deletions were not stored: {exc}")
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
