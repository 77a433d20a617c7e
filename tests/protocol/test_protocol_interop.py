"""Every (API, version) we implement, against kafka-python 3.0 as an independent oracle.

For each compiled version of each message, with two samples (nulls wherever the version allows
them, and values everywhere), in both directions:

* requests: kafka-python encodes, ``decode_request`` decodes, the fields agree; we encode,
  kafka-python decodes, the fields agree; and both encodings are the same bytes;
* responses: the same with ``encode_response`` and ``decode_response``.

The parameter list is the union of what is compiled and what ``SUPPORTED`` promises, so a
supported version without a codec fails here instead of being skipped.
"""

from __future__ import annotations

from typing import Any

import pytest
from protocol_helpers import (
    KAFKA_PYTHON,
    Sampler,
    assert_defaults,
    assert_same,
    to_kafka_python,
)

from compactlog.protocol import (
    SUPPORTED,
    RequestHeader,
    UnsupportedRequestError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from compactlog.protocol.compiler import Message
from compactlog.protocol.headers import read_request_header
from compactlog.protocol.messages import PAIRS, REQUESTS, RESPONSES
from compactlog.protocol.primitives import Reader


def _cases() -> list[Any]:
    cases = set()
    for req, _ in PAIRS:
        cases.update((req.api_key, v) for v in range(req.versions[0], req.versions[1] + 1))
    for key, (lo, hi) in SUPPORTED.items():
        cases.update((key, v) for v in range(lo, hi + 1))
    return [
        pytest.param(
            key, v, nulls, id=f"{REQUESTS[key].name[:-7]}-v{v}-{'nulls' if nulls else 'values'}"
        )
        for key, v in sorted(cases)
        for nulls in (False, True)
    ]


CASES = _cases()


def _sample(message: Message, version: int, nulls: bool) -> dict[str, Any]:
    values = Sampler(version, nulls).struct(message.struct)
    if message.name == "ApiVersionsResponse":
        values["error_code"] = 0  # non-zero means "read me as v0" (tested on its own)
    return values


def _kp_request(key: int, version: int, values: dict[str, Any], header: RequestHeader) -> Any:
    kp_cls = KAFKA_PYTHON[key][0]
    obj = to_kafka_python(kp_cls[version], REQUESTS[key].struct, version, values)
    obj.with_header(correlation_id=header.correlation_id, client_id=header.client_id)
    return obj


def _kp_response(key: int, version: int, values: dict[str, Any], correlation_id: int) -> Any:
    kp_cls = KAFKA_PYTHON[key][1]
    obj = to_kafka_python(kp_cls[version], RESPONSES[key].struct, version, values)
    obj.with_header(correlation_id=correlation_id)
    return obj


@pytest.mark.parametrize(("key", "version", "nulls"), CASES)
def test_request_from_kafka_python(key: int, version: int, nulls: bool) -> None:
    message = REQUESTS[key]
    assert message.has_version(version), f"{message.name} v{version} has no codec"
    values = _sample(message, version, nulls)
    header = RequestHeader(key, version, -12345 if nulls else 987654, None if nulls else "cli-é")
    frame = bytes(_kp_request(key, version, values, header).encode(header=True, framed=True))

    lo, hi = SUPPORTED.get(key, (1, 0))
    if lo <= version <= hi:
        request = decode_request(frame[4:])
        assert request.header == header
        body = request.body
    else:  # compiled but refused (Produce v0-2, ApiVersions v3+): the header still reads
        with pytest.raises(UnsupportedRequestError) as e:
            decode_request(frame[4:])
        assert e.value.header == header
        r = Reader(frame[4:])
        read_request_header(r, message.is_flexible(version))
        body = message.decoder(version)(r)
        assert r.remaining == 0
    assert type(body) is message.cls
    assert_same(body, _kp_request(key, version, values, header), message.struct, version)
    assert_defaults(body, message.struct, version)


@pytest.mark.parametrize(("key", "version", "nulls"), CASES)
def test_request_to_kafka_python(key: int, version: int, nulls: bool) -> None:
    message = REQUESTS[key]
    values = _sample(message, version, nulls)
    header = RequestHeader(key, version, 42, None if nulls else "client")
    ours = encode_request(header, message.cls(**values))
    theirs = _kp_request(key, version, values, header).encode(header=True, framed=True)
    assert bytes(ours) == bytes(theirs)
    decoded = KAFKA_PYTHON[key][0].decode(bytes(ours), version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 42
    assert_same(values, decoded, message.struct, version)


@pytest.mark.parametrize(("key", "version", "nulls"), CASES)
def test_response_to_kafka_python(key: int, version: int, nulls: bool) -> None:
    message = RESPONSES[key]
    values = _sample(message, version, nulls)
    header = RequestHeader(key, version, 7, "c")
    ours = encode_response(header, message.cls(**values))
    theirs = _kp_response(key, version, values, 7).encode(header=True, framed=True)
    assert bytes(ours) == bytes(theirs)
    decoded = KAFKA_PYTHON[key][1].decode(bytes(ours), version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 7
    assert_same(values, decoded, message.struct, version)


@pytest.mark.parametrize(("key", "version", "nulls"), CASES)
def test_response_from_kafka_python(key: int, version: int, nulls: bool) -> None:
    message = RESPONSES[key]
    values = _sample(message, version, nulls)
    frame = bytes(_kp_response(key, version, values, -1).encode(header=True, framed=True))
    response = decode_response(frame[4:], key, version)
    assert response.header.correlation_id == -1
    assert type(response.body) is message.cls
    assert_same(response.body, _kp_response(key, version, values, -1), message.struct, version)
    assert_defaults(response.body, message.struct, version)
