"""Kafka's StandardAuthorizer rules, on the pure authorizer (no broker)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlog.broker.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAuthorizer,
    authorized_operations_bits,
    binding_refusal,
    parse_super_users,
    validate_new_binding,
)
from compactlog.errors import ConfigError

T, G, C, X = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
ALICE = "User:alice"


def acl(
    rtype: ResourceType = T,
    name: str = "orders",
    op: AclOperation = Op.READ,
    perm: AclPermissionType = ALLOW,
    principal: str = ALICE,
    host: str = "*",
    pattern: PatternType = LIT,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def allowed(
    az: StandardAuthorizer,
    op: AclOperation,
    name: str = "orders",
    rtype: ResourceType = T,
    principal: str = ALICE,
    host: str = "10.0.0.1",
) -> bool:
    return az.authorize(principal, host, op, rtype, name)


def test_no_acls_denies_by_default_and_allows_with_allow_everyone() -> None:
    assert not allowed(StandardAuthorizer(), Op.READ)
    assert allowed(StandardAuthorizer(allow_everyone_if_no_acl_found=True), Op.READ)


def test_allow_everyone_does_not_apply_once_the_resource_has_an_acl() -> None:
    az = StandardAuthorizer([acl(principal="User:bob")], allow_everyone_if_no_acl_found=True)
    assert not allowed(az, Op.READ)  # an ACL applies to orders (for bob): alice is denied
    assert allowed(az, Op.READ, name="other")  # no ACL on other: everyone


def test_literal_matches_exact_name_only() -> None:
    az = StandardAuthorizer([acl(name="orders")])
    assert allowed(az, Op.READ, "orders")
    assert not allowed(az, Op.READ, "orders2")
    assert not allowed(az, Op.READ, "order")


def test_wildcard_literal_and_prefixed() -> None:
    az = StandardAuthorizer([acl(name="*", op=Op.WRITE), acl(name="pay", pattern=PRE)])
    assert allowed(az, Op.WRITE, "anything")
    assert allowed(az, Op.READ, "payments")
    assert allowed(az, Op.READ, "pay")
    assert not allowed(az, Op.READ, "pa")
    assert not allowed(az, Op.READ, "orders")


def test_resource_types_are_separate() -> None:
    az = StandardAuthorizer([acl(rtype=G, name="orders")])
    assert allowed(az, Op.READ, rtype=G)
    assert not allowed(az, Op.READ, rtype=T)


def test_principal_and_user_wildcard() -> None:
    az = StandardAuthorizer([acl(principal="User:*", op=Op.DESCRIBE)])
    assert allowed(az, Op.DESCRIBE, principal="User:anyone")
    assert not allowed(StandardAuthorizer([acl()]), Op.READ, principal="User:bob")


def test_host_match() -> None:
    az = StandardAuthorizer([acl(host="10.0.0.1")])
    assert allowed(az, Op.READ, host="10.0.0.1")
    assert not allowed(az, Op.READ, host="10.0.0.2")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_describe_is_implied_by_allow(granted: AclOperation) -> None:
    assert allowed(StandardAuthorizer([acl(op=granted)]), Op.DESCRIBE)


@pytest.mark.parametrize("granted", [Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS])
def test_describe_is_not_implied_by_others(granted: AclOperation) -> None:
    assert not allowed(StandardAuthorizer([acl(op=granted)]), Op.DESCRIBE)


def test_describe_configs_implied_by_alter_configs_only() -> None:
    assert allowed(StandardAuthorizer([acl(op=Op.ALTER_CONFIGS)]), Op.DESCRIBE_CONFIGS)
    assert not allowed(StandardAuthorizer([acl(op=Op.ALTER)]), Op.DESCRIBE_CONFIGS)
    assert not allowed(StandardAuthorizer([acl(op=Op.DESCRIBE_CONFIGS)]), Op.ALTER_CONFIGS)


def test_implication_is_for_allow_only() -> None:
    az = StandardAuthorizer([acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=DENY)])
    assert allowed(az, Op.DESCRIBE)  # a DENY of READ does not deny DESCRIBE
    assert not allowed(az, Op.READ)


def test_all_covers_every_operation_and_deny_wins() -> None:
    az = StandardAuthorizer([acl(op=Op.ALL)])
    for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DELETE):
        assert allowed(az, op)
    az.add(acl(op=Op.ALL, perm=DENY, principal="User:*", name="ord", pattern=PRE))
    assert not allowed(az, Op.DESCRIBE)


def test_deny_wins_over_allow_from_any_pattern() -> None:
    az = StandardAuthorizer(
        [acl(name="*", op=Op.READ), acl(name="orders", op=Op.READ, perm=DENY, host="10.0.0.1")]
    )
    assert not allowed(az, Op.READ, host="10.0.0.1")
    assert allowed(az, Op.READ, host="10.0.0.2")


def test_super_users_bypass_deny() -> None:
    az = StandardAuthorizer(
        [acl(op=Op.ALL, perm=DENY, principal="User:*")], super_users={"User:admin"}
    )
    assert allowed(az, Op.ALTER, principal="User:admin")
    assert not allowed(az, Op.READ)


def test_parse_super_users() -> None:
    assert parse_super_users(" User:a ; User:b;") == {"User:a", "User:b"}
    assert parse_super_users("") == frozenset()
    with pytest.raises(ConfigError, match=r"super\.users"):
        parse_super_users("alice")


def test_authorize_by_resource_type() -> None:
    def by_type(*acls: AclBinding) -> bool:
        az = StandardAuthorizer(acls)
        return az.authorize_by_resource_type(ALICE, "h", Op.WRITE, T)

    assert not by_type()
    assert by_type(acl(op=Op.WRITE))
    assert by_type(acl(op=Op.WRITE, name="x", pattern=PRE))
    assert not by_type(acl(op=Op.WRITE), acl(op=Op.WRITE, perm=DENY))
    assert not by_type(acl(op=Op.WRITE), acl(op=Op.WRITE, perm=DENY, name="or", pattern=PRE))
    assert not by_type(acl(op=Op.WRITE), acl(op=Op.WRITE, perm=DENY, name="*"))
    assert by_type(acl(op=Op.WRITE), acl(op=Op.WRITE, perm=DENY, name="x"))
    assert not by_type(acl(op=Op.READ))


def test_binding_refusals_are_kafkas() -> None:
    assert binding_refusal(acl()) is None
    assert binding_refusal(acl(rtype=C, name="kafka-cluster")) is None
    assert binding_refusal(acl(rtype=C, name="x")) == (
        42,
        "The only valid name for the CLUSTER resource is kafka-cluster",
    )
    assert binding_refusal(acl(name="")) == (42, "Invalid empty resource name")
    assert binding_refusal(acl(principal="alice")) == (
        42,
        "Could not parse principal from `alice` (no colon is present separating the "
        "principal type from the principal name)",
    )
    assert binding_refusal(acl(principal=":x")) is None  # Kafka asks only for the colon
    assert binding_refusal(acl(host="")) == (42, "Host pattern cannot be null or empty")
    assert binding_refusal(acl(op=Op.ANY)) == (-1, None)
    assert binding_refusal(acl(pattern=PatternType.MATCH)) == (-1, None)
    assert binding_refusal(acl(op=Op.UNKNOWN)) == (42, "Invalid operation UNKNOWN")
    assert validate_new_binding(acl()) is None
    assert "Invalid binding" in (validate_new_binding(acl(op=Op.ANY)) or "")


def _filter(**kw: object) -> AclBindingFilter:
    base: dict[str, object] = dict(
        resource_type=1, resource_name=None, pattern_type=1, principal=None, host=None,
        operation=1, permission_type=1,
    )  # fmt: skip
    base.update(kw)
    return AclBindingFilter.from_codes(**base)  # type: ignore[arg-type]


def test_filters() -> None:
    lit, pre, star = acl(name="orders"), acl(name="ord", pattern=PRE), acl(name="*")
    grp = acl(rtype=G, name="orders")
    everything = [lit, pre, star, grp]
    assert all(_filter().matches(b) for b in everything)
    assert [
        b for b in everything if _filter(resource_type=2, resource_name="orders").matches(b)
    ] == [lit]
    match = _filter(resource_type=2, resource_name="orders", pattern_type=2)
    assert [b for b in everything if match.matches(b)] == [lit, pre, star]
    assert [b for b in everything if _filter(pattern_type=4).matches(b)] == [pre]
    assert not _filter(principal="User:bob").matches(lit)
    assert not _filter(operation=4).matches(lit)
    assert _filter(permission_type=3).matches(lit)
    assert _filter(resource_type=0).problem() == "Unknown patternFilter."
    assert _filter(operation=0).problem() == "Unknown entryFilter."
    assert _filter(operation=99).problem() == "Unknown entryFilter."  # unknown code


def test_add_remove_and_authorized_operations() -> None:
    az = StandardAuthorizer()
    assert az.add(acl(op=Op.WRITE))
    assert not az.add(acl(op=Op.WRITE))
    bits = authorized_operations_bits(az, ALICE, "h", T, "orders")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE)
    assert authorized_operations_bits(None, ALICE, "h", T, "orders") == 3576
    assert authorized_operations_bits(None, ALICE, "h", C, "kafka-cluster") == 8096
    assert az.remove(_filter(operation=4)) == [acl(op=Op.WRITE)]
    assert az.acls() == []


_names = st.text(alphabet="ab*", min_size=1, max_size=4)
_ops = st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL, Op.ALTER])
_bindings = st.builds(
    acl,
    name=_names,
    op=_ops,
    perm=st.sampled_from([ALLOW, DENY]),
    principal=st.sampled_from([ALICE, "User:*", "User:bob"]),
    pattern=st.sampled_from([LIT, PRE]),
)


@given(st.lists(_bindings, max_size=6), _names, _ops)
def test_deny_always_wins(bindings: list[AclBinding], name: str, op: AclOperation) -> None:
    """Adding a matching DENY to any set of ACLs denies; removing every DENY never denies what
    was allowed."""
    az = StandardAuthorizer(bindings)
    before = allowed(az, op, name)
    az.add(acl(name=name, op=op, perm=DENY))
    assert not allowed(az, op, name)
    az.remove(_filter(permission_type=DENY))
    if before:
        assert allowed(az, op, name)


def test_rules_named_as_kafkas_audit_log_names_them() -> None:
    az = StandardAuthorizer([acl(op=Op.READ)], super_users={"User:admin"})
    assert az.decide("User:admin", "h", Op.READ, T, "x").rule == "SuperUser"
    assert az.decide(ALICE, "h", Op.READ, T, "nothing").rule == "DefaultDeny"
    assert az.decide(ALICE, "h", Op.WRITE, T, "orders").rule == "DefaultDeny"
    assert az.decide(ALICE, "h", Op.READ, T, "orders").rule == (
        "MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=orders, "
        "patternType=LITERAL, principal=User:alice, host=*, operation=READ, "
        "permissionType=ALLOW))"
    )
    assert (
        StandardAuthorizer(allow_everyone_if_no_acl_found=True)
        .decide(ALICE, "h", Op.READ, T, "x")
        .rule
        == "DefaultAllow"
    )


def _reference(
    bindings: list[AclBinding], principal: str, host: str, op: AclOperation, name: str
) -> bool:
    """The rules of the module docstring, straight over every binding (no index)."""
    applying = [b for b in bindings if b.applies_to(T, name)]
    matching = [
        b
        for b in applying
        if b.principal in (principal, "User:*")
        and b.host in (host, "*")
        and (
            b.operation in (Op.ALL, op)
            or (
                b.permission_type == ALLOW
                and (
                    (op == Op.DESCRIBE and b.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER))
                    or (op == Op.DESCRIBE_CONFIGS and b.operation == Op.ALTER_CONFIGS)
                )
            )
        )
    ]
    if any(b.permission_type == DENY for b in matching):
        return False
    return bool(matching)  # no applying binding: the default (deny) here


_hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
_any_bindings = st.builds(
    acl,
    name=st.text(alphabet="ab*", min_size=1, max_size=4),
    op=st.sampled_from(list(Op)[2:12]),
    perm=st.sampled_from([ALLOW, DENY]),
    principal=st.sampled_from([ALICE, "User:*", "User:bob"]),
    host=_hosts,
    pattern=st.sampled_from([LIT, PRE]),
)


@given(
    st.lists(_any_bindings, max_size=12),
    st.lists(_any_bindings, max_size=4),
    _names,
    st.sampled_from(list(Op)[2:12]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
)
def test_index_agrees_with_the_rules(
    bindings: list[AclBinding],
    removed: list[AclBinding],
    name: str,
    op: AclOperation,
    host: str,
) -> None:
    """The indexed decision equals the rules applied to every binding, also after removals."""
    az = StandardAuthorizer(bindings)
    for b in removed:
        az.remove(
            AclBindingFilter(
                b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
                b.operation, b.permission_type,
            )
        )  # fmt: skip
    kept = sorted(set(bindings) - set(removed))
    assert az.acls() == kept
    assert allowed(az, op, name, host=host) == _reference(kept, ALICE, host, op, name)
