"""Kafka's ``StandardAuthorizer``: ACL bindings and the decision whether a principal may do an
operation on a resource. Pure logic: no files, no sockets (persistence is
:mod:`compactlog.broker.acl_store`, the APIs :mod:`compactlog.broker.handlers.acls`).

Theory of operation (Kafka's ``StandardAuthorizerData``, rewritten):

* A binding is a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal,
  host, operation, ALLOW or DENY). A LITERAL pattern named ``*`` matches every name of its type.
* A request is (principal, host, operation, resource type, resource name). Super users
  (``super.users``, compared as the whole ``Type:name`` string) are allowed everything, ACLs
  or not.
* The bindings that *apply to the resource* are those of its type whose pattern matches the
  name (LITERAL equal, LITERAL ``*``, or PREFIXED a prefix of it). Of those, a binding *matches
  the request* when its principal is the request's or ``User:*``, its host is the request's or
  ``*``, and its operation is ALL, the requested one, or (ALLOW bindings only) one that implies
  it: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.
  A DENY for READ does not deny DESCRIBE.
* A matching DENY wins over any ALLOW. Else a matching ALLOW allows. Else, if no binding applies
  to the resource at all, ``allow.everyone.if.no.acl.found`` decides (default: deny); if some
  binding applies (to another principal, say), the answer is deny.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, NamedTuple, TypeVar

from compactlog.errors import INVALID_REQUEST, UNKNOWN_SERVER_ERROR, ConfigError

__all__ = [
    "AUTHORIZER_CLASS_NAME",
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "Decision",
    "PatternType",
    "ResourceType",
    "StandardAuthorizer",
    "authorized_operations_bits",
    "binding_refusal",
    "from_code",
    "parse_super_users",
    "validate_new_binding",
]

#: The one ``authorizer.class.name`` compactlog accepts (Kafka's KRaft authorizer).
AUTHORIZER_CLASS_NAME: Final = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
#: The name of the one CLUSTER resource.
CLUSTER_NAME: Final = "kafka-cluster"
#: A LITERAL resource name that matches every name; a host that matches every host.
WILDCARD: Final = "*"
WILDCARD_PRINCIPAL: Final = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_E = TypeVar("_E", bound=IntEnum)


def from_code(cls: type[_E], code: int) -> _E:
    """Kafka's ``fromCode``: a code it does not know is UNKNOWN."""
    try:
        return cls(code)
    except ValueError:
        return cls(0)


_IMPLIES_DESCRIBE: Final = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    }
)
_IMPLIES_DESCRIBE_CONFIGS: Final = frozenset(
    {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
)

#: The operations each resource type has (Kafka's ``AclEntry.supportedOperations``): what the
#: ``*_authorized_operations`` bit fields of Metadata, DescribeCluster and DescribeGroups report.
SUPPORTED_OPERATIONS: Final[dict[ResourceType, tuple[AclOperation, ...]]] = {
    ResourceType.TOPIC: (
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}  # fmt: skip


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (Kafka's ``AclBinding``)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this binding's pattern covers the LITERAL resource ``name`` of ``type``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)

    def describe_rule(self) -> str:
        """How Kafka's audit log names the deciding ACL: ``MatchingAcl(acl=StandardAcl(...))``."""
        return (
            f"MatchingAcl(acl=StandardAcl(resourceType={self.resource_type.name}, "
            f"resourceName={self.resource_name}, patternType={self.pattern_type.name}, "
            f"principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name}))"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "resource_type": self.resource_type.name,
            "resource_name": self.resource_name,
            "pattern_type": self.pattern_type.name,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.name,
            "permission_type": self.permission_type.name,
        }

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> AclBinding:
        """The inverse of :meth:`to_json`; KeyError/ValueError/TypeError on a malformed doc."""
        binding = cls(
            ResourceType[str(doc["resource_type"])],
            _str(doc["resource_name"]),
            PatternType[str(doc["pattern_type"])],
            _str(doc["principal"]),
            _str(doc["host"]),
            AclOperation[str(doc["operation"])],
            AclPermissionType[str(doc["permission_type"])],
        )
        problem = validate_new_binding(binding)
        if problem is not None:
            raise ValueError(problem)
        return binding


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {value!r}")
    return value


def binding_refusal(binding: AclBinding) -> tuple[int, str | None] | None:
    """Kafka 4.4's refusal of a binding CreateAcls asks for, as (error code, message), or None
    when it is created (measured against Kafka 4.4, in its order):

    * ANY or MATCH where a binding needs a concrete value: Kafka cannot even build the binding,
      UNKNOWN_SERVER_ERROR with no message;
    * a CLUSTER resource not named ``kafka-cluster``, an empty resource name, a principal with
      no ``:``, an empty host, and codes Kafka does not know: INVALID_REQUEST with Kafka's
      message. (A code of 0, UNKNOWN itself, makes Kafka close the connection: the handler's
      business.)
    """
    if (
        binding.resource_type == ResourceType.ANY
        or binding.pattern_type in (PatternType.ANY, PatternType.MATCH)
        or binding.operation == AclOperation.ANY
        or binding.permission_type == AclPermissionType.ANY
    ):
        return UNKNOWN_SERVER_ERROR, None
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not binding.resource_name:
        return INVALID_REQUEST, "Invalid empty resource name"
    if ":" not in binding.principal:
        return INVALID_REQUEST, (
            f"Could not parse principal from `{binding.principal}` (no colon is present "
            "separating the principal type from the principal name)"
        )
    if not binding.host:
        return INVALID_REQUEST, "Host pattern cannot be null or empty"
    unknown = (
        ("resourceType", binding.resource_type == ResourceType.UNKNOWN),
        ("patternType", binding.pattern_type == PatternType.UNKNOWN),
        ("operation", binding.operation == AclOperation.UNKNOWN),
        ("permissionType", binding.permission_type == AclPermissionType.UNKNOWN),
    )
    for label, is_unknown in unknown:
        if is_unknown:
            return INVALID_REQUEST, f"Invalid {label} UNKNOWN"
    return None


def validate_new_binding(binding: AclBinding) -> str | None:
    """Why a binding cannot be created (:func:`binding_refusal`'s reason), or None."""
    refusal = binding_refusal(binding)
    if refusal is None:
        return None
    return refusal[1] or f"Invalid binding {binding}"


@dataclass(frozen=True)
class AclBindingFilter:
    """Which bindings DescribeAcls and DeleteAcls mean (Kafka's ``AclBindingFilter``): ANY and
    None match everything; pattern MATCH matches the bindings that would apply to the name."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def from_codes(
        cls,
        resource_type: int,
        resource_name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission_type: int,
    ) -> AclBindingFilter:
        return cls(
            from_code(ResourceType, resource_type),
            resource_name,
            from_code(PatternType, pattern_type),
            principal,
            host,
            from_code(AclOperation, operation),
            from_code(AclPermissionType, permission_type),
        )

    def problem(self) -> str | None:
        """Why Kafka answers INVALID_REQUEST to this filter, or None."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if (
            self.operation == AclOperation.UNKNOWN
            or self.permission_type == AclPermissionType.UNKNOWN
        ):
            return "Unknown entryFilter."
        return None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, b.pattern_type):
            return False
        if self.resource_name is not None:
            if self.pattern_type in (PatternType.ANY, b.pattern_type):
                if self.resource_name != b.resource_name:
                    return False
            elif b.pattern_type == PatternType.LITERAL:  # MATCH
                if b.resource_name not in (self.resource_name, WILDCARD):
                    return False
            elif not self.resource_name.startswith(b.resource_name):  # MATCH, PREFIXED
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation not in (AclOperation.ANY, b.operation):
            return False
        return self.permission_type in (AclPermissionType.ANY, b.permission_type)


class Decision(NamedTuple):
    """The answer to one request and what gave it: the matching ACL, or a default rule."""

    allowed: bool
    matched: AclBinding | None = None
    default: str = ""

    @property
    def rule(self) -> str:
        """The rule as Kafka's audit log names it (formatted only when a line is written)."""
        return self.matched.describe_rule() if self.matched is not None else self.default


_SUPER_USER = Decision(True, default="SuperUser")
#: Some ACL applies to the resource, none allows (Kafka's ``DENY_RULE``, a ``DefaultRule``).
_DENY = Decision(False, default="DefaultDeny")


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:ops``)."""
    users = frozenset(part.strip() for part in text.split(";") if part.strip())
    for user in users:
        kind, sep, name = user.partition(":")
        if not sep or not kind or not name:
            raise ConfigError(
                f"Invalid value {text!r} for configuration super.users: {user!r} is not a "
                "principal Type:name (e.g. User:admin); separate principals with ';'"
            )
    return users


def _operation_matches(binding: AclBinding, operation: AclOperation) -> bool:
    if binding.operation in (AclOperation.ALL, operation):
        return True
    if binding.permission_type != AclPermissionType.ALLOW:
        return False
    if operation == AclOperation.DESCRIBE:
        return binding.operation in _IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return binding.operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


class StandardAuthorizer:
    """The ACLs and the decision procedure of the module docstring. Not thread-safe: the broker
    calls it from its event loop only."""

    def __init__(
        self,
        acls: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._no_acl = Decision(
            allow_everyone_if_no_acl_found,
            default="DefaultAllow" if allow_everyone_if_no_acl_found else "DefaultDeny",
        )
        self._by_type: dict[ResourceType, set[AclBinding]] = {}
        # The index a decision reads: bindings by (type, pattern, name), and the lengths of
        # the PREFIXED names of each type, so that a decision looks up the resource's name,
        # ``*`` and those of its prefixes that some ACL names: a few dictionary lookups
        # whatever the number of ACLs (Kafka walks a sorted set for the same reason).
        self._index: dict[tuple[ResourceType, PatternType, str], set[AclBinding]] = {}
        self._prefix_lengths: dict[ResourceType, dict[int, int]] = {}
        for binding in acls:
            self.add(binding)

    # --- the ACLs ------------------------------------------------------------------------------
    def acls(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every binding ``flt`` matches (all without one), in a stable order."""
        return sorted(
            b for group in self._by_type.values() for b in group if flt is None or flt.matches(b)
        )

    def add(self, binding: AclBinding) -> bool:
        """Add ``binding`` (already validated); False when it was there already."""
        group = self._by_type.setdefault(binding.resource_type, set())
        if binding in group:
            return False
        group.add(binding)
        key = (binding.resource_type, binding.pattern_type, binding.resource_name)
        self._index.setdefault(key, set()).add(binding)
        if binding.pattern_type == PatternType.PREFIXED:
            lengths = self._prefix_lengths.setdefault(binding.resource_type, {})
            size = len(binding.resource_name)
            lengths[size] = lengths.get(size, 0) + 1
        return True

    def remove(self, flt: AclBindingFilter) -> list[AclBinding]:
        """Remove and return every binding ``flt`` matches."""
        removed = self.acls(flt)
        for binding in removed:
            self.discard(binding)
        return removed

    def discard(self, binding: AclBinding) -> bool:
        """Remove ``binding``; False when it was not there."""
        group = self._by_type.get(binding.resource_type)
        if group is None or binding not in group:
            return False
        group.discard(binding)
        key = (binding.resource_type, binding.pattern_type, binding.resource_name)
        self._index[key].discard(binding)
        if not self._index[key]:
            del self._index[key]
        if binding.pattern_type == PatternType.PREFIXED:
            lengths = self._prefix_lengths[binding.resource_type]
            size = len(binding.resource_name)
            lengths[size] -= 1
            if not lengths[size]:
                del lengths[size]
        return True

    def _applying(self, resource_type: ResourceType, name: str) -> list[set[AclBinding]]:
        """The bindings that apply to the LITERAL resource ``name``, in groups."""
        index = self._index
        found = []
        for key in (
            (resource_type, PatternType.LITERAL, name),
            (resource_type, PatternType.LITERAL, WILDCARD),
        ):
            group = index.get(key)
            if group:
                found.append(group)
            if name == WILDCARD:
                break
        for size in self._prefix_lengths.get(resource_type, {}):
            if size <= len(name):
                group = index.get((resource_type, PatternType.PREFIXED, name[:size]))
                if group:
                    found.append(group)
        return found

    # --- decisions -----------------------------------------------------------------------------
    def decide(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> Decision:
        """Whether ``principal`` connected from ``host`` may do ``operation`` on the LITERAL
        resource ``name`` of ``resource_type``, and by which rule."""
        if principal in self.super_users:
            return _SUPER_USER
        principals = (principal, WILDCARD_PRINCIPAL)
        groups = self._applying(resource_type, name)
        allow: AclBinding | None = None
        for group in groups:
            for binding in group:
                if binding.principal not in principals or binding.host not in (host, WILDCARD):
                    continue
                if not _operation_matches(binding, operation):
                    continue
                if binding.permission_type == AclPermissionType.DENY:
                    return Decision(False, binding)
                allow = binding
        if allow is not None:
            return Decision(True, allow)
        return _DENY if groups else self._no_acl

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        return self.decide(principal, host, operation, resource_type, name).allowed

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on *some* resource of ``resource_type``
        (Kafka's ``Authorizer.authorizeByResourceType``: an ALLOW, by literal name or prefix,
        not cancelled by a DENY on that literal name or on a prefix of it; a DENY on ``*``
        cancels everything). InitProducerId asks it for WRITE on any topic."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[AclBinding] = []
        for b in self._by_type.get(resource_type, ()):
            if b.host not in (host, WILDCARD) or b.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if b.operation not in (operation, AclOperation.ALL):
                continue
            if b.permission_type == AclPermissionType.DENY:
                if b.pattern_type == PatternType.LITERAL:
                    if b.resource_name == WILDCARD:
                        return False
                    deny_literal.add(b.resource_name)
                else:
                    deny_prefixed.add(b.resource_name)
            else:
                allow.append(b)
        if any(
            b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD for b in allow
        ):
            return True
        for b in allow:
            if b.pattern_type == PatternType.LITERAL and b.resource_name in deny_literal:
                continue
            name = b.resource_name
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False


def authorized_operations_bits(
    authorizer: StandardAuthorizer | None,
    principal: str,
    host: str,
    resource_type: ResourceType,
    name: str,
) -> int:
    """The ``*_authorized_operations`` bit field: bit ``op`` set for every operation of the
    resource type that is allowed (all of them without an authorizer)."""
    bits = 0
    for op in SUPPORTED_OPERATIONS[resource_type]:
        if authorizer is None or authorizer.authorize(principal, host, op, resource_type, name):
            bits |= 1 << op
    return bits


def operation_label(operation: AclOperation) -> str:
    """Kafka's display name of an operation in log lines (``Describe``, ``IdempotentWrite``)."""
    return _pascal(operation.name)
