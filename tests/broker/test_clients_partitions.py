"""CreatePartitions through confluent-kafka's and kafka-python's admin clients.

A topic grows (never shrinks), its new partitions are on disk, in the catalog and in Metadata,
``validate_only`` creates nothing, explicit assignments are accepted only as one node accepts
them, and keyed records produced after the growth go where Kafka's partitioner sends them for
the new count.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.broker.helpers.clients import CLIENT_TIMEOUT_S, needs_confluent, needs_kafka_python
from tests.broker.helpers.store import create_topic, on_broker, stored

pytestmark = [
    pytest.mark.broker,
    pytest.mark.timeout(60),
    pytest.mark.usefixtures("collect_client_garbage"),
]


def partitions(broker: Any, topic: str) -> int:
    return on_broker(broker, lambda store: store.partitions(topic))


def partition_dirs(broker: Any, topic: str) -> list[str]:
    path = broker.broker.store.path
    return sorted(d for d in os.listdir(path) if d.rsplit("-", 1)[0] == topic)


def _error(future: Any) -> tuple[str, str]:
    """The (error name, message) a confluent-kafka future failed with."""
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as info:
        future.result(timeout=CLIENT_TIMEOUT_S)
    error = info.value.args[0]
    return error.name(), error.str()


@needs_confluent
def test_confluent_create_partitions(broker: Any) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions

    from compactlog.storage.partitioner import partition_for_key

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def grow(*new: NewPartitions, validate_only: bool = False) -> dict[str, Any]:
        futures: dict[str, Any] = admin.create_partitions(
            list(new), validate_only=validate_only, request_timeout=10
        )
        return futures

    create_topic(broker, "cp", 1)
    (future,) = grow(NewPartitions("cp", 3)).values()
    assert future.result(timeout=CLIENT_TIMEOUT_S) is None
    assert partitions(broker, "cp") == 3
    assert partition_dirs(broker, "cp") == ["cp-0", "cp-1", "cp-2"]
    metadata = admin.list_topics(topic="cp", timeout=10)
    assert sorted(metadata.topics["cp"].partitions) == [0, 1, 2]

    # validate_only checks and creates nothing
    (future,) = grow(NewPartitions("cp", 5), validate_only=True).values()
    assert future.result(timeout=CLIENT_TIMEOUT_S) is None
    assert partitions(broker, "cp") == 3
    (future,) = grow(NewPartitions("cp", 2), validate_only=True).values()
    assert _error(future)[0] == "INVALID_PARTITIONS"

    # never shrinks, never stays: Kafka's messages
    (future,) = grow(NewPartitions("cp", 2)).values()
    assert _error(future) == (
        "INVALID_PARTITIONS",
        "The topic cp currently has 3 partition(s); 2 would not be an increase.",
    )
    (future,) = grow(NewPartitions("cp", 3)).values()
    assert _error(future) == ("INVALID_PARTITIONS", "Topic already has 3 partition(s).")
    (future,) = grow(NewPartitions("nope", 3)).values()
    assert _error(future)[0] == "UNKNOWN_TOPIC_OR_PART"  # librdkafka's name

    # explicit assignments: only this node, once, one per new partition
    node = broker.broker.ctx.node_id
    (future,) = grow(NewPartitions("cp", 4, [[node + 1]])).values()
    assert _error(future) == (
        "INVALID_REPLICA_ASSIGNMENT",
        f"The manual partition assignment includes broker {node + 1}, but no such broker is "
        "registered.",
    )
    (future,) = grow(NewPartitions("cp", 5, [[node]])).values()
    assert _error(future) == (
        "INVALID_REPLICA_ASSIGNMENT",
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
    )
    (future,) = grow(NewPartitions("cp", 4, [[node]])).values()
    assert future.result(timeout=CLIENT_TIMEOUT_S) is None
    assert partitions(broker, "cp") == 4
    assert partition_dirs(broker, "cp") == ["cp-0", "cp-1", "cp-2", "cp-3"]

    # keyed records go where Kafka's (murmur2) partitioner sends them for 4 partitions
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random", "linger.ms": 0}
    )
    keys = [b"key-%d" % i for i in range(40)]
    for key in keys:
        producer.produce("cp", key=key, value=b"v")
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    seen = {r.key: r.partition for r in stored(broker, "cp")}
    assert seen == {key: partition_for_key(key, 4) for key in keys}
    assert len(set(seen.values())) == 4


@needs_confluent
def test_confluent_create_partitions_survives_a_restart(brokers: Any) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    broker = brokers.start()
    create_topic(broker, "kept", 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.create_partitions([NewPartitions("kept", 5)], request_timeout=10).values()
    assert future.result(timeout=CLIENT_TIMEOUT_S) is None
    broker = brokers.restart(broker)
    assert partitions(broker, "kept") == 5


def test_create_partitions_duplicate_and_offsets_topic(broker: Any) -> None:
    """Over the wire with our codec: cases the admin clients do not let through."""
    from compactlog.broker.coordinator.offsets_topic import OFFSETS_TOPIC
    from compactlog.protocol.messages import CreatePartitionsRequest
    from tests.broker.test_server_basics import Client

    create_topic(broker, "dup", 1)
    create_topic(broker, "huge", 1)
    on_broker(broker, lambda store: broker.broker.ctx.coordinator())  # creates OFFSETS_TOPIC
    with Client(broker.port) as client:
        request = CreatePartitionsRequest(
            topics=[
                {"name": "dup", "count": 2, "assignments": None},
                {"name": "dup", "count": 3, "assignments": None},
                {"name": OFFSETS_TOPIC, "count": 100, "assignments": None},
                {"name": "huge", "count": 2**31 - 1, "assignments": None},
            ],
            timeout_ms=1000,
            validate_only=False,
        )
        response = client.call(37, 3, request)
    results = {r.name: (r.error_code, r.error_message) for r in response.results}
    assert results["dup"] == (42, "Duplicate topic name.")  # INVALID_REQUEST
    assert results[OFFSETS_TOPIC][0] == 44  # POLICY_VIOLATION
    assert results["huge"] == (44, "Unable to perform excessively large batch operation.")
    assert partitions(broker, "huge") == 1
    assert partitions(broker, "dup") == 1


@needs_kafka_python
def test_kafka_python_create_partitions(broker: Any) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions
    from kafka.errors import InvalidPartitionsError

    create_topic(broker, "kp", 1)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_partitions({"kp": NewPartitions(3)})
        assert partitions(broker, "kp") == 3
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"kp": NewPartitions(2)})
        assert partitions(broker, "kp") == 3
    finally:
        admin.close()


# --- OffsetDelete ------------------------------------------------------------------------------
def _offsets_tombstones(broker: Any) -> int:
    from compactlog.broker.coordinator.offsets_topic import OFFSETS_TOPIC

    def count(store: Any) -> int:
        return sum(
            1
            for p in range(store.partitions(OFFSETS_TOPIC))
            for r in store.read(OFFSETS_TOPIC, p, store.log_start_offset(OFFSETS_TOPIC, p))
            if r.value is None
        )

    return on_broker(broker, count)


@needs_kafka_python
@needs_confluent
def test_kafka_python_delete_group_offsets(broker: Any) -> None:
    """kafka-python's ``delete_group_offsets`` (confluent-kafka's Python AdminClient has no
    OffsetDelete call); the offsets are committed and the live member run by confluent-kafka."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError
    from kafka.errors import UnknownTopicOrPartitionError as UnknownTopic

    from tests.broker.helpers.clients import wait_until

    create_topic(broker, "od", 2)
    create_topic(broker, "live", 1)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)

    def committed(group: str) -> dict[tuple[str, int], int]:
        got = admin.list_group_offsets(group)[group]
        return {(tp.topic, tp.partition): om.offset for tp, om in got.items()}

    try:
        # a group without members (offsets committed by a standalone consumer)
        standalone = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "simple"})
        try:
            standalone.commit(
                offsets=[CkTopicPartition("od", 0, 5), CkTopicPartition("od", 1, 7)],
                asynchronous=False,
            )
        finally:
            standalone.close()
        assert committed("simple") == {("od", 0): 5, ("od", 1): 7}
        before = _offsets_tombstones(broker)
        assert admin.delete_group_offsets("simple", [TopicPartition("od", 0)]) == {
            TopicPartition("od", 0): NoError
        }
        assert committed("simple") == {("od", 1): 7}
        assert _offsets_tombstones(broker) == before + 1  # written to __consumer_offsets
        # a partition without an offset: no error, nothing written
        admin.delete_group_offsets("simple", [TopicPartition("od", 0)])
        assert _offsets_tombstones(broker) == before + 1

        # unknown partitions and topics: UNKNOWN_TOPIC_OR_PARTITION per partition
        got = admin.delete_group_offsets(
            "simple", [TopicPartition("od", 9), TopicPartition("nope", 0)]
        )
        assert got == {
            TopicPartition("od", 9): UnknownTopic,
            TopicPartition("nope", 0): UnknownTopic,
        }

        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets("no-such-group", [TopicPartition("od", 1)])

        # a live consumer subscribed to "live": its partitions are refused, others deleted
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "busy",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.subscribe(["live"])
            wait_until(lambda: consumer.poll(0.1) or consumer.assignment(), "an assignment")
            consumer.commit(
                offsets=[CkTopicPartition("live", 0, 1), CkTopicPartition("od", 1, 3)],
                asynchronous=False,
            )
            got = admin.delete_group_offsets(
                "busy", [TopicPartition("live", 0), TopicPartition("od", 1)]
            )
            assert got == {
                TopicPartition("live", 0): GroupSubscribedToTopicError,
                TopicPartition("od", 1): NoError,
            }
            assert committed("busy") == {("live", 0): 1}
        finally:
            consumer.close()
    finally:
        admin.close()


# --- DescribeProducers -------------------------------------------------------------------------
@needs_kafka_python
@needs_confluent
def test_kafka_python_describe_producers(broker: Any) -> None:
    """kafka-python's ``describe_producers`` (confluent-kafka's Python AdminClient has none):
    the idempotent producer that wrote to the partition, as the log's producer state has it."""
    from confluent_kafka import Producer
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import UnknownTopicOrPartitionError

    create_topic(broker, "dp", 2)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )
    for i in range(3):
        producer.produce("dp", key=b"k%d" % i, value=b"v", partition=0)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    state = on_broker(broker, lambda store: store.producer_state("dp", 0))
    (expected,) = state
    assert expected.last_sequence == 2

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        got = admin.describe_producers([TopicPartition("dp", 0), TopicPartition("dp", 1)])
        assert got[TopicPartition("dp", 1)].active_producers == []
        (described,) = got[TopicPartition("dp", 0)].active_producers
        assert (
            described.producer_id,
            described.producer_epoch,
            described.last_sequence,
            described.last_timestamp,
            described.coordinator_epoch,
            described.current_transaction_start_offset,
        ) == (
            expected.producer_id,
            expected.producer_epoch,
            2,
            expected.last_timestamp,
            -1,
            -1,
        )
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_producers([TopicPartition("dp", 7)], broker_id=broker.broker.ctx.node_id)
    finally:
        admin.close()


def test_describe_producers_errors_over_the_wire(broker: Any) -> None:
    """Unknown and invalid topics get Kafka's codes and messages for every partition asked."""
    from compactlog.protocol.messages import DescribeProducersRequest
    from tests.broker.test_server_basics import Client

    create_topic(broker, "dq", 1)
    with Client(broker.port) as client:
        request = DescribeProducersRequest(
            topics=[
                {"name": "nope", "partition_indexes": [0, 1]},
                {"name": "bad name", "partition_indexes": [0]},
                {"name": "dq", "partition_indexes": [0, 5]},
            ]
        )
        response = client.call(61, 0, request)
    got = {
        (t.name, p.partition_index): (p.error_code, p.error_message, list(p.active_producers))
        for t in response.topics
        for p in t.partitions
    }
    unknown = (3, "This server does not host this topic-partition.", [])
    assert got[("nope", 0)] == got[("nope", 1)] == unknown
    assert got[("bad name", 0)][0] == 17  # INVALID_TOPIC_EXCEPTION
    assert "contains one or more characters other than" in got[("bad name", 0)][1]
    assert got[("dq", 0)] == (0, None, [])
    assert got[("dq", 5)] == (3, None, [])


# --- ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments ----------------------
@needs_confluent
def test_confluent_elect_leaders(broker: Any) -> None:
    """One node leads every partition already: ELECTION_NOT_NEEDED, preferred or unclean."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(broker, "el", 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        asked = [TopicPartition("el", 0), TopicPartition("el", 1), TopicPartition("el", 5)]
        got = admin.elect_leaders(election, asked).result(CLIENT_TIMEOUT_S)
        errors = {(tp.topic, tp.partition): e.name() for tp, e in got.items()}
        assert errors == {
            ("el", 0): "ELECTION_NOT_NEEDED",
            ("el", 1): "ELECTION_NOT_NEEDED",
            ("el", 5): "UNKNOWN_TOPIC_OR_PART",
        }
    # every partition: those that need no election are left out, as by Kafka
    got = admin.elect_leaders(ElectionType.PREFERRED, None)
    assert got.result(CLIENT_TIMEOUT_S) == {}


@needs_kafka_python
def test_kafka_python_reassignments_and_elections(broker: Any) -> None:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import (
        ElectionNotNeededError,
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    create_topic(broker, "ra", 2)
    node = broker.broker.ctx.node_id
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        got = admin.alter_partition_reassignments(
            {
                TopicPartition("ra", 0): [node],  # where it is: accepted, nothing moves
                TopicPartition("ra", 1): [node + 1],  # no such broker
                TopicPartition("ra", 7): [node],
                TopicPartition("nope", 0): [node],
            }
        )
        assert got == {
            TopicPartition("ra", 0): None,
            TopicPartition("ra", 1): InvalidReplicationAssignmentError,
            TopicPartition("ra", 7): UnknownTopicOrPartitionError,
            TopicPartition("nope", 0): UnknownTopicOrPartitionError,
        }
        got = admin.alter_partition_reassignments({TopicPartition("ra", 0): None})
        assert got == {TopicPartition("ra", 0): NoReassignmentInProgressError}
        assert not admin.list_partition_reassignments()
        assert partitions(broker, "ra") == 2

        response = admin.elect_leaders(0, {"ra": [0, 1]}, raise_errors=False)
        results = {
            (r.topic, p.partition_id): p.error_code
            for r in response.replica_election_results
            for p in r.partition_result
        }
        assert results == {
            ("ra", 0): ElectionNotNeededError.errno,
            ("ra", 1): ElectionNotNeededError.errno,
        }
    finally:
        admin.close()


def test_reassignment_and_election_messages_over_the_wire(broker: Any) -> None:
    """Kafka's controller's messages, and an unknown election type refused as a whole."""
    from compactlog.protocol.messages import (
        AlterPartitionReassignmentsRequest,
        ElectLeadersRequest,
    )
    from tests.broker.test_server_basics import Client

    create_topic(broker, "wm", 1)
    node = broker.broker.ctx.node_id
    with Client(broker.port) as client:
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=1000,
            allow_replication_factor_change=False,
            topics=[
                {
                    "name": "wm",
                    "partitions": [
                        {"partition_index": 0, "replicas": [node, node]},
                        {"partition_index": 0, "replicas": []},
                        {"partition_index": 0, "replicas": [node + 1]},
                        {"partition_index": 0, "replicas": None},
                        {"partition_index": 0, "replicas": [node]},
                    ],
                },
                {"name": "gone", "partitions": [{"partition_index": 0, "replicas": [node]}]},
            ],
        )
        response = client.call(45, 1, request)
        assert response.error_code == 0 and response.allow_replication_factor_change is False
        wm, gone = response.responses
        assert [(p.error_code, p.error_message) for p in wm.partitions] == [
            (39, f"The manual partition assignment includes the broker {node} more than once."),
            (39, "The manual partition assignment includes an empty replica list."),
            (
                39,
                f"The manual partition assignment includes broker {node + 1}, but no such "
                "broker is registered.",
            ),
            (85, "No partition reassignment is in progress."),
            (0, None),
        ]
        assert [(p.error_code, p.error_message) for p in gone.partitions] == [
            (3, "Unable to find a topic named gone.")
        ]

        def elect(version: int, election_type: int, topics: Any) -> Any:
            body = ElectLeadersRequest(
                election_type=election_type, topic_partitions=topics, timeout_ms=1000
            )
            return client.call(43, version, body)

        response = elect(
            2, 1, [{"topic": "wm", "partitions": [0, 3]}, {"topic": "x", "partitions": [0]}]
        )
        assert response.error_code == 0
        got = [
            (r.topic, p.partition_id, p.error_code, p.error_message)
            for r in response.replica_election_results
            for p in r.partition_result
        ]
        assert got == [
            ("wm", 0, 84, "Leader election not needed for topic partition."),
            ("wm", 3, 3, "No such partition as wm-3"),
            ("x", 0, 3, "No such topic as x"),
        ]
        response = elect(0, 0, None)  # v0: preferred, every partition
        assert [(r.topic, list(r.partition_result)) for r in response.replica_election_results] == [
            ("wm", [])
        ]
        response = elect(1, 5, [{"topic": "wm", "partitions": [0]}])
        assert response.error_code == 42  # INVALID_REQUEST
        ((result,),) = [r.partition_result for r in response.replica_election_results]
        assert (result.error_code, result.error_message) == (42, "Unknown election type 5")


def test_clearing_this_brokers_throttles_is_accepted_and_changes_nothing(broker: Any) -> None:
    """``kafka-reassign-partitions --verify`` deletes this broker's replication throttles
    (IncrementalAlterConfigs DELETE on broker "<node id>"): there are none, so it succeeds as on
    Kafka; any other broker config change is still refused."""
    from compactlog.protocol.messages import IncrementalAlterConfigsRequest
    from tests.broker.test_server_basics import Client

    node = str(broker.broker.ctx.node_id)
    throttles = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")

    def alter(name: str, op: int) -> tuple[int, Any]:
        request = IncrementalAlterConfigsRequest(
            resources=[
                {
                    "resource_type": 4,  # broker
                    "resource_name": name,
                    "configs": [
                        {"name": key, "config_operation": op, "value": None if op == 1 else "1"}
                        for key in throttles
                    ],
                }
            ],
            validate_only=False,
        )
        with Client(broker.port) as client:
            (result,) = client.call(44, 1, request).responses
        return result.error_code, result.error_message

    assert alter(node, 1) == (0, None)  # DELETE
    assert alter(node, 0)[0] == 42  # SET: INVALID_REQUEST, broker configs are static
    assert alter("", 1)[0] == 42  # the cluster-wide default is not this broker's
