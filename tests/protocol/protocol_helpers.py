"""Helpers of the protocol tests: sample values from our schemas, and kafka-python as an oracle.

kafka-python 3.0 builds its protocol classes from Kafka's own JSON schema files, independently
of our hand-written field lists, so agreeing with it byte for byte checks our schemas against
Kafka's.
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any

with warnings.catch_warnings():
    # kafka-python's package import uses importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin.acl import (
        CreateAclsRequest,
        CreateAclsResponse,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DescribeAclsRequest,
        DescribeAclsResponse,
    )
    from kafka.protocol.admin.client_quotas import (
        DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
    )
    from kafka.protocol.admin.cluster import (
        DescribeClusterRequest,
        DescribeClusterResponse,
        DescribeLogDirsRequest,
        DescribeLogDirsResponse,
    )
    from kafka.protocol.admin.configs import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )
    from kafka.protocol.admin.groups import (
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        ListGroupsRequest,
        ListGroupsResponse,
    )
    from kafka.protocol.admin.topics import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteRecordsRequest,
        DeleteRecordsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        DescribeTopicPartitionsRequest,
        DescribeTopicPartitionsResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )
    from kafka.protocol.admin.transactions import (
        DescribeProducersRequest,
        DescribeProducersResponse,
    )
    from kafka.protocol.admin.users import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
    )
    from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
    from kafka.protocol.consumer.group import (
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
    from kafka.protocol.metadata.find_coordinator import (
        FindCoordinatorRequest,
        FindCoordinatorResponse,
    )
    from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
    from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
    from kafka.protocol.sasl import (
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

from compactlog.protocol.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    RECORDS,
    STRING,
    UUID,
    ArrayOf,
    Field,
    Primitive,
    StructDef,
    in_range,
)

# kafka-python's (request, response) classes by API key.
KAFKA_PYTHON: dict[int, tuple[Any, Any]] = {
    cls_req.API_KEY: (cls_req, cls_resp)
    for cls_req, cls_resp in [
        (ProduceRequest, ProduceResponse),
        (FetchRequest, FetchResponse),
        (ListOffsetsRequest, ListOffsetsResponse),
        (MetadataRequest, MetadataResponse),
        (OffsetCommitRequest, OffsetCommitResponse),
        (OffsetFetchRequest, OffsetFetchResponse),
        (FindCoordinatorRequest, FindCoordinatorResponse),
        (JoinGroupRequest, JoinGroupResponse),
        (HeartbeatRequest, HeartbeatResponse),
        (LeaveGroupRequest, LeaveGroupResponse),
        (SyncGroupRequest, SyncGroupResponse),
        (DescribeGroupsRequest, DescribeGroupsResponse),
        (ListGroupsRequest, ListGroupsResponse),
        (ApiVersionsRequest, ApiVersionsResponse),
        (CreateTopicsRequest, CreateTopicsResponse),
        (DeleteTopicsRequest, DeleteTopicsResponse),
        (DeleteRecordsRequest, DeleteRecordsResponse),
        (InitProducerIdRequest, InitProducerIdResponse),
        (DescribeAclsRequest, DescribeAclsResponse),
        (CreateAclsRequest, CreateAclsResponse),
        (DeleteAclsRequest, DeleteAclsResponse),
        (DescribeConfigsRequest, DescribeConfigsResponse),
        (AlterConfigsRequest, AlterConfigsResponse),
        (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
        (DescribeLogDirsRequest, DescribeLogDirsResponse),
        (CreatePartitionsRequest, CreatePartitionsResponse),
        (DeleteGroupsRequest, DeleteGroupsResponse),
        (ElectLeadersRequest, ElectLeadersResponse),
        (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
        (ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
        (OffsetDeleteRequest, OffsetDeleteResponse),
        (DescribeClusterRequest, DescribeClusterResponse),
        (DescribeProducersRequest, DescribeProducersResponse),
        (DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse),
        (SaslHandshakeRequest, SaslHandshakeResponse),
        (SaslAuthenticateRequest, SaslAuthenticateResponse),
        (DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse),
        (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
        (DescribeClientQuotasRequest, DescribeClientQuotasResponse),
    ]
}

_INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63, "uint16": 16, "uint32": 32}


def _bits_to_kp(value: int) -> set[int] | None:
    u = value & 0xFFFF_FFFF
    bits = {i for i in range(32) if u >> i & 1}
    return None if bits == {31} else bits


def _bits_from_kp(bits: set[int] | None) -> int:
    u = sum(1 << i for i in ({31} if bits is None else bits))
    return u - 2**32 if u >= 2**31 else u


# kafka-python patches a few int32 fields into "bitfields" (sets of bit numbers, None for
# INT32_MIN), renaming some to ``authorized_operations``; Kafka's schema and ours keep the int32
# under Kafka's name. (struct, our field) -> (kafka-python's field, to theirs, from theirs).
_BITS = (_bits_to_kp, _bits_from_kp)
_KP_CONVERSIONS = {
    ("DescribedGroup", "authorized_operations"): ("authorized_operations", *_BITS),
    ("MetadataResponse", "cluster_authorized_operations"): ("authorized_operations", *_BITS),
    ("MetadataResponseTopic", "topic_authorized_operations"): ("authorized_operations", *_BITS),
    ("DescribeClusterResponse", "cluster_authorized_operations"): (
        "authorized_operations",
        *_BITS,
    ),
}


def present(sdef: StructDef, version: int) -> list[Field]:
    return [f for f in sdef.fields if in_range(version, f.versions)]


class Sampler:
    """Non-default values for every field of a version: ``nulls=True`` puts ``None`` wherever
    the version allows it, ``nulls=False`` a value everywhere; arrays get two entries (one
    where ``nulls``)."""

    def __init__(self, version: int, nulls: bool) -> None:
        self.version = version
        self.nulls = nulls
        self.n = 0

    def struct(self, sdef: StructDef) -> dict[str, Any]:
        return {f.name: self.value(f) for f in present(sdef, self.version)}

    def value(self, f: Field) -> Any:
        if self.nulls and in_range(self.version, f.nullable):
            return None
        t = f.type
        if isinstance(t, StructDef):
            return self.struct(t)
        if isinstance(t, ArrayOf):
            count = 1 if self.nulls else 2
            el = t.element
            if isinstance(el, StructDef):
                return [self.struct(el) for _ in range(count)]
            return [self.primitive(el, f.name) for _ in range(count)]
        return self.primitive(t, f.name, f.default)

    def primitive(self, t: Primitive, name: str, default: Any = None) -> Any:
        self.n += 1
        n = self.n
        if t is BOOL:
            return not default
        if t is STRING:
            return f"{name}-{n}-é"
        if t is BYTES:
            return bytes([n % 256]) * (n % 5 + 1)
        if t is RECORDS:
            return b"\x00\x01records" + bytes([n % 256]) * 40
        if t is FLOAT64:
            return n + 0.5
        if t is UUID:
            return uuid.UUID(int=(n * 0x9E3779B97F4A7C15_F39CC0605CEDC834) % 2**128)
        bits = _INT_RANGES[t.name]
        value = (n * 7919) % (2**bits) or 1
        if default == value:
            value += 1
        # negative numbers too, where the type is signed
        return -value if (not t.name.startswith("uint") and n % 3 == 0) else value


def to_kafka_python(kp_cls: Any, sdef: StructDef, version: int, values: dict[str, Any]) -> Any:
    """Builds kafka-python's object for ``values`` (nested classes found by struct name)."""
    kwargs: dict[str, Any] = {}
    for f in present(sdef, version):
        v = values[f.name]
        child = _child(f)
        if child is not None and v is not None:
            child_cls = getattr(kp_cls, child.name)
            if isinstance(f.type, ArrayOf):
                v = [to_kafka_python(child_cls, child, version, e) for e in v]
            else:
                v = to_kafka_python(child_cls, child, version, v)
        conversion = _KP_CONVERSIONS.get((sdef.name, f.name))
        if conversion is None:
            kwargs[f.name] = v
        else:
            kwargs[conversion[0]] = conversion[1](v)
    return kp_cls(**kwargs)


def _child(f: Field) -> StructDef | None:
    if isinstance(f.type, StructDef):
        return f.type
    if isinstance(f.type, ArrayOf) and isinstance(f.type.element, StructDef):
        return f.type.element
    return None


def assert_same(ours: Any, theirs: Any, sdef: StructDef, version: int, path: str = "") -> None:
    """Every field of ``version``: ours (a Struct or dict) equals theirs (any object)."""
    for f in present(sdef, version):
        a = ours[f.name] if isinstance(ours, dict) else getattr(ours, f.name)
        conversion = _KP_CONVERSIONS.get((sdef.name, f.name))
        if conversion is None:
            b = getattr(theirs, f.name)
        else:
            b = conversion[2](getattr(theirs, conversion[0]))
        where = f"{path}.{f.name}"
        child = _child(f)
        if child is None or a is None or b is None:
            if isinstance(b, bytes | bytearray | memoryview):
                b = bytes(b)
            assert a == b, f"{where}: ours {a!r} != kafka-python {b!r}"
        elif isinstance(f.type, ArrayOf):
            assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} entries"
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                assert_same(x, y, child, version, f"{where}[{i}]")
        else:
            assert_same(a, b, child, version, where)


def assert_defaults(ours: Any, sdef: StructDef, version: int) -> None:
    """Fields absent from ``version`` hold their schema defaults, recursively."""
    for f in sdef.fields:
        value = getattr(ours, f.name)
        if not in_range(version, f.versions):
            assert value == f.default, f"{sdef.name}.{f.name}: {value!r} != {f.default!r}"
            continue
        child = _child(f)
        if child is not None and value is not None:
            for entry in value if isinstance(f.type, ArrayOf) else [value]:
                assert_defaults(entry, child, version)
