"""The primitive codecs: varints, compact forms and tagged-field sections (KIP-482)."""

from __future__ import annotations

import array

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlog.errors import ProtocolError
from compactlog.protocol import RequestHeader, decode_response, encode_response
from compactlog.protocol import writers as p
from compactlog.protocol.headers import read_request_header
from compactlog.protocol.messages import API_VERSIONS_REQUEST, ApiVersionsResponse
from compactlog.protocol.primitives import Reader


@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(value: int) -> None:
    out = bytearray()
    p.write_uvarint(out, value)
    r = Reader(out)
    assert r.uvarint("x") == value
    assert r.remaining == 0


@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1))
def test_varint_and_varlong_round_trip(v32: int, v64: int) -> None:
    out = bytearray()
    p.write_varint(out, v32)
    p.write_varlong(out, v64)
    r = Reader(out)
    assert (r.varint("a"), r.varlong("b")) == (v32, v64)


def test_varint_known_encodings() -> None:
    for value, encoded in [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-65, b"\x81\x01"),
    ]:
        out = bytearray()
        p.write_varint(out, value)
        assert bytes(out) == encoded


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x80\x80", "varint truncated after 2 bytes"),
        (b"\xff\xff\xff\xff\xff\x01", "varint longer than 5 bytes"),
        (b"\xff\xff\xff\xff\x7f", "does not fit in 32 bits"),
    ],
)
def test_bad_uvarints(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=f"^count: .*{message}"):
        Reader(data).uvarint("count")


def test_writers_refuse_out_of_range_varints() -> None:
    with pytest.raises(ValueError):
        p.write_uvarint(bytearray(), -1)
    with pytest.raises(ValueError):
        p.write_varint(bytearray(), 2**31)
    with pytest.raises(ValueError):
        p.write_varlong(bytearray(), -(2**63) - 1)


@given(st.one_of(st.none(), st.text(max_size=50)), st.one_of(st.none(), st.binary(max_size=50)))
def test_compact_and_classic_strings_and_bytes_round_trip(s: str | None, b: bytes | None) -> None:
    out = bytearray()
    p.write_compact_nullable_string(out, s, "s")
    p.write_compact_nullable_bytes(out, b, "b")
    p.write_nullable_string(out, s, "s")
    p.write_nullable_bytes(out, b, "b")
    r = Reader(out)
    assert r.compact_nullable_string("s") == s
    assert r.compact_nullable_bytes("b") == b
    assert r.nullable_string("s") == s
    assert r.nullable_bytes("b") == b
    assert r.remaining == 0


def test_compact_nulls_where_not_nullable() -> None:
    for method in ("compact_string", "compact_bytes"):
        with pytest.raises(ProtocolError, match="null"):
            getattr(Reader(b"\x00"), method)("f")
    with pytest.raises(ProtocolError, match="null array"):
        Reader(b"\x00").compact_array_length("f", 1, nullable=False)
    assert Reader(b"\x00").compact_array_length("f", 1, nullable=True) is None
    assert Reader(b"\x03xx").compact_array_length("f", 1, nullable=False) == 2
    with pytest.raises(ProtocolError, match="array of 3 items"):
        Reader(b"\x04xx").compact_array_length("f", 1, nullable=False)


def test_a_string_longer_than_kafka_allows_is_refused() -> None:
    out = bytearray()
    p.write_uvarint(out, 40001)
    out += b"a" * 40000
    with pytest.raises(ProtocolError, match="string length 40000 exceeds 32767"):
        Reader(out).compact_string("name")


def test_tagged_fields_skip_unknown_tags_and_decode_known_ones() -> None:
    out = bytearray()
    p.write_tagged_fields(out, [(0, b"\x00\x00\x00\x07"), (5, b"junk"), (9, b"")])
    out += b"rest"
    r = Reader(out)
    assert r.tagged_fields("s", {0: lambda sub: sub.int32("t0")}) == {0: 7}
    assert bytes(r.take(4, "rest")) == b"rest"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ([(3, b""), (3, b"")], "tag 3 follows tag 3"),
        ([(0, b"\x00\x00\x00\x07\x00")], "declares 5 bytes but its value used 4"),
    ],
)
def test_bad_tagged_sections(fields: list[tuple[int, bytes]], message: str) -> None:
    out = bytearray()
    p.write_tagged_fields(out, fields)
    with pytest.raises(ProtocolError, match=message):
        Reader(out).tagged_fields("s", {0: lambda sub: sub.int32("t0")})


def test_tagged_section_count_is_bounded_by_the_bytes_left() -> None:
    with pytest.raises(ProtocolError, match="array of 100 items"):
        Reader(b"\x64\x00\x00").tagged_fields("s", {})


def test_flexible_request_with_unknown_tags_in_header_and_body() -> None:
    """ApiVersions v3 (flexible, header v2): unknown tags are skipped wherever they appear."""
    out = bytearray(b"\x00\x12\x00\x03\x00\x00\x00\x09\xff\xff")  # header v2 prefix, client_id null
    p.write_tagged_fields(out, [(7, b"header-tag")])
    p.write_compact_string(out, "librdkafka", "name")
    p.write_compact_string(out, "2.16.0", "version")
    p.write_tagged_fields(out, [(1, b"x"), (200, b"yy")])
    r = Reader(out)
    header = read_request_header(r, flexible=True)
    assert header == RequestHeader(18, 3, 9, None)
    body = API_VERSIONS_REQUEST.decoder(3)(r)
    assert (body.client_software_name, body.client_software_version) == ("librdkafka", "2.16.0")
    assert r.remaining == 0


def test_tagged_response_fields_round_trip() -> None:
    body = ApiVersionsResponse(
        api_keys=[{"api_key": 0, "min_version": 0, "max_version": 7}],
        finalized_features_epoch=5,
        zk_migration_ready=True,
    )
    frame = encode_response(RequestHeader(18, 4, 3, None), body)
    decoded = decode_response(bytes(frame)[4:], 18, 4).body
    assert decoded == body
    assert decoded.supported_features == []  # absent tag: the default


def test_reader_accepts_any_buffer() -> None:
    words = array.array("i", [1])
    r = Reader(memoryview(words))
    assert r.remaining == words.itemsize


def test_varlong_over_64_bits_is_refused() -> None:
    with pytest.raises(ProtocolError, match="does not fit in 64 bits"):
        Reader(b"\xff" * 9 + b"\x7f").varlong("v")
    with pytest.raises(ProtocolError, match="varint longer than 10 bytes"):
        Reader(b"\xff" * 11).varlong("v")
