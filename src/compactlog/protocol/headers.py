"""Request and response headers.

Request header v1 (every non-flexible request): api_key int16, api_version int16,
correlation_id int32, client_id nullable string (int16 length). Header v2 (flexible requests)
appends a tagged-field section. ``client_id`` keeps the classic int16 length even in v2, so that
a broker can read the first four fields of *any* request the same way, which is what lets it
answer an ApiVersions request whose version it does not know (spec 1.1 and 2.2).

Response header v0 is the correlation id; v1 (flexible responses) appends a tagged-field
section. ApiVersions responses always use v0, whatever the body's version, because the client
must be able to read the reply before it knows which versions the broker speaks.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compactlog.protocol.primitives import INT32, Reader
from compactlog.protocol.writers import write_nullable_string, write_tagged_fields

__all__ = [
    "RequestHeader",
    "ResponseHeader",
    "read_request_header",
    "read_response_header",
    "write_request_header",
    "write_response_header",
]

_PREFIX = struct.Struct(">hhi")
_PREFIX_LAYOUT = (
    ("RequestHeader.api_key", 2),
    ("RequestHeader.api_version", 4),
    ("RequestHeader.correlation_id", 8),
)
_NO_TAGS: dict[int, Callable[[Reader], Any]] = {}


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    correlation_id: int


def read_request_header(r: Reader, flexible: bool) -> RequestHeader:
    """Reads header v1, or v2 when ``flexible`` (its tagged fields are skipped)."""
    api_key, api_version, correlation_id = r.fixed_run(_PREFIX, _PREFIX_LAYOUT)
    client_id = r.nullable_string("RequestHeader.client_id")
    if flexible:
        r.tagged_fields("RequestHeader<tags>", _NO_TAGS)
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def write_request_header(out: bytearray, header: RequestHeader, flexible: bool) -> None:
    try:
        out += _PREFIX.pack(header.api_key, header.api_version, header.correlation_id)
    except struct.error as e:
        raise ValueError(f"RequestHeader: cannot encode {header}: {e}") from e
    write_nullable_string(out, header.client_id, "RequestHeader.client_id")
    if flexible:
        write_tagged_fields(out, ())


def read_response_header(r: Reader, flexible: bool) -> ResponseHeader:
    """Reads header v0, or v1 when ``flexible``."""
    correlation_id = r.int32("ResponseHeader.correlation_id")
    if flexible:
        r.tagged_fields("ResponseHeader<tags>", _NO_TAGS)
    return ResponseHeader(correlation_id)


def write_response_header(out: bytearray, correlation_id: int, flexible: bool) -> None:
    try:
        out += INT32.pack(correlation_id)
    except struct.error as e:
        raise ValueError(f"ResponseHeader.correlation_id: cannot encode {correlation_id}") from e
    if flexible:
        out.append(0)  # an empty tagged-field section
