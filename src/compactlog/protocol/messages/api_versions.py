"""ApiVersions (key 18): which API versions the broker implements.

Versions 0-2 are classic. Version 3 (the first flexible one, KIP-511) adds the client's software
name and version to the request and tagged feature fields to the response; they are compiled
here so that the flexible machinery is exercised and a later ceiling raise is a one-line change,
but the broker answers v3+ with a v0 error body (see ``api_versions_error_response``).
"""

from __future__ import annotations

from compactlog.protocol.compiler import Message
from compactlog.protocol.schema import BOOL, INT16, INT32, INT64, STRING, field, struct_array

API_VERSIONS_REQUEST = Message(
    "ApiVersionsRequest",
    18,
    "0-4",
    flexible="3+",
    fields=[
        field("client_software_name", STRING, "3+"),
        field("client_software_version", STRING, "3+"),
    ],
)

API_VERSIONS_RESPONSE = Message(
    "ApiVersionsResponse",
    18,
    "0-4",
    flexible="3+",
    fields=[
        field("error_code", INT16),
        struct_array(
            "api_keys",
            "ApiVersion",
            [field("api_key", INT16), field("min_version", INT16), field("max_version", INT16)],
        ),
        field("throttle_time_ms", INT32, "1+"),
        struct_array(
            "supported_features",
            "SupportedFeatureKey",
            [field("name", STRING), field("min_version", INT16), field("max_version", INT16)],
            "3+",
            tag=0,
            tagged="3+",
        ),
        field("finalized_features_epoch", INT64, "3+", default=-1, tag=1, tagged="3+"),
        struct_array(
            "finalized_features",
            "FinalizedFeatureKey",
            [
                field("name", STRING),
                field("max_version_level", INT16),
                field("min_version_level", INT16),
            ],
            "3+",
            tag=2,
            tagged="3+",
        ),
        field("zk_migration_ready", BOOL, "3+", tag=3, tagged="3+"),
    ],
)

ApiVersionsRequest = API_VERSIONS_REQUEST.cls
ApiVersionsResponse = API_VERSIONS_RESPONSE.cls
