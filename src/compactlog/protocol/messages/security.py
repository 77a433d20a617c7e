"""SASL and SCRAM credentials: SaslHandshake (17), SaslAuthenticate (36),
DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), and DescribeClientQuotas
(48), which Kafka's kafka-configs sends before describing users' SCRAM credentials.

SaslHandshake v0 is followed by raw SASL tokens (a size prefix and the bytes, no Kafka header);
v1 by SaslAuthenticate requests that carry the tokens. SaslAuthenticate is flexible from v2; v1
adds the session lifetime (KIP-368 re-authentication). The two SCRAM credential APIs exist in
one flexible version each. A SCRAM mechanism is an INT8: 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512.
"""

from __future__ import annotations

from compactlog.protocol.compiler import Message
from compactlog.protocol.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    ArrayOf,
    field,
    struct_array,
)

SASL_HANDSHAKE_REQUEST = Message(
    "SaslHandshakeRequest", 17, "0-1", flexible="none", fields=[field("mechanism", STRING)]
)

SASL_HANDSHAKE_RESPONSE = Message(
    "SaslHandshakeResponse",
    17,
    "0-1",
    flexible="none",
    fields=[field("error_code", INT16), field("mechanisms", ArrayOf(STRING))],
)

SASL_AUTHENTICATE_REQUEST = Message(
    "SaslAuthenticateRequest", 36, "0-2", flexible="2+", fields=[field("auth_bytes", BYTES)]
)

SASL_AUTHENTICATE_RESPONSE = Message(
    "SaslAuthenticateResponse",
    36,
    "0-2",
    flexible="2+",
    fields=[
        field("error_code", INT16),
        field("error_message", STRING, nullable="0+", default=None),
        field("auth_bytes", BYTES),
        field("session_lifetime_ms", INT64, "1+"),
    ],
)

DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = Message(
    "DescribeUserScramCredentialsRequest",
    50,
    "0",
    flexible="0+",
    fields=[struct_array("users", "UserName", [field("name", STRING)], nullable="0+")],
)

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = Message(
    "DescribeUserScramCredentialsResponse",
    50,
    "0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", INT32),
        field("error_code", INT16),
        field("error_message", STRING, nullable="0+", default=None),
        struct_array(
            "results",
            "DescribeUserScramCredentialsResult",
            [
                field("user", STRING),
                field("error_code", INT16),
                field("error_message", STRING, nullable="0+", default=None),
                struct_array(
                    "credential_infos",
                    "CredentialInfo",
                    [field("mechanism", INT8), field("iterations", INT32)],
                ),
            ],
        ),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS_REQUEST = Message(
    "AlterUserScramCredentialsRequest",
    51,
    "0",
    flexible="0+",
    fields=[
        struct_array(
            "deletions",
            "ScramCredentialDeletion",
            [field("name", STRING), field("mechanism", INT8)],
        ),
        struct_array(
            "upsertions",
            "ScramCredentialUpsertion",
            [
                field("name", STRING),
                field("mechanism", INT8),
                field("iterations", INT32),
                field("salt", BYTES),
                field("salted_password", BYTES),
            ],
        ),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = Message(
    "AlterUserScramCredentialsResponse",
    51,
    "0",
    flexible="0+",
    fields=[
        field("throttle_time_ms", INT32),
        struct_array(
            "results",
            "AlterUserScramCredentialsResult",
            [
                field("user", STRING),
                field("error_code", INT16),
                field("error_message", STRING, nullable="0+", default=None),
            ],
        ),
    ],
)

SaslHandshakeRequest = SASL_HANDSHAKE_REQUEST.cls
SaslHandshakeResponse = SASL_HANDSHAKE_RESPONSE.cls
SaslAuthenticateRequest = SASL_AUTHENTICATE_REQUEST.cls
SaslAuthenticateResponse = SASL_AUTHENTICATE_RESPONSE.cls
DescribeUserScramCredentialsRequest = DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST.cls
DescribeUserScramCredentialsResponse = DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE.cls
AlterUserScramCredentialsRequest = ALTER_USER_SCRAM_CREDENTIALS_REQUEST.cls
AlterUserScramCredentialsResponse = ALTER_USER_SCRAM_CREDENTIALS_RESPONSE.cls

# DescribeClientQuotas (48): kafka-configs --describe --entity-type users asks for quotas
# before SCRAM credentials. compactlog has no quotas, so the broker answers with no entries.
DESCRIBE_CLIENT_QUOTAS_REQUEST = Message(
    "DescribeClientQuotasRequest",
    48,
    "0-1",
    flexible="1+",
    fields=[
        struct_array(
            "components",
            "ComponentData",
            [
                field("entity_type", STRING),
                field("match_type", INT8),
                field("match", STRING, nullable="0+", default=None),
            ],
        ),
        field("strict", BOOL),
    ],
)

DESCRIBE_CLIENT_QUOTAS_RESPONSE = Message(
    "DescribeClientQuotasResponse",
    48,
    "0-1",
    flexible="1+",
    fields=[
        field("throttle_time_ms", INT32),
        field("error_code", INT16),
        field("error_message", STRING, nullable="0+", default=None),
        struct_array(
            "entries",
            "EntryData",
            [
                struct_array(
                    "entity",
                    "EntityData",
                    [
                        field("entity_type", STRING),
                        field("entity_name", STRING, nullable="0+", default=None),
                    ],
                ),
                struct_array(
                    "values", "ValueData", [field("key", STRING), field("value", FLOAT64)]
                ),
            ],
            nullable="0+",
        ),
    ],
)

DescribeClientQuotasRequest = DESCRIBE_CLIENT_QUOTAS_REQUEST.cls
DescribeClientQuotasResponse = DESCRIBE_CLIENT_QUOTAS_RESPONSE.cls
