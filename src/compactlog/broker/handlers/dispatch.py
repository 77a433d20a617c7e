"""The table from API key to handler, and the answer to an ApiVersions version we do not speak."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from compactlog import errors as codes
from compactlog.broker.context import BrokerContext, Peer
from compactlog.broker.handlers.acls import (
    handle_create_acls,
    handle_delete_acls,
    handle_describe_acls,
)
from compactlog.broker.handlers.cluster import (
    handle_describe_cluster,
    handle_describe_log_dirs,
    handle_describe_topic_partitions,
    handle_list_partition_reassignments,
)
from compactlog.broker.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from compactlog.broker.handlers.fetch import handle_fetch, handle_list_offsets
from compactlog.broker.handlers.groups import (
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_sync_group,
)
from compactlog.broker.handlers.metadata import (
    GROUP_API_KEYS,
    api_versions_body,
    handle_api_versions,
    handle_metadata,
)
from compactlog.broker.handlers.partitions import (
    handle_alter_partition_reassignments,
    handle_create_partitions,
    handle_describe_producers,
    handle_elect_leaders,
)
from compactlog.broker.handlers.produce import handle_init_producer_id, handle_produce
from compactlog.broker.handlers.security import (
    handle_alter_user_scram_credentials,
    handle_describe_client_quotas,
    handle_describe_user_scram_credentials,
    handle_sasl_authenticate,
    handle_sasl_handshake,
)
from compactlog.broker.handlers.topics import (
    handle_create_topics,
    handle_delete_records,
    handle_delete_topics,
)
from compactlog.protocol import ApiKey, Request, RequestHeader, Struct, encode_response

__all__ = ["HANDLERS", "Handler", "api_versions_error_frame", "handler_for"]

Handler = Callable[[BrokerContext, Request, Peer], Awaitable[Struct | None]]

HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
}


def handler_for(ctx: BrokerContext, api_key: int) -> Handler | None:
    """The handler of ``api_key``, or None when this broker does not serve it (the group APIs
    without a group coordinator)."""
    if not ctx.groups_enabled and api_key in GROUP_API_KEYS:
        return None
    return HANDLERS.get(api_key)


def api_versions_error_frame(ctx: BrokerContext, header: RequestHeader) -> bytearray:
    """The whole frame answering an ApiVersions request above v2: response header v0 and a v0
    body with UNSUPPORTED_VERSION and our versions, so the client retries at one we speak."""
    body = api_versions_body(ctx.groups_enabled, codes.UNSUPPORTED_VERSION)
    return encode_response(header, body, version=0)
