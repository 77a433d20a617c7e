"""The typed message objects and the schema compiler: defaults, construction, encode errors."""

from __future__ import annotations

import struct
import uuid

import pytest

from compactlog.protocol import RequestHeader, decode_request, encode_request, encode_response
from compactlog.protocol.compiler import Message
from compactlog.protocol.messages import (
    FETCH_REQUEST,
    PRODUCE_REQUEST,
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    MetadataResponse,
    ProduceRequest,
)
from compactlog.protocol.primitives import Reader
from compactlog.protocol.schema import (
    INT32,
    MAX_VERSION,
    NO_VERSIONS,
    STRING,
    UUID,
    ZERO_UUID,
    StructDef,
    field,
    parse_versions,
    struct_array,
)


def test_parse_versions() -> None:
    assert parse_versions("3+") == (3, MAX_VERSION)
    assert parse_versions("0-4") == (0, 4)
    assert parse_versions("2") == (2, 2)
    assert parse_versions("none") == NO_VERSIONS
    for bad in ("", "+3", "4-2", "a", "1-"):
        with pytest.raises(ValueError, match="bad version range"):
            parse_versions(bad)


def test_schema_names_are_checked() -> None:
    with pytest.raises(ValueError, match="snake_case"):
        field("GroupId", INT32)
    with pytest.raises(ValueError, match="PascalCase"):
        StructDef("fetch_topic", [])
    with pytest.raises(ValueError, match="duplicate"):
        StructDef("Twice", [field("a", INT32), field("a", INT32)])
    with pytest.raises(ValueError, match="tag"):
        field("t", INT32, "3+", tag=0)


def test_defaults_fill_missing_fields_and_lists_are_not_shared() -> None:
    a, b = FetchRequest(), FetchRequest()
    assert a.replica_id == -1
    assert a.max_bytes == 0x7FFF_FFFF
    assert a.session_epoch == -1
    assert a.rack_id == ""
    assert a.topics == [] and a.topics is not b.topics
    assert FetchResponse.FetchableTopicResponse.PartitionData().records == b""


def test_unknown_field_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="FetchRequest has no field"):
        FetchRequest(isolation=1)


def test_nested_dicts_become_structs() -> None:
    partition = FetchRequest.FetchTopic.FetchPartition(partition=3, fetch_offset=10)
    with_structs = FetchRequest(topics=[FetchRequest.FetchTopic(topic="t", partitions=[partition])])
    with_dicts = FetchRequest(
        topics=[{"topic": "t", "partitions": [{"partition": 3, "fetch_offset": 10}]}]
    )
    assert with_dicts == with_structs
    assert type(with_dicts.topics[0].partitions[0]) is FetchRequest.FetchTopic.FetchPartition
    assert with_dicts != FetchRequest()
    assert with_dicts != "FetchRequest"


def test_dicts_appended_later_are_encoded_too() -> None:
    body = FetchRequest(topics=[])
    body.topics.append({"topic": "t", "partitions": [{"partition": 1}]})
    frame = encode_request(RequestHeader(1, 11, 1, None), body)
    assert decode_request(bytes(frame)[4:]).body == FetchRequest(
        topics=[{"topic": "t", "partitions": [{"partition": 1}]}]
    )


def test_repr_and_to_dict() -> None:
    body = ProduceRequest(
        acks=-1,
        topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": b"x" * 1000}]}],
    )
    text = repr(body)
    assert text.startswith("ProduceRequest(transactional_id=None, acks=-1, timeout_ms=0, ")
    assert "records=<1000 bytes>" in text
    assert body.to_dict()["topic_data"][0]["partition_data"][0] == {
        "index": 0,
        "records": b"x" * 1000,
    }
    with pytest.raises(TypeError):
        hash(body)


def test_fields_absent_from_a_version_are_not_written() -> None:
    header = RequestHeader(1, 10, 1, None)
    plain = encode_request(header, FetchRequest(max_wait_ms=5))
    assert encode_request(header, FetchRequest(max_wait_ms=5, rack_id="rack-1")) == plain
    decoded = decode_request(bytes(plain)[4:]).body
    assert decoded.rack_id == ""


def test_records_are_raw_bytes_of_one_slice() -> None:
    records = bytes(range(256)) * 4096  # 1 MiB
    body = ProduceRequest(
        acks=1,
        timeout_ms=10,
        topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    )
    frame = bytes(encode_request(RequestHeader(0, 7, 1, None), body))[4:]
    decoded = decode_request(frame).body.topic_data[0].partition_data[0].records
    assert type(decoded) is bytes
    assert decoded == records


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (HeartbeatRequest(group_id=None), ValueError, r"HeartbeatRequest v1\.group_id: None"),
        (HeartbeatRequest(group_id=b"g"), ValueError, r"group_id: expected a str"),
        (HeartbeatRequest(group_id="g" * 40000), ValueError, r"40000 UTF-8 bytes exceed 32767"),
        (
            HeartbeatRequest(generation_id=2**31),
            ValueError,
            r"HeartbeatRequest v1\.generation_id: cannot encode \(2147483648,\)",
        ),
        (FetchRequest(), TypeError, "expected a HeartbeatRequest"),
    ],
)
def test_encode_errors_name_the_field(body: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        encode_request(RequestHeader(12, 1, 1, None), body)  # type: ignore[arg-type]


def test_null_in_a_non_nullable_array_is_refused() -> None:
    with pytest.raises(ValueError, match=r"MetadataResponse v4\.brokers\[\]: None"):
        encode_response(RequestHeader(3, 4, 1, None), MetadataResponse(brokers=None))


def test_unimplemented_versions_are_refused_on_encode() -> None:
    with pytest.raises(ValueError, match="v12 is not implemented"):
        encode_response(RequestHeader(1, 12, 1, None), FetchResponse())
    with pytest.raises(ValueError, match="no request schema"):
        encode_request(RequestHeader(1, 3, 1, None), FetchRequest())


def test_generated_source_has_no_version_checks() -> None:
    source = FETCH_REQUEST.source(11)
    assert "def d_FetchRequest(r):" in source
    assert "version" not in source.replace("v11", "")
    # consecutive fixed-width fields are read with one struct call
    assert "(o.replica_id, o.max_wait_ms, o.min_bytes, o.max_bytes, o.isolation_level, " in source
    assert PRODUCE_REQUEST.source(3) != PRODUCE_REQUEST.source(2)


def test_a_produce_request_header_with_client_id() -> None:
    frame = struct.pack(">hhih", 0, 7, 3, 2) + b"id" + struct.pack(">hhii", -1, 1, 10, 0)
    request = decode_request(frame)
    assert request.header == RequestHeader(0, 7, 3, "id")
    assert (request.api_key, request.api_version) == (0, 7)
    assert request.body == ProduceRequest(acks=1, timeout_ms=10)


def test_nullable_struct_fields_and_uuids() -> None:
    """A single struct may be nullable (an int8 marker, -1 or 1, precedes it); uuids are 16
    bytes. An array of such structs with every inner struct null is not refused as too short."""
    inner = StructDef("Cursor", [field("name", STRING), field("at", INT32)])
    message = Message(
        "ProbeRequest",
        9999,
        "0-1",
        "1+",
        [
            struct_array(
                "items",
                "Item",
                [field("id", UUID), field("cursor", inner, nullable="0+", default=None)],
            ),
            field("last", inner, nullable="1+", default=None),
        ],
    )
    some_id = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    for version in (0, 1):
        body = message.cls(
            items=[{"id": some_id}, {"cursor": {"name": "t", "at": 3}}, {}],
            last={"name": "x", "at": 1} if version else None,
        )
        out = bytearray()
        if version == 0:  # "last" is not nullable in v0: None there is our mistake
            with pytest.raises(ValueError, match=r"last: None in a field that is not nullable"):
                message.encode(message.cls(items=[], last=None), 0, bytearray())
            body.last = {"name": "", "at": 0}
        message.encode(body, version, out)
        decoded = message.decoder(version)(Reader(out))
        assert [i.id for i in decoded.items] == [some_id, ZERO_UUID, ZERO_UUID]
        assert decoded.items[0].cursor is None
        assert decoded.items[1].cursor.name == "t"
        assert decoded.last.name == ("x" if version else "")
    null_cursor = bytearray()
    message.encode(message.cls(items=[{}], last=None), 1, null_cursor)
    # items: count 2, uuid 16 zero bytes, cursor marker -1, item tags; last: marker -1; tags
    assert bytes(null_cursor) == b"\x02" + bytes(16) + b"\xff\x00" + b"\xff\x00"
    with pytest.raises(ValueError, match=r"expected a uuid\.UUID"):
        message.encode(message.cls(items=[{"id": "not-a-uuid"}]), 1, bytearray())
