"""The ACL APIs: DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v0-v3 as in Kafka 4.4.

v1 adds the resource pattern type (LITERAL = 3 where a version does not carry it; v0 knows only
literal patterns), v2 makes the messages flexible, v3 changes nothing on the wire (it marks
the user principal's resource type USER as understood). Codes of the resource type, pattern
type, operation and permission are Kafka's enums (:mod:`compactlog.broker.authorizer`).
"""

from __future__ import annotations

from compactlog.protocol.compiler import Message
from compactlog.protocol.schema import INT8, INT16, INT32, STRING, field, struct_array

#: PatternType.LITERAL, what a v0 message means.
_LITERAL = 3

DESCRIBE_ACLS_REQUEST = Message(
    "DescribeAclsRequest",
    29,
    "0-3",
    flexible="2+",
    fields=[
        field("resource_type_filter", INT8),
        field("resource_name_filter", STRING, nullable="0+"),
        field("pattern_type_filter", INT8, "1+", default=_LITERAL),
        field("principal_filter", STRING, nullable="0+"),
        field("host_filter", STRING, nullable="0+"),
        field("operation", INT8),
        field("permission_type", INT8),
    ],
)

DESCRIBE_ACLS_RESPONSE = Message(
    "DescribeAclsResponse",
    29,
    "0-3",
    flexible="2+",
    fields=[
        field("throttle_time_ms", INT32),
        field("error_code", INT16),
        field("error_message", STRING, nullable="0+"),
        struct_array(
            "resources",
            "DescribeAclsResource",
            [
                field("resource_type", INT8),
                field("resource_name", STRING),
                field("pattern_type", INT8, "1+", default=_LITERAL),
                struct_array(
                    "acls",
                    "AclDescription",
                    [
                        field("principal", STRING),
                        field("host", STRING),
                        field("operation", INT8),
                        field("permission_type", INT8),
                    ],
                ),
            ],
        ),
    ],
)

CREATE_ACLS_REQUEST = Message(
    "CreateAclsRequest",
    30,
    "0-3",
    flexible="2+",
    fields=[
        struct_array(
            "creations",
            "AclCreation",
            [
                field("resource_type", INT8),
                field("resource_name", STRING),
                field("resource_pattern_type", INT8, "1+", default=_LITERAL),
                field("principal", STRING),
                field("host", STRING),
                field("operation", INT8),
                field("permission_type", INT8),
            ],
        ),
    ],
)

CREATE_ACLS_RESPONSE = Message(
    "CreateAclsResponse",
    30,
    "0-3",
    flexible="2+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "results",
            "AclCreationResult",
            [field("error_code", INT16), field("error_message", STRING, nullable="0+")],
        ),
    ],
)

DELETE_ACLS_REQUEST = Message(
    "DeleteAclsRequest",
    31,
    "0-3",
    flexible="2+",
    fields=[
        struct_array(
            "filters",
            "DeleteAclsFilter",
            [
                field("resource_type_filter", INT8),
                field("resource_name_filter", STRING, nullable="0+"),
                field("pattern_type_filter", INT8, "1+", default=_LITERAL),
                field("principal_filter", STRING, nullable="0+"),
                field("host_filter", STRING, nullable="0+"),
                field("operation", INT8),
                field("permission_type", INT8),
            ],
        ),
    ],
)

DELETE_ACLS_RESPONSE = Message(
    "DeleteAclsResponse",
    31,
    "0-3",
    flexible="2+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "filter_results",
            "DeleteAclsFilterResult",
            [
                field("error_code", INT16),
                field("error_message", STRING, nullable="0+"),
                struct_array(
                    "matching_acls",
                    "DeleteAclsMatchingAcl",
                    [
                        field("error_code", INT16),
                        field("error_message", STRING, nullable="0+"),
                        field("resource_type", INT8),
                        field("resource_name", STRING),
                        field("pattern_type", INT8, "1+", default=_LITERAL),
                        field("principal", STRING),
                        field("host", STRING),
                        field("operation", INT8),
                        field("permission_type", INT8),
                    ],
                ),
            ],
        ),
    ],
)

DescribeAclsRequest = DESCRIBE_ACLS_REQUEST.cls
DescribeAclsResponse = DESCRIBE_ACLS_RESPONSE.cls
CreateAclsRequest = CREATE_ACLS_REQUEST.cls
CreateAclsResponse = CREATE_ACLS_RESPONSE.cls
DeleteAclsRequest = DELETE_ACLS_REQUEST.cls
DeleteAclsResponse = DELETE_ACLS_RESPONSE.cls
