"""The ACL matrix: one request per API and resource type, sent by a principal that may and by one
that may not, with the error code Kafka answers each. Run against compactlog
(tests/broker/test_acls_matrix.py) and against Kafka 4.4 (tests/kafka/test_acls_vs_kafka.py).

Every client is ``User:ANONYMOUS`` on a PLAINTEXT listener, so the two principals are told apart
by the *host* of the ACLs: the "allowed" connection comes from :data:`ALLOWED_HOST` (127.0.0.2,
a loopback address on Linux), which the ACLs of :func:`allowed_bindings` name; the "denied"
connection comes from 127.0.0.1, which no ACL names, so every check falls to the default (deny).

Requests are written and read with compactlog's own codec (checked against kafka-python's
schemas in tests/protocol); what is compared is what each broker answers.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compactlog.protocol import RequestHeader, Struct, decode_response, encode_request
from compactlog.protocol.messages import REQUESTS
from tests.broker.helpers.wire import good_batch

ALLOWED_HOST = "127.0.0.2"
DENIED_HOST = "127.0.0.1"
TOPIC = "acl-t"
#: A topic that exists and that no ACL names: the allowed connection may use the group but not
#: this topic, for the APIs that check both.
UNGRANTED_TOPIC = "acl-u"
GROUP = "acl-g"
TXN = "acl-tx"
#: A topic and a group that exist nowhere.
NO_TOPIC = "acl-none"
NO_GROUP = "acl-none-g"
#: Codes that mean "not authorized" (topic, group, cluster, transactional id).
AUTH_ERRORS = frozenset({29, 30, 31, 53})

# Kafka's enum codes (org.apache.kafka.common.resource / acl).
TOPIC_T, GROUP_T, CLUSTER_T, TXN_T = 2, 3, 4, 5
LITERAL = 3
ALL_OPS, ALLOW = 2, 3


class RawClient:
    """One connection from a chosen source address; requests by message class and keywords."""

    def __init__(self, bootstrap: str, source_host: str, timeout: float = 15.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection(
            (host, int(port)), timeout=timeout, source_address=(source_host, 0)
        )
        self.next_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, api_key: int, version: int, **body: Any) -> Struct:
        header = RequestHeader(api_key, version, self.next_id, "acl-matrix")
        self.next_id += 1
        self.sock.sendall(encode_request(header, REQUESTS[api_key].cls(**body)))
        size = struct.unpack(">i", self._exactly(4))[0]
        response = decode_response(self._exactly(size), api_key, version)
        assert response.header.correlation_id == header.correlation_id
        return response.body

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data


def binding(rtype: int, name: str, host: str = ALLOWED_HOST) -> dict[str, Any]:
    """ALLOW User:ANONYMOUS every operation on one literal resource from ``host``."""
    return {
        "resource_type": rtype, "resource_name": name, "resource_pattern_type": LITERAL,
        "principal": "User:ANONYMOUS", "host": host, "operation": ALL_OPS,
        "permission_type": ALLOW,
    }  # fmt: skip


def allowed_bindings() -> list[dict[str, Any]]:
    """What the allowed connection may do: everything on the matrix's resources."""
    return [
        binding(TOPIC_T, TOPIC),
        binding(TOPIC_T, NO_TOPIC),
        binding(GROUP_T, GROUP),
        binding(GROUP_T, NO_GROUP),
        binding(TXN_T, TXN),
        binding(CLUSTER_T, "kafka-cluster"),
    ]


@dataclass(frozen=True)
class Case:
    """One request and where its answer's code is."""

    name: str
    api_key: int
    version: int
    body: Callable[[], dict[str, Any]]
    code: Callable[[Struct], int]
    #: The code the denied connection gets (Kafka's).
    denied: int
    #: Codes the allowed connection may get besides non-authorization ones (None: any
    #: code that is not an authorization error).
    allowed: frozenset[int] | None = field(default=None)
    #: The denied request, when it is not ``body`` from the denied host: ``body`` naming a
    #: resource the allowed host has no ACL for, sent from the allowed host.
    denied_body: Callable[[], dict[str, Any]] | None = field(default=None)


def _first_partition(s: Struct, topics: str = "topics", partitions: str = "partitions") -> int:
    return int(getattr(getattr(s, topics)[0], partitions)[0].error_code)


def _topic(partitions: str = "partitions", **extra: Any) -> dict[str, Any]:
    return {"name": TOPIC, partitions: [{"partition_index": 0, **extra}]}


def _commit(topic: str) -> dict[str, Any]:
    partitions = [{"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]
    return {
        "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
        "retention_time_ms": -1, "topics": [{"name": topic, "partitions": partitions}],
    }  # fmt: skip


def _offset_fetch(topic: str) -> dict[str, Any]:
    return {"group_id": GROUP, "topics": [{"name": topic, "partition_indexes": [0]}]}


def _offset_delete(topic: str) -> dict[str, Any]:
    partitions = [{"partition_index": 0}]
    return {"group_id": GROUP, "topics": [{"name": topic, "partitions": partitions}]}


CASES: tuple[Case, ...] = (
    Case("Produce WRITE topic", 0, 8,
         lambda: {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                  "topic_data": [{"name": TOPIC,
                                  "partition_data": [{"index": 0, "records": good_batch()}]}]},
         lambda s: s.responses[0].partition_responses[0].error_code, 29),
    Case("Fetch READ topic", 1, 11,
         lambda: {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                  "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                  "topics": [{"topic": TOPIC, "partitions": [
                      {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                       "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                  "forgotten_topics_data": [], "rack_id": ""},
         lambda s: s.responses[0].partitions[0].error_code, 29),
    Case("ListOffsets DESCRIBE topic", 2, 7,
         lambda: {"replica_id": -1, "isolation_level": 0,
                  "topics": [{"name": TOPIC, "partitions": [
                      {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
         _first_partition, 29),
    Case("Metadata DESCRIBE topic", 3, 12,
         lambda: {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
                  "include_topic_authorized_operations": False},
         lambda s: s.topics[0].error_code, 29),
    Case("DescribeTopicPartitions DESCRIBE topic", 75, 0,
         lambda: {"topics": [{"name": TOPIC}], "response_partition_limit": 2000,
                  "cursor": None},
         lambda s: s.topics[0].error_code, 29),
    Case("CreateTopics CREATE", 19, 7,
         lambda: {"topics": [{"name": NO_TOPIC, "num_partitions": 1, "replication_factor": 1,
                              "assignments": [], "configs": []}],
                  "timeout_ms": 10000, "validate_only": True},
         lambda s: s.topics[0].error_code, 29, frozenset({0})),
    Case("DeleteTopics DELETE topic (missing)", 20, 6,
         lambda: {"topics": [{"name": NO_TOPIC}], "timeout_ms": 10000},
         lambda s: s.responses[0].error_code, 29, frozenset({3})),
    Case("DeleteRecords DELETE topic", 21, 2,
         lambda: {"topics": [{"name": TOPIC,
                              "partitions": [{"partition_index": 0, "offset": 0}]}],
                  "timeout_ms": 10000},
         _first_partition, 29, frozenset({0})),
    Case("CreatePartitions ALTER topic", 37, 3,
         lambda: {"topics": [{"name": TOPIC, "count": 2, "assignments": None}],
                  "timeout_ms": 10000, "validate_only": True},
         lambda s: s.results[0].error_code, 29, frozenset({0})),
    Case("DescribeConfigs DESCRIBE_CONFIGS topic", 32, 4,
         lambda: {"resources": [{"resource_type": 2, "resource_name": TOPIC,
                                 "configuration_keys": None}],
                  "include_synonyms": False, "include_documentation": False},
         lambda s: s.results[0].error_code, 29, frozenset({0})),
    Case("DescribeConfigs DESCRIBE_CONFIGS broker", 32, 4,
         lambda: {"resources": [{"resource_type": 4, "resource_name": "1",
                                 "configuration_keys": ["log.retention.ms"]}],
                  "include_synonyms": False, "include_documentation": False},
         lambda s: s.results[0].error_code, 31),
    Case("AlterConfigs ALTER_CONFIGS topic", 33, 2,
         lambda: {"resources": [{"resource_type": 2, "resource_name": TOPIC,
                                 "configs": [{"name": "retention.ms", "value": "600000"}]}],
                  "validate_only": True},
         lambda s: s.responses[0].error_code, 29, frozenset({0})),
    Case("IncrementalAlterConfigs ALTER_CONFIGS topic", 44, 1,
         lambda: {"resources": [{"resource_type": 2, "resource_name": TOPIC, "configs": [
                      {"name": "retention.ms", "config_operation": 0, "value": "600000"}]}],
                  "validate_only": True},
         lambda s: s.responses[0].error_code, 29, frozenset({0})),
    Case("IncrementalAlterConfigs ALTER_CONFIGS broker", 44, 1,
         lambda: {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
                      {"name": "log.cleaner.threads", "config_operation": 1, "value": None}]}],
                  "validate_only": True},
         lambda s: s.responses[0].error_code, 31),
    Case("FindCoordinator DESCRIBE group", 10, 1,
         lambda: {"key": GROUP, "key_type": 0},
         lambda s: s.error_code, 30, frozenset({0})),
    Case("FindCoordinator DESCRIBE transactional id", 10, 1,
         lambda: {"key": TXN, "key_type": 1},
         lambda s: s.error_code, 53),
    Case("JoinGroup READ group", 11, 5,
         lambda: {"group_id": GROUP, "session_timeout_ms": 10000,
                  "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
                  "protocol_type": "consumer",
                  "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00"}]},
         lambda s: s.error_code, 30, frozenset({79})),
    Case("SyncGroup READ group", 14, 3,
         lambda: {"group_id": GROUP, "generation_id": 1, "member_id": "m",
                  "group_instance_id": None, "assignments": []},
         lambda s: s.error_code, 30),
    Case("Heartbeat READ group", 12, 1,
         lambda: {"group_id": GROUP, "generation_id": 1, "member_id": "m"},
         lambda s: s.error_code, 30),
    Case("LeaveGroup READ group", 13, 1,
         lambda: {"group_id": GROUP, "member_id": "m"},
         lambda s: s.error_code, 30),
    Case("OffsetCommit READ group", 8, 3,
         lambda: {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
                  "retention_time_ms": -1,
                  "topics": [_topic(committed_offset=0, committed_metadata="")]},
         _first_partition, 30, frozenset({0})),
    Case("OffsetFetch DESCRIBE group", 9, 3,
         lambda: {"group_id": GROUP,
                  "topics": [{"name": TOPIC, "partition_indexes": [0]}]},
         lambda s: s.error_code, 30, frozenset({0})),
    Case("OffsetCommit READ topic", 8, 3,
         lambda: _commit(TOPIC), _first_partition, 29, frozenset({0}),
         denied_body=lambda: _commit(UNGRANTED_TOPIC)),
    Case("OffsetFetch DESCRIBE topic", 9, 3,
         lambda: _offset_fetch(TOPIC), _first_partition, 29, frozenset({0}),
         denied_body=lambda: _offset_fetch(UNGRANTED_TOPIC)),
    Case("DescribeGroups DESCRIBE group", 15, 5,
         lambda: {"groups": [GROUP], "include_authorized_operations": False},
         lambda s: s.groups[0].error_code, 30, frozenset({0})),
    Case("DeleteGroups DELETE group (missing)", 42, 2,
         lambda: {"groups_names": [NO_GROUP]},
         lambda s: s.results[0].error_code, 30, frozenset({69})),
    Case("OffsetDelete DELETE group", 47, 0,
         lambda: {"group_id": GROUP, "topics": [{"name": TOPIC,
                                                 "partitions": [{"partition_index": 0}]}]},
         lambda s: s.error_code, 30),
    Case("OffsetDelete READ topic", 47, 0,
         lambda: _offset_delete(TOPIC), _first_partition, 29,
         denied_body=lambda: _offset_delete(UNGRANTED_TOPIC)),
    Case("AlterConfigs ALTER_CONFIGS broker", 33, 2,
         lambda: {"resources": [{"resource_type": 4, "resource_name": "1", "configs": []}],
                  "validate_only": True},
         lambda s: s.responses[0].error_code, 31),
    Case("DescribeProducers READ topic", 61, 0,
         lambda: {"topics": [{"name": TOPIC, "partition_indexes": [0]}]},
         lambda s: s.topics[0].partitions[0].error_code, 29, frozenset({0})),
    Case("DescribeLogDirs DESCRIBE cluster", 35, 4,
         lambda: {"topics": None},
         lambda s: s.error_code, 31, frozenset({0})),
    Case("ElectLeaders ALTER cluster", 43, 2,
         lambda: {"election_type": 0, "topic_partitions": [{"topic": TOPIC, "partitions": [0]}],
                  "timeout_ms": 10000},
         lambda s: s.error_code, 31, frozenset({0})),
    Case("AlterPartitionReassignments ALTER cluster", 45, 0,
         lambda: {"timeout_ms": 10000, "topics": [{"name": TOPIC, "partitions": [
                      {"partition_index": 0, "replicas": None}]}]},
         lambda s: s.error_code, 31, frozenset({0})),
    Case("ListPartitionReassignments DESCRIBE cluster", 46, 0,
         lambda: {"timeout_ms": 10000, "topics": None},
         lambda s: s.error_code, 31, frozenset({0})),
    Case("InitProducerId IDEMPOTENT_WRITE", 22, 1,
         lambda: {"transactional_id": None, "transaction_timeout_ms": 60000},
         # Kafka answers COORDINATOR_LOAD_IN_PROGRESS for a while after a restart.
         lambda s: s.error_code, 31, frozenset({0, 14})),
    Case("InitProducerId WRITE transactional id", 22, 1,
         lambda: {"transactional_id": TXN, "transaction_timeout_ms": 60000},
         lambda s: s.error_code, 53),
    Case("DescribeAcls DESCRIBE cluster", 29, 3,
         lambda: {"resource_type_filter": 1, "resource_name_filter": None,
                  "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                  "operation": 1, "permission_type": 1},
         lambda s: s.error_code, 31, frozenset({0})),
    Case("CreateAcls ALTER cluster", 30, 3,
         lambda: {"creations": [{**binding(TOPIC_T, "acl-unused"),
                                 "principal": "User:nobody"}]},
         lambda s: s.results[0].error_code, 31, frozenset({0})),
    Case("DeleteAcls ALTER cluster", 31, 3,
         lambda: {"filters": [{"resource_type_filter": TOPIC_T,
                               "resource_name_filter": "acl-unused", "pattern_type_filter": 1,
                               "principal_filter": "User:nobody", "host_filter": None,
                               "operation": 1, "permission_type": 1}]},
         lambda s: s.filter_results[0].error_code, 31, frozenset({0})),
)  # fmt: skip


def run_allowed(bootstrap: str, case: Case) -> int:
    """The code the allowed connection gets."""
    with RawClient(bootstrap, ALLOWED_HOST) as client:
        return case.code(client.request(case.api_key, case.version, **case.body()))


def run_denied(bootstrap: str, case: Case) -> int:
    """The code the denied request gets."""
    host = DENIED_HOST if case.denied_body is None else ALLOWED_HOST
    body = case.body if case.denied_body is None else case.denied_body
    with RawClient(bootstrap, host) as client:
        return case.code(client.request(case.api_key, case.version, **body()))


def setup_resources(bootstrap: str) -> None:
    """From the allowed host: the topic, and a group with a committed offset."""
    with RawClient(bootstrap, ALLOWED_HOST) as c:
        created = c.request(
            19, 7,
            topics=[{"name": name, "num_partitions": 1, "replication_factor": 1,
                     "assignments": [], "configs": []} for name in (TOPIC, UNGRANTED_TOPIC)],
            timeout_ms=30000, validate_only=False,
        )  # fmt: skip
        assert all(t.error_code in (0, 36) for t in created.topics), created
        for _ in range(100):  # Kafka answers COORDINATOR_NOT_AVAILABLE while it creates
            found = c.request(10, 1, key=GROUP, key_type=0)  # __consumer_offsets
            if found.error_code == 0:
                break
            time.sleep(0.2)
        assert found.error_code == 0, found


def create_allowed_acls(bootstrap: str) -> None:
    with RawClient(bootstrap, ALLOWED_HOST) as c:
        result = c.request(30, 3, creations=allowed_bindings())
        assert all(r.error_code == 0 for r in result.results), result


def by_id_and_configs(bootstrap: str) -> tuple[Any, ...]:
    """What topic ids and configs disclose: Metadata and DeleteTopics by id from the denied host
    (ids are not secret, names are), and CreateTopics by a peer that may create the topic but
    not describe its configs."""
    with RawClient(bootstrap, ALLOWED_HOST) as c:
        topic_id = c.request(3, 12, topics=[{"name": TOPIC}]).topics[0].topic_id
        created = c.request(
            19, 7, topics=[{"name": "acl-v", "num_partitions": 1, "replication_factor": 1}],
            timeout_ms=10000, validate_only=True,
        ).topics[0]  # fmt: skip
    with RawClient(bootstrap, DENIED_HOST) as c:
        md = c.request(3, 12, topics=[{"name": None, "topic_id": topic_id}]).topics[0]
        deleted = c.request(20, 6, topics=[{"name": None, "topic_id": topic_id}],
                            timeout_ms=10000).responses[0]  # fmt: skip
    return (
        (md.error_code, md.name, md.topic_id == topic_id),
        (deleted.error_code, deleted.name, deleted.topic_id == topic_id),
        (created.error_code, created.topic_config_error_code, len(created.configs)),
    )


def overlapping_delete(bootstrap: str) -> list[tuple[int, list[str]]]:
    """DeleteAcls with two filters that match the same binding (and one with an unknown
    operation), from the allowed host: (error, names of the deleted bindings) per filter."""

    def flt(name: str | None, operation: int = 1) -> dict[str, Any]:
        return {
            "resource_type_filter": TOPIC_T, "resource_name_filter": name,
            "pattern_type_filter": 1, "principal_filter": "User:dup", "host_filter": None,
            "operation": operation, "permission_type": 1,
        }  # fmt: skip

    with RawClient(bootstrap, ALLOWED_HOST) as c:
        created = c.request(
            30, 3, creations=[{**binding(TOPIC_T, "acl-dup", "*"), "principal": "User:dup"}]
        )
        assert created.results[0].error_code == 0, created
        _wait_visible(c, "acl-dup")
        result = c.request(31, 3, filters=[flt("acl-dup"), flt(None), flt(None, operation=99)])
    return [
        (r.error_code, [a.resource_name for a in r.matching_acls]) for r in result.filter_results
    ]


def _wait_visible(c: RawClient, name: str, timeout: float = 30.0) -> None:
    """Until DescribeAcls lists an ACL on topic ``name``: Kafka's broker applies a created ACL
    a moment after its controller committed it (compactlog at once)."""
    deadline = time.monotonic() + timeout
    while True:
        found = c.request(29, 3, **any_filter(resource_name_filter=name))
        if found.resources or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def _attempt(bootstrap: str, api_key: int, **body: Any) -> str:
    try:
        with RawClient(bootstrap, ALLOWED_HOST) as c:
            return repr(c.request(api_key, 3, **body))
    except ConnectionError:
        return "connection closed"


def any_filter(**changes: Any) -> dict[str, Any]:
    return {
        "resource_type_filter": TOPIC_T, "resource_name_filter": "x", "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1,
        **changes,
    }  # fmt: skip


#: Creations Kafka refuses (or, for the principal ":x", accepts), as changes to one binding.
BAD_CREATIONS: tuple[dict[str, Any], ...] = (
    {"operation": 0}, {"resource_type": 0}, {"operation": 1}, {"resource_type": 1},
    {"resource_pattern_type": 1}, {"resource_pattern_type": 2}, {"permission_type": 1},
    {"operation": 99}, {"resource_type": 99}, {"resource_pattern_type": 9},
    {"permission_type": 9}, {"principal": "alice"}, {"principal": ":x"}, {"host": ""},
    {"resource_name": ""}, {"resource_type": CLUSTER_T, "resource_name": "x"},
)  # fmt: skip
#: Filters with codes Kafka does not know: 0 (UNKNOWN itself) and others.
BAD_FILTERS: tuple[dict[str, Any], ...] = (
    {"operation": 0}, {"resource_type_filter": 0}, {"pattern_type_filter": 0},
    {"permission_type": 0}, {"operation": 99}, {"pattern_type_filter": 9},
)  # fmt: skip


def invalid_acl_requests(bootstrap: str) -> list[str]:
    """What the broker answers to each of :data:`BAD_CREATIONS` (from the allowed host) and
    :data:`BAD_FILTERS` in DescribeAcls and DeleteAcls, then the deletion of what was created
    (the responses, or "connection closed")."""
    base = binding(TOPIC_T, "x", "*")
    answers = [_attempt(bootstrap, 30, creations=[{**base, **c}]) for c in BAD_CREATIONS]
    for changes in BAD_FILTERS:
        answers.append(_attempt(bootstrap, 29, **any_filter(**changes)))
        answers.append(_attempt(bootstrap, 31, filters=[any_filter(**changes)]))
    with RawClient(bootstrap, ALLOWED_HOST) as c:
        _wait_visible(c, "x")
    answers.append(_attempt(bootstrap, 31, filters=[any_filter()]))
    return answers
