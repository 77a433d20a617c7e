"""The message codec: a whole frame's bytes to a typed request, a typed response to a frame's
bytes.

``decode_request`` is the broker's side: it reads the header's fixed part first, so that even a
request it cannot decode yields the correlation id to answer with, then checks the version
against :data:`~compactlog.protocol.api_keys.SUPPORTED`, then decodes the body with the compiled
codec of that version. Bytes after the end of the body are ignored, as a Kafka broker ignores
them (``RequestContext.parseRequest`` reads the body and never looks at what remains):
librdkafka 2.16 sends 3 such bytes after every all-topics Metadata v9+ request (it reserves 4
bytes for the topics count and, for a null array, leaves 3 of them unerased; librdkafka issue
5049), and Kafka answers it. ``Request.trailing`` says how many there were.
``encode_request``/``decode_response`` are the client's side, used by tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from compactlog import errors as codes
from compactlog.errors import ProtocolError, UnsupportedVersionError
from compactlog.protocol.api_keys import ADVERTISED, API_NAMES, SUPPORTED, ApiKey
from compactlog.protocol.compiler import Message
from compactlog.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    read_request_header,
    read_response_header,
    write_request_header,
    write_response_header,
)
from compactlog.protocol.messages import REQUESTS, RESPONSES, ApiVersionsResponse
from compactlog.protocol.primitives import INT16, INT32, Reader
from compactlog.protocol.schema import Struct

__all__ = [
    "MalformedRequestError",
    "Request",
    "Response",
    "UnsupportedRequestError",
    "advertised_api_keys",
    "api_versions_error_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
]

_MAX_FRAME = 0x7FFF_FFFF  # an int32 size


class UnsupportedRequestError(UnsupportedVersionError):
    """An API key we do not know, or a version of it we do not implement.

    ``header`` is the request's header, read in full: answer with its correlation id.
    """

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


class MalformedRequestError(ProtocolError):
    """A request whose bytes do not follow its schema; the message names the field.

    ``header`` is the request's header when it could be read, else ``None``.
    """

    def __init__(self, message: str, header: RequestHeader | None) -> None:
        super().__init__(message)
        self.header = header


@dataclass(slots=True)
class Request:
    header: RequestHeader
    body: Struct
    #: Bytes after the end of the body, ignored (see the module's docstring).
    trailing: int = 0

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version


@dataclass(slots=True)
class Response:
    header: ResponseHeader
    body: Struct


def _check_end(r: Reader, what: str) -> None:
    if r.pos != r.end:
        raise r.fail(what, f"{r.end - r.pos} bytes left after the end of the message")


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decodes one request frame (the bytes after the int32 size prefix).

    Raises :class:`UnsupportedRequestError` (an ``UnsupportedVersionError``) for an unknown
    API key or a version outside ``SUPPORTED``, including ApiVersions v3+ (answer those with
    :func:`api_versions_error_response`), and :class:`MalformedRequestError` (a
    ``ProtocolError``) for bytes that do not follow the schema. Bytes after the body are
    ignored, as Kafka ignores them, and counted in ``Request.trailing``.
    """
    r = Reader(frame)
    try:
        # Header v1 and v2 agree up to client_id; v2's tagged fields are read below.
        header = read_request_header(r, flexible=False)
    except ProtocolError as e:
        raise MalformedRequestError(str(e), None) from e
    supported = SUPPORTED.get(header.api_key)
    if supported is None:
        raise UnsupportedRequestError(f"unknown API key {header.api_key}", header)
    lo, hi = supported
    if not lo <= header.api_version <= hi:
        name = API_NAMES[header.api_key]
        raise UnsupportedRequestError(
            f"{name} v{header.api_version} is not supported (v{lo}-v{hi} are)", header
        )
    message = REQUESTS[header.api_key]
    version = header.api_version
    try:
        if message.is_flexible(version):
            r.tagged_fields("RequestHeader<tags>", {})
        body = message.decoder(version)(r)
    except ProtocolError as e:
        raise MalformedRequestError(str(e), header) from e
    return Request(header, body, r.end - r.pos)


def _frame(out: bytearray) -> bytearray:
    size = len(out) - 4
    if size > _MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes does not fit an int32 size")
    INT32.pack_into(out, 0, size)
    return out


def encode_response(
    header: RequestHeader, body: Struct, *, version: int | None = None
) -> bytearray:
    """The response frame (int32 size, response header, body) answering ``header``.

    The body is encoded in the request's version unless ``version`` says otherwise. Returns the
    ``bytearray`` it was built in (no final copy: a Fetch response can be large).
    """
    message = RESPONSES.get(header.api_key)
    if message is None:
        raise ValueError(f"no response schema for API key {header.api_key}")
    v = header.api_version if version is None else version
    if not message.has_version(v):
        raise ValueError(f"{message.name} v{v} is not implemented")
    out = bytearray(4)
    flexible = message.is_flexible(v) and header.api_key != ApiKey.API_VERSIONS
    write_response_header(out, header.correlation_id, flexible)
    message.encode(body, v, out)
    return _frame(out)


def encode_request(header: RequestHeader, body: Struct) -> bytearray:
    """The request frame (int32 size, request header v1 or v2, body) for ``header``'s API and
    version."""
    message = REQUESTS.get(header.api_key)
    if message is None or not message.has_version(header.api_version):
        raise ValueError(f"no request schema for API key {header.api_key} v{header.api_version}")
    out = bytearray(4)
    write_request_header(out, header, message.is_flexible(header.api_version))
    message.encode(body, header.api_version, out)
    return _frame(out)


def decode_response(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> Response:
    """Decodes a response frame (after the size prefix) to the request ``api_key``/``version``.

    An ApiVersions response with a non-zero error code is read as v0, whatever was asked,
    because that is how a broker answers a version it does not know (spec 1.1).
    """
    message: Message | None = RESPONSES.get(api_key)
    if message is None or not message.has_version(api_version):
        raise ValueError(f"no response schema for API key {api_key} v{api_version}")
    r = Reader(frame)
    is_api_versions = api_key == ApiKey.API_VERSIONS
    header = read_response_header(r, message.is_flexible(api_version) and not is_api_versions)
    version = api_version
    if is_api_versions and r.remaining >= 2 and INT16.unpack_from(r.buf, r.pos)[0] != 0:
        version = 0
    body = message.decoder(version)(r)
    _check_end(r, f"{message.name} v{version}")
    return Response(header, body)


def advertised_api_keys() -> list[Struct]:
    """The ``api_keys`` entries of an ApiVersions response: :data:`ADVERTISED`, by key."""
    entry = ApiVersionsResponse.ApiVersion
    return [
        entry(api_key=key, min_version=lo, max_version=hi)
        for key, (lo, hi) in sorted(ADVERTISED.items())
    ]


def api_versions_error_response(header: RequestHeader) -> bytearray:
    """The whole frame answering an ApiVersions request whose version we do not implement:
    response header v0 and a v0 body with UNSUPPORTED_VERSION (35) and the advertised list,
    from which the client picks a version it shares with us and asks again (spec 1.1)."""
    body = ApiVersionsResponse(error_code=codes.UNSUPPORTED_VERSION, api_keys=advertised_api_keys())
    return encode_response(header, body, version=0)
