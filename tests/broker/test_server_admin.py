"""CreateTopics, DeleteTopics, DeleteRecords, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs over a real socket."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from compactlog import errors as c
from compactlog.broker.server import BrokerThread
from compactlog.protocol.messages import (
    AlterConfigsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from compactlog.protocol.schema import ZERO_UUID
from compactlog.storage.config import TOPIC_CONFIGS
from tests.broker.test_server_basics import (
    ALTER_CONFIGS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    PRODUCE,
    Client,
    batch,
    connected,
    create_topic,
    metadata,
    produce_request,
    running_broker,
    start_broker,
)

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerThread]:
    yield from running_broker(tmp_path)


@pytest.fixture
def client(server: BrokerThread) -> Iterator[Client]:
    yield from connected(server)


def overrides(server: BrokerThread, topic: str) -> dict[str, str]:
    store = server.broker.store
    assert store is not None
    return server.call(lambda: store.topic_info(topic).overrides)


def topics(server: BrokerThread) -> list[str]:
    store = server.broker.store
    assert store is not None
    return [t for t in server.call(store.topics) if not t.startswith("__")]


# --- CreateTopics --------------------------------------------------------------------------------
def create(
    client: Client,
    *entries: Mapping[str, Any],
    validate_only: bool = False,
    version: int = 3,
) -> dict[str, tuple[int, str | None]]:
    full = [
        {
            "num_partitions": 1,
            "replication_factor": 1,
            "assignments": [],
            **entry,
            "configs": [{"name": k, "value": v} for k, v in entry.get("configs", {}).items()],
        }
        for entry in entries
    ]
    request = CreateTopicsRequest(topics=full, timeout_ms=5000, validate_only=validate_only)
    response = client.call(CREATE_TOPICS, version, request)
    return {t.name: (t.error_code, t.error_message) for t in response.topics}


def test_create_topics_with_configs(server: BrokerThread, client: Client) -> None:
    result = create(
        client,
        {"name": "a", "num_partitions": 3, "configs": {"cleanup.policy": "compact"}},
        {"name": "b"},
        version=2,
    )
    assert result == {"a": (c.NONE, None), "b": (c.NONE, None)}
    store = server.broker.store
    assert store is not None
    assert server.call(lambda: store.partitions("a")) == 3
    assert overrides(server, "a") == {"cleanup.policy": "compact"}
    error, message = create(client, {"name": "a"})["a"]
    assert error == c.TOPIC_ALREADY_EXISTS and message and "already exists" in message


def _assigned(*replicas: list[int]) -> dict[str, Any]:
    return {
        "num_partitions": -1,
        "replication_factor": -1,
        "assignments": [{"partition_index": p, "broker_ids": b} for p, b in enumerate(replicas)],
    }


# The messages are what a Kafka 4.4 broker answered for the same entries (node id 0 for 1).
@pytest.mark.parametrize(
    ("entry", "expected", "message"),
    [
        ({"name": "bad/name"}, c.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: 'bad/name' "
         "contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
        ({"name": ""}, c.INVALID_TOPIC_EXCEPTION,
         "Topic name is invalid: the empty string is not allowed"),
        ({"name": ".."}, c.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: '..' is not allowed"),
        ({"name": "x", "num_partitions": 0}, c.INVALID_PARTITIONS,
         "Number of partitions was set to an invalid non-positive value."),
        ({"name": "x", "replication_factor": 3}, c.INVALID_REPLICATION_FACTOR,
         "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot "
         "be reached because only 1 broker(s) are registered or some brokers have all their log "
         "directories cordoned."),
        ({"name": "x", "replication_factor": 0}, c.INVALID_REPLICATION_FACTOR,
         "Replication factor must be larger than 0, or -1 to use the default value."),
        ({"name": "x", "configs": {"no.such.config": "1"}}, c.INVALID_CONFIG,
         "Unknown topic config name: no.such.config"),
        ({"name": "x", "configs": {"cleanup.policy": "sometimes"}}, c.INVALID_CONFIG,
         "Invalid value sometimes for configuration cleanup.policy: String must be one of: "
         "compact, delete"),
        ({"name": "x", "configs": {"segment.bytes": None}}, c.INVALID_CONFIG,
         "Null value not supported for topic configs: segment.bytes"),
        # configs are checked before the partitions, as Kafka's controller checks them
        ({"name": "x", "num_partitions": 0, "configs": {"retention.ms": "abc"}}, c.INVALID_CONFIG,
         "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        ({"name": "x", "assignments": [{"partition_index": 0, "broker_ids": [0]}]},
         c.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was "
         "not set to -1."),
        ({"name": "x", **_assigned([1])}, c.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 1, but no such broker is registered."),
        ({"name": "x", **_assigned([0, 0])}, c.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes the broker 0 more than once."),
        ({"name": "x", **_assigned([])}, c.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes an empty replica list."),
        ({"name": "x", **_assigned([0]), "assignments": [{"partition_index": 1,
          "broker_ids": [0]}]}, c.INVALID_REPLICA_ASSIGNMENT,
         "partitions should be a consecutive 0-based integer sequence"),
    ],
)  # fmt: skip
def test_create_topics_refusals(
    server: BrokerThread, client: Client, entry: dict[str, Any], expected: int, message: str
) -> None:
    for version in (3, 7):
        ((error, said),) = create(client, entry, version=version).values()
        assert (error, said) == (expected, message)
    assert topics(server) == []


def test_create_topics_defaults_and_what_v5_to_v7_answer(
    server: BrokerThread, client: Client
) -> None:
    """-1 partitions and replication factor mean the defaults (KIP-464; Kafka accepts them in
    every version); v5+ answers with the topic's partitions, replication factor and configs,
    v7 with its topic id, the same id Metadata v10+ gives."""
    entry = {"num_partitions": -1, "replication_factor": -1, "assignments": [],
             "configs": [{"name": "max.message.bytes", "value": "2000"},
                         {"name": "max.message.bytes", "value": "3000"}]}  # fmt: skip
    request = CreateTopicsRequest(topics=[{"name": "d", **entry}], timeout_ms=5000)
    (result,) = client.call(CREATE_TOPICS, 7, request).topics
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 1, 1)
    configs = {c.name: (c.value, c.config_source) for c in result.configs}
    assert configs["max.message.bytes"] == ("3000", 1)  # a key given twice: the last counts
    assert configs["min.insync.replicas"] == ("1", 3)  # Kafka 4.4's cluster-wide default
    assert configs["cleanup.policy"] == ("delete", 5)
    assert set(configs) == set(TOPIC_CONFIGS)
    described = metadata(client, ["d"], version=12).topics[0]
    assert result.topic_id == described.topic_id != ZERO_UUID
    (again,) = client.call(CREATE_TOPICS, 7, request).topics
    assert (again.error_code, again.topic_id, again.num_partitions, again.configs) == (
        c.TOPIC_ALREADY_EXISTS, ZERO_UUID, -1, []
    )  # fmt: skip
    (old,) = client.call(CREATE_TOPICS, 2, CreateTopicsRequest(
        topics=[{"name": "e", **entry}], timeout_ms=5000)).topics  # fmt: skip
    assert old.error_code == c.NONE


def test_create_topics_with_an_assignment_and_validate_only(
    server: BrokerThread, client: Client
) -> None:
    assignment = [{"partition_index": p, "broker_ids": [0]} for p in (1, 0)]
    entry = {"name": "m", "num_partitions": -1, "replication_factor": -1, "assignments": assignment}
    assert create(client, entry, validate_only=True) == {"m": (c.NONE, None)}
    assert topics(server) == []
    assert create(client, {"name": "v", "configs": {"x": "1"}}, validate_only=True)["v"][0] == (
        c.INVALID_CONFIG
    )
    assert create(client, entry) == {"m": (c.NONE, None)}
    store = server.broker.store
    assert store is not None and server.call(lambda: store.partitions("m")) == 2


def test_a_topic_named_twice_in_one_request_is_invalid(
    server: BrokerThread, client: Client
) -> None:
    result = create(client, {"name": "d"}, {"name": "d"}, {"name": "e"})
    assert result["d"] == (c.INVALID_REQUEST, "Duplicate topic name.")
    assert result["e"] == (c.NONE, None)
    assert topics(server) == ["e"]


# --- DeleteTopics --------------------------------------------------------------------------------
def test_delete_topics(server: BrokerThread, client: Client) -> None:
    create_topic(server, "gone", 2)
    create_topic(server, "stays")
    request = DeleteTopicsRequest(topic_names=["gone", "never"], timeout_ms=5000)
    response = client.call(DELETE_TOPICS, 3, request)
    assert {r.name: r.error_code for r in response.responses} == {
        "gone": c.NONE,
        "never": c.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert topics(server) == ["stays"]
    assert not (Path(server.broker.data_dir) / "gone-0").exists()


def test_delete_topics_by_id_and_with_messages(server: BrokerThread, client: Client) -> None:
    """v5+ says why (Kafka's message of the code), v6 names topics by name or by id."""
    create_topic(server, "by-id")
    create_topic(server, "by-name")
    topic_id = metadata(client, ["by-id"], version=10).topics[0].topic_id
    unknown = uuid.UUID(int=12345)
    request = DeleteTopicsRequest(
        topics=[{"name": None, "topic_id": topic_id}, {"name": None, "topic_id": unknown},
                {"name": "by-name"}, {"name": "never"}],
        timeout_ms=5000,
    )  # fmt: skip
    response = client.call(DELETE_TOPICS, 6, request)
    assert [(r.name, r.topic_id, r.error_code, r.error_message) for r in response.responses] == [
        ("by-id", topic_id, c.NONE, None),
        (None, unknown, c.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
        ("by-name", response.responses[2].topic_id, c.NONE, None),
        ("never", ZERO_UUID, c.UNKNOWN_TOPIC_OR_PARTITION,
         "This server does not host this topic-partition."),
    ]  # fmt: skip
    assert response.responses[2].topic_id != ZERO_UUID
    assert topics(server) == []


# --- DeleteRecords -------------------------------------------------------------------------------
def test_delete_records(server: BrokerThread, client: Client) -> None:
    create_topic(server, "d", 2)
    create_topic(server, "k", config={"cleanup.policy": "compact"})
    for topic, partition in (("d", 0), ("d", 1), ("k", 0)):
        data = batch([(b"k%d" % i, b"v") for i in range(5)])
        client.call(PRODUCE, 7, produce_request({(topic, partition): data}))

    def delete(topic: str, partition: int, offset: int) -> tuple[int, int]:
        request = DeleteRecordsRequest(
            topics=[
                {"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}
            ],
            timeout_ms=5000,
        )
        p = client.call(DELETE_RECORDS, 1, request).topics[0].partitions[0]
        return p.error_code, p.low_watermark

    assert delete("d", 0, 3) == (c.NONE, 3)
    assert delete("d", 1, -1) == (c.NONE, 5)  # -1: the high watermark
    assert delete("d", 0, 6) == (c.OFFSET_OUT_OF_RANGE, -1)
    assert delete("k", 0, 1) == (c.POLICY_VIOLATION, -1)  # pure compact
    assert delete("zz", 0, 1) == (c.UNKNOWN_TOPIC_OR_PARTITION, -1)
    store = server.broker.store
    assert store is not None and server.call(lambda: store.log_start_offset("d", 0)) == 3


# --- DescribeConfigs -----------------------------------------------------------------------------
def describe(
    client: Client,
    resource_type: int,
    name: str,
    keys: list[str] | None = None,
    synonyms: bool = False,
    version: int = 2,
) -> Any:
    request = DescribeConfigsRequest(
        resources=[
            {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}
        ],
        include_synonyms=synonyms,
    )
    (result,) = client.call(DESCRIBE_CONFIGS, version, request).results
    return result


def test_describe_topic_configs_lists_every_config_with_its_source(tmp_path: Path) -> None:
    server = start_broker(tmp_path / "data", {"log.retention.hours": 1})
    try:
        create_topic(server, "t", config={"cleanup.policy": "compact"})
        with Client(server.port) as client:
            result = describe(client, TOPIC, "t", synonyms=True)
            assert result.error_code == c.NONE
            configs = {e.name: e for e in result.configs}
            assert set(configs) == set(TOPIC_CONFIGS)  # defaults included
            assert not any(e.read_only for e in result.configs)
            policy = configs["cleanup.policy"]
            assert (policy.value, policy.config_source) == ("compact", 1)  # dynamic topic config
            assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
                ("cleanup.policy", "compact", 1),
                ("log.cleanup.policy", "delete", 5),
            ]
            # Kafka lists synonyms from log.retention.ms on, which is not set: none, and the
            # source is "default" although log.retention.hours set the value (Kafka 4.4 too).
            retention = configs["retention.ms"]
            assert (retention.value, retention.config_source, retention.synonyms) == (
                "3600000", 5, []
            )  # fmt: skip
            assert configs["segment.bytes"].config_source == 5  # default
            plain = describe(client, TOPIC, "t", keys=["segment.bytes", "nope"], version=1)
            assert [(e.name, e.synonyms) for e in plain.configs] == [("segment.bytes", [])]
            missing = describe(client, TOPIC, "missing")
            # Kafka 4.4 sends an empty message, with the error and without one
            assert (missing.error_code, missing.error_message) == (
                c.UNKNOWN_TOPIC_OR_PARTITION, ""
            )  # fmt: skip
            assert result.error_message == ""
            # v3+: types and, when asked, documentation; the cluster-wide min.insync.replicas
            v4 = client.call(DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(
                resources=[{"resource_type": TOPIC, "resource_name": "t",
                            "configuration_keys": ["min.insync.replicas", "segment.bytes"]}],
                include_synonyms=True, include_documentation=True)).results[0]  # fmt: skip
            isr, segment = v4.configs
            assert (isr.name, isr.value, isr.config_source, isr.config_type) == (
                "min.insync.replicas", "1", 3, 3
            )  # fmt: skip
            assert [(s.name, s.value, s.source) for s in isr.synonyms] == [
                ("min.insync.replicas", "1", 3),
                ("min.insync.replicas", "1", 5),
            ]
            assert segment.config_type == 3 and segment.documentation
    finally:
        server.stop()


def test_describe_broker_configs(tmp_path: Path) -> None:
    server = start_broker(tmp_path / "data", {"message.max.bytes": 2_000_000})
    try:
        with Client(server.port) as client:
            result = describe(client, BROKER, "0", synonyms=True)
            configs = {e.name: e for e in result.configs}
            assert (
                configs["message.max.bytes"].value,
                configs["message.max.bytes"].config_source,
            ) == (
                "2000000",
                4,
            )
            assert configs["socket.request.max.bytes"].value == "104857600"
            assert configs["socket.request.max.bytes"].config_source == 5
            assert configs["offsets.topic.num.partitions"].value == "1"
            assert configs["auto.create.topics.enable"].value == "true"
            assert [e.name for e in result.configs if not e.read_only] == ["min.insync.replicas"]
            assert configs["min.insync.replicas"].config_source == 3
            # the cluster-wide dynamic defaults: min.insync.replicas, as Kafka 4.4 starts with
            cluster = describe(client, BROKER, "", synonyms=True).configs
            assert [(e.name, e.value, e.config_source, e.read_only) for e in cluster] == [
                ("min.insync.replicas", "1", 3, False)
            ]
            wrong = describe(client, BROKER, "7")
            assert (wrong.error_code, wrong.error_message) == (
                c.INVALID_REQUEST,
                "Unexpected broker id, expected 0 or empty string, but received 7",
            )
            assert describe(client, BROKER, "x").error_code == c.INVALID_REQUEST
            assert describe(client, 8, "x").error_code == c.INVALID_REQUEST
    finally:
        server.stop()


# --- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------------
def alter(
    client: Client, topic: str, configs: dict[str, str | None], validate_only: bool = False
) -> tuple[int, str | None]:
    request = AlterConfigsRequest(
        resources=[
            {
                "resource_type": TOPIC,
                "resource_name": topic,
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        validate_only=validate_only,
    )
    (r,) = client.call(ALTER_CONFIGS, 1, request).responses
    return r.error_code, r.error_message


def incremental(
    client: Client,
    topic: str,
    ops: list[tuple[str, int, str | None]],
    validate_only: bool = False,
    resource_type: int = TOPIC,
) -> tuple[int, str | None]:
    request = IncrementalAlterConfigsRequest(
        resources=[
            {
                "resource_type": resource_type,
                "resource_name": topic,
                "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops],
            }
        ],
        validate_only=validate_only,
    )
    (r,) = client.call(INCREMENTAL_ALTER_CONFIGS, 0, request).responses
    return r.error_code, r.error_message


def test_alter_configs_replaces_the_set_of_overrides(server: BrokerThread, client: Client) -> None:
    create_topic(server, "a", config={"cleanup.policy": "compact", "segment.ms": 1000})
    assert alter(client, "a", {"retention.ms": "5000"}, validate_only=True) == (c.NONE, None)
    assert overrides(server, "a") == {"cleanup.policy": "compact", "segment.ms": "1000"}
    assert alter(client, "a", {"retention.ms": "5000", "segment.ms": "2000"}) == (c.NONE, None)
    assert overrides(server, "a") == {"retention.ms": "5000", "segment.ms": "2000"}
    error, message = alter(client, "a", {"segment.bytes": "1"})
    assert (error, message) == (
        c.INVALID_CONFIG,
        "Invalid value 1 for configuration segment.bytes: Value must be at least 14",
    )
    assert overrides(server, "a") == {"retention.ms": "5000", "segment.ms": "2000"}
    assert alter(client, "zz", {}) == (
        c.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'zz' does not exist."
    )  # fmt: skip
    assert alter(client, "a", {"retention.ms": None}) == (
        c.INVALID_REQUEST, "Null value not supported for : retention.ms"
    )  # fmt: skip


def test_incremental_alter_configs(server: BrokerThread, client: Client) -> None:
    create_topic(server, "i", config={"segment.ms": 1000})
    assert incremental(client, "i", [("cleanup.policy", APPEND, "compact")]) == (c.NONE, None)
    assert overrides(server, "i") == {"cleanup.policy": "delete,compact", "segment.ms": "1000"}
    ops = [("cleanup.policy", SUBTRACT, "delete"), ("segment.ms", DELETE, None),
           ("retention.bytes", SET, "1000000")]  # fmt: skip
    assert incremental(client, "i", ops) == (c.NONE, None)
    assert overrides(server, "i") == {"cleanup.policy": "compact", "retention.bytes": "1000000"}
    # validate_only changes nothing; errors leave everything as it was.
    assert incremental(client, "i", [("retention.bytes", DELETE, None)], True) == (c.NONE, None)
    # Kafka 4.4's answers to the same requests:
    assert incremental(client, "i", [("segment.ms", APPEND, "1")]) == (
        c.INVALID_CONFIG, "Can't APPEND to key segment.ms because its type is not LIST."
    )  # fmt: skip
    assert incremental(client, "i", [("nope", SET, "1")]) == (
        c.INVALID_CONFIG, "Unknown topic config name: nope"
    )  # fmt: skip
    assert incremental(client, "i", [("nope", DELETE, None)]) == (c.NONE, None)  # ignored
    assert incremental(client, "i", [("retention.ms", SET, "-5")]) == (
        c.INVALID_CONFIG,
        "Invalid value -5 for configuration retention.ms: Value must be at least -1",
    )
    assert incremental(client, "i", [("retention.ms", SET, None)]) == (
        c.INVALID_REQUEST, "Null value not supported for : retention.ms"
    )  # fmt: skip
    assert incremental(client, "missing", [("retention.ms", SET, "1")]) == (
        c.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."
    )  # fmt: skip
    assert incremental(client, "i", [("segment.ms", 9, "1")])[0] == c.INVALID_REQUEST
    twice = [("segment.ms", SET, "1"), ("segment.ms", DELETE, None)]
    assert incremental(client, "i", twice) == (
        c.INVALID_REQUEST, "Error due to duplicate config keys"
    )  # fmt: skip
    assert incremental(client, "0", [("x", SET, "1")], resource_type=BROKER)[0] == (
        c.INVALID_REQUEST
    )
    assert overrides(server, "i") == {"cleanup.policy": "compact", "retention.bytes": "1000000"}
