"""The Kafka wire protocol, sans-I/O: bytes in, typed requests out, and back.

Layer: above :mod:`compactlog.records` and :mod:`compactlog.errors`, which are all it imports
(besides the standard library); below :mod:`compactlog.broker`. No sockets, no event loop, no
clock: every test and fuzzer runs on bytes.

Theory of operation
-------------------

1. **Frames.** A connection feeds received bytes to a :class:`FrameReader`, which returns
   complete frames (int32 size prefix removed). A size is checked as soon as its 4 bytes are in:
   negative or over :data:`MAX_REQUEST_FRAME_SIZE` (Kafka's ``socket.request.max.bytes``) is a
   ``ProtocolError`` and the stream is dead.
2. **Requests.** :func:`decode_request` reads the header's fixed part (api key, version,
   correlation id, client id: the same bytes in header v1 and v2), so every outcome but a
   truncated header knows whom to answer. An unknown key or a version outside
   :data:`SUPPORTED` raises :class:`UnsupportedRequestError` with ``.header``; for ApiVersions
   the broker answers with :func:`api_versions_error_response` (a v0 body, error 35, the
   :data:`ADVERTISED` list) and keeps the connection, so the client retries at a version we
   speak. Anything else malformed raises :class:`MalformedRequestError` with the field's path.
   Bytes after the body are ignored, as Kafka ignores them (``Request.trailing`` counts
   them): librdkafka 2.16 leaves 3 after every all-topics Metadata v9+ request.
3. **Schemas.** Each message is declared once in :mod:`compactlog.protocol.messages` with the
   DSL of :mod:`compactlog.protocol.schema`: fields, the versions they exist in, nullability,
   defaults, tags. At import, :mod:`compactlog.protocol.compiler` turns every (message, version)
   into straight-line decode/encode functions (no version checks at run time).
4. **Typed messages.** A decoded body is an instance of the message's class
   (``FetchRequest``), with every field of every version as an attribute; fields the version
   does not carry hold their defaults, so handlers need not branch on versions. Responses are
   built by keyword (nested entries as structs or plain dicts) and written with
   :func:`encode_response`, which picks the response header version (v0 for ApiVersions and
   non-flexible APIs, v1 for flexible ones) and prefixes the size.
5. **Records** (Produce and Fetch) stay raw bytes here: one slice out of the frame on decode,
   written as given on encode. :mod:`compactlog.records` parses them.

Errors: the peer's mistakes raise :class:`~compactlog.errors.ProtocolError` (or its
``UnsupportedVersionError``); low-level exceptions never escape. Our own mistakes when encoding
(``None`` in a non-nullable field, an int out of range) raise ``ValueError``/``TypeError``.

Versions: :data:`SUPPORTED` is what ``decode_request`` accepts; :data:`ADVERTISED` is what
ApiVersions announces (the same, except Produce 0-7 announced while 3-7 are implemented, see
:mod:`compactlog.protocol.api_keys`). Error code numbers live in :mod:`compactlog.errors`.
"""

from compactlog.errors import ERROR_NAMES, error_name
from compactlog.protocol.api_keys import ADVERTISED, API_KEYS, API_NAMES, SUPPORTED, ApiKey
from compactlog.protocol.codec import (
    MalformedRequestError,
    Request,
    Response,
    UnsupportedRequestError,
    advertised_api_keys,
    api_versions_error_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from compactlog.protocol.frames import MAX_REQUEST_FRAME_SIZE, FrameReader
from compactlog.protocol.headers import RequestHeader, ResponseHeader
from compactlog.protocol.messages import REQUESTS, RESPONSES
from compactlog.protocol.schema import Struct

__all__ = [
    "ADVERTISED",
    "API_KEYS",
    "API_NAMES",
    "ERROR_NAMES",
    "MAX_REQUEST_FRAME_SIZE",
    "REQUESTS",
    "RESPONSES",
    "SUPPORTED",
    "ApiKey",
    "FrameReader",
    "MalformedRequestError",
    "Request",
    "RequestHeader",
    "Response",
    "ResponseHeader",
    "Struct",
    "UnsupportedRequestError",
    "advertised_api_keys",
    "api_versions_error_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "error_name",
]
