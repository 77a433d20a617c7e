"""Malformed and unsupported requests: one error family, with the header when it was readable.

The fuzz invariant (after h11's): any bytes either decode or raise ``ProtocolError``;
``struct.error``, ``IndexError``, ``UnicodeDecodeError``, ``MemoryError`` never come out.
"""

from __future__ import annotations

import contextlib
import struct
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_helpers import Sampler

from compactlog import errors as codes
from compactlog.errors import ProtocolError, UnsupportedVersionError
from compactlog.protocol import (
    ADVERTISED,
    SUPPORTED,
    MalformedRequestError,
    RequestHeader,
    UnsupportedRequestError,
    api_versions_error_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from compactlog.protocol.messages import REQUESTS, RESPONSES, FetchRequest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest as KpApiVersionsRequest
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse
    from kafka.protocol.producer.produce import ProduceRequest as KpProduceRequest

FUZZ = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])

SUPPORTED_CASES = [
    (key, v) for key, (lo, hi) in sorted(SUPPORTED.items()) for v in range(lo, hi + 1)
]


def _ids(case: tuple[int, int]) -> str:
    return f"{REQUESTS[case[0]].name[:-7]}-v{case[1]}"


def request_frame(key: int, version: int, nulls: bool = False) -> bytes:
    """A valid request frame (without its size prefix) with every field set."""
    body = REQUESTS[key].cls(**Sampler(version, nulls).struct(REQUESTS[key].struct))
    return bytes(encode_request(RequestHeader(key, version, 1234, "client"), body))[4:]


def response_frame(key: int, version: int) -> bytes:
    values = Sampler(version, False).struct(RESPONSES[key].struct)
    if key == 18:
        values["error_code"] = 0
    body = RESPONSES[key].cls(**values)
    return bytes(encode_response(RequestHeader(key, version, 1234, None), body))[4:]


def decode_or_protocol_error(frame: bytes) -> None:
    try:
        decode_request(frame)
    except ProtocolError as e:
        assert isinstance(e, UnsupportedRequestError | MalformedRequestError)
        assert str(e)


# --- truncation -------------------------------------------------------------------------------
@pytest.mark.parametrize("case", SUPPORTED_CASES, ids=_ids)
def test_every_truncation_of_a_request_raises_protocol_error(case: tuple[int, int]) -> None:
    key, version = case
    for nulls in (False, True):
        frame = request_frame(key, version, nulls)
        decode_request(frame)  # the whole frame is fine
        header_size = 10 + len(b"client")
        for cut in range(len(frame)):
            with pytest.raises(MalformedRequestError) as e:
                decode_request(frame[:cut])
            if cut >= header_size:
                assert e.value.header == RequestHeader(key, version, 1234, "client")
            else:
                assert e.value.header is None


@pytest.mark.parametrize("case", SUPPORTED_CASES, ids=_ids)
def test_every_truncation_of_a_response_raises_protocol_error(case: tuple[int, int]) -> None:
    key, version = case
    frame = response_frame(key, version)
    decode_response(frame, key, version)
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            decode_response(frame[:cut], key, version)


def test_truncation_names_the_field() -> None:
    body = FetchRequest(
        max_wait_ms=500,
        topics=[{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 5}]}],
    )
    frame = bytes(encode_request(RequestHeader(1, 11, 9, None), body))[4:]
    # The partition count is checked against the bytes left before any entry is read.
    cut = frame.index(b"\x00\x00\x00\x00\x00\x00\x00\x05") + 3
    with pytest.raises(
        MalformedRequestError,
        match=r"FetchRequest v11\.topics\[\]\.partitions\[\]: array of 1 items of at least "
        r"28 bytes exceeds the 11 bytes left",
    ):
        decode_request(frame[:cut])
    # In a run of fixed-width fields, the first field that does not fit is named.
    frame = _heartbeat(struct.pack(">h", 1) + b"g")
    with pytest.raises(
        MalformedRequestError,
        match=r"HeartbeatRequest v1\.generation_id: needs 4 bytes, only 2 left \(at byte 13 ",
    ):
        decode_request(frame[:15])


def test_trailing_bytes_are_ignored_as_kafka_ignores_them() -> None:
    frame = request_frame(12, 1)
    plain = decode_request(frame)
    padded = decode_request(frame + b"\x00\xff\x07")
    assert padded.body == plain.body and padded.header == plain.header
    assert (plain.trailing, padded.trailing) == (0, 3)


#: librdkafka 2.16's all-topics Metadata v13 request, as AdminClient.list_topics() sent it
#: (correlation id 4, client id "rdkafka"). It reserves 4 bytes for the topics count and, for a
#: null array, writes only the first (0, null) without erasing the other 3 (librdkafka issue
#: 5049); a Kafka broker reads the body from the first 4 bytes and ignores the last 3.
LIBRDKAFKA_ALL_TOPICS_METADATA_V13 = bytes.fromhex(
    "0003000d00000004000772646b61666b61"  # header: key 3, v13, correlation 4, "rdkafka"
    "00"  # header tagged fields: none
    "00"  # topics: null (all topics)
    "00"  # allow_auto_topic_creation: read from the count's unerased bytes, so false
    "00"  # include_topic_authorized_operations: false
    "00"  # tagged fields: none
    "010000"  # what librdkafka meant: allow_auto_topic_creation true, false, no tags
)


def test_librdkafka_all_topics_metadata_request_decodes_as_kafka_reads_it() -> None:
    request = decode_request(LIBRDKAFKA_ALL_TOPICS_METADATA_V13)
    assert (request.api_key, request.api_version) == (3, 13)
    assert (request.header.correlation_id, request.header.client_id) == (4, "rdkafka")
    body = request.body
    assert body.topics is None
    assert body.allow_auto_topic_creation is False
    assert body.include_topic_authorized_operations is False
    assert request.trailing == 3


# --- lengths and counts -----------------------------------------------------------------------
def _heartbeat(group_id_bytes: bytes) -> bytes:
    # header v1 (key 12, v1, correlation 5, client_id null), then group_id as given
    return struct.pack(">hhih", 12, 1, 5, -1) + group_id_bytes + struct.pack(">i", 3) + b"\x00\x00"


@pytest.mark.parametrize(
    ("group_id", "message"),
    [
        (struct.pack(">h", -2), "string length -2 is negative"),
        (struct.pack(">h", -1), "null string in a field that is not nullable"),
        (struct.pack(">h", 100) + b"ab", "length 100 exceeds the"),
        (struct.pack(">h", 2) + b"\xff\xfe", "not valid UTF-8"),
    ],
)
def test_bad_strings_name_the_field(group_id: bytes, message: str) -> None:
    with pytest.raises(MalformedRequestError, match=message) as e:
        decode_request(_heartbeat(group_id))
    assert "HeartbeatRequest v1.group_id" in str(e.value)
    assert e.value.header == RequestHeader(12, 1, 5, None)
    assert e.value.__cause__ is not None


@pytest.mark.parametrize("count", [2**31 - 1, 1000, -2])
def test_array_counts_are_checked_before_allocating(count: int) -> None:
    # DescribeGroups v0: groups []string; the count claims more than the bytes can hold
    frame = struct.pack(">hhih", 15, 0, 5, -1) + struct.pack(">i", count) + b"\x00\x01a"
    with pytest.raises(MalformedRequestError, match=r"DescribeGroupsRequest v0\.groups\[\]"):
        decode_request(frame)


def test_null_array_where_not_nullable() -> None:
    frame = struct.pack(">hhih", 15, 0, 5, -1) + struct.pack(">i", -1)
    with pytest.raises(MalformedRequestError, match="null array in a field that is not nullable"):
        decode_request(frame)


def test_a_nullable_array_may_be_null() -> None:
    # Metadata v4: topics null = all topics
    frame = struct.pack(">hhih", 3, 4, 5, -1) + struct.pack(">i", -1) + b"\x01"
    request = decode_request(frame)
    assert request.body.topics is None
    assert request.body.allow_auto_topic_creation is True


@pytest.mark.parametrize("cut", range(10))
def test_short_header_has_no_header(cut: int) -> None:
    frame = struct.pack(">hhih", 18, 0, 5, -1)
    with pytest.raises(MalformedRequestError) as e:
        decode_request(frame[:cut])
    assert e.value.header is None


# --- unsupported versions and keys ------------------------------------------------------------
@pytest.mark.parametrize("version", [3, 4])
def test_flexible_api_versions_request_is_unsupported_with_its_header(version: int) -> None:
    kp = KpApiVersionsRequest[version](
        client_software_name="kafka-python", client_software_version="3.0.12"
    )
    kp.with_header(correlation_id=31337, client_id="kp-client")
    frame = bytes(kp.encode(header=True, framed=True))
    with pytest.raises(UnsupportedVersionError) as e:
        decode_request(frame[4:])
    assert isinstance(e.value, UnsupportedRequestError)
    assert e.value.header == RequestHeader(18, version, 31337, "kp-client")
    assert e.value.error_code == codes.UNSUPPORTED_VERSION

    # The answer: header v0, a v0 body with error 35 and the advertised list; kafka-python
    # reads it as v0 whatever version it asked with (as the client does on connect).
    reply = bytes(api_versions_error_response(e.value.header))
    assert struct.unpack(">ii", reply[:8]) == (len(reply) - 4, 31337)
    decoded = KpApiVersionsResponse.decode(reply, version=version, header=True, framed=True)
    assert decoded.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == ADVERTISED
    ours = decode_response(reply[4:], 18, version)
    assert ours.body.error_code == 35 and len(ours.body.api_keys) == len(ADVERTISED)


def test_api_versions_advertises_produce_from_v0() -> None:
    assert ADVERTISED[0] == (0, 8)
    assert SUPPORTED[0] == (3, 8)
    assert {k: v for k, v in ADVERTISED.items() if k != 0} == {
        k: v for k, v in SUPPORTED.items() if k != 0
    }


@pytest.mark.parametrize("key", [23, 68, 999, -1])
def test_unknown_api_key_is_unsupported(key: int) -> None:
    frame = struct.pack(">hhih", key, 0, 77, 3) + b"abc" + b"\x00" * 20
    with pytest.raises(UnsupportedRequestError, match="unknown API key") as e:
        decode_request(frame)
    assert e.value.header == RequestHeader(key, 0, 77, "abc")


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_unsupported(version: int) -> None:
    kp = KpProduceRequest[version](acks=1, timeout_ms=100, topic_data=[])
    kp.with_header(correlation_id=99, client_id=None)
    frame = bytes(kp.encode(header=True, framed=True))
    with pytest.raises(UnsupportedRequestError, match=r"Produce v\d is not supported") as e:
        decode_request(frame[4:])
    assert e.value.header == RequestHeader(0, version, 99, None)


@pytest.mark.parametrize(("key", "version"), [(1, 3), (1, 12), (3, 0), (3, 14), (18, 5), (75, 1)])
def test_versions_outside_supported_are_refused(key: int, version: int) -> None:
    frame = struct.pack(">hhih", key, version, 1, -1)
    with pytest.raises(UnsupportedRequestError):
        decode_request(frame)


# --- fuzz -------------------------------------------------------------------------------------
@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_protocol_error(data: bytes) -> None:
    decode_or_protocol_error(data)


@FUZZ
@given(
    st.sampled_from(SUPPORTED_CASES),
    st.binary(max_size=60),
)
def test_random_bodies_decode_or_raise_protocol_error(case: tuple[int, int], body: bytes) -> None:
    key, version = case
    decode_or_protocol_error(struct.pack(">hhih", key, version, 1, -1) + body)


@FUZZ
@given(
    st.sampled_from(SUPPORTED_CASES),
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mutated_requests_decode_or_raise_protocol_error(
    case: tuple[int, int], nulls: bool, edits: list[tuple[int, int]]
) -> None:
    frame = bytearray(request_frame(*case, nulls=nulls))
    for pos, value in edits:
        frame[pos % len(frame)] = value
    decode_or_protocol_error(bytes(frame))


@FUZZ
@given(st.sampled_from(SUPPORTED_CASES), st.binary(max_size=100))
def test_random_responses_decode_or_raise_protocol_error(
    case: tuple[int, int], data: bytes
) -> None:
    key, version = case
    with contextlib.suppress(ProtocolError):
        decode_response(data, key, version)
