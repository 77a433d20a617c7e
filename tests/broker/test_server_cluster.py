"""Metadata v5-v13, DescribeCluster, DescribeTopicPartitions, ListPartitionReassignments and
DescribeLogDirs over a real socket: what Kafka 4.4's admin tools ask besides the data APIs.

The expected answers are what a single-node Kafka 4.4 broker answered to the same requests
(measured with compactlog.protocol's codec against the broker of tests/kafka/harness.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog import errors as c
from compactlog.broker.server import BrokerThread
from compactlog.protocol.messages import (
    DescribeClusterRequest,
    DescribeLogDirsRequest,
    DescribeTopicPartitionsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
)
from compactlog.protocol.schema import ZERO_UUID
from tests.broker.test_server_basics import (
    METADATA,
    PRODUCE,
    Client,
    batch,
    connected,
    create_topic,
    produce_request,
    running_broker,
)

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]

DESCRIBE_LOG_DIRS, LIST_PARTITION_REASSIGNMENTS = 35, 46
DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS = 60, 75
#: What Kafka answers for authorized operations without an authorizer, when asked.
TOPIC_OPERATIONS, CLUSTER_OPERATIONS, NOT_ASKED = 3576, 8096, -(2**31)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[BrokerThread]:
    yield from running_broker(tmp_path)


@pytest.fixture
def client(server: BrokerThread) -> Iterator[Client]:
    yield from connected(server)


def _metadata(client: Client, version: int, topics: list[dict[str, Any]] | None, **kw: Any) -> Any:
    request = MetadataRequest(topics=topics, allow_auto_topic_creation=False, **kw)
    return client.call(METADATA, version, request)


# --- Metadata ------------------------------------------------------------------------------------
def test_metadata_v13_topic_ids_epochs_and_operations(server: BrokerThread, client: Client) -> None:
    create_topic(server, "a", 2)
    response = _metadata(client, 13, [{"name": "a"}, {"name": "nope"}, {"name": "bad name"}],
                         include_topic_authorized_operations=True)  # fmt: skip
    a, nope, bad = response.topics
    assert response.error_code == c.NONE and response.controller_id == 0
    assert a.error_code == c.NONE and a.topic_id != ZERO_UUID
    assert a.topic_authorized_operations == TOPIC_OPERATIONS
    assert [(p.partition_index, p.leader_epoch, p.offline_replicas) for p in a.partitions] == [
        (0, 0, []),
        (1, 0, []),
    ]
    assert (nope.error_code, nope.topic_id, nope.topic_authorized_operations) == (
        c.UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID, NOT_ASKED
    )  # fmt: skip
    assert bad.error_code == c.INVALID_TOPIC_EXCEPTION
    # The id is stable: the same in every version that has it, and it names the topic (v12+).
    assert _metadata(client, 10, [{"name": "a"}]).topics[0].topic_id == a.topic_id
    unknown = uuid.UUID(int=7)
    by_id = _metadata(client, 12, [{"name": None, "topic_id": a.topic_id},
                                   {"name": None, "topic_id": unknown}]).topics  # fmt: skip
    assert [(t.error_code, t.name, t.topic_id) for t in by_id] == [
        (c.NONE, "a", a.topic_id),
        (c.UNKNOWN_TOPIC_ID, None, unknown),
    ]
    # v8-v10 also answer the cluster's operations when asked.
    v10 = _metadata(client, 10, [], include_cluster_authorized_operations=True)
    assert v10.cluster_authorized_operations == CLUSTER_OPERATIONS
    assert _metadata(client, 9, []).cluster_authorized_operations == NOT_ASKED


# --- DescribeCluster and ListPartitionReassignments ---------------------------------------------
def test_describe_cluster(server: BrokerThread, client: Client) -> None:
    for version in (0, 1, 2):
        request = DescribeClusterRequest(
            include_cluster_authorized_operations=True, include_fenced_brokers=True
        )
        response = client.call(DESCRIBE_CLUSTER, version, request)
        assert (response.error_code, response.controller_id) == (c.NONE, 0)
        assert response.cluster_id == _metadata(client, 4, []).cluster_id
        assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in response.brokers] == [
            (0, "127.0.0.1", server.port, None, False)
        ]
        assert response.cluster_authorized_operations == CLUSTER_OPERATIONS
    controllers = client.call(DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=2))
    assert (controllers.error_code, controllers.error_message, controllers.brokers) == (
        114,
        "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
        "CONTROLLER",
        [],
    )
    other = client.call(DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=3))
    assert (other.error_code, other.error_message) == (115, "Unsupported endpoint type 3")


def test_no_partition_is_ever_reassigned(server: BrokerThread, client: Client) -> None:
    create_topic(server, "a")
    for topics in (None, [{"name": "a", "partition_indexes": [0, 5]}]):
        request = ListPartitionReassignmentsRequest(topics=topics)
        response = client.call(LIST_PARTITION_REASSIGNMENTS, 0, request)
        assert (response.error_code, response.error_message, response.topics) == (
            c.NONE, None, []
        )  # fmt: skip


# --- DescribeTopicPartitions ---------------------------------------------------------------------
def _pages(
    client: Client, names: list[str], limit: int, cursor: dict[str, Any] | None = None
) -> tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None]:
    request = DescribeTopicPartitionsRequest(
        topics=[{"name": n} for n in names], response_partition_limit=limit, cursor=cursor
    )
    response = client.call(DESCRIBE_TOPIC_PARTITIONS, 0, request)
    topics = [(t.name, t.error_code, [p.partition_index for p in t.partitions])
              for t in response.topics]  # fmt: skip
    next_cursor = response.next_cursor
    return topics, None if next_cursor is None else (
        next_cursor.topic_name, next_cursor.partition_index
    )  # fmt: skip


def test_describe_topic_partitions_pages_in_name_order(
    server: BrokerThread, client: Client
) -> None:
    create_topic(server, "t1", 2)
    create_topic(server, "c", 1)
    request = DescribeTopicPartitionsRequest(topics=[{"name": "t1"}], cursor=None)
    (t1,) = client.call(DESCRIBE_TOPIC_PARTITIONS, 0, request).topics
    assert t1.topic_id == _metadata(client, 10, [{"name": "t1"}]).topics[0].topic_id
    assert t1.topic_authorized_operations == TOPIC_OPERATIONS
    partition = t1.partitions[0]
    assert (partition.leader_id, partition.leader_epoch, partition.replica_nodes,
            partition.isr_nodes, partition.eligible_leader_replicas, partition.last_known_elr,
            partition.offline_replicas) == (0, 0, [0], [0], [], [], [])  # fmt: skip
    # Kafka 4.4's answers to the same requests:
    assert _pages(client, ["t1", "c"], 2) == ([("c", 0, [0]), ("t1", 0, [0])], ("t1", 1))
    assert _pages(client, ["t1", "c"], 3) == ([("c", 0, [0]), ("t1", 0, [0, 1])], None)
    assert _pages(client, ["nosuch", "c"], 1) == ([("c", 0, [0])], ("nosuch", 0))
    assert _pages(client, ["nosuch"], 10) == ([("nosuch", c.UNKNOWN_TOPIC_OR_PARTITION, [])], None)
    assert _pages(client, ["bad name"], 10) == (
        [("bad name", c.INVALID_TOPIC_EXCEPTION, [])], None
    )  # fmt: skip
    assert _pages(client, ["t1"], 0) == ([("t1", 0, [0])], ("t1", 1))  # at least one
    cursor = {"topic_name": "t1", "partition_index": 1}
    assert _pages(client, ["t1", "c", "nosuch"], 1, cursor) == ([("t1", 0, [1])], None)
    beyond = {"topic_name": "c", "partition_index": 5}
    assert _pages(client, ["t1", "c"], 5, beyond) == ([("c", 0, []), ("t1", 0, [0, 1])], None)
    for bad in ({"topic_name": "zz", "partition_index": 0},
                {"topic_name": "t1", "partition_index": -1}):  # fmt: skip
        assert _pages(client, ["t1", "c"], 5, bad) == (
            [("c", c.INVALID_REQUEST, []), ("t1", c.INVALID_REQUEST, [])], None
        )  # fmt: skip
    assert _pages(client, [], 10)[0] == [("c", 0, [0]), ("t1", 0, [0, 1])]  # every topic


# --- DescribeLogDirs -----------------------------------------------------------------------------
def test_describe_log_dirs(server: BrokerThread, client: Client) -> None:
    create_topic(server, "d", 2)
    client.call(PRODUCE, 7, produce_request({("d", 0): batch([(b"k", b"v")] * 3)}))
    store = server.broker.store
    assert store is not None
    size = server.call(lambda: store.log("d", 0).size())
    assert size > 0
    asked = [{"topic": "d", "partitions": [0, 1, 7]}, {"topic": "nosuch", "partitions": [0]}]
    for version in (1, 3, 4, 5):
        response = client.call(DESCRIBE_LOG_DIRS, version, DescribeLogDirsRequest(topics=asked))
        (result,) = response.results
        assert (response.error_code, result.error_code, result.log_dir) == (
            c.NONE, c.NONE, store.path
        )  # fmt: skip
        assert [(t.name, [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                          for p in t.partitions]) for t in result.topics] == [
            ("d", [(0, size, 0, False), (1, 0, 0, False)])
        ]  # fmt: skip
        if version >= 4:
            disk = os.statvfs(store.path)
            assert result.total_bytes == disk.f_blocks * disk.f_frsize
            assert 0 < result.usable_bytes <= result.total_bytes
        else:
            assert (result.total_bytes, result.usable_bytes) == (-1, -1)
    everything = client.call(DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=None))
    assert [t.name for t in everything.results[0].topics] == ["d"]
    nothing = client.call(DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=[]))
    assert nothing.results[0].topics == []
